// Split-KV schedule: a small search over chunk lengths under a makespan model.
#include "core/split_schedule.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace treeverify::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

}  // namespace

SplitSchedule plan_split_schedule(const SplitScheduleInput& in) {
  const int64_t batch = static_cast<int64_t>(in.kv_len.size());
  SplitSchedule best;
  int64_t max_tiles = 0;
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t rows = static_cast<int64_t>(in.qo_indptr[b + 1] - in.qo_indptr[b]) * in.num_heads;
    if (rows == 0) continue;
    best.max_row_blocks = std::max<int32_t>(best.max_row_blocks,
                                            static_cast<int32_t>(ceil_div(rows, in.rows_per_cta)));
    max_tiles = std::max(max_tiles, ceil_div(in.kv_len[b], in.tile_tokens));
  }
  if (max_tiles == 0) {
    best.chunk_tokens = in.tile_tokens;
    return best;
  }

  // Candidate chunk lengths (in tiles): every length up to 2048 tokens, then the lengths that
  // split the longest request into n equal chunks for n up to 4 waves of CTAs.
  std::vector<int64_t> candidates;
  const int64_t short_tiles = std::min<int64_t>(2048 / in.tile_tokens, max_tiles);
  for (int64_t c = 1; c <= short_tiles; ++c) candidates.push_back(c);
  for (int64_t n = 1; n <= 4 * static_cast<int64_t>(in.concurrent_ctas); ++n)
    candidates.push_back(ceil_div(max_tiles, n));
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  double best_cost = INFINITY;
  for (int64_t c : candidates) {
    int64_t ctas = 0;
    bool split = false;
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t rows =
          static_cast<int64_t>(in.qo_indptr[b + 1] - in.qo_indptr[b]) * in.num_heads;
      if (rows == 0) continue;
      const int64_t chunks = std::max<int64_t>(1, ceil_div(in.kv_len[b], in.tile_tokens * c));
      split |= chunks > 1;
      ctas += ceil_div(rows, in.rows_per_cta) * chunks;
    }
    const double waves = std::ceil(static_cast<double>(ctas) / in.concurrent_ctas);
    // The combine pass reads every partial once: about 32 token-times when split at all.
    const double cost = waves * (static_cast<double>(c * in.tile_tokens) + in.cta_overhead_tokens) +
                        (split ? in.combine_tokens : 0.0);
    if (cost < best_cost - 1e-9) {  // strict: ties keep the longer chunk seen first
      best_cost = cost;
      best.chunk_tokens = static_cast<int32_t>(c * in.tile_tokens);
      best.num_chunks = static_cast<int32_t>(ceil_div(max_tiles, c));
      best.num_ctas = ctas;
      best.est_token_times = cost;
    }
  }
  return best;
}

}  // namespace treeverify::detail
