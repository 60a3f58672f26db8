// The sm_90a split-KV MLA tree-verify kernel: wgmma with Q, K and V in shared memory, P in
// registers (the warpgroup that scored it) or shared memory (the other one).
//
// One CTA = 64 query rows (row r of request b is node r / H, head r % H) x one chunk of that
// request's KV sequence (WgmmaTile, tile.h). A producer warpgroup copies the chunk's 64-token
// KV tiles into two shared-memory stages (cp.async, 16 bytes a thread, into wgmma's
// 128-byte-swizzle layout; a "full" mbarrier a stage says a tile has landed, an "empty" one
// that both consumer warpgroups are done with it). The two consumer warpgroups take the tiles
// in turns ("seesaw", after FlashMLA's): warpgroup g owns tiles t with t % 2 == g and
//   1. scores them, S = Q K^T (64 rows x 64 tokens: 36 wgmma m64n64k16, both operands from
//      shared memory, in accumulator chains of at most 12 steps);
//   2. runs the online softmax (fp32, log2 units; the ancestor mask only in tiles that reach
//      the tree region) against the running max the other warpgroup left after tile t - 1, and
//      hands P (16-bit) and the new max to the other warpgroup through shared memory (an
//      mbarrier a warpgroup);
//   3. O_g = alpha O_g + P V over its output columns [256 g, 256 g + 256), 4 wgmma m64n256k16
//      with P from its registers and V (N-major) from the tile.
// For the other warpgroup's tiles it waits for their P and max and runs step 3 with P from
// shared memory. So while one warpgroup runs its softmax, the tensor cores run the other's
// products, and each warpgroup's scores of its next tile run beside its last P V.
// O_g is 128 fp32 registers a thread. The epilogue is the portable kernel's contract: a
// one-chunk request writes out/lse, a split one a partial in T and its lse (log2) for the
// combine kernel, and rows that come out non-finite are recomputed exactly
// (cuda/common/nonfinite.cuh).
// On an e4m3 cache (exact mode, kE4M3) the products are fp16: the producer and the
// warpgroup that scores a tile each widen half of its codes in shared memory (operands.cuh), Q
// is rescaled a row by a power of two into fp16, the scores take that factor times kv_scale
// and O takes kv_scale: the portable kernel's exact mode (cuda/sm80/fp8_ops.cuh), on wgmma.
// In fast mode (kFast: Q and P in e4m3, the portable kernel's fast-mode contract) the products
// are e4m3 wgmma, which takes 8-bit operands K-major only: Q is rounded to codes a row with a
// scale (quantize_q_e4m3), K's codes are used as they land, and P V runs transposed, O^T +=
// V^T P^T, with V's codes taken into registers as the A operand and P's codes (p x 448) from
// shared memory: fast_operands.cuh has the layouts and the k order that makes that possible,
// and fast_pipeline.cuh the consumers' pass, whose stages are not the 16-bit kernel's.
// Figures and limits: docs/kernels/sm90-wgmma.md.
#pragma once

#include <type_traits>

#include "cuda/common/arch.cuh"
#include "cuda/common/bulk_copy.cuh"
#include "cuda/common/cta_work.cuh"
#include "cuda/common/e4m3.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/nonfinite.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/sm90/epilogue.cuh"
#include "cuda/sm90/fast_pipeline.cuh"
#include "cuda/sm90/kv_tensor_map.h"
#include "cuda/sm90/operands.cuh"
#include "cuda/sm90/softmax.cuh"
#include "cuda/sm90/tile.h"
#include "cuda/sm90/wgmma.cuh"

