// The sm_90a decode kernel: split-KV MLA verify for requests of at most 16 query rows (decode
// with H <= 16, small trees), on wgmma with the KV tokens as M and the query rows as N.
//
// Why: wgmma's M is 64, so the 64-row verify kernel (verify_wgmma.cuh) would spend 4-8x the
// tensor work on 8 or 16 rows, and the portable kernel's 16-row CTAs are bound by their
// instructions on an e4m3 cache (cuda/mma/DESIGN_NOTES.md: D1 at 0.57 of its roof). Swapping
// the operands ("swap AB") makes the tile's 64 tokens the M of every product:
//   S^T = K Q^T   36 wgmma m64n16k16, K (64 tokens x 16 values, K-major) and Q (16 rows x 16
//                 values) from shared memory, into 6 accumulators in turns;
//   O^T += V^T P^T  8 x 4 wgmma m64n16k16, V^T (64 of V's columns x 16 tokens: the tile read
//                 M-major, transposed by wgmma) and P^T (16 rows x 16 tokens) from shared memory.
// One CTA = up to 16 query rows (row r of request b is node r / H, head r % H) x one chunk of
// the request's KV sequence (DecodeTile, decode_tile.h): a producer warpgroup (the verify
// kernel's, operands.cuh: cp.async or TMA into the same 2 stages of 64-token tiles; on an
// e4m3 cache it widens rows 0-31 of each tile) and one consumer warpgroup that, a tile at a
// time, widens rows 32-63 (e4m3), scores, runs the online softmax over the tile's tokens for
// each query row (a column of S^T: the column maxima meet across the 4 warps in shared memory),
// writes P^T to shared memory and adds P V into O^T (64 fp32 registers a thread). The
// epilogue is the verify kernel's contract: out/lse for a one-chunk request, else a partial in
// T and its lse (log2) for the combine; non-finite rows are recomputed exactly
// (cuda/mma/nonfinite.cuh). An e4m3 cache (exact mode) runs as there: fp16 products, Q
// rescaled a row by a power of two, the scores taking that factor times kv_scale, O kv_scale.
// Figures and limits: DESIGN_NOTES.md beside this file.
#pragma once

#include <type_traits>

#include "cuda/common/arch.cuh"
#include "cuda/common/bulk_copy.cuh"
#include "cuda/mma/nonfinite.cuh"
#include "cuda/mma/tile_ops.cuh"
#include "cuda/sm90/decode_tile.h"
#include "cuda/sm90/operands.cuh"
#include "cuda/sm90/wgmma.cuh"

