// dsmem_exchange: what it costs a 2-CTA cluster to exchange per-tile score partials through
// distributed shared memory, the step the sm_120 cluster kernel (issue 53) adds to every KV tile.
//
// Each CTA of a pair pushes BYTES of fp32 into its partner's shared memory a round
// (st.async ... mbarrier::complete_tx into the partner's "full" barrier), waits for the partner's
// push into its own buffer, reads it, and frees the buffer again by a remote arrive on the
// partner's "empty" barrier. Two buffers, so round i + 1's push overlaps round i's read. With
// work = 0 the loop is nothing but the exchange: the time a round is its latency (one pair) or
// its cost under load (a pair on every SM pair). With --work N each thread also runs N dependent
// FMAs a round between its push and its wait: the round then costs max(work, exchange) when the
// exchange hides under work, work + exchange when it does not.
//
// Build (sm_90 or later; clusters need sm_90):
//   nvcc -O3 -std=c++17 -arch=sm_90a -o build-tools/dsmem_exchange bench/tools/dsmem_exchange.cu
// Run: dsmem_exchange [--pairs P] [--bytes B] [--rounds R] [--work N] [--threads T]
//                     [--warp-arrive 1|0]   (free a buffer by one remote arrive a warp, the
//                                            default, or one a thread)
//                     [--cluster-scope 0|1] (the barriers' release/acquire at CTA scope, the
//                                            default, or at cluster scope)
// Prints one line: pairs, bytes, threads, work, ns a round (median of 5 launches), and the
// checksum test result (every word read must be the partner's round-tagged value).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#define CHECK(x)                                                                    \
  do {                                                                              \
    cudaError_t e_ = (x);                                                           \
    if (e_ != cudaSuccess) {                                                        \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x,              \
                   cudaGetErrorString(e_));                                         \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

namespace {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
// The partner's shared::cluster address of a local shared::cta address.
__device__ __forceinline__ uint32_t map_to(uint32_t local, uint32_t rank) {
  uint32_t remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank));
  return remote;
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\tbarrier.cluster.wait.acquire.aligned;"
               ::: "memory");
}
__device__ __forceinline__ void mbar_init(uint64_t* bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_addr(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)),
               "r"(bytes)
               : "memory");
}
// kCluster: release/acquire at cluster scope; otherwise at CTA scope (the qualifiers' defaults),
// as CUTLASS's cluster pipelines use them: the bytes a complete_tx counts are visible to the
// waiters of its barrier, and a buffer is read into registers before its empty arrive.
template <bool kCluster>
__device__ __forceinline__ void mbar_arrive_remote(uint32_t remote_bar) {
  if constexpr (kCluster) {
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote_bar)
                 : "memory");
  } else {
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote_bar) : "memory");
  }
}
template <bool kCluster>
__device__ __forceinline__ void mbar_wait(uint64_t* bar, uint32_t parity) {
  if constexpr (kCluster) {
    asm volatile(
        "{\n\t.reg .pred done;\n"
        "WAIT_%=:\n\t"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 done, [%0], %1;\n\t"
        "@!done bra WAIT_%=;\n\t}" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
  } else {
    asm volatile(
        "{\n\t.reg .pred done;\n"
        "WAIT_%=:\n\t"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n\t"
        "@!done bra WAIT_%=;\n\t}" ::"r"(smem_addr(bar)),
        "r"(parity)
        : "memory");
  }
}
// 16 bytes into the partner's buffer, counted on the partner's barrier.
__device__ __forceinline__ void st_async16(uint32_t remote, uint4 v, uint32_t remote_bar) {
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %2, %3, %4}, [%5];"
      ::"r"(remote), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "r"(remote_bar)
      : "memory");
}

constexpr int kMaxBytes = 64 * 1024;  // per buffer; two buffers a CTA

