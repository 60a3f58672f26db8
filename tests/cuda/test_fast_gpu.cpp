// cuda-mma with an e4m3 cache in fast mode (Precision::kFast: Q and P in e4m3, e4m3 products)
// through the tables that run it (sm_120's and sm_89's, forced where the device is another;
// on an H200 their e4m3 products are emulated, so this checks the code path, not its speed),
// against two float64 oracles: one that rounds Q and P as the kernel does, subtracting the
// same running maxima (a tight bound: what is left is fp32 accumulation), and the exact one on
// the dequantized cache (the mode's accuracy, docs/DESIGN.md). Every case prints its errors
// ("accuracy" lines), the figures behind the bounds below.
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <cstring>

#include "../cpu/cpu_test_util.h"
#include "cuda/mma/config.h"
#include "gpu_check.h"

namespace treeverify::testing {
namespace {

// The bounds, from the errors of 118 cases on the H200 (2026-12-01, emulated products; the
// largest of each in brackets). Against the oracle with the kernel's rounding, what is left
// is rounding out to 16 bits, fp32 accumulation, exp2.approx, and a P code that flips where
// the running max differs from the oracle's in its last bits: out [1.8e-3, worst row 2.1e-3],
// lse [2.6e-5 nats].
constexpr double kSameRoundingOutTol = 4e-3;
constexpr double kSameRoundingLseTol = 1e-4;
// Against exact attention on the same cache: Q's and P's e4m3 rounding (3 mantissa bits), on
// N(0, 1) data: out [8.5e-2, worst row 0.22 (checked against 3x the bound)], lse [0.30 nats].
constexpr double kExactOutTol = 0.12;
constexpr double kExactLseTol = 0.4;
// The same with 8 of the 512 latent channels 20x larger in q and K, as real latent caches
// have: Q's one scale a row leaves the other channels few bits. out [3.3e-2, row 0.12], lse
// [2.96-3.83 nats over three runs: the bound leaves room for the seed].
constexpr double kOutlierOutTol = 0.12;
constexpr double kOutlierLseTol = 6.0;

CaseSpec fast_spec(std::string name, int heads, std::vector<int32_t> trees,
                   std::vector<int64_t> prefixes, int page, DType dtype = DType::kBF16,
                   TreeShape shape = TreeShape::kRandom) {
  return CaseSpec{.name = std::move(name),
                  .num_heads = heads,
                  .tree_sizes = std::move(trees),
                  .prefix_lens = std::move(prefixes),
                  .page_size = page,
                  .shape = shape,
                  .dtype = dtype,
                  .seed = fresh_seed(),
                  .kv_format = KvFormat::kE4M3,
                  .kv_scale = 0.0137f};
}

// The tables with native e4m3 products that this build and device can run (forced); a test
// that runs them ends skipped, after the rest, when one is missing. sm_89's table has sm_120's
// variants, so beyond EveryVariantAndDtype the tests run the first one only.
struct FastTables {
  std::vector<int> archs;
  std::string missing;
};
const FastTables& fast_tables() {
  static const FastTables t = [] {
    FastTables f;
    DeviceInfo device;
    const int ordinal = detail::cuda_current_device();
    const Status ds = detail::cuda_device_info(ordinal < 0 ? 0 : ordinal, &device);
    for (int arch : {120, 89}) {
      const Status s = ds.ok() ? detail::cuda_config_runnable(arch, device) : ds;
      if (s.ok())
        f.archs.push_back(arch);
      else
        f.missing += fmt::format("{}sm_{} table not run: {}", f.missing.empty() ? "" : "; ", arch,
                                 s.message());
    }
    return f;
  }();
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
detail::ReferenceResult oracle(const HostCase& host, Precision precision, const Plan& gpu_plan) {
  detail::ReferenceResult ref;
  Plan rp;
  PlanOptions ro;
  ro.backend = Backend::kCpuReference;
  ro.precision = precision;
  EXPECT_TRUE(plan(host.problem(), ro, &rp).ok());
  const bool fast = precision == Precision::kFast;
  const detail::FastPMaxima maxima{.chunk_tokens = gpu_plan.state.chunk_tokens,
                                   .tile_tokens = gpu_plan.state.tile_tokens};
  const Status s = detail::reference_attention(rp, host.tensors(nullptr, nullptr),
                                               /*round_p=*/fast, &ref, maxima);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return ref;
}

// Runs `host` in fast mode under `options` and checks it against both oracles.
void expect_fast_matches(const HostCase& host, PlanOptions options, const Bounds& b = {}) {
  options.precision = Precision::kFast;
  const GpuResult gpu = run_on_gpu(host, options);
  if (gpu.out.size() != host.out_elems()) return;  // the run already failed the test
  const std::string what = fmt::format("{} seed {} kernel {} ({})", host.spec.name, host.spec.seed,
                                       gpu.plan.kernel, gpu.plan.reason);
  ASSERT_EQ(gpu.plan.precision, Precision::kFast) << what;
  const detail::ReferenceResult same = oracle(host, Precision::kFast, gpu.plan);
  const detail::ReferenceResult exact = oracle(host, Precision::kExact, gpu.plan);
  const Comparison cs =
      compare_with_reference(host.spec.dtype, gpu.out, gpu.lse.data(), same.out, same.lse);
  const Comparison ce =
      compare_with_reference(host.spec.dtype, gpu.out, gpu.lse.data(), exact.out, exact.lse);
  const std::string name = fmt::format("{} seed {}", host.spec.name, host.spec.seed);
  print_accuracy(gpu.plan.kernel, "fast-rounding", cs, name);
  print_accuracy(gpu.plan.kernel, "exact", ce, name);
  EXPECT_TRUE(cs.ok(b.same_out, b.same_lse)) << what << ", same rounding: " << cs.to_string();
  EXPECT_TRUE(ce.ok(b.exact_out, b.exact_lse)) << what << ", exact: " << ce.to_string();
}

void expect_fast_matches(const CaseSpec& spec, const PlanOptions& options, const Bounds& b = {}) {
  expect_fast_matches(make_case(spec), options, b);
}

// The first fast table, forced, on a fresh case of `spec`.
void run_fast_table(const CaseSpec& spec, int chunk_tokens = 0) {
  if (fast_tables().archs.empty()) return;
  PlanOptions o;
  o.force_config_arch = fast_tables().archs.front();
  o.force_chunk_tokens = chunk_tokens;
  CaseSpec fresh = spec;
  fresh.name = fmt::format("{} config {}", spec.name, o.force_config_arch);
  fresh.seed = fresh_seed();
  SCOPED_TRACE(fresh.name);
  expect_fast_matches(fresh, o);
}

TEST(GpuFast, EveryVariantAndDtype) {
  TV_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (int rows : {16, 32, 64}) {
      for (int arch : fast_tables().archs) {
        for (int chunk : {0, 64}) {
          PlanOptions o;
          o.force_config_arch = arch;
          o.force_rows_per_cta = rows;
          o.force_chunk_tokens = chunk;
          const CaseSpec s = fast_spec(
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

TEST(GpuFast, TreeShapesAndSizes) {
  TV_SKIP_WITHOUT_GPU();
  for (TreeShape shape : {TreeShape::kChain, TreeShape::kStar, TreeShape::kDeep, TreeShape::kBushy,
                          TreeShape::kRandom}) {
    for (int t : {1, 17, 64, 257}) {
      run_fast_table(fast_spec(fmt::format("{} T={}", tree_shape_name(shape), t), t >= 257 ? 1 : 8,
                               {t}, {777}, 16, DType::kBF16, shape));
    }
  }
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

TEST(GpuFast, PagesPrefixesAndHeads) {
  TV_SKIP_WITHOUT_GPU();
  for (int page = 1; page <= 128; page *= 2)
    run_fast_table(fast_spec(fmt::format("page {}", page), 8, {17}, {3001}, page));
  for (int64_t l : {0, 1, 31, 33, 4097, 65537, 200000})
    run_fast_table(fast_spec(fmt::format("L {}", l), 5, {5}, {l}, l % 2 ? 1 : 64));
  for (int h : {1, 3, 16, 64, 128})
    run_fast_table(fast_spec(fmt::format("H {}", h), h, {4}, {2000}, 32));
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

TEST(GpuFast, RaggedBatchesAndChunks) {
  TV_SKIP_WITHOUT_GPU();
  run_fast_table(fast_spec("ragged", 8, {1, 0, 17, 64, 3, 9}, {0, 50, 12345, 700, 100000, 1}, 16));
  run_fast_table(fast_spec("decode batch", 16, std::vector<int32_t>(16, 1),
                           std::vector<int64_t>(16, 1500), 64));
  run_fast_table(fast_spec("fp16 ragged", 4, {3, 70}, {10, 20000}, 1, DType::kFP16));
  for (int chunk : {32, 96, 2048})
    run_fast_table(fast_spec(fmt::format("chunk {}", chunk), 8, {16}, {6000}, 64), chunk);
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

// 8 latent channels 20x larger in q and in the cache (re-encoded, still inside e4m3's range):
// the case that costs fast mode most accuracy, with the bound the docs state.
TEST(GpuFast, OutlierChannels) {
  TV_SKIP_WITHOUT_GPU();
  for (int arch : fast_tables().archs) {
    HostCase host =
        make_case(fast_spec(fmt::format("outliers config {}", arch), 16, {16}, {20000}, 64));
    add_outlier_channels(host);
    PlanOptions o;
    o.force_config_arch = arch;
    expect_fast_matches(host, o, Bounds{.exact_out = kOutlierOutTol, .exact_lse = kOutlierLseTol});
  }
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

// Run twice on the same inputs: bit-identical outputs (a moving result is a race).
TEST(GpuFast, Deterministic) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase host = make_case(fast_spec("determinism", 8, {64}, {150000}, 1));
  for (int arch : fast_tables().archs) {
    PlanOptions o;
    o.force_config_arch = arch;
    o.precision = Precision::kFast;
    SCOPED_TRACE(fmt::format("config {}", arch));
    const GpuResult a = run_on_gpu(host, o);
    const GpuResult b = run_on_gpu(host, o);
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4));
  }
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

// Unforced, fast runs only where the device has native e4m3 products; elsewhere the plan runs
// exact and its reason says why.
TEST(GpuFast, DeviceTableRunsFastOnlyWhereNative) {
  TV_SKIP_WITHOUT_GPU();
  DeviceInfo device;
  ASSERT_TRUE(detail::cuda_device_info(std::max(0, detail::cuda_current_device()), &device).ok());
  const int sm = device.cc_major * 10 + device.cc_minor;
  const HostCase host = make_case(fast_spec("device table", 8, {16}, {5000}, 64));
  PlanOptions o;
  o.precision = Precision::kFast;
  if (cuda::mma::native_fp8_mma(sm)) {
    expect_fast_matches(host, o);
    return;
  }
  const GpuResult gpu = run_on_gpu(host, o);
  EXPECT_EQ(gpu.plan.precision, Precision::kExact) << gpu.plan.reason;
  EXPECT_NE(gpu.plan.reason.find("fast asked, run exact"), std::string::npos) << gpu.plan.reason;
  EXPECT_EQ(gpu.plan.kernel.find("-fast"), std::string::npos) << gpu.plan.kernel;
  expect_close_to_oracle(host, "fast asked on a device without native e4m3 products", gpu);
}

// A NaN code in tree leaf 3 of [-1, 0, 1, 1]: the leaf's rows NaN. The other rows of its CTA
// multiplied P = 0 by the NaN inside the mma, so the epilogue recomputed them (exactly, in fp32:
// nonfinite.cuh), and they sit within the exact bound of the clean cache.
TEST(GpuFast, NanCodeReachesOnlyTheRowsThatSeeIt) {
  TV_SKIP_WITHOUT_GPU();
  for (int arch : fast_tables().archs) {
    HostCase clean = make_case(fast_spec("nan", 16, {4}, {30}, 64));
    clean.parents = {-1, 0, 1, 1};
    HostCase bad = clean;
    bad.kv8[tvtest::token_offset(bad, 0, 33) + 7] = 0x7f;
    PlanOptions o;
    o.force_config_arch = arch;
    o.precision = Precision::kFast;
    const GpuResult gpu = run_on_gpu(bad, o);
    if (gpu.out.size() != bad.out_elems()) return;
    detail::ReferenceResult ref = oracle(clean, Precision::kExact, gpu.plan);
    for (int32_t h = 0; h < 16; ++h) {
      const size_t row = static_cast<size_t>(3) * 16 + h;
      ref.lse[row] = NAN;
      for (int c = 0; c < kVDim; ++c) ref.out[row * kVDim + c] = NAN;
    }
    const Comparison c =
        compare_with_reference(DType::kBF16, gpu.out, gpu.lse.data(), ref.out, ref.lse);
    EXPECT_TRUE(c.ok(kExactOutTol, kExactLseTol))
        << "config " << arch << " " << gpu.plan.kernel << ": " << c.to_string();
  }
  TV_SKIP_IF_FAST_TABLES_MISSING();
}

}  // namespace
}  // namespace treeverify::testing
