// Portable verify kernel, fp16, 3-stage KV pipeline.
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA(__half, 3)
}  // namespace treeverify::cuda::mma
