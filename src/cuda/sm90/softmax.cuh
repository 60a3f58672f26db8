// The consumer warpgroups' online softmax over a scored 64-token tile of the sm_90a verify kernel
// (verify_wgmma.cuh): the two rows a thread holds in wgmma's accumulator layout, their running
// max and sum, and P's hand-off to the other warpgroup through shared memory.
#pragma once

#include "cuda/common/cta_work.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/sm90/operands.cuh"

namespace treeverify::cuda::sm90 {

// The online-softmax state of the two rows a thread holds in wgmma's accumulator layout:
// rows lo = 16 (warp % 4) + lane / 4 and hi = lo + 8 of the CTA. Accumulator i of an m64nN
// tile is row (i / 2) % 2 ? hi : lo, column 8 (i / 4) + 2 (lane % 4) + i % 2; so accumulators
// 8 k .. 8 k + 7 (columns 16 k .. 16 k + 15) are, packed in pairs, the A fragment of k step k
// of a product with A from registers.
struct Rows {
  int r[2];
  bool valid[2];
  int node[2];                                // request-relative tree node of the row
  float m[2] = {kNegInf, kNegInf};  // running max (log2 units) O and l are relative to
  float l[2] = {0.f, 0.f};                    // running sum over this warpgroup's own tiles
  float scale_log2[2];  // the scores' factor: softmax scale x log2(e) (x Q's row scale x kv_scale)
};

// What a row's new running max m_new makes of the old one: the factor alpha on O and l, and
// the reference P subtracts (a row that has seen nothing yet keeps m = -inf; it subtracts 0 so
// exp2 gives 0).
__device__ __forceinline__ float rescale(Rows& rows, int h, float m_new, float* m_ref) {
  *m_ref = m_new == kNegInf ? 0.f : m_new;
  const float alpha = fast_exp2(rows.m[h] - *m_ref);
  rows.m[h] = m_new;
  return alpha;
}

// The other warpgroup's running maxima, as it published them with its P (s_max), taken over:
// each row's alpha on O and l, and l rescaled.
__device__ __forceinline__ void take_their_max(Rows& rows, const float* s_max, float (&alpha)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float m_ref;
    alpha[h] = rescale(rows, h, s_max[rows.r[h]], &m_ref);
    rows.l[h] *= alpha[h];
  }
}

// O *= alpha, accumulator i by its row's ((i / 2) % 2), skipped when no row max of the warp
// moved (most tiles once the maxima settle; a warp-uniform branch). O must not be in flight.
__device__ __forceinline__ void scale_o(float (&o)[128], const float (&alpha)[2]) {
  if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] *= alpha[(i / 2) % 2];
  }
  fence_accumulators(o);
}

// The scores of the 64-token tile from `first` to probabilities in place: mask, new running
// max (alpha, the rescale of O, returned for each row; kLagging: the max lags by up to
// kMaxLag, for 16-bit P) and row sums (of the unrounded probabilities) into rows.l.
template <bool kLagging>
__device__ __forceinline__ void softmax_tile(const VerifyKernelParams& p, const CtaWork& w,
                                             float (&s)[32], int first, Rows& rows,
                                             float (&alpha)[2]) {
  const int col0 = 2 * (static_cast<int>(threadIdx.x) % 4);
  float tile_max[2] = {kNegInf, kNegInf};
  if (rows.valid[0] && rows.valid[1] && first + Tile::kTokens <= min(w.prefix, w.tok_end)) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      s[i] *= rows.scale_log2[(i / 2) % 2];
      tile_max[(i / 2) % 2] = fmaxf(tile_max[(i / 2) % 2], s[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int h = (i / 2) % 2;
      const int t = first + 8 * (i / 4) + col0 + i % 2;
      bool visible = rows.valid[h] && t < w.tok_end;
      if (visible && t >= w.prefix) {  // a tree token: visible iff an ancestor or itself
        const int node = t - w.prefix;
        const uint32_t* mask =  // the row's ancestor bits
            p.tree_mask + static_cast<int64_t>(w.q0 + rows.node[h]) * p.mask_words;
        visible = node == rows.node[h] || ((__ldg(mask + node / 32) >> (node % 32)) & 1u);
      }
      s[i] = visible ? s[i] * rows.scale_log2[h] : kNegInf;
      tile_max[h] = fmaxf(tile_max[h], s[i]);
    }
  }
  float m_ref[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
    alpha[h] = rescale(rows, h, next_running_max<kLagging>(rows.m[h], tile_max[h]), &m_ref[h]);
  }
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    s[i] = fast_exp2(s[i] - m_ref[(i / 2) % 2]);
    sum[(i / 2) % 2] += s[i];
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    rows.l[h] = rows.l[h] * alpha[h] + sum[h];
  }
}

// P in the products' type M (16-bit), packed in pairs in the accumulator layout (pa[j] =
// accumulators 2 j, 2 j + 1: the A fragment of k step j / 4).
template <typename M>
__device__ __forceinline__ void pack_p(const float (&s)[32], uint32_t (&pa)[16]) {
#pragma unroll
  for (int j = 0; j < 16; ++j) pa[j] = pack2<M>(s[2 * j], s[2 * j + 1]);
}

// P and the rows' running max, for the other warpgroup. 16-bit P (pack_p's pairs) in the
// core-matrix layout at s_p (row r, token tau at (r / 8) kPGroupBytes + (tau / 8) 128 + (r % 8) 16
// + (tau % 8) 2), so a warp's store writes 128 contiguous bytes; fast mode's codes (pack_p8's) by
// store_p8 (fast_operands.cuh).
template <bool kFast, int kRegs>
__device__ __forceinline__ void publish_p(const Rows& rows, const uint32_t (&pa)[kRegs],
                                          uint8_t* s_p, float* s_max) {
  static_assert(kRegs == (kFast ? 8 : 16));
  const int lane = static_cast<int>(threadIdx.x) % 32, col0 = 2 * (lane % 4);
  if constexpr (kFast) {
    store_p8(rows.r, pa, s_p);
  } else {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      uint8_t* row_p = s_p + (rows.r[h] / 8) * Tile::kPGroupBytes + (rows.r[h] % 8) * 16 + col0 * 2;
#pragma unroll
      for (int j = 0; j < 8; ++j) *reinterpret_cast<uint32_t*>(row_p + j * 128) = pa[2 * j + h];
    }
  }
  if (lane % 4 == 0)
    for (int h = 0; h < 2; ++h) s_max[rows.r[h]] = rows.m[h];
}

}  // namespace treeverify::cuda::sm90
