// Portable verify kernel, e4m3 KV cache, fp16, 64 rows, 4-stage pipeline (sm_90/100).
// Main loop: halves_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA_E4M3(__half, VariantWide4)
}  // namespace treeverify::cuda::mma
