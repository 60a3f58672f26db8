// The consumer warpgroups' pass over a chunk in fast mode (an e4m3 cache, Q and P in e4m3, e4m3
// wgmma; verify_wgmma.cuh has the kernel, fast_operands.cuh the layouts, tile.h WgmmaTile::Fast
// the shared-memory map).
//
// Warpgroup g owns the tiles t with t % 2 == g, as in the 16-bit kernel, and holds O^T for its
// 256 columns: 4 blocks of 64 columns (M) x the 64 rows (N), so that P V is O^T += V^T P^T with
// V as the A operand, taken into registers straight from the tile's codes by ldmatrix
// (load_v_fragments), and P's codes as the B operand from shared memory, where the warpgroup that
// scored the tile left them. 8-bit wgmma operands must be K-major; V's codes are not (tokens
// are its rows), and this way no one writes V^T. Each pass of the loop (tile `own` of this
// warpgroup and `their` = own - 1 of the other) runs:
//   1. S = Q K^T of `own` in chains of kFastChain k32 steps;
//   2. the other warpgroup's P, row maxima and alphas of `their` (mbarrier), O^T rescaled,
//      `their`'s V into registers and O^T += V^T P^T over this warpgroup's columns;
//   3. the online softmax of `own`, whose P (codes), maxima and alphas go to shared memory for
//      both warpgroups (mbarrier);
//   4. once this warpgroup's P is all stored, O^T rescaled, `own`'s V into registers and
//      O^T += V^T P^T.
// Each P V is waited for where it is issued: left running beside the softmax, V's 32
// registers make ptxas spill. (Both P V after the softmax, which gives the other warpgroup
// each P one P V sooner, is slower: V4 2.04 ms against 1.97-1.98 on the H200.) A stage of
// codes is freed once both warpgroups have taken their V of it (every consumer thread
// arrives). O^T's columns are the rows, so a row's alpha reaches every thread through shared
// memory (Fast::kAlphaOffset): four buffers, so that a warpgroup's reads of tile t's alphas are
// ordered before their rewrite at t + 4 by the P-ready mbarriers (with two, only the wgmma
// between them would order them, and racecheck reports a hazard). The epilogue writes O back
// from O^T's layout.
#pragma once

#include "cuda/sm90/fast_operands.cuh"
#include "cuda/sm90/softmax.cuh"
#include "cuda/sm90/tile.h"
#include "cuda/sm90/wgmma.cuh"

namespace treeverify::cuda::sm90 {

// Fast mode's score chains, in k32 steps: Hopper's FP8 tensor cores add with about 14 bits
// kept (the DeepSeek-V3 report, section 3.3.2), so the deeper a chain the larger the scores'
// error; each chain ends in a wait, so the shorter the slower. V2 against the oracle with the
// kernel's rounding (lse, nats) and V2's time on the H200: one chain of 18, 8.8e-3; chains of
// 4, 1.9e-3 and 0.400 ms; of 2, 1.3e-3 and 0.445 ms; of 1, 6.3e-4 and 0.540 ms
// (docs/kernels/sm90-wgmma.md, "Why chains of 4").
inline constexpr int kFastChain = 4;

// O^T's block mb (columns 64 mb .. of this warpgroup's 256) as a wgmma accumulator.
__device__ __forceinline__ float (&ot_block(float (&o)[128], int mb))[32] {
  return *reinterpret_cast<float(*)[32]>(o + 32 * mb);
}

// O^T *= alpha of tile t's rows (published with its P, Fast::kAlphaOffset): accumulator i of
// each block is row 8 (i / 4) + 2 (lane % 4) + i % 2, so a thread scales 16 rows and a warp's
// threads together cover all 64; skipped when none of them moved its max (a warp-uniform
// branch, so in practice taken or skipped by every warp alike). O^T must not be in flight.
__device__ __forceinline__ void scale_ot(float (&o)[128], const float* s_alpha) {
  const int q = static_cast<int>(threadIdx.x) % 4;
  float alpha[16];
  bool moved = false;
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const float2 a = *reinterpret_cast<const float2*>(s_alpha + 8 * j + 2 * q);
    alpha[2 * j] = a.x;
    alpha[2 * j + 1] = a.y;
    moved |= a.x != 1.f || a.y != 1.f;
  }
  if (__any_sync(0xffffffffu, moved)) {
#pragma unroll
    for (int i = 0; i < 128; ++i) o[i] *= alpha[2 * ((i % 32) / 4) + i % 2];
  }
  fence_accumulators(o);
}

