// Split-KV schedule: a small search over chunk lengths under a cost model.
#include "core/split_schedule.h"

#include <algorithm>
#include <cmath>
#include <queue>
#include <vector>

namespace treeverify::detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

int64_t rows_of(const SplitScheduleInput& in, size_t b) {
  return static_cast<int64_t>(in.qo_indptr[b + 1] - in.qo_indptr[b]) * in.num_heads;
}

// A CTA's time per KV token in schedule `s`: its own pace, or its share of the bandwidth among
// the CTAs running at once.
double paced_token_ns(const SplitScheduleInput& in, const SplitSchedule& s) {
  const double running = std::min<double>(static_cast<double>(s.num_ctas), in.concurrent_ctas);
  return std::max(in.costs.token_ns, running * in.costs.token_bytes / in.costs.bytes_per_ns);
}

// What a split call adds to its CTAs: the combine and its partials' traffic.
double split_ns(const SplitCosts& k, const SplitSchedule& s) {
  return s.partial_rows > 0 ? k.combine_ns + k.partial_row_ns * static_cast<double>(s.partial_rows)
                            : 0.0;
}

// The request metadata as evaluate_chunks reads lanes.
struct HostLanes {
  const SplitScheduleInput& in;
  int64_t count() const { return static_cast<int64_t>(in.kv_len.size()); }
  int64_t rows(int64_t b) const { return rows_of(in, static_cast<size_t>(b)); }
  int64_t kv(int64_t b) const { return in.kv_len[static_cast<size_t>(b)]; }
};

// The schedule with chunks of `tiles` tiles, and its modelled time (the wave model,
// split_schedule.h); `max_kv` is the longest KV sequence of a request with rows.
SplitSchedule evaluate(const SplitScheduleInput& in, int64_t tiles, int64_t max_tiles,
                       int64_t max_kv, int32_t max_row_blocks) {
  const WaveModel m{.rows_per_cta = in.rows_per_cta,
                    .tile_tokens = in.tile_tokens,
                    .concurrent_ctas = in.concurrent_ctas,
                    .costs = in.costs};
  return evaluate_chunks(HostLanes{in}, m, tiles, max_tiles, max_kv, max_row_blocks);
}

// The makespan of `s`'s CTAs when the device starts them in grid order (row block fastest,
// then chunk, then request) in whichever of its concurrent_ctas slots frees first: a request's
// short last chunk is launched beside its full ones, not after them. `token_ns` as evaluate's.
double launch_order_ns(const SplitScheduleInput& in, const SplitSchedule& s, double token_ns) {
  const SplitCosts& k = in.costs;
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;  // slot end times
  for (int32_t i = 0; i < std::max(in.concurrent_ctas, 1); ++i) free_at.push(0.0);
  double end = 0;
  for (size_t b = 0; b < in.kv_len.size(); ++b) {
    const int64_t rows = rows_of(in, b);
    if (rows == 0) continue;
    const int64_t blocks = ceil_div(rows, in.rows_per_cta), kv = in.kv_len[b];
    const int64_t chunks = std::max<int64_t>(1, ceil_div(kv, s.chunk_tokens));
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t tokens = std::min<int64_t>(s.chunk_tokens, kv - c * s.chunk_tokens);
      const double ns = k.cta_ns + static_cast<double>(tokens) * token_ns;
      for (int64_t r = 0; r < blocks; ++r) {
        const double start = free_at.top();
        free_at.pop();
        free_at.push(start + ns);
        end = std::max(end, start + ns);
      }
    }
  }
  return end;
}

// The candidates the wave model ranks best that are timed again in launch order.
constexpr size_t kRetimed = 8;
// Schedules of more waves than this keep the wave model's time: launch order costs a heap step
// a CTA (plan() stays under a millisecond), and over many waves a short chunk's slot matters
// little.
constexpr int64_t kMaxRetimedWaves = 16;

// `s` with its time from launch_order_ns instead of the wave model's.
SplitSchedule retimed(const SplitScheduleInput& in, SplitSchedule s) {
  if (s.num_ctas == 0 || s.num_ctas > kMaxRetimedWaves * in.concurrent_ctas) return s;
  s.est_ns = launch_order_ns(in, s, paced_token_ns(in, s)) + split_ns(in.costs, s);
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
    return retimed(
        in, evaluate(in, std::min<int64_t>(in.forced_chunk_tokens / in.tile_tokens, max_tiles),
                     max_tiles, max_kv, max_row_blocks));

  // Candidate chunk lengths (in tiles): every length up to 2048 tokens, then the lengths that
  // split the longest request into n equal chunks for n up to 4 waves of CTAs.
  std::vector<int64_t> candidates;
  const int64_t short_tiles = std::min<int64_t>(2048 / in.tile_tokens, max_tiles);
  for (int64_t c = 1; c <= short_tiles; ++c) candidates.push_back(c);
  for (int64_t n = 1; n <= 4 * static_cast<int64_t>(in.concurrent_ctas); ++n)
    candidates.push_back(ceil_div(max_tiles, n));
  std::sort(candidates.begin(), candidates.end(), std::greater<>());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  // The wave model ranks every candidate; the best few are timed again in launch order, longest
  // chunk first, and the least of those times wins (strict: ties keep the longer chunk).
  std::vector<SplitSchedule> ranked;
  for (int64_t c : candidates) ranked.push_back(evaluate(in, c, max_tiles, max_kv, max_row_blocks));
  std::stable_sort(
      ranked.begin(), ranked.end(),
      [](const SplitSchedule& a, const SplitSchedule& b) { return a.est_ns < b.est_ns; });
  ranked.resize(std::min<size_t>(ranked.size(), kRetimed));
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const SplitSchedule& a, const SplitSchedule& b) {
                     return a.chunk_tokens > b.chunk_tokens;
                   });
  SplitSchedule best;
  best.est_ns = INFINITY;
  for (const SplitSchedule& r : ranked) {
    const SplitSchedule s = retimed(in, r);
    if (s.est_ns < best.est_ns * (1 - 1e-9)) best = s;
  }
  return best;
}

}  // namespace treeverify::detail
