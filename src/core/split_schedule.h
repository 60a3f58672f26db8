// The split-KV schedule: how many KV tokens each CTA of a split kernel processes, and what
// that is modelled to cost. Host only, so it is tested on the CPU.
#pragma once

#include <cstdint>
#include <span>

namespace treeverify::detail {

// The cost model of one kernel variant on one device (nanoseconds). Measured on the H200 for
// each variant class (core/select.cpp says where); they change speed, never results.
struct SplitCosts {
  double token_ns = 60;      // a CTA's time per KV token when bandwidth is not the limit
  double cta_ns = 9500;      // a CTA's fixed time: start, loading Q, filling the pipe, epilogue
  double combine_ns = 3000;  // a split call's combine pass beyond its reads: launch and tail
  // Each partial row a split writes (512 fp32 and an lse) and the combine reads back, spread
  // over the device: 4 KB of traffic at its bandwidth.
  double partial_row_ns = 1;
  double token_bytes = 1152;   // bytes of one KV row
  double bytes_per_ns = 4000;  // device memory bandwidth (bytes per nanosecond)
};

struct SplitScheduleInput {
  std::span<const int32_t> qo_indptr;  // [B+1]
  std::span<const int32_t> kv_len;     // [B]
  int32_t num_heads = 1;
  int32_t rows_per_cta = 32;    // query rows (node x head) one CTA holds
  int32_t tile_tokens = 32;     // chunks are whole tiles
  int32_t concurrent_ctas = 1;  // CTAs the device runs at once (SMs x CTAs per SM)
  SplitCosts costs;
  int32_t forced_chunk_tokens = 0;  // > 0: take this chunk length (a multiple of tile_tokens)
};

struct SplitSchedule {
  int32_t chunk_tokens = 0;    // a multiple of tile_tokens
  int32_t num_chunks = 1;      // the most chunks of any request: grid.y
  int32_t max_row_blocks = 0;  // the most row blocks of any request: grid.x
  int64_t num_ctas = 0;        // CTAs that do work
  int64_t partial_rows = 0;    // partial rows written and combined (0: no request is split)
  double est_ns = 0;           // modelled time of the call
};

// The chunk length with the least modelled time. The model: every CTA takes cta_ns plus its
// tokens at token_ns each, or slower when the CTAs running at once ask for more than the
// device's bandwidth; a split call adds its combine and its partials' traffic. Every
// candidate is first timed by waves (CTAs of full chunks in waves of concurrent_ctas, shorter
// ones in the idle slots of the last wave or waves of their own); the best few are then timed
// in launch order (the grid's order, each CTA in the first slot to free), where a request's
// short last chunk takes a slot beside its full ones.
// Ties go to longer chunks (fewer partials to merge).
SplitSchedule plan_split_schedule(const SplitScheduleInput& in);

}  // namespace treeverify::detail
