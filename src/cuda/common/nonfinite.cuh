// The non-finite policy (verify.h) where the kernel's main loop cannot keep it by itself.
//
// A tree token is masked for some rows of a CTA and seen by others, and the main loop still
// multiplies a masked row's P = 0 by the token's V inside the mma, where 0 x NaN = NaN: a NaN
// or an infinity in a tree token's V turns rows NaN that cannot see it. The epilogue marks
// every row that ends with a non-finite value (lse NaN in shared memory), and the CTA then
// recomputes each marked row here, one warp a row, in fp32 over only the tokens the row
// sees; the row ends NaN, as a whole, iff its q or one of those tokens holds a non-finite
// value. A prefix token is seen by every row, so there the recomputation only confirms NaN.
// In e4m3 fast mode the recomputation is exact (16-bit q, unrounded p), not fast: a row it
// saves from a masked token's NaN differs from its fast result within fast mode's error
// (verify.h, Precision::kFast). Rounding q and p here as quantize_q and the tiles' running
// maxima do would close that gap.
// Only an engine that wrote NaN or infinity into its cache or queries takes this path: it is
// written to be plain, not fast, and the main loop has no code for it.
//
// Why here and not in the loop (H200: docs/kernels/portable-mma.md, "Numerics"): a quarantine
// pass inside the main loop over tiles with tree tokens costs 13-18% on V1-V4 (the
// 255-register 64-row variants lose their schedule); this design costs 1-2.5%, from the
// epilogue's check and barrier and from a different register allocation of the same loop.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/constants.h"
#include "cuda/common/cta_work.cuh"
#include "cuda/common/e4m3.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/params.h"

