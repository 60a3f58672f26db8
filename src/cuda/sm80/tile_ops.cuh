// The steps of the portable verify kernel, one device function each: loads, the split-K score
// product, the online softmax, P.V, and the epilogue. kernel.cuh orders them.
#pragma once

#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/arch.cuh"
#include "cuda/common/bulk_copy.cuh"
#include "cuda/common/constants.h"
#include "cuda/common/cta_work.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/common/params.h"
#include "cuda/sm80/config.h"
#include "cuda/sm80/e4m3_tile.cuh"

namespace treeverify::cuda::sm80 {

// Copies the page-table entry of each token of the tile starting at sequence token `first`
// into the ring slot `slot` (the first V::kTokens lanes, 4 bytes each; entries at or past
// `end` are not needed and not copied).
template <typename V>
__device__ __forceinline__ void load_page_ids(const VerifyKernelParams& p, uint32_t slot,
                                              int page_base, int first, int end) {
  const int t = first + static_cast<int>(threadIdx.x);
  if (threadIdx.x < V::kTokens && t < end)
    cp_async_4(slot + threadIdx.x * 4, p.kv_page_indices + page_base + (t >> p.page_shift));
}

// Copies V::kTokens KV rows from sequence token `first` (rows at or past `end` are zero
// filled, so masked probabilities multiply finite values) into one stage: 8 threads a token
// (the first 8 x kTokens threads), 9 x 16 bytes each, 128 contiguous bytes per 8 lanes.
// `page_ids` holds the tile's page-table entries (load_page_ids, already landed).
template <typename V, bool kE4M3 = false>
__device__ __forceinline__ void load_kv_tile(const VerifyKernelParams& p, uint32_t stage,
                                             const int32_t* page_ids, int first, int end) {
  if constexpr (kE4M3) {
    // Warp w copies rows w, w + 8, ... (the rows dequantize_tile has it widen, so no CTA
    // barrier stands between the copies landing and the widening): kLanesPerRow lanes a row,
    // pieces sub, sub + kLanesPerRow, ... of the row's 36 pieces of 16 bytes.
    constexpr int kPieces = kQKDim / 16, kRowsPerWarp = V::kTokens / V::kWarps;
    constexpr int kLanesPerRow = 32 / kRowsPerWarp;  // 8 (32-token tiles) or 16
    static_assert(V::kTokens % V::kWarps == 0 && 32 % kRowsPerWarp == 0);
    const int lane = static_cast<int>(threadIdx.x) % 32, sub = lane % kLanesPerRow;
    const int tok = static_cast<int>(threadIdx.x) / 32 + V::kWarps * (lane / kLanesPerRow);
    const int t = first + tok;
    const char* src = static_cast<const char*>(p.kv) + sub * 16;
    int bytes = 0;
    if (t < end) {
      const int64_t page = page_ids[tok];
      src += ((page << p.page_shift) + (t & ((1 << p.page_shift) - 1))) * kQKDim;
      bytes = 16;
    }
    const uint32_t dst = stage + tok * kKVRowBytes + kE4M3RowOffset + sub * 16;
#pragma unroll
    for (int i = 0; i < (kPieces + kLanesPerRow - 1) / kLanesPerRow; ++i)
      if (sub + i * kLanesPerRow < kPieces)
        cp_async_16(dst + i * kLanesPerRow * 16, src + i * kLanesPerRow * 16, bytes);
    return;
  }
  constexpr int kChunks = kQKDim * 2 / 16;  // 72 pieces of 16 bytes a row
  constexpr int kThreadsPerToken = 8;
  static_assert(kChunks % kThreadsPerToken == 0 && V::kTokens * kThreadsPerToken <= V::kThreads);
  if constexpr (V::kTokens * kThreadsPerToken < V::kThreads)
    if (threadIdx.x >= V::kTokens * kThreadsPerToken) return;
  const int tok = threadIdx.x / kThreadsPerToken;
  const int sub = threadIdx.x % kThreadsPerToken;
  const int t = first + tok;
  // Base addresses once; the 9 copies then differ by immediate offsets. A zero-filled row
  // reads nothing, so its source only has to be some valid address: the pool's first row.
  const char* src = static_cast<const char*>(p.kv) + sub * 16;
  int bytes = 0;
  if (t < end) {
    const int64_t page = page_ids[tok];
    src += ((page << p.page_shift) + (t & ((1 << p.page_shift) - 1))) * (kQKDim * 2);
    bytes = 16;
  }
  const uint32_t dst = stage + tok * kKVRowBytes + sub * 16;
#pragma unroll
  for (int i = 0; i < kChunks / kThreadsPerToken; ++i)
    cp_async_16(dst + i * kThreadsPerToken * 16, src + i * kThreadsPerToken * 16, bytes);
}

// The same tile by bulk copies (sm_90+), issued by warp 0, a row a lane, completing on the
// stage's mbarrier `bar` (one arrival expecting the whole tile). A row past `end` repeats the
// tile's last valid row instead of being zero filled: its probability is 0, and a row of the
// request is finite wherever the output is.
template <typename V, bool kE4M3 = false>
__device__ __forceinline__ void load_kv_tile_bulk(const VerifyKernelParams& p, uint32_t stage,
                                                  const int32_t* page_ids, int first, int end,
                                                  uint32_t bar) {
  static_assert(V::kTokens == 32, "one lane a row");
  constexpr uint32_t kRowBytes = kE4M3 ? kQKDim : kQKDim * 2;
  if constexpr (kE4M3) stage += kE4M3RowOffset;
  if (threadIdx.x >= 32) return;
  const int lane = static_cast<int>(threadIdx.x);
  if (lane == 0) mbar_arrive_expect_tx(bar, V::kTokens * kRowBytes);
  __syncwarp();
  const int tok = min(lane, end - 1 - first);
  const int t = first + tok;
  const int64_t page = page_ids[tok];
  const char* src = static_cast<const char*>(p.kv) +
                    ((page << p.page_shift) + (t & ((1 << p.page_shift) - 1))) * kRowBytes;
  bulk_copy_g2s(stage + lane * kKVRowBytes, src, kRowBytes, bar);
}

// Copies the CTA's kRows query rows into `buf` (rows past the request are zero filled) by
// cp.async, without committing them: the caller's commit closes their group.
template <typename V>
__device__ __forceinline__ void copy_q(const VerifyKernelParams& p, const CtaWork& w,
                                       uint32_t buf) {
  constexpr int kThreadsPerRow = V::kThreads / V::kRows;  // 4, 8 or 16
  constexpr int kChunks = kQKDim * 2 / 16;
  const int r = threadIdx.x / kThreadsPerRow;
  const int sub = threadIdx.x % kThreadsPerRow;
  const int gr = w.row0 + r;
  const char* src = static_cast<const char*>(p.q);
  int bytes = 0;
  if (gr < w.rows_b) {
    const int node = gr / p.num_heads, head = gr % p.num_heads;
    src += ((w.q0 + node) * p.q_stride_token + head * p.q_stride_head) * 2;
    bytes = 16;
  }
  for (int c = sub; c < kChunks; c += kThreadsPerRow)
    cp_async_16(buf + r * kKVRowBytes + c * 16, src + (bytes ? c * 16 : 0), bytes);
}

// Loads this warp's k-slice of its row group from the staged Q rows in `buf` (copy_q, landed
// and published by a barrier) into registers as mma A fragments.
template <typename V>
__device__ __forceinline__ void q_fragments(uint32_t buf, int kgroup, int rgroup,
                                            uint32_t (&qf)[V::kQKMTiles][V::kKSteps][4]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < V::kQKMTiles; ++mt) {
#pragma unroll
    for (int ks = 0; ks < V::kKSteps; ++ks) {
      const int row = (rgroup * V::kQKMTiles + mt) * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
      const int col = (kgroup * V::kKSteps + ks) * 16 + 8 * (lane / 16);
      ldmatrix_x4(qf[mt][ks], buf + row * kKVRowBytes + col * 2);
    }
  }
}

