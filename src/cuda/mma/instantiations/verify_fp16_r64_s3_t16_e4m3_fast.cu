// Portable verify kernel, e4m3 KV cache, fast mode, fp16, 64 rows, 3 x 16-token pipeline
// (sm_89/120 and forced). Main loop: overlap_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA_E4M3_FAST(__half, VariantWide3T16)
}  // namespace treeverify::cuda::mma
