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

// The bounds against the oracle with the kernel's rounding are the plan's
// (testing::tolerance_for: the mma.sync kernels' from the errors of 118 cases on the H200,
// emulated products; the wgmma kernel's from its own). Rows are measured beyond the oracle's
// slack for P codes that may round the other way (ReferenceResult::out_slack): one such code
// on a heavy token puts a row of a 64-request decode batch at 2.13e-2 (seed
// 17643779267259826339; that row's slack on the CPU, chunks of 256 or 384 tokens:
// 2.12-2.13e-2).
// Against exact attention on the same cache: testing/compare.h's kExactOutTol and the rest.

// Why the CUDA backend's plan for `host` under `o` (precision set to fast here) does not run
// fast mode: the plan's error, or its reason line when it runs exact; empty when it runs fast.
inline std::string fast_blocker(const HostCase& host, GpuOptions o) {
  o.backend = Backend::kCuda;
  o.precision = Precision::kFast;
  Plan p;
  const Status s = plan(host.problem(), o, o.tuning, &p);
  if (!s.ok()) return s.to_string();  // never empty
  return p.precision == Precision::kFast ? std::string() : p.reason;
}

// The tables with native e4m3 products that this build and device can run (forced) in fast
// mode: runnable (runnable_tables), with their fast kernels in the device's code (build.h's
// fast_compiled_for: none in sm_80/86 code, whose mma has no e4m3), as plans of 16, 32 and 64
// rows say; a test that runs them ends skipped, after the rest, when one is missing (without
// the plans, a developer build on an sm_80/86 GPU would fail them, read from the code: its
// plans run exact; no such GPU here). sm_89's table has sm_120's variants, so beyond
// EveryVariantAndDtype the tests run the first one only.
inline const TileConfigs& fast_tables() {
  static const TileConfigs t = [] {
    const TileConfigs runnable = runnable_tables({120, 89});
    TileConfigs c;
    c.missing = runnable.missing;
    for (int arch : runnable.archs) {
      std::string reason;
      for (int32_t heads : {16, 32, 64}) {
        const HostCase host = make_case(with_e4m3_cache(
            CaseSpec{.num_heads = heads, .tree_sizes = {1}, .prefix_lens = {40}}, "fast probe"));
        GpuOptions o;
        o.tuning.config_arch = arch;
        o.tuning.rows_per_cta = heads;  // the cost model would take 32-row CTAs for 64 rows here
        reason = fast_blocker(host, o);
        if (!reason.empty()) break;
      }
      if (reason.empty())
        c.archs.push_back(arch);
      else
        c.missing += fmt::format("{}sm_{} table not run in fast mode: {}",
                                 c.missing.empty() ? "" : "; ", arch, reason);
    }
    return c;
  }();
  return t;
}

#define TV_SKIP_IF_FAST_TABLES_MISSING()                                          \
  do {                                                                            \
    const std::string& tv_missing = ::treeverify::testing::fast_tables().missing; \
    if (!tv_missing.empty()) GTEST_SKIP() << tv_missing;                          \
  } while (0)

struct Bounds {
  // Against the exact oracle: the mma.sync kernels' (Q in two terms), the wgmma kernel's (one).
  double exact_out = kExactOutTol, exact_lse = kExactLseTol;
  double one_term_exact_out = kOneTermExactOutTol, one_term_exact_lse = kOneTermExactLseTol;
  // The plan's same-rounding bounds times this on the wgmma kernel, whose FP8 sums err in
  // proportion to the scores' size (testing::tolerance_for): 10 for outlier channels (on the
  // H200 lse 5.7e-2, out 5.6e-3, worst row 2.6e-2 against the plain bounds 1e-2, 8e-3).
  double wgmma_same_scale = 1;
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
  const Status s = detail::reference_attention(
      rp, host.tensors(nullptr, nullptr), /*round_p=*/fast, &ref,
      detail::fast_rounding_of(gpu_plan, tolerance_for(gpu_plan).p_code_margin));
  EXPECT_TRUE(s.ok()) << s.to_string();
  return ref;
}

// Runs `host` in fast mode under `options` and checks it against both oracles.
inline void expect_fast_matches(const HostCase& host, GpuOptions options, const Bounds& b = {}) {
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
  const Tolerance same_tol = tolerance_for(gpu.plan);
  const double scale = gpu.plan.state.wgmma ? b.wgmma_same_scale : 1;
  EXPECT_TRUE(cs.ok(same_tol.out * scale, same_tol.lse * scale))
      << what << ", same rounding: " << cs.to_string();
  const bool one_term = detail::fast_q_terms(gpu.plan) == 1;
  EXPECT_TRUE(ce.ok(one_term ? b.one_term_exact_out : b.exact_out,
                    one_term ? b.one_term_exact_lse : b.exact_lse))
      << what << ", exact: " << ce.to_string();
}

inline void expect_fast_matches(const CaseSpec& spec, const GpuOptions& options,
                                const Bounds& b = {}) {
  expect_fast_matches(make_case(spec), options, b);
}

// Whether the device's own choice runs `host` in fast mode: where its products are native
// (sm_89, sm_120) or, on an sm_90 device with sm_90a code, where the wgmma kernel's e4m3
// instance takes the call (requests of more than 32 rows; cuda/sm90/choice.h). Elsewhere it
// runs exact (GpuFast.DeviceTableRunsFastOnlyWhereNative).
inline bool own_choice_runs_fast(const HostCase& host, int chunk_tokens = 0) {
  GpuOptions o;
  o.tuning.chunk_tokens = chunk_tokens;
  return fast_blocker(host, o).empty();
}

// The fast-mode configurations a test runs `host` under: each fast table forced
// (fast_tables), then the device's own choice (0) where it runs fast.
inline std::vector<int> fast_configs(const HostCase& host) {
  std::vector<int> archs = fast_tables().archs;
  if (own_choice_runs_fast(host)) archs.push_back(0);
  return archs;
}

// `spec` with an e4m3 cache in fast mode under the device's own choice, on a fresh seed, against
// both oracles, where that choice runs fast (own_choice_runs_fast); nothing elsewhere.
inline void run_fast_own_choice(const CaseSpec& spec, int chunk_tokens = 0) {
  const HostCase host = make_case(with_e4m3_cache(spec, spec.name + " e4m3 fast own choice"));
  if (!own_choice_runs_fast(host, chunk_tokens)) return;
  GpuOptions o;
  o.tuning.chunk_tokens = chunk_tokens;
  SCOPED_TRACE(host.spec.name);
  expect_fast_matches(host, o);
}

// `spec` with an e4m3 cache in fast mode under the first fast table, forced, on a fresh seed,
// against both oracles; nothing where no fast table runs (the tests' skip messages name why:
// gpu_check.h, TV_SKIP_IF_TABLES_MISSING, which covers sm_120's table).
inline void run_fast_table(const CaseSpec& spec, int chunk_tokens = 0) {
  if (fast_tables().archs.empty()) return;
  GpuOptions o;
  o.tuning.config_arch = fast_tables().archs.front();
  o.tuning.chunk_tokens = chunk_tokens;
  const CaseSpec fast =
      with_e4m3_cache(spec, fmt::format("{} e4m3 fast config {}", spec.name, o.tuning.config_arch));
  SCOPED_TRACE(fast.name);
  expect_fast_matches(fast, o);
}

}  // namespace treeverify::testing
