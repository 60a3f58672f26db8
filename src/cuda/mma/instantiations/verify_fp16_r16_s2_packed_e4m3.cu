// Portable verify kernel, e4m3 KV cache, fp16, 16 rows, 2 stages of packed 592-byte rows and Q
// resident in shared memory, three CTAs an SM (e4m3 decode). Main loop: in_order_loop.
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA_E4M3(__half, VariantSmallPacked)
}  // namespace treeverify::cuda::mma
