// The wgmma verify kernel's launches (launcher.h): its twelve instances (bf16 or fp16 queries; a
// 16-bit cache, or an e4m3 one in exact or fast mode; tiles copied by cp.async or by TMA), chosen
// here once for every caller.
#include <type_traits>

#include "cuda/common/smem_limit.cuh"
#include "cuda/sm90/launcher.h"
#include "cuda/sm90/verify_wgmma.cuh"

namespace treeverify::cuda::sm90 {
namespace {

// The instance as a compile-time value (raise_smem_limit keeps its state per kernel), with the
// maps it takes (kv_tensor_map.h, KernelMaps).
template <typename T, bool kE4M3, bool kFast, bool kTma>
struct Kernel {
  static constexpr auto value = &verify_wgmma_kernel<T, kE4M3, kFast, kTma>;
  static KernelMaps<kFast, kTma> maps(const KvTensorMaps& m) {
    if constexpr (kFast && kTma)
      return m;
    else
      return m.main;
  }
};

// f(Kernel) for the instance of `dtype`, `mode` and `tma`.
template <typename T, typename F>
auto with_kernel_of(KvMode mode, bool tma, F f) {
  if (mode == KvMode::kE4M3Fast)
    return tma ? f(Kernel<T, true, true, true>{}) : f(Kernel<T, true, true, false>{});
  if (mode == KvMode::kE4M3)
    return tma ? f(Kernel<T, true, false, true>{}) : f(Kernel<T, true, false, false>{});
  return tma ? f(Kernel<T, false, false, true>{}) : f(Kernel<T, false, false, false>{});
}
template <typename F>
auto with_kernel(DType dtype, KvMode mode, bool tma, F f) {
  return dtype == DType::kBF16 ? with_kernel_of<__nv_bfloat16>(mode, tma, f)
                               : with_kernel_of<__half>(mode, tma, f);
}

template <typename K>
cudaError_t raise_smem_limit(K) {
  return cuda::raise_smem_limit<K::value, Tile::kSmemBytes>();
}

}  // namespace

cudaError_t launch_verify_wgmma(const VerifyKernelParams& params, dim3 grid,
                                cudaStream_t stream, DType dtype, KvMode mode,
                                const KvTensorMaps* kv_maps) {
  const bool tma = kv_maps != nullptr;
  const KvTensorMaps maps = tma ? *kv_maps : KvTensorMaps{};
  return with_kernel(dtype, mode, tma, [&](auto kernel) {
    if (cudaError_t err = raise_smem_limit(kernel); err != cudaSuccess) return err;
    kernel.value<<<grid, Tile::kThreads, Tile::kSmemBytes, stream>>>(params, kernel.maps(maps));
    return cudaGetLastError();
  });
}

int verify_wgmma_ctas_per_sm(DType dtype, KvMode mode) {
  // The TMA instances have the same shared memory and block size.
  return with_kernel(dtype, mode, /*tma=*/false, [&](auto kernel) {
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
