// The shape and shared-memory map of the sm_90a wgmma decode kernel (decode_wgmma.cuh): one CTA
// of a consumer warpgroup and a producer warpgroup holds up to 16 query rows against a 5-stage
// pipeline of 64-token tiles of e4m3 codes, with the KV tokens as wgmma's M and the query rows
// as its N. Host code reads it for the launch, the schedule and doctor.
#pragma once

#include "cuda/common/constants.h"

namespace treeverify::cuda::sm90 {

struct DecodeTile {
  static constexpr int kRows = 16;    // query rows a CTA: wgmma's N
  static constexpr int kTokens = 64;  // KV tokens a tile: wgmma's M
  // One consumer warpgroup (the products and the softmax) and a producer warpgroup (the
  // copies: the verify kernel's, operands.cuh). 256 threads and one CTA an SM leave every
  // thread all the registers it needs without setmaxnreg.
  static constexpr int kConsumerThreads = 128;
  static constexpr int kConsumerWarps = kConsumerThreads / 32;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kMinBlocks = 1;
  static constexpr bool kHalves = false;  // for mma::cta_work (the portable kernel's halves)
  // A stage holds a tile's codes as they are in the cache, never widened in shared memory (the
  // products take them from registers): piece j (j < 5) holds codes 128 j .. 128 j + 127 of
  // row r in its 128 bytes at j kCodePieceBytes + 128 r, unswizzled (piece 4: codes 512-575,
  // then 64 bytes of zeros or nothing), as one TMA box of 128 codes x 64 rows lands them.
  static constexpr int kCodePieceBytes = kTokens * 128;
  static constexpr int kCodePieces = (kQKDim + 127) / 128;
  static constexpr int kStageBytes = kCodePieces * kCodePieceBytes;  // 40 KB
  static constexpr bool kWidenInPlace = false;
  static constexpr int kStages = 5;
  // Q in fp16, wgmma's 128-byte swizzle (tile.h), kRows rows a 64-value block, its columns
  // permuted inside each block to match the K fragments' (decode_wgmma.cuh, q_column).
  static constexpr int kQBlockBytes = kRows * 128;
  // P^T of a tile (fp16, query rows x tokens), the B operand of O^T += V^T P^T, without
  // swizzle: 8-row groups of kTokens values, 16 bytes of each of the 8 rows interleaved (one
  // 128-byte core matrix: 8 tokens of 8 rows); two buffers, by tile parity.
  static constexpr int kPGroupBytes = 8 * kTokens * 2;  // 1024
  static constexpr int kPBytes = kRows / 8 * kPGroupBytes;
  // The epilogue's rows of O in T, staged in stage 0 (free by then), 16 bytes of padding a row.
  static constexpr int kOutPitch = kVDim * 2 + 16;
  static_assert(kRows * kOutPitch <= kStageBytes, "the staged rows fit a stage");
  // Shared memory: the stages; Q; P^T (two buffers); each warp's column maxima of a tile (two
  // buffers) and, at the end, its column sums; the rows' lse (Q's row factors before the loop)
  // and 1/l; a "full" and an "empty" mbarrier a stage.
  static constexpr int kQOffset = kStages * kStageBytes;
  static constexpr int kPOffset = kQOffset + kQKDim / 64 * kQBlockBytes;
  static constexpr int kMaxOffset = kPOffset + 2 * kPBytes;
  static constexpr int kSumOffset = kMaxOffset + 2 * kConsumerWarps * kRows * 4;
  static constexpr int kLseOffset = kSumOffset + kConsumerWarps * kRows * 4;
  static constexpr int kInvLOffset = kLseOffset + kRows * 4;
  static constexpr int kFullOffset = kInvLOffset + kRows * 4;
  static constexpr int kEmptyOffset = kFullOffset + kStages * 8;
  static constexpr int kLandedOffset = kEmptyOffset;  // no widening: never used (operands.cuh)
  static constexpr int kSmemBytes = kEmptyOffset + kStages * 8;
  static_assert(kSmemBytes <= 227 * 1024, "must fit a block of sm_90");
  static_assert(kQOffset % 1024 == 0, "the swizzled Q is 1024-byte aligned");
  static_assert(kFullOffset % 8 == 0, "mbarriers are 8-byte aligned");
};

}  // namespace treeverify::cuda::sm90
