// cuda with an e4m3 KV cache (exact mode: fp16 products, K and V widened in registers or,
// in the 64-row variants and the sm_90a wgmma kernel, in shared memory)
// against the float64 oracle on the dequantized cache: every variant of the three tile
// tables, both dtypes, page sizes 1 to 128, ragged batches, forced splits, the non-finite
// policy's recomputation for a NaN code, and fp16 split partials of values past fp16's range.
#include <fmt/format.h>

#include <cmath>

#include "../cpu/cpu_test_util.h"
#include "gpu_check.h"

namespace treeverify::testing {
namespace {

// Every variant of every table in both dtypes, one pass and split; the default tier runs each
// (dtype, row count, table) in one of the two, alternating along each of the three.
TEST(GpuE4M3, EveryVariantAndDtype) {
  TV_SKIP_WITHOUT_GPU();
  const std::vector<int>& archs = tile_configs().archs;
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
          expect_matches_oracle(s, o);
        }
      }
    }
  }
  TV_SKIP_IF_TABLES_MISSING();
}

// Page sizes, a ragged batch, decode, many heads and a large tree under each table; the
// default tier runs each case under one table, in turn, with shorter prefixes.
TEST(GpuE4M3, PagesTreesAndBatches) {
  TV_SKIP_WITHOUT_GPU();
  const int64_t prefix = full_tier() ? 20000 : 4096, longest = full_tier() ? 100000 : 20000;
  std::vector<CaseSpec> cases;
  for (int page : {1, 4, 64, 128})
    cases.push_back(CaseSpec{.name = fmt::format("page {}", page),
                             .num_heads = 8,
                             .tree_sizes = {16},
                             .prefix_lens = {prefix},
                             .page_size = page});
  cases.push_back(CaseSpec{.name = "ragged",
                           .num_heads = 8,
                           .tree_sizes = {1, 0, 17, 64, 3, 9},
                           .prefix_lens = {0, 50, 12345, 700, longest, 1},
                           .page_size = 16});
  cases.push_back(CaseSpec{.name = "decode",
                           .num_heads = 16,
                           .tree_sizes = std::vector<int32_t>(16, 1),
                           .prefix_lens = std::vector<int64_t>(16, 1500),
                           .page_size = 64});
  cases.push_back(CaseSpec{.name = "H 128",
                           .num_heads = 128,
                           .tree_sizes = {2},
                           .prefix_lens = {4097},
                           .page_size = 32});
  cases.push_back(CaseSpec{.name = "T 257",
                           .num_heads = 1,
                           .tree_sizes = {257},
                           .prefix_lens = {777},
                           .page_size = 16,
                           .dtype = DType::kFP16});
  for (size_t i = 0; i < cases.size(); ++i) {
    for (int arch : rotated(tile_configs().archs, i)) {
      GpuOptions o;
      o.tuning.config_arch = arch;
      expect_matches_oracle(
          with_e4m3_cache(cases[i], fmt::format("{} config {}", cases[i].name, arch)), o);
    }
  }
  TV_SKIP_IF_TABLES_MISSING();
}

// The wgmma kernel's shapes on an e4m3 cache, exact mode: its producer widens the codes
// (gpu_check.h).
TEST(GpuE4M3, WgmmaPagesHeadsAndChunks) {
  TV_SKIP_WITHOUT_GPU();
  check_64_row_pages_heads_and_chunks(/*e4m3=*/true);
}

// Plain data, and 8 latent channels 20x larger in q and the cache (gpu_check.h): exact mode
// keeps the 16-bit bounds against the oracle that rounds P as it does; its error against exact
// attention is printed beside fast mode's (test_fast_gpu.cpp). The default tier's prefix is
// shorter.
TEST(GpuE4M3, OutlierChannels) {
  TV_SKIP_WITHOUT_GPU();
  check_plain_and_outliers(e4m3_spec("", 16, {16}, {full_tier() ? 20000 : 4096}, 64));
  TV_SKIP_IF_TABLES_MISSING();
}

