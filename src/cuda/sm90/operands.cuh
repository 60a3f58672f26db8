// The wgmma verify kernel's operands in shared memory (verify_wgmma.cuh): where a row's values
// lie in a Q or KV tile (wgmma's 128-byte swizzle, tile.h), Q staged by the consumer threads
// (and, on an e4m3 cache, rescaled into fp16 or, in fast mode, rounded to e4m3 codes), and the
// KV tiles copied by the producer warpgroup (and e4m3 codes widened into fp16 where they
// landed; fast mode's operands: fast_operands.cuh).
#pragma once

#include <cuda.h>

#include <type_traits>

#include "cuda/common/arch.cuh"
#include "cuda/common/bulk_copy.cuh"
#include "cuda/common/cta_work.cuh"
#include "cuda/common/e4m3.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/sm90/fast_operands.cuh"
#include "cuda/sm90/kv_tensor_map.h"
#include "cuda/sm90/tile.h"
#include "cuda/sm90/wgmma.cuh"

namespace treeverify::cuda::sm90 {

using Tile = WgmmaTile;

// Where 16-byte unit u (values 8 u .. 8 u + 7) of 64-value block kb of row r lies in a Q or
// KV tile (tile.h: the 128-byte swizzle).
__device__ __forceinline__ uint32_t tile_offset(int r, int kb, int u) {
  return kb * Tile::kBlockBytes + r * 128 + ((u ^ (r & 7)) << 4);
}

// The CTA's 64 query rows, rows past the request zero filled, by the consumer threads: thread
// t copies unit t % 8 of every block of rows t / 8 and t / 8 + 32, so the 8 threads of a row
// copy its 128 contiguous bytes and a warp's instruction fills 4 whole rows. Not committed.
__device__ __forceinline__ void copy_q(const VerifyKernelParams& p, const CtaWork& w,
                                       uint32_t dst) {
  const int tid = static_cast<int>(threadIdx.x);
  const int u = tid % 8;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = tid / 8 + 32 * i, gr = w.row0 + r;
    const char* src = static_cast<const char*>(p.q);  // a zero fill reads nothing
    int bytes = 0;
    if (gr < w.rows_b) {
      const int node = gr / p.num_heads, head = gr % p.num_heads;
      src += ((w.q0 + node) * p.q_stride_token + head * p.q_stride_head) * 2;
      bytes = 16;
    }
#pragma unroll
    for (int kb = 0; kb < kQKDim / 64; ++kb)
      cp_async_16(dst + tile_offset(r, kb, u), src + (bytes ? kb * 128 + u * 16 : 0), bytes);
  }
}

// Exact mode on an e4m3 cache: rewrites the CTA's landed 16-bit Q rows in place as fp16 (the
// products' type) and row r's factor back to the true scores, times `kv_scale`, in s_scale[r]
// (the portable kernel's rule, cuda/sm80/fp8_ops.cuh prepare_q_f16): bf16 rows are multiplied
// by 2^s, the power of two that brings the row's largest magnitude into [2^14, 2^15)
// (exact_q_shift, cuda/common/fp8_convert.h), then rounded to fp16, which holds every bf16
// value of the row exactly down to 2^-38 of its largest; s_scale[r] = 2^-s kv_scale. A row with a
// NaN or infinity keeps s = 0 and ends NaN (its recomputation is exact). fp16 rows keep their
// values. Thread t rewrites exactly the units copy_q gave it (unit t % 8 of each block of rows
// t / 8 and t / 8 + 32), held in registers from its read to its write, so its own cp.async wait
// is all it needs first; the 8 lanes of a row meet by shuffles. The caller publishes the rows
// and scales.
template <typename T>
__device__ __forceinline__ void prepare_q_f16(uint8_t* s_q, float* s_scale, float kv_scale) {
  constexpr int kBlocks = kQKDim / 64;
  const int tid = static_cast<int>(threadIdx.x), u = tid % 8;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = tid / 8 + 32 * i;
    int s = 0;
    if constexpr (!std::is_same_v<T, __half>) {
      uint4 v[kBlocks];
      // The largest magnitude's bits (bf16 magnitudes order as unsigned integers).
      uint32_t amax = 0;
#pragma unroll
      for (int kb = 0; kb < kBlocks; ++kb) {
        v[kb] = *reinterpret_cast<const uint4*>(s_q + tile_offset(r, kb, u));
        for (uint32_t x : {v[kb].x, v[kb].y, v[kb].z, v[kb].w})
          amax = max(amax, max(x & 0x7fffu, (x >> 16) & 0x7fffu));
      }
#pragma unroll
      for (int off = 1; off < 8; off *= 2)
        amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, off));
      s = exact_q_shift(amax);
      const float up = __uint_as_float(static_cast<uint32_t>(127 + s) << 23);
