// The sm_90a split-KV MLA tree-verify kernel: wgmma with Q, K and V in shared memory, P in
// registers (the warpgroup that scored it) or shared memory (the other one).
//
// One CTA = 64 query rows (row r of request b is node r / H, head r % H) x one chunk of that
// request's KV sequence (WgmmaTile, tile.h). A producer warpgroup copies the chunk's 64-token
// KV tiles into two shared-memory stages (cp.async, 16 bytes a thread, into wgmma's
// 128-byte-swizzle layout): a "full" mbarrier a 64-value block says the block has landed, an
// "empty" one a half stage that its last reader is done with it. The two consumer warpgroups
// split O by columns (warpgroup g holds O[:, 256 g : 256 g + 256], 128 fp32 registers a
// thread) and take the tiles by pairs (a, b = a + 1), after FlashMLA's "seesaw" (our code):
// warpgroup 0 scores a, warpgroup 1 scores b (S = Q K^T, 36 wgmma m64n64k16 from shared
// memory, in accumulator chains of at most 12 steps), and then
//   - warpgroup 0: online softmax of a (fp32, log2 units; the ancestor mask only in tiles that
//     reach the tree region), hands its new row max to warpgroup 1, O_0 += P_a V_a with P from
//     registers; once warpgroup 1's max after b is there, rescales P_a to it and stores it
//     (16-bit) into a's rope block, which nothing reads once a is scored; rescales O_0;
//     O_0 += P_b V_b with P_b from b's rope block; scores tile a + 2;
//   - warpgroup 1: softmax of b against warpgroup 0's max, stores its max and P_b, O_1 +=
//     P_b V_b (registers), O_1 += P_a V_a (a's rope block; P_a is already relative to b's
//     max, so O_1 needs no rescale between the two), scores tile b + 2.
// So each softmax runs while the tensor cores work through the other warpgroup's products,
// and both warpgroups' scores of the next pair are queued behind their P V. A stage is
// refilled by halves as they are released (the own half after its warpgroup's P V, the other
// half after the other's), and the scores take the blocks in that order, so they start
// before the whole tile has landed. The epilogue is the portable kernel's contract: a
// one-chunk request writes out/lse, a split one an fp32 partial and its lse (log2) for the
// combine kernel, and rows that come out non-finite are recomputed exactly
// (cuda/mma/nonfinite.cuh).
// Figures and limits: DESIGN_NOTES.md beside this file.
#pragma once

#include <type_traits>

#include "cuda/common/arch.cuh"
#include "cuda/common/bulk_copy.cuh"
#include "cuda/mma/nonfinite.cuh"
#include "cuda/mma/tile_ops.cuh"
#include "cuda/sm90/tile.h"
#include "cuda/sm90/wgmma.cuh"

