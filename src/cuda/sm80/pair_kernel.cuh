// The pair variant's CTA (PairVariant, config.h; sm_90+): a cluster of two CTAs computes one
// 64-row block, each over half of every KV row, exchanging score partials through distributed
// shared memory. The layout, the budget and the figures: docs/kernels/portable-mma.md, "The
// pair variant".
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/bulk_copy.cuh"
#include "cuda/common/cluster.cuh"
#include "cuda/common/constants.h"
#include "cuda/common/cta_work.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/nonfinite.cuh"
#include "cuda/common/params.h"
#include "cuda/sm80/config.h"
#include "cuda/sm80/tile_ops.cuh"

namespace treeverify::cuda::sm80 {

// The byte offset, in a 16-bit KV or Q row, of piece c (16 bytes) of the 288 columns the CTA
// of rank `rank` owns: pieces 0-31 its 256 latent columns, 32-35 its 32 rope columns.
template <typename V>
__device__ __forceinline__ int pair_piece_offset(int c, uint32_t rank) {
  constexpr int kLatentPieces = V::kVCols * 2 / 16;  // 32
  return c < kLatentPieces ? static_cast<int>(rank) * V::kVCols * 2 + c * 16
                           : kVDim * 2 + static_cast<int>(rank) * V::kRopeCols * 2 +
                                 (c - kLatentPieces) * 16;
}

// Copies this CTA's 288 columns of V::kTokens KV rows from sequence token `first` into a stage
// (rows at or past `end` zero filled): 8 threads a token, latent pieces sub + 8 i and, for
// sub < 4, rope piece 32 + sub. `page_ids`: the tile's page-table entries (landed).
template <typename V>
__device__ __forceinline__ void load_pair_tile(const VerifyKernelParams& p, uint32_t stage,
                                               const int32_t* page_ids, int first, int end,
                                               uint32_t rank) {
  constexpr int kLatentPieces = V::kVCols * 2 / 16, kRopePieces = V::kRopeCols * 2 / 16;
  const int tok = threadIdx.x / 8, sub = threadIdx.x % 8;
  const int t = first + tok;
  const char* src = static_cast<const char*>(p.kv);
  int bytes = 0;
  if (t < end) {
    const int64_t page = page_ids[tok];
    src += ((page << p.page_shift) + (t & ((1 << p.page_shift) - 1))) * (kQKDim * 2);
    bytes = 16;
  }
  const uint32_t dst = stage + tok * V::kRowBytes;
#pragma unroll
  for (int c = sub; c < kLatentPieces; c += 8)
    cp_async_16(dst + c * 16, src + pair_piece_offset<V>(c, rank), bytes);
  if (sub < kRopePieces)
    cp_async_16(dst + (kLatentPieces + sub) * 16,
                src + pair_piece_offset<V>(kLatentPieces + sub, rank), bytes);
}

// Copies this CTA's 288 columns of its 64 query rows into `buf` (rows past the request zero
// filled) by cp.async, without committing them: 4 threads a row.
template <typename V>
__device__ __forceinline__ void copy_pair_q(const VerifyKernelParams& p, const CtaWork& w,
                                            uint32_t buf, uint32_t rank) {
  constexpr int kThreadsPerRow = V::kThreads / V::kRows, kPieces = V::kDepth * 2 / 16;
  const int r = threadIdx.x / kThreadsPerRow, sub = threadIdx.x % kThreadsPerRow;
  const int gr = w.row0 + r;
  const char* src = static_cast<const char*>(p.q);
  int bytes = 0;
  if (gr < w.rows_b) {
    const int node = gr / p.num_heads, head = gr % p.num_heads;
    src += ((w.q0 + node) * p.q_stride_token + head * p.q_stride_head) * 2;
    bytes = 16;
  }
  for (int c = sub; c < kPieces; c += kThreadsPerRow)
    cp_async_16(buf + r * V::kRowBytes + c * 16, src + (bytes ? pair_piece_offset<V>(c, rank) : 0),
                bytes);
}

// This warp's Q fragments: rows 16 (warp % 4) .. + 16, all 18 k-steps of the CTA's 288 columns.
template <typename V>
__device__ __forceinline__ void pair_q_fragments(uint32_t buf, uint32_t (&qf)[V::kQKSteps][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = V::score_row0(warp) + (lane % 8) + 8 * ((lane / 8) % 2);
#pragma unroll
  for (int ks = 0; ks < V::kQKSteps; ++ks)
    ldmatrix_x4(qf[ks], buf + row * V::kRowBytes + (ks * 16 + 8 * (lane / 16)) * 2);
}

// This warp's block of the CTA's score partial (rows 16 (warp % 4) .. + 16, tokens
// 16 (warp / 4) .. + 16 of the tile), stored at s_own and pushed to the same place of the
// partner's receive buffer (`remote`, completing on its mbarrier `remote_full`). Even and odd
// k-steps accumulate apart: four independent mma chains a warp instead of two.
template <typename T, typename V>
__device__ __forceinline__ void pair_scores(uint32_t stage, const uint32_t (&qf)[V::kQKSteps][4],
                                            float* s_own, uint32_t remote, uint32_t remote_full) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = V::score_row0(warp), tok0 = V::score_tok0(warp);
  float acc[2][2][4] = {};
  const uint32_t k_base =
      stage + (tok0 + (lane % 8) + 8 * (lane / 16)) * V::kRowBytes + 8 * ((lane / 8) % 2) * 2;
#pragma unroll
  for (int ks = 0; ks < V::kQKSteps; ++ks) {
    uint32_t kb[4];
    ldmatrix_x4(kb, k_base + ks * 32);
    mma_16816<T>(acc[ks % 2][0], qf[ks], kb[0], kb[1]);
    mma_16816<T>(acc[ks % 2][1], qf[ks], kb[2], kb[3]);
  }
#pragma unroll
  for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
    for (int hi = 0; hi < 2; ++hi) {
      const int at = (row0 + lane / 4 + 8 * hi) * V::kRedStride + tok0 + nt * 8 + 2 * (lane % 4);
      const float x = acc[0][nt][2 * hi] + acc[1][nt][2 * hi];
      const float y = acc[0][nt][2 * hi + 1] + acc[1][nt][2 * hi + 1];
      *reinterpret_cast<float2*>(s_own + at) = make_float2(x, y);
      st_async_f32x2(remote + at * 4, x, y, remote_full);
    }
  }
}

