// Portable verify kernel, bf16, 64 rows, 4-stage pipeline (sm_90/100).
// Main loop: halves_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA(__nv_bfloat16, VariantWide4)
}  // namespace treeverify::cuda::mma
