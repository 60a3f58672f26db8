// The sm_90a decode kernel: split-KV MLA verify on an e4m3 cache (exact mode) for requests of
// at most 16 query rows (decode with H <= 16, small trees), on wgmma with the KV tokens as M and
// the query rows as N, and the tiles' codes widened in registers, never in shared memory.
//
// Why: the portable kernel's 16-row CTAs on an e4m3 cache are bound by their instructions
// (cuda/mma/DESIGN_NOTES.md: D1 at 0.57 of its 1-byte roof), and wgmma's M of 64 would spend
// 4-8x the tensor work on 8 or 16 rows unless the operands swap ("swap AB"). A first version
// (commit 3bd2412: tiles widened to fp16 in two 72 KB stages, as verify_wgmma.cuh does) was
// slower than the portable kernel: one tile in flight an SM (DESIGN_NOTES.md). Here a stage is
// a tile's 40 KB of codes, so 5 of them fit beside Q, and the products take their A operand from
// registers:
//   S^T = K Q^T     36 wgmma m64n16k16: K's fragments from one 16-byte load a row and 64-value
//                   block, widened by cvt.rn.f16x2.e4m3x2 (Q's columns permuted to match,
//                   q_column); Q (fp16, 16 rows) from shared memory;
//   O^T += V^T P^T  32 wgmma m64n16k16: V^T's fragments from 4-byte loads (4 of V's columns of
//                   one token; O^T's rows permuted to match, o_column) and byte permutes into
//                   token pairs (P^T's tokens permuted to match, p_token); P^T (fp16) from shared
//                   memory.
// One CTA = up to 16 query rows (row r of request b is node r / H, head r % H) x one chunk of
// the request's KV sequence (DecodeTile, decode_tile.h): a producer warpgroup (the verify
// kernel's, operands.cuh: cp.async or TMA) and one consumer warpgroup that, a tile at a time,
// scores, runs the online softmax over the tile's tokens for each query row (a column of S^T:
// the column maxima meet across the 4 warps in shared memory), writes P^T to shared memory and
// adds V^T P^T into O^T (64 fp32 registers a thread). Exact mode as the other kernels: fp16
// products, Q rescaled a row by a power of two, the scores taking that factor times kv_scale, O
// kv_scale. The epilogue is the verify kernel's contract: out/lse for a one-chunk request, else
// a partial in T (in the codes' units) and its lse (log2) for the combine; non-finite rows are
// recomputed exactly (cuda/mma/nonfinite.cuh).
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
__host__ __device__ constexpr int decode_col(int i) { return 2 * (i / 4) + i % 2; }

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

// The column of the products' order that value p (< 64) of a 64-value block of Q or K takes:
// a thread's 16-byte load of K's codes 16 t4 .. 16 t4 + 15 of the block (t4 = lane % 4) gives
// k step s (< 4) of the block codes 16 t4 + 4 s + e (e < 4), which the A fragment holds at the
// step's columns 2 t4 + e (e < 2) and 2 t4 + 6 + e (e >= 2); Q is stored in that order.
__host__ __device__ constexpr int fragment_column(int e, int t4) {
  return e < 2 ? 2 * t4 + e : 2 * t4 + 6 + e;
}
__host__ __device__ constexpr int q_column(int p) {
  return 16 * (p % 16 / 4) + fragment_column(p % 4, p / 16);
}
// P^T's column for token r (< 16) of a k step of V^T P^T: V^T's fragment holds tokens 4 t4 + e
// (e < 4) at its columns fragment_column(e, t4).
__host__ __device__ constexpr int p_token(int r) { return fragment_column(r % 4, r / 4); }
// V's column that row (warp, g = lane / 4, h) of O^T's 64-row block b holds: a thread's 4-byte
// load of columns 128 (b / 2) + 32 warp + 4 g .. + 3 of a token serves blocks b and b + 1.
__host__ __device__ constexpr int o_column(int b, int warp, int g, int h) {
  return 128 * (b / 2) + 32 * warp + 4 * g + 2 * (b % 2) + h;
}
static_assert(q_column(0) == 0 && q_column(1) == 1 && q_column(2) == 8 && q_column(3) == 9 &&
              q_column(4) == 16 && q_column(16) == 2 && q_column(63) == 63);

__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr)
               : "memory");
  return v;
}
__device__ __forceinline__ uint32_t ld_shared_u32(uint32_t addr) {
  uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr) : "memory");
  return v;
}

