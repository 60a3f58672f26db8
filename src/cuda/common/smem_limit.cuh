// A kernel's dynamic shared memory limit, raised once per device.
#pragma once

#include <cuda_runtime.h>

#include <mutex>

namespace treeverify::cuda {

// Lets kKernel take kBytes of dynamic shared memory on the current device (above 48 KB that
// needs cudaFuncSetAttribute, which is per device and a driver call): the first call on each
// device sets it, later calls return that first result.
template <auto kKernel, int kBytes>
cudaError_t raise_smem_limit() {
  constexpr int kMaxDevices = 64;
  static std::once_flag raised[kMaxDevices];
  static cudaError_t result[kMaxDevices];
  int device = 0;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess) return err;
  if (device >= kMaxDevices) return cudaErrorInvalidDevice;
  std::call_once(raised[device], [&] {
    result[device] =
        cudaFuncSetAttribute(kKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes);
  });
  return result[device];
}

}  // namespace treeverify::cuda