namespace treeverify::cuda::sm90 {

using mma::CtaWork;
using mma::VerifyKernelParams;
using Tile = WgmmaTile;
// mma::recompute_nan_rows, which the epilogue calls, spreads a CTA's rows over the portable
// kernel's 8 warps: the consumer warps here.
static_assert(Tile::kConsumerThreads == mma::kThreads);

// The consumer warpgroups' barrier (named barrier 1; the producer warpgroup never joins it).
__device__ __forceinline__ void consumer_sync() { named_barrier_sync<1, Tile::kConsumerThreads>(); }

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

// The mbarriers of the pipeline (tile.h): block kb of stage s landed; half h of stage s free.
__device__ __forceinline__ uint32_t full_bar(uint32_t s_base, int s, int kb) {
  return s_base + Tile::kFullOffset + 8 * (s * Tile::kBlocks + kb);
}
__device__ __forceinline__ uint32_t empty_bar(uint32_t s_base, int s, int half) {
  return s_base + Tile::kEmptyOffset + 8 * (2 * s + half);
}
// Whether 64-value block kb belongs to the own half of a tile scored by warpgroup g (its V
// columns) or to the other half (the other warpgroup's V columns and the rope block).
__host__ __device__ constexpr bool in_own_half(int kb, int g) { return kb / 4 == g; }

// The producer warpgroup: every tile of the chunk into stage tile % 2, half by half, each half
// once its last reader has released it: per pair of tiles (a, b = a + 1), a's own half, b's
// own half, a's other half, b's other half, the order in which the consumers free them. Each
// lane arrives on a block's full mbarrier once its copies of that block have landed. Producer
// thread t copies unit t % 8 of a block of rows t / 8 + 16 i (i < 4): 128 contiguous bytes of
// a row for 8 threads, 4 whole rows for a warp's instruction; rows past the chunk are zero
// filled, so masked probabilities multiply finite values. (One warp issuing every copy took about 4 us
// a tile on the H200; the warpgroup shares them.)
__device__ __forceinline__ void produce(const VerifyKernelParams& p, const CtaWork& w, int n_tiles,
                                        uint32_t s_base) {
  constexpr int kProducers = Tile::kThreads - Tile::kConsumerThreads;
  constexpr int kRowsEach = Tile::kTokens * 8 / kProducers;  // 4
  const int pt = static_cast<int>(threadIdx.x) - Tile::kConsumerThreads;
  const int u = pt % 8, r0 = pt / 8;
  auto token = [&](int tile, int i) {
    return w.tok_begin + tile * Tile::kTokens + r0 + kProducers / 8 * i;
  };
  auto page_ids = [&](int tile, int32_t(&ids)[kRowsEach]) {
#pragma unroll
    for (int i = 0; i < kRowsEach; ++i) {
      const int t = token(tile, i);
      ids[i] = tile < n_tiles && t < w.tok_end
                   ? __ldg(p.kv_page_indices + w.page_base + (t >> p.page_shift))
                   : 0;
    }
  };
  // Half `half` of tile `tile` (page-table entries ids) into its stage.
  auto copy_half = [&](int tile, int half, const int32_t(&ids)[kRowsEach]) {
    if (tile >= n_tiles) return;
    const int s = tile % Tile::kStages, g = tile % 2;
    if (tile >= Tile::kStages)  // its last reader is done with it on the tile kStages before
      mbar_wait(empty_bar(s_base, s, half), (tile / Tile::kStages - 1) & 1);
    const uint32_t stage = s_base + s * Tile::kStageBytes;
    const char* src[kRowsEach];
    int bytes[kRowsEach];
#pragma unroll
    for (int i = 0; i < kRowsEach; ++i) {
      const int t = token(tile, i);
      src[i] = static_cast<const char*>(p.kv) + u * 16;  // a zero fill reads nothing
      bytes[i] = 0;
      if (t < w.tok_end) {
        const int64_t row =
            (static_cast<int64_t>(ids[i]) << p.page_shift) + (t & ((1 << p.page_shift) - 1));
        src[i] += row * (kQKDim * 2);
        bytes[i] = 16;
      }
    }
#pragma unroll
    for (int kb = 0; kb < Tile::kBlocks; ++kb) {
      if (in_own_half(kb, g) != (half == Tile::kHalfOwn)) continue;
#pragma unroll
      for (int i = 0; i < kRowsEach; ++i) {
        const int r = r0 + kProducers / 8 * i;
        cp_async_16(stage + tile_offset(r, kb, u), src[i] + kb * 128, bytes[i]);
      }
      cp_async_mbar_arrive(full_bar(s_base, s, kb));
    }
  };
  // A tile's page-table entries are read for the next pair once its last half is out (40
  // registers a producer thread leave no room for two pairs' entries).
  int32_t ids_a[kRowsEach], ids_b[kRowsEach];
  page_ids(0, ids_a);
  page_ids(1, ids_b);
  for (int a = 0; a < n_tiles; a += 2) {
    copy_half(a, Tile::kHalfOwn, ids_a);
    copy_half(a + 1, Tile::kHalfOwn, ids_b);
    copy_half(a, Tile::kHalfOther, ids_a);
    page_ids(a + 2, ids_a);
    copy_half(a + 1, Tile::kHalfOther, ids_b);
    page_ids(a + 3, ids_b);
  }
}

// The online-softmax state of the two rows a thread holds in wgmma's accumulator layout:
// rows lo = 16 (warp % 4) + lane / 4 and hi = lo + 8 of the CTA. Accumulator i of an m64nN
// tile is row (i / 2) % 2 ? hi : lo, column 8 (i / 4) + 2 (lane % 4) + i % 2; so accumulators
// 8 k .. 8 k + 7 (columns 16 k .. 16 k + 15) are, packed in pairs, the A fragment of k step k
// of a product with A from registers.
struct Rows {
  int r[2];
  bool valid[2];
  int node[2];                                // request-relative tree node of the row
  const uint32_t* mask[2];                    // its ancestor bits
  float m[2] = {mma::kNegInf, mma::kNegInf};  // running max (log2 units) O and l are relative to
  float l[2] = {0.f, 0.f};                    // running sum over this warpgroup's own tiles
};

// What a row's new running max m_new makes of the old one: the factor alpha on O and l, and
// the reference P subtracts (a row that has seen nothing yet keeps m = -inf; it subtracts 0 so
// exp2 gives 0).
__device__ __forceinline__ float rescale(Rows& rows, int h, float m_new, float* m_ref) {
  *m_ref = m_new == mma::kNegInf ? 0.f : m_new;
  const float alpha = mma::fast_exp2(rows.m[h] - *m_ref);
  rows.m[h] = m_new;
  return alpha;
}

// The scores of the 64-token tile from `first` to probabilities: mask, new running max (at
// least `floor`, the other warpgroup's; alpha, the rescale of O, returned for each row), row
// sums into rows.l, P in fp32 left in s and packed in 16-bit pairs in the accumulator layout
// (pa[j] = accumulators 2 j, 2 j + 1).
template <typename T>
__device__ __forceinline__ void softmax_tile(const VerifyKernelParams& p, const CtaWork& w,
                                             float (&s)[32], int first, Rows& rows,
                                             const float (&floor)[2], float (&alpha)[2],
                                             uint32_t (&pa)[16]) {
  const int col0 = 2 * (static_cast<int>(threadIdx.x) % 4);
  float tile_max[2] = {mma::kNegInf, mma::kNegInf};
  if (rows.valid[0] && rows.valid[1] && first + Tile::kTokens <= min(w.prefix, w.tok_end)) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      s[i] *= p.scale_log2;
      tile_max[(i / 2) % 2] = fmaxf(tile_max[(i / 2) % 2], s[i]);
    }
  } else {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int h = (i / 2) % 2;
      const int t = first + 8 * (i / 4) + col0 + i % 2;
      bool visible = rows.valid[h] && t < w.tok_end;
      if (visible && t >= w.prefix) {  // a tree token: visible iff an ancestor or itself
        const int node = t - w.prefix;
        visible = node == rows.node[h] || ((__ldg(rows.mask[h] + node / 32) >> (node % 32)) & 1u);
      }
      s[i] = visible ? s[i] * p.scale_log2 : mma::kNegInf;
      tile_max[h] = fmaxf(tile_max[h], s[i]);
    }
  }
  float m_ref[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
    alpha[h] = rescale(rows, h, fmaxf(fmaxf(rows.m[h], floor[h]), tile_max[h]), &m_ref[h]);
  }
  float sum[2] = {0.f, 0.f};
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    s[i] = mma::fast_exp2(s[i] - m_ref[(i / 2) % 2]);
    sum[(i / 2) % 2] += s[i];
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
    sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    rows.l[h] = rows.l[h] * alpha[h] + sum[h];
  }