#pragma unroll
      for (int kb = 0; kb < kBlocks; ++kb) {
        for (uint32_t* x : {&v[kb].x, &v[kb].y, &v[kb].z, &v[kb].w}) {
          const T* two = reinterpret_cast<const T*>(x);
          *x = pack2<__half>(to_float(two[0]) * up, to_float(two[1]) * up);
        }
        *reinterpret_cast<uint4*>(s_q + tile_offset(r, kb, u)) = v[kb];
      }
    }
    if (u == 0) s_scale[r] = __uint_as_float(static_cast<uint32_t>(127 - s) << 23) * kv_scale;
  }
}

// Rewrites the CTA's landed 16-bit Q rows (copy_q) as e4m3 codes in fast mode's layout, with
// row r's scale times kv_scale in s_scale[r] (the portable kernel's rule, cuda/sm80/fp8_ops.cuh
// quantize_q, and the oracle's, core/fp8_rounding.h: inv = 448 / amax capped at 2^126, code =
// e4m3(q x inv), scale = 1 / inv; a NaN or infinity leaves NaN codes, so the row ends NaN and is
// recomputed). Thread t holds unit t % 8 of each block of rows t / 8 and t / 8 + 32 (copy_q's
// units, so its own cp.async wait is all it needs first); the 8 lanes of a row meet by
// shuffles. The codes go to s_codes (Fast::kQCodesOffset: apart from the 16-bit rows, so no
// barrier between the reads and the writes). The caller publishes the codes (proxy fence and
// barrier).
template <typename T>
__device__ __forceinline__ void quantize_q_e4m3(const uint8_t* s_q, uint8_t* s_codes,
                                                float* s_scale, float kv_scale) {
  constexpr int kBlocks = kQKDim / 64;
  const int tid = static_cast<int>(threadIdx.x), u = tid % 8;
  uint2 codes[2][kBlocks];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = tid / 8 + 32 * i;
    uint4 v[kBlocks];
    float amax = 0.f;
#pragma unroll
    for (int kb = 0; kb < kBlocks; ++kb) {
      v[kb] = *reinterpret_cast<const uint4*>(s_q + tile_offset(r, kb, u));
      for (uint32_t x : {v[kb].x, v[kb].y, v[kb].z, v[kb].w}) {
        const float2 f = unpack2<T>(x);
        amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
      }
    }
#pragma unroll
    for (int off = 1; off < 8; off *= 2)
      amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float inv = amax > 0.f ? fminf(__fdiv_rn(kE4M3Max, amax), kFastQInvCap) : 1.f;
    auto four = [&](uint32_t a, uint32_t b) {
      const float2 x = unpack2<T>(a), y = unpack2<T>(b);
      return static_cast<uint32_t>(pack_e4m3x2(x.x * inv, x.y * inv)) |
             static_cast<uint32_t>(pack_e4m3x2(y.x * inv, y.y * inv)) << 16;
    };
#pragma unroll
    for (int kb = 0; kb < kBlocks; ++kb)
      codes[i][kb] = make_uint2(four(v[kb].x, v[kb].y), four(v[kb].z, v[kb].w));
    if (u == 0) s_scale[r] = __frcp_rn(inv) * kv_scale;
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = tid / 8 + 32 * i;
#pragma unroll
    for (int kb = 0; kb < kBlocks; ++kb) {
      const uint32_t c = 64 * kb + 8 * u;
      *reinterpret_cast<uint2*>(s_codes + (kb < 8 ? code_offset(r, c) : tail_offset(r, c))) =
          codes[i][kb];
    }
  }
}