// Stores one 16-token pass of a warp's partial scores (mma accumulators of its m-tiles, rows
// from row0, tokens from tok_base) into its k-group's slice of s_red.
template <typename V>
__device__ __forceinline__ void store_partial_scores(const float (&acc)[V::kQKMTiles][2][4],
                                                     float* s_red, int kgroup, int row0,
                                                     int tok_base) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < V::kQKMTiles; ++mt) {
#pragma unroll
    for (int nt = 0; nt < 2; ++nt) {
      const int row = row0 + mt * 16 + lane / 4;
      const int col = tok_base + nt * 8 + 2 * (lane % 4);
      float* dst = s_red + (kgroup * V::kRows + row) * V::kRedStride + col;
      *reinterpret_cast<float2*>(dst) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
      *reinterpret_cast<float2*>(dst + 8 * V::kRedStride) =
          make_float2(acc[mt][nt][2], acc[mt][nt][3]);
    }
  }
}

// Partial scores of this warp's k-slice: its row group against its token group of the tile,
// 16 tokens a pass, stored in s_red.
template <typename T, typename V>
__device__ __forceinline__ void qk_partial(uint32_t stage,
                                           const uint32_t (&qf)[V::kQKMTiles][V::kKSteps][4],
                                           float* s_red, int kgroup, int sub) {
  const int lane = threadIdx.x % 32;
  const int row0 = (sub / V::kQKTokenGroups) * V::kQKMTiles * 16;
  const int tok0 = (sub % V::kQKTokenGroups) * V::kQKPasses * 16;
  // The passes (two with 64 rows of 32-token tiles) compiled as one block, so ptxas overlaps
  // the next pass's loads with this one's products (about 9% faster on V4, H200, under the
  // sm_90 and the sm_80 tables), except where that spills (TV_FITS_3_STAGE_QK_BLOCK). With
  // one m-tile a warp (2 k-groups) a pass alone has only two accumulators to interleave.
  constexpr int kUnroll = V::kStages >= 4 || V::kQKMTiles == 1 || TV_FITS_3_STAGE_QK_BLOCK
                              ? V::kQKPasses
                              : 1;
#pragma unroll kUnroll
  for (int pass = 0; pass < V::kQKPasses; ++pass) {
    const int tok_base = tok0 + pass * 16;
    float acc[V::kQKMTiles][2][4] = {};
#pragma unroll
    for (int ks = 0; ks < V::kKSteps; ++ks) {
      uint32_t kb[4];
      const int tok = tok_base + (lane % 8) + 8 * (lane / 16);
      const int col = (kgroup * V::kKSteps + ks) * 16 + 8 * ((lane / 8) % 2);
      ldmatrix_x4(kb, stage + tok * kKVRowBytes + col * 2);
#pragma unroll
      for (int mt = 0; mt < V::kQKMTiles; ++mt) {
        mma_16816<T>(acc[mt][0], qf[mt][ks], kb[0], kb[1]);
        mma_16816<T>(acc[mt][1], qf[mt][ks], kb[2], kb[3]);
      }
    }
    store_partial_scores<V>(acc, s_red, kgroup, row0, tok_base);
  }
}

