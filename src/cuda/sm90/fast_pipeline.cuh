// EXPERIMENT (2026-12-04, measured slower than version 3 and reverted; sm90/DESIGN_NOTES.md):
// fast mode (an e4m3 cache, Q and P in e4m3, e4m3 wgmma) with a scorer warpgroup. The CTA's
// third warpgroup (warps 8-11, the producer's in the 16-bit kernel) scores every tile and runs
// its softmax; the two P V warpgroups (warps 0-7, O's columns [256 g, 256 g + 256) each) copy
// the codes three tiles ahead, transpose their own columns of each tile into V^T and run
// O += P V with P from shared memory. No fourth warpgroup: ptxas compiles a 512-thread CTA at
// 128 registers a thread whatever setmaxnreg says, and m64n256 with 128 accumulators needs 154.
// verify_wgmma.cuh has the kernel, fast_operands.cuh the layouts, tile.h WgmmaTile::Fast the
// shared-memory map.
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

// Named barriers of fast mode (the consumers' own, consumer_sync, is 1): 2 joins the P V
// warpgroups and the scorer (Q's codes before the first tile; the scorer's row sums after the
// last), 3 + g the 4 warps of P V warpgroup g (its V^T of a tile written).
constexpr int kFastJoinThreads = Tile::kConsumerThreads + 128;
__device__ __forceinline__ void fast_prologue_sync() { named_barrier_sync<2, kFastJoinThreads>(); }
__device__ __forceinline__ void fast_sums_sync() { named_barrier_sync<2, kFastJoinThreads>(); }
__device__ __forceinline__ void fast_sums_arrive() {
  asm volatile("bar.arrive 2, %0;\n" ::"n"(kFastJoinThreads) : "memory");
}
__device__ __forceinline__ void pv_warpgroup_sync(int g) {
  if (g == 0)
    named_barrier_sync<3, 128>();
  else
    named_barrier_sync<4, 128>();
}

// The barriers and buffers the three warpgroups of fast mode share (Tile::Fast's map).
struct FastPipe {
  uint32_t s_base;
  __device__ __forceinline__ uint32_t base() const {
    // A buffer's address is made where it is used, from s_base through an opaque copy: hoisted
    // out of the loop, the addresses of the stages and buffers spilled (version 3).
    uint32_t b;
    asm volatile("mov.u32 %0, %1;\n" : "=r"(b) : "r"(s_base));
    return b;
  }
  __device__ __forceinline__ uint32_t codes(int t) const {
    return base() + (t % Fast::kCodeStages) * Fast::kCodeBytes;
  }
  __device__ __forceinline__ uint32_t vt(int t) const {
    return base() + Fast::kVtOffset + (t % 2) * 2 * Fast::kVtBytes;
  }
  __device__ __forceinline__ uint32_t p_buf(int t) const {
    return base() + Fast::kPOffset + (t % 2) * Fast::kPBytes;
  }
  // Tile t's codes have landed (the producer's 128 threads), seen by wgmma's proxy.
  __device__ __forceinline__ void wait_codes(int t) const {
    mbar_wait(s_base + Fast::kLandedOffset + 8 * (t % Fast::kCodeStages),
              (t / Fast::kCodeStages) & 1);
    fence_proxy_async();
  }
  // A stage of codes is freed by the scorer's 4 warps (wgmma's reads, one arrival a warp once
  // waited for) and by every thread of the P V warpgroups once transposed (each releases its
  // own ldmatrix reads: a warp's arrival after __syncwarp is not an edge racecheck follows).
  __device__ __forceinline__ uint32_t free_bar(int t) const {
    return s_base + Fast::kFreeOffset + 8 * (t % Fast::kCodeStages);
  }
  // P of tile t (its buffer t % 2) and the rows' maxima after it are ready: the scorer's 128
  // threads; the buffer is free again: the 8 warps of the P V warpgroups, their P V done.
  __device__ __forceinline__ uint32_t p_ready(int t) const {
    return s_base + Tile::kPReadyOffset + 8 * (t % 2);
  }
  __device__ __forceinline__ uint32_t p_free(int t) const {
    return s_base + Fast::kPFreeOffset + 8 * (t % 2);
  }
  __device__ __forceinline__ float* s_max(uint8_t* smem, int t) const {
    return reinterpret_cast<float*>(smem + Tile::kMaxOffset) + (t % 2) * Tile::kRows;
  }
};

