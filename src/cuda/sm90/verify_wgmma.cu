// The wgmma verify kernel's launches (launcher.h), for bf16 and fp16.
#include "cuda/common/smem_limit.cuh"
#include "cuda/sm90/launcher.h"
#include "cuda/sm90/verify_wgmma.cuh"

namespace treeverify::cuda::sm90 {
namespace {

template <typename T>
cudaError_t raise_smem_limit() {
  return cuda::raise_smem_limit<verify_wgmma_kernel<T>, Tile::kSmemBytes>();
}

}  // namespace

template <typename T>
cudaError_t launch_verify_wgmma(const mma::VerifyKernelParams& params, dim3 grid,
                                cudaStream_t stream) {
  if (cudaError_t err = raise_smem_limit<T>(); err != cudaSuccess) return err;
  verify_wgmma_kernel<T><<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(params);
  return cudaGetLastError();
}

template <typename T>
int verify_wgmma_ctas_per_sm() {
  int blocks = 0;
  if (raise_smem_limit<T>() != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, verify_wgmma_kernel<T>, Tile::kThreads,
                                                    Tile::kSmemBytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return blocks;
}

template cudaError_t launch_verify_wgmma<__nv_bfloat16>(const mma::VerifyKernelParams&, dim3,
                                                        cudaStream_t);
template cudaError_t launch_verify_wgmma<__half>(const mma::VerifyKernelParams&, dim3,
                                                 cudaStream_t);
template int verify_wgmma_ctas_per_sm<__nv_bfloat16>();
template int verify_wgmma_ctas_per_sm<__half>();

}  // namespace treeverify::cuda::sm90