// A float from shared memory, read where the code stands: the compiler cannot hoist it out of
// a loop into a register held through it.
__device__ __forceinline__ float ld_shared_volatile(const float* p) {
  float v;
  asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(v) : "r"(smem_addr(p)));
  return v;
}

// Running softmax state of one row, held identically by the kLanesPerRow lanes of the row.
struct RowState {
  float m = kNegInf;  // running max, log2 units
  float l = 0.f;      // running sum of 2^(x - m)
};

// Fast mode's P (fp8_ops.cuh): e4m3 rows of kP8Stride bytes (48: 8 rows of an ldmatrix phase
// in 8 different 16-byte bank groups), token tau of a 32-token tile at byte p8_offset(tau) =
// 16 h + 4 t + 2 a + b for tau = 16 h + 8 a + 2 t + b, the k order of pv_tile_e4m3's V
// fragments (docs/kernels/fp8-fast-mode.md, "V's byte transpose"). Pairs (b = 0, 1) stay
// adjacent.
inline constexpr int kP8Stride = 48;
__device__ __forceinline__ int p8_offset(int tau) {
  return (tau & 16) + 4 * ((tau >> 1) & 3) + 2 * ((tau >> 3) & 1) + (tau & 1);
}

// Online softmax of the tile starting at token `first`: sums the k-group partials, masks the
// sequence end and (only in tiles that reach the tree) non-ancestors, writes P in the input
// dtype (e4m3 exact mode: fp16; kFast: e4m3 of p x 448, at p8_offset) and the row's
// rescale factor. The normaliser sums the unrounded probabilities.
// `score_scale` is the factor between the products' scores and the true ones: the cache's
// kv_scale for e4m3 (the products used the stored codes) times Q's row scale (prepare_q_f16,
// quantize_q).
// kPartner: the partials summed are this CTA's at s_red and its partner's at s_red_partner,
// the same layout (the pair kernel, pair_kernel.cuh); otherwise V::kKGroups of them at s_red.
template <typename T, typename V, bool kE4M3 = false, bool kFast = false, bool kPartner = false>
__device__ __forceinline__ void softmax_tile(const VerifyKernelParams& p, const CtaWork& w,
                                             const float* s_red, T* s_p, float* s_alpha, int first,
                                             const uint32_t* mask_row, int own_node, bool row_valid,
                                             RowState& st, float score_scale = 1.f,
                                             const float* s_red_partner = nullptr) {
  const float scale_log2 = kE4M3 ? p.scale_log2 * score_scale : p.scale_log2;
  const int lane = threadIdx.x % 32;
  const int row = (threadIdx.x / 32) * V::kRowsPerWarp + lane / V::kLanesPerRow;
  const int col = (lane % V::kLanesPerRow) * V::kTokensPerLane;
  constexpr int kN = V::kTokensPerLane;
  float x[kN] = {};
  constexpr int kParts = [] {
    if constexpr (kPartner)
      return 2;
    else
      return V::kKGroups;
  }();
#pragma unroll
  for (int g = 0; g < kParts; ++g) {
#pragma unroll
    for (int j = 0; j < kN; j += 2) {
      float2 v;
      if constexpr (kPartner)
        v = *reinterpret_cast<const float2*>((g == 0 ? s_red : s_red_partner) +
                                             row * V::kRedStride + col + j);
      else
        v = *reinterpret_cast<const float2*>(s_red + (g * V::kRows + row) * V::kRedStride + col +
                                             j);
      x[j] += v.x, x[j + 1] += v.y;
    }
  }
  float tile_max = kNegInf;
  if (row_valid && first + V::kTokens <= min(w.prefix, w.tok_end)) {
    // The common tile: all prefix, all inside the chunk, so every token is visible.
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      x[j] *= scale_log2;
      tile_max = fmaxf(tile_max, x[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const int t = first + col + j;
      bool visible = row_valid && t < w.tok_end;
      if (visible && t >= w.prefix) {  // a tree token: visible iff an ancestor or itself
        const int node = t - w.prefix;
        visible = node == own_node || ((__ldg(mask_row + node / 32) >> (node % 32)) & 1u);
      }
      x[j] = visible ? x[j] * scale_log2 : kNegInf;
      tile_max = fmaxf(tile_max, x[j]);
    }
  }
#pragma unroll
  for (int off = 1; off < V::kLanesPerRow; off *= 2)
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, off));
  const float m_new = next_running_max<!kFast>(st.m, tile_max);
  // A row that has seen nothing yet keeps m = -inf; subtract 0 then so exp2 gives 0, not NaN.
  const float m_ref = m_new == kNegInf ? 0.f : m_new;
  const float alpha = fast_exp2(st.m - m_ref);
  float pr[kN], sum = 0.f;
