// The split-KV combine fused into the verify kernels (the portable one and the wgmma one).
// EXPERIMENT, version 2 (version 1: f59bfd2, measured slower than the combine kernel): the
// arrival is a release, the wait polls with relaxed loads and takes one acquire fence.
//
// When a split call's whole grid fits the device at once, plan.cpp chooses this path and
// run() launches the verify kernel cooperatively with the workspace's arrival counters
// (VerifyKernelParams::chunk_counters). Each CTA of a split request, once its partial and any
// recomputed NaN row are written, arrives at its row block's counter and waits until all n
// chunks of the row block have arrived; then each of the n CTAs merges 1/n of the row block's
// output (its rows x 512 columns, in float4 units) over all n partials, which are still in L2,
// and writes out and lse. So a split call has no combine kernel, no second launch and no
// partials read back from DRAM, and the waits cost what the combine kernel's wait for the
// whole grid cost before.
// The counter resets itself: each CTA arrives a second time after its merge, and the one that
// brings the count to 2n sets it back to 0 (every CTA of the row block has passed its wait by
// then), so run() stays allocation-free and graph-capturable; run() zeroes the counters once,
// with the step data. The waits are safe only because a cooperative launch keeps every CTA of
// the grid on the device at once (plan.cpp, backend.cpp).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/constants.h"
#include "cuda/common/merge.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/mma/config.h"
#include "cuda/mma/params.h"
#include "cuda/mma/tile_ops.cuh"

namespace treeverify::cuda::mma {

// Partials a thread requests at once: all their loads are in flight before the first is used.
inline constexpr int kMergeBatch = 8;

// The row block's counter: an arrival that releases this CTA's partial (the barrier before it
// orders every thread's stores first), a relaxed read, and an acquire fence once the count is
// reached. (Version 1, f59bfd2, used __threadfence and ld.acquire: MEMBAR.SC.GPU around the
// arrival and an L1 invalidation, CCTL.IVALL, at every poll.)
__device__ __forceinline__ void arrive_release(uint32_t* counter) {
  asm volatile("red.release.gpu.global.add.u32 [%0], 1;\n" ::"l"(counter) : "memory");
}
__device__ __forceinline__ uint32_t load_relaxed(const uint32_t* counter) {
  uint32_t v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];\n" : "=r"(v) : "l"(counter) : "memory");
  return v;
}
__device__ __forceinline__ void fence_acquire() {
  asm volatile("fence.acq_rel.gpu;\n" ::: "memory");
}

// Called by the kThreads threads that wrote the CTA's outputs (threadIdx.x < kThreads), after
// the epilogue and recompute_nan_rows; `sync` is a barrier of exactly those threads. V: the
// kernel's tile (its rows a CTA). A CTA of a request with one chunk returns at once (it wrote
// out and lse itself).
// kTimeline (EXPERIMENT, with -DTV_EXP_FUSED_TIMELINE): thread 0 prints the CTA's arrival,
// wake-up and end of merge (%globaltimer); the portable kernel only (a printf in the wgmma
// kernel's consumers makes ptxas spill O).
template <typename T, typename V, bool kTimeline = false, class Sync>
__device__ __forceinline__ void merge_row_block(const VerifyKernelParams& p, Sync sync) {
  CtaWork w;
  cta_work<V, /*kReload=*/true>(p, &w);  // true: this CTA ran
  if (w.final_out) return;
  const int kv_len = w.prefix + w.rows_b / p.num_heads;
  // The row block's chunks; never more than the grid launched, so a device kv_len longer than
  // the plan's (a broken contract) gives wrong rows, as with the combine kernel, not a wait
  // that never ends.
  const int n = min((kv_len + p.chunk_tokens - 1) / p.chunk_tokens, static_cast<int>(gridDim.y));
  uint32_t* counter = p.chunk_counters + blockIdx.z * gridDim.x + blockIdx.x;
  const int t = static_cast<int>(threadIdx.x);
#ifdef TV_EXP_FUSED_TIMELINE
  uint64_t t_arrive;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_arrive));
