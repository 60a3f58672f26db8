// The portable kernel's steps on an e4m3 cache, in both precisions:
// - exact mode (Precision::kExact, KvMode::kE4M3): fp16 mma.sync products with Q rescaled by
//   a power of two a row to fp16 (prepare_q_f16) and P in fp16; in the 16 and 32-row variants
//   each K and V value is widened in registers after its ldmatrix (exact: every e4m3 value
//   is an fp16 value), the 64-row ones widen the tile in shared memory first
//   (Variant::kE4M3InRegisters, dequantize_tile);
// - fast mode (Precision::kFast, KvMode::kE4M3Fast): Q carried as two e4m3 terms with one
//   scale a row (quantize_q), S = Q K^T and O += P V as e4m3 mma.sync products (QMMA, native
//   on sm_89 and sm_120). The fragment plan and where it comes from:
//   docs/kernels/fp8-fast-mode.md.
// softmax_tile and epilogue (tile_ops.cuh) hold the P stores and O's column order of both:
// a lane's ldmatrix.trans of the e4m3 V gives it byte pairs of two columns, so O's 8-column
// tiles come in pairs (even columns, odd columns) in both modes.
//
// Fast mode runs the variants of the 99 KB tables (16 and 32 rows of 32-token tiles, 64 rows
// of 16-token tiles; none of them halves or bulk copies). The e4m3 tile sits at
// kE4M3RowOffset of 1168-byte stage rows (e4m3_tile.cuh).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/e4m3.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/sm80/config.h"
#include "cuda/sm80/tile_ops.cuh"

namespace treeverify::cuda::sm80 {

// ---- Exact mode ----

// Rewrites the CTA's staged 16-bit Q rows (copy_q, landed and published by a barrier) in
// place as the fp16 A operand of exact mode's score product, and row r's factor back to the
// true scores, times `kv_scale`, in s_scale[r]:
// - bf16 rows are multiplied by 2^s, the power of two that brings the row's largest magnitude
//   into [2^14, 2^15), then rounded to fp16, which holds every bf16 value of the row exactly
//   down to 2^-38 of its largest (the rest, under fp16's subnormal step, move by less than
//   2^-39 of the largest: far below the fp32 accumulation's error); s_scale[r] = 2^-s. A row
//   with a NaN or infinity keeps s = 0 and ends NaN (nonfinite.cuh), as it must.
// - fp16 rows keep their values (s = 0).
// - kPermute (K widened in registers): within each 16 values, pair j (values 2j, 2j + 1)
//   moves to slot j / 2 for even j and 4 + j / 2 for odd j, so q_fragments hands a lane values
//   4t .. 4t + 3 of each k16 step in A registers 0 and 2 (rows 8 below: 1 and 3): the k order
//   in which its ldmatrix of the e4m3 tile holds K (qk_partial_e4m3_exact).
// A warp takes a row: its lanes read the row's 288 pairs, meet at __syncwarp, then write. The
// caller publishes the rows and scales with a barrier.
template <typename T, typename V, bool kPermute>
__device__ __forceinline__ void prepare_q_f16(uint8_t* s_q, float* s_scale, float kv_scale) {
  constexpr int kPairs = kQKDim / 2 / 32;  // 9 a lane
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int r = warp; r < V::kRows; r += V::kWarps) {
    uint32_t* row = reinterpret_cast<uint32_t*>(s_q + r * kKVRowBytes);
    uint32_t pair[kPairs];
#pragma unroll
    for (int k = 0; k < kPairs; ++k) pair[k] = row[lane + 32 * k];
    int s = 0;
    if constexpr (!std::is_same_v<T, __half>) {
      // The largest magnitude's bits (bf16 magnitudes order as unsigned integers; a NaN reads
      // above infinity), then floor(log2) from its exponent field (a subnormal reads as
      // -127): s in [-113, 126], so 2^s and 2^-s are normal floats.
      uint32_t lo = 0, hi = 0;
#pragma unroll
      for (int k = 0; k < kPairs; ++k) {
        lo = max(lo, pair[k] & 0x7fffu);
        hi = max(hi, (pair[k] >> 16) & 0x7fffu);
      }
      uint32_t amax = max(lo, hi);
#pragma unroll
      for (int off = 16; off > 0; off /= 2)
        amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, off));
      const int e = static_cast<int>(amax >> 7) - 127;
      if (amax != 0 && e < 128) s = min(14 - e, 126);
      const float up = __uint_as_float(static_cast<uint32_t>(127 + s) << 23);
#pragma unroll
      for (int k = 0; k < kPairs; ++k) {
        const T* two = reinterpret_cast<const T*>(&pair[k]);
        pair[k] = pack2<__half>(to_float(two[0]) * up, to_float(two[1]) * up);
      }
    }
    __syncwarp();  // every lane has read the row
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
      const int j = lane + 32 * k, q = j % 8;
      row[kPermute ? j - q + (q % 2 == 0 ? q / 2 : 4 + q / 2) : j] = pair[k];
    }
    if (lane == 0) s_scale[r] = __uint_as_float(static_cast<uint32_t>(127 - s) << 23) * kv_scale;
  }
}