#pragma unroll
  for (int j = 0; j < kN; ++j) {
    pr[j] = fast_exp2(x[j] - m_ref);
    sum += pr[j];
  }
#pragma unroll
  for (int off = 1; off < V::kLanesPerRow; off *= 2) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  st.l = st.l * alpha + sum;
  st.m = m_new;
  if constexpr (kFast) {
    static_assert(kP8Stride <= 2 * V::kPStride && V::kTokens <= 32);  // P's 16-bit region
    uint8_t* p8 = reinterpret_cast<uint8_t*>(s_p) + row * kP8Stride;
#pragma unroll
    for (int j = 0; j < kN; j += 2)
      *reinterpret_cast<uint16_t*>(p8 + p8_offset(col + j)) =
          pack_e4m3x2(pr[j] * kE4M3Max, pr[j + 1] * kE4M3Max);
  } else {
    using P = std::conditional_t<kE4M3, __half, T>;  // exact mode's products are fp16
#pragma unroll
    for (int j = 0; j < kN; j += 2)
      *reinterpret_cast<uint32_t*>(s_p + row * V::kPStride + col + j) = pack2<P>(pr[j], pr[j + 1]);
  }
  if (lane % V::kLanesPerRow == 0) s_alpha[row] = alpha;
}

// O = alpha * O for this warp's O tile (rows from row0), alpha from softmax_tile.
template <typename V>
__device__ __forceinline__ void rescale_o(const float* s_alpha, int row0,
                                          float (&o)[V::kOMTiles][V::kONTiles][4]) {
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int mt = 0; mt < V::kOMTiles; ++mt) {
    const float a_lo = s_alpha[row0 + mt * 16 + lane / 4];
    const float a_hi = s_alpha[row0 + mt * 16 + lane / 4 + 8];
    // alpha = exp2(m_old - m_new) is exactly 1 when no row max moved, as in most tiles once
    // the running max settles: skip the multiplies then (warp-uniform branch).
    if (!__any_sync(0xffffffffu, a_lo != 1.f || a_hi != 1.f)) continue;
#pragma unroll
    for (int nt = 0; nt < V::kONTiles; ++nt) {
      o[mt][nt][0] *= a_lo, o[mt][nt][1] *= a_lo;
      o[mt][nt][2] *= a_hi, o[mt][nt][3] *= a_hi;
    }
  }
}

