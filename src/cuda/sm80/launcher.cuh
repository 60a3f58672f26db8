// Definitions behind launcher.h, included only by the instantiation files.
#pragma once

#include "cuda/common/smem_limit.cuh"
#include "cuda/sm80/kernel.cuh"
#include "cuda/sm80/launcher.h"

namespace treeverify::cuda::sm80 {

template <typename T, typename V, KvMode kMode>
cudaError_t raise_smem_limit() {
  return cuda::raise_smem_limit<verify_mma_kernel<T, V, kMode>, V::kSmemBytes>();
}

// grid.x counts row blocks; a variant of V::kClusterCtas CTAs a row block (the pair variant)
// launches that many a block, as one cluster.
template <typename T, typename V, KvMode kMode>
cudaError_t launch_verify(const VerifyKernelParams& params, dim3 grid, cudaStream_t stream) {
  if (cudaError_t err = raise_smem_limit<T, V, kMode>(); err != cudaSuccess) return err;
  if constexpr (V::kClusterCtas == 1) {
    verify_mma_kernel<T, V, kMode><<<grid, V::kThreads, V::kSmemBytes, stream>>>(params);
    return cudaGetLastError();
  } else {
    cudaLaunchAttribute cluster{};
    cluster.id = cudaLaunchAttributeClusterDimension;
    cluster.val.clusterDim.x = V::kClusterCtas;
    cluster.val.clusterDim.y = 1;
    cluster.val.clusterDim.z = 1;
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(grid.x * V::kClusterCtas, grid.y, grid.z);
    config.blockDim = dim3(V::kThreads);
    config.dynamicSmemBytes = V::kSmemBytes;
    config.stream = stream;
    config.attrs = &cluster;
    config.numAttrs = 1;
    return cudaLaunchKernelEx(&config, verify_mma_kernel<T, V, kMode>, params);
  }
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
                                                    V::kThreads, V::kSmemBytes) != cudaSuccess) {
    (void)cudaGetLastError();
    return 0;
  }
  return blocks;
}

// One (dtype, variant, KV mode): the instance files generated from instance.cu.in.
#define TV_INSTANTIATE_VERIFY_MMA(T, V, MODE)                                                    \
  template cudaError_t launch_verify<T, V, MODE>(const VerifyKernelParams&, dim3, cudaStream_t); \
  template cudaError_t verify_attributes<T, V, MODE>(cudaFuncAttributes*);                       \
  template int verify_ctas_per_sm<T, V, MODE>();

}  // namespace treeverify::cuda::sm80
