// The CPU fast backend (kCpu), the fallback without a GPU: float32, BLAS tile products
// (fast_tile.cpp), and the split-KV schedule of the GPU kernels on std::threads: each request's
// rows are cut into blocks, each block's KV into chunks, and chunk partials are merged by lse,
// so that a single long request still keeps every core busy.
#include <cblas.h>
#if defined(__linux__)
#include <sched.h>
#endif

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <new>
#include <system_error>
#include <thread>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu/cpu_util.h"
#include "cpu/fast_tile.h"
#include "treeverify/half.h"

namespace treeverify::detail {
namespace {

using fast::FastRequest;
using fast::kRowBlock;
using fast::kTileTokens;
using fast::RowState;
using fast::Scratch;

// Work items per thread: with several per thread, the item that finishes last leaves the
// other threads idle for a fraction of an average item rather than a whole one.
constexpr int kItemsPerThread = 4;

// A block of rows of one request, its KV cut into `splits` chunks of `chunk` tokens.
struct Group {
  int32_t req = 0;
  int32_t rows = 0;
  int64_t row0 = 0;  // row = node * H + head within the request
  int64_t chunk = 0;
  int32_t splits = 1;
  int64_t partial_row = 0;  // first row of its partial slots (splits > 1 only)
};
struct Item {
  int32_t group, split;
  double cost;
};

// Runs f(thread, i) for i in [0, n) on up to `threads` threads, the caller being thread 0. If
// the system refuses a thread, the ones that started (and the caller) do all the work.
template <class F>
void parallel_for(int threads, int64_t n, const F& f) {
  std::atomic<int64_t> next{0};
  auto worker = [&](int tid) {
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) f(tid, i);
  };
  std::vector<std::thread> pool;
  const int64_t wanted = std::min<int64_t>(threads, n);
  for (int tid = 1; tid < wanted; ++tid) {
    try {
      pool.emplace_back(worker, tid);
    } catch (const std::system_error&) {
      break;
    }
  }
  worker(0);
  for (std::thread& t : pool) t.join();
}

// Writes rows [row0, row0 + rows) of a request: out = o / l in dtype, lse = m + log(l); a row
// with l = 0 saw nothing and gets out = 0, lse = -inf; a row with l = NaN (it saw a non-finite
// value, fast_tile.cpp) or a non-finite o (a float32 overflow) gets NaN out and lse.
void write_rows(const Plan& plan, const VerifyTensors& tensors, const FastRequest& req,
                int64_t row0, int32_t rows, const float* o, const float* m, const double* l) {
  const Strides st = resolve_strides(plan, tensors);
  auto* out = static_cast<uint16_t*>(tensors.out);
  const int32_t heads = plan.num_heads;
  for (int32_t r = 0; r < rows; ++r) {
    const int64_t node = req.span.q0 + (row0 + r) / heads, head = (row0 + r) % heads;
    uint16_t* dst = out + node * st.out_token + head * st.out_head;
    const float* src = o + int64_t{r} * kVDim;
    if (std::isnan(l[r]) ||
        !std::all_of(src, src + kVDim, [](float x) { return std::isfinite(x); })) {
      const float nan = std::numeric_limits<float>::quiet_NaN();
      for (int c = 0; c < kVDim; ++c) dst[c] = float_to_half(plan.dtype, nan);
      if (tensors.lse != nullptr) tensors.lse[node * heads + head] = nan;
      continue;
    }
    const bool seen = l[r] > 0;
    const float inv = seen ? static_cast<float>(1.0 / l[r]) : 0.f;
    for (int c = 0; c < kVDim; ++c) dst[c] = float_to_half(plan.dtype, seen ? src[c] * inv : 0.f);
    if (tensors.lse != nullptr) {
      tensors.lse[node * heads + head] = seen ? static_cast<float>(double{m[r]} + std::log(l[r]))
                                              : -std::numeric_limits<float>::infinity();
    }
  }
}

// Merges the split partials of a group into `into` (rescaling each by exp(m_s - M)); a row
// with a NaN partial (l = NaN) stays NaN.
void merge_partials(const Group& g, const std::vector<float>& po, const std::vector<float>& pm,
                    const std::vector<double>& pl, RowState into) {
  for (int32_t r = 0; r < g.rows; ++r) {
    float mx = -std::numeric_limits<float>::infinity();
    bool nan = false;
    for (int32_t s = 0; s < g.splits; ++s) {
      const int64_t pr = g.partial_row + int64_t{s} * g.rows + r;
      nan = nan || std::isnan(pl[pr]);
      mx = std::max(mx, pm[pr]);
    }
    float* o = into.o + int64_t{r} * kVDim;
    std::fill(o, o + kVDim, 0.f);
    into.m[r] = mx;
    into.l[r] = nan ? std::numeric_limits<double>::quiet_NaN() : 0.0;
    if (nan || mx == -std::numeric_limits<float>::infinity()) continue;
    for (int32_t s = 0; s < g.splits; ++s) {
      const int64_t pr = g.partial_row + int64_t{s} * g.rows + r;
      if (pl[pr] == 0) continue;  // this chunk saw nothing for the row (m = -inf)
      const float w = std::exp(pm[pr] - mx);
      const float* src = &po[pr * kVDim];
      for (int c = 0; c < kVDim; ++c) o[c] += w * src[c];
      into.l[r] += pl[pr] * w;
    }
  }
}

}  // namespace

int cpu_threads(int requested) {
  int hardware = 0;
#if defined(__linux__)
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) hardware = CPU_COUNT(&set);
#endif
  if (hardware <= 0) hardware = static_cast<int>(std::thread::hardware_concurrency());
  hardware = std::max(hardware, 1);
  return requested > 0 ? std::min(requested, hardware) : hardware;
}