// The P V warpgroups' copies of the chunk's codes: thread pt (0-255) copies 16 codes (unit
// pt % 8) of rows pt / 8 and pt / 8 + 32 of a tile, where wgmma reads them (code_offset,
// tail_offset), by cp.async; a row past the chunk is zero-filled. Each thread announces a tile
// on its stage's "codes landed" mbarrier with a plain arrival once cp.async.wait_group has seen
// its copies land (racecheck did not follow cp.async.mbarrier.arrive to the ldmatrix readers:
// sm90/DESIGN_NOTES.md).
struct FastCopies {
  static constexpr int kRowStep = 32, kRowsEach = Tile::kTokens / kRowStep;
  const VerifyKernelParams& p;
  const CtaWork& w;
  int n_tiles, u, r0;
  int32_t ids[kRowsEach];  // the page-table entries of the next tile to copy
  __device__ __forceinline__ FastCopies(const VerifyKernelParams& p_, const CtaWork& w_, int n)
      : p(p_), w(w_), n_tiles(n) {
    const int pt = static_cast<int>(threadIdx.x);  // the P V warpgroups are threads 0-255
    u = pt % 8;
    r0 = pt / 8;
  }
  __device__ __forceinline__ void read_ids(int tile) {
#pragma unroll
    for (int i = 0; i < kRowsEach; ++i) {
      const int t = w.tok_begin + tile * Tile::kTokens + r0 + kRowStep * i;
      ids[i] = tile < n_tiles && t < w.tok_end
                   ? __ldg(p.kv_page_indices + w.page_base + (t >> p.page_shift))
                   : 0;
    }
  }
  // Tile `tile`'s copies (ids must be its entries) into `stage`, then one commit group.
  __device__ __forceinline__ void issue(int tile, uint32_t stage) {
    const int first = w.tok_begin + tile * Tile::kTokens;
#pragma unroll
    for (int i = 0; i < kRowsEach; ++i) {
      const int r = r0 + kRowStep * i;
      const int t = first + r;
      // A zero fill reads nothing, so its source offsets need no guard.
      const char* src = static_cast<const char*>(p.kv) + u * 16;
      int bytes = 0;
      if (t < w.tok_end) {
        const int64_t kv_row =
            (static_cast<int64_t>(ids[i]) << p.page_shift) + (t & ((1 << p.page_shift) - 1));
        src += kv_row * kQKDim;
        bytes = 16;
      }
#pragma unroll
      for (int j = 0; j < (kQKDim + 127) / 128; ++j) {
        const uint32_t c = 128 * j + 16 * u;
        if (j < 4)
          cp_async_16(stage + code_offset(r, c), src + 128 * j, bytes);
        else if (u < 4)
          cp_async_16(stage + tail_offset(r, c), src + 128 * j, bytes);
      }
    }
  }
};

// The scorer warpgroup's pass over the chunk's n_tiles tiles: for each, S = Q K^T in chains of
// kFastChain k32 steps summed in fp32, the online softmax (rows.m and rows.l over the whole
// chunk), and P's codes with the rows' maxima to the P V warpgroups. s_lse: Q's row factors
// (quantize_q_e4m3), read once the P V warpgroups have made them.
__device__ __forceinline__ void score_fast(const VerifyKernelParams& p, const CtaWork& w,
                                           int n_tiles, uint8_t* smem, Rows& rows,
                                           const float* s_lse) {
  const FastPipe pipe{smem_addr(smem)};
  const uint32_t s_base = pipe.s_base;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  auto plus = [](uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); };
  fast_prologue_sync();  // Q's codes and row factors, made by the P V warpgroups
  for (int h = 0; h < 2; ++h) rows.scale_log2[h] = p.scale_log2 * s_lse[rows.r[h]];
