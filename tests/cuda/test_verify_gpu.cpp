// cuda-mma against the float64 oracle on fresh random inputs with poisoned outputs:
// tree shapes and sizes, page sizes, prefix lengths, heads, ragged batches, dtypes, strides,
// and three tile tables (the device's own, and sm_80's and sm_120's, forced).
#include <fmt/format.h>

#include "gpu_check.h"

namespace treeverify::testing {
namespace {

// The configurations every case runs under: the device's own, sm_80's (3 stages) and sm_120's
// (the 99 KB pipelines: 16-token tiles for 64 rows, 2 stages for 32), so the code shipped for
// those executes here too.
const int kConfigs[] = {0, 80, 120};

CaseSpec spec(std::string name, int heads, std::vector<int32_t> trees,
              std::vector<int64_t> prefixes, int page, TreeShape shape = TreeShape::kRandom,
              DType dtype = DType::kBF16) {
  return CaseSpec{.name = std::move(name),
                  .num_heads = heads,
                  .tree_sizes = std::move(trees),
                  .prefix_lens = std::move(prefixes),
                  .page_size = page,
                  .shape = shape,
                  .dtype = dtype,
                  .seed = fresh_seed()};
}

void run_all_configs(const CaseSpec& s) {
  for (int arch : kConfigs) {
    PlanOptions o;
    o.force_config_arch = arch;
    SCOPED_TRACE(fmt::format("{} config {}", s.name, arch));
    CaseSpec fresh = s;
    fresh.seed = fresh_seed();
    expect_matches_oracle(fresh, o);
  }
}

TEST(GpuVerify, TreeShapesAndSizes) {
  TV_SKIP_WITHOUT_GPU();
  for (TreeShape shape : {TreeShape::kChain, TreeShape::kStar, TreeShape::kDeep, TreeShape::kBushy,
                          TreeShape::kRandom}) {
    for (int t : {1, 2, 17, 64, 257, 1024}) {
      const int heads = t >= 257 ? 1 : 8;
      run_all_configs(
          spec(fmt::format("{} T={}", tree_shape_name(shape), t), heads, {t}, {777}, 16, shape));
    }
  }
}

TEST(GpuVerify, PageSizes) {
  TV_SKIP_WITHOUT_GPU();
  for (int page = 1; page <= 128; page *= 2)
    run_all_configs(spec(fmt::format("page {}", page), 8, {17}, {3001}, page));
}

TEST(GpuVerify, PrefixLengths) {
  TV_SKIP_WITHOUT_GPU();
  // 15 rows run the 16-row variant, 25 rows the 32-row ones (whose configurations differ).
  for (int heads : {3, 5})
    for (int64_t l : {0, 1, 31, 32, 33, 1000, 4097, 65537, 200000})
      run_all_configs(spec(fmt::format("H {} L {}", heads, l), heads, {5}, {l}, l % 2 ? 1 : 64));
}

TEST(GpuVerify, Heads) {
  TV_SKIP_WITHOUT_GPU();
  for (int h : {1, 3, 16, 33, 64, 128})
    run_all_configs(spec(fmt::format("H {}", h), h, {4}, {2000}, 32));
}

TEST(GpuVerify, RaggedBatch) {
  TV_SKIP_WITHOUT_GPU();
  run_all_configs(spec("ragged", 8, {1, 0, 17, 64, 3, 9}, {0, 50, 12345, 700, 100000, 1}, 16));
  run_all_configs(
      spec("decode batch", 16, std::vector<int32_t>(64, 1), std::vector<int64_t>(64, 1500), 64));
}

TEST(GpuVerify, Fp16) {
  TV_SKIP_WITHOUT_GPU();
  run_all_configs(spec("fp16 tree", 8, {33}, {5000}, 64, TreeShape::kRandom, DType::kFP16));
  run_all_configs(spec("fp16 ragged", 4, {3, 70}, {10, 20000}, 1, TreeShape::kBushy, DType::kFP16));
}

// The same inputs twice must give bit-identical outputs under every table: a moving result
// is a race.
TEST(GpuVerify, Deterministic) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase host = make_case(spec("determinism", 8, {64}, {150000}, 1));
  for (int arch : kConfigs) {
    PlanOptions o;
    o.force_config_arch = arch;
    SCOPED_TRACE(fmt::format("config {}", arch));
    const GpuResult a = run_on_gpu(host, o);
    const GpuResult b = run_on_gpu(host, o);
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4));
  }
}

}  // namespace
}  // namespace treeverify::testing
