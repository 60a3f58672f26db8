// Definitions behind launcher.h, included only by the instantiation files.
#pragma once

#include <mutex>

#include "cuda/mma/kernel.cuh"
#include "cuda/mma/launcher.h"

namespace treeverify::cuda::mma {

template <typename T, typename V>
cudaError_t raise_smem_limit() {
  constexpr int kMaxDevices = 64;
  static std::once_flag raised[kMaxDevices];
  static cudaError_t result[kMaxDevices];
  int device = 0;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  if (device >= kMaxDevices) return cudaErrorInvalidDevice;
  std::call_once(raised[device], [&] {
    result[device] = cudaFuncSetAttribute(
        verify_mma_kernel<T, V>, cudaFuncAttributeMaxDynamicSharedMemorySize, V::kSmemBytes);
  });
  return result[device];
}

template <typename T, typename V>
cudaError_t launch_verify(const VerifyKernelParams& params, dim3 grid, cudaStream_t stream) {
  if (cudaError_t err = raise_smem_limit<T, V>(); err != cudaSuccess) return err;
  verify_mma_kernel<T, V><<<grid, kThreads, V::kSmemBytes, stream>>>(params);
  return cudaGetLastError();
}

template <typename T, typename V>
cudaError_t verify_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, verify_mma_kernel<T, V>);
}

template <typename T, typename V>
int verify_ctas_per_sm() {
  int blocks = 0;
  if (raise_smem_limit<T, V>() != cudaSuccess ||
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, verify_mma_kernel<T, V>, kThreads,
                                                    V::kSmemBytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return blocks;
}

#define TV_INSTANTIATE_VERIFY_MMA(T, V)                                                    \
  template cudaError_t launch_verify<T, V>(const VerifyKernelParams&, dim3, cudaStream_t); \
  template cudaError_t verify_attributes<T, V>(cudaFuncAttributes*);                       \
  template int verify_ctas_per_sm<T, V>();

}  // namespace treeverify::cuda::mma
