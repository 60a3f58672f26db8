// Portable verify kernel, bf16, 16 rows, 2-stage pipeline (decode).
// Main loop: in_order_loop (kernel.cuh).
#include "cuda/mma/launcher.cuh"

namespace treeverify::cuda::mma {
TV_INSTANTIATE_VERIFY_MMA(__nv_bfloat16, VariantSmall)
}  // namespace treeverify::cuda::mma
