// Portable verify kernel, e4m3 KV cache, bf16, 32 rows, 3-stage pipeline (sm_80/90/100).
// Main loop: overlap_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA_E4M3(__nv_bfloat16, VariantLarge3)
}  // namespace treeverify::cuda::mma
