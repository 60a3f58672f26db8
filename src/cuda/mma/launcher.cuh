// Definitions behind launcher.h, included only by the instantiation files.
#pragma once

#include "cuda/common/smem_limit.cuh"
#include "cuda/mma/kernel.cuh"
#include "cuda/mma/launcher.h"

namespace treeverify::cuda::mma {

template <typename T, typename V, KvMode kMode>
cudaError_t raise_smem_limit() {
  return cuda::raise_smem_limit<verify_mma_kernel<T, V, kMode>, V::kSmemBytes>();
}

template <typename T, typename V, KvMode kMode>
cudaError_t launch_verify(const VerifyKernelParams& params, dim3 grid, cudaStream_t stream) {
  if (cudaError_t err = raise_smem_limit<T, V, kMode>(); err != cudaSuccess) return err;
  verify_mma_kernel<T, V, kMode><<<grid, kThreads, V::kSmemBytes, stream>>>(params);
  return cudaGetLastError();
}

template <typename T, typename V, KvMode kMode>
cudaError_t verify_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, verify_mma_kernel<T, V, kMode>);
}

template <typename T, typename V, KvMode kMode>
int verify_ctas_per_sm() {
  int blocks = 0;
  if (raise_smem_limit<T, V, kMode>() != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, verify_mma_kernel<T, V, kMode>,
                                                    kThreads, V::kSmemBytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return blocks;
}

// One (dtype, variant) for a 16-bit cache, an e4m3 one (_E4M3) or an e4m3 one in fast mode
// (_E4M3_FAST). Each goes in a file of its own: compiled in one translation unit, the 16-bit
// kernel of the 64-row variants was allocated differently and spilled (sm_90, 2026-11-30).
#define TV_INSTANTIATE_VERIFY_MMA_KV(T, V, MODE)                                                 \
  template cudaError_t launch_verify<T, V, MODE>(const VerifyKernelParams&, dim3, cudaStream_t); \
  template cudaError_t verify_attributes<T, V, MODE>(cudaFuncAttributes*);                       \
  template int verify_ctas_per_sm<T, V, MODE>();
#define TV_INSTANTIATE_VERIFY_MMA(T, V) TV_INSTANTIATE_VERIFY_MMA_KV(T, V, KvMode::k16)
#define TV_INSTANTIATE_VERIFY_MMA_E4M3(T, V) TV_INSTANTIATE_VERIFY_MMA_KV(T, V, KvMode::kE4M3)
#define TV_INSTANTIATE_VERIFY_MMA_E4M3_FAST(T, V) \
  TV_INSTANTIATE_VERIFY_MMA_KV(T, V, KvMode::kE4M3Fast)

}  // namespace treeverify::cuda::mma