// The consumer warpgroup's pass over the chunk's tiles, O^T into o (o[b]: 64 of V's columns,
// o_column). Every wgmma is waited for inside the tile (ptxas serializes every wgmma in flight
// across a loop's back edge, C7514).
__device__ __forceinline__ void decode_consume(const VerifyKernelParams& p, const CtaWork& w,
                                               int n_tiles, uint8_t* smem, DecodeCols& cols,
                                               float (&o)[8][8]) {
  const uint32_t s_base = smem_addr(smem);
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const int g = lane / 4, t4 = lane % 4;
  float* s_max = reinterpret_cast<float*>(smem + DTile::kMaxOffset);
  const uint64_t q_desc = smem_desc<Swizzle::k128B>(s_base + DTile::kQOffset, 16, 1024);
  auto plus = [](uint64_t desc, uint32_t bytes) { return desc + (bytes >> 4); };
  // The tile's tokens this thread holds in S^T: tok0 and tok0 + 8.
  const int tok0 = 16 * warp + g;
  for (int t = 0; t < n_tiles; ++t) {
    const int slot = t % DTile::kStages;
    mbar_wait(s_base + DTile::kFullOffset + 8 * slot, (t / DTile::kStages) & 1);
    const uint32_t st = s_base + slot * DTile::kStageBytes;

    // S^T = K Q^T: 3 chains of 12 k steps (the tensor cores' fp32 accumulation truncates:
    // verify_wgmma.cuh, scores), summed in fp32; each chain's 48 A registers from 3 blocks of
    // K's codes, the third chain's made once the first has completed. Each Q descriptor is
    // made from the last through an opaque copy, so ptxas does not build all 36 up front.
    float sc[3][8];
    uint64_t qd = q_desc;
#pragma unroll
    for (int c = 0; c < 3; ++c) fence_accumulators(sc[c]);
#pragma unroll
    for (int chain = 0; chain < 3; ++chain) {
      if (chain == 2) wgmma_wait<1>();
      uint32_t a[12][4];
#pragma unroll
      for (int jb = 0; jb < 3; ++jb) {
        const int j = 3 * chain + jb;  // the 64-value block
        uint4 x[2];
#pragma unroll
        for (int h = 0; h < 2; ++h)
          x[h] = ld_shared_v4(st + j / 2 * DTile::kCodePieceBytes + (tok0 + 8 * h) * 128 +
                              j % 2 * 64 + t4 * 16);
        const uint32_t lo[4] = {x[0].x, x[0].y, x[0].z, x[0].w};
        const uint32_t hi[4] = {x[1].x, x[1].y, x[1].z, x[1].w};
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          mma::e4m3x4_to_f16x2x2(lo[s], a[4 * jb + s][0], a[4 * jb + s][2]);
          mma::e4m3x4_to_f16x2x2(hi[s], a[4 * jb + s][1], a[4 * jb + s][3]);
        }
      }
      wgmma_fence();
#pragma unroll
      for (int ks = 0; ks < 12; ++ks) {
        wgmma_m64n16k16_rs_f16(sc[chain], a[ks], qd, ks > 0);
        qd = plus(qd, (12 * chain + ks) % 4 == 3 ? DTile::kQBlockBytes - 96 : 32);
        asm volatile("" : "+l"(qd));
      }
      wgmma_commit();
    }
    wgmma_wait<0>();
#pragma unroll
    for (int c = 0; c < 3; ++c) fence_accumulators(sc[c]);
    float s[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) s[i] = sc[0][i] + sc[1][i] + sc[2][i];

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
    // P = exp2(s - max): the row sums take the fp32 p's, P^T (fp16) goes to shared memory at
    // (row n, column k): (n / 8) kPGroupBytes + (k / 8) 128 + (n % 8) 16 + (k % 8) 2, token
    // 16 warp + r of the tile (k step warp) at column 16 warp + p_token(r).
    uint8_t* s_p = smem + DTile::kPOffset + (t % 2) * DTile::kPBytes;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const int q = decode_col(i), h = (i / 2) % 2;
      s[i] = mma::fast_exp2(s[i] - m_ref[q]);
      cols.l[q] += s[i];
      const int n = cols.c[q], k = 16 * warp + p_token(g + 8 * h);
      *reinterpret_cast<__half*>(s_p + (n / 8) * DTile::kPGroupBytes + (k / 8) * 128 +
                                 (n % 8) * 16 + (k % 8) * 2) = __float2half_rn(s[i]);
    }
    fence_proxy_async();  // P^T, for wgmma's reads
    decode_sync();        // every warp's part of P^T

    // O^T = alpha O^T + V^T P^T: a k step's 32 A registers (8 blocks) from 16 loads of 4 codes
    // (4 of V's columns of one of the thread's 4 tokens, for each of 4 column groups c) and
    // byte permutes into token pairs; k step ks's registers are made once ks - 2's products
    // have completed.
    if (__any_sync(0xffffffffu,
                   alpha[0] != 1.f || alpha[1] != 1.f || alpha[2] != 1.f || alpha[3] != 1.f)) {
#pragma unroll
      for (int b = 0; b < 8; ++b)
#pragma unroll
        for (int i = 0; i < 8; ++i) o[b][i] *= alpha[decode_col(i)];
    }