#endif
  sync();  // every thread's partial stores are issued ...
  if (t == 0) {
    arrive_release(counter);  // ... and released with the arrival
    // No timeout: cooperative groups' grid sync has none either, and a trap here (the only
    // way to report one) makes ptxas spill the wgmma kernel's O (sm_90a, nvcc 13.0).
    while (load_relaxed(counter) < static_cast<uint32_t>(n)) __nanosleep(32);
    fence_acquire();  // the other chunks' partials, for this CTA's reads after the barrier
  }
  sync();  // every chunk of the row block has written its partial
#ifdef TV_EXP_FUSED_TIMELINE
  uint64_t t_woke;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_woke));
#endif

  // This CTA's slice: units [u_begin, u_end) of the row block's rows x 128 float4 columns.
  constexpr int kUnitsPerRow = kVDim / 4;
  const int units = min(V::kRows, w.rows_b - w.row0) * kUnitsPerRow;
  const int c = static_cast<int>(blockIdx.y);
  const int u_begin = c * units / n, u_end = (c + 1) * units / n;
  // Lanes a unit (a power of two, at most a warp): a unit's n partials are split among them so
  // that the slice fills the CTA (a slice of few units over many chunks, as in batch-1
  // decode, takes whole warps a unit).
  int group = 32;
  while (group > 1 && ((u_end - u_begin) * group > kThreads || group / 2 >= n)) group /= 2;
  const int stream = t % group, per_pass = kThreads / group;
  for (int u0 = u_begin; u0 < u_end; u0 += per_pass) {  // the same trip count in every thread
    const int u = u0 + t / group;
    const bool active = u < u_end;
    const int r = u / kUnitsPerRow, col = (u % kUnitsPerRow) * 4;
    const int64_t grow = static_cast<int64_t>(w.q0) * p.num_heads + w.row0 + r;
    Merge mg;
    for (int c0 = stream; active && c0 < n; c0 += kMergeBatch * group) {
      float s[kMergeBatch];
      float4 v[kMergeBatch];
#pragma unroll
      for (int i = 0; i < kMergeBatch; ++i) {
        // Written by other CTAs during this kernel: loads through L2 (ld.cg), never the
        // read-only path.
        const int64_t chunk = c0 + i * group;
        s[i] = chunk < n ? __ldcg(p.part_lse + chunk * p.total_rows + grow) : -INFINITY;
        v[i] = chunk < n ? __ldcg(reinterpret_cast<const float4*>(
                               p.part_out + (chunk * p.total_rows + grow) * kVDim + col))
                         : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int i = 0; i < kMergeBatch; ++i) mg.add(s[i], v[i]);
    }
    mg.merge_lanes(1, group);  // the unit's streams meet (an inactive lane adds nothing)
    if (active && stream == 0) {
      const int gr = w.row0 + r, node = gr / p.num_heads, head = gr % p.num_heads;
      T* dst = static_cast<T*>(p.out) + (w.q0 + node) * p.out_stride_token +
               head * p.out_stride_head + col;
      const float inv = mg.inverse_sum();
      const float4 a = mg.acc;
      *reinterpret_cast<uint2*>(dst) =
          make_uint2(pack2<T>(a.x * inv, a.y * inv), pack2<T>(a.z * inv, a.w * inv));
      if (p.lse != nullptr && col == 0) p.lse[grow] = mg.lse_ln();
    }
  }
#ifdef TV_EXP_FUSED_TIMELINE
  sync();
  uint64_t t_done;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t_done));
  if (kTimeline && t == 0)
    printf("TL %d %d %d %llu %llu %llu\n", static_cast<int>(blockIdx.x),
           static_cast<int>(blockIdx.y), static_cast<int>(blockIdx.z),
           static_cast<unsigned long long>(t_arrive), static_cast<unsigned long long>(t_woke),
           static_cast<unsigned long long>(t_done));
#endif
  // The second arrival: the last CTA of the row block to finish its merge resets the counter.
  if (t == 0 && atomicAdd(counter, 1u) == 2u * static_cast<uint32_t>(n) - 1u)
    atomicExch(counter, 0u);
}

}  // namespace treeverify::cuda::mma
