// Tile configuration of the portable mma.sync verify kernel. These constants change speed,
// never results: every configuration computes the same function (tests force each one).
//
// The budget (DESIGN.md section 5): a CTA holds kRows query rows (heads x tree nodes of one
// request) against a stream of KV tiles. Per query row the fp32 output is 512 floats and the
// bf16 query 576 values; with kRows = 32 and 8 warps that is 64 + 72 registers per thread
// (O in registers split by columns, Q in registers split along the 576-deep dot product),
// which leaves shared memory to the KV pipeline: each stage is one tile of kTileTokens rows.
#pragma once

#include <cstdint>

namespace treeverify::cuda::mma {

inline constexpr int kQKDim = 576;
inline constexpr int kVDim = 512;

inline constexpr int kWarps = 8;
inline constexpr int kThreads = kWarps * 32;
inline constexpr int kRows = 32;         // query rows per CTA: two m16 tiles
inline constexpr int kMTiles = kRows / 16;
inline constexpr int kTileTokens = 32;   // KV tokens per pipeline stage
// Q.K^T: warp w = (kgroup, nhalf): the 576-deep product is split over 4 k-groups of 144
// (9 k-steps of 16), so each warp keeps its Q slice in registers for the whole chunk; the two
// n-halves cover 16 tokens each. The 4 partial score tiles are summed through shared memory.
inline constexpr int kKGroups = 4;
inline constexpr int kKSteps = kQKDim / 16 / kKGroups;  // 9
inline constexpr int kNHalves = kWarps / kKGroups;      // 2
inline constexpr int kTokensPerHalf = kTileTokens / kNHalves;  // 16
// P.V: warp w owns output columns [64 w, 64 w + 64) of all kRows rows.
inline constexpr int kVColsPerWarp = kVDim / kWarps;    // 64
// Softmax: warp w owns rows [4 w, 4 w + 4); 8 lanes per row, 4 tokens per lane.
inline constexpr int kSoftmaxRowsPerWarp = kRows / kWarps;

// Shared-memory layout. KV rows are padded by 16 bytes so the 8 rows one ldmatrix phase
// reads fall in 8 different 16-byte bank groups (1152 is a multiple of 128: unpadded rows
// would put all 8 in one group, an 8-way conflict).
inline constexpr int kKVRowBytes = kQKDim * 2 + 16;                 // 1168
inline constexpr int kStageBytes = kTileTokens * kKVRowBytes;        // 37376
// Partial scores: [kKGroups][kRows][kRedStride] fp32; a stride of 40 floats puts rows 8
// banks apart, so a warp's float2 stores from mma fragments take the minimum 2 wavefronts.
inline constexpr int kRedStride = kTileTokens + 8;
inline constexpr int kRedBytes = kKGroups * kRows * kRedStride * 4;  // 20480
// Probabilities P: [kRows][kPStride] in the input dtype; 80-byte rows are conflict-free for
// ldmatrix (8 rows x 16 bytes land in 8 different bank groups).
inline constexpr int kPStride = kTileTokens + 8;
inline constexpr int kPBytes = kRows * kPStride * 2;                 // 2560
inline constexpr int kRowStatBytes = kRows * 4;                      // per-row rescale factor

constexpr int smem_bytes(int stages) {
  return stages * kStageBytes + kRedBytes + kPBytes + 2 * kRowStatBytes;
}

// Per-architecture table: pipeline depth. sm_86/89/120 allow 99 KB (101376 bytes) per block,
// which holds two stages; sm_80/90/100 allow 163/227/227 KB and get a third stage to hide
// more latency. The two-stage variant is also compiled for every architecture so that the
// code shipped for sm_120 can be forced and executed on an H200.
struct TileConfig {
  int arch;    // SM version the entry is for, e.g. 120
  int stages;  // KV pipeline stages
};
inline constexpr int kSmemLimitConsumer = 101376;  // sm_86, sm_89, sm_120
inline constexpr TileConfig kTileConfigs[] = {
    {80, 3}, {86, 2}, {89, 2}, {90, 3}, {100, 3}, {120, 2},
};
static_assert(smem_bytes(2) <= kSmemLimitConsumer, "2-stage config must fit sm_86/89/120");
static_assert(smem_bytes(3) <= 163 * 1024, "3-stage config must fit sm_80");

// The table entry for a device of SM version `sm` (e.g. 90): the newest entry not above it.
constexpr int stages_for_arch(int sm) {
  int stages = 0;
  for (const TileConfig& c : kTileConfigs)
    if (c.arch <= sm) stages = c.stages;
  return stages;
}

}  // namespace treeverify::cuda::mma