#pragma unroll
    for (int b = 0; b < 8; ++b) fence_accumulators(o[b]);
    const uint64_t p_desc = smem_desc(smem_addr(s_p), 128, DTile::kPGroupBytes);
#pragma unroll
    for (int ks = 0; ks < DTile::kTokens / 16; ++ks) {
      if (ks >= 2) wgmma_wait<1>();
      uint32_t a[8][4];
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        uint32_t u[4];  // token 16 ks + 4 t4 + e: columns o_column(2 c, warp, g, 0) .. + 3
#pragma unroll
        for (int e = 0; e < 4; ++e)
          u[e] = ld_shared_u32(st + c * DTile::kCodePieceBytes + (16 * ks + 4 * t4 + e) * 128 +
                               32 * warp + 4 * g);
        // Bytes (column, token pair) of blocks 2 c (columns 0, 1) and 2 c + 1 (2, 3).
        mma::e4m3x4_to_f16x2x2(__byte_perm(u[0], u[1], 0x5140), a[2 * c][0], a[2 * c][1]);
        mma::e4m3x4_to_f16x2x2(__byte_perm(u[2], u[3], 0x5140), a[2 * c][2], a[2 * c][3]);
        mma::e4m3x4_to_f16x2x2(__byte_perm(u[0], u[1], 0x7362), a[2 * c + 1][0], a[2 * c + 1][1]);
        mma::e4m3x4_to_f16x2x2(__byte_perm(u[2], u[3], 0x7362), a[2 * c + 1][2], a[2 * c + 1][3]);
      }
      wgmma_fence();
#pragma unroll
      for (int b = 0; b < kVDim / 64; ++b)
        wgmma_m64n16k16_rs_f16(o[b], a[b], plus(p_desc, ks * 256), true);
      wgmma_commit();
    }
    wgmma_wait<0>();
#pragma unroll
    for (int b = 0; b < 8; ++b) fence_accumulators(o[b]);
    __syncwarp();  // this warp is done with the tile
    if (lane == 0) mbar_arrive(s_base + DTile::kEmptyOffset + 8 * slot);
  }
}

// Writes O v_scale / l as the output (one-chunk requests), or O / l as a partial in T and its
// lse (log2) for the combine, which applies v_scale; a row with a non-finite value is marked
// NaN in s_lse for the recomputation (verify_wgmma.cuh's epilogue, for O^T: each thread's
// accumulators go to the rows and columns they belong to, o_column).
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
  // O^T v_scale / l in T, row c at smem + c kOutPitch (stage 0: every tile has been read),
  // its rows h = 0, 1 (accumulators i, i + 2) two adjacent columns.
  const int g = lane / 4;
  float inv_l[4];
#pragma unroll
  for (int q = 0; q < 4; ++q) inv_l[q] = s_inv_l[cols.c[q]];