// One 64-row block's CTA of rank `rank` in its pair, 16-bit cache. The prologue; the loop
// (halves_loop's schedule, a group's partner partial of tile i awaited before its softmax(i),
// its tile i + 1's pushed before its P.V(i)); the epilogue of its 256 columns; then the rows
// either CTA found non-finite, recomputed, half by each.
template <typename T, typename V>
__device__ __forceinline__ void pair_cta(const VerifyKernelParams& p) {
  static_assert(V::kClusterCtas == 2 && V::kGroups == 2 && V::kStages == 3 && !V::kQuadStores);
  CtaWork w;
  if (!cta_work<V>(p, &w)) return;  // both CTAs of the pair: the same work
  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t rank = cluster_rank(), partner = rank ^ 1u;
  const uint32_t s_kv = smem_addr(smem);
  float* s_own = reinterpret_cast<float*>(smem + V::kOwnOffset);
  float* s_recv = reinterpret_cast<float*>(smem + V::kRecvOffset);  // [2][rows][kRedStride]
  T* s_p = reinterpret_cast<T*>(smem + V::kPOffset);
  const uint32_t s_p_addr = smem_addr(s_p);
  float* s_alpha = reinterpret_cast<float*>(smem + V::kAlphaOffset);
  float* s_lse = reinterpret_cast<float*>(smem + V::kLseOffset);
  const int32_t* s_idx = reinterpret_cast<const int32_t*>(smem + V::kIdxOffset);
  const uint32_t s_idx_addr = smem_addr(s_idx);
  // full[b]: the partner's partial has landed in receive buffer b (one local arrival with the
  // bytes expected, the partner's st.async completing them); empty[b]: the partner has read
  // what this CTA pushed into its buffer b (one arrival from each of the partner's warps).
  // Each group of 4 warps (rows 32 g .. + 32) has barriers of its own.
  constexpr int kGroupThreads = V::kThreads / V::kGroups;
  constexpr uint32_t kGroupTx = V::kScoreTxBytes / V::kGroups;
  const int group = static_cast<int>(threadIdx.x) / kGroupThreads;
  auto full = [&](int b) { return s_kv + V::kBarOffset + 8 * (2 * group + b); };
  auto empty = [&](int b) { return s_kv + V::kBarOffset + 32 + 8 * (2 * group + b); };
  if (threadIdx.x % kGroupThreads == 0) {
    for (int b = 0; b < 2; ++b) {
      mbar_init(full(b), 1);
      mbar_init(empty(b), V::kWarps / V::kGroups);
    }
    mbar_init_fence();
    mbar_arrive_expect_tx(full(0), kGroupTx);  // tiles 0 and 1
    mbar_arrive_expect_tx(full(1), kGroupTx);
  }
  // The partner's receive buffers and barriers: its shared memory window keeps the offsets.
  const uint32_t partner_recv = cluster_map(smem_addr(s_recv), partner);
  const uint32_t partner_bar = cluster_map(s_kv + V::kBarOffset, partner);
  auto partner_full = [&](int b) { return partner_bar + 8 * (2 * group + b); };
  auto partner_empty = [&](int b) { return partner_bar + 32 + 8 * (2 * group + b); };

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  constexpr int kIdxAhead = V::kStages - 1;
  const int n_tiles = (w.tok_end - w.tok_begin + V::kTokens - 1) / V::kTokens;
  auto stage_of = [&](int tile) { return s_kv + (tile % V::kStages) * V::kStageBytes; };
  auto ids_slot = [&](int tile) { return (tile % V::kStages) * V::kTokens; };
  auto load_ids = [&](int tile) {
    if (tile < n_tiles)
      load_page_ids<V>(p, s_idx_addr + ids_slot(tile) * 4, w.page_base,
                       w.tok_begin + tile * V::kTokens, w.tok_end);
  };
  auto load = [&](int tile) {
    if (tile < n_tiles)
      load_pair_tile<V>(p, stage_of(tile), s_idx + ids_slot(tile), w.tok_begin + tile * V::kTokens,
                        w.tok_end, rank);
    load_ids(tile + kIdxAhead);
    cp_async_commit();  // always, so the group count per tile stays uniform
  };
  // The prologue: the first tiles' page-table entries, then Q into stages 1-2; tile 0's rows
  // once the entries have landed; Q's fragments, then tile 1 into the stage Q leaves.
  for (int t = 0; t < kIdxAhead; ++t) load_ids(t);
  cp_async_commit();
  copy_pair_q<V>(p, w, s_kv + V::kQOffset, rank);
  cp_async_commit();
  cp_async_wait<1>();  // the entries
  __syncthreads();
  load(0);
  cp_async_wait<1>();  // Q
  __syncthreads();
  uint32_t qf[V::kQKSteps][4];
  pair_q_fragments<V>(s_kv + V::kQOffset, qf);
  // Q's buffer becomes stage 1; and the partner's barriers are initialised before this CTA
  // pushes into them (the cluster barrier also serves as this CTA's barrier).
  cluster_sync();
  load(1);

  float o[V::kOMTiles][V::kONTiles][4] = {};
  const int sm_row = warp * V::kRowsPerWarp + lane / V::kLanesPerRow;
  const bool row_valid = w.row0 + sm_row < w.rows_b;
  const int own_node = row_valid ? (w.row0 + sm_row) / p.num_heads : 0;
  const uint32_t* mask_row = p.tree_mask + static_cast<int64_t>(w.q0 + own_node) * p.mask_words;
  RowState st;
  // Tile `tile`'s partial, pushed into the partner's buffer tile % 2 once the partner has read
  // what was pushed there two tiles before.
  auto scores = [&](int tile) {
    const int b = tile % 2;
    if (tile >= 2) mbar_wait(empty(b), (tile / 2 - 1) & 1);
    pair_scores<T, V>(stage_of(tile), qf, s_own, partner_recv + b * V::kScoreBytes,
                      partner_full(b));
  };
  // Waits for the partner's partial of `tile`, runs the softmax on the sum, frees the buffer
  // for the partner's tile + 2 and expects its bytes.
  auto softmax = [&](int tile) {
    const int b = tile % 2;
    mbar_wait(full(b), (tile / 2) & 1);
    softmax_tile<T, V, false, false, true>(p, w, s_own, s_p, s_alpha, w.tok_begin + tile * V::kTokens,
                                        mask_row, own_node, row_valid, st, 1.f,
                                        s_recv + b * (V::kScoreBytes / 4));
    __syncwarp();
    if (lane == 0) mbar_arrive_cluster(partner_empty(b));
    if (threadIdx.x % kGroupThreads == 0 && tile + 2 < n_tiles)
      mbar_arrive_expect_tx(full(b), kGroupTx);
  };
  auto pv = [&](int tile) { pv_tile<T, V>(stage_of(tile), s_p_addr, s_alpha, o); };
  cp_async_wait<1>();  // tile 0
  __syncthreads();
  scores(0);
  // halves_loop's schedule (kernel.cuh): group A runs scores(i + 1) + P.V(i), its barrier,
  // softmax(i + 1); group B softmax(i), its barrier, scores(i + 1) + P.V(i); one CTA
  // barrier a tile, after which tile i + 2 has landed.
  const bool half_a = group == 0;
  if (half_a) {
    named_barrier_sync<1, kGroupThreads>();
    softmax(0);
  }
  cp_async_wait<0>();  // tile 1
  __syncthreads();     // X(0)
  for (int tile = 0; tile < n_tiles; ++tile) {
    load(tile + V::kStages - 1);
    if (half_a) {
      if (tile + 1 < n_tiles) scores(tile + 1);
      pv(tile);
      named_barrier_sync<1, kGroupThreads>();  // s_own_A holds tile + 1's; P_A(tile) consumed
      if (tile + 1 < n_tiles) softmax(tile + 1);
    } else {
      softmax(tile);
      named_barrier_sync<2, kGroupThreads>();  // P_B(tile) visible; s_own_B consumed
      if (tile + 1 < n_tiles) scores(tile + 1);
      pv(tile);
    }
    cp_async_wait<0>();  // tile + 2 has landed
    __syncthreads();     // X(tile + 1)
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is past its last read of s_alpha, which the epilogue reuses
  epilogue<T, V>(p, w, st, s_alpha, s_lse, o, 1.f, 1.f, static_cast<int>(rank) * V::kVCols,
                 rank == 0);
  // A row is non-finite if either CTA's columns are: each takes the partner's marks (lse NaN
  // in s_lse), after both epilogues, whose stores the recomputation then overwrites.
  cluster_sync();
  float partner_lse = 0.f;
  if (threadIdx.x < V::kRows)
    partner_lse = ld_shared_cluster(cluster_map(smem_addr(s_lse + threadIdx.x), partner));
  cluster_sync();  // the last access to the partner's shared memory: either may exit after it
  if (threadIdx.x < V::kRows && isnan(partner_lse)) s_lse[threadIdx.x] = NAN;
  // A CTA barrier would do: the marks and their reads below are this CTA's own. racecheck
  // (CUDA 13.0, H100) reported that pair as a hazard under a CTA barrier, as if the two CTAs'
  // s_lse were one; a cluster barrier orders it cluster-wide, at the price of one more of them.
  cluster_sync();
  recompute_nan_rows<T, V, false>(p, smem, s_lse, static_cast<int>(rank), 2);
}

}  // namespace treeverify::cuda::sm80