// qk_partial of exact mode: the same passes, s_red layout and Q fragments (from prepare_q_f16's
// rows), fp16 products with B fragments from the e4m3 tile. A lane's ldmatrix of 8 tokens x
// 16 bytes holds bytes 4t .. 4t + 3 of its token: values 4t, 4t + 1 are B register 0 (k 2t,
// 2t + 1) and 4t + 2, 4t + 3 register 1 (k 2t + 8, 2t + 9), Q's k order. Scores still to be
// scaled by Q's row scale and kv_scale (softmax_tile).
template <typename V>
__device__ __forceinline__ void qk_partial_e4m3_exact(
    uint32_t stage, const uint32_t (&qf)[V::kQKMTiles][V::kKSteps][4], float* s_red, int kgroup,
    int sub) {
  const int lane = threadIdx.x % 32;
  const int row0 = (sub / V::kQKTokenGroups) * V::kQKMTiles * 16;
  const int tok0 = (sub % V::kQKTokenGroups) * V::kQKPasses * 16;
  const uint32_t base = stage + kE4M3RowOffset + kgroup * (kQKDim / V::kKGroups);
  // One block for both passes where the 16-bit product has it (qk_partial).
  constexpr int kUnroll = V::kStages >= 4 || TV_FITS_3_STAGE_QK_BLOCK ? V::kQKPasses : 1;
#pragma unroll kUnroll
  for (int pass = 0; pass < V::kQKPasses; ++pass) {
    const int tok_base = tok0 + pass * 16;
    float acc[V::kQKMTiles][2][4] = {};
    // The B fragment of tokens 8 nt .. 8 nt + 7 from one e4m3 register, into k16 step ks.
    auto products = [&](int ks, int nt, uint32_t b) {
      uint32_t b0, b1;
      e4m3x4_to_f16x2x2(b, b0, b1);
#pragma unroll
      for (int mt = 0; mt < V::kQKMTiles; ++mt) mma_16816<__half>(acc[mt][nt], qf[mt][ks], b0, b1);
    };
#pragma unroll
    for (int ks = 0; ks < V::kKSteps; ++ks) {
      uint32_t kb[2];  // tokens 0-7, 8-15: 16 values each
      ldmatrix_x2(kb, base + (tok_base + lane % 16) * kKVRowBytes + ks * 16);
      products(ks, 0, kb[0]);
      products(ks, 1, kb[1]);
    }
    store_partial_scores<V>(acc, s_red, kgroup, row0, tok_base);
  }
}

