// Roofline math and the CPU ceilings (the CUDA ones are in timing_cuda.cpp).
#include "roofline.h"

#include <cblas.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>
#include <vector>

#include "cpu/cpu_backend.h"

namespace treeverify::cli {

RooflinePoint roofline(double bytes, double flops, double seconds, const Ceilings& ceilings) {
  RooflinePoint p;
  p.seconds = seconds;
  if (seconds <= 0) return p;
  p.gbps = bytes / seconds * 1e-9;
  p.tflops = flops / seconds * 1e-12;
  const double mem_s = ceilings.bandwidth > 0 ? bytes / ceilings.bandwidth : 0;
  const double mma_s = ceilings.mma_flops > 0 ? flops / ceilings.mma_flops : 0;
  p.floor_s = std::max(mem_s, mma_s);
  p.compute_bound = mma_s > mem_s;
  p.fraction = p.floor_s / seconds;
  return p;
}

Ceilings ceilings_for_fast(const Ceilings& c) {
  Ceilings f = c;
  if (c.mma8_flops > 0) {
    f.mma_flops = c.mma8_flops;
    f.mma_how = c.mma8_how;
  }
  return f;
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// Each thread copies its own slice, the way cpu's threads stream their own KV ranges;
// a single-threaded memcpy would understate what the cores together can pull.
double copy_bandwidth(int threads, size_t bytes, int reps) {
  std::vector<char> src(bytes), dst(bytes);
  // Touch both so page faults are not timed; non-zero so nothing is special-cased.
  std::memset(src.data(), 1, bytes);
  std::memset(dst.data(), 2, bytes);
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    std::vector<std::thread> pool;
    const size_t slice = (bytes + threads - 1) / threads;
    for (int t = 0; t < threads; ++t) {
      const size_t begin = std::min(bytes, t * slice), end = std::min(bytes, begin + slice);
      pool.emplace_back(
          [&, begin, end] { std::memcpy(dst.data() + begin, src.data() + begin, end - begin); });
    }
    for (auto& th : pool) th.join();
    best = std::min(best, seconds_since(t0));
  }
  return 2.0 * static_cast<double>(bytes) / best;  // read + write
}

double sgemm_rate(int n, int reps) {
  std::vector<float> a(static_cast<size_t>(n) * n), b(a.size()), c(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    a[i] = static_cast<float>(i % 7) * 0.25f - 0.75f;
    b[i] = static_cast<float>(i % 5) * 0.5f - 1.0f;
  }
  double best = 1e30;
  for (int r = 0; r < reps + 1; ++r) {  // the first run warms OpenBLAS's threads and buffers
    const auto t0 = Clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    if (r > 0) best = std::min(best, seconds_since(t0));
  }
  return 2.0 * n * static_cast<double>(n) * n / best;
}

}  // namespace

Ceilings measure_cpu_ceilings(int num_threads, size_t copy_bytes, int gemm_n) {
  const int threads = detail::cpu_threads(num_threads);  // the threads cpu runs on
  Ceilings c;
  constexpr int kReps = 3;  // best of a few: a ceiling is the most the machine gave
  c.bandwidth = copy_bandwidth(threads, copy_bytes, kReps);
  c.bandwidth_how = fmt::format("memcpy {} MiB on {} threads, best of {}, read + write",
                                copy_bytes >> 20, threads, kReps);
  c.mma_flops = sgemm_rate(gemm_n, kReps);
  c.mma_how =
      fmt::format("cblas_sgemm {}^3 (OpenBLAS, its own threads), best of {}", gemm_n, kReps);
  return c;
}

}  // namespace treeverify::cli
