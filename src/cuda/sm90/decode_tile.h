// The shape and shared-memory map of the sm_90a wgmma decode kernel (decode_wgmma.cuh): one CTA
// of a consumer warpgroup and a producer warpgroup holds up to 16 query rows against a 2-stage
// pipeline of 64-token KV tiles, with the KV tokens as wgmma's M and the query rows as its N.
// Host code reads it for the launch, the schedule and doctor.
#pragma once

#include "cuda/common/constants.h"
#include "cuda/sm90/tile.h"

namespace treeverify::cuda::sm90 {

struct DecodeTile {
  static constexpr int kRows = 16;    // query rows a CTA: wgmma's N
  static constexpr int kTokens = 64;  // KV tokens a tile: wgmma's M
  static constexpr int kStages = 2;
  // One consumer warpgroup (the products and the softmax) and a producer warpgroup (the
  // copies, WgmmaTile's producer: operands.cuh). 256 threads and one CTA an SM leave every
  // thread all the registers it needs without setmaxnreg.
  static constexpr int kConsumerThreads = 128;
  static constexpr int kConsumerWarps = kConsumerThreads / 32;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kMinBlocks = 1;
  static constexpr bool kHalves = false;  // for mma::cta_work (the portable kernel's halves)
  // KV tiles exactly as WgmmaTile stores them (64 rows of 576 values, 128-byte swizzle, 9
  // blocks of 64 values), so its producer fills them.
  static constexpr int kBlockBytes = WgmmaTile::kBlockBytes;
  static constexpr int kStageBytes = WgmmaTile::kStageBytes;
  // Q in the same swizzle with kRows rows a block.
  static constexpr int kQBlockBytes = kRows * 128;
  // P^T of a tile (16-bit, query rows x tokens), the decode kernel's B operand, without
  // swizzle: 8-row groups of kTokens values, 16 bytes of each of the 8 rows interleaved (one
  // 128-byte core matrix: 8 tokens of 8 rows); two buffers, by tile parity.
  static constexpr int kPGroupBytes = 8 * kTokens * 2;  // 1024
  static constexpr int kPBytes = kRows / 8 * kPGroupBytes;
  // The epilogue's rows of O in T, staged in stage 0 (free by then), 16 bytes of padding a
  // row (stmatrix's 8 rows in 8 different bank groups).
  static constexpr int kOutPitch = kVDim * 2 + 16;
  static_assert(kRows * kOutPitch <= kStageBytes, "the staged rows fit a stage");
  // Shared memory: the KV stages; Q; P^T (two buffers); each warp's column maxima of a tile
  // (two buffers) and, at the end, its column sums; the rows' lse (Q's row factors before the
  // loop) and 1/l; a "full", an "empty" and a "codes landed" mbarrier a stage.
  static constexpr int kQOffset = kStages * kStageBytes;
  static constexpr int kPOffset = kQOffset + kQKDim / 64 * kQBlockBytes;
  static constexpr int kMaxOffset = kPOffset + 2 * kPBytes;
  static constexpr int kSumOffset = kMaxOffset + 2 * kConsumerWarps * kRows * 4;
  static constexpr int kLseOffset = kSumOffset + kConsumerWarps * kRows * 4;
  static constexpr int kInvLOffset = kLseOffset + kRows * 4;
  static constexpr int kFullOffset = kInvLOffset + kRows * 4;
  static constexpr int kEmptyOffset = kFullOffset + kStages * 8;
  static constexpr int kLandedOffset = kEmptyOffset + kStages * 8;
  static constexpr int kSmemBytes = kLandedOffset + kStages * 8;
  static_assert(kSmemBytes <= 227 * 1024, "must fit a block of sm_90");
  static_assert(kQOffset % 1024 == 0, "the swizzled Q is 1024-byte aligned");
  static_assert(kFullOffset % 8 == 0, "mbarriers are 8-byte aligned");
};

}  // namespace treeverify::cuda::sm90
