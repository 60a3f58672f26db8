// The split-KV combine on the GPU, fused into the verify kernel (cuda/mma/row_block_merge.cuh)
// or the separate combine kernel: both sides of the schedule's choice between them, and the
// two against each other and the float64 oracle, under every tile table the suite runs.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "cuda/workspace.h"
#include "gpu_check.h"

namespace treeverify::testing {
namespace {

CaseSpec spec(std::string name, int heads, std::vector<int32_t> trees,
              std::vector<int64_t> prefixes, int page, DType dtype = DType::kBF16) {
  return CaseSpec{.name = std::move(name),
                  .num_heads = heads,
                  .tree_sizes = std::move(trees),
                  .prefix_lens = std::move(prefixes),
                  .page_size = page,
                  .dtype = dtype,
                  .seed = fresh_seed()};
}

// Runs `host` with the combine the plan chooses and with the separate one forced: both must
// match the oracle, and each other within the oracle's bounds (they merge in different orders).
// Returns whether the plan's own choice was the fused combine.
bool check_both_combines(const HostCase& host, PlanOptions o, const std::string& what) {
  const GpuResult chosen = run_on_gpu(host, o);
  expect_close_to_oracle(host, what + ", combine chosen by the plan", chosen);
  o.force_separate_combine = true;
  const GpuResult separate = run_on_gpu(host, o);
  EXPECT_FALSE(separate.plan.state.fused_combine) << what;
  expect_close_to_oracle(host, what + ", separate combine", separate);
  EXPECT_EQ(chosen.lse.size(), separate.lse.size());
  for (size_t i = 0; i < std::min(chosen.lse.size(), separate.lse.size()); ++i) {
    const float a = chosen.lse[i], b = separate.lse[i];
    const bool close = std::isfinite(a) || std::isfinite(b) ? std::abs(a - b) <= 2 * kLseAbsTol
                                                            : std::isnan(a) == std::isnan(b);
    EXPECT_TRUE(close) << what << ": lse of row " << i << ": " << a << " against " << b;
    if (!close) break;
  }
  return chosen.plan.state.fused_combine;
}

// Split calls of every kind, under each table: the fused combine where the grid fits the device
// at once (these all do on a device of 16 SMs or more), the separate one forced.
TEST(GpuCombine, FusedAndSeparateAgree) {
  TV_SKIP_WITHOUT_GPU();
  const CaseSpec cases[] = {
      spec("decode, 8 heads", 8, {1}, {20000}, 64),
      spec("128 rows, short prefix", 8, {16}, {4096}, 64),
      spec("ragged batch", 8, {1, 7, 16, 2}, {40, 3000, 9000, 0}, 16),
      spec("fp16, 5 heads, page 1", 5, {13}, {7000}, 1, DType::kFP16),
      spec("77 heads", 77, {2}, {3000}, 32),
  };
  int fused = 0;
  for (const CaseSpec& s : cases) {
    for (int arch : tile_configs().archs) {
      for (int chunk : {0, 256}) {
        PlanOptions o;
        o.force_config_arch = arch;
        o.force_chunk_tokens = chunk;
        const std::string what = fmt::format("{} config {} chunk {}", s.name, arch, chunk);
        SCOPED_TRACE(what);
        CaseSpec fresh = s;
        fresh.seed = fresh_seed();
        fused += check_both_combines(make_case(fresh), o, what);
      }
    }
    const CaseSpec e4m3 = with_e4m3_cache(s, s.name + " e4m3");
    SCOPED_TRACE(e4m3.name);
    fused += check_both_combines(make_case(e4m3), {}, e4m3.name);
  }
  EXPECT_GT(fused, 0) << "no case ran the fused combine";
  TV_SKIP_IF_TABLES_MISSING();
}

// The schedule's boundary: decode with forced chunk lengths from many chunks to few. The fused
// combine must be chosen exactly for the grids up to some size (those that fit the device at
// once) and never above it, and the calls on either side of that size must match the oracle.
TEST(GpuCombine, EitherSideOfTheFusedBoundary) {
  TV_SKIP_WITHOUT_GPU();
  for (int arch : tile_configs().archs) {
    for (auto [heads, tree] : {std::pair{8, 1}, std::pair{16, 8}}) {
      const CaseSpec s = spec(fmt::format("boundary, {} heads, {} nodes", heads, tree), heads,
                              {tree}, {32 * 1024}, 64);
      const HostCase host = make_case(s);
      PlanOptions o;
      o.backend = Backend::kCudaMma;
      o.force_config_arch = arch;
      int32_t most_fused = 0, fewest_separate = 1 << 30;
      std::optional<int> fused_chunk, separate_chunk;
      for (int tiles = 1; tiles <= 64; ++tiles) {
        Plan p;
        o.force_chunk_tokens = 0;
        ASSERT_TRUE(plan(host.problem(), o, &p).ok());
        o.force_chunk_tokens = tiles * p.state.tile_tokens;
        ASSERT_TRUE(plan(host.problem(), o, &p).ok()) << o.force_chunk_tokens;
        if (p.state.num_chunks < 2) break;
        const int64_t grid = static_cast<int64_t>(p.state.num_chunks) *
                             ((heads * tree + p.state.rows_per_cta - 1) / p.state.rows_per_cta);
        if (p.state.fused_combine) {
          if (grid > most_fused)
            most_fused = static_cast<int32_t>(grid), fused_chunk = o.force_chunk_tokens;
        } else if (grid < fewest_separate) {
          fewest_separate = static_cast<int32_t>(grid), separate_chunk = o.force_chunk_tokens;
        }
      }
      SCOPED_TRACE(fmt::format("{} config {}: fused up to {} CTAs, separate from {}", s.name, arch,
                               most_fused, fewest_separate));
      EXPECT_LT(most_fused, fewest_separate);
      ASSERT_TRUE(fused_chunk.has_value());
      ASSERT_TRUE(separate_chunk.has_value());
      for (int chunk : {*fused_chunk, *separate_chunk}) {
        o.force_chunk_tokens = chunk;
        const GpuResult r = run_on_gpu(host, o);
        EXPECT_EQ(r.plan.state.fused_combine, chunk == *fused_chunk);
        expect_close_to_oracle(host, fmt::format("{} config {} chunk {}", s.name, arch, chunk), r);
      }
    }
  }
  TV_SKIP_IF_TABLES_MISSING();
}

// The fused combine's counters end every call at zero, and a later call on the same
// workspace waits for its own partials: between three runs of one plan the partials are
// overwritten with NaN (a CTA that did not wait would read them), and the counters are read
// back after each run.
TEST(GpuCombine, CountersResetBetweenCalls) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase host = make_case(spec("counter reset", 8, {16}, {9000}, 64));
  PlanOptions o;
  o.backend = Backend::kCudaMma;
  o.force_chunk_tokens = 256;
  Plan p;
  ASSERT_TRUE(plan(host.problem(), o, &p).ok());
  if (!p.state.fused_combine) GTEST_SKIP() << "this device's plan does not fuse the combine";
  DeviceCase d(host);
  d.ensure_workspace(p.workspace_bytes);
  char* ws = static_cast<char*>(d.workspace());
  const detail::WorkspaceLayout w = detail::workspace_layout(p);
  ASSERT_GT(w.counter_bytes, 0u);
  for (int i = 0; i < 3; ++i) {
    if (i > 0) {  // 0xff bytes: NaN floats
      ASSERT_EQ(cudaMemset(ws + w.part_out_offset(), 0xff, w.part_out_bytes), cudaSuccess);
      ASSERT_EQ(cudaMemset(ws + w.part_lse_offset(), 0xff, w.part_lse_bytes), cudaSuccess);
    }
    d.poison_outputs();
    const Status s = run(p, d.tensors(), d.workspace(), d.workspace_bytes(), nullptr);
    ASSERT_TRUE(s.ok()) << s.to_string();
    GpuResult r{.plan = p};
    d.download(&r.out, &r.lse);
    expect_close_to_oracle(host, fmt::format("run {}", i), r);
    std::vector<uint32_t> counters(w.counter_bytes / 4, 1);
    ASSERT_EQ(cudaMemcpy(counters.data(), ws + w.counter_offset(), w.counter_bytes,
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    for (size_t k = 0; k < counters.size(); ++k)
      ASSERT_EQ(counters[k], 0u) << "counter " << k << " after run " << i;
  }
}

}  // namespace
}  // namespace treeverify::testing