#pragma unroll
  for (int j = 0; j < 16; ++j) pa[j] = pack2<T>(s[2 * j], s[2 * j + 1]);
}

// P (16-bit pairs, as softmax_tile packs them) for the other warpgroup, in the core-matrix
// layout at s_p (row r, token tau at (r / 8) kPGroupBytes + (tau / 8) 128 + (r % 8) 16 +
// (tau % 8) 2), so a warp's store writes 128 contiguous bytes.
__device__ __forceinline__ void store_p(const Rows& rows, const uint32_t (&pa)[16], uint8_t* s_p) {
  const int col0 = 2 * (static_cast<int>(threadIdx.x) % 4);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    uint8_t* row_p = s_p + (rows.r[h] / 8) * Tile::kPGroupBytes + (rows.r[h] % 8) * 16 + col0 * 2;
#pragma unroll
    for (int j = 0; j < 8; ++j) *reinterpret_cast<uint32_t*>(row_p + j * 128) = pa[2 * j + h];
  }
}

// Writes O / l as the output (one-chunk requests) or an fp32 partial and its lse (log2) for the
// combine; a row with a non-finite value in O or l is marked NaN in s_lse for the
// recomputation (the portable epilogue's contract, cuda/mma/tile_ops.cuh).
template <typename T>
__device__ __forceinline__ void epilogue(const VerifyKernelParams& p, const CtaWork& w,
                                         const Rows& rows, const float (&o)[128], int wg,
                                         float* s_sum, float* s_lse, float* s_inv_l) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
  if (lane % 4 == 0)
    for (int h = 0; h < 2; ++h) s_sum[wg * Tile::kRows + rows.r[h]] = rows.l[h];
  consumer_sync();
  if (wg == 0 && lane % 4 == 0) {
    for (int h = 0; h < 2; ++h) {
      const int r = rows.r[h];
      const float l = s_sum[r] + s_sum[Tile::kRows + r];
      s_inv_l[r] = l == 0.f ? 0.f : 1.f / l;
      s_lse[r] = l == 0.f ? mma::kNegInf : rows.m[h] + __log2f(l);
    }
  }
  consumer_sync();
  // x * 0 is 0 for finite x and NaN otherwise; the threads sharing a row mark it by atomics.
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float z = 0.f;
#pragma unroll
    for (int j = 0; j < 32; ++j) z += o[4 * j + 2 * h] * 0.f + o[4 * j + 2 * h + 1] * 0.f;
    if (z != 0.f) {
      atomicExch(s_inv_l + rows.r[h], NAN);
      atomicExch(s_lse + rows.r[h], NAN);
    }
  }
  consumer_sync();
  const int H = p.num_heads;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int gr = w.row0 + rows.r[h];
    if (gr >= w.rows_b) continue;
    const float inv_l = s_inv_l[rows.r[h]];
    const int node = gr / H, head = gr % H;
    const int col0 = 256 * wg + 2 * (lane % 4);
    if (w.final_out) {
      T* out = static_cast<T*>(p.out) + (w.q0 + node) * p.out_stride_token +
               head * p.out_stride_head + col0;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<uint32_t*>(out + 8 * j) =
            pack2<T>(o[4 * j + 2 * h] * inv_l, o[4 * j + 2 * h + 1] * inv_l);
    } else {
      const int64_t grow = static_cast<int64_t>(w.q0) * H + gr;
      float* part = p.part_out + (blockIdx.y * p.total_rows + grow) * kVDim + col0;
#pragma unroll
      for (int j = 0; j < 32; ++j)
        *reinterpret_cast<float2*>(part + 8 * j) =
            make_float2(o[4 * j + 2 * h] * inv_l, o[4 * j + 2 * h + 1] * inv_l);
    }
  }
  const int r = static_cast<int>(threadIdx.x);
  if (r < Tile::kRows && w.row0 + r < w.rows_b) {
    const int64_t grow = static_cast<int64_t>(w.q0) * H + w.row0 + r;
    if (w.final_out) {
      if (p.lse != nullptr) p.lse[grow] = s_lse[r] * kLn2;
    } else {
      p.part_lse[blockIdx.y * p.total_rows + grow] = s_lse[r];
    }
  }
}

