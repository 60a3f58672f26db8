// The wgmma verify kernel's launches (launcher.h): its four instances (bf16 or fp16 queries, a
// 16-bit cache or an e4m3 one in exact mode), chosen here once for every caller.
#include <type_traits>

#include "cuda/common/smem_limit.cuh"
#include "cuda/sm90/launcher.h"
#include "cuda/sm90/verify_wgmma.cuh"

namespace treeverify::cuda::sm90 {
namespace {

// The instance as a compile-time value (raise_smem_limit keeps its state per kernel).
template <typename T, bool kE4M3>
using Kernel = std::integral_constant<decltype(&verify_wgmma_kernel<T, kE4M3>),
                                      &verify_wgmma_kernel<T, kE4M3>>;

// f(Kernel) for the instance of `dtype` and `e4m3`.
template <typename F>
auto with_kernel(DType dtype, bool e4m3, F f) {
  if (dtype == DType::kBF16)
    return e4m3 ? f(Kernel<__nv_bfloat16, true>{}) : f(Kernel<__nv_bfloat16, false>{});
  return e4m3 ? f(Kernel<__half, true>{}) : f(Kernel<__half, false>{});
}

template <typename K>
cudaError_t raise_smem_limit(K) {
  return cuda::raise_smem_limit<K::value, Tile::kSmemBytes>();
}

}  // namespace

cudaError_t launch_verify_wgmma(const mma::VerifyKernelParams& params, dim3 grid,
                                cudaStream_t stream, DType dtype, bool e4m3) {
  return with_kernel(dtype, e4m3, [&](auto kernel) {
    if (cudaError_t err = raise_smem_limit(kernel); err != cudaSuccess) return err;
    kernel.value<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(params);
    return cudaGetLastError();
  });
}

int verify_wgmma_ctas_per_sm(DType dtype, bool e4m3) {
  return with_kernel(dtype, e4m3, [&](auto kernel) {
    int blocks = 0;
    if (raise_smem_limit(kernel) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel.value, Tile::kThreads,
                                                      Tile::kSmemBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return blocks;
  });
}

}  // namespace treeverify::cuda::sm90