#pragma unroll
  for (int b = 0; b < kVDim / 64; ++b) {
    const int col = o_column(b, warp, g, 0);
#pragma unroll
    for (int i : {0, 1, 4, 5}) {
      const int q = decode_col(i);
      *reinterpret_cast<uint32_t*>(smem + cols.c[q] * DTile::kOutPitch + col * 2) =
          pack2<T>(o[b][i] * inv_l[q], o[b][i + 2] * inv_l[q]);
    }
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

// Q's rows in fp16 (prepare_q_f16, each row's factor times kv_scale in s_lse) with each
// 64-value block's columns in the products' order (q_column): each thread moves the units it
// copied, in pairs of columns, after every thread has read its own.
template <typename T>
__device__ __forceinline__ void prepare_q(uint8_t* s_q, float* s_lse, float kv_scale) {
  constexpr int kBlocks = kQKDim / 64;
  prepare_q_f16<T, DTile::kRows, DTile::kConsumerThreads>(s_q, s_lse, kv_scale);
  const int tid = static_cast<int>(threadIdx.x), r = tid / 8, u = tid % 8;
  uint4 v[kBlocks];
#pragma unroll
  for (int kb = 0; kb < kBlocks; ++kb)
    v[kb] = *reinterpret_cast<const uint4*>(s_q + tile_offset<DTile::kRows>(r, kb, u));
  decode_sync();
#pragma unroll
  for (int kb = 0; kb < kBlocks; ++kb) {
    const uint32_t pairs[4] = {v[kb].x, v[kb].y, v[kb].z, v[kb].w};
#pragma unroll
    for (int m = 0; m < 4; ++m) {  // values 8 u + 2 m and + 1: columns c and c + 1
      const int c = q_column(8 * u + 2 * m);
      *reinterpret_cast<uint32_t*>(s_q + tile_offset<DTile::kRows>(r, kb, c / 8) + c % 8 * 2) =
          pairs[m];
    }
  }
}

// T: the query's and output's type; kTma: whole tiles inside one page copied by TMA through
// kv_map (operands.cuh, produce).
template <typename T, bool kTma>
__device__ __forceinline__ void decode_cta(const VerifyKernelParams& p, const CUtensorMap& kv_map) {
  CtaWork w;
  if (!mma::cta_work<DTile>(p, &w)) return;
  extern __shared__ __align__(1024) uint8_t smem[];
  const uint32_t s_base = smem_addr(smem);
  float* s_lse = reinterpret_cast<float*>(smem + DTile::kLseOffset);
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int n_tiles = (w.tok_end - w.tok_begin + DTile::kTokens - 1) / DTile::kTokens;
  if (threadIdx.x == 0) {
    // A stage's full barrier: every producer thread arrives, by TMA or when its cp.async
    // land; its empty one: each consumer warp once it is done with the tile.
    constexpr int kProducers = DTile::kThreads - DTile::kConsumerThreads;
    for (int s = 0; s < DTile::kStages; ++s) {
      mbar_init(s_base + DTile::kFullOffset + 8 * s, kProducers);
      mbar_init(s_base + DTile::kEmptyOffset + 8 * s, DTile::kConsumerWarps);
    }
    mbar_init_fence();
  }
  __syncthreads();  // the mbarriers; the last barrier the producer warpgroup joins
  if (warp >= DTile::kConsumerWarps) {
    produce</*kE4M3=*/true, kTma, DTile>(p, w, n_tiles, s_base, &kv_map);
    return;
  }

  const float v_scale = __ldg(p.kv_scale);  // O's factor
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
  // Q to fp16 in the products' column order and each row's factor (in s_lse, free until the
  // epilogue).
  prepare_q<T>(smem + DTile::kQOffset, s_lse, v_scale);
  fence_proxy_async();
  decode_sync();  // Q (and its row factors), for every consumer and for wgmma's reads
#pragma unroll
  for (int q = 0; q < 4; ++q) cols.scale_log2[q] = p.scale_log2 * s_lse[cols.c[q]];
  decode_consume(p, w, n_tiles, smem, cols, o);
  decode_epilogue<T>(p, w, cols, o, v_scale, smem);
  decode_sync();  // the epilogue's stores and its NaN rows in s_lse
  mma::recompute_nan_rows<T, DTile, /*kE4M3=*/true, DTile::kConsumerWarps>(p, smem, s_lse);
}

// Compiled into sm_90a code only; elsewhere a trap (dispatch never launches it there).
template <typename T, bool kTma>
__global__ void __launch_bounds__(DTile::kThreads, DTile::kMinBlocks)
    decode_wgmma_kernel(const __grid_constant__ VerifyKernelParams p,
                        const __grid_constant__ CUtensorMap kv_map) {
#if TV_HAS_WGMMA
  // Lets the combine kernel, launched as a programmatic dependent, be scheduled as SMs free up;
  // it waits for this whole grid (griddepcontrol.wait) before reading any partial.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
  decode_cta<T, kTma>(p, kv_map);
#elif TV_DEVICE_PASS
  printf(
      "treeverify: decode_wgmma_kernel runs only in sm_90a code; dispatch should not have "
      "launched it\n"),
      __trap();
#endif
}

}  // namespace treeverify::cuda::sm90
