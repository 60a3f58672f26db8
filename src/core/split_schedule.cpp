// Split-KV schedule: a small search over chunk lengths under a cost model.
#include "core/split_schedule.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace treeverify::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t rows_of(const SplitScheduleInput& in, size_t b) {
  return static_cast<int64_t>(in.qo_indptr[b + 1] - in.qo_indptr[b]) * in.num_heads;
}

// The schedule with chunks of `tiles` tiles, and its modelled time; `max_kv` is the longest
// KV sequence of a request with rows.
SplitSchedule evaluate(const SplitScheduleInput& in, int64_t tiles, int64_t max_tiles,
                       int64_t max_kv, int32_t max_row_blocks) {
  const SplitCosts& k = in.costs;
  SplitSchedule s;
  s.chunk_tokens = static_cast<int32_t>(tiles * in.tile_tokens);
  s.num_chunks = static_cast<int32_t>(ceil_div(max_tiles, tiles));
  s.max_row_blocks = max_row_blocks;
  // The longest chunk of the call; CTAs with one that long are "full", the rest "short".
  const int64_t full_len = std::min<int64_t>(s.chunk_tokens, max_kv);
  int64_t full_ctas = 0, short_tokens = 0, short_ctas = 0;
  for (size_t b = 0; b < in.kv_len.size(); ++b) {
    const int64_t rows = rows_of(in, b);
    if (rows == 0) continue;
    const int64_t blocks = ceil_div(rows, in.rows_per_cta), kv = in.kv_len[b];
    const int64_t chunks = std::max<int64_t>(1, ceil_div(kv, s.chunk_tokens));
    s.num_ctas += blocks * chunks;
    if (chunks > 1) s.partial_rows += rows * chunks;
    const int64_t full = kv >= s.chunk_tokens ? kv / s.chunk_tokens : (kv == full_len ? 1 : 0);
    full_ctas += blocks * full;
    short_ctas += blocks * (chunks - full);
    short_tokens += blocks * (kv - full * full_len);
  }
  const double slots = in.concurrent_ctas;
  // Per token: the CTA's own pace, or its share of the bandwidth among those running at once.
  const double running = std::min<double>(static_cast<double>(s.num_ctas), slots);
  const double token_ns = std::max(k.token_ns, running * k.token_bytes / k.bytes_per_ns);
  const double full_ns = k.cta_ns + static_cast<double>(full_len) * token_ns;
  const double waves = std::ceil(static_cast<double>(full_ctas) / slots);
  s.est_ns = waves * full_ns;
  if (short_ctas > 0) {
    // Short CTAs run in the slots the last wave of full ones leaves idle, as many one after
    // another as fit in its length; the rest take further waves of their own.
    const double short_ns =
        k.cta_ns + static_cast<double>(short_tokens) / static_cast<double>(short_ctas) * token_ns;
    const double idle_slots = waves * slots - static_cast<double>(full_ctas);
    const double fit = idle_slots * std::floor(waves > 0 ? full_ns / short_ns : 0.0);
    const double rest = std::max(0.0, static_cast<double>(short_ctas) - fit);
    s.est_ns += std::ceil(rest / slots) * short_ns;
  }
  if (s.partial_rows > 0)
    s.est_ns += k.combine_ns + k.partial_row_ns * static_cast<double>(s.partial_rows);
  return s;
}

}  // namespace

SplitSchedule plan_split_schedule(const SplitScheduleInput& in) {
  int32_t max_row_blocks = 0;
  int64_t max_kv = 0;
  for (size_t b = 0; b < in.kv_len.size(); ++b) {
    const int64_t rows = rows_of(in, b);
    if (rows == 0) continue;
    max_row_blocks =
        std::max<int32_t>(max_row_blocks, static_cast<int32_t>(ceil_div(rows, in.rows_per_cta)));
    max_kv = std::max<int64_t>(max_kv, in.kv_len[b]);
  }
  const int64_t max_tiles = ceil_div(max_kv, in.tile_tokens);
  if (max_tiles == 0) {
    SplitSchedule none;
    none.chunk_tokens = in.forced_chunk_tokens > 0 ? in.forced_chunk_tokens : in.tile_tokens;
    none.max_row_blocks = max_row_blocks;
    return none;
  }
  if (in.forced_chunk_tokens > 0)
    return evaluate(in, std::min<int64_t>(in.forced_chunk_tokens / in.tile_tokens, max_tiles),
                    max_tiles, max_kv, max_row_blocks);

  // Candidate chunk lengths (in tiles): every length up to 2048 tokens, then the lengths that
  // split the longest request into n equal chunks for n up to 4 waves of CTAs.
  std::vector<int64_t> candidates;
  const int64_t short_tiles = std::min<int64_t>(2048 / in.tile_tokens, max_tiles);
  for (int64_t c = 1; c <= short_tiles; ++c) candidates.push_back(c);
  for (int64_t n = 1; n <= 4 * static_cast<int64_t>(in.concurrent_ctas); ++n)
    candidates.push_back(ceil_div(max_tiles, n));
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  SplitSchedule best;
  best.est_ns = INFINITY;
  for (int64_t c : candidates) {
    const SplitSchedule s = evaluate(in, c, max_tiles, max_kv, max_row_blocks);
    if (s.est_ns < best.est_ns * (1 - 1e-9)) best = s;  // strict: ties keep the longer chunk
  }
  return best;
}

}  // namespace treeverify::detail
