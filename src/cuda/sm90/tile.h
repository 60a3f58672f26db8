// The shape and shared-memory map of the sm_90a wgmma verify kernel (verify_wgmma.cuh): one
// CTA of two consumer warpgroups and a producer warpgroup holds 64 query rows against a 2-stage
// pipeline of 64-token KV tiles (fast mode: three stages of codes, Fast).
// Host code reads it for the launch, the schedule and doctor.
#pragma once

#include <algorithm>

#include "cuda/common/constants.h"

namespace treeverify::cuda::sm90 {

struct WgmmaTile {
  static constexpr int kRows = 64;  // query rows a CTA: wgmma's M
  static constexpr int kClusterCtas = 1;  // CTAs a row block (cta_work)
  // KV tokens a tile; the consumer warpgroups score alternate tiles.
  static constexpr int kTokens = 64;
  static constexpr int kStages = 2;  // KV tiles in shared memory: the one in use, the next
  // Two consumer warpgroups (the products and the softmax) and a producer warpgroup (the
  // copies, all 128 threads). Registers (setmaxnreg): each SM sub-partition holds one warp
  // of each warpgroup in its 16384 registers, so 40 a producer thread leave the consumers 232.
  // (A producer warp alone, 9 warps, puts 3 warps on one sub-partition: 168 registers a
  // thread, and the consumers spill 416 bytes.)
  static constexpr int kWarpgroups = 2;
  static constexpr int kConsumerThreads = kWarpgroups * 128;
  static constexpr int kProducerWarp = kConsumerThreads / 32;
  static constexpr int kThreads = kConsumerThreads + 128;
  static constexpr int kProducerRegisters = 40, kConsumerRegisters = 232;
  static constexpr int kMinBlocks = 1;
  static constexpr bool kHalves = false;  // for cta_work (the portable kernel's halves)
  // Rows of 576 values (Q, K and V) are stored in wgmma's 128-byte-swizzle layout: 9 blocks
  // of 64 values, block b of row r the 128 bytes at b kBlockBytes + 128 r, its 16-byte unit u
  // at unit u ^ (r % 8) (so the 8 rows of a core-matrix group fall in 8 different bank
  // groups, and a copy writes whole 128-byte rows). The operands' 8-row groups are 1024
  // bytes apart; every stage, Q and the shared-memory base are 1024-byte aligned.
  static constexpr int kBlockBytes = kTokens * 128;  // 64 rows of a 64-value block: 8192
  static constexpr int kStageBytes = kQKDim / 64 * kBlockBytes;
  static_assert(kRows == kTokens, "Q and a KV tile share the layout");
  // Fast mode (an e4m3 cache, e4m3 products; fast_pipeline.cuh, fast_operands.cuh) has a map of
  // its own. wgmma takes 8-bit operands K-major only, so a tile's codes serve the scores as they
  // land (K-major) and P V as O^T += V^T P^T, V taken into registers as the A operand by
  // ldmatrix (load_v_fragments) and P's codes from shared memory as B; stages of codes, freed
  // once both warpgroups have taken their V.
  struct Fast {
    // Codes 0-511 of a row: blocks 0-3 of 128 codes in the 128-byte swizzle (row r's 128
    // bytes at 128 r of the block); codes 512-575: one block of 64 in the 64-byte swizzle
    // (row r's 64 bytes at kTailOffset + 64 r). A stage of codes, and Q's codes, so laid out.
    static constexpr int kTailCode = 512;
    static constexpr int kTailOffset = 4 * kBlockBytes;
    static constexpr int kCodeBytes = kTailOffset + kTokens * 64;
    // Three stages: four (Q's 16-bit rows in stages 2 and 3 during the prologue) are no faster
    // (V4 1.99 ms against 1.97-1.98 on the H200).
    static constexpr int kCodeStages = 3;
    static constexpr int kQCodesOffset = kCodeStages * kCodeBytes;
    // Each tile's softmax factors alpha (64 floats, for the rows of O^T's columns: both
    // warpgroups' P V take them from here), then P's codes (64 rows x 64 tokens, p8_desc's
    // layout); four of each (tile t in t & 3: fast_pipeline.cuh says why).
    static constexpr int kPBuffers = 4;
    static constexpr int kAlphaOffset = kQCodesOffset + kCodeBytes;
    static constexpr int kPBytes = kRows * kTokens;
    static constexpr int kPOffset = kAlphaOffset + kPBuffers * kRows * 4;
    // Q's 16-bit rows land (copy_q) and leave as codes (quantize_q_e4m3) before any tile is
    // scored, in the alphas' and P's bytes and beyond.
    static constexpr int kQ16Offset = kAlphaOffset;
    static constexpr int kRegionEnd =
        std::max(kPOffset + kPBuffers * kPBytes, kQ16Offset + kQKDim / 64 * kBlockBytes);
    // mbarriers a stage of codes: landed (the producer's 128 threads, each once its copies have
    // landed), free (every consumer thread, once it has taken its V of the tile: the owner
    // after its scores). The P-ready mbarriers, the rows' maxima and sums and the epilogue's
    // staging are the 16-bit map's (below).
    static constexpr int kLandedOffset = kRegionEnd;
    static constexpr int kFreeOffset = kLandedOffset + kCodeStages * 8;
    static constexpr int kEnd = kFreeOffset + kCodeStages * 8;
    static_assert(kTailOffset % 512 == 0, "the 64-byte swizzle's 512-byte atoms");
    static_assert(kCodeBytes % 1024 == 0 && kQ16Offset % 1024 == 0, "the 128-byte swizzle's atoms");
  };
  // P (16-bit, rows x tokens) of the last scored tile, for the other warpgroup's P V, without
  // swizzle: 8-row groups of kTokens values, the 8 rows interleaved 16 bytes at a time (one
  // 128-byte core matrix: 8 values of each of 8 rows).
  static constexpr int kPGroupBytes = 8 * kTokens * 2;  // 1024
  // The epilogue's rows of O in T, staged from the start of shared memory (stage 0; in fast
  // mode stages of codes 0 and 1), free by then, 16 bytes of padding a row so that stmatrix's
  // 8 rows of a matrix fall in 8 different bank groups.
  static constexpr int kOutPitch = kVDim * 2 + 16;
  static_assert(kRows * kOutPitch <= kStageBytes, "the staged rows fit a stage");
  // Shared memory: the KV stages; Q; P; the running row maxima after the last scored tile
  // (the first kRows floats of kMaxOffset) and each warpgroup's row sums (fp32);
  // the row's lse and 1/l for the epilogue; a "full" and an "empty" mbarrier a stage.
  static constexpr int kQOffset = kStages * kStageBytes;
  static constexpr int kPOffset = kQOffset + kStageBytes;
  static constexpr int kMaxOffset = kPOffset + kRows / 8 * kPGroupBytes;
  static constexpr int kSumOffset = kMaxOffset + kWarpgroups * kRows * 4;
  static constexpr int kLseOffset = kSumOffset + kWarpgroups * kRows * 4;
  static constexpr int kInvLOffset = kLseOffset + kRows * 4;
  static constexpr int kFullOffset = kInvLOffset + kRows * 4;
  static constexpr int kEmptyOffset = kFullOffset + kStages * 8;
  // "P ready" mbarriers, one a consumer warpgroup: its 128 threads arrive once they have
  // stored the P and row maxima of a tile it scored.
  static constexpr int kPReadyOffset = kEmptyOffset + kStages * 8;
  // "Codes landed" mbarriers, one a stage: an e4m3 tile's TMA copies have landed and the
  // producer may widen them (operands.cuh).
  static constexpr int kLandedOffset = kPReadyOffset + kWarpgroups * 8;
  static constexpr int kSmemBytes = kLandedOffset + kStages * 8;
  static_assert(Fast::kEnd <= kMaxOffset, "fast mode's map ends below the shared maxima");
  static_assert(2 * Fast::kCodeBytes >= kRows * kOutPitch,
                "the epilogue's rows fit two stages of codes");
  static_assert(kSmemBytes <= 227 * 1024, "must fit a block of sm_90");
  static_assert(kFullOffset % 8 == 0, "mbarriers are 8-byte aligned");
};

}  // namespace treeverify::cuda::sm90
