// Portable verify kernel, e4m3 KV cache, fp16, 16 rows, 2 stages, bulk copies (sm_90/100 decode).
// Main loop: in_order_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA_E4M3(__half, VariantSmallBulk)
}  // namespace treeverify::cuda::mma