// Consumer warpgroup g's pass over the chunk's n_tiles tiles, O^T of its columns into o (the
// file comment). Every wgmma is waited for before any join of the control flow (ptxas
// serializes them all, C7514/C7520, when one stays in flight across a branch or a back edge).
__device__ __forceinline__ void consume_fast(const VerifyKernelParams& p, const CtaWork& w,
                                             int n_tiles, uint8_t* smem, Rows& rows,
                                             float (&o)[128], int g) {
  const uint32_t s_base = smem_addr(smem);
  float* s_max = reinterpret_cast<float*>(smem + Tile::kMaxOffset);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  auto plus = [](uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); };
  // A buffer's address is made where it is used, from s_base through an opaque copy: hoisted
  // out of the loop, the addresses of the stages and buffers spill.
  auto base = [&] {
    uint32_t b;
    asm volatile("mov.u32 %0, %1;\n" : "=r"(b) : "r"(s_base));
    return b;
  };
  auto codes = [&](int t) { return base() + (t % Fast::kCodeStages) * Fast::kCodeBytes; };
  // Tile t's P and alphas: buffer t & 3 (tile -1's, below, are buffer 3's).
  auto p_buf = [&](int t) { return Fast::kPOffset + (t & 3) * Fast::kPBytes; };
  auto alphas = [&](int t) {
    return reinterpret_cast<float*>(smem + Fast::kAlphaOffset) + (t & 3) * Tile::kRows;
  };
  auto wait_codes = [&](int t) {
    mbar_wait(s_base + Fast::kLandedOffset + 8 * (t % Fast::kCodeStages),
              (t / Fast::kCodeStages) & 1);
    fence_proxy_async();
  };
  // This thread is done with tile t's codes: its V is in registers (and, for the owner, the
  // scores have completed). Every thread arrives for its own ldmatrix reads (racecheck does
  // not follow a warp's arrival after __syncwarp to its lanes' reads: docs/kernels/sm90-wgmma.md).
  auto free_codes = [&](int t) {
    mbar_arrive(s_base + Fast::kFreeOffset + 8 * (t % Fast::kCodeStages));
  };
  // The mbarriers that say a warpgroup's P, maxima and alphas are stored: this one's, the other's.
  auto p_mine = [&] { return base() + Tile::kPReadyOffset + 8 * g; };
  auto p_theirs = [&] { return base() + Tile::kPReadyOffset + 8 * (1 - g); };

  // Step 1: S = Q K^T of tile t into sv, in chains of kFastChain k32 steps summed in fp32.
  auto scores = [&](int t, float(&sv)[32]) {
    wait_codes(t);
    uint64_t qd = codes_desc(s_base + Fast::kQCodesOffset), kd = codes_desc(codes(t));
    float sc[32];
    constexpr int kSteps = kQKDim / 32;
#pragma unroll
    for (int c0 = 0; c0 < kSteps; c0 += kFastChain) {
      fence_accumulators(sv);
      fence_accumulators(sc);
      wgmma_fence();
#pragma unroll
      for (int ks = c0; ks < c0 + kFastChain && ks < kSteps; ++ks) {
        if (ks == Fast::kTailCode / 32) {
          qd = tail_desc(s_base + Fast::kQCodesOffset);
          kd = tail_desc(codes(t));
        }
        if (c0 == 0)
          wgmma_m64n64k32_e4m3(sv, qd, kd, ks > c0);
        else
          wgmma_m64n64k32_e4m3(sc, qd, kd, ks > c0);
        const uint32_t next = ks % 4 == 3 ? Tile::kBlockBytes - 96 : 32;
        qd = plus(qd, next);
        kd = plus(kd, next);
        asm volatile("" : "+l"(qd), "+l"(kd));
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_accumulators(sv);
      fence_accumulators(sc);
      if (c0 > 0) {
#pragma unroll
        for (int i = 0; i < 32; ++i) sv[i] += sc[i];
      }
    }
  };
  // O^T += V^T P^T of tile t (V in av, P's codes in t's buffer), waited for.
  auto pv = [&](int t, const uint32_t(&av)[32]) {
    const uint64_t pd = p8_desc(s_base + p_buf(t));
    wgmma_fence();
#pragma unroll
    for (int mb = 0; mb < 4; ++mb) {
#pragma unroll
      for (int ks = 0; ks < Tile::kTokens / 32; ++ks) {
        const uint32_t a[4] = {av[8 * mb + 4 * ks], av[8 * mb + 4 * ks + 1],
                               av[8 * mb + 4 * ks + 2], av[8 * mb + 4 * ks + 3]};
        wgmma_m64n64k32_e4m3_rs(ot_block(o, mb), a, plus(pd, ks * 256), true);
      }
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(o);
  };
  // Step 2: the other warpgroup's tile t: its P, maxima and alphas once published (mbarrier),
  // O^T rescaled by its alphas, its V (t's codes landed: the other warpgroup scored them), its
  // maxima taken over by this thread's rows (l's rescale), P V. Tile -1 (warpgroup 0's first
  // pass) adds nothing, with no branch around its wgmma (one would serialize them all, C7514):
  // V is zeros, its P buffer (3) is zeroed in the prologue (verify_wgmma.cuh), O^T (zero) is not
  // rescaled, and the maxima it takes over are -inf.
  auto pv_theirs = [&](int t, uint32_t(&av)[32]) {
    if (t >= 0) {
      mbar_wait(p_theirs(), (t / 2) & 1);  // the other warpgroup's (t / 2)-th tile
      scale_ot(o, alphas(t));              // before V's registers: the scores are live here too
      wait_codes(t);
      load_v_fragments(codes(t), g, av);
      free_codes(t);
    } else {
#pragma unroll
      for (int i = 0; i < 32; ++i) av[i] = 0u;
    }
    float alpha[2];
    take_their_max(rows, s_max, alpha);
    pv(t, av);
  };
  auto first = [&](int t) { return w.tok_begin + t * Tile::kTokens; };
  // Step 3 of tile t, scored into sv: the softmax, then P, the maxima and the alphas to shared
  // memory and "P ready". The buffers' last readers (both P V of t - 4) were waited for before
  // the other warpgroup published t - 1's P, which this one has taken.
  auto softmax_own = [&](int t, float(&sv)[32]) {
    float alpha[2];
    uint32_t pa[8];
    softmax_tile<false>(p, w, sv, first(t), rows, alpha);
    pack_p8(sv, pa);
    __syncwarp();  // the quads' reads of s_max in take_their_max before their lane 0 overwrites it
    publish_p<true>(rows, pa, smem + p_buf(t), s_max);
    if (lane % 4 == 0)
      for (int h = 0; h < 2; ++h) alphas(t)[rows.r[h]] = alpha[h];
    fence_proxy_async();
    mbar_arrive(p_mine());  // releases this thread's stores
  };
  // Step 4 for this warpgroup's tile t, once all of its threads have stored their P and alphas.
  auto pv_own = [&](int t, uint32_t(&av)[32]) {
    mbar_wait(p_mine(), (t / 2) & 1);
    scale_ot(o, alphas(t));
    load_v_fragments(codes(t), g, av);
    free_codes(t);
    pv(t, av);
  };

  // Both warpgroups start in the loop: warpgroup 0's first pass takes tile -1, which adds
  // nothing, so a CTA fetches one copy of the pass.
  float sv[32];
  uint32_t av[32];
  int own = g;
  for (; own < n_tiles; own += 2) {
    scores(own, sv);
    pv_theirs(own - 1, av);
    softmax_own(own, sv);
    pv_own(own, av);
  }
  // The chunk's last tile is the other warpgroup's (a CTA without tiles: warpgroup 0 would
  // take tile -1 here, so it is left out).
  if (own > 0 && own - 1 < n_tiles) pv_theirs(own - 1, av);
}

}  // namespace treeverify::cuda::sm90