// Consumer warpgroup kWg's pass over the chunk's tiles, O_g into o (module comment above).
// Tiles go by pairs (a, b = a + 1): warpgroup 0 owns a, warpgroup 1 owns b. Each pair's pass is
// one straight line of wgmma that ends with all of them waited for, specialised on the
// warpgroup and on whether b and the next pair exist: ptxas serializes every wgmma (C7514,
// C7520) when one stays in flight across a join of the control flow, where it moves
// accumulator registers.
template <typename T, int kWg>
__device__ __forceinline__ void consume(const VerifyKernelParams& p, const CtaWork& w, int n_tiles,
                                        uint8_t* smem, Rows& rows, float (&o)[128]) {
  using std::false_type, std::true_type;
  const uint32_t s_base = smem_addr(smem);
  float* s_max = reinterpret_cast<float*>(smem + Tile::kMaxOffset);  // [warpgroup][row]
  const int lane = static_cast<int>(threadIdx.x) % 32;
  // Descriptors are built once: a k step adds to the start address field (addresses stay
  // below 256 KB, so the 14-bit field never carries or borrows).
  const uint64_t q_desc = smem_desc<Swizzle::k128B>(s_base + Tile::kQOffset, 16, 1024);
  auto plus = [](uint64_t desc, int bytes) { return desc + static_cast<int64_t>(bytes / 16); };
  // Tile t lives in stage t % 2 and is scored by warpgroup t % 2.
  auto stage = [&](int t) { return s_base + (t % Tile::kStages) * Tile::kStageBytes; };
  auto hand = [&](int which) { return s_base + Tile::kHandOffset + 8 * which; };
  auto first = [&](int t) { return w.tok_begin + t * Tile::kTokens; };
  // This thread is done with half `half` of tile t (every thread arrives: a branch on the lane
  // while wgmma are in flight makes ptxas serialize them, C7520).
  auto release = [&](int t, int half) {
    mbar_arrive(empty_bar(s_base, t % Tile::kStages, half));
  };
  // Block kb of tile t has landed: the copies (generic proxy), seen through the mbarrier, for
  // wgmma's reads.
  auto wait_block = [&](int t, int kb) {
    mbar_wait(full_bar(s_base, t % Tile::kStages, kb), (t / Tile::kStages) & 1);
    fence_proxy_async();
  };
  // The running maxima of this thread's rows to the other warpgroup.
  auto store_max = [&]() {
    if (lane % 4 == 0)
      for (int h = 0; h < 2; ++h) s_max[kWg * Tile::kRows + rows.r[h]] = rows.m[h];
  };
  auto scale_o = [&](const float(&alpha)[2]) {
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f)) {
#pragma unroll
      for (int i = 0; i < 128; ++i) o[i] *= alpha[(i / 2) % 2];
    }
    fence_accumulators(o);
  };

  // S = Q K^T over this warpgroup's tile t into sv. The blocks go in the order their stage
  // halves are refilled: this warpgroup's V blocks, the other's, the rope block; each waits
  // for its copy, so the first products run while the rest land. The tensor cores' fp32
  // accumulation does not round to nearest, so no chain of k steps may be deep: one 36-step
  // chain put 4x the portable kernel's error on lse (H200: 1.1e-5 against 2.5e-6, whose
  // mma.sync chains are 9 steps, 144 deep) and two of 18 up to 9.1e-6 (fp16). Two accumulators
  // (a third, beside O, spills): steps 0-23 alternate between them and are summed, then steps
  // 24-35 run into the second again: chains of 12, summed in fp32, at the cost of one wait.
  // With kMid, the wgmma in flight before the scores (the other's P V of tile mid_tile) are
  // waited for after step 16, and that tile's other half released.
  auto block_at = [](int i) { return i < 4 ? 4 * kWg + i : i < 8 ? 4 * (1 - kWg) + i - 4 : 8; };
  auto scores = [&](int t, float(&sv)[32], auto mid, int mid_tile) {
    constexpr int kSteps = kQKDim / 16, kSplit = 24, kMid = 16;
    uint64_t qd = plus(q_desc, block_at(0) * Tile::kBlockBytes);
    uint64_t kd = smem_desc<Swizzle::k128B>(stage(t) + block_at(0) * Tile::kBlockBytes, 16, 1024);
    // The k steps' descriptors are made one after the other, each from the last through an
    // opaque copy: otherwise ptxas builds all 36 up front and spills them (200 bytes).
    auto qk = [&](float(&d)[32], int ks, bool accumulate) {
      if (ks % 4 == 0) {  // after the wait's loop, the fence ptxas would otherwise insert
        wait_block(t, block_at(ks / 4));
        wgmma_fence();
      }
      wgmma_m64n64k16<T, 0>(d, qd, kd, accumulate);
      const int next = ks % 4 != 3       ? 32
                       : ks + 1 < kSteps ? (block_at(ks / 4 + 1) - block_at(ks / 4)) *
                                                   Tile::kBlockBytes -
                                               96
                                         : 0;
      qd = plus(qd, next);
      kd = plus(kd, next);
      asm volatile("" : "+l"(qd), "+l"(kd));
    };
    float sc[32];
    fence_accumulators(sv);
    fence_accumulators(sc);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < kSplit; ++ks) {
      if constexpr (decltype(mid)::value) {
        if (ks == kMid) {
          wgmma_commit();
          wgmma_wait<1>();
          release(mid_tile, Tile::kHalfOther);
        }
      }
      qk(ks % 2 ? sc : sv, ks, ks >= 2);
    }
    wgmma_commit();
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
    fence_accumulators(o);