namespace treeverify::cuda::sm90 {

using DTile = DecodeTile;

// The consumer warpgroup's barrier (named barrier 1; the producer warpgroup never joins it).
__device__ __forceinline__ void decode_sync() { named_barrier_sync<1, DTile::kConsumerThreads>(); }

// Accumulator i of an m64n16 product is M index 16 (warp % 4) + lane / 4 + 8 ((i / 2) % 2) (a
// token of the tile, or a column of V's 64-column block) and query row 8 (i / 4) + 2 (lane % 4) +
// i % 2 of the CTA: the thread's column decode_col(i) of the four it holds.
__device__ __forceinline__ constexpr int decode_col(int i) { return 2 * (i / 4) + i % 2; }

// The online-softmax state of the thread's four query rows (columns of S^T).
struct DecodeCols {
  int c[4];  // the CTA's rows: 8 (q / 2) + 2 (lane % 4) + q % 2
  bool valid[4];
  int node[4];              // request-relative tree node of the row
  const uint32_t* mask[4];  // its ancestor bits
  // Running max (log2 units) O and l are relative to: the same in every thread of the column.
  float m[4] = {mma::kNegInf, mma::kNegInf, mma::kNegInf, mma::kNegInf};
  float l[4] = {0.f, 0.f, 0.f, 0.f};  // this thread's share of the running sum (its 2 tokens)
  float scale_log2[4];  // softmax scale x log2(e) (x Q's row factor x kv_scale on e4m3)
};

// The consumer warpgroup's pass over the chunk's tiles, O^T into o (o[b]: V's columns 64 b ..
// 64 b + 63); M is the products' type (the query's, or fp16 on an e4m3 cache, kE4M3). Every
// wgmma is waited for inside the tile (ptxas serializes every wgmma in flight across a loop's
// back edge, C7514).
template <typename M, bool kE4M3>
__device__ __forceinline__ void decode_consume(const VerifyKernelParams& p, const CtaWork& w,
                                               int n_tiles, uint8_t* smem, DecodeCols& cols,
                                               float (&o)[8][8]) {
  const uint32_t s_base = smem_addr(smem);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  float* s_max = reinterpret_cast<float*>(smem + DTile::kMaxOffset);
  const uint64_t q_desc = smem_desc<Swizzle::k128B>(s_base + DTile::kQOffset, 16, 1024);
  auto plus = [](uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); };
  auto stage = [&](int t) { return s_base + (t % DTile::kStages) * DTile::kStageBytes; };
  auto full = [&](int t) { return s_base + DTile::kFullOffset + 8 * (t % DTile::kStages); };
  // The tile's tokens this thread holds: tok0 and tok0 + 8.
  const int tok0 = 16 * warp + lane / 4;
  for (int t = 0; t < n_tiles; ++t) {
    const uint32_t parity = (t / DTile::kStages) & 1;
    if constexpr (kE4M3) {  // rows 32-63 of the tile's codes, beside the producer's 0-31
      mbar_wait(s_base + DTile::kLandedOffset + 8 * (t % DTile::kStages), parity);
      widen_e4m3_rows<true>(stage(t), 1);
      fence_proxy_async();  // the fp16 rows, for wgmma's reads
      mbar_arrive(full(t));
    }
    mbar_wait(full(t), parity);
    fence_proxy_async();

    // S^T = K Q^T: kChains chains of k steps taken in turns (k step ks into chain ks %
    // kChains), summed in fp32. In turns, because the tensor pipe takes wgmma in order and
    // each waits for the last one into the same accumulator: 36 steps into 3 chains one after
    // the other made every step wait (H200, 2026-12-03: D1 0.1905 ms against the portable
    // kernel's 0.1595). Short chains also keep the tensor cores' truncating fp32 accumulation
    // shallow (verify_wgmma.cuh, scores). Each descriptor is made from the last through an
    // opaque copy, so ptxas does not build all 36 up front.
    constexpr int kChains = 6;
    float sc[kChains][8];
    uint64_t kd = smem_desc<Swizzle::k128B>(stage(t), 16, 1024), qd = q_desc;
#pragma unroll
    for (int c = 0; c < kChains; ++c) fence_accumulators(sc[c]);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kQKDim / 16; ++ks) {
      wgmma_m64n16k16<M, 0, 0>(sc[ks % kChains], kd, qd, ks >= kChains);
      kd = plus(kd, ks % 4 == 3 ? DTile::kBlockBytes - 96 : 32);
      qd = plus(qd, ks % 4 == 3 ? DTile::kQBlockBytes - 96 : 32);
      asm volatile("" : "+l"(qd), "+l"(kd));
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int c = 0; c < kChains; ++c) fence_accumulators(sc[c]);
    float s[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      s[i] = sc[0][i];
#pragma unroll
      for (int c = 1; c < kChains; ++c) s[i] += sc[c][i];
    }