// The A fragments of P's 16-bit rows (softmax_tile) for this warp's O rows from row0, tokens
// 16 ks .. 16 ks + 15.
template <typename V>
__device__ __forceinline__ void p_fragments(uint32_t s_p, int row0, int ks, int lane,
                                            uint32_t (&pa)[V::kOMTiles][4]) {
#pragma unroll
  for (int mt = 0; mt < V::kOMTiles; ++mt) {
    const int row = row0 + mt * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
    ldmatrix_x4(pa[mt], s_p + (row * V::kPStride + ks * 16 + 8 * (lane / 16)) * 2);
  }
}

// O = alpha * O + P V over this warp's O tile: rows [o_row0, +16 kOMTiles), columns
// [o_col0, +kOCols).
template <typename T, typename V>
__device__ __forceinline__ void pv_tile(uint32_t stage, uint32_t s_p, const float* s_alpha,
                                        float (&o)[V::kOMTiles][V::kONTiles][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = V::o_row0(warp), col0 = V::o_col0(warp);
  rescale_o<V>(s_alpha, row0, o);
#pragma unroll
  for (int ks = 0; ks < V::kTokens / 16; ++ks) {
    uint32_t pa[V::kOMTiles][4];
    p_fragments<V>(s_p, row0, ks, lane, pa);
#pragma unroll
    for (int np = 0; np < V::kONTiles / 2; ++np) {
      uint32_t vb[4];
      const int tok = ks * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
      const int col = col0 + np * 16 + 8 * (lane / 16);
      ldmatrix_x4_trans(vb, stage + tok * V::kRowBytes + col * 2);
#pragma unroll
      for (int mt = 0; mt < V::kOMTiles; ++mt) {
        mma_16816<T>(o[mt][2 * np], pa[mt], vb[0], vb[1]);
        mma_16816<T>(o[mt][2 * np + 1], pa[mt], vb[2], vb[3]);
      }
    }
  }
}

// Normalises by l and writes the final output (single-chunk requests) or a partial in T and
// its lse in log2 units for the combine kernel. A row that saw a non-finite value (l = NaN
// from a NaN score, or a NaN or infinity in its O) is NaN as a whole, lse included (verify.h);
// l = 0 means it saw nothing: out 0, lse -inf.
// `v_scale` is the factor between the products' O and the true one: kv_scale for e4m3, over
// 448 in fast mode (P was p x 448); `part_scale` the same without kv_scale, for a partial,
// which stays in the codes' units (the combine applies kv_scale: combine.cuh). kPermuted: O's
// columns in the order of the products on the e4m3 tile (pv_tile_e4m3_exact, pv_tile_e4m3).
// The pair kernel's CTAs hold O's columns from col_base (0 or 256) and only one writes lse.
template <typename T, typename V, bool kE4M3 = false, bool kPermuted = false>
__device__ __forceinline__ void epilogue(const VerifyKernelParams& p, const CtaWork& w,
                                         const RowState& st, float* s_inv_l, float* s_lse,
                                         const float (&o)[V::kOMTiles][V::kONTiles][4],
                                         float v_scale = 1.f, float part_scale = 1.f,
                                         int col_base = 0, bool write_lse = true) {
  // w.final_out again (kv_len <= the chunk length: the chunk is the whole sequence), from
  // values the loop keeps anyway: a register holding the flag through the loop spills the 64-row
  // variants on sm_90 and sm_100, and so does reading the chunk length (a graph plan's is in
  // memory) or kv_len again (a global round trip per CTA besides: S1 5% slower, H200).
  const bool final_out = w.tok_begin == 0 && w.tok_end == w.prefix + w.rows_b / p.num_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane % V::kLanesPerRow == 0) {
    const int row = warp * V::kRowsPerWarp + lane / V::kLanesPerRow;
    s_inv_l[row] = st.l == 0.f ? 0.f : 1.f / st.l;
    s_lse[row] = st.l == 0.f ? kNegInf : st.m + __log2f(st.l);
  }
  __syncthreads();
  // x * 0 is 0 for finite x and NaN otherwise; the warps sharing a row mark it by atomics.
#pragma unroll
  for (int mt = 0; mt < V::kOMTiles; ++mt) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      float z = 0.f;
#pragma unroll
      for (int nt = 0; nt < V::kONTiles; ++nt)
        z += o[mt][nt][2 * hi] * 0.f + o[mt][nt][2 * hi + 1] * 0.f;
      if (z != 0.f) {
        const int r = V::o_row0(warp) + mt * 16 + lane / 4 + 8 * hi;
        atomicExch(s_inv_l + r, NAN);
        atomicExch(s_lse + r, NAN);
      }
    }
  }
  __syncthreads();
  const int H = p.num_heads;
