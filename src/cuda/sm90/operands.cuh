// The wgmma verify kernel's operands in shared memory (verify_wgmma.cuh): where a row's values
// lie in a Q or KV tile (wgmma's 128-byte swizzle, tile.h), Q staged by the consumer threads
// (and, on an e4m3 cache, rescaled into fp16), and the KV tiles copied by the producer
// warpgroup (and e4m3 codes widened into fp16 where they landed).
#pragma once

#include <cuda.h>

#include <type_traits>

#include "cuda/common/arch.cuh"
#include "cuda/common/bulk_copy.cuh"
#include "cuda/mma/tile_ops.cuh"
#include "cuda/sm90/tile.h"
#include "cuda/sm90/wgmma.cuh"

namespace treeverify::cuda::sm90 {

using mma::CtaWork;
using mma::VerifyKernelParams;
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
// (the portable kernel's rule, cuda/mma/fp8_ops.cuh prepare_q_f16): bf16 rows are multiplied
// by 2^s, the power of two that brings the row's largest magnitude into [2^14, 2^15)
// (exact_q_shift, cuda/common/fp8_convert.h), then rounded to fp16, which holds every bf16
// value of the row exactly down to 2^-38 of its largest; s_scale[r] = 2^-s kv_scale. A row with a
// NaN or infinity keeps s = 0 and ends NaN (its recomputation is exact). fp16 rows keep their
// values. Consumer thread t takes units t % 4 + 4 k of row t / 4 (the swizzle does not matter to a
// rewrite in place); the caller publishes the rows and scales.
template <typename T>
__device__ __forceinline__ void prepare_q_f16(uint8_t* s_q, float* s_scale, float kv_scale) {
  constexpr int kUnits = kQKDim / 8 / 4;  // 18 of a row's 72 16-byte units a thread
  const int tid = static_cast<int>(threadIdx.x), r = tid / 4, q = tid % 4;
  auto unit = [&](int k) {
    const int m = q + 4 * k;
    return reinterpret_cast<uint4*>(s_q + tile_offset(r, m / 8, m % 8));
  };
  int s = 0;
  if constexpr (!std::is_same_v<T, __half>) {
    // The largest magnitude's bits (bf16 magnitudes order as unsigned integers).
    uint32_t amax = 0;
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      const uint4 v = *unit(k);
      for (uint32_t x : {v.x, v.y, v.z, v.w})
        amax = max(amax, max(x & 0x7fffu, (x >> 16) & 0x7fffu));
    }
    amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = max(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    s = exact_q_shift(amax);
    const float up = __uint_as_float(static_cast<uint32_t>(127 + s) << 23);
#pragma unroll
    for (int k = 0; k < kUnits; ++k) {
      uint4 v = *unit(k);
      for (uint32_t* x : {&v.x, &v.y, &v.z, &v.w}) {
        const T* two = reinterpret_cast<const T*>(x);
        *x = pack2<__half>(to_float(two[0]) * up, to_float(two[1]) * up);
      }
      *unit(k) = v;
    }
  }
  if (q == 0) s_scale[r] = __uint_as_float(static_cast<uint32_t>(127 - s) << 23) * kv_scale;
}

// An e4m3 tile's codes, staged by produce() in half of each row's 128-byte blocks (units 0-3
// for even rows, 4-7 for odd ones: the 4 rows a warp reads at once then fall on 2 bank groups
// each, 2 wavefronts for 256 bytes, against 4 with every row in units 4-7), widened in place
// into fp16 (exact: every e4m3 value is an fp16 value; the cache's scale goes to the scores
// and the output instead): the producer thread of rows r0 + kRowStep i widens unit
// threadIdx % 8 of each of their blocks, rows it and the 7 lanes beside it copied. A block's 8
// threads read its 64 codes before any of them writes (a __syncwarp between).
__device__ __forceinline__ int e4m3_stage_unit(int r) { return 4 * (r % 2); }
template <int kRowsEach, int kRowStep>
__device__ __forceinline__ void widen_e4m3_rows(uint32_t stage, int r0) {
  const int u = static_cast<int>(threadIdx.x) % 8;
  __syncwarp();  // the lanes' copies of the warp's rows, landed for each, seen by all
#pragma unroll
  for (int i = 0; i < kRowsEach; ++i) {
    const int r = r0 + kRowStep * i;
#pragma unroll
    for (int kb = 0; kb < kQKDim / 64; ++kb) {
      uint32_t x0, x1;  // codes 8 u .. 8 u + 7 of the block
      asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];\n"
                   : "=r"(x0), "=r"(x1)
                   : "r"(stage + tile_offset(r, kb, e4m3_stage_unit(r) + u / 2) + (u % 2) * 8)
                   : "memory");
      __syncwarp();
      uint32_t o[4];
      mma::e4m3x4_to_f16x2x2(x0, o[0], o[1]);
      mma::e4m3x4_to_f16x2x2(x1, o[2], o[3]);
      asm volatile(
          "st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(stage + tile_offset(r, kb, u)),
          "r"(o[0]), "r"(o[1]), "r"(o[2]), "r"(o[3])
          : "memory");
    }
  }
}