Status cpu_fast_run(const Plan& plan, const VerifyTensors& tensors) {
  TV_RETURN_IF_ERROR(check_host_inputs(plan, tensors, /*need_out=*/true));
  const int threads = cpu_threads(plan.options.num_threads);
  // Our threads are the parallelism; OpenBLAS threads inside them would oversubscribe the
  // cores. OpenBLAS has only a process-wide count, so it is restored on every way out: the
  // rest of the process (numpy behind the Python package, say) keeps its own setting.
  struct BlasThreadsGuard {
    int saved = openblas_get_num_threads();
    BlasThreadsGuard() { openblas_set_num_threads(1); }
    ~BlasThreadsGuard() { openblas_set_num_threads(saved); }
  } blas_threads_guard;

  std::vector<FastRequest> reqs;
  std::vector<Group> groups;
  std::vector<Item> items;
  std::vector<Scratch> scratch;
  std::vector<float> po, pm;
  std::vector<double> pl;
  std::vector<int32_t> merge_groups;
  try {
    for (int32_t b = 0; b < plan.batch_size; ++b) {
      if (tensors.qo_indptr[b + 1] > tensors.qo_indptr[b]) {
        TV_RETURN_IF_ERROR(fast::make_fast_request(tensors, b, &reqs.emplace_back()));
      }
    }
    // Cost of a block: one unit per (row, token) pair, plus one row's worth per token for the
    // gather. Blocks costing more than the per-item target are split over their KV.
    double total = 0;
    for (int32_t i = 0; i < static_cast<int32_t>(reqs.size()); ++i) {
      const int64_t rows = int64_t{reqs[i].span.num_nodes} * plan.num_heads;
      for (int64_t row0 = 0; row0 < rows; row0 += kRowBlock) {
        groups.push_back({.req = i,
                          .rows = static_cast<int32_t>(std::min<int64_t>(kRowBlock, rows - row0)),
                          .row0 = row0});
        total += (groups.back().rows + 1.0) * reqs[i].span.kv_len;
      }
    }
    const double target = threads > 1 ? total / (threads * kItemsPerThread) : total;
    int64_t partial_rows = 0;
    for (int32_t gi = 0; gi < static_cast<int32_t>(groups.size()); ++gi) {
      Group& g = groups[gi];
      const int64_t kvl = reqs[g.req].span.kv_len;
      const double cost = (g.rows + 1.0) * kvl;
      const int64_t max_splits = (kvl + kTileTokens - 1) / kTileTokens;
      const int64_t want =
          std::clamp<int64_t>(std::llround(std::ceil(cost / target)), 1, max_splits);
      // Whole tiles per chunk, so that only the last chunk has a partial tile.
      const int64_t tiles = ((kvl + want - 1) / want + kTileTokens - 1) / kTileTokens;
      g.chunk = tiles * kTileTokens;
      g.splits = static_cast<int32_t>((kvl + g.chunk - 1) / g.chunk);
      if (g.splits > 1) {
        g.partial_row = partial_rows;
        partial_rows += int64_t{g.splits} * g.rows;
        merge_groups.push_back(gi);
      }
      for (int32_t s = 0; s < g.splits; ++s) {
        const double tokens = static_cast<double>(std::min(g.chunk, kvl - s * g.chunk));
        items.push_back({gi, s, (g.rows + 1.0) * tokens});
      }
    }
    // Largest items first, so the small ones fill in at the end (longest processing time).
    std::stable_sort(items.begin(), items.end(),
                     [](const Item& a, const Item& b) { return a.cost > b.cost; });
    scratch.resize(std::min<size_t>(threads, std::max(items.size(), merge_groups.size())));
    po.resize(partial_rows * kVDim);
    pm.resize(partial_rows);
    pl.resize(partial_rows);
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kInternal, "cpu: out of host memory for the schedule");
  }

  // Nothing below allocates or fails, so the output is written only by a run that completes.
  parallel_for(threads, static_cast<int64_t>(items.size()), [&](int tid, int64_t i) {
    const Group& g = groups[items[i].group];
    const FastRequest& req = reqs[g.req];
    const int64_t tok0 = items[i].split * g.chunk;
    const int64_t tok1 = std::min(req.span.kv_len, tok0 + g.chunk);
    Scratch& sc = scratch[tid];
    if (g.splits == 1) {
      const RowState st{sc.o.data(), sc.m.data(), sc.l.data()};
      fast::attend_range(plan, tensors, req, g.row0, g.rows, tok0, tok1, &sc, st);
      write_rows(plan, tensors, req, g.row0, g.rows, st.o, st.m, st.l);
    } else {
      const int64_t pr = g.partial_row + int64_t{items[i].split} * g.rows;
      const RowState st{&po[pr * kVDim], &pm[pr], &pl[pr]};
      fast::attend_range(plan, tensors, req, g.row0, g.rows, tok0, tok1, &sc, st);
    }
  });
  parallel_for(threads, static_cast<int64_t>(merge_groups.size()), [&](int tid, int64_t i) {
    const Group& g = groups[merge_groups[i]];
    Scratch& sc = scratch[tid];
    const RowState st{sc.o.data(), sc.m.data(), sc.l.data()};
    merge_partials(g, po, pm, pl, st);
    write_rows(plan, tensors, reqs[g.req], g.row0, g.rows, st.o, st.m, st.l);
  });
  return Status::Ok();
}

}  // namespace treeverify::detail
