// Portable verify kernel, fp16, 64 rows, 4-stage pipeline (sm_90/100).
// Main loop: halves_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA(__half, VariantWide4)
}  // namespace treeverify::cuda::mma
