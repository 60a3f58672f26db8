// The consumer warpgroups' pass over a chunk in fast mode (an e4m3 cache, Q and P in e4m3, e4m3
// wgmma; verify_wgmma.cuh has the kernel, fast_operands.cuh the layouts, tile.h WgmmaTile::Fast
// the shared-memory map).
//
// Warpgroup g owns the tiles t with t % 2 == g, as in the 16-bit kernel, but a tile's codes and
// its V^T live apart: three stages of codes (freed once the tile is scored by its owner and
// transposed by the other warpgroup) and two V^T buffers (freed after the owner's P V). So the
// scores of a warpgroup's tile need nothing from the other warpgroup, and each pass of the loop
// (tile `own` of this warpgroup and `their` = own - 1 of the other) runs:
//   1. V^T of `their` (this warpgroup transposes the other's tiles), then S = Q K^T of `own` in
//      chains of kFastChain k32 steps;
//   2. the other warpgroup's P and row maxima of `their` (mbarrier), O rescaled, and
//      O += P V over this warpgroup's 256 columns, left running beside
//   3. the online softmax of `own`, whose P (codes) and maxima go to the other warpgroup;
//   4. O += P V of `own`, P from registers, once the other warpgroup has written its V^T.
// What each step waits for is one barrier of its own; the only hand-off on the critical path of
// a tile is the softmax's, where before it was the other warpgroup's P V and the scores as well.
#pragma once

#include "cuda/sm90/fast_operands.cuh"
#include "cuda/sm90/softmax.cuh"
#include "cuda/sm90/tile.h"
#include "cuda/sm90/wgmma.cuh"

namespace treeverify::cuda::sm90 {

// Fast mode's score chains, in k32 steps: Hopper's FP8 tensor cores add with about 14 bits
// kept (the DeepSeek-V3 report, section 3.3.2), so the deeper a chain the larger the scores'
// error; each chain ends in a wait, so the shorter the slower. H200, 2026-12-03, V2 against
// the oracle with the kernel's rounding (lse, nats) and V2's time: one chain of 18, 8.8e-3;
// chains of 4, 1.9e-3 and 0.400 ms; of 2, 1.3e-3 and 0.445 ms; of 1, 6.3e-4 and 0.540 ms
// (cuda/sm90/DESIGN_NOTES.md, "Fast mode").
inline constexpr int kFastChain = 4;

// Consumer warpgroup g's pass over the chunk's n_tiles tiles, O_g into o (the file comment).
// Every wgmma is waited for before any join of the control flow (ptxas serializes them all,
// C7514/C7520, when one stays in flight across a branch or a back edge), except across the
// softmax (step 3), whose branch issues none.
__device__ __forceinline__ void consume_fast(const VerifyKernelParams& p, const CtaWork& w,
                                             int n_tiles, uint8_t* smem, Rows& rows,
                                             float (&o)[128], int g) {
  const uint32_t s_base = smem_addr(smem);
  float* s_max = reinterpret_cast<float*>(smem + Tile::kMaxOffset);
  const int lane = static_cast<int>(threadIdx.x) % 32;
  auto plus = [](uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); };
  // A buffer's address is made where it is used, from s_base through an opaque copy: hoisted
  // out of the loop, the addresses of the three stages and two V^T buffers spilled.
  auto base = [&] {
    uint32_t b;
    asm volatile("mov.u32 %0, %1;\n" : "=r"(b) : "r"(s_base));
    return b;
  };
  auto codes = [&](int t) { return base() + (t % Fast::kCodeStages) * Fast::kCodeBytes; };
  // Tile t's V^T and P buffers: t & 1 (tile -1's, below, are buffer 1's).
  auto vt = [&](int t) { return base() + Fast::kVtOffset + (t & 1) * 2 * Fast::kVtBytes; };
  auto p_buf = [&](int t) { return Fast::kPOffset + (t & 1) * Fast::kPBytes; };
  // This warp's arrival on one of the barriers that count warps (a stage of codes, a V^T buffer).
  auto warp_arrive = [&](uint32_t barrier) {
    __syncwarp();
    if (lane == 0) mbar_arrive(s_base + barrier);
  };
  auto wait_codes = [&](int t) {
    mbar_wait(s_base + Fast::kLandedOffset + 8 * (t % Fast::kCodeStages),
              (t / Fast::kCodeStages) & 1);
    fence_proxy_async();
  };
  // A stage of codes is freed by its owner's 4 warps once scored (wgmma's reads: one arrival a
  // warp) and by every thread of the other warpgroup once transposed: each releases its own
  // ldmatrix reads (a warp's arrival after __syncwarp is not an edge racecheck follows; it
  // reported the producer's next copies racing with them: sm90/DESIGN_NOTES.md).
  auto free_scored = [&](int t) { warp_arrive(Fast::kFreeOffset + 8 * (t % Fast::kCodeStages)); };
  auto free_transposed = [&](int t) {
    mbar_arrive(s_base + Fast::kFreeOffset + 8 * (t % Fast::kCodeStages));
  };
  auto wait_vt = [&](int t) {
    mbar_wait(s_base + Fast::kVtFullOffset + 8 * (t % 2), (t / 2) & 1);
    fence_proxy_async();
  };
  // V^T of tile t, written by this warpgroup: its buffer's last tile (t - 2, the other
  // warpgroup's) must be through the other's P V first.
  auto wait_vt_free = [&](int t) {
    if (t >= 2) mbar_wait(s_base + Fast::kVtFreeOffset + 8 * (t % 2), (t / 2 - 1) & 1);
  };
  auto publish_vt = [&](int t) {
    fence_proxy_async();  // V^T, for wgmma's reads (this warpgroup's and the other's)
    mbar_arrive(s_base + Fast::kVtFullOffset + 8 * (t % 2));
    free_transposed(t);
  };
  // The mbarriers that say a warpgroup's P and max are ready: this one's, the other's.
  auto p_mine = [&] { return base() + Tile::kPReadyOffset + 8 * g; };
  auto p_theirs = [&] { return base() + Tile::kPReadyOffset + 8 * (1 - g); };

