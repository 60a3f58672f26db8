// Definitions behind launcher.h, included only by the instantiation files.
#pragma once

#include <mutex>

#include "cuda/mma/kernel.cuh"
#include "cuda/mma/launcher.h"

namespace treeverify::cuda::mma {

template <typename T, typename V, bool kE4M3>
cudaError_t raise_smem_limit() {
  constexpr int kMaxDevices = 64;
  static std::once_flag raised[kMaxDevices];
  static cudaError_t result[kMaxDevices];
  int device = 0;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  if (device >= kMaxDevices) return cudaErrorInvalidDevice;
  std::call_once(raised[device], [&] {
    result[device] = cudaFuncSetAttribute(
        verify_mma_kernel<T, V, kE4M3>, cudaFuncAttributeMaxDynamicSharedMemorySize, V::kSmemBytes);
  });
  return result[device];
}

template <typename T, typename V, bool kE4M3>
cudaError_t launch_verify(const VerifyKernelParams& params, dim3 grid, cudaStream_t stream) {
  if (cudaError_t err = raise_smem_limit<T, V, kE4M3>(); err != cudaSuccess) return err;
  verify_mma_kernel<T, V, kE4M3><<<grid, kThreads, V::kSmemBytes, stream>>>(params);
  return cudaGetLastError();
}

template <typename T, typename V, bool kE4M3>
cudaError_t verify_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, verify_mma_kernel<T, V, kE4M3>);
}

template <typename T, typename V, bool kE4M3>
int verify_ctas_per_sm() {
  int blocks = 0;
  if (raise_smem_limit<T, V, kE4M3>() != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, verify_mma_kernel<T, V, kE4M3>,
                                                    kThreads, V::kSmemBytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return blocks;
}

// One (dtype, variant) for a 16-bit cache, or (_E4M3) for an e4m3 cache. Each goes in a file
// of its own: compiled in one translation unit, the 16-bit kernel of the 64-row variants was
// allocated differently and spilled (sm_90, 2026-11-30).
#define TV_INSTANTIATE_VERIFY_MMA_KV(T, V, E4M3)                                                 \
  template cudaError_t launch_verify<T, V, E4M3>(const VerifyKernelParams&, dim3, cudaStream_t); \
  template cudaError_t verify_attributes<T, V, E4M3>(cudaFuncAttributes*);                       \
  template int verify_ctas_per_sm<T, V, E4M3>();
#define TV_INSTANTIATE_VERIFY_MMA(T, V) TV_INSTANTIATE_VERIFY_MMA_KV(T, V, false)
#define TV_INSTANTIATE_VERIFY_MMA_E4M3(T, V) TV_INSTANTIATE_VERIFY_MMA_KV(T, V, true)

}  // namespace treeverify::cuda::mma
