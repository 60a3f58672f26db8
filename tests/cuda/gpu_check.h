// Shared steps of the GPU tests: run a case on the CUDA backend and compare it with the
// float64 oracle.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "../cpu/cpu_test_util.h"
#include "core/cuda_backend.h"
#include "cpu/cpu_backend.h"
#include "testing/cases.h"
#include "testing/compare.h"
#include "testing/cuda/device_case.h"
#include "treeverify/half.h"

namespace treeverify::testing {

// What a GPU test plans with: the options a user sets, and the tuning overrides
// (treeverify/tuning.h) that force tile tables, row counts, chunk lengths and copies.
struct GpuOptions : PlanOptions {
  PlanTuning tuning;
};

// The suite's two tiers (tests/README.md). TREEVERIFY_GPU_TIER unset or "default": each test
// runs a subset of its inputs (shorter prefixes, fewer repetitions, combinations taken in turn
// instead of their whole product) that still runs every kernel family and variant, tile table,
// dtype, KV format and precision the full tier does, so the suite fits a few minutes of one GPU;
// "full": every combination the tests list. The bounds are the same in both. Another value
// fails the tests that ask.
inline bool full_tier() {
  const char* env = std::getenv("TREEVERIFY_GPU_TIER");
  const std::string tier = env == nullptr ? "" : env;
  if (!tier.empty() && tier != "default" && tier != "full")
    ADD_FAILURE() << "TREEVERIFY_GPU_TIER=" << tier << ": expected default or full";
  const bool full = tier == "full";
  static const bool said =
      std::printf("GPU tests: %s tier\n",
                  full ? "full" : "default (TREEVERIFY_GPU_TIER=full runs the full sweep)") > 0;
  (void)said;
  return full;
}

// `full` in the full tier, `quick` in the default one.
template <typename T>
std::vector<T> tiered(std::vector<T> full, std::vector<T> quick) {
  return full_tier() ? std::move(full) : std::move(quick);
}

// All of `v` in the full tier; in the default tier only v[pick % size], so a loop that passes
// a count of its iterations takes v's elements in turn, one an iteration.
template <typename T>
std::vector<T> rotated(std::vector<T> v, size_t pick) {
  if (full_tier() || v.empty()) return v;
  return {v[pick % v.size()]};
}

#define TV_SKIP_WITHOUT_GPU()                                                                   \
  do {                                                                                          \
    std::string why;                                                                            \
    if (!::treeverify::testing::cuda_device_available(&why)) GTEST_SKIP() << "no GPU: " << why; \
  } while (0)

// The tile tables the GPU tests run: the device's own (0), and sm_80's and sm_120's forced (the
// code shipped for those architectures, executed here) where the current device can run them
// with this build. A table is left out, its reason kept in `missing`, when this build's code
// lacks its variants (only the tables' variants compiled: TREEVERIFY_ALL_VARIANTS=OFF, as in a
// release build) or the device's shared memory cannot hold them. A test that runs these ends
// with TV_SKIP_IF_TABLES_MISSING(), so it reports itself skipped, after running the rest,
// instead of passing.
struct TileConfigs {
  std::vector<int> archs;
  std::string missing;
};
// The tables of `archs` that this build and the current device can run forced
// (detail::config_runnable), and why each other one cannot.
inline TileConfigs runnable_tables(std::initializer_list<int> archs) {
  TileConfigs c;
  detail::Machine machine;
  detail::DeviceDescription device;
  machine.build = detail::this_build();
  Status ds = detail::cuda_describe(-1, &machine, &device);
  if (ds.ok() && machine.device == nullptr) ds = Status(machine.no_device_code, machine.no_device);
  for (int arch : archs) {
    const Status s = ds.ok() ? detail::config_runnable(arch, device, machine.build) : ds;
    if (s.ok())
      c.archs.push_back(arch);
    else
      c.missing += fmt::format("{}sm_{} table not run: {}", c.missing.empty() ? "" : "; ", arch,
                               s.message());
  }
  return c;
}
inline const TileConfigs& tile_configs() {
  static const TileConfigs configs = [] {
    // Where the device's own choice for more than 32 rows is the wgmma kernel (sm_90a code on
    // an sm_90 device), sm_90's table forced keeps the portable kernel's variants covered.
    bool wgmma = false;
    DeviceInfo device;
    const int ordinal = detail::cuda_current_device();
    if (detail::cuda_device_info(ordinal < 0 ? 0 : ordinal, &device).ok())
      for (const ArchKernels& k : cuda_kernels_by_arch())
        wgmma |= k.arch == device.kernel_arch && device.cc_major * 10 + device.cc_minor == 90 &&
                 k.more_rows.starts_with("wgmma");
    TileConfigs c = wgmma ? runnable_tables({80, 90, 120}) : runnable_tables({80, 120});
    c.archs.insert(c.archs.begin(), 0);  // the device's own
    // TREEVERIFY_TEST_OWN_TABLE_ONLY=1: the device's own choice only, for a quick run of a
    // kernel under work on the device machine (the tests then end skipped, not passed).
    if (const char* own = std::getenv("TREEVERIFY_TEST_OWN_TABLE_ONLY"); own && own[0] == '1') {
      c.archs = {0};
      c.missing = "TREEVERIFY_TEST_OWN_TABLE_ONLY=1: only the device's own choice runs";
    }
    return c;
  }();
  return configs;
}

#define TV_SKIP_IF_TABLES_MISSING()                                                \
  do {                                                                             \
    const std::string& tv_missing = ::treeverify::testing::tile_configs().missing; \
    if (!tv_missing.empty()) GTEST_SKIP() << tv_missing;                           \
  } while (0)

// A variant no table selects (PlanTuning::variant, PlanTuning::pair_ctas) is compiled only
// with every variant; a test of one skips itself elsewhere.
#define TV_SKIP_WITHOUT_ALL_VARIANTS()                                                     \
  do {                                                                                     \
    if (!::treeverify::detail::this_build().all_variants)                                  \
      GTEST_SKIP() << "variants no table selects need TREEVERIFY_ALL_VARIANTS";            \
  } while (0)

// The pair variant also needs thread-block clusters (sm_90+).
#define TV_SKIP_WITHOUT_PAIR_CTAS()                                                       \
  do {                                                                                    \
    ::treeverify::DeviceInfo tv_dev;                                                      \
    const int tv_ordinal = ::treeverify::detail::cuda_current_device();                   \
    if (!::treeverify::detail::cuda_device_info(tv_ordinal < 0 ? 0 : tv_ordinal, &tv_dev) \
             .ok() ||                                                                     \
        tv_dev.cc_major < 9)                                                              \
      GTEST_SKIP() << "the pair variant needs clusters (sm_90+)";                         \
    TV_SKIP_WITHOUT_ALL_VARIANTS();                                                       \
  } while (0)

// A fresh seed per call, printed on failure so the case can be replayed: with
// TREEVERIFY_TEST_SEED set, every call returns that seed instead (run the failing test alone).
inline uint64_t fresh_seed() {
  if (const char* s = std::getenv("TREEVERIFY_TEST_SEED"); s != nullptr && *s != '\0')
    return std::strtoull(s, nullptr, 10);
  static std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

// `spec` with an e4m3 cache of the same values (kv_scale 0.0137: N(0, 1) values well inside
// e4m3's range), named `name`, on a fresh seed.
inline CaseSpec with_e4m3_cache(CaseSpec spec, std::string name) {
  spec.name = std::move(name);
  spec.kv_format = KvFormat::kE4M3;
  spec.kv_scale = 0.0137f;
  spec.seed = fresh_seed();
  return spec;
}

// A case with an e4m3 cache (the e4m3 and fast-mode tests).
inline CaseSpec e4m3_spec(std::string name, int heads, std::vector<int32_t> trees,
                          std::vector<int64_t> prefixes, int page, DType dtype = DType::kBF16) {
  return with_e4m3_cache(CaseSpec{.num_heads = heads,
                                  .tree_sizes = std::move(trees),
                                  .prefix_lens = std::move(prefixes),
                                  .page_size = page,
                                  .dtype = dtype},
                         std::move(name));
}

struct GpuResult {
  Plan plan;
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

// Plans and runs `host` on cuda with poisoned outputs; fails the test on any error.
inline GpuResult run_on_gpu(const HostCase& host, const GpuOptions& options) {
  GpuResult r;
  GpuOptions o = options;
  o.backend = Backend::kCuda;
  const Status ps = plan(host.problem(), o, o.tuning, &r.plan);
  EXPECT_TRUE(ps.ok()) << ps.to_string();
  if (!ps.ok()) return r;
  DeviceCase dev(host);
  dev.ensure_workspace(r.plan.workspace_bytes);
  dev.poison_outputs();
  const Status rs = run(r.plan, dev.tensors(), dev.workspace(), dev.workspace_bytes(), nullptr);
  EXPECT_TRUE(rs.ok()) << rs.to_string();
  dev.download(&r.out, &r.lse);
  return r;
}

// Prints a comparison as one "accuracy" line (scripts/device_check.sh gathers them into its
// accuracy log; the figures: docs/DESIGN.md section 5): the kernel, the oracle it was compared
// with, the errors.
inline void print_accuracy(const std::string& kernel, const char* oracle, const Comparison& c,
                           const std::string& what) {
  // With the oracle's slack, row is the worst row beyond it and row_raw the worst before it.
  const std::string raw = c.slack ? fmt::format(" row_raw={:.2e}", c.out_row_rel_max_raw) : "";
  std::printf("accuracy kernel=%s oracle=%s out=%.2e row=%.2e%s lse=%.2e | %s\n", kernel.c_str(),
              oracle, c.out_rel_fro, c.out_row_rel_max, raw.c_str(), c.lse_max_abs, what.c_str());
}

// Gives every row the same scores, in steps along its request's keys (log2 units): 0 for the
// first half, 9 for key L / 2, 4 to three quarters, 12 to the end. So the running max
// moves by more than kMaxLag (8, the kernels' lag) at the middle key, where the first
// half's mass (2^-9 a key after the move) still outweighs it, and lags after it (the last
// quarter at 2^3 a key): an O or l left unscaled at the move, or scaled for the wrong max, puts
// the first half's keys 2^9 too heavy against the last quarter's. Written through rope channel
// 575 (V has none of it), q's the only nonzero one: 300 in every row, the key's the level over
// 300 x softmax_scale x log2(e) (inside e4m3's range for with_e4m3_cache's kv_scale).
inline void set_score_steps(HostCase& host) {
  constexpr int kChannel = kQKDim - 1;
  constexpr float kQ = 300.f;
  const DType dt = host.spec.dtype;
  for (size_t r = 0; r < host.q.size() / kQKDim; ++r)
    for (int c = 0; c < kQKDim; ++c)
      host.q[r * kQKDim + c] = float_to_half(dt, c == kChannel ? kQ : 0.f);
  const double per_log2 = 1.0 / (kQ * host.spec.softmax_scale * 1.4426950408889634);
  for (size_t b = 0; b < host.kv_len.size(); ++b) {
    const int64_t len = host.kv_len[b];
    for (int64_t tok = 0; tok < len; ++tok) {
      const double level = tok < len / 2 ? 0 : tok == len / 2 ? 9 : 4 * tok < 3 * len ? 4 : 12;
      const float k = static_cast<float>(level * per_log2);
      const size_t at = tvtest::token_offset(host, static_cast<int>(b), tok) + kChannel;
      if (host.kv8.empty())
        host.kv[at] = float_to_half(dt, k);
      else
        host.kv8[at] = float_to_e4m3(k / host.kv_scale);
    }
  }
}

// The lse bound on data with outlier channels (add_outlier_channels): their scores reach
// about 160 nats, where fp32 accumulation of 576 products leaves about 1e-4 absolute (on the
// H200 bf16 3.5e-4, e4m3 exact 5.8e-5, against the same 16-bit bound on out).
inline constexpr double kOutlierLseAbsTol = 2e-3;

// The oracle that rounds P like the kernel does, for `host`; false (the test failed) on error.
inline bool round_p_oracle(const HostCase& host, detail::ReferenceResult* ref) {
  Plan ref_plan;
  PlanOptions ro;
  ro.backend = Backend::kCpuReference;
  const Status ps = plan(host.problem(), ro, &ref_plan);
  EXPECT_TRUE(ps.ok()) << ps.to_string();
  if (!ps.ok()) return false;
  const Status s = detail::reference_attention(ref_plan, host.tensors(nullptr, nullptr),
                                               /*round_p=*/true, ref);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return s.ok();
}

// Checks a GPU result of `host` against `ref`, round_p_oracle's result for it.
inline void expect_close_to(const HostCase& host, const std::string& what, const GpuResult& gpu,
                            const detail::ReferenceResult& ref, double lse_tol = kLseAbsTol) {
  if (gpu.out.size() != host.out_elems()) return;  // the run already failed the test
  const Comparison c =
      compare_with_reference(host.spec.dtype, gpu.out, gpu.lse.data(), ref.out, ref.lse);
  print_accuracy(gpu.plan.kernel, "round_p", c, what);
  EXPECT_TRUE(c.ok(kOutRelTol, lse_tol))
      << what << " kernel " << gpu.plan.kernel << " (" << gpu.plan.reason << "): " << c.to_string();
}

// Checks a GPU result of `host` against the oracle that rounds P like the kernel does.
inline void expect_close_to_oracle(const HostCase& host, const std::string& what,
                                   const GpuResult& gpu, double lse_tol = kLseAbsTol) {
  if (gpu.out.size() != host.out_elems()) return;  // the run already failed the test
  detail::ReferenceResult ref;
  if (round_p_oracle(host, &ref)) expect_close_to(host, what, gpu, ref, lse_tol);
}

// Prints (does not check) the error of a GPU result against exact attention: the oracle with
// nothing rounded, so P's rounding counts too (fast mode's such figures: docs/DESIGN.md
// section 5).
inline void print_exact_accuracy(const HostCase& host, const std::string& what,
                                 const GpuResult& gpu) {
  if (gpu.out.size() != host.out_elems()) return;
  detail::ReferenceResult ref;
  Plan ref_plan;
  PlanOptions ro;
  ro.backend = Backend::kCpuReference;
  ASSERT_TRUE(plan(host.problem(), ro, &ref_plan).ok());
  ASSERT_TRUE(detail::reference_attention(ref_plan, host.tensors(nullptr, nullptr),
                                          /*round_p=*/false, &ref)
                  .ok());
  print_accuracy(gpu.plan.kernel, "exact",
                 compare_with_reference(host.spec.dtype, gpu.out, gpu.lse.data(), ref.out, ref.lse),
                 what);
}

// `spec` (16-bit or e4m3 exact) on plain data and with outlier channels (add_outlier_channels),
// under each tile table, fresh seeds: checked against the oracle that rounds P like the
// kernel (outliers: kOutlierLseAbsTol), with the error against exact attention printed. The
// default tier runs the outlier channels only (plain data is every other test's).
inline void check_plain_and_outliers(const CaseSpec& spec) {
  for (int arch : tile_configs().archs) {
    for (bool outliers : tiered<bool>({false, true}, {true})) {
      CaseSpec s = spec;
      s.name = fmt::format("{} config {}", outliers ? "outliers" : "plain", arch);
      s.seed = fresh_seed();
      HostCase host = make_case(s);
      if (outliers) add_outlier_channels(host);
      GpuOptions o;
      o.tuning.config_arch = arch;
      const GpuResult gpu = run_on_gpu(host, o);
      const std::string what = fmt::format("{} seed {}", s.name, s.seed);
      expect_close_to_oracle(host, what, gpu, outliers ? kOutlierLseAbsTol : kLseAbsTol);
      print_exact_accuracy(host, what, gpu);
    }
  }
}

// Runs on the GPU and checks against the oracle that rounds P like the kernel does.
inline void expect_matches_oracle(const CaseSpec& spec, const GpuOptions& options = {}) {
  const HostCase host = make_case(spec);
  expect_close_to_oracle(host, fmt::format("{} seed {}", spec.name, spec.seed),
                         run_on_gpu(host, options));
}

// 64 rows a CTA forced under the device's own table, on a 16-bit or (e4m3) an e4m3 cache: on an
// sm_90 device running sm_90a code that is the wgmma kernel (src/cuda/sm90/choice.h) whatever
// the cost model would prefer, so its page sizes 1 to 128, head counts, ragged requests,
// partial last tiles, forced chunk lengths and both dtypes are covered; elsewhere the table's
// 64-row variant. The default tier runs half the cases, and the other half on an e4m3 cache:
// each half holds both dtypes, pages of under 64 rows (cp.async copies) and of 64 or more
// (TMA), and forced chunks.
inline void check_64_row_pages_heads_and_chunks(bool e4m3) {
  const int pages[] = {1, 2, 4, 8, 16, 32, 64, 128};
  const int heads[] = {1, 3, 5, 8, 16, 33, 64, 128};
  const int chunks[] = {0, 32, 96, 2048};
  for (int i : tiered<int>({0, 1, 2, 3, 4, 5, 6, 7},
                           e4m3 ? std::vector<int>{1, 2, 5, 6} : std::vector<int>{0, 3, 4, 7})) {
    const int h = heads[i];
    GpuOptions o;
    o.tuning.rows_per_cta = 64;
    o.tuning.chunk_tokens = chunks[i % 4];
    CaseSpec s{
        .name = fmt::format("64 rows forced, page {} H {} chunk {}", pages[i], h, chunks[i % 4]),
        .num_heads = h,
        .tree_sizes = {h >= 33 ? 3 : 37, 1, 70 / h + 1},
        .prefix_lens = {5000, 700, 0},
        .page_size = pages[i],
        .dtype = i % 2 ? DType::kFP16 : DType::kBF16,
        .seed = fresh_seed()};
    if (e4m3) s = with_e4m3_cache(s, s.name + " e4m3");
    SCOPED_TRACE(s.name);
    expect_matches_oracle(s, o);
  }
}

}  // namespace treeverify::testing
