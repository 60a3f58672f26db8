// Host entry points of the portable kernel, explicit instantiations per (dtype, variant)
// generated from instance.cu.in by src/CMakeLists.txt, each for a 16-bit cache, an e4m3 one,
// and (the 99 KB tables' variants) an e4m3 one in fast mode (KvMode, params.h). Launch code
// never sees the kernel template itself.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/params.h"
#include "cuda/sm80/config.h"

namespace treeverify::cuda::sm80 {

// Raises the dynamic shared-memory limit once per device, then launches the kernel.
template <typename T, typename V, KvMode kMode = KvMode::k16>
cudaError_t launch_verify(const VerifyKernelParams& params, dim3 grid, cudaStream_t stream);

// The kernel's attributes on the current device (binaryVersion tells which compiled
// architecture runs there; an error means none can).
template <typename T, typename V, KvMode kMode = KvMode::k16>
cudaError_t verify_attributes(cudaFuncAttributes* attr);

// How many CTAs of the kernel one SM runs at once on the current device (0 on error).
template <typename T, typename V, KvMode kMode = KvMode::k16>
int verify_ctas_per_sm();

}  // namespace treeverify::cuda::sm80
