// The split-KV schedule: how many KV tokens each CTA of a split kernel processes. Host only,
// so it is tested on the CPU.
#pragma once

#include <cstdint>
#include <span>

namespace treeverify::detail {

struct SplitScheduleInput {
  std::span<const int32_t> qo_indptr;  // [B+1]
  std::span<const int32_t> kv_len;     // [B]
  int32_t num_heads = 1;
  int32_t rows_per_cta = 32;    // query rows (node x head) one CTA holds
  int32_t tile_tokens = 32;     // chunks are whole tiles
  int32_t concurrent_ctas = 1;  // CTAs the device runs at once (SMs x CTAs per SM)
  // Fixed costs in token-times (the time a CTA takes per KV token), whatever the tile length:
  // a CTA's (loading Q, the epilogue), and the combine pass's when any request is split.
  double cta_overhead_tokens = 32;
  double combine_tokens = 32;
};

struct SplitSchedule {
  int32_t chunk_tokens = 0;    // a multiple of tile_tokens
  int32_t num_chunks = 1;      // the most chunks of any request: grid.y
  int32_t max_row_blocks = 0;  // the most row blocks of any request: grid.x
  int64_t num_ctas = 0;        // CTAs that do work
  double est_token_times = 0;  // modelled makespan, in token-times of one CTA
};

// Chooses the chunk length that minimises the modelled makespan: waves of concurrent CTAs,
// each as long as its chunk plus a fixed overhead, plus a combine pass when any request is
// split. Ties go to longer chunks (fewer partials to merge).
SplitSchedule plan_split_schedule(const SplitScheduleInput& in);

}  // namespace treeverify::detail