    // The mask (rows past the request; tokens past the chunk or, in the tree region, not the
    // row's node or an ancestor) and each column's maximum over the tile.
    const int first = w.tok_begin + t * DTile::kTokens;
    const bool plain = first + DTile::kTokens <= min(w.prefix, w.tok_end);
    float cm[4] = {mma::kNegInf, mma::kNegInf, mma::kNegInf, mma::kNegInf};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int q = decode_col(i);
      bool visible = cols.valid[q];
      if (!plain) {
        const int tk = first + tok0 + 8 * ((i / 2) % 2);
        visible = visible && tk < w.tok_end;
        if (visible && tk >= w.prefix) {
          const int node = tk - w.prefix;
          visible = node == cols.node[q] || ((__ldg(cols.mask[q] + node / 32) >> (node % 32)) & 1u);
        }
      }
      s[i] = visible ? s[i] * cols.scale_log2[q] : mma::kNegInf;
      cm[q] = fmaxf(cm[q], s[i]);
    }
    // Across the 8 lanes that share lane % 4, then across the 4 warps (two buffers by tile
    // parity: a warp writes tile t + 2's maxima only after every warp passed tile t + 1's
    // barrier, so after its reads of tile t's).
    float* red = s_max + (t % 2) * DTile::kConsumerWarps * DTile::kRows;
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      cm[q] = fmaxf(cm[q], __shfl_xor_sync(0xffffffffu, cm[q], 4));
      cm[q] = fmaxf(cm[q], __shfl_xor_sync(0xffffffffu, cm[q], 8));
      cm[q] = fmaxf(cm[q], __shfl_xor_sync(0xffffffffu, cm[q], 16));
      if (lane < 4) red[warp * DTile::kRows + cols.c[q]] = cm[q];
    }
    decode_sync();
    float alpha[4], m_ref[4];
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      float tile_max = red[cols.c[q]];
#pragma unroll
      for (int v = 1; v < DTile::kConsumerWarps; ++v)
        tile_max = fmaxf(tile_max, red[v * DTile::kRows + cols.c[q]]);
      const float m_new = fmaxf(cols.m[q], tile_max);
      // A column that has seen nothing yet keeps m = -inf and subtracts 0, so exp2 gives 0.
      m_ref[q] = m_new == mma::kNegInf ? 0.f : m_new;
      alpha[q] = mma::fast_exp2(cols.m[q] - m_ref[q]);
      cols.m[q] = m_new;
      cols.l[q] *= alpha[q];
    }
    // P = exp2(s - max): the row sums take the fp32 p's, P^T (in M) goes to shared memory at
    // (row n, token k): (n / 8) kPGroupBytes + (k / 8) 128 + (n % 8) 16 + (k % 8) 2.
    uint8_t* s_p = smem + DTile::kPOffset + (t % 2) * DTile::kPBytes;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int q = decode_col(i), h = (i / 2) % 2;
      s[i] = mma::fast_exp2(s[i] - m_ref[q]);
      cols.l[q] += s[i];
      const int n = cols.c[q], k = tok0 + 8 * h;
      *reinterpret_cast<M*>(s_p + (n / 8) * DTile::kPGroupBytes + (k / 8) * 128 + (n % 8) * 16 +
                            (k % 8) * 2) = from_float<M>(s[i]);
    }
    fence_proxy_async();  // P^T, for wgmma's reads
    decode_sync();        // every warp's part of P^T

    // O^T = alpha O^T + V^T P^T.
    if (__any_sync(0xffffffffu,
                   alpha[0] != 1.f || alpha[1] != 1.f || alpha[2] != 1.f || alpha[3] != 1.f)) {
#pragma unroll
      for (int b = 0; b < 8; ++b)
#pragma unroll
        for (int i = 0; i < 8; ++i) o[b][i] *= alpha[decode_col(i)];
    }
#pragma unroll
    for (int b = 0; b < 8; ++b) fence_accumulators(o[b]);
    // k step outside, V's column blocks inside: 8 independent products in a row (above).
    const uint64_t p_desc = smem_desc(smem_addr(s_p), 128, DTile::kPGroupBytes);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < DTile::kTokens / 16; ++ks) {
#pragma unroll
      for (int b = 0; b < kVDim / 64; ++b) {
        const uint64_t v_desc = smem_desc<Swizzle::k128B>(
            stage(t) + b * DTile::kBlockBytes + 16 * ks * 128, DTile::kBlockBytes, 1024);
        wgmma_m64n16k16<M, 1, 0>(o[b], v_desc, plus(p_desc, ks * 256), true);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int b = 0; b < 8; ++b) fence_accumulators(o[b]);
    __syncwarp();  // this warp is done with the tile
    if (lane == 0) mbar_arrive(s_base + DTile::kEmptyOffset + 8 * (t % DTile::kStages));
  }
}

