// A verify kernel's launch, plain or cooperative.
#pragma once

#include <cuda_runtime.h>

namespace treeverify::cuda {

// Launches kernel(args...) on `stream`. cooperative: the CTAs of a row block wait for each other
// inside the kernel (cuda/mma/merge_in_kernel.cuh), so the whole grid must be resident at once;
// a cooperative launch guarantees that, or fails (cudaErrorCooperativeLaunchTooLarge) where it
// cannot, e.g. under an MPS limit of SMs that plan() did not see.
template <typename... Params, typename... Args>
cudaError_t launch_kernel(void (*kernel)(Params...), dim3 grid, int threads, int smem_bytes,
                          cudaStream_t stream, bool cooperative, const Args&... args) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(static_cast<unsigned>(threads));
  config.dynamicSmemBytes = static_cast<size_t>(smem_bytes);
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  config.attrs = &attr;
  config.numAttrs = cooperative ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, args...);
}

}  // namespace treeverify::cuda