  // Step 1: with `transpose`, tile `their`'s V^T; then S = Q K^T of tile t into sv, in chains of
  // kFastChain k32 steps summed in fp32. Frees `their`'s codes (this warpgroup's part) once
  // transposed, and t's once scored. (The transposition a column group between each chain's
  // issue and its wait spilled 136 bytes: sv, sc and O are 192 registers.)
  auto scores = [&](int t, float(&sv)[32], bool transpose, int their) {
    if (transpose) {
      wait_vt_free(their);
      wait_codes(their);
      transpose_v(codes(their), vt(their));
      publish_vt(their);
    }
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
    free_scored(t);
  };
  // Step 2: O = alpha O + P V for the other warpgroup's tile t (its P and max from shared
  // memory once published), left running. Tile -1 (warpgroup 0's first pass) adds nothing, with
  // no branch around its wgmma (one would serialize them all, C7514): both its waits are for
  // parity 1 of the other warpgroup's "P ready", still in phase 0 (that warpgroup's first P
  // comes after this one's), the maxima it takes over are -inf (alpha 0 on an O of zeros), and
  // its P and V^T are buffer 1's, zeroed in the prologue (verify_wgmma.cuh): O += 0 exactly.
  auto pv_theirs = [&](int t) {
    if (t >= 0) mbar_wait(p_theirs(), (t / 2) & 1);  // the other warpgroup's (t / 2)-th tile
    float alpha[2];
    take_their_max(rows, s_max, alpha);
    scale_o(o, alpha);
    if (t >= 0) wait_vt(t);  // this warpgroup's own V^T, from all of its threads
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < Tile::kTokens / 32; ++ks)
      wgmma_m64n256k32_e4m3(o, plus(p8_desc(s_base + p_buf(t)), ks * 256),
                            plus(vt_desc(vt(t), g), ks * 256), true);
    wgmma_commit();
  };
  // Step 4: O = alpha O + P V of this warpgroup's tile t, P from registers, once the other
  // warpgroup has written t's V^T; waited for, and t's V^T buffer freed.
  auto pv_mine = [&](const uint32_t(&pa)[8], const float(&alpha)[2], int t) {
    wait_vt(t);
    scale_o(o, alpha);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      const uint32_t a[4] = {pa[4 * ks], pa[4 * ks + 1], pa[4 * ks + 2], pa[4 * ks + 3]};
      wgmma_m64n256k32_e4m3_rs(o, a, plus(vt_desc(vt(t), g), ks * 256), true);
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(o);
    warp_arrive(Fast::kVtFreeOffset + 8 * (t % 2));
  };
  auto first = [&](int t) { return w.tok_begin + t * Tile::kTokens; };
  // Steps 3 and 4 of tile t, scored into sv: the softmax, P to the other warpgroup (its buffer's
  // last reader, the other's P V of t - 2, was waited for before it published t - 1's), P V.
  auto finish_own = [&](int t, float(&sv)[32]) {
    float alpha[2];
    uint32_t pa[8];
    softmax_tile(p, w, sv, first(t), rows, alpha);
    pack_p8(sv, pa);
    // Step 2's P V, before this warpgroup's P is published: the other warpgroup's answer to it
    // is the P that goes into the buffer step 2 read (waited for after the publication, the
    // other warpgroup's next P could overwrite that buffer under the P V; and no faster: H200,
    // 2026-12-03, V4 2.236-2.238 ms against 2.251).
    wgmma_wait<0>();
    fence_accumulators(o);
    __syncwarp();  // the quads' reads of s_max in pv_theirs before their lane 0 overwrites it
    publish_p<true>(rows, pa, smem + p_buf(t), s_max);
    fence_proxy_async();
    mbar_arrive(p_mine());  // releases this thread's stores
    pv_mine(pa, alpha, t);
  };

  // Both warpgroups start in the loop: warpgroup 0's first pass has no tile of the other's to
  // transpose and multiplies tile -1's zeros (pv_theirs), so a CTA fetches one copy of the
  // pass (a peeled first tile was a second one, fetched cold).
  float sv[32];
  int own = g;
  for (; own < n_tiles; own += 2) {
    scores(own, sv, own > 0, own - 1);
    pv_theirs(own - 1);
    finish_own(own, sv);
  }
  // The chunk's last tile is the other warpgroup's (a CTA without tiles: warpgroup 0 would
  // transpose tile -1 here, so it is left out).
  if (own > 0 && own - 1 < n_tiles) {
    const int t = own - 1;
    wait_vt_free(t);
    wait_codes(t);
    transpose_v(codes(t), vt(t));
    publish_vt(t);
    pv_theirs(t);
    wgmma_wait<0>();
    fence_accumulators(o);
  }
}

}  // namespace treeverify::cuda::sm90