template <bool kCluster>
__global__ void __cluster_dims__(2, 1, 1)
    exchange(int bytes, int rounds, int work, bool warp_arrive, unsigned long long* cycles,
             int* errors, float* sink) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint4* buf[2] = {reinterpret_cast<uint4*>(smem), reinterpret_cast<uint4*>(smem + bytes)};
  __shared__ uint64_t full[2], empty[2];
  const uint32_t rank = cluster_rank(), partner = rank ^ 1u;
  const int vecs = bytes / 16;
  if (threadIdx.x == 0) {
    for (int s = 0; s < 2; ++s) {
      mbar_init(&full[s], 1);               // the local expect_tx arrive; bytes by complete_tx
      // Every partner thread, or every partner warp's lane 0, after reading.
      mbar_init(&empty[s], warp_arrive ? blockDim.x / 32 : blockDim.x);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  cluster_sync();
  const uint32_t remote_buf[2] = {map_to(smem_addr(buf[0]), partner),
                                  map_to(smem_addr(buf[1]), partner)};
  const uint32_t remote_full[2] = {map_to(smem_addr(&full[0]), partner),
                                   map_to(smem_addr(&full[1]), partner)};
  const uint32_t remote_empty[2] = {map_to(smem_addr(&empty[0]), partner),
                                    map_to(smem_addr(&empty[1]), partner)};
  float acc = threadIdx.x;
  int bad = 0;
  const unsigned long long start = clock64();
  for (int i = 0; i < rounds; ++i) {
    const int s = i & 1;
    const uint32_t phase = (i >> 1) & 1;
    if (threadIdx.x == 0) mbar_expect_tx(&full[s], bytes);
    // The partner's buffer s is free once its threads have read round i - 2 from it.
    if (i >= 2) mbar_wait<kCluster>(&empty[s], phase ^ 1);
    const uint32_t tag = (static_cast<uint32_t>(i) << 1) | rank;
    for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
      st_async16(remote_buf[s] + 16 * v, make_uint4(tag, v, tag ^ v, ~tag), remote_full[s]);
    }
    for (int k = 0; k < work; ++k) acc = fmaf(acc, 0.999f, 1.0f);
    mbar_wait<kCluster>(&full[s], phase);
    const uint32_t want = (static_cast<uint32_t>(i) << 1) | partner;
    for (int v = threadIdx.x; v < vecs; v += blockDim.x) {
      const uint4 got = buf[s][v];
      bad += got.x != want || got.y != static_cast<uint32_t>(v) || got.w != ~want;
      acc += __uint_as_float(got.z & 0x3f800000u);
    }
    if (warp_arrive) {
      __syncwarp();
      if (threadIdx.x % 32 == 0) mbar_arrive_remote<kCluster>(remote_empty[s]);
    } else {
      mbar_arrive_remote<kCluster>(remote_empty[s]);
    }
  }
  const unsigned long long stop = clock64();
  cluster_sync();  // no CTA leaves while its partner may still write into it
  if (threadIdx.x == 0) cycles[blockIdx.x] = stop - start;
  if (bad) atomicAdd(errors, bad);
  if (acc == -1.0f) *sink = acc;  // keeps the work loop
}

int arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const int pairs = arg(argc, argv, "--pairs", 1);
  const int bytes = arg(argc, argv, "--bytes", 8192);
  const int rounds = arg(argc, argv, "--rounds", 4096);
  const int work = arg(argc, argv, "--work", 0);
  const int threads = arg(argc, argv, "--threads", 256);
  const bool warp_arrive = arg(argc, argv, "--warp-arrive", 1) != 0;
  const bool cluster_scope = arg(argc, argv, "--cluster-scope", 0) != 0;
  auto* kernel = cluster_scope ? exchange<true> : exchange<false>;
  if (pairs < 1 || bytes < 16 || bytes % 16 != 0 || bytes > kMaxBytes || rounds < 2 ||
      work < 0 || threads < 32 || threads > 1024 || threads % 32 != 0) {
    std::fprintf(stderr,
                 "usage: dsmem_exchange [--pairs P>=1] [--bytes 16..%d, a multiple of 16] "
                 "[--rounds R>=2] [--work N>=0] [--threads 32..1024, a multiple of 32] "
                 "[--warp-arrive 1|0] [--cluster-scope 0|1]\n",
                 kMaxBytes);
    return 2;
  }
  const int shmem = 2 * bytes;
  CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shmem));
  unsigned long long* cycles;
  int* errors;
  float* sink;
  CHECK(cudaMalloc(&cycles, sizeof(unsigned long long) * 2 * pairs));
  CHECK(cudaMalloc(&errors, sizeof(int)));
  CHECK(cudaMalloc(&sink, sizeof(float)));
  CHECK(cudaMemset(errors, 0, sizeof(int)));
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  std::vector<float> ns;
  for (int rep = 0; rep < 6; ++rep) {  // the first launch warms up and is not counted
    CHECK(cudaEventRecord(t0));
    kernel<<<2 * pairs, threads, shmem>>>(bytes, rounds, work, warp_arrive, cycles, errors, sink);
    CHECK(cudaEventRecord(t1));
    CHECK(cudaEventSynchronize(t1));
    CHECK(cudaGetLastError());
    float ms = 0;
    CHECK(cudaEventElapsedTime(&ms, t0, t1));
    if (rep > 0) ns.push_back(ms * 1e6f / rounds);
  }
  std::vector<unsigned long long> cyc(2 * pairs);
  CHECK(cudaMemcpy(cyc.data(), cycles, sizeof(unsigned long long) * cyc.size(),
                   cudaMemcpyDeviceToHost));
  int err = 0;
  CHECK(cudaMemcpy(&err, errors, sizeof(int), cudaMemcpyDeviceToHost));
  std::sort(ns.begin(), ns.end());
  const unsigned long long max_cycles = *std::max_element(cyc.begin(), cyc.end());
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s pairs %d bytes %d threads %d work %d arrive %s scope %s: %.1f ns a round (median of %zu; "
              "%.0f cycles a round in the slowest CTA), %.1f GB/s a CTA pushed, check %s\n",
              prop.name, pairs, bytes, threads, work, warp_arrive ? "warp" : "thread",
              cluster_scope ? "cluster" : "cta", ns[ns.size() / 2], ns.size(),
              double(max_cycles) / rounds, bytes / ns[ns.size() / 2],
              err == 0 ? "ok" : "FAILED");
  return err == 0 ? 0 : 1;
}
