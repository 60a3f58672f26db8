// The split-KV schedule: how many KV tokens each CTA of a split kernel processes, and what
// that is modelled to cost. Host only, so it is tested on the CPU.
#pragma once

#include <cstdint>
#include <span>

#include "core/wave_model.h"

namespace treeverify::detail {

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
