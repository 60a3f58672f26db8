// The wgmma verify kernel's operands in fast mode (an e4m3 cache, Precision::kFast: Q and P in
// e4m3, e4m3 products; verify_wgmma.cuh): where a row's codes lie (K-major, as wgmma takes 8-bit
// operands), each tile's V as the A operand of O^T += V^T P^T in registers, and P's codes out of
// the score accumulators into shared memory (Q's codes: quantize_q_e4m3 in operands.cuh). The
// layouts are WgmmaTile::Fast's (tile.h).
//
// The k order of P V. P's codes are packed in place from the score accumulators, which hold
// tokens 8 j + 2 (lane % 4) and + 1 of 8-token block j: a register of 4 codes holds, in each 16
// tokens, tokens 2 q + {0, 1, 8, 9} (q = lane % 4), and store_p8 puts them at k positions 4 q ..
// 4 q + 3. V's A fragments (load_v_fragments) hold the same tokens at the same k positions: the
// order in which ldmatrix.trans of two 8-token halves and one byte permute hand a lane its
// tokens. So no value moves between lanes on either side.
#pragma once

#include <type_traits>

#include "cuda/common/arch.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/sm90/tile.h"
#include "cuda/sm90/wgmma.cuh"

namespace treeverify::cuda::sm90 {

using Tile = WgmmaTile;
using Fast = Tile::Fast;

// Where code c (a multiple of 8: a piece of 8 to 16 codes within one 16-byte unit) of row r
// lies in a Q or K operand of fast mode: codes 0-511 in 4 blocks of 128 in the 128-byte
// swizzle (code_offset), codes 512-575 in one block of 64 in the 64-byte swizzle, unit u of
// row r at u ^ (r / 2 % 4), wgmma's Swizzle<2, 4, 3> (tail_offset). Two functions, each
// called where c is known at compile time to lie in its range: one with a run-time test
// compiled into the producer's loop as 110 instructions a piece, a division among them.
__device__ __forceinline__ uint32_t code_offset(uint32_t r, uint32_t c) {
  return (c / 128) * Tile::kBlockBytes + r * 128 + ((((c % 128) / 16) ^ (r % 8)) << 4) + c % 16;
}
__device__ __forceinline__ uint32_t tail_offset(uint32_t r, uint32_t c) {
  const uint32_t t = c - Fast::kTailCode;
  return Fast::kTailOffset + r * 64 + (((t / 16) ^ ((r / 2) % 4)) << 4) + t % 16;
}

// The descriptors of Q's or K's codes at `base` (a stage or Q): k32 step ks < 16 of blocks 0-3
// moves the 128-byte-swizzle descriptor 32 bytes a step inside a block; steps 16 and 17 read
// the tail block (64-byte swizzle, 512 bytes an 8-row group).
__device__ __forceinline__ uint64_t codes_desc(uint32_t base) {
  return smem_desc<Swizzle::k128B>(base, 16, 1024);
}
__device__ __forceinline__ uint64_t tail_desc(uint32_t base) {
  return smem_desc<Swizzle::k64B>(base + Fast::kTailOffset, 16, 512);
}
// P's codes (the B operand of O^T += V^T P^T: N the rows, K the tokens), K-major without
// swizzle: row r, k position k at (r / 8) 512 + (k / 16) 128 + (r % 8) 16 + k % 16.
__device__ __forceinline__ uint64_t p8_desc(uint32_t s_p) { return smem_desc(s_p, 128, 512); }

// Tile t's V as the A operand of O^T += V^T P^T (fast_pipeline.cuh), straight from its codes
// (`codes`, a stage) into registers: warpgroup g's 256 columns as 4 m-blocks of 64 (M) x the
// tile's 2 k32 steps, a[8 mb + 4 ks + i] register i of block mb's step ks. In block mb, warp w
// (w = warp % 4) holds the 16 columns from c0 = 256 g + 64 mb + 16 w, A's row lo = 16 w + lane
// / 4 as column c0 + 2 (lane / 4) and row hi = lo + 8 as c0 + 2 (lane / 4) + 1 (the order
// ldmatrix hands them out; the epilogue writes O^T back by it). One ldmatrix.x4.trans of 16-bit
// pairs a block and step (matrix j: tokens 32 ks + 8 j .. + 7 of the 16 columns; lane l gives
// the address of token 32 ks + l) hands lane l the bytes of tokens 2 q, 2 q + 1 (q = l % 4) of
// each matrix at columns c0 + 2 (l / 4) and + 1; two byte permutes a matrix pair give each
// column's 4 tokens in P's k order (2 q + {0, 1, 8, 9}), which is the A fragment's k 4 q .. 4 q
// + 3. Free of bank conflicts: a matrix's 8 rows are 8 consecutive tokens in the 128-byte
// swizzle. All 8 loads go before the permutes (the shared-memory asm keeps its order: in
// load-permute pairs each load's latency is exposed).
// The warp and lane are read from %tid.x here (volatile), not kept from elsewhere (hoisted out
// of the consumers' loop, such addresses spill there: O holds 128 registers).
__device__ __forceinline__ void load_v_fragments(uint32_t codes, int g, uint32_t (&a)[32]) {
  uint32_t tid;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
  const uint32_t w = tid / 32 % 4, lane = tid % 32;
  const uint32_t unit = (w ^ (lane % 8)) << 4;  // the 16 columns' unit in token lane's row
  const uint32_t row = codes + 2 * g * Tile::kBlockBytes + lane * 128;
  uint32_t v[8][4];
#pragma unroll
  for (int mb = 0; mb < 4; ++mb)
#pragma unroll
    for (int ks = 0; ks < 2; ++ks)  // block mb / 2, units 4 (mb % 2) + w: unit ^ 64 for odd mb
      ldmatrix_x4_trans(v[2 * mb + ks], row + (mb / 2) * Tile::kBlockBytes + ks * 32 * 128 +
                                            (mb % 2 ? unit ^ 64u : unit));
#pragma unroll
  for (int b = 0; b < 8; ++b) {
    a[4 * b] = __byte_perm(v[b][0], v[b][1], 0x6420);
    a[4 * b + 1] = __byte_perm(v[b][0], v[b][1], 0x7531);
    a[4 * b + 2] = __byte_perm(v[b][2], v[b][3], 0x6420);
    a[4 * b + 3] = __byte_perm(v[b][2], v[b][3], 0x7531);
  }
  // The permutes done here, not moved between the wgmma that read them (ptxas then fences
  // each wgmma on its own: C7519).
#pragma unroll
  for (int i = 0; i < 32; ++i) asm volatile("" : "+r"(a[i])::"memory");
}

// P's codes from the probabilities p (softmax_tile's s, in the accumulator layout), as p x 448
// (the portable fast mode's scaling, fp8_ops.cuh): register 4 s + q is the A operand's register
// q of k32 step s, its bytes accumulators b, b + 1, b + 4, b + 5 with b = 16 s + 8 (q / 2) +
// 2 (q % 2) (the k order in the file comment).
__device__ __forceinline__ void pack_p8(const float (&s)[32], uint32_t (&pa)[8]) {
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    const int b = 16 * (r / 4) + 8 * ((r % 4) / 2) + 2 * (r % 2);
    pa[r] = static_cast<uint32_t>(pack_e4m3x2(s[b] * kE4M3Max, s[b + 1] * kE4M3Max)) |
            static_cast<uint32_t>(pack_e4m3x2(s[b + 4] * kE4M3Max, s[b + 5] * kE4M3Max)) << 16;
  }
}

// P's codes to shared memory, for both warpgroups' P V (p8_desc's layout): register 4 s + q to
// row r[q % 2], k positions 32 s + 16 (q / 2) + 4 (lane % 4) .. + 3, so a warp's store fills one
// 128-byte core matrix.
__device__ __forceinline__ void store_p8(const int (&rows)[2], const uint32_t (&pa)[8],
                                         uint8_t* s_p) {
  const int lane = static_cast<int>(threadIdx.x) % 32;
#pragma unroll
  for (int r = 0; r < 8; ++r) {
    const int row = rows[r % 2], kgroup = 2 * (r / 4) + (r % 4) / 2;
    *reinterpret_cast<uint32_t*>(s_p + (row / 8) * 512 + kgroup * 128 + (row % 8) * 16 +
                                 4 * (lane % 4)) = pa[r];
  }
}

}  // namespace treeverify::cuda::sm90
