// Portable verify kernel, fp16, 16 rows, 2-stage pipeline (decode).
// Main loop: in_order_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA(__half, VariantSmall)
}  // namespace treeverify::cuda::mma
