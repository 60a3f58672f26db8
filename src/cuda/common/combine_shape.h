// The launch shape of the split-KV combine (combine.cu): how many columns a lane merges, how
// many lanes a row's slice takes, and how many warps a block has. Host-only constexpr code, so
// the CPU tests check it on machines without a GPU.
#pragma once

#include <cstdint>

#include "cuda/common/constants.h"

namespace treeverify::cuda {

// Chunks a stream of lanes requests at once: their loads are all in flight before the first
// is used, so a stream that reads more than kCombineBatch chunks waits a round trip more.
inline constexpr int kCombineBatch = 8;
inline constexpr int kCombineMaxWarps = 16;  // 512 threads: 128 registers a thread, no spills
// Warps a SM holds of the combine (64 registers a thread): the blocks should all fit at once.
inline constexpr int kCombineWarpsPerSm = 32;

// The shapes compiled (combine.cu instantiates one kernel for each): {columns a lane, lanes a
// slice}. Four lanes of 4 columns are not among them: 8 columns at 4 lanes serve those rows.
struct CombineSlice {
  int cols, lanes;
};
inline constexpr CombineSlice kCombineSlices[] = {{4, 32}, {4, 16}, {4, 8}, {8, 32},
                                                  {8, 16}, {8, 8},  {8, 4}};

struct CombineShape {
  int cols = 4;    // columns a lane: 4 (an 8-byte load of a partial) or 8 (16 bytes)
  int lanes = 32;  // lanes a slice of a row: 4 (8 columns a lane only), 8, 16 or 32
  int warps = 1;   // warps a block
  int64_t blocks = 0;
  int rounds = 0;  // batches of loads a stream waits for, one after the other
  int waves = 0;   // times the device fills with the blocks (1 unless even 1 warp a block is many)

  int64_t threads() const { return blocks * warps * 32; }
};

// A block merges one slice (lanes x cols columns) of one row; its warps hold 32 / lanes
// streams each, and the streams split the chunks. Warps double while a stream would read more
// than one batch and the doubled blocks still fit the device at once.
constexpr CombineShape combine_shape(int cols, int lanes, int64_t rows, int num_chunks,
                                     int device_sms) {
  CombineShape s;
  s.cols = cols;
  s.lanes = lanes;
  s.blocks = rows * (kVDim / (cols * lanes));
  const int streams_per_warp = 32 / lanes;
  const int64_t resident = static_cast<int64_t>(kCombineWarpsPerSm) * device_sms;  // warps
  while (s.warps < kCombineMaxWarps && s.warps * streams_per_warp * kCombineBatch < num_chunks &&
         s.blocks * s.warps * 2 <= resident)
    s.warps *= 2;
  const int per_round = s.warps * streams_per_warp * kCombineBatch;
  s.rounds = (num_chunks + per_round - 1) / per_round;
  s.waves = static_cast<int>((s.blocks * s.warps + resident - 1) / resident);
  return s;
}

// The shape for `rows` rows (the grid's: the largest request's rows x requests) of
// `num_chunks` partials each, on a device of `device_sms` SMs. In order of what it costs
// (H200, ncu and whole calls: docs/kernels/combine.md):
//   1. the fewest rounds of loads, times the waves of blocks: each round is a trip to L2 that
//      nothing hides (S2's 17 chunks read in two rounds take 8.8-9.5 us, in one 6.6-6.9);
//   2. enough blocks to give each SM two (where a call leaves SMs idle, a programmatic
//      combine's blocks wait on them, and few blocks crowd onto those SMs: half the blocks
//      cost S1 and S3 2-3%);
//   3. beyond that, fewer and larger blocks (S2: 1024 blocks of 4 warps 6.9 us, 2048 of 2
//      warps 7.8);
//   4. more threads.
constexpr CombineShape choose_combine_shape(int64_t rows, int num_chunks, int device_sms) {
  const int64_t spread = 2 * static_cast<int64_t>(device_sms);
  auto better = [&](const CombineShape& a, const CombineShape& b) {
    if (a.rounds * a.waves != b.rounds * b.waves) return a.rounds * a.waves < b.rounds * b.waves;
    const int64_t sa = a.blocks < spread ? a.blocks : spread;
    const int64_t sb = b.blocks < spread ? b.blocks : spread;
    if (sa != sb) return sa > sb;
    if (a.blocks != b.blocks) return a.blocks < b.blocks;
    return a.threads() > b.threads();
  };
  CombineShape best =
      combine_shape(kCombineSlices[0].cols, kCombineSlices[0].lanes, rows, num_chunks, device_sms);
  for (const CombineSlice& slice : kCombineSlices) {
    const CombineShape s = combine_shape(slice.cols, slice.lanes, rows, num_chunks, device_sms);
    if (better(s, best)) best = s;
  }
  return best;
}

}  // namespace treeverify::cuda