// An e4m3 tile's codes as produce() stages them, by TMA or cp.async: block 2 j of the stage
// holds codes 128 j .. 128 j + 127 of each row r in its 128 bytes of row r, unswizzled (block
// 8: codes 512-575, then 64 bytes of zeros or nothing), blocks 2 j + 1 nothing. Widened in
// place into fp16 in wgmma's layout (exact: every e4m3 value is an fp16 value; the cache's
// scale goes to the scores and the output instead), half the rows by the producer warpgroup
// and half by the consumer warpgroup that scores the tile, each once the stage's "codes
// landed" mbarrier says every copy has landed. Thread t of a warpgroup widens 16 codes (unit
// t % 8 of those 128 bytes) of rows r0 + 16 i (i < 2; r0 = t % 128 / 8 + 32 `half`: 0 for the
// producer, 1 for the consumers): the 8 lanes of a row read its codes before any of them
// writes (a __syncwarp between), and no row's codes lie in another row's bytes, so no other
// barrier is needed. A warp's read takes 4 whole rows (4 wavefronts for 512 bytes), and so do
// its writes. Branch-free (predicated stores) and, for the consumers (kUnrolled), fully
// unrolled, so that they can run it while their P V wgmma is in flight (ptxas serializes every
// wgmma in flight across a branch or a loop's back edge: C7514); the producer's 40 registers
// keep the loop.
inline constexpr int kWidenRows = 2, kWidenRowStep = 16;
template <bool kUnrolled>
__device__ __forceinline__ void widen_e4m3_rows(uint32_t stage, int half) {
  // The thread's row and unit from %tid.x read here (volatile), not kept from elsewhere: the
  // consumers, whose O holds 128 registers, spill addresses hoisted out of their loop.
  uint32_t tid;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
  const uint32_t u = tid % 8, r0 = tid % 128 / 8 + 32 * half;
  // Rows r0 + 16 i share r0 % 8, so their swizzled units do too: codes 16 u .. 16 u + 15 go to
  // units 2 (u % 4) + h of block 2 j + u / 4 (past block 8, for j = 4 and u >= 4, the stores
  // are predicated off, so their addresses do not matter).
  const uint32_t ld = stage + r0 * 128 + u * 16;
  const uint32_t st = stage + (u / 4) * Tile::kBlockBytes + r0 * 128;
  // Lanes u and u + 4 of a row write the same units of two blocks, so the same banks: lanes
  // u >= 4 store their two halves in the other order (unit ^ 1 first, their codes swapped
  // after the load), so that each quarter-warp's 8 stores fall in 8 different bank groups (in
  // one order the stores are 2-way: ncu counts 33.9M bank-conflict wavefronts on V4's shape).
  const uint32_t swap = u / 4;
  const uint32_t unit = ((2 * (u % 4)) ^ (r0 % 8)) ^ swap;
  constexpr int kPieces = (kQKDim + 127) / 128;  // 128 codes of each row
#pragma unroll(kUnrolled ? kPieces : 1)
  for (int j = 0; j < kPieces; ++j) {
    const uint32_t live = 2 * j + u / 4 < kQKDim / 64;  // not the bytes past block 8
    uint32_t x[kWidenRows][4];
#pragma unroll
    for (int i = 0; i < kWidenRows; ++i)
      asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                   : "=r"(x[i][0]), "=r"(x[i][1]), "=r"(x[i][2]), "=r"(x[i][3])
                   : "r"(ld + 2 * j * Tile::kBlockBytes + kWidenRowStep * i * 128)
                   : "memory");
    __syncwarp();
#pragma unroll
    for (int i = 0; i < kWidenRows; ++i) {
      const uint32_t c0 = x[i][0], c1 = x[i][1];
      x[i][0] = swap ? x[i][2] : c0;
      x[i][1] = swap ? x[i][3] : c1;
      x[i][2] = swap ? c0 : x[i][2];
      x[i][3] = swap ? c1 : x[i][3];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        uint32_t o[4];
        e4m3x4_to_f16x2x2(x[i][2 * h], o[0], o[1]);
        e4m3x4_to_f16x2x2(x[i][2 * h + 1], o[2], o[3]);
        asm volatile(
            "{\n.reg .pred p;\nsetp.ne.u32 p, %5, 0;\n"
            "@p st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n}\n" ::"r"(
                st + 2 * j * Tile::kBlockBytes + kWidenRowStep * i * 128 + ((unit ^ h) << 4)),
            "r"(o[0]), "r"(o[1]), "r"(o[2]), "r"(o[3]), "r"(live)
            : "memory");
      }
    }
  }
}

