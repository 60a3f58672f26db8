// The split-KV merge inside the verify kernels (portable and wgmma), for split calls whose whole
// grid runs at once: once a CTA's partial is out, the CTAs of its row block meet at a counter in
// the workspace, then each merges a slice of the block's rows over every chunk's partial (in L2,
// just written) and writes those rows' out and lse. It takes the place of the combine kernel
// (cuda/common/combine.cu), its launch and its second pass over the partials.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/constants.h"
#include "cuda/common/merge_state.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/mma/config.h"
#include "cuda/mma/params.h"
#include "cuda/mma/tile_ops.cuh"

namespace treeverify::cuda::mma {

// Waits until *counter reaches n (acquire); false after 10 s. Every CTA of the grid is resident
// (plan() merges in the kernel only where the grid fits the device, and run() launches it
// cooperatively, which fails rather than start a grid that does not), so the wait ends once the
// block's slowest CTA has written its partial. A counter that a misused workspace left wrong
// could never reach n: the caller then traps, which run()'s caller sees as a launch failure,
// instead of hanging the device.
__device__ __forceinline__ bool wait_for_count(const uint32_t* counter, uint32_t n) {
  uint64_t start;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  for (;;) {
    uint32_t v;
    asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(counter) : "memory");
    if (v >= n) return true;
    __nanosleep(64);
    uint64_t now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    if (now - start > 10'000'000'000ull) return false;
  }
}

// The kernels' last step where plan() merges in the kernel (p.merge_counters set), in CTAs of a
// split request: called by the kThreads threads that wrote the CTA's partial (rows marked
// non-finite already recomputed), after its last store; `sync` is a barrier of exactly those
// threads. V: the kernel's tile (its kRows query rows a CTA, and its KV stages at the start of
// `smem`, free by now, which stage the partials); kE4M3: partials in an e4m3 cache's units
// (times kv_scale here, as the combine does).
//
// The counter counts the block's n CTAs in, then out again up to 2 n; the last out sets it back
// to 0 for the next run (run() zeroes it where it builds the step data). Each CTA then takes an
// equal share of the block's units (8 columns of a row, 16 bytes of T) and, in passes that fit
// its stages, copies every chunk's partial of them in by cp.async and their rows' lses, then
// merges each unit over the chunks, s lanes of a warp a unit (s a power of two, as many as its
// threads allow), each lane every s-th chunk, the lanes meeting by shuffles. The loops stay
// rolled: this code runs once a CTA, so its instructions are fetched cold, and the cp.async
// copies are all in flight at once anyway. (Loads into registers instead, 24 in flight a lane,
// unrolled, made the wgmma kernel 2100 instructions longer.)
template <typename T, typename V, bool kE4M3, typename Sync>
__device__ __forceinline__ void merge_in_kernel(const VerifyKernelParams& p, uint8_t* smem,
                                                Sync sync) {
  if (p.merge_counters == nullptr) return;
  CtaWork w;
  cta_work<V, /*kReload=*/true>(p, &w);  // true: this CTA ran (nothing live through the loop)
  if (w.final_out) return;
  constexpr int kCols = 8, kUnitsPerRow = kVDim / kCols;
  const int tid = static_cast<int>(threadIdx.x);
  const int H = p.num_heads;
  const int n = (w.prefix + w.rows_b / H + p.chunk_tokens - 1) / p.chunk_tokens;
  uint32_t* counter = p.merge_counters + blockIdx.z * gridDim.x + blockIdx.x;
  sync();  // every thread's partial stores are issued
  if (tid == 0) {
    // The arrival releases them (the CTA barrier before it makes them this thread's to release).
    uint32_t arrived;
    asm volatile("atom.add.release.gpu.global.u32 %0, [%1], 1;"
                 : "=r"(arrived)
                 : "l"(counter)
                 : "memory");
    // A trap here, inside the wait's loop, made ptxas serialize the wgmma kernel's products and
    // spill (CUDA 13.0); after it, it does not.
    const bool met = wait_for_count(counter, static_cast<uint32_t>(n));
    if (!met) __trap();
    if (atomicAdd(counter, 1u) == 2u * n - 1u) atomicExch(counter, 0u);
  }
  sync();  // the block's partials, for every thread's reads

  const int units = min(V::kRows, w.rows_b - w.row0) * kUnitsPerRow;
  const int c_self = static_cast<int>(blockIdx.y);
  const int u_begin = units * c_self / n, u_end = units * (c_self + 1) / n;
  // Units a pass: n x 16 bytes each, and 4 bytes a chunk for each of the pass's rows (at most
  // g / 64 + 2), inside the stages (plan() keeps n <= merge_max_chunks: at least one unit).
  const int per_pass = max(1, (V::kStages * V::kStageBytes / n - 12) * 16 / 257);
  int s = 1;
  while (s < 32 && 2 * s * min(per_pass, u_end - u_begin) <= kThreads) s *= 2;
  const int stream = tid % s, slots = kThreads / s;
  const float v_scale = kE4M3 ? __ldg(p.kv_scale) : 1.f;
  const int64_t row_base = static_cast<int64_t>(w.q0) * H + w.row0;  // the block's first row
  const T* part = static_cast<const T*>(p.part_out);
  uint4* s_val = reinterpret_cast<uint4*>(smem);  // [n][g]
  float* s_lse = reinterpret_cast<float*>(smem + static_cast<size_t>(n) * per_pass * 16);
#pragma unroll 1
  for (int g0 = u_begin; g0 < u_end; g0 += per_pass) {  // the same trips in every thread
    const int g = min(per_pass, u_end - g0);
    const int r0 = g0 / kUnitsPerRow, rows = (g0 + g - 1) / kUnitsPerRow - r0 + 1;
#pragma unroll 1
    for (int i = tid; i < n * g; i += kThreads) {  // a chunk's g units are contiguous
      const int64_t at = static_cast<int64_t>(i / g) * p.total_rows * kVDim +
                         (row_base * kUnitsPerRow + g0 + i % g) * kCols;
      cp_async_16(smem_addr(s_val + i), part + at, 16);
    }
    cp_async_commit();
#pragma unroll 1
    for (int i = tid; i < n * rows; i += kThreads)
      s_lse[i] = __ldcg(p.part_lse + static_cast<int64_t>(i / rows) * p.total_rows + row_base + r0 +
                        i % rows);
    cp_async_wait<0>();
    sync();  // the pass's partials and lses
#pragma unroll 1
    for (int j0 = 0; j0 < g; j0 += slots) {  // the same trips in every thread
      const int j = j0 + tid / s, u = g0 + j;
      const bool valid = j < g;
      Merge<kCols> mg;
      if (valid) {
        const int r = u / kUnitsPerRow - r0;
#pragma unroll 1
        for (int c = stream; c < n; c += s) {
          const uint4 v = s_val[c * g + j];
          const float2 a = unpack2<T>(v.x), b = unpack2<T>(v.y), d = unpack2<T>(v.z),
                       e = unpack2<T>(v.w);
          mg.add(s_lse[c * rows + r], {a.x, a.y, b.x, b.y, d.x, d.y, e.x, e.y});
        }
      }
#pragma unroll 1
      for (int off = 1; off < s; off *= 2) mg.add_lane(off);
      if (valid && stream == 0) {
        const int gr = w.row0 + u / kUnitsPerRow, col = u % kUnitsPerRow * kCols;
        const int node = gr / H, head = gr % H;
        T* dst = static_cast<T*>(p.out) + static_cast<int64_t>(w.q0 + node) * p.out_stride_token +
                 static_cast<int64_t>(head) * p.out_stride_head + col;
        const float inv = mg.inv_sum(v_scale);
        const float* a = mg.acc;
        *reinterpret_cast<uint4*>(dst) =
            make_uint4(pack2<T>(a[0] * inv, a[1] * inv), pack2<T>(a[2] * inv, a[3] * inv),
                       pack2<T>(a[4] * inv, a[5] * inv), pack2<T>(a[6] * inv, a[7] * inv));
        if (col == 0 && p.lse != nullptr) p.lse[row_base + u / kUnitsPerRow] = mg.lse2() * kLn2;
      }
    }
    sync();  // every read of the pass, before the next pass's copies
  }
}

}  // namespace treeverify::cuda::mma