// O = alpha * O + P V of exact mode: P in fp16 (softmax_tile, the 16-bit layout), V's B
// fragments from the e4m3 tile. A lane's ldmatrix.trans of 8 tokens x 16 bytes holds the byte
// pairs of tokens 2t and 2t + 1 in columns 2g and 2g + 1 (g = lane / 4); one permute puts
// each column's two tokens side by side, so the low half widens to B register 0 (k 2t, 2t + 1)
// of the even-column tile and the high half to that of the odd-column tile; tokens 8-15 give
// register 1. O tile pair (2 np, 2 np + 1) thus holds columns o_col0 + 16 np + {even, odd},
// fast mode's order (epilogue).
template <typename V>
__device__ __forceinline__ void pv_tile_e4m3_exact(uint32_t stage, uint32_t s_p,
                                                   const float* s_alpha,
                                                   float (&o)[V::kOMTiles][V::kONTiles][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = V::o_row0(warp), col0 = V::o_col0(warp);
  rescale_o<V>(s_alpha, row0, o);
  const uint32_t v_base = stage + kE4M3RowOffset + col0;
#pragma unroll
  for (int ks = 0; ks < V::kTokens / 16; ++ks) {
    uint32_t pa[V::kOMTiles][4];
    p_fragments<V>(s_p, row0, ks, lane, pa);
#pragma unroll
    for (int np = 0; np < V::kONTiles / 2; ++np) {
      uint32_t v[2];  // tokens 16 ks + 0-7, 8-15
      ldmatrix_x2_trans(v, v_base + (ks * 16 + lane % 16) * kKVRowBytes + np * 16);
      const uint32_t x = __byte_perm(v[0], 0, 0x3120), y = __byte_perm(v[1], 0, 0x3120);
      uint32_t e0, e1, d0, d1;
      e4m3x4_to_f16x2x2(x, e0, d0);
      e4m3x4_to_f16x2x2(y, e1, d1);
#pragma unroll
      for (int mt = 0; mt < V::kOMTiles; ++mt) {
        mma_16816<__half>(o[mt][2 * np], pa[mt], e0, e1);
        mma_16816<__half>(o[mt][2 * np + 1], pa[mt], d0, d1);
      }
    }
  }
}

// ---- Fast mode ----

// Q.K^T of one of fast mode's 4 k-groups (144 values): four k32 steps and one k16.
inline constexpr int kK32Steps = kQKDim / kKGroupsDefault / 32;  // 4
static_assert(kK32Steps * 32 + 16 == kQKDim / kKGroupsDefault);

// Q in fast mode is two e4m3 terms a value with the row's one scale: hi = e4m3(x) and
// lo = e4m3(x - hi) for x = q x 448 / amax, so the products see hi + lo, about 7 bits of
// mantissa where one term keeps 3. One term moves lse by nats on keys with outlier channels
// (their scores carry Q's 3-bit error times their size); a finer scale does not help, since
// e4m3's error is relative to each value (docs/kernels/fp8-fast-mode.md, "Q's two terms").
// The price is the score product's QMMAs twice over.
inline constexpr int kQTerms = 2;

// The Q operand of one warp in fast mode: per term and m-tile, 4 k32 A fragments; per m-tile
// the k16 tail of both terms.
template <typename V>
struct QFragsE4M3 {
  static_assert(V::kKGroups == kKGroupsDefault && V::kWarps == kWarpsDefault,
                "fast mode's products are laid out for 8 warps of 4 k-groups");
  uint32_t k32[kQTerms][V::kQKMTiles][kK32Steps][4];
  uint32_t tail[V::kQKMTiles][4];  // the k16 tail: hi's A fragment, then lo's (qk_partial_e4m3)
};

// Where quantize_q leaves term i's 576 codes in a 16-bit staging row of Q: hi in bytes
// [0, 576), lo in [576, 1152).
inline constexpr int kQTermBytes = kQKDim;

// Rounds the CTA's staged 16-bit Q rows (copy_q, landed and published by a barrier) to two
// e4m3 terms in place: row r's hi codes go to the first 576 bytes of its staging row, its lo
// codes to the next 576, and its scale (about amax / 448, 1 for a zero row) times `kv_scale`
// to s_scale[r], so that q = (hi + lo) x scale / kv_scale up to lo's rounding. A warp takes a
// row: its lanes read the row's 288 pairs, meet at __syncwarp, then write. A NaN or an
// infinity leaves NaN codes (amax ignores NaN; inf x 0 is NaN), so the row ends NaN and the
// epilogue's non-finite path recomputes it (nonfinite.cuh). The caller publishes the codes
// and scales with a barrier. The oracle rounds the same way (core/fp8_rounding.h): the
// products and the difference are rounded float32 operations, never contracted to an FMA.
template <typename T, typename V>
__device__ __forceinline__ void quantize_q(uint8_t* s_q, float* s_scale, float kv_scale) {
  constexpr int kPairs = kQKDim / 2 / 32;  // 9 a lane
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  for (int r = warp; r < V::kRows; r += V::kWarps) {
    uint8_t* row = s_q + r * kKVRowBytes;
    float v[2 * kPairs], amax = 0.f;
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
      const uint32_t two = reinterpret_cast<const uint32_t*>(row)[lane + 32 * k];
      v[2 * k] = to_float(reinterpret_cast<const T*>(&two)[0]);
      v[2 * k + 1] = to_float(reinterpret_cast<const T*>(&two)[1]);
      amax = fmaxf(amax, fmaxf(fabsf(v[2 * k]), fabsf(v[2 * k + 1])));
    }
#pragma unroll
    for (int off = 16; off > 0; off /= 2)
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    // 448 / amax in fp32, capped at 2^126 so that a row of tiny values (amax under 448 /
    // FLT_MAX: bf16 subnormals) keeps finite codes; the scale back is 1 / inv.
    const float inv = amax > 0.f ? fminf(__fdiv_rn(kE4M3Max, amax), kFastQInvCap) : 1.f;
    __syncwarp();  // every lane has read the row
#pragma unroll
    for (int k = 0; k < kPairs; ++k) {
      const float x0 = __fmul_rn(v[2 * k], inv), x1 = __fmul_rn(v[2 * k + 1], inv);
      const uint16_t hi = pack_e4m3x2(x0, x1);
      const uint16_t lo = pack_e4m3x2(__fsub_rn(x0, e4m3_to_float(hi & 0xffu)),
                                      __fsub_rn(x1, e4m3_to_float(hi >> 8)));
      reinterpret_cast<uint16_t*>(row)[lane + 32 * k] = hi;
      reinterpret_cast<uint16_t*>(row + kQTermBytes)[lane + 32 * k] = lo;
    }
    if (lane == 0) s_scale[r] = __frcp_rn(inv) * kv_scale;
  }
}