// A NaN code in tree leaf 3 of [-1, 0, 1, 1] after a prefix of `prefix` tokens: the leaf's rows
// NaN, the other rows as on the clean cache (the epilogue marks them, nonfinite.cuh recomputes
// them from the e4m3 bytes), under tile table `arch` (0: the device's own), a forced row count
// a CTA and chunk length (0: the table's and the schedule's).
void expect_nan_code_reaches_only_its_rows(int arch, int heads, DType dtype, int64_t prefix,
                                           int rows, int chunk) {
  SCOPED_TRACE(fmt::format("config {} H {} {} prefix {} rows {} chunk {}", arch, heads,
                           dtype_name(dtype), prefix, rows, chunk));
  HostCase clean = make_case(e4m3_spec("nan", heads, {4}, {prefix}, 64, dtype));
  clean.parents = {-1, 0, 1, 1};
  HostCase bad = clean;
  bad.kv8[tvtest::token_offset(bad, 0, prefix + 3) + 7] = 0x7f;
  detail::ReferenceResult ref;
  Plan rp;
  PlanOptions ro;
  ro.backend = Backend::kCpuReference;
  ASSERT_TRUE(plan(clean.problem(), ro, &rp).ok());
  ASSERT_TRUE(detail::reference_attention(rp, clean.tensors(nullptr, nullptr), true, &ref).ok());
  for (int32_t h = 0; h < heads; ++h) {
    const size_t row = static_cast<size_t>(3) * heads + h;
    ref.lse[row] = NAN;
    for (int c = 0; c < kVDim; ++c) ref.out[row * kVDim + c] = NAN;
  }
  GpuOptions o;
  o.tuning.config_arch = arch;
  o.tuning.rows_per_cta = rows;
  o.tuning.chunk_tokens = chunk;
  const GpuResult gpu = run_on_gpu(bad, o);
  if (gpu.out.size() != bad.out_elems()) return;
  const Comparison c = compare_with_reference(dtype, gpu.out, gpu.lse.data(), ref.out, ref.lse);
  EXPECT_TRUE(c.ok(kOutRelTol, kLseAbsTol)) << gpu.plan.kernel << ": " << c.to_string();
}

TEST(GpuE4M3, NanCodeReachesOnlyTheRowsThatSeeIt) {
  TV_SKIP_WITHOUT_GPU();
  for (int arch : tile_configs().archs)
    for (int heads : {2, 16})
      expect_nan_code_reaches_only_its_rows(arch, heads, DType::kBF16, 30, 0, 0);
  TV_SKIP_IF_TABLES_MISSING();
}

// The same under the device's own table with 64 rows a CTA forced (on sm_90a code the wgmma
// kernel, whose producer widens the codes), fp16 as well, and the request split into 64-token
// chunks, so the NaN chunk's partial reaches the combine.
TEST(GpuE4M3, NanCodeInSplitRequestsAndFp16) {
  TV_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBF16, DType::kFP16})
    for (int chunk : {0, 64}) expect_nan_code_reaches_only_its_rows(0, 16, dtype, 200, 64, chunk);
}

// fp16 output, kv_scale 1024 and V codes of 224-448 (values near 2^18 to 2^19): each 64-token
// chunk's average of V passes fp16's 65504 in about 16% of its values, the whole prefix's
// stays under 30000 (numpy, three seeds). Q is zero on the 512 latent columns and a tenth of
// N(0, 1) on the rope's, whose codes are tiny, so the scores spread by about 0.35 nats and no
// token dominates. The split partials are kept in the codes' units (combine.cuh); with
// kv_scale in them, those 16% would be infinite in fp16 and their rows NaN after the merge.
TEST(GpuE4M3, SplitPartialsOfLargeValuesInFp16) {
  TV_SKIP_WITHOUT_GPU();
  HostCase host = make_case(e4m3_spec("large values", 8, {16}, {4096}, 64, DType::kFP16));
  host.spec.kv_scale = host.kv_scale = 1024.f;
  std::mt19937 rng(static_cast<uint32_t>(host.spec.seed));
  std::uniform_real_distribution<float> latent(224.f, 448.f), rope(1.f / 512, 1.f / 256);
  for (size_t i = 0; i < host.kv8.size(); ++i) {
    const float sign = rng() % 2 ? 1.f : -1.f;
    host.kv8[i] = float_to_e4m3(sign * (i % kQKDim < kVDim ? latent(rng) : rope(rng)));
  }
  for (size_t i = 0; i < host.q.size(); ++i)
    host.q[i] = i % kQKDim < kVDim
                    ? 0
                    : float_to_half(DType::kFP16, 0.1f * half_to_float(DType::kFP16, host.q[i]));
  detail::ReferenceResult ref;  // one input, so one oracle for every run
  ASSERT_TRUE(round_p_oracle(host, &ref));
  for (int arch : tile_configs().archs)
    for (int rows : {16, 32, 64}) {
      GpuOptions o;
      o.tuning.config_arch = arch;
      o.tuning.rows_per_cta = rows;
      o.tuning.chunk_tokens = 64;
      const std::string what = fmt::format("config {} rows {} seed {}", arch, rows, host.spec.seed);
      SCOPED_TRACE(what);
      expect_close_to(host, what, run_on_gpu(host, o), ref);
    }
  TV_SKIP_IF_TABLES_MISSING();
}

}  // namespace
}  // namespace treeverify::testing