// Writes O v_scale / l as the output (one-chunk requests), or O / l as a partial in T and its
// lse (log2) for the combine, which applies v_scale; a row with a non-finite value is marked
// NaN in s_lse for the recomputation (verify_wgmma.cuh's epilogue, for O^T: each thread's
// accumulators go to the rows they belong to by transposing stmatrix).
template <typename T>
__device__ __forceinline__ void decode_epilogue(const VerifyKernelParams& p, const CtaWork& w,
                                                const DecodeCols& cols, const float (&o)[8][8],
                                                float v_scale, uint8_t* smem) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  float* s_sum = reinterpret_cast<float*>(smem + DTile::kSumOffset);
  float* s_lse = reinterpret_cast<float*>(smem + DTile::kLseOffset);
  float* s_inv_l = reinterpret_cast<float*>(smem + DTile::kInvLOffset);
  // The columns' sums: over the 8 lanes that share lane % 4, then over the 4 warps.
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    float l = cols.l[q];
    l += __shfl_xor_sync(0xffffffffu, l, 4);
    l += __shfl_xor_sync(0xffffffffu, l, 8);
    l += __shfl_xor_sync(0xffffffffu, l, 16);
    if (lane < 4) s_sum[warp * DTile::kRows + cols.c[q]] = l;
  }
  decode_sync();
  if (warp == 0 && lane < 4) {  // lanes 0-3 of a warp hold the 16 columns between them
#pragma unroll
    for (int q = 0; q < 4; ++q) {
      const int c = cols.c[q];
      float l = 0.f;
      for (int v = 0; v < DTile::kConsumerWarps; ++v) l += s_sum[v * DTile::kRows + c];
      // A partial stays in the codes' units (combine.cuh); the combine applies kv_scale.
      s_inv_l[c] = l == 0.f ? 0.f : (w.final_out ? v_scale : 1.f) / l;
      s_lse[c] = l == 0.f ? mma::kNegInf : cols.m[q] + __log2f(l);
    }
  }
  decode_sync();
  // O^T v_scale / l in T, row c at smem + c kOutPitch (stage 0: every tile has been read):
  // stmatrix b stores, transposed, V-column block b's matrices (query rows 0-7 or 8-15) x (the
  // warp's 8 columns lo or hi): matrix k = lane / 8 is rows 8 (k / 2) .., columns 8 (k % 2) ..
  float inv_l[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) inv_l[q] = s_inv_l[cols.c[q]];
  const int k = lane / 8;
  const uint32_t row_addr =
      smem_addr(smem) + (8 * (k / 2) + lane % 8) * DTile::kOutPitch + (16 * warp + 8 * (k % 2)) * 2;
#pragma unroll
  for (int b = 0; b < kVDim / 64; ++b) {
    const float* a = o[b];
    stmatrix_x4_trans(row_addr + 128 * b, pack2<T>(a[0] * inv_l[0], a[1] * inv_l[1]),
                      pack2<T>(a[2] * inv_l[0], a[3] * inv_l[1]),
                      pack2<T>(a[4] * inv_l[2], a[5] * inv_l[3]),
                      pack2<T>(a[6] * inv_l[2], a[7] * inv_l[3]));
  }
  decode_sync();  // the staged rows, for every warp's copy
  // Warp v copies rows v, v + 4, ..., 8 bytes a lane (a row's 1 KB in 4 warp stores of whole
  // lines), and marks a row with a non-finite value for the recomputation.
  const int H = p.num_heads;
#pragma unroll 1
  for (int r = warp; r < DTile::kRows && w.row0 + r < w.rows_b; r += DTile::kConsumerWarps) {
    const int gr = w.row0 + r, node = gr / H, head = gr % H;
    const int64_t grow = static_cast<int64_t>(w.q0) * H + gr;
    T* out = w.final_out ? static_cast<T*>(p.out) + (w.q0 + node) * p.out_stride_token +
                               head * p.out_stride_head
                         : static_cast<T*>(p.part_out) + (blockIdx.y * p.total_rows + grow) * kVDim;
    const uint8_t* src = smem + r * DTile::kOutPitch;
    bool bad = false;
#pragma unroll
    for (int j = 0; j < kVDim / 128; ++j) {
      const uint2 v = *reinterpret_cast<const uint2*>(src + 8 * (lane + 32 * j));
      bad |= nonfinite2<T>(v.x) || nonfinite2<T>(v.y);
      *reinterpret_cast<uint2*>(out + 4 * (lane + 32 * j)) = v;
    }
    if (__any_sync(0xffffffffu, bad) && lane == 0) s_lse[r] = NAN;
  }
  decode_sync();  // the rows' marks
  const int r = static_cast<int>(threadIdx.x);
  if (r < DTile::kRows && w.row0 + r < w.rows_b) {
    const int64_t grow = static_cast<int64_t>(w.q0) * H + w.row0 + r;
    if (w.final_out) {
      if (p.lse != nullptr) p.lse[grow] = s_lse[r] * kLn2;
    } else {
      p.part_lse[blockIdx.y * p.total_rows + grow] = s_lse[r];
    }
  }
}

