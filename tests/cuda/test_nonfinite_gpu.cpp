// The non-finite policy (verify.h) on cuda, against what it demands (nonfinite_cases.h):
// 8, 32 and 64-row requests (every variant of the three tile tables, bulk copies included),
// one pass and split KV (the combine), page sizes 1 and 64, both dtypes, and a tree inside one
// KV tile or across two.
#include <utility>
#include <vector>

#include "../cpu/nonfinite_cases.h"
#include "gpu_check.h"

namespace treeverify::testing {
namespace {

// Every poison of every case under each table, one pass and split; the default tier runs each
// poison under one (table, chunk) pair, the pairs in turn.
TEST(GpuNonFinite, ValuesReachOnlyTheRowsThatSeeThem) {
  TV_SKIP_WITHOUT_GPU();
  std::vector<std::pair<int, int>> configs;  // (table, chunk length)
  for (int arch : tile_configs().archs)
    for (int chunk : {0, 64}) configs.emplace_back(arch, chunk);
  size_t pick = 0;
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (int heads : {2, 8, 16}) {
      for (int64_t prefix : {30, 1000}) {
        for (int page : {1, 64}) {
          const HostCase clean = tvtest::leaf_tree_case(heads, prefix, page, dtype, fresh_seed());
          for (const tvtest::Poison& p : tvtest::poisons(prefix, page)) {
            const auto want = tvtest::expected(clean, p, /*round_p=*/true);
            const HostCase bad = tvtest::poisoned(clean, p);
            for (const auto& [arch, chunk] : rotated(configs, pick++)) {
              GpuOptions o;
              o.tuning.config_arch = arch;
              o.tuning.chunk_tokens = chunk;
              const GpuResult gpu = run_on_gpu(bad, o);
              if (gpu.out.size() != bad.out_elems()) return;  // the run failed the test
              const Comparison c =
                  compare_with_reference(dtype, gpu.out, gpu.lse.data(), want.out, want.lse);
              EXPECT_TRUE(c.ok(kOutRelTol, kLseAbsTol)) << fmt::format(
                  "{}: H {} prefix {} page {} config {} chunk {} kernel {}: {}", p.what, heads,
                  prefix, page, arch, chunk, gpu.plan.kernel, c.to_string());
            }
          }
        }
      }
    }
  }
  TV_SKIP_IF_TABLES_MISSING();
}

// One value per variant of the three tables, one pass and split: small enough for the
// sanitizers (compute-sanitizer: tests/README.md), which check the quarantine's shared-memory
// writes and the epilogue's atomics.
// Every poison on a variant no table selects, run by `base` (PlanTuning::pair_ctas or
// ::variant), one pass and split.
void check_untabled_variant(const PlanTuning& base) {
  for (int heads : {2, 8, 16}) {
    const HostCase clean = tvtest::leaf_tree_case(heads, 30, 64, DType::kBF16, fresh_seed());
    for (const tvtest::Poison& p : tvtest::poisons(30, 64)) {
      const auto want = tvtest::expected(clean, p, /*round_p=*/true);
      const HostCase bad = tvtest::poisoned(clean, p);
      for (int chunk : {0, 32}) {
        GpuOptions o;
        o.tuning = base;
        o.tuning.chunk_tokens = chunk;
        const GpuResult gpu = run_on_gpu(bad, o);
        ASSERT_EQ(gpu.out.size(), bad.out_elems()) << gpu.plan.kernel;
        const Comparison c =
            compare_with_reference(DType::kBF16, gpu.out, gpu.lse.data(), want.out, want.lse);
        EXPECT_TRUE(c.ok(kOutRelTol, kLseAbsTol))
            << fmt::format("{}: H {} chunk {} kernel {}: {}", p.what, heads, chunk,
                           gpu.plan.kernel, c.to_string());
      }
    }
  }
}

// The pair variant: a row is non-finite where either CTA's columns are, and the two CTAs
// recompute the marked rows between them (pair_kernel.cuh).
TEST(GpuNonFinite, PairCtas) {
  TV_SKIP_WITHOUT_GPU();
  TV_SKIP_WITHOUT_PAIR_CTAS();
  check_untabled_variant({.pair_ctas = true});
}

// r64-s2-k2 (two k-groups).
TEST(GpuNonFinite, TwoKGroups) {
  TV_SKIP_WITHOUT_GPU();
  TV_SKIP_WITHOUT_ALL_VARIANTS();
  check_untabled_variant({.variant = "r64-s2-k2"});
}

// r64-s3-t16-w16 (16 warps; the first 8 recompute).
TEST(GpuNonFinite, SixteenWarps) {
  TV_SKIP_WITHOUT_GPU();
  TV_SKIP_WITHOUT_ALL_VARIANTS();
  check_untabled_variant({.variant = "r64-s3-t16-w16"});
}

TEST(GpuNonFinite, EveryVariantOnce) {
  TV_SKIP_WITHOUT_GPU();
  for (int heads : {2, 8, 16}) {
    const HostCase clean = tvtest::leaf_tree_case(heads, 30, 64, DType::kBF16, fresh_seed());
    const tvtest::Poison p = tvtest::poisons(30, 64)[0];
    const auto want = tvtest::expected(clean, p, /*round_p=*/true);
    const HostCase bad = tvtest::poisoned(clean, p);
    for (int arch : tile_configs().archs) {
      for (int chunk : {0, 32}) {
        GpuOptions o;
        o.tuning.config_arch = arch;
        o.tuning.chunk_tokens = chunk;
        const GpuResult gpu = run_on_gpu(bad, o);
        if (gpu.out.size() != bad.out_elems()) return;
        const Comparison c =
            compare_with_reference(DType::kBF16, gpu.out, gpu.lse.data(), want.out, want.lse);
        EXPECT_TRUE(c.ok(kOutRelTol, kLseAbsTol))
            << fmt::format("{}: H {} config {} chunk {} kernel {}: {}", p.what, heads, arch, chunk,
                           gpu.plan.kernel, c.to_string());
      }
    }
  }
  TV_SKIP_IF_TABLES_MISSING();
}

}  // namespace
}  // namespace treeverify::testing