#pragma unroll 1
  for (int t = 0; t < n_tiles; ++t) {
    pipe.wait_codes(t);
    // S = Q K^T: chains of kFastChain k32 steps two at a time (steps c0 .. c0 + 3 and c0 + 4 ..
    // c0 + 7, one 128-code block each, issued in turns so that the two chains overlap in the
    // tensor pipe), summed in fp32 after each pair; the first pair's first chain runs into sv
    // itself. (With every chain in a and b and sv their sums, ptxas 13.0 dropped the first
    // pair's products and sums from the SASS: check the QGMMA count after changing this.)
    float sv[32], a[32], b[32];
    constexpr int kSteps = kQKDim / 32;
    static_assert(kFastChain == 4 && kSteps == 18, "pairs of chains of 4, then one of 2");
    // A chain's descriptors: its block's, moved 32 bytes a step (each made from the last
    // through an opaque copy: ptxas otherwise builds them all up front and spills).
    auto chain_desc = [&](int ks, uint64_t& qd, uint64_t& kd) {
      if (ks < Fast::kTailCode / 32) {
        qd = plus(codes_desc(s_base + Fast::kQCodesOffset), (ks / 4) * Tile::kBlockBytes);
        kd = plus(codes_desc(pipe.codes(t)), (ks / 4) * Tile::kBlockBytes);
      } else {
        qd = tail_desc(s_base + Fast::kQCodesOffset);
        kd = tail_desc(pipe.codes(t));
      }
    };
#pragma unroll
    for (int c0 = 0; c0 < kSteps; c0 += 2 * kFastChain) {
      const bool two = c0 + kFastChain < kSteps;
      uint64_t qa, ka, qb = 0, kb = 0;
      chain_desc(c0, qa, ka);
      if (two) chain_desc(c0 + kFastChain, qb, kb);
      fence_accumulators(sv);
      fence_accumulators(a);
      fence_accumulators(b);
      wgmma_fence();
#pragma unroll
      for (int i = 0; i < kFastChain; ++i) {
        if (c0 == 0)
          wgmma_m64n64k32_e4m3(sv, qa, ka, i > 0);
        else if (c0 + i < kSteps)
          wgmma_m64n64k32_e4m3(a, qa, ka, i > 0);
        if (two) wgmma_m64n64k32_e4m3(b, qb, kb, i > 0);
        qa = plus(qa, 32);
        ka = plus(ka, 32);
        qb = plus(qb, 32);
        kb = plus(kb, 32);
        asm volatile("" : "+l"(qa), "+l"(ka), "+l"(qb), "+l"(kb));
      }
      wgmma_commit();
      wgmma_wait<0>();
      fence_accumulators(sv);
      fence_accumulators(a);
      fence_accumulators(b);
#pragma unroll
      for (int i = 0; i < 32; ++i) {
        if (c0 > 0) sv[i] += a[i];
        if (two) sv[i] += b[i];
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(pipe.free_bar(t));  // scored: K's part of the stage
    float alpha[2];
    softmax_tile(p, w, sv, w.tok_begin + t * Tile::kTokens, rows, alpha);
    uint32_t pa[8];
    pack_p8(sv, pa);
    if (t >= 2) mbar_wait(pipe.p_free(t), (t / 2 - 1) & 1);  // P V of t - 2 done with it
    publish_p<true>(rows, pa, smem + (pipe.p_buf(t) - s_base), pipe.s_max(smem, t));
    fence_proxy_async();  // P's codes, for wgmma's reads
    mbar_arrive(pipe.p_ready(t));
  }
}

// The P V warpgroups' first copies, before Q's codes are made: tiles 0-2 (every stage free),
// one commit group each, after Q's own group; the caller waits for Q's with cp_async_wait<3>.
__device__ __forceinline__ void first_copies_fast(FastCopies& copies, uint32_t s_base) {
  const FastPipe pipe{s_base};
#pragma unroll 1
  for (int t = 0; t < Fast::kCodeStages; ++t) {
    copies.read_ids(t);
    if (t < copies.n_tiles) copies.issue(t, pipe.codes(t));
    cp_async_commit();
  }
}

// P V warpgroup g's pass over the chunk's tiles: O_g (its 256 output columns) into o. For each
// tile t: tile t + 1 announced (this thread's copies landed), V^T of its columns
// (transpose_v_half), the scorer's P and maxima, tile t + 3's copies into t's stage once it is
// scored and transposed, O rescaled, and O += P V with P and V^T from shared memory. Every
// wgmma is waited for before the loop's back edge (ptxas serializes them all, C7514, when one
// stays in flight across it).
__device__ __forceinline__ void consume_fast(FastCopies& copies, int n_tiles, uint8_t* smem,
                                             Rows& rows, float (&o)[128], int g) {
  const FastPipe pipe{smem_addr(smem)};
  const uint32_t s_base = pipe.s_base;
  const int lane = static_cast<int>(threadIdx.x) % 32;
  auto plus = [](uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); };
  auto announce = [&](int t) {
    mbar_arrive(s_base + Fast::kLandedOffset + 8 * (t % Fast::kCodeStages));
  };
  cp_async_wait<2>();  // tile 0's copies (those of 1 and 2 may fly)
  if (n_tiles > 0) announce(0);
  copies.read_ids(Fast::kCodeStages);  // tile 3's page entries, ahead of its copies
#pragma unroll 1
  for (int t = 0; t < n_tiles; ++t) {
    pipe.wait_codes(t);
    // V^T buffer t % 2's last reader, this warpgroup's P V of t - 2, was waited for by each of
    // its warps before the warpgroup barrier of t - 1.
    transpose_v_half(pipe.codes(t), pipe.vt(t), g);
    mbar_arrive(pipe.free_bar(t));  // transposed: this thread's reads of V's part
    fence_proxy_async();            // V^T, for wgmma's reads
    pv_warpgroup_sync(g);
    // Tile t + 3's copies into t's stage once the scorer has scored t and both P V warpgroups
    // have transposed it (before t's P, which comes a softmax later), and the page entries of
    // t + 4 read for the next; then tile t + 1 announced once this thread's copies landed.
    if (t + Fast::kCodeStages < n_tiles) {
      mbar_wait(pipe.free_bar(t), (t / Fast::kCodeStages) & 1);
      copies.issue(t + Fast::kCodeStages, pipe.codes(t));
    }
    cp_async_commit();
    copies.read_ids(t + Fast::kCodeStages + 1);
    cp_async_wait<2>();  // tile t + 1's copies (t + 2's and t + 3's may fly)
    if (t + 1 < n_tiles) announce(t + 1);
    mbar_wait(pipe.p_ready(t), (t / 2) & 1);
    float alpha[2];
    take_their_max(rows, pipe.s_max(smem, t), alpha);
    scale_o(o, alpha);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < Tile::kTokens / 32; ++ks)
      wgmma_m64n256k32_e4m3(o, plus(p8_desc(pipe.p_buf(t)), ks * 256),
                            plus(vt_desc(pipe.vt(t), g), ks * 256), true);
    wgmma_commit();
    wgmma_wait<0>();
    fence_accumulators(o);
    __syncwarp();
    if (lane == 0) mbar_arrive(pipe.p_free(t));
  }
  cp_async_wait<0>();
}

}  // namespace treeverify::cuda::sm90
