// Portable verify kernel, fp16, 32 rows, 2-stage pipeline (sm_86/89/120 and forced).
// Main loop: in_order_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA(__half, VariantLarge2)
}  // namespace treeverify::cuda::mma