namespace treeverify::cuda::sm90 {

// recompute_nan_rows, which the epilogue calls, spreads a CTA's rows over its kRecomputeWarps
// warps: the consumer warps here.
static_assert(Tile::kConsumerThreads == kRecomputeWarps * 32);
// Tile t is scored by warpgroup t % 2 and lands in stage t % 2: on an e4m3 cache in exact mode a
// stage's full barrier counts the threads of one warpgroup, the same for every tile of the
// stage (the one that widens half of its rows). Fast mode has stages and barriers of its own
// (Tile::Fast, fast_pipeline.cuh).
static_assert(Tile::kStages == Tile::kWarpgroups);

// Consumer warpgroup g's pass over the chunk's tiles, O_g into o (module comment above); M is
// the products' type (the query's, or fp16 on an e4m3 cache, kE4M3). Every wgmma is waited for
// before any join of the control flow (ptxas serializes them all, C7514/C7520, when one stays in
// flight across a branch or a back edge), so both warpgroups run one copy of the loop, g a
// run-time value: the code each CTA fetches cold is half as large (V1 3.4%, S2 6% faster on the
// H200). Fast mode has a pass of its own (consume_fast, fast_pipeline.cuh).
// Warpgroup 0's first tile: on a 16-bit cache a peeled copy of the loop's second half; on an
// e4m3 cache (kFirstInLoop) the loop's first pass, whose P V of the other warpgroup's tile -1
// adds zeros (pv_theirs). In exact mode a shared copy with the peel spills 52-64 bytes; without
// the peel one copy fits (no spills): 4816 SASS instructions against 9336 for a copy a
// warpgroup (bf16 output 5608 against 10128), and S2 14%, V1 5%, D2 6% faster on the H200. The
// 16-bit kernel keeps the peel: without it V1 and V4 are 0.3-1% slower, S1 and V2 equal.
template <typename M, bool kE4M3>
__device__ __forceinline__ void consume(const VerifyKernelParams& p, const CtaWork& w, int n_tiles,
                                        uint8_t* smem, Rows& rows, float (&o)[128], int g) {
  constexpr bool kFirstInLoop = kE4M3;
  const uint32_t s_base = smem_addr(smem);
  uint8_t* s_p = smem + Tile::kPOffset;
  float* s_max = reinterpret_cast<float*>(smem + Tile::kMaxOffset);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // The operands' descriptors, built once: a k step adds a constant to the start address
  // field (addresses stay below 256 KB, so the 14-bit field never carries).
  const uint64_t q_desc = smem_desc<Swizzle::k128B>(s_base + Tile::kQOffset, 16, 1024);
  const uint64_t p_desc = smem_desc(s_base + Tile::kPOffset, 128, Tile::kPGroupBytes);
  auto plus = [](uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); };
  // This warp is done with tile t (its last product on it has completed). No branch: a wgmma
  // may be in flight (scores, below).
  auto release = [&](int t) {  // nothing for tile -1
    __syncwarp();
    mbar_arrive_if(s_base + Tile::kEmptyOffset + 8 * (t % Tile::kStages),
                   lane == 0 && (!kFirstInLoop || t >= 0));
  };
  // The mbarriers that say a warpgroup's P and max are ready: this one's, the other's.
  const uint32_t p_mine = s_base + Tile::kPReadyOffset + 8 * g;
  const uint32_t p_theirs = s_base + Tile::kPReadyOffset + 8 * (1 - g);
  // Waits until tile t has landed: the copies (generic proxy), seen through the mbarrier, for
  // wgmma (both warpgroups wait; the one that does not score the tile finds it landed).
  auto wait_tile = [&](int t) {
    mbar_wait(s_base + Tile::kFullOffset + 8 * (t % Tile::kStages), (t / Tile::kStages) & 1);
    fence_proxy_async();
  };
  auto stage = [&](int t) { return s_base + (t % Tile::kStages) * Tile::kStageBytes; };
  // e4m3: the warpgroup that scores tile t widens rows 32-63 of its codes once they have landed
  // (the producer widens rows 0-31) and arrives on its full mbarrier beside the producer.
  auto widen_own_half = [&](int t) {
    mbar_wait(s_base + Tile::kLandedOffset + 8 * (t % Tile::kStages), (t / Tile::kStages) & 1);
    widen_e4m3_rows<true>(stage(t), 1);
    fence_proxy_async();  // the fp16 rows, for wgmma's reads
    mbar_arrive(s_base + Tile::kFullOffset + 8 * (t % Tile::kStages));
  };
  // V of tile t, this warpgroup's 256 columns, N-major.
  auto v_desc = [&](int t) {
    return smem_desc<Swizzle::k128B>(stage(t) + 4 * g * Tile::kBlockBytes, Tile::kBlockBytes, 1024);
  };
  // S = Q K^T over tile t into sv; waits for every wgmma in flight. O's P V of tile `prev` may
  // run beside (prev >= 0, or kFirstInLoop's tile -1): it is waited for first, once the first
  // chain has been issued, and tile prev released then, so that the producer can refill its
  // stage while the scores run (the tile after next lands there: docs/kernels/sm90-wgmma.md).
  // The tensor cores' fp32 accumulation does not round to nearest, so no chain of k steps may be
  // deep: one 36-step chain puts 4x the portable kernel's error on lse (H200: 1.1e-5 against
  // 2.5e-6, whose mma.sync chains are 9 steps, 144 deep) and two of 18 up to 9.1e-6 (fp16). Two
  // accumulators (a third, beside O, spills): steps 0-23 alternate between them and are summed,
  // then steps 24-35 run into the second again: chains of 12, summed in fp32, at the cost of one
  // wait.
  constexpr int kNoPrev = -2;  // scores with no P V in flight (warpgroup 0's peeled tile 0)
  auto scores = [&](int t, float(&sv)[32], int prev) {
    constexpr int kSteps = kQKDim / 16, kSplit = 24;
    if constexpr (kE4M3) widen_own_half(t);
    wait_tile(t);
    const uint64_t k_desc = smem_desc<Swizzle::k128B>(stage(t), 16, 1024);
    // The k steps' descriptors are made one after the other, each from the last through an
    // opaque copy: otherwise ptxas builds all 36 up front and spills them (200 bytes).
    uint64_t qd = q_desc, kd = k_desc;
    auto qk = [&](float(&d)[32], int ks, bool accumulate) {
      wgmma_m64n64k16<M, 0>(d, qd, kd, accumulate);
      const uint32_t next = ks % 4 == 3 ? Tile::kBlockBytes - 96 : 32;
      qd = plus(qd, next);
      kd = plus(kd, next);
      asm volatile("" : "+l"(qd), "+l"(kd));
    };
    float sc[32];
    fence_accumulators(sv);
    fence_accumulators(sc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kSplit; ++ks) qk(ks % 2 ? sc : sv, ks, ks >= 2);
    wgmma_commit();
    if (prev != kNoPrev) {  // known where scores is inlined
      wgmma_wait<1>();      // the P V of prev done (committed before this chain): P's buffer
      release(prev);        // is free too, which the next "P ready" tells the other warpgroup
    }
    wgmma_wait<0>();
    fence_accumulators(sv);
    fence_accumulators(sc);
#pragma unroll
    for (int i = 0; i < 32; ++i) sv[i] += sc[i];
    fence_accumulators(sv);
    fence_accumulators(sc);
    wgmma_fence();
#pragma unroll
    for (int ks = kSplit; ks < kSteps; ++ks) qk(sc, ks, ks > kSplit);
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(sc);
#pragma unroll
    for (int i = 0; i < 32; ++i) sv[i] += sc[i];
  };
  // O = alpha O + P V for the other warpgroup's tile t, P and its max from shared memory once
  // that warpgroup has published them (mbarrier p_theirs; with named barriers, bar.arrive
  // against bar.sync, racecheck reported hazards on the epilogue's row sums). O must not be in
  // flight; left running.
  // kFirstInLoop: tile -1 (warpgroup 0's first pass through the loop) adds nothing, with no
  // branch around its wgmma (one would serialize them all, C7514). Both its waits are for parity
  // 1 of the other warpgroup's "P ready", which is still in phase 0 (that warpgroup publishes
  // its first P after this one's), so they pass; the maxima it takes over are -inf (alpha 0 on
  // an O of zeros); its products read P's buffer, zeroed in the prologue, as both P and V (V's four
  // 64-column blocks, a leading byte offset of 0 apart, and every k step on P's first 2 KB, so
  // that V's reads stay inside the 8 KB whatever extent a tool gives them): O += 0 exactly.
  auto pv_theirs = [&](int t) {
    if constexpr (kFirstInLoop) {
      const int parity = ((t + 2) / 2 + 1) & 1;  // (t / 2) & 1 for t >= 0; 1 for t = -1
      mbar_wait(t >= 0 ? s_base + Tile::kFullOffset + 8 * (t % Tile::kStages) : p_theirs, parity);
      fence_proxy_async();          // tile t has landed (wait_tile)
      mbar_wait(p_theirs, parity);  // the other warpgroup's (t / 2)-th tile
    } else {
      wait_tile(t);
      mbar_wait(p_theirs, (t / 2) & 1);  // the other warpgroup's (t / 2)-th tile
    }
    float alpha[2];
    take_their_max(rows, s_max, alpha);
    scale_o(o, alpha);
    uint64_t vd = v_desc(t);
    uint32_t v_step = 16 * 128;  // a k step's 16 tokens
    if constexpr (kFirstInLoop)
      if (t < 0) vd = smem_desc<Swizzle::k128B>(s_base + Tile::kPOffset, 0, 1024), v_step = 0;
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < Tile::kTokens / 16; ++ks)
      wgmma_m64n256k16<M, 1>(o, plus(p_desc, ks * 256), plus(vd, ks * v_step), true);
    wgmma_commit();
  };
  // P of this warpgroup's tile t (softmax_tile's pa) and the rows' max to the other warpgroup
  // (mbarrier p_mine), then O = alpha O + P V with P from registers, left running. P's buffer
  // must be free: its last reader is this warpgroup's P V of the other's tile before.
  auto pv_mine = [&](const uint32_t(&pa)[16], const float(&alpha)[2], int t) {  // 16-bit pairs
    publish_p<false>(rows, pa, s_p, s_max);
    fence_proxy_async();
    mbar_arrive(p_mine);  // releases this thread's stores
    scale_o(o, alpha);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 4; ++ks) {
      const uint32_t a[4] = {pa[4 * ks], pa[4 * ks + 1], pa[4 * ks + 2], pa[4 * ks + 3]};
      wgmma_m64n256k16_rs<M, 1>(o, a, plus(v_desc(t), 16 * ks * 128), true);
    }
    wgmma_commit();
  };
  // The P V of tile t done, and the tile released by this warp.
  auto finish = [&](int t) {
    wgmma_wait<0>();
    fence_accumulators(o);
    release(t);
  };
  auto first = [&](int t) { return w.tok_begin + t * Tile::kTokens; };

  // Everything is waited for at the end of each tile pair: ptxas serializes every wgmma
  // (C7514) when one stays in flight across a join of the control flow (a loop's back edge,
  // an if), where it moves accumulator registers.
  uint32_t pa[16];  // P of a tile in registers (pack_p)
  float sv[32], alpha[2];
  int own = g;
  if constexpr (!kFirstInLoop) {
    if (g == 0) {  // tile 0 comes first
      if (n_tiles > 0) {
        scores(0, sv, kNoPrev);
        softmax_tile<true>(p, w, sv, first(0), rows, alpha);
        pack_p<M>(sv, pa);
        pv_mine(pa, alpha, 0);
        finish(0);
      }
      own = 2;
    }
  }
  // (the other's tile own - 1, this one's): own's scores run beside the P V of own - 1.
  // (Taking them before waiting for the other warpgroup's P of own - 1 puts the copy of own,
  // whose stage own - 2 has just left, on the critical path: H200 V4 3.46 ms against 2.8.)
  for (; own < n_tiles; own += 2) {
    pv_theirs(own - 1);
    scores(own, sv, own - 1);  // waits for the P V of own - 1 and releases that tile
    fence_accumulators(o);
    softmax_tile<true>(p, w, sv, first(own), rows, alpha);
    pack_p<M>(sv, pa);
    pv_mine(pa, alpha, own);
    finish(own);
  }
  // The chunk's last tile is the other warpgroup's (kFirstInLoop, a CTA without tiles: warpgroup
  // 0 adds tile -1's zeros; the same condition written out made the 16-bit kernel's code move).
  if (own - 1 < n_tiles) {
    pv_theirs(own - 1);
    finish(own - 1);
  }
}