namespace treeverify::cuda {

// The warps that recompute: the first 8 of the portable kernel's CTA (of 8 or 16 warps), the
// consumer warps of the wgmma kernel's (each kernel calls recompute_nan_rows from exactly
// these).
inline constexpr int kRecomputeWarps = 8;

// Row r of the CTA (its request row w.row0 + r) over the chunk [w.tok_begin, w.tok_end),
// written where the epilogue writes it: out and lse, or the chunk's partial and lse (log2).
// Lane l reads columns l + 32 k (k < 16: V's 512; 16, 17: the rest of K's 576) from global
// memory where it uses them, and the row's O lives in `acc` (512 floats of shared memory):
// this path keeps almost nothing in registers, so the main loop's allocation is unchanged.
template <typename T, bool kE4M3>
__device__ __forceinline__ void recompute_row(const VerifyKernelParams& p, const CtaWork& w, int r,
                                              float* acc) {
  constexpr int kQKPerLane = kQKDim / 32, kVPerLane = kVDim / 32;
  const int lane = threadIdx.x % 32;
  const int gr = w.row0 + r, node = gr / p.num_heads, head = gr % p.num_heads;
  const T* q =
      static_cast<const T*>(p.q) + (w.q0 + node) * p.q_stride_token + head * p.q_stride_head;
  const uint32_t* mask_row = p.tree_mask + static_cast<int64_t>(w.q0 + node) * p.mask_words;
  bool bad = false;
  for (int k = 0; k < kQKPerLane; ++k) bad |= !isfinite(to_float(q[lane + 32 * k]));
  for (int k = 0; k < kVPerLane; ++k) acc[lane + 32 * k] = 0.f;
  float m = -INFINITY, l = 0.f;
  float kv_scale = 1.f;
  if constexpr (kE4M3) kv_scale = *p.kv_scale;
  for (int t = w.tok_begin; t < w.tok_end && !__any_sync(0xffffffffu, bad); ++t) {
    if (t >= w.prefix) {  // a tree token: seen iff it is the row's node or an ancestor
      const int j = t - w.prefix;
      if (j != node && !((mask_row[j / 32] >> (j % 32)) & 1u)) continue;
    }
    const int64_t page = p.kv_page_indices[w.page_base + (t >> p.page_shift)];
    const int64_t row = (page << p.page_shift) + (t & ((1 << p.page_shift) - 1));
    const T* kv16 = static_cast<const T*>(p.kv) + row * kQKDim;
    const uint8_t* kv8 = static_cast<const uint8_t*>(p.kv) + row * kQKDim;
    auto kv = [&](int c) {  // the token's value in column c, dequantized
      if constexpr (kE4M3)
        return e4m3_to_float(kv8[c]) * kv_scale;
      else
        return to_float(kv16[c]);
    };
    // O's values: a partial of an e4m3 cache stays in the codes' units (combine.cuh).
    auto v = [&](int c) {
      if constexpr (kE4M3)
        return w.final_out ? kv(c) : e4m3_to_float(kv8[c]);
      else
        return kv(c);
    };
    float dot = 0.f;
    for (int k = 0; k < kQKPerLane; ++k) {
      const float x = kv(lane + 32 * k);
      bad |= !isfinite(x);
      dot += to_float(q[lane + 32 * k]) * x;
    }
    for (int off = 16; off > 0; off /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    const float s = dot * p.scale_log2;
    if (s == -INFINITY) continue;  // weighs 0, as in the main loop (verify.h)
    const float m_new = fmaxf(m, s);
    const float alpha = exp2f(m - m_new), pr = exp2f(s - m_new);  // alpha = 0 while m = -inf
    l = l * alpha + pr;
    for (int k = 0; k < kVPerLane; ++k)
      acc[lane + 32 * k] = acc[lane + 32 * k] * alpha + pr * v(lane + 32 * k);
    m = m_new;
  }
  bad = __any_sync(0xffffffffu, bad) || isnan(l);  // l is NaN after a score of +inf
  const float inv_l = bad ? NAN : (l == 0.f ? 0.f : 1.f / l);
  const float lse2 = bad ? NAN : (l == 0.f ? -INFINITY : m + log2f(l));
  const int64_t grow = static_cast<int64_t>(w.q0) * p.num_heads + gr;
  if (w.final_out) {
    T* out = static_cast<T*>(p.out) + (w.q0 + node) * p.out_stride_token + head * p.out_stride_head;
    for (int k = 0; k < kVPerLane; ++k)
      out[lane + 32 * k] = from_float<T>(acc[lane + 32 * k] * inv_l);
    if (lane == 0 && p.lse != nullptr) p.lse[grow] = lse2 * kLn2;
  } else {
    T* out = static_cast<T*>(p.part_out) + (blockIdx.y * p.total_rows + grow) * kVDim;
    for (int k = 0; k < kVPerLane; ++k)
      out[lane + 32 * k] = from_float<T>(acc[lane + 32 * k] * inv_l);
    if (lane == 0) p.part_lse[blockIdx.y * p.total_rows + grow] = lse2;
  }
}

// After the epilogue, whose stores the caller orders before these by a barrier: if the
// epilogue left a row NaN (lse NaN in s_lse, log2 units), each warp recomputes such rows,
// with its O in the KV stages (free by then). The CTA's work is read again from p, so that
// none of it has to stay live until here; a CTA without NaN rows reads only s_lse. The CTA
// takes rows first_row, first_row + row_step, ... (the pair kernel's two CTAs split them).
template <typename T, typename V, bool kE4M3>
__device__ __forceinline__ void recompute_nan_rows(const VerifyKernelParams& p, uint8_t* smem,
                                                   const float* s_lse, int first_row = 0,
                                                   int row_step = 1) {
  static_assert(kRecomputeWarps * kVDim * 4 <= V::kStageBytes * V::kStages && V::kRows <= 64);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const bool nan_row =
      (lane < V::kRows && isnan(s_lse[lane])) || (lane + 32 < V::kRows && isnan(s_lse[lane + 32]));
  if (!__any_sync(0xffffffffu, nan_row)) return;  // the same answer in every warp
  CtaWork w;
  cta_work<V, /*kReload=*/true>(p, &w);  // true: this CTA ran
  float* acc = reinterpret_cast<float*>(smem) + warp * kVDim;
  for (int r = first_row + warp * row_step; r < V::kRows; r += kRecomputeWarps * row_step)
    if (w.row0 + r < w.rows_b && isnan(s_lse[r])) recompute_row<T, kE4M3>(p, w, r, acc);
}

}  // namespace treeverify::cuda
