// Probe (experiment, reverted next): is a 2-CTA cluster's distributed-shared-memory merge of the
// wgmma kernel's O faster than writing the whole fp32 partial? Each CTA (one an SM: 200 KB of
// dynamic shared memory) holds a 64 x 512 fp32 O in the wgmma accumulator layout (two
// warpgroups of 128 threads, 64 float2 a thread).
//   global128: every CTA writes its 128 KB partial (the kernel's epilogue today).
//   pair:      cluster of 2; the warpgroup whose columns the peer keeps stores its 64 KB into
//              the peer's shared memory (float2, fragment layout), cluster barrier, the other
//              warpgroup adds them to its registers and writes 64 KB: half the partial bytes.
//   pair_dsmem_only: the same without the global write; empty / empty_pair: launch and
//              barrier cost alone.
// Build: nvcc -std=c++17 -O3 -arch=sm_90a -o dsmem_rate dsmem_rate.cu
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>

namespace cg = cooperative_groups;
constexpr int kThreads = 256, kSmem = 200 * 1024, kReps = 200;

#define CHECK(x)                                                                 \
  do {                                                                           \
    cudaError_t e = (x);                                                         \
    if (e != cudaSuccess) {                                                      \
      std::printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e));      \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

// Element j (0..63) of a thread's O half (64 rows x 256 columns): row and column, as wgmma's
// m64n256 accumulators (pairs of columns).
__device__ __forceinline__ int frag_row(int t, int j) { return (t / 32 % 4) * 16 + t % 32 / 4 + 8 * (j % 2); }
__device__ __forceinline__ int frag_col(int t, int j) { return 8 * (j / 2) + 2 * (t % 4); }

__global__ void global128(float* out) {
  const int t = threadIdx.x % 128, wg = threadIdx.x / 128;
  float* dst = out + static_cast<size_t>(blockIdx.x) * 64 * 512;
#pragma unroll 8
  for (int j = 0; j < 64; ++j)
    *reinterpret_cast<float2*>(dst + frag_row(t, j) * 512 + 256 * wg + frag_col(t, j)) =
        make_float2(t, j);
}

template <bool kGlobal>
__global__ void __cluster_dims__(2, 1, 1) pair(float* out) {
  extern __shared__ float smem[];
  cg::cluster_group cluster = cg::this_cluster();
  const int rank = static_cast<int>(cluster.block_rank());
  const int t = threadIdx.x % 128, wg = threadIdx.x / 128;
  float* peer = cluster.map_shared_rank(smem, rank ^ 1);
  cluster.sync();  // the peer's stages are free (in the kernel: its last tile consumed)
  // Rank 0 keeps columns 0-255 (warpgroup 0's), rank 1 columns 256-511 (warpgroup 1's).
  if (wg != rank) {
#pragma unroll 8
    for (int j = 0; j < 64; ++j)
      *reinterpret_cast<float2*>(peer + frag_row(t, j) * 256 + frag_col(t, j)) = make_float2(t, j);
  }
  cluster.sync();
  if (wg == rank && kGlobal) {
    float* dst = out + static_cast<size_t>(blockIdx.x / 2) * 64 * 512 + 256 * rank;
#pragma unroll 8
    for (int j = 0; j < 64; ++j) {
      const float2 a = *reinterpret_cast<const float2*>(smem + frag_row(t, j) * 256 + frag_col(t, j));
      *reinterpret_cast<float2*>(dst + frag_row(t, j) * 512 + frag_col(t, j)) =
          make_float2(a.x + t, a.y + j);
    }
  }
}

__global__ void empty() {}
__global__ void __cluster_dims__(2, 1, 1) empty_pair() { cg::this_cluster().sync(); }

template <typename L>
float time_us(L launch) {
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  for (int i = 0; i < 20; ++i) launch();
  cudaEventRecord(a);
  for (int i = 0; i < kReps; ++i) launch();
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0.f;
  cudaEventElapsedTime(&ms, a, b);
  return ms * 1000.f / kReps;
}

int main() {
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  float* out = nullptr;
  CHECK(cudaMalloc(&out, static_cast<size_t>(sms) * 64 * 512 * 4));
  for (auto k : {(const void*)global128, (const void*)pair<true>, (const void*)pair<false>,
                 (const void*)empty, (const void*)empty_pair})
    CHECK(cudaFuncSetAttribute(k, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(sms);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmem;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = 2, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
  cfg.attrs = &attr, cfg.numAttrs = 1;
  int clusters = 0;
  CHECK(cudaOccupancyMaxActiveClusters(&clusters, (const void*)pair<true>, &cfg));
  cfg.numAttrs = 0;  // __cluster_dims__ sets it at compile time
  std::printf("device SMs %d, 2-CTA clusters of %d KB a CTA active at once: %d (grid %d CTAs)\n", sms,
              kSmem / 1024, clusters, sms);
  const float t_empty = time_us([&] { empty<<<sms, kThreads, kSmem>>>(); });
  const float t_g128 = time_us([&] { global128<<<sms, kThreads, kSmem>>>(out); });
  const float t_empty_pair = time_us([&] { cudaLaunchKernelEx(&cfg, empty_pair); });
  const float t_pair = time_us([&] { cudaLaunchKernelEx(&cfg, pair<true>, out); });
  const float t_pair_d = time_us([&] { cudaLaunchKernelEx(&cfg, pair<false>, out); });
  CHECK(cudaDeviceSynchronize());
  CHECK(cudaGetLastError());
  const double mb = sms * 128.0 * 1024 / 1e6;
  std::printf("us a launch (%d back to back), %d CTAs:\n", kReps, sms);
  std::printf("  empty                 %7.2f\n", t_empty);
  std::printf("  global128             %7.2f  (%.1f MB written: %.2f TB/s over the launch)\n", t_g128,
              mb, mb / t_g128);
  std::printf("  empty_pair            %7.2f  (cluster launch + one cluster barrier)\n", t_empty_pair);
  std::printf("  pair_dsmem_only       %7.2f  (64 KB a pair-half over DSMEM, two cluster barriers)\n", t_pair_d);
  std::printf("  pair                  %7.2f  (DSMEM merge, then %.1f MB written)\n", t_pair, mb / 2);
  return 0;
}
