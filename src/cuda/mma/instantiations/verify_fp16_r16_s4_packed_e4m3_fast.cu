// Portable verify kernel, e4m3 KV cache in fast mode (e4m3 products), fp16, 16 rows, 4 stages
// of packed 592-byte rows (e4m3 decode). Main loop: overlap_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA_E4M3_FAST(__half, VariantSmallPacked)
}  // namespace treeverify::cuda::mma
