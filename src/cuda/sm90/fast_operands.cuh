// The wgmma verify kernel's operands in fast mode (an e4m3 cache, Precision::kFast: Q and P in
// e4m3, e4m3 products; verify_wgmma.cuh): where a row's codes lie (K-major, as wgmma takes 8-bit
// operands), Q's codes made from its 16-bit rows, each tile's V transposed into V^T in the
// k order of P's registers, and P's codes out of the score accumulators (Q's codes: quantize_q_e4m3
// in operands.cuh). The layouts are WgmmaTile::Fast's (tile.h).
//
// The k order of P V. An 8-bit A operand in registers holds, for row lo (and hi), k 4 (lane % 4)
// .. + 3 in register 0 (1) and the same 16 further in registers 2 (3), while the score
// accumulators hold tokens 8 j + 2 (lane % 4) and + 1 of 8-token block j. So in each 16 tokens,
// k position 4 q + m of P V takes token 2 q + {0, 1, 8, 9}[m] (q = lane % 4): P's codes are
// packed in place (pack_p8) and V^T is written in that order (transpose_v), which is the order
// in which ldmatrix.trans of two 8-token halves and one byte permute hand a lane its tokens.
// So no register of P moves between lanes.
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
// V^T of warpgroup g's 256 columns in a V^T buffer (`vt`), K-major without swizzle: core
// matrices of 8 columns x 16 k positions, 128 bytes apart along k, kVtGroupPitch apart along the
// columns.
__device__ __forceinline__ uint64_t vt_desc(uint32_t vt, int g) {
  return smem_desc(vt + g * Fast::kVtBytes, 128, Fast::kVtGroupPitch);
}
// P's codes (the other warpgroup's A operand), K-major without swizzle: row r, k position k at
// (r / 8) 512 + (k / 16) 128 + (r % 8) 16 + k % 16.
__device__ __forceinline__ uint64_t p8_desc(uint32_t s_p) { return smem_desc(s_p, 128, 512); }

// Warp w's share (of the 4 of the consumer warpgroup that does not score the tile), once the
// tile's codes (`codes`) have landed, of its V^T (into the buffer `vt`): 16 of the 64 (16 tokens x
// 32 columns) pieces, in 4 column groups a (transpose_v_group). A piece
// is one ldmatrix.x4.trans of 16-bit pairs
// (matrices: tokens 0-7 and 8-15 of columns c0 .. c0 + 15, then of c0 + 16 .. c0 + 31), which
// hands lane l the bytes of tokens 2 q, 2 q + 1 (q = l % 4) at columns c0 + 2 (l / 4) and + 1;
// a byte permute of the two token halves gives each column's 4 tokens in P's k order
// (2 q + {0, 1, 8, 9}), and one stmatrix.x4 writes them to the columns' V^T rows (lane 8 j + i
// addresses row i of matrix j: column c0 + 16 (j / 2) + 2 i + j % 2), each 16-token k group a
// core matrix. Both ends are free of bank conflicts: the ldmatrix rows are 8 consecutive
// tokens in the 128-byte swizzle, and V^T's 8-column groups are kVtGroupPitch = 528 bytes apart,
// so a matrix's rows 0-3 and 4-7 (two groups) fall in different banks.
// Warp w takes columns 128 w .. 128 w + 127 (block w of the codes), as 4 column groups a
// (32 a ..) x 4 token groups G: lane l's row address reads token 16 G + 8 (j % 2) + i of
// column 128 w + 32 a + 16 (j / 2), j = l / 8, i = l % 8, and its stmatrix row is column
// 128 w + 32 a + 16 (j / 2) + 2 i + j % 2 at k group G. The addresses are a lane's base plus
// constants of a and G, so a piece costs its 6 instructions and two adds.
// The warp and lane are read from %tid.x here (volatile), not kept from elsewhere: with its
// addresses hoisted out of the consumers' loop it spilled 12 bytes there (O holds 128
// registers). Branch-free (ptxas serializes every wgmma in flight across a branch, C7514), so it
// could run between a wgmma's issue and its wait; interleaved with the score chains that way it
// spilled (sm90/DESIGN_NOTES.md), so it runs on its own, before the scores.
__device__ __forceinline__ void transpose_v_group(uint32_t codes, uint32_t vt, uint32_t a) {
  uint32_t tid;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(tid));
  const uint32_t w = tid / 32 % 4, lane = tid % 32, hj = lane / 16, j2 = (lane / 8) % 2,
                 i = lane % 8;
  const uint32_t ra =
      codes + w * Tile::kBlockBytes + (8 * j2 + i) * 128 + (((2 * a + hj) ^ i) << 4);
  const uint32_t wa = vt + (w / 2) * Fast::kVtBytes +
                      (16 * (w % 2) + 2 * hj + i / 4 + 4 * a) * Fast::kVtGroupPitch +
                      ((2 * i + j2) % 8) * 16;
  // The four loads before the four stores: in load-store pairs each load waited out the last
  // one's latency (the shared-memory asm keeps its order; H200, 2026-12-04, ncu: the permutes
  // after each load held 16% of the consumers' warp samples).
  uint32_t v[4][4];
#pragma unroll
  for (uint32_t G = 0; G < 4; ++G) ldmatrix_x4_trans(v[G], ra + G * 16 * 128);
#pragma unroll
  for (uint32_t G = 0; G < 4; ++G)
    stmatrix_x4(wa + G * 128, __byte_perm(v[G][0], v[G][1], 0x6420),
                __byte_perm(v[G][0], v[G][1], 0x7531), __byte_perm(v[G][2], v[G][3], 0x6420),
                __byte_perm(v[G][2], v[G][3], 0x7531));
}
// The whole share, the column groups a rolled loop (unrolled, with the loads of group a + 1
// issued before the stores of group a, it was no faster: H200, 2026-12-03, V2 1.8% faster, V1
// 1.4% and S2 3.5% slower; two groups a pass with two register sets in turn spilled 12 bytes,
// 2026-12-04).
__device__ __forceinline__ void transpose_v(uint32_t codes, uint32_t vt) {
#pragma unroll 1
  for (uint32_t a = 0; a < 4; ++a) transpose_v_group(codes, vt, a);
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

// P's codes to shared memory for the other warpgroup (p8_desc's layout): register 4 s + q to
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
