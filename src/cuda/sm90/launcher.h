// Host entry points of the sm_90a wgmma verify kernel (verify_wgmma.cuh), for bf16 and fp16
// queries (dtype) on a 16-bit cache or an e4m3 one in exact or fast mode (mode); verify_wgmma.cu
// picks the instance. Launch code never sees the kernel.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include "build_config.h"
#include "cuda/common/params.h"
#include "cuda/sm90/kv_tensor_map.h"
#include "cuda/sm90/tile.h"
#include "treeverify/types.h"

namespace treeverify::cuda::sm90 {

// Whether this build holds the kernel's code: its architectures include sm_90a
// (TREEVERIFY_CUDA_ARCHS "90a"; plain "90" code has no wgmma).
inline constexpr bool kWgmmaBuilt = TREEVERIFY_CUDA_SM90A != 0;

// Raises the dynamic shared-memory limit once per device, then launches the kernel (grid: x row
// blocks of WgmmaTile::kRows, y chunks, z requests, as the portable kernel's). kv_maps: the
// cache's tensor maps for `mode` (kv_tensor_map.h) for TMA copies of whole tiles, or null
// (cp.async only).
cudaError_t launch_verify_wgmma(const VerifyKernelParams& params, dim3 grid,
                                cudaStream_t stream, DType dtype, KvMode mode,
                                const KvTensorMaps* kv_maps);

// How many CTAs of the kernel one SM runs at once on the current device (0 on error).
int verify_wgmma_ctas_per_sm(DType dtype, KvMode mode);

}  // namespace treeverify::cuda::sm90
