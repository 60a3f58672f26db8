// Thin wrappers over a thread-block cluster's distributed shared memory (sm_90+): the partner
// CTA's address of a local shared variable, a store into the partner's shared memory that
// completes on the partner's mbarrier, an arrival on the partner's mbarrier, and the cluster
// barrier. PTX ISA: "mapa", "st.async", "mbarrier.arrive", "barrier.cluster".
//
// Memory order: st.async's bytes are visible to a thread that has seen the receiving
// mbarrier's phase complete; the arrivals and waits here are CTA-scope (the default), as in
// CUTLASS's cluster barriers. Formally the PTX ISA makes st.async's complete-tx a release at
// cluster scope, which a CTA-scope acquire does not pair with; CUTLASS's transaction barriers
// wait so all the same, and every word of bench/tools/dsmem_exchange.cu checks. Cluster-scope
// release/acquire compiles to MEMBAR.ALL.GPU + CCTL.IVALL and costs ~1,000 cycles more a round
// (bench/tools/dsmem_exchange.cu, H100).
#pragma once

#include <cstdint>

#include "cuda/common/arch.cuh"

namespace treeverify::cuda {

// This CTA's rank in its cluster.
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r = 0;
#if TV_HAS_CLUSTER
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
#endif
  return r;
}

// The shared::cluster address, in the CTA of rank `rank`, of the local shared address `local`.
__device__ __forceinline__ uint32_t cluster_map(uint32_t local, uint32_t rank) {
  uint32_t remote = 0;
#if TV_HAS_CLUSTER
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(remote) : "r"(local), "r"(rank));
#endif
  return remote;
}

// Every thread of the cluster arrives and waits (release/acquire at cluster scope): orders
// every shared and global access before it against every one after it, cluster-wide.
__device__ __forceinline__ void cluster_sync() {
#if TV_HAS_CLUSTER
  asm volatile(
      "barrier.cluster.arrive.release.aligned;\n"
      "barrier.cluster.wait.acquire.aligned;\n" ::
          : "memory");
#endif
}

// Stores two floats at `remote` (a shared::cluster address, 8-byte aligned) and counts their 8
// bytes as completed on the mbarrier at `remote_bar` (in the same CTA as `remote`).
__device__ __forceinline__ void st_async_f32x2(uint32_t remote, float x, float y,
                                               uint32_t remote_bar) {
#if TV_HAS_CLUSTER
  asm volatile(
      "st.async.shared::cluster.mbarrier::complete_tx::bytes.v2.f32 [%0], {%1, %2}, [%3];\n" ::"r"(
          remote),
      "f"(x), "f"(y), "r"(remote_bar)
      : "memory");
#endif
}

// One arrival on the mbarrier at `remote_bar` (a shared::cluster address).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t remote_bar) {
#if TV_HAS_CLUSTER
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" ::"r"(remote_bar) : "memory");
#endif
}

// A float of shared memory at the shared::cluster address `remote`.
__device__ __forceinline__ float ld_shared_cluster(uint32_t remote) {
  float v = 0.f;
#if TV_HAS_CLUSTER
  asm volatile("ld.shared::cluster.f32 %0, [%1];\n" : "=f"(v) : "r"(remote) : "memory");
#endif
  return v;
}

}  // namespace treeverify::cuda