// This warp's k-slice of its row group as e4m3 A fragments of both terms, from the codes
// quantize_q left in `buf`: the same lane addresses as q_fragments, 32 bytes (values) a k32
// step.
template <typename V>
__device__ __forceinline__ void q_fragments_e4m3(uint32_t buf, int kgroup, int rgroup,
                                                 QFragsE4M3<V>& qf) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int term = 0; term < kQTerms; ++term) {
#pragma unroll
    for (int mt = 0; mt < V::kQKMTiles; ++mt) {
      const int row = (rgroup * V::kQKMTiles + mt) * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
      const uint32_t base =
          buf + row * kKVRowBytes + term * kQTermBytes + kgroup * (kQKDim / V::kKGroups);
#pragma unroll
      for (int ks = 0; ks < kK32Steps; ++ks)
        ldmatrix_x4(qf.k32[term][mt][ks], base + ks * 32 + 16 * (lane / 16));
      uint32_t tail[2];
      ldmatrix_x2(tail, base + kK32Steps * 32);
      qf.tail[mt][2 * term] = tail[0];
      qf.tail[mt][2 * term + 1] = tail[1];
    }
  }
}

// qk_partial on the e4m3 tile (at kE4M3RowOffset of each stage row): the same passes and
// s_red layout, B fragments by the same ldmatrix addressing (a b16 of the bf16 layout is a
// byte pair here), both of Q's terms into one accumulator; scores still to be scaled by Q's
// row scale and kv_scale (softmax_tile).
template <typename V>
__device__ __forceinline__ void qk_partial_e4m3(uint32_t stage, const QFragsE4M3<V>& qf,
                                                float* s_red, int kgroup, int sub) {
  const int lane = threadIdx.x % 32;
  const int row0 = (sub / V::kQKTokenGroups) * V::kQKMTiles * 16;
  const int tok0 = (sub % V::kQKTokenGroups) * V::kQKPasses * 16;
#pragma unroll
  for (int pass = 0; pass < V::kQKPasses; ++pass) {
    const int tok_base = tok0 + pass * 16;
    float acc[V::kQKMTiles][2][4] = {};
    const uint32_t base = stage + kE4M3RowOffset + kgroup * (kQKDim / V::kKGroups);
    // The k32 steps once a term, K's fragments loaded again for lo: held across both terms
    // they spill the 64-row variant on sm_120.
#pragma unroll
    for (int term = 0; term < kQTerms; ++term) {
#pragma unroll
      for (int ks = 0; ks < kK32Steps; ++ks) {
        uint32_t kb[4];  // tokens 0-7: k 0-15, 16-31; tokens 8-15: the same
        const int tok = tok_base + (lane % 8) + 8 * (lane / 16);
        ldmatrix_x4(kb, base + tok * kKVRowBytes + ks * 32 + 16 * ((lane / 8) % 2));
#pragma unroll
        for (int mt = 0; mt < V::kQKMTiles; ++mt) {
          mma_e4m3_16832(acc[mt][0], qf.k32[term][mt][ks], kb[0], kb[1]);
          mma_e4m3_16832(acc[mt][1], qf.k32[term][mt][ks], kb[2], kb[3]);
        }
      }
    }
    // The k16 tail of both terms as one k32 step: A = {hi's tail, lo's tail} against the
    // tail's B fragment twice (k 0-15: hi, 16-31: lo), which sums hi.K + lo.K.
    uint32_t kt[2];  // the k16 tail: tokens 0-7, 8-15
    ldmatrix_x2(kt, base + (tok_base + lane % 16) * kKVRowBytes + kK32Steps * 32);
#pragma unroll
    for (int mt = 0; mt < V::kQKMTiles; ++mt) {
      mma_e4m3_16832(acc[mt][0], qf.tail[mt], kt[0], kt[0]);
      mma_e4m3_16832(acc[mt][1], qf.tail[mt], kt[1], kt[1]);
    }
    store_partial_scores<V>(acc, s_red, kgroup, row0, tok_base);
  }
}