#pragma unroll
  for (int mt = 0; mt < V::kOMTiles; ++mt) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {  // fragment rows lane / 4, then 8 below
      const int r = V::o_row0(warp) + mt * 16 + lane / 4 + 8 * hi;
      const int gr = w.row0 + r;
      if (gr >= w.rows_b) continue;
      float inv_l = s_inv_l[r];
      if constexpr (kE4M3) inv_l *= final_out ? v_scale : part_scale;
      const int node = gr / H, head = gr % H;
      const int64_t grow = static_cast<int64_t>(w.q0) * H + gr;
      if constexpr (kPermuted) {
        // Tiles 2 np (even columns) and 2 np + 1 (odd): this lane's columns 4t .. 4t + 3.
        T* out_row = static_cast<T*>(p.out) + (w.q0 + node) * p.out_stride_token +
                     head * p.out_stride_head + V::o_col0(warp);
        T* part_row = static_cast<T*>(p.part_out) + (blockIdx.y * p.total_rows + grow) * kVDim +
                      V::o_col0(warp);
#pragma unroll
        for (int np = 0; np < V::kONTiles / 2; ++np) {
          const int col = np * 16 + 4 * (lane % 4);
          const float v0 = o[mt][2 * np][2 * hi] * inv_l, v1 = o[mt][2 * np + 1][2 * hi] * inv_l;
          const float v2 = o[mt][2 * np][2 * hi + 1] * inv_l;
          const float v3 = o[mt][2 * np + 1][2 * hi + 1] * inv_l;
          *reinterpret_cast<uint2*>((final_out ? out_row : part_row) + col) =
              make_uint2(pack2<T>(v0, v1), pack2<T>(v2, v3));
        }
      } else if constexpr (V::kQuadStores) {
        // Tiles 2 np and 2 np + 1: 16 adjacent columns, written by the quad together.
        T* row = final_out
                     ? static_cast<T*>(p.out) + (w.q0 + node) * p.out_stride_token +
                           head * p.out_stride_head
                     : static_cast<T*>(p.part_out) + (blockIdx.y * p.total_rows + grow) * kVDim;
        const uint32_t quad = 0xfu << (lane & ~3);
#pragma unroll
        for (int np = 0; np < V::kONTiles / 2; ++np)
          store_quad_columns<T>(
              row + V::o_col0(warp) + 16 * np,
              pack2<T>(o[mt][2 * np][2 * hi] * inv_l, o[mt][2 * np][2 * hi + 1] * inv_l),
              pack2<T>(o[mt][2 * np + 1][2 * hi] * inv_l, o[mt][2 * np + 1][2 * hi + 1] * inv_l),
              lane, quad);
      } else {
        // 2 columns a lane (half a sector a quad), each address made at its store.
#pragma unroll
        for (int nt = 0; nt < V::kONTiles; ++nt) {
          const int col = col_base + V::o_col0(warp) + nt * 8 + 2 * (lane % 4);
          const uint32_t v = pack2<T>(o[mt][nt][2 * hi] * inv_l, o[mt][nt][2 * hi + 1] * inv_l);
          if (final_out)
            *reinterpret_cast<uint32_t*>(static_cast<T*>(p.out) +
                                         (w.q0 + node) * p.out_stride_token +
                                         head * p.out_stride_head + col) = v;
          else
            *reinterpret_cast<uint32_t*>(static_cast<T*>(p.part_out) +
                                         (blockIdx.y * p.total_rows + grow) * kVDim + col) = v;
        }
      }
    }
  }
  if (write_lse && threadIdx.x < V::kRows && w.row0 + static_cast<int>(threadIdx.x) < w.rows_b) {
    const int64_t grow = static_cast<int64_t>(w.q0) * H + w.row0 + threadIdx.x;
    if (final_out) {
      if (p.lse != nullptr) p.lse[grow] = s_lse[threadIdx.x] * kLn2;
    } else {
      p.part_lse[blockIdx.y * p.total_rows + grow] = s_lse[threadIdx.x];
    }
  }
}

}  // namespace treeverify::cuda::sm80
