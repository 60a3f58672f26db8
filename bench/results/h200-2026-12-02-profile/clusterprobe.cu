// How many clusters of 1, 2, 4 and 8 CTAs (384 threads, 226 KB of shared memory each, as the
// wgmma verify kernel) an H200 runs at once.
#include <cstdio>
#include <cuda_runtime.h>
__global__ void __launch_bounds__(384, 1) probe(float* x) {
  extern __shared__ float s[];
  s[threadIdx.x] = threadIdx.x;
  __syncthreads();
  if (x) x[threadIdx.x] = s[(threadIdx.x + 1) % 384];
}
int main() {
  const int smem = 230976;
  cudaFuncSetAttribute(probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  printf("%s: %d SMs\n", prop.name, prop.multiProcessorCount);
  for (int c : {1, 2, 4, 8, 16}) {
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(1, 132 / c * c, 1);
    cfg.blockDim = dim3(384);
    cfg.dynamicSmemBytes = smem;
    cudaLaunchAttribute a;
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = 1; a.val.clusterDim.y = c; a.val.clusterDim.z = 1;
    cfg.attrs = &a; cfg.numAttrs = 1;
    int n = -1;
    cudaError_t e = cudaOccupancyMaxActiveClusters(&n, probe, &cfg);
    printf("cluster %2d: %s, %d clusters at once = %d CTAs\n", c, cudaGetErrorString(e), n, n * c);
  }
  return 0;
}
