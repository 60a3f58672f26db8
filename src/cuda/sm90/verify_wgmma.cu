// The wgmma verify kernel's launches (launcher.h), for bf16 and fp16 queries on a 16-bit cache or
// an e4m3 one (exact mode).
#include "cuda/common/smem_limit.cuh"
#include "cuda/sm90/launcher.h"
#include "cuda/sm90/verify_wgmma.cuh"

namespace treeverify::cuda::sm90 {
namespace {

template <typename T, bool kE4M3>
cudaError_t raise_smem_limit() {
  return cuda::raise_smem_limit<verify_wgmma_kernel<T, kE4M3>, Tile::kSmemBytes>();
}

}  // namespace

template <typename T, bool kE4M3>
cudaError_t launch_verify_wgmma(const mma::VerifyKernelParams& params, dim3 grid,
                                cudaStream_t stream) {
  if (cudaError_t err = raise_smem_limit<T, kE4M3>(); err != cudaSuccess) return err;
  verify_wgmma_kernel<T, kE4M3><<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(params);
  return cudaGetLastError();
}

template <typename T, bool kE4M3>
int verify_wgmma_ctas_per_sm() {
  int blocks = 0;
  if (raise_smem_limit<T, kE4M3>() != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, verify_wgmma_kernel<T, kE4M3>,
                                                    Tile::kThreads,
                                                    Tile::kSmemBytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return blocks;
}

#define TV_INSTANTIATE_WGMMA(T, kE4M3)                                                     \
  template cudaError_t launch_verify_wgmma<T, kE4M3>(const mma::VerifyKernelParams&, dim3, \
                                                     cudaStream_t);                        \
  template int verify_wgmma_ctas_per_sm<T, kE4M3>();
TV_INSTANTIATE_WGMMA(__nv_bfloat16, false)
TV_INSTANTIATE_WGMMA(__half, false)
TV_INSTANTIATE_WGMMA(__nv_bfloat16, true)
TV_INSTANTIATE_WGMMA(__half, true)
#undef TV_INSTANTIATE_WGMMA

}  // namespace treeverify::cuda::sm90
