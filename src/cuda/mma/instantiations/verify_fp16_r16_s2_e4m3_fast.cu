// Portable verify kernel, e4m3 KV cache, fast mode, fp16, 16 rows, 2-stage pipeline (decode)
// (sm_89/120 and forced). Main loop: in_order_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA_E4M3_FAST(__half, VariantSmall)
}  // namespace treeverify::cuda::mma
