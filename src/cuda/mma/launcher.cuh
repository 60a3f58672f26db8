// Definitions behind launcher.h, included only by the instantiation files.
#pragma once

#include <mutex>

#include "cuda/mma/config.h"
#include "cuda/mma/kernel.cuh"
#include "cuda/mma/launcher.h"

namespace treeverify::cuda::mma {

template <typename T, int kStages>
cudaError_t launch_verify(const VerifyKernelParams& params, dim3 grid, cudaStream_t stream) {
  constexpr int kSmem = smem_bytes(kStages);
  constexpr int kMaxDevices = 64;
  static std::once_flag raised[kMaxDevices];
  static cudaError_t raise_error[kMaxDevices];
  int device = 0;
  cudaError_t err = cudaGetDevice(&device);
  if (err != cudaSuccess) return err;
  if (device >= kMaxDevices) return cudaErrorInvalidDevice;
  std::call_once(raised[device], [&] {
    raise_error[device] = cudaFuncSetAttribute(
        verify_mma_kernel<T, kStages>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  });
  if (raise_error[device] != cudaSuccess) return raise_error[device];
  verify_mma_kernel<T, kStages><<<grid, kThreads, kSmem, stream>>>(params);
  return cudaGetLastError();
}

template <typename T, int kStages>
cudaError_t verify_attributes(cudaFuncAttributes* attr) {
  return cudaFuncGetAttributes(attr, verify_mma_kernel<T, kStages>);
}

#define TV_INSTANTIATE_VERIFY_MMA(T, S)                                                      \
  template cudaError_t launch_verify<T, S>(const VerifyKernelParams&, dim3, cudaStream_t); \
  template cudaError_t verify_attributes<T, S>(cudaFuncAttributes*);

}  // namespace treeverify::cuda::mma
