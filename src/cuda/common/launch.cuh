// Launching a verify kernel, cooperatively where its CTAs wait for each other.
#pragma once

#include <cuda_runtime.h>

namespace treeverify::cuda {

// Launches kernel(params) with `threads` a block and `smem` bytes of dynamic shared memory.
// cooperative: every CTA of the grid is on the device at once (cudaLaunchAttributeCooperative;
// the launch fails with cudaErrorCooperativeLaunchTooLarge where the grid cannot be), which the
// combine fused into the verify kernels needs (cuda/mma/row_block_merge.cuh).
template <class Params>
cudaError_t launch_kernel(void (*kernel)(Params), dim3 grid, int threads, int smem,
                          cudaStream_t stream, bool cooperative, const Params& params) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(threads);
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  config.attrs = &attr;
  config.numAttrs = cooperative ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel, params);
}

}  // namespace treeverify::cuda