#pragma unroll
    for (int i = 0; i < 32; ++i) sv[i] += sc[i];
  };

  // V of tile t, this warpgroup's 256 columns, N-major; P of tile t in its rope block.
  auto v_desc = [&](int t) {
    return smem_desc<Swizzle::k128B>(stage(t) + 4 * kWg * Tile::kBlockBytes, Tile::kBlockBytes,
                                     1024);
  };
  uint8_t* const p_slot[2] = {smem + Tile::kPInStage, smem + Tile::kStageBytes + Tile::kPInStage};
  // O += P V for this warpgroup's tile t with P from registers, issued and committed.
  auto pv_local = [&](const uint32_t(&pa)[16], int t) {
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < Tile::kTokens / 16; ++ks) {
      const uint32_t a[4] = {pa[4 * ks], pa[4 * ks + 1], pa[4 * ks + 2], pa[4 * ks + 3]};
      wgmma_m64n256k16_rs<T, 1>(o, a, plus(v_desc(t), 16 * ks * 128), true);
    }
    wgmma_commit();
  };
  // O += P V for the other warpgroup's tile t with P from its rope block, issued and committed
  // (the caller has waited for P's hand-off).
  auto pv_remote = [&](int t) {
#pragma unroll
    for (int kb = 4 * kWg; kb < 4 * kWg + 4; ++kb) wait_block(t, kb);
    const uint64_t p_desc =
        smem_desc(stage(t) + Tile::kPInStage, 128, Tile::kPGroupBytes);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < Tile::kTokens / 16; ++ks)
      wgmma_m64n256k16<T, 1>(o, plus(p_desc, ks * 256), plus(v_desc(t), 16 * ks * 128), true);
    wgmma_commit();
  };

  float sv[32], alpha[2];
  uint32_t pa[16];
  if constexpr (kWg == 0) {
    // Warpgroup 0, pair (a, b): softmax of a against its running max (warpgroup 1's after
    // the last pair); hand the new max over; O += P_a V_a; once warpgroup 1 has its max
    // after b, rescale P_a to it and hand P_a over; O and l to that max; O += P_b V_b; score
    // tile a + 2 (the P V of b waited for after 16 steps).
    auto pair = [&](auto has_b, auto has_next, int a) {
      const uint32_t parity = (a / 2) & 1;
      const float no_floor[2] = {mma::kNegInf, mma::kNegInf};
      softmax_tile<T>(p, w, sv, first(a), rows, no_floor, alpha, pa);
      store_max();
      mbar_arrive(hand(Tile::kMax0Ready));
      scale_o(alpha);
      pv_local(pa, a);
      float to_b[2] = {1.f, 1.f};  // P_a, O and l from a's max to b's
      if constexpr (decltype(has_b)::value) {
        mbar_wait(hand(Tile::kP1Ready), parity);
        uint32_t pb[16];
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          float m_ref;
          to_b[h] = rescale(rows, h, s_max[Tile::kRows + rows.r[h]], &m_ref);
        }
#pragma unroll
        for (int j = 0; j < 16; ++j)
          pb[j] = pack2<T>(sv[2 * j] * to_b[j % 2], sv[2 * j + 1] * to_b[j % 2]);
        store_p(rows, pb, p_slot[0]);
      } else {
        store_p(rows, pa, p_slot[0]);
      }
      fence_proxy_async();
      mbar_arrive(hand(Tile::kP0Ready));  // releases this thread's stores
      wgmma_wait<0>();
      fence_accumulators(o);
      release(a, Tile::kHalfOwn);
      if constexpr (decltype(has_b)::value) {
        for (int h = 0; h < 2; ++h) rows.l[h] *= to_b[h];
        scale_o(to_b);
        pv_remote(a + 1);
        if constexpr (decltype(has_next)::value) {
          scores(a + 2, sv, true_type{}, a + 1);
        } else {
          wgmma_wait<0>();
          fence_accumulators(o);
          release(a + 1, Tile::kHalfOther);
        }
      }
    };
    if (n_tiles > 0) scores(0, sv, false_type{}, 0);
    for (int a = 0; a < n_tiles; a += 2) {
      if (a + 2 < n_tiles)
        pair(true_type{}, true_type{}, a);
      else if (a + 1 < n_tiles)
        pair(true_type{}, false_type{}, a);
      else
        pair(false_type{}, false_type{}, a);
    }
  } else {
    // Warpgroup 1, pair (a, b): softmax of b against warpgroup 0's max after a; hand its max
    // and P_b over; O += P_b V_b; once P_a (rescaled to b's max) is there, O += P_a V_a;
    // release both; score tile b + 2. Without b (the chunk's last tile is a): O and l to a's
    // max, O += P_a V_a.
    auto pair = [&](auto has_next, int a) {
      const uint32_t parity = (a / 2) & 1;
      mbar_wait(hand(Tile::kMax0Ready), parity);
      const float floor[2] = {s_max[rows.r[0]], s_max[rows.r[1]]};
      softmax_tile<T>(p, w, sv, first(a + 1), rows, floor, alpha, pa);
      store_max();
      store_p(rows, pa, p_slot[1]);
      fence_proxy_async();
      mbar_arrive(hand(Tile::kP1Ready));  // releases this thread's stores
      scale_o(alpha);
      pv_local(pa, a + 1);
      mbar_wait(hand(Tile::kP0Ready), parity);
      pv_remote(a);
      wgmma_wait<1>();
      release(a + 1, Tile::kHalfOwn);
      wgmma_wait<0>();
      fence_accumulators(o);
      release(a, Tile::kHalfOther);
      if constexpr (decltype(has_next)::value) scores(a + 3, sv, false_type{}, 0);
    };
    auto last_alone = [&](int a) {
      const uint32_t parity = (a / 2) & 1;
      mbar_wait(hand(Tile::kMax0Ready), parity);
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float m_ref;
        alpha[h] = rescale(rows, h, fmaxf(rows.m[h], s_max[rows.r[h]]), &m_ref);
        rows.l[h] *= alpha[h];
      }
      scale_o(alpha);
      mbar_wait(hand(Tile::kP0Ready), parity);
      pv_remote(a);
      wgmma_wait<0>();
      fence_accumulators(o);
      release(a, Tile::kHalfOther);
    };
    if (n_tiles > 1) scores(1, sv, false_type{}, 0);
    for (int a = 0; a < n_tiles; a += 2) {
      if (a + 3 < n_tiles)
        pair(true_type{}, a);
      else if (a + 1 < n_tiles)
        pair(false_type{}, a);
      else
        last_alone(a);
    }
  }
}