// T: the query's and output's type; kE4M3: an e4m3 cache in exact mode (fp16 products); kTma:
// whole tiles inside one page copied by TMA through kv_map (operands.cuh, produce).
template <typename T, bool kE4M3, bool kTma>
__device__ __forceinline__ void decode_cta(const VerifyKernelParams& p, const CUtensorMap& kv_map) {
  using M = std::conditional_t<kE4M3, __half, T>;
  CtaWork w;
  if (!mma::cta_work<DTile>(p, &w)) return;
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s_base = smem_addr(smem);
  float* s_lse = reinterpret_cast<float*>(smem + DTile::kLseOffset);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int n_tiles = (w.tok_end - w.tok_begin + DTile::kTokens - 1) / DTile::kTokens;
  if (threadIdx.x == 0) {
    // A stage's full barrier: the producer's threads and, on an e4m3 cache, the consumers,
    // which widen half of each tile's rows (operands.cuh).
    constexpr int kProducers = DTile::kThreads - DTile::kConsumerThreads;
    for (int s = 0; s < DTile::kStages; ++s) {
      mbar_init(s_base + DTile::kFullOffset + 8 * s,
                kProducers + (kE4M3 ? DTile::kConsumerThreads : 0));
      mbar_init(s_base + DTile::kEmptyOffset + 8 * s, DTile::kConsumerWarps);
      if constexpr (kE4M3)  // every producer thread arrives, by TMA or when its cp.async land
        mbar_init(s_base + DTile::kLandedOffset + 8 * s, kProducers);
    }
    mbar_init_fence();
  }
  __syncthreads();  // the mbarriers; the last barrier the producer warpgroup joins
  if (warp >= DTile::kConsumerWarps) {
    produce<kE4M3, kTma, DTile>(p, w, n_tiles, s_base, &kv_map);
    return;
  }

  const float v_scale = kE4M3 ? __ldg(p.kv_scale) : 1.f;  // O's factor (e4m3)
  copy_q<DTile::kRows, DTile::kConsumerThreads>(p, w, s_base + DTile::kQOffset);
  cp_async_commit();
  DecodeCols cols;
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    cols.c[q] = 8 * (q / 2) + 2 * (lane % 4) + q % 2;
    cols.valid[q] = w.row0 + cols.c[q] < w.rows_b;
    // A node always sees itself, so requests of one node (decode) never read the mask.
    cols.node[q] = cols.valid[q] ? (w.row0 + cols.c[q]) / p.num_heads : 0;
    cols.mask[q] = p.tree_mask + static_cast<int64_t>(w.q0 + cols.node[q]) * p.mask_words;
  }
  float o[8][8];
#pragma unroll
  for (int b = 0; b < 8; ++b)
#pragma unroll
    for (int i = 0; i < 8; ++i) o[b][i] = 0.f;
  cp_async_wait<0>();
  // Q to fp16 and each row's factor (in s_lse, free until the epilogue), each thread on the Q
  // units it copied.
  if constexpr (kE4M3)
    prepare_q_f16<T, DTile::kRows, DTile::kConsumerThreads>(smem + DTile::kQOffset, s_lse, v_scale);
  fence_proxy_async();
  decode_sync();  // Q (and its row factors), for every consumer and for wgmma's reads
#pragma unroll
  for (int q = 0; q < 4; ++q) cols.scale_log2[q] = p.scale_log2 * (kE4M3 ? s_lse[cols.c[q]] : 1.f);
  decode_consume<M, kE4M3>(p, w, n_tiles, smem, cols, o);
  decode_epilogue<T>(p, w, cols, o, v_scale, smem);
  decode_sync();  // the epilogue's stores and its NaN rows in s_lse
  mma::recompute_nan_rows<T, DTile, kE4M3, DTile::kConsumerWarps>(p, smem, s_lse);
}

// Compiled into sm_90a code only; elsewhere a trap (dispatch never launches it there).
template <typename T, bool kE4M3, bool kTma>
__global__ void __launch_bounds__(DTile::kThreads, DTile::kMinBlocks)
    decode_wgmma_kernel(const __grid_constant__ VerifyKernelParams p,
                        const __grid_constant__ CUtensorMap kv_map) {
#if TV_HAS_WGMMA
  // Lets the combine kernel, launched as a programmatic dependent, be scheduled as SMs free up;
  // it waits for this whole grid (griddepcontrol.wait) before reading any partial.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  decode_cta<T, kE4M3, kTma>(p, kv_map);
#elif TV_DEVICE_PASS
  printf(
      "treeverify: decode_wgmma_kernel runs only in sm_90a code; dispatch should not have "
      "launched it\n"),
      __trap();
#endif
}

}  // namespace treeverify::cuda::sm90