// The producer warpgroup: every tile of the chunk into stage tile % 2 once the consumers have
// released it, then each lane's arrival on the stage's full mbarrier: for a 16-bit cache made
// when that lane's copies have landed (cp.async.mbarrier.arrive); for an e4m3 one after the
// lane has waited for them and widened its part of the tile (widen_e4m3_rows). Producer thread
// t copies unit t % 8 of every block of rows t / 8 + 16 i (i < 4): 128 contiguous bytes of a
// row for 8 threads, 4 whole rows for a warp's instruction; rows past the chunk are zero
// filled, so masked probabilities multiply finite values. The page-table entries of tile t + 1
// are read while tile t's copies go out. (One warp issuing every copy took about 4 us a tile
// on the H200; the warpgroup shares them. Splitting it into two halves that take alternate
// e4m3 tiles, so that one widens while the other's copies fly, was slower: V1 0.222 ms
// against 0.198, H200 2026-12-01; the widening's shared-memory traffic is what limits it.)
// kTma (a 16-bit cache of pages of 64 rows or more; `kv_map` from kv_tensor_map.h): a whole
// tile within one page goes by TMA instead: producer thread 0 announces its 73728 bytes and issues
// the 9 tensor copies of its 64-value blocks (each lands in the block's 128-byte swizzle), and
// the other producer threads arrive without copying. A chunk's partial last tile, and tiles
// that straddle two pages (forced chunk lengths of an odd number of 32-token tiles), keep
// cp.async: their rows past the chunk must be zero, not whatever the page holds.
template <bool kE4M3, bool kTma>
__device__ __forceinline__ void produce(const VerifyKernelParams& p, const CtaWork& w, int n_tiles,
                                        uint32_t s_base, const CUtensorMap* kv_map) {
  static_assert(!(kE4M3 && kTma), "e4m3 codes are widened where they land: cp.async only");
  constexpr int kProducers = Tile::kThreads - Tile::kConsumerThreads;
  constexpr int kRowStep = kProducers / 8;                // 16
  constexpr int kRowsEach = Tile::kTokens / kRowStep;     // 4
  constexpr int kRowBytes = kE4M3 ? kQKDim : kQKDim * 2;  // a KV row in the cache
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
  int32_t next[kRowsEach];
  page_ids(0, next);
  for (int tile = 0; tile < n_tiles; ++tile) {
    int32_t ids[kRowsEach];
#pragma unroll
    for (int i = 0; i < kRowsEach; ++i) ids[i] = next[i];
    page_ids(tile + 1, next);
    const int s = tile % Tile::kStages;
    if (tile >= Tile::kStages)  // the consumers are done with the tile kStages before
      mbar_wait(s_base + Tile::kEmptyOffset + 8 * s, (tile / Tile::kStages - 1) & 1);
    const uint32_t stage = s_base + s * Tile::kStageBytes;
    if constexpr (kTma) {
      const int first = w.tok_begin + tile * Tile::kTokens, last = first + Tile::kTokens - 1;
      if (last < w.tok_end && (first >> p.page_shift) == (last >> p.page_shift)) {
        const uint32_t full = s_base + Tile::kFullOffset + 8 * s;
        if (pt == 0) {  // ids[0]: the page of row 0, the tile's page
          mbar_arrive_expect_tx(full, Tile::kStageBytes);
#pragma unroll
          for (int kb = 0; kb < kQKDim / 64; ++kb)
            tma_load_3d(stage + kb * Tile::kBlockBytes, kv_map, 64 * kb,
                        first & ((1 << p.page_shift) - 1), ids[0], full);
        } else {
          mbar_arrive(full);
        }
        continue;
      }
    }
#pragma unroll
    for (int i = 0; i < kRowsEach; ++i) {
      const int r = r0 + kRowStep * i;
      const int t = w.tok_begin + tile * Tile::kTokens + r;
      // A zero fill reads nothing, so its source offsets need no guard.
      const char* src = static_cast<const char*>(p.kv) + u * 16;
      int bytes = 0;
      if (t < w.tok_end) {
        const int64_t row =
            (static_cast<int64_t>(ids[i]) << p.page_shift) + (t & ((1 << p.page_shift) - 1));
        src += row * kRowBytes;
        bytes = 16;
      }
      if constexpr (kE4M3) {
        // The row's 36 pieces of 16 codes: piece m = u + 8 j (codes 16 m .. 16 m + 15, 16 (m %
        // 4) on in block m / 4) to unit e4m3_stage_unit(r) + m % 4 of that block's 128 bytes.
#pragma unroll
        for (int j = 0; j < (kQKDim / 16 + 7) / 8; ++j) {
          const int m = u + 8 * j;
          if (m < kQKDim / 16)
            cp_async_16(stage + tile_offset(r, m / 4, e4m3_stage_unit(r) + m % 4), src + 128 * j,
                        bytes);
        }
      } else {
#pragma unroll
        for (int kb = 0; kb < kQKDim / 64; ++kb)
          cp_async_16(stage + tile_offset(r, kb, u), src + kb * 128, bytes);
      }
    }
    if constexpr (kE4M3) {
      cp_async_commit();
      cp_async_wait<0>();  // this thread's codes have landed
      widen_e4m3_rows<kRowsEach, kRowStep>(stage, r0);
      fence_proxy_async();  // the fp16 tile, for wgmma's reads
      mbar_arrive(s_base + Tile::kFullOffset + 8 * s);
    } else {
      cp_async_mbar_arrive(s_base + Tile::kFullOffset + 8 * s);
    }
  }
}

}  // namespace treeverify::cuda::sm90