template <typename T>
__device__ __forceinline__ void verify_cta(const VerifyKernelParams& p) {
  CtaWork w;
  if (!mma::cta_work<Tile>(p, &w)) return;
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s_base = smem_addr(smem);
  const uint32_t s_q = s_base + Tile::kQOffset;
  float* s_sum = reinterpret_cast<float*>(smem + Tile::kSumOffset);
  float* s_lse = reinterpret_cast<float*>(smem + Tile::kLseOffset);
  float* s_inv_l = reinterpret_cast<float*>(smem + Tile::kInvLOffset);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int n_tiles = (w.tok_end - w.tok_begin + Tile::kTokens - 1) / Tile::kTokens;
  if (threadIdx.x == 0) {
    for (int s = 0; s < Tile::kStages; ++s) {
      for (int kb = 0; kb < Tile::kBlocks; ++kb)
        mbar_init(full_bar(s_base, s, kb), Tile::kThreads - Tile::kConsumerThreads);
      for (int half = 0; half < 2; ++half)
        mbar_init(empty_bar(s_base, s, half), Tile::kConsumerThreads / Tile::kWarpgroups);
    }
    for (int i = 0; i < 3; ++i)
      mbar_init(s_base + Tile::kHandOffset + 8 * i, Tile::kConsumerThreads / Tile::kWarpgroups);
    mbar_init_fence();
  }
  __syncthreads();  // the mbarriers; the last barrier the producer warpgroup joins
  if (warp >= Tile::kProducerWarp) {
    setmaxnreg_dec<Tile::kProducerRegisters>();
    produce(p, w, n_tiles, s_base);
    return;
  }
  setmaxnreg_inc<Tile::kConsumerRegisters>();

  copy_q(p, w, s_q);
  cp_async_commit();
  Rows rows;
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    rows.r[h] = 16 * (warp % 4) + lane / 4 + 8 * h;
    rows.valid[h] = w.row0 + rows.r[h] < w.rows_b;
    // A node always sees itself, so requests of one node (decode) never read the mask.
    rows.node[h] = rows.valid[h] ? (w.row0 + rows.r[h]) / p.num_heads : 0;
    rows.mask[h] = p.tree_mask + static_cast<int64_t>(w.q0 + rows.node[h]) * p.mask_words;
  }
  float o[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) o[i] = 0.f;
  const int wg = warp / 4;
  cp_async_wait<0>();
  fence_proxy_async();
  consumer_sync();  // Q, for every consumer and for wgmma's reads

  if (wg == 0)
    consume<T, 0>(p, w, n_tiles, smem, rows, o);
  else
    consume<T, 1>(p, w, n_tiles, smem, rows, o);
  epilogue<T>(p, w, rows, o, wg, s_sum, s_lse, s_inv_l);
  consumer_sync();  // the epilogue's stores and its NaN rows in s_lse
  // Every tile has landed (each was waited for), so the stages are free for its rows' O.
  mma::recompute_nan_rows<T, Tile, false>(p, smem, s_lse);
}

// Compiled into sm_90a code only; elsewhere a trap (dispatch never launches it there).
template <typename T>
__global__ void __launch_bounds__(Tile::kThreads, Tile::kMinBlocks)
    verify_wgmma_kernel(const __grid_constant__ VerifyKernelParams p) {
#if TV_HAS_WGMMA
  // Lets the combine kernel, launched as a programmatic dependent, be scheduled as SMs free up;
  // it waits for this whole grid (griddepcontrol.wait) before reading any partial.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  verify_cta<T>(p);
#elif TV_DEVICE_PASS
  // A constant message: printf with arguments would need a stack frame.
  printf(
      "treeverify: verify_wgmma_kernel runs only in sm_90a code; dispatch should not have "
      "launched it\n"),
      __trap();
#endif
}

}  // namespace treeverify::cuda::sm90
