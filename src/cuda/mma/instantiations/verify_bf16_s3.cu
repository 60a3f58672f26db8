// Portable verify kernel, bf16, 3-stage KV pipeline.
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA(__nv_bfloat16, 3)
}  // namespace treeverify::cuda::mma
