// cuda with an e4m3 cache in fast mode (Precision::kFast: Q and P in e4m3, e4m3 products)
// through the tables that run it (sm_120's and sm_89's, forced where the device is another;
// on an H200 their e4m3 products are emulated, so this checks the code path, not its speed)
// and through the device's own choice where it runs fast (on an H200 the wgmma kernel's e4m3
// instance, requests of more than 32 rows), against both oracles of fast_check.h: every variant
// and dtype, outlier channels, determinism, the device's own table, and the non-finite
// policy. The tree shapes, pages, prefixes, heads, batches and chunks run in fast mode as part
// of every GpuVerify case (test_verify_gpu.cpp).
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "../cpu/cpu_test_util.h"
#include "cuda/sm80/config.h"
#include "fast_check.h"
#include "treeverify/system.h"

namespace treeverify::testing {
namespace {

// Every variant of every fast table in both dtypes, one pass and split; the default tier runs
// each (dtype, row count, table) in one of the two, alternating along each of the three.
TEST(GpuFast, EveryVariantAndDtype) {
  TV_SKIP_WITHOUT_GPU();
  const std::vector<int>& archs = fast_tables().archs;
  const DType dtypes[] = {DType::kBF16, DType::kFP16};
  const int row_counts[] = {16, 32, 64};
  for (size_t d = 0; d < 2; ++d) {
    for (size_t r = 0; r < 3; ++r) {
      for (size_t a = 0; a < archs.size(); ++a) {
        for (int chunk : rotated<int>({0, 64}, d + r + a)) {
          const DType dtype = dtypes[d];
          const int rows = row_counts[r], arch = archs[a];
          GpuOptions o;
          o.tuning.config_arch = arch;
          o.tuning.rows_per_cta = rows;
          o.tuning.chunk_tokens = chunk;
          const CaseSpec s = e4m3_spec(
              fmt::format("{} rows {} config {} chunk {}", dtype_name(dtype), rows, arch, chunk), 8,
              {9}, {3000}, 16, dtype);
          SCOPED_TRACE(s.name);
          expect_fast_matches(s, o);
        }
      }
    }
  }
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

// 8 latent channels 20x larger in q and in the cache (re-encoded, still inside e4m3's range):
// the case that costs fast mode most accuracy, with the bound the docs state; each fast table
// with each of its variants forced (16, 32 and 64 rows a CTA), then the device's own choice.
// The default tier's prefix is shorter.
TEST(GpuFast, OutlierChannels) {
  TV_SKIP_WITHOUT_GPU();
  const int64_t prefix = full_tier() ? 20000 : 4096;
  HostCase probe = make_case(e4m3_spec("outliers", 16, {16}, {prefix}, 64));
  for (int arch : fast_configs(probe)) {
    for (int rows : arch == 0 ? std::vector<int>{0} : std::vector<int>{16, 32, 64}) {
      HostCase host = make_case(e4m3_spec(
          fmt::format("outliers config {} rows {}", arch, rows), 16, {16}, {prefix}, 64));
      add_outlier_channels(host);
      GpuOptions o;
      o.tuning.config_arch = arch;
      o.tuning.rows_per_cta = rows;
      expect_fast_matches(
          host, o,
          Bounds{.exact_out = kOutlierOutTol,
                 .exact_lse = kOutlierLseTol,
                 .one_term_exact_out = kOneTermOutlierOutTol,
                 .one_term_exact_lse = kOneTermOutlierLseTol,
                 .wgmma_same_scale = 10});
    }
  }
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

// Run twice on the same inputs: bit-identical outputs (a moving result is a race).
TEST(GpuFast, Deterministic) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase host = make_case(e4m3_spec("determinism", 8, {64}, {150000}, 1));
  for (int arch : fast_configs(host)) {
    GpuOptions o;
    o.tuning.config_arch = arch;
    o.precision = Precision::kFast;
    SCOPED_TRACE(fmt::format("config {}", arch));
    const GpuResult a = run_on_gpu(host, o);
    const GpuResult b = run_on_gpu(host, o);
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4));
  }
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

// Unforced, fast runs only where the device has native e4m3 products: mma.sync on sm_89 and
// sm_120, wgmma on sm_90 (sm_90a code, requests of more than 32 rows: 128 here, 16 in the
// decode case); elsewhere the plan runs exact and its reason says why.
TEST(GpuFast, DeviceTableRunsFastOnlyWhereNative) {
  TV_SKIP_WITHOUT_GPU();
  DeviceInfo device;
  ASSERT_TRUE(detail::cuda_device_info(std::max(0, detail::cuda_current_device()), &device).ok());
  const int sm = device.cc_major * 10 + device.cc_minor;
  const bool wgmma = sm == 90 && device.kernel_arch == 90 && build_info().cuda_sm90a;
  for (int heads : {8, 16}) {
    const int nodes = heads == 8 ? 16 : 1;
    const HostCase host = make_case(
        e4m3_spec(fmt::format("device table {} rows", heads * nodes), heads, {nodes}, {5000}, 64));
    GpuOptions o;
    o.precision = Precision::kFast;
    SCOPED_TRACE(host.spec.name);
    if (cuda::sm80::native_fp8_mma(sm) || (wgmma && heads * nodes > 32)) {
      expect_fast_matches(host, o);
      continue;
    }
    const GpuResult gpu = run_on_gpu(host, o);
    EXPECT_EQ(gpu.plan.precision, Precision::kExact) << gpu.plan.reason;
    EXPECT_NE(gpu.plan.reason.find("fast asked, run exact"), std::string::npos) << gpu.plan.reason;
    EXPECT_EQ(gpu.plan.kernel.find("-fast"), std::string::npos) << gpu.plan.kernel;
    expect_close_to_oracle(host, "fast asked on a device without native e4m3 products", gpu);
  }
}

// A NaN code in tree leaf 3 of [-1, 0, 1, 1]: the leaf's rows NaN. The other rows of its CTA
// multiplied P = 0 by the NaN inside the mma, so the epilogue recomputed them (exactly, in fp32:
// nonfinite.cuh), and they sit within the exact bound of the clean cache.
TEST(GpuFast, NanCodeReachesOnlyTheRowsThatSeeIt) {
  TV_SKIP_WITHOUT_GPU();
  for (int arch : fast_configs(make_case(e4m3_spec("nan", 16, {4}, {30}, 64)))) {
    HostCase clean = make_case(e4m3_spec("nan", 16, {4}, {30}, 64));
    clean.parents = {-1, 0, 1, 1};
    HostCase bad = clean;
    bad.kv8[tvtest::token_offset(bad, 0, 33) + 7] = 0x7f;
    GpuOptions o;
    o.tuning.config_arch = arch;
    o.precision = Precision::kFast;
    const GpuResult gpu = run_on_gpu(bad, o);
    if (gpu.out.size() != bad.out_elems()) return;
    detail::ReferenceResult ref = fast_oracle(clean, Precision::kExact, gpu.plan);
    for (int32_t h = 0; h < 16; ++h) {
      const size_t row = static_cast<size_t>(3) * 16 + h;
      ref.lse[row] = NAN;
      for (int c = 0; c < kVDim; ++c) ref.out[row * kVDim + c] = NAN;
    }
    const Comparison c =
        compare_with_reference(DType::kBF16, gpu.out, gpu.lse.data(), ref.out, ref.lse);
    const bool one_term = detail::fast_q_terms(gpu.plan) == 1;
    EXPECT_TRUE(c.ok(one_term ? kOneTermExactOutTol : kExactOutTol,
                     one_term ? kOneTermExactLseTol : kExactLseTol))
        << "config " << arch << " " << gpu.plan.kernel << ": " << c.to_string();
  }
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

}  // namespace
}  // namespace treeverify::testing
