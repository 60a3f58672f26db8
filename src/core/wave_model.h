// The split-KV schedule's cost model (SplitCosts) and its wave model of one chunk length
// (evaluate_chunks), in code the host and the device both compile (TV_HD, C++17): the host plan
// ranks chunk lengths with it (split_schedule.h), and a graph plan's step kernel on the device.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/host_device.h"

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

struct SplitSchedule {
  int32_t chunk_tokens = 0;    // a multiple of tile_tokens
  int32_t num_chunks = 1;      // the most chunks of any request: grid.y
  int32_t max_row_blocks = 0;  // the most row blocks of any request: grid.x
  int64_t num_ctas = 0;        // CTAs that do work
  int64_t partial_rows = 0;    // partial rows written and combined (0: no request is split)
  double est_ns = 0;           // modelled time of the call
};
// The wave model of one candidate chunk length (every CTA takes cta_ns plus its tokens at the
// paced token_ns; full chunks in waves of concurrent_ctas, short ones in the idle slots of the
// last wave or waves of their own; a split call adds its combine and its partials' traffic),
// over lanes given by `lanes.count()`, `lanes.rows(b)` (query rows) and `lanes.kv(b)` (KV
// tokens): plan_split_schedule ranks candidates by it on the host, and a graph plan's step
// kernel on the device (cuda/graph/), so both apply one model.
struct WaveModel {
  int32_t rows_per_cta = 32;
  int32_t tile_tokens = 32;
  int32_t concurrent_ctas = 1;
  SplitCosts costs;
};
template <class Lanes>
TV_HD SplitSchedule evaluate_chunks(const Lanes& lanes, const WaveModel& m, int64_t tiles,
                                    int64_t max_tiles, int64_t max_kv, int32_t max_row_blocks) {
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  const SplitCosts& k = m.costs;
  SplitSchedule s;
  s.chunk_tokens = static_cast<int32_t>(tiles * m.tile_tokens);
  s.num_chunks = static_cast<int32_t>(ceil_div(max_tiles, tiles));
  s.max_row_blocks = max_row_blocks;
  // The longest chunk of the call; CTAs with one that long are "full", the rest "short".
  const int64_t full_len = s.chunk_tokens < max_kv ? s.chunk_tokens : max_kv;
  int64_t full_ctas = 0, short_tokens = 0, short_ctas = 0;
  for (int64_t b = 0; b < lanes.count(); ++b) {
    const int64_t rows = lanes.rows(b);
    if (rows == 0) continue;
    const int64_t blocks = ceil_div(rows, m.rows_per_cta), kv = lanes.kv(b);
    const int64_t c = ceil_div(kv, s.chunk_tokens);
    const int64_t chunks = c > 1 ? c : 1;
    s.num_ctas += blocks * chunks;
    if (chunks > 1) s.partial_rows += rows * chunks;
    const int64_t full = kv >= s.chunk_tokens ? kv / s.chunk_tokens : (kv == full_len ? 1 : 0);
    full_ctas += blocks * full;
    short_ctas += blocks * (chunks - full);
    short_tokens += blocks * (kv - full * full_len);
  }
  const double slots = m.concurrent_ctas;
  // A CTA's time per KV token: its own pace, or its share of the bandwidth among the CTAs
  // running at once.
  const double running = static_cast<double>(s.num_ctas) < slots ? s.num_ctas : slots;
  const double bw_ns = running * k.token_bytes / k.bytes_per_ns;
  const double token_ns = k.token_ns > bw_ns ? k.token_ns : bw_ns;
  const double full_ns = k.cta_ns + static_cast<double>(full_len) * token_ns;
  const double waves = ::ceil(static_cast<double>(full_ctas) / slots);
  s.est_ns = waves * full_ns;
  if (short_ctas > 0) {
    // Short CTAs run in the slots the last wave of full ones leaves idle, as many one after
    // another as fit in its length; the rest take further waves of their own.
    const double short_ns =
        k.cta_ns + static_cast<double>(short_tokens) / static_cast<double>(short_ctas) * token_ns;
    const double idle_slots = waves * slots - static_cast<double>(full_ctas);
    const double fit = idle_slots * ::floor(waves > 0 ? full_ns / short_ns : 0.0);
    const double left = static_cast<double>(short_ctas) - fit;
    const double rest = left > 0.0 ? left : 0.0;
    s.est_ns += ::ceil(rest / slots) * short_ns;
  }
  if (s.partial_rows > 0)
    s.est_ns += k.combine_ns + k.partial_row_ns * static_cast<double>(s.partial_rows);
  return s;
}

}  // namespace treeverify::detail
