// The wgmma decode kernel's launches (launcher.h): its four instances (bf16 or fp16 queries on
// an e4m3 cache in exact mode; tiles copied by cp.async or by TMA), chosen here once for every
// caller.
#include <type_traits>

#include "cuda/common/smem_limit.cuh"
#include "cuda/sm90/decode_wgmma.cuh"
#include "cuda/sm90/launcher.h"

namespace treeverify::cuda::sm90 {
namespace {

// The instance as a compile-time value (raise_smem_limit keeps its state per kernel).
template <typename T, bool kTma>
using Kernel = std::integral_constant<decltype(&decode_wgmma_kernel<T, kTma>),
                                      &decode_wgmma_kernel<T, kTma>>;

// f(Kernel) for the instance of `dtype` and `tma`.
template <typename T, typename F>
auto with_kernel_of(bool tma, F f) {
  return tma ? f(Kernel<T, true>{}) : f(Kernel<T, false>{});
}
template <typename F>
auto with_kernel(DType dtype, bool tma, F f) {
  return dtype == DType::kBF16 ? with_kernel_of<__nv_bfloat16>(tma, f)
                               : with_kernel_of<__half>(tma, f);
}

template <typename K>
cudaError_t raise_smem_limit(K) {
  return cuda::raise_smem_limit<K::value, DecodeTile::kSmemBytes>();
}

}  // namespace

cudaError_t launch_decode_wgmma(const mma::VerifyKernelParams& params, dim3 grid,
                                cudaStream_t stream, DType dtype, const CUtensorMap* kv_map) {
  const bool tma = kv_map != nullptr;
  const CUtensorMap map = tma ? *kv_map : CUtensorMap{};
  return with_kernel(dtype, tma, [&](auto kernel) {
    if (cudaError_t err = raise_smem_limit(kernel); err != cudaSuccess) return err;
    kernel.value<<<grid, DecodeTile::kThreads, DecodeTile::kSmemBytes, stream>>>(params, map);
    return cudaGetLastError();
  });
}

int decode_wgmma_ctas_per_sm(DType dtype) {
  // The TMA instances have the same shared memory and block size.
  return with_kernel(dtype, /*tma=*/false, [&](auto kernel) {
    int blocks = 0;
    if (raise_smem_limit(kernel) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel.value, DecodeTile::kThreads,
                                                      DecodeTile::kSmemBytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    return blocks;
  });
}

}  // namespace treeverify::cuda::sm90