// The B fragments of 16 O columns from an 8-token transposed load pair (X: tokens 0-7, Y:
// 8-15; ldmatrix.trans of b16 gives a lane the byte pairs of tokens 2t and 2t+1): even
// columns from bytes 0 and 2, odd from 1 and 3. B slot 4t+i then holds token
// 2t + (i & 1) + 8 (i >> 1), the order softmax_tile writes P in (p8_offset).
__device__ __forceinline__ uint32_t v_even(uint32_t x, uint32_t y) {
  return __byte_perm(x, y, 0x6420);
}
__device__ __forceinline__ uint32_t v_odd(uint32_t x, uint32_t y) {
  return __byte_perm(x, y, 0x7531);
}

// O = alpha * O + P V with e4m3 P (p x 448, softmax_tile) and the e4m3 tile's V. O tile nt
// pair (2 np, 2 np + 1) holds columns o_col0 + 16 np + {even, odd}: a lane's c0, c1 of the
// pair are columns 4t .. 4t + 3 of its rows (epilogue).
template <typename V>
__device__ __forceinline__ void pv_tile_e4m3(uint32_t stage, uint32_t s_p, const float* s_alpha,
                                             float (&o)[V::kOMTiles][V::kONTiles][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = V::o_row0(warp), col0 = V::o_col0(warp);
  rescale_o<V>(s_alpha, row0, o);
  const uint32_t v_base = stage + kE4M3RowOffset + col0;
  if constexpr (V::kTokens == 32) {  // one k32 step
    uint32_t pa[V::kOMTiles][4];
#pragma unroll
    for (int mt = 0; mt < V::kOMTiles; ++mt) {
      const int row = row0 + mt * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
      ldmatrix_x4(pa[mt], s_p + row * kP8Stride + 16 * (lane / 16));
    }
#pragma unroll
    for (int np = 0; np < V::kONTiles / 2; ++np) {
      uint32_t v[4];  // X0 (tokens 0-7), Y0 (8-15), X1 (16-23), Y1 (24-31)
      ldmatrix_x4_trans(v, v_base + lane * kKVRowBytes + np * 16);
      const uint32_t e0 = v_even(v[0], v[1]), e1 = v_even(v[2], v[3]);
      const uint32_t d0 = v_odd(v[0], v[1]), d1 = v_odd(v[2], v[3]);
#pragma unroll
      for (int mt = 0; mt < V::kOMTiles; ++mt) {
        mma_e4m3_16832(o[mt][2 * np], pa[mt], e0, e1);
        mma_e4m3_16832(o[mt][2 * np + 1], pa[mt], d0, d1);
      }
    }
  } else {  // 16-token tiles: one k16 step
    static_assert(V::kTokens == 16);
    uint32_t pa[V::kOMTiles][2];
#pragma unroll
    for (int mt = 0; mt < V::kOMTiles; ++mt)
      ldmatrix_x2(pa[mt], s_p + (row0 + mt * 16 + lane % 16) * kP8Stride);
#pragma unroll
    for (int np = 0; np < V::kONTiles / 2; ++np) {
      uint32_t v[2];  // X (tokens 0-7), Y (8-15)
      ldmatrix_x2_trans(v, v_base + (lane % 16) * kKVRowBytes + np * 16);
      const uint32_t e = v_even(v[0], v[1]), d = v_odd(v[0], v[1]);
#pragma unroll
      for (int mt = 0; mt < V::kOMTiles; ++mt) {
        mma_e4m3_16816(o[mt][2 * np], pa[mt], e);
        mma_e4m3_16816(o[mt][2 * np + 1], pa[mt], d);
      }
    }
  }
}

}  // namespace treeverify::cuda::sm80