// T: the query's and output's type; kE4M3: an e4m3 cache, in exact mode (fp16 products) or, with
// kFast, in fast mode (e4m3 products); kTma: whole tiles inside one page copied by TMA through
// kv_maps (operands.cuh, produce).
template <typename T, bool kE4M3, bool kFast, bool kTma>
__device__ __forceinline__ void verify_cta(const VerifyKernelParams& p,
                                           const KernelMaps<kFast, kTma>& kv_maps) {
  static_assert(!kFast || kE4M3);
  constexpr bool kWiden = kE4M3 && !kFast;  // exact mode: codes widened to fp16 in the stages
  using M = std::conditional_t<kE4M3, __half, T>;
  CtaWork w;
  if (!cta_work<Tile>(p, &w)) return;
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s_base = smem_addr(smem);
  const uint32_t s_q = s_base + Tile::kQOffset;
  float* s_sum = reinterpret_cast<float*>(smem + Tile::kSumOffset);
  float* s_lse = reinterpret_cast<float*>(smem + Tile::kLseOffset);
  float* s_inv_l = reinterpret_cast<float*>(smem + Tile::kInvLOffset);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int n_tiles = (w.tok_end - w.tok_begin + Tile::kTokens - 1) / Tile::kTokens;
  if (threadIdx.x == 0) {
    // A stage's full barrier: the producer's threads, and on an e4m3 cache in exact mode the
    // threads of the consumer warpgroup that scores its tiles (tile t is warpgroup t % 2's and
    // stage t % 2's), which widen half of each tile's rows (operands.cuh). Fast mode has
    // barriers of its own (tile.h, Tile::Fast; fast_pipeline.cuh).
    constexpr int kProducers = Tile::kThreads - Tile::kConsumerThreads;
    constexpr int kWarpgroupThreads = Tile::kConsumerThreads / Tile::kWarpgroups;
    constexpr int kConsumerWarps = Tile::kConsumerThreads / 32;
    for (int g = 0; g < Tile::kWarpgroups; ++g)
      mbar_init(s_base + Tile::kPReadyOffset + 8 * g, kWarpgroupThreads);
    if constexpr (kFast) {
      for (int s = 0; s < Fast::kCodeStages; ++s) {
        mbar_init(s_base + Fast::kLandedOffset + 8 * s, kProducers);  // their cp.async landed
        // every consumer thread has taken its V (the owner after its scores)
        mbar_init(s_base + Fast::kFreeOffset + 8 * s, Tile::kConsumerThreads);
      }
    } else {
      for (int s = 0; s < Tile::kStages; ++s) {
        mbar_init(s_base + Tile::kFullOffset + 8 * s,
                  kProducers + (kWiden ? kWarpgroupThreads : 0));
        mbar_init(s_base + Tile::kEmptyOffset + 8 * s, kConsumerWarps);
        if constexpr (kE4M3)  // every producer thread arrives, by TMA or when its cp.async land
          mbar_init(s_base + Tile::kLandedOffset + 8 * s, kProducers);
      }
    }
    mbar_init_fence();
  }
  __syncthreads();  // the mbarriers; the last barrier the producer warpgroup joins
  if (warp >= Tile::kProducerWarp) {
    setmaxnreg_dec<Tile::kProducerRegisters>();
    produce<kE4M3, kFast, kTma>(p, w, n_tiles, s_base, kv_maps);
    return;
  }
  setmaxnreg_inc<Tile::kConsumerRegisters>();

  // kv_scale's load (e4m3) in flight beside Q's copies.
  const float v_scale = kE4M3 ? __ldg(p.kv_scale) : 1.f;  // O's factor
  // Fast mode: Q's 16-bit rows land where P or later tiles go (Tile::Fast), as codes beside.
  copy_q(p, w, kFast ? s_base + Fast::kQ16Offset : s_q);
  cp_async_commit();
  Rows rows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    rows.r[h] = 16 * (warp % 4) + lane / 4 + 8 * h;
    rows.valid[h] = w.row0 + rows.r[h] < w.rows_b;
    // A node always sees itself, so requests of one node (decode) never read the mask.
    rows.node[h] = rows.valid[h] ? (w.row0 + rows.r[h]) / p.num_heads : 0;
  }
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  const int wg = warp / 4;
  cp_async_wait<0>();
  // Q to fp16 (exact mode) or to e4m3 codes (fast mode) and each row's factor (in s_lse, free
  // until the epilogue), each thread on the Q units it copied; K and V are the cache's codes
  // (widened in exact mode), so the scores take kv_scale and so does O.
  if constexpr (kFast)
    quantize_q_e4m3<T>(smem + Fast::kQ16Offset, smem + Fast::kQCodesOffset, s_lse, v_scale);
  else if constexpr (kE4M3)
    prepare_q_f16<T>(smem + Tile::kQOffset, s_lse, v_scale);
  if constexpr (kWiden) {  // P's buffer zeroed and the maxima -inf: tile -1's P V (consume)
    constexpr int kPBytes = Tile::kRows / 8 * Tile::kPGroupBytes;
    static_assert(kPBytes == Tile::kConsumerThreads * 32);
    uint4* s_p = reinterpret_cast<uint4*>(smem + Tile::kPOffset) + 2 * threadIdx.x;
    s_p[0] = s_p[1] = make_uint4(0u, 0u, 0u, 0u);
    if (threadIdx.x < Tile::kRows)  // the maxima tile -1 takes over
      reinterpret_cast<float*>(smem + Tile::kMaxOffset)[threadIdx.x] = kNegInf;
  }
  fence_proxy_async();
  consumer_sync();  // Q (and its row factors), P's zeros, for every consumer and for wgmma's reads
  if constexpr (kFast) {
    // Tile -1's operands (consume_fast): its P buffer (3) zeroed, now that Q's 16-bit rows (the
    // same bytes) have left as codes, and the maxima -inf.
    static_assert(Fast::kPBytes == Tile::kConsumerThreads * 16);
    reinterpret_cast<uint4*>(smem + Fast::kPOffset + 3 * Fast::kPBytes)[threadIdx.x] =
        make_uint4(0u, 0u, 0u, 0u);
    if (threadIdx.x < Tile::kRows)
      reinterpret_cast<float*>(smem + Tile::kMaxOffset)[threadIdx.x] = kNegInf;
    fence_proxy_async();
    consumer_sync();
  }
  for (int h = 0; h < 2; ++h) rows.scale_log2[h] = p.scale_log2 * (kE4M3 ? s_lse[rows.r[h]] : 1.f);

  if constexpr (kFast) {
    consume_fast(p, w, n_tiles, smem, rows, o, wg);
  } else {
    consume<M, kE4M3>(p, w, n_tiles, smem, rows, o, wg);
  }
  // Every tile has landed and been read (each was waited for), so the stages are free: stage 0
  // (fast mode: stages of codes 0 and 1) for the rows' way out, then for the recomputed rows' O.
  // Fast mode's P was p x 448.
  constexpr float kPartScale = kFast ? 1.f / kE4M3Max : 1.f;
  epilogue<T, kFast>(p, w, rows, o, wg, v_scale * kPartScale, kPartScale, s_sum, s_lse, s_inv_l,
                     smem);
  consumer_sync();  // the epilogue's stores and its NaN rows in s_lse
  recompute_nan_rows<T, Tile, kE4M3>(p, smem, s_lse);
}

// Compiled into sm_90a code only; elsewhere a trap (dispatch never launches it there).
// A template argument, not a run-time flag, so that the cp.async instances keep the code of a
// kernel without TMA (a run-time flag makes V1, page 1, 1-2% slower on the H200).
template <typename T, bool kE4M3, bool kFast, bool kTma>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    verify_wgmma_kernel(const __grid_constant__ VerifyKernelParams p,
                        const __grid_constant__ KernelMaps<kFast, kTma> kv_maps) {
#if TV_HAS_WGMMA
  // Lets the combine kernel, launched as a programmatic dependent, be scheduled as SMs free up;
  // it waits for this whole grid (griddepcontrol.wait) before reading any partial.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  verify_cta<T, kE4M3, kFast, kTma>(p, kv_maps);
#elif TV_DEVICE_PASS
  // A constant message: printf with arguments would need a stack frame.
  printf(
      "treeverify: verify_wgmma_kernel runs only in sm_90a code; dispatch should not have "
      "launched it\n"),
      __trap();
#endif
}

}  // namespace treeverify::cuda::sm90
