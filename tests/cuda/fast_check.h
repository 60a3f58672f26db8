// Fast mode's checks, shared by the GPU tests (test_fast_gpu.cpp, and every GpuVerify case in
// test_verify_gpu.cpp): the tables that run it, and a run compared with two float64 oracles,
// one that rounds Q and P as the kernel does (subtracting the same running maxima: a tight
// bound, what is left is fp32 accumulation) and the exact one on the dequantized cache (the
// mode's accuracy, docs/DESIGN.md). Each comparison prints an "accuracy" line.
#pragma once

#include <fmt/format.h>

#include <string>
#include <vector>

#include "gpu_check.h"

namespace treeverify::testing {

// The bounds, from the errors of 118 cases on the H200 (2026-12-01, emulated products; the
// largest of each in brackets). Against the oracle with the kernel's rounding, what is left
// is rounding out to 16 bits, fp32 accumulation, exp2.approx, and P codes that round the other
// way where p x 448 lies within float32 error of a midpoint: out [1.8e-3, worst row 2.1e-3],
// lse [2.6e-5 nats]. Rows are measured beyond the oracle's slack for those codes
// (ReferenceResult::out_slack): one such code on a heavy token put a row of a 64-request
// decode batch at 2.13e-2 (2026-12-03, seed 17643779267259826339; that row's slack on the CPU,
// chunks of 256 or 384 tokens: 2.12-2.13e-2).
inline constexpr double kSameRoundingOutTol = 4e-3;
inline constexpr double kSameRoundingLseTol = 1e-4;
// Against exact attention on the same cache: Q's and P's e4m3 rounding (3 mantissa bits), on
// N(0, 1) data: out [8.5e-2, worst row 0.22 (checked against 3x the bound)], lse [0.30 nats].
inline constexpr double kExactOutTol = 0.12;
inline constexpr double kExactLseTol = 0.4;
// The same with 8 of the 512 latent channels 20x larger in q and K, as real latent caches
// have: Q's one scale a row leaves the other channels few bits. out [3.3e-2, row 0.12], lse
// [2.96-3.83 nats over three runs: the bound leaves room for the seed].
inline constexpr double kOutlierOutTol = 0.12;
inline constexpr double kOutlierLseTol = 6.0;

// The tables with native e4m3 products that this build and device can run (forced); a test
// that runs them ends skipped, after the rest, when one is missing. sm_89's table has sm_120's
// variants, so beyond EveryVariantAndDtype the tests run the first one only.
inline const TileConfigs& fast_tables() {
  static const TileConfigs t = runnable_tables({120, 89});
  return t;
}

#define TV_SKIP_IF_FAST_TABLES_MISSING()                                          \
  do {                                                                            \
    const std::string& tv_missing = ::treeverify::testing::fast_tables().missing; \
    if (!tv_missing.empty()) GTEST_SKIP() << tv_missing;                          \
  } while (0)

struct Bounds {
  double same_out = kSameRoundingOutTol, same_lse = kSameRoundingLseTol;
  double exact_out = kExactOutTol, exact_lse = kExactLseTol;
};

// The oracle's result for `host`: exact (precision kExact, P unrounded), or rounding Q and P as
// the fast kernel of `gpu_plan` does.
inline detail::ReferenceResult fast_oracle(const HostCase& host, Precision precision,
                                           const Plan& gpu_plan) {
  detail::ReferenceResult ref;
  Plan rp;
  PlanOptions ro;
  ro.backend = Backend::kCpuReference;
  ro.precision = precision;
  const bool fast = precision == Precision::kFast;
  ro.round_p = fast;  // cpu-reference computes the precision asked only with round_p
  EXPECT_TRUE(plan(host.problem(), ro, &rp).ok());
  EXPECT_EQ(rp.precision, precision);
  const detail::FastPMaxima maxima{.chunk_tokens = gpu_plan.state.chunk_tokens,
                                   .tile_tokens = gpu_plan.state.tile_tokens};
  const Status s = detail::reference_attention(rp, host.tensors(nullptr, nullptr),
                                               /*round_p=*/fast, &ref, maxima);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return ref;
}

// Runs `host` in fast mode under `options` and checks it against both oracles.
inline void expect_fast_matches(const HostCase& host, PlanOptions options, const Bounds& b = {}) {
  options.precision = Precision::kFast;
  const GpuResult gpu = run_on_gpu(host, options);
  if (gpu.out.size() != host.out_elems()) return;  // the run already failed the test
  const std::string what = fmt::format("{} seed {} kernel {} ({})", host.spec.name, host.spec.seed,
                                       gpu.plan.kernel, gpu.plan.reason);
  ASSERT_EQ(gpu.plan.precision, Precision::kFast) << what;
  const detail::ReferenceResult same = fast_oracle(host, Precision::kFast, gpu.plan);
  const detail::ReferenceResult exact = fast_oracle(host, Precision::kExact, gpu.plan);
  // Rows against the same rounding count beyond the P codes the kernel may round the other
  // way (ReferenceResult::out_slack); against the exact oracle the bounds hold them already.
  const Comparison cs = compare_with_reference(host.spec.dtype, gpu.out, gpu.lse.data(), same.out,
                                               same.lse, same.out_slack);
  const Comparison ce =
      compare_with_reference(host.spec.dtype, gpu.out, gpu.lse.data(), exact.out, exact.lse);
  const std::string name = fmt::format("{} seed {}", host.spec.name, host.spec.seed);
  print_accuracy(gpu.plan.kernel, "fast-rounding", cs, name);
  print_accuracy(gpu.plan.kernel, "exact", ce, name);
  EXPECT_TRUE(cs.ok(b.same_out, b.same_lse)) << what << ", same rounding: " << cs.to_string();
  EXPECT_TRUE(ce.ok(b.exact_out, b.exact_lse)) << what << ", exact: " << ce.to_string();
}

inline void expect_fast_matches(const CaseSpec& spec, const PlanOptions& options,
                                const Bounds& b = {}) {
  expect_fast_matches(make_case(spec), options, b);
}

// `spec` with an e4m3 cache in fast mode under the first fast table, forced, on a fresh seed,
// against both oracles; nothing where no fast table runs (the tests' skip messages name why:
// gpu_check.h, TV_SKIP_IF_TABLES_MISSING, which covers sm_120's table).
inline void run_fast_table(const CaseSpec& spec, int chunk_tokens = 0) {
  if (fast_tables().archs.empty()) return;
  PlanOptions o;
  o.force_config_arch = fast_tables().archs.front();
  o.force_chunk_tokens = chunk_tokens;
  const CaseSpec fast =
      with_e4m3_cache(spec, fmt::format("{} e4m3 fast config {}", spec.name, o.force_config_arch));
  SCOPED_TRACE(fast.name);
  expect_fast_matches(fast, o);
}

}  // namespace treeverify::testing