// The producer warpgroup: every tile of the chunk into stage tile % 2 once the consumers have
// released it, then each producer thread's arrival on the stage's full mbarrier.
// - 16-bit, cp.async: thread pt copies unit pt % 8 of every block of rows pt / 8 + 16 i
//   (i < 4): 128 contiguous bytes of a row for 8 threads, 4 whole rows for a warp's
//   instruction; its arrival is made when its copies have landed
//   (cp.async.mbarrier.arrive). Rows past the chunk are zero filled, so masked
//   probabilities multiply finite values.
// - e4m3: the codes are staged as widen_e4m3_rows reads them (by cp.async: 16 codes a
//   thread, the same rows and units), arriving on the stage's "codes landed" mbarrier
//   (cp.async.mbarrier.arrive); each thread waits there, widens its rows of the producer's
//   half and arrives on the full barrier, as the scoring warpgroup's threads do for the
//   other half.
// - kFast (e4m3, fast mode): the codes land where wgmma reads them (code_offset, tail_offset)
//   by cp.async, into Tile::Fast's stages of codes; each thread announces a tile on the
//   stage's "codes landed" mbarrier with a plain arrival once cp.async.wait_group has seen its
//   copies land (the consumers read codes with ldmatrix, and racecheck did not follow
//   cp.async.mbarrier.arrive to them): a tile later, with the next tile's copies in flight,
//   or, when the next tile's stage is not yet free, before waiting for it (so that a landed
//   tile is not announced only once an older one is freed). The consumers free a stage once
//   both warpgroups have taken their V of it (fast_pipeline.cuh).
// - kTma (pages of 64 rows or more; `kv_maps` from kv_tensor_map.h): a whole tile within one
//   page goes by TMA instead. 16-bit: producer thread 0 announces the tile's 73728 bytes on
//   the full barrier and issues the 9 tensor copies of its 64-value blocks (each lands in the
//   block's 128-byte swizzle), and the other producer threads arrive without copying. e4m3:
//   thread 0 issues 5 copies of 128 codes x 64 rows on the stage's "codes landed" barrier
//   (the other producer threads arrive there without copying). Fast mode: the same on its
//   stage's "codes landed" barrier, 4 copies of 128 codes in the 128-byte swizzle and one of
//   codes 512-575 in the 64-byte swizzle (`tail`), where cp.async would put them; a tile
//   before it that went by cp.async is announced once they are issued. A chunk's partial last
//   tile, and tiles that straddle two pages (forced chunk lengths of an odd number of 32-token
//   tiles), keep cp.async: their rows past the chunk must be zero, not whatever the page holds.
// The page-table entries of tile t + 1 are read while tile t's copies go out. (The warpgroup
// shares the copies: one warp issuing them all takes about 4 us a tile on the H200. Two halves
// taking alternate e4m3 tiles, one widening while the other's copies fly, are slower, V1 0.222
// ms against 0.198: the widening's shared-memory traffic is what limits it.)
template <bool kE4M3, bool kFast, bool kTma>
__device__ __forceinline__ void produce(const VerifyKernelParams& p, const CtaWork& w, int n_tiles,
                                        uint32_t s_base, const KernelMaps<kFast, kTma>& kv_maps) {
  constexpr int kProducers = Tile::kThreads - Tile::kConsumerThreads;
  constexpr int kRowStep = kProducers / 8;                // 16
  constexpr int kRowsEach = Tile::kTokens / kRowStep;     // 4
  constexpr int kRowBytes = kE4M3 ? kQKDim : kQKDim * 2;  // a KV row in the cache
  static_assert(!kFast || kE4M3, "fast mode: an e4m3 cache");
  const int pt = static_cast<int>(threadIdx.x) - Tile::kConsumerThreads;
  const int u = pt % 8, r0 = pt / 8;
  auto page_ids = [&](int tile, int32_t(&ids)[kRowsEach]) {
#pragma unroll
    for (int i = 0; i < kRowsEach; ++i) {
      const int t = w.tok_begin + tile * Tile::kTokens + r0 + kRowStep * i;
      ids[i] = tile < n_tiles && t < w.tok_end
                   ? __ldg(p.kv_page_indices + w.page_base + (t >> p.page_shift))
                   : 0;
    }
  };
  // Fast mode: this thread's copies of tile t have landed (cp.async.wait_group saw them).
  auto announce = [&](int t) {
    mbar_arrive(s_base + Fast::kLandedOffset + 8 * (t % Fast::kCodeStages));
  };
  // Fast mode with TMA: whether tile - 1 went by cp.async, so is announced by this loop's turn for
  // tile (without TMA every tile does).
  bool by_copies = false;
  int32_t next[kRowsEach];
  page_ids(0, next);
  for (int tile = 0; tile < n_tiles; ++tile) {
    int32_t ids[kRowsEach];
#pragma unroll
    for (int i = 0; i < kRowsEach; ++i) ids[i] = next[i];
    page_ids(tile + 1, next);
    // Fast mode: kCodeStages stages of codes, freed once both warpgroups have taken their V
    // (Tile::Fast); tile t's codes announced on its stage's "codes landed" mbarrier by
    // announce(t): tile - 1's here when this tile's stage is not yet free (the file comment).
    constexpr int kStages = kFast ? Fast::kCodeStages : Tile::kStages;
    const int s = tile % kStages;
    const uint32_t empty = s_base + (kFast ? Fast::kFreeOffset : Tile::kEmptyOffset) + 8 * s;
    const uint32_t empty_parity = (tile / kStages - 1) & 1;
    bool announced = false;  // fast mode: tile - 1
    if constexpr (kFast) {
      if (tile >= kStages && (!kTma || by_copies) && !mbar_test(empty, empty_parity)) {
        cp_async_wait<0>();
        announce(tile - 1);
        announced = true;
      }
    }
    if (tile >= kStages)  // the consumers are done with the tile kStages before
      mbar_wait(empty, empty_parity);
    const uint32_t stage = s_base + s * (kFast ? Fast::kCodeBytes : Tile::kStageBytes);
    const uint32_t full = s_base + Tile::kFullOffset + 8 * s;
    bool whole = false;  // a whole tile inside one page, for TMA
    const int first = w.tok_begin + tile * Tile::kTokens, last = first + Tile::kTokens - 1;
    if constexpr (kTma)
      whole = last < w.tok_end && (first >> p.page_shift) == (last >> p.page_shift);
    const int row = first & ((1 << p.page_shift) - 1);  // with whole: ids[0] is the tile's page
    if constexpr (kTma && !kE4M3) {
      if (whole) {
        if (pt == 0) {
          mbar_arrive_expect_tx(full, Tile::kStageBytes);
#pragma unroll
          for (int kb = 0; kb < kQKDim / 64; ++kb)
            tma_load_3d(stage + kb * Tile::kBlockBytes, &kv_maps, 64 * kb, row, ids[0], full);
        } else {
          mbar_arrive(full);
        }
        continue;
      }
    }
    if constexpr (kTma && kFast) {
      if (whole) {
        const uint32_t landed = s_base + Fast::kLandedOffset + 8 * s;
        if (pt == 0) {
          mbar_arrive_expect_tx(landed, Fast::kCodeBytes);
#pragma unroll
          for (int j = 0; j < Fast::kTailCode / 128; ++j)
            tma_load_3d(stage + j * Tile::kBlockBytes, &kv_maps.main, 128 * j, row, ids[0], landed);
          tma_load_3d(stage + Fast::kTailOffset, &kv_maps.tail, Fast::kTailCode, row, ids[0],
                      landed);
        } else {
          mbar_arrive(landed);
        }
        if (by_copies && !announced) {
          cp_async_wait<0>();
          announce(tile - 1);
        }
        by_copies = false;
        continue;
      }
    }
    const uint32_t landed = s_base + Tile::kLandedOffset + 8 * s;  // not fast mode's (above)
    if (kE4M3 && !kFast && whole) {
      constexpr int kBoxes = (kQKDim + 127) / 128;
      if (pt == 0) {
        mbar_arrive_expect_tx(landed, kBoxes * 128 * Tile::kTokens);  // the zeros included
#pragma unroll
        for (int j = 0; j < kBoxes; ++j)
          tma_load_3d(stage + 2 * j * Tile::kBlockBytes, &kv_maps, 128 * j, row, ids[0], landed);
      } else {
        mbar_arrive(landed);
      }
    } else {
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
          src += kv_row * kRowBytes;
          bytes = 16;
        }
        if constexpr (kFast) {
          // Codes 128 j + 16 u .. + 15 of the row where wgmma reads them (code_offset).
#pragma unroll
          for (int j = 0; j < (kQKDim + 127) / 128; ++j) {
            const uint32_t c = 128 * j + 16 * u;
            if (j < 4)
              cp_async_16(stage + code_offset(r, c), src + 128 * j, bytes);
            else if (u < 4)
              cp_async_16(stage + tail_offset(r, c), src + 128 * j, bytes);
          }
        } else if constexpr (kE4M3) {
          // Codes 128 j + 16 u .. + 15 of the row to unit u of its 128 bytes in block 2 j.
#pragma unroll
          for (int j = 0; j < (kQKDim + 127) / 128; ++j)
            if (128 * j + 16 * u < kQKDim)
              cp_async_16(stage + 2 * j * Tile::kBlockBytes + r * 128 + u * 16, src + 128 * j,
                          bytes);
        } else {
#pragma unroll
          for (int kb = 0; kb < kQKDim / 64; ++kb)
            cp_async_16(stage + tile_offset(r, kb, u), src + kb * 128, bytes);
        }
      }
      if constexpr (kFast) {
        // Tile - 1's copies are waited for here, with this tile's in flight, and announced by a
        // plain arrival (racecheck does not follow cp.async.mbarrier.arrive to this pipeline's
        // readers: docs/kernels/sm90-wgmma.md); the last tile's after the loop.
        cp_async_commit();
        if (tile > 0 && (!kTma || by_copies) && !announced) {
          cp_async_wait<1>();
          announce(tile - 1);
        }
        by_copies = true;
      } else if constexpr (kE4M3) {
        cp_async_mbar_arrive(landed);  // when this thread's codes land
      }
    }
    if constexpr (kFast) {
      // Nothing more: the consumers read the codes as they are (fast_pipeline.cuh).
    } else if constexpr (kE4M3) {
      // Every copy of the tile has landed (the consumers' half of the rows too, which the
      // warpgroup that scores the tile widens: widen_own_half in verify_wgmma.cuh).
      mbar_wait(landed, (tile / Tile::kStages) & 1);
      widen_e4m3_rows<false>(stage, 0);
      fence_proxy_async();  // the fp16 rows, for wgmma's reads
      mbar_arrive(full);
    } else {
      cp_async_mbar_arrive(full);
    }
  }
  if constexpr (kFast) {
    if (n_tiles > 0 && (!kTma || by_copies)) {
      cp_async_wait<0>();
      announce(n_tiles - 1);
    }
  }
}

}  // namespace treeverify::cuda::sm90
