// The selection function (core/select.h) without a GPU: a release build's description and a
// described GPU of each release architecture, against problem classes (decode, a small and a
// large tree, e4m3 caches exact and fast, large pages), each with the kernel expected and the
// words its reason must hold. What it expects follows the tile tables (cuda/sm80/config.h),
// the wgmma rule (cuda/sm90/choice.h) and the fast-mode rule (native e4m3 products on sm_89
// and sm_120; e4m3 wgmma on sm_90a), read from their comments, not from the function's output.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "core/select.h"
#include "core/validate.h"
#include "core/check.h"

namespace treeverify::detail {
namespace {

// The six release architectures, every variant compiler feature present, only each
// architecture's own tables' variants compiled (what packages ship).
BuildDescription release_build() {
  return BuildDescription{.cuda = true,
                          .archs = {80, 86, 89, 90, 100, 120},
                          .all_variants = false,
                          .e4m3_mma = true,
                          .sm90a = true};
}

struct ProblemClass {
  const char* name;
  int heads;
  int tree;
  int prefix;
  int page;
  KvFormat kv = KvFormat::kSameAsQ;
  Precision precision = Precision::kExact;
};

constexpr ProblemClass kDecode{"decode H=8", 8, 1, 30000, 64};
constexpr ProblemClass kTree32{"32 rows", 16, 2, 65536, 64};
constexpr ProblemClass kTree128{"128 rows", 8, 16, 65536, 1};
constexpr ProblemClass kTree256Page64{"256 rows, page 64", 16, 16, 65536, 64};
constexpr ProblemClass kE4M3Decode{"e4m3 decode", 16, 1, 30000, 64, KvFormat::kE4M3};
constexpr ProblemClass kE4M3Fast128{"e4m3 fast, 128 rows", 8, 16, 65536, 64, KvFormat::kE4M3,
                                    Precision::kFast};

struct Expected {
  int arch;
  const ProblemClass* problem;
  const char* kernel;  // KernelChoice::name()
  std::vector<const char*> reason_has;
};

const std::vector<Expected>& table() {
  static const std::vector<Expected> t = {
      // Decode of at most 16 rows: the 16-row variant; bulk copies on sm_90/100 for 16-bit
      // caches.
      {80, &kDecode, "mma/bf16/r16-s2/sm80-table", {"no request has more than 16 rows"}},
      {86, &kDecode, "mma/bf16/r16-s2/sm86-table", {}},
      {89, &kDecode, "mma/bf16/r16-s2/sm89-table", {}},
      {90, &kDecode, "mma/bf16/r16-s2-bulk/sm90-table", {"by bulk copies"}},
      {100, &kDecode, "mma/bf16/r16-s2-bulk/sm100-table", {"by bulk copies"}},
      {120, &kDecode, "mma/bf16/r16-s2/sm120-table", {}},
      // 32 rows: the 32-row variant with the stages each architecture's shared memory holds.
      {80, &kTree32, "mma/bf16/r32-s3/sm80-table", {"no request has more than 32 rows"}},
      {86, &kTree32, "mma/bf16/r32-s2/sm86-table", {}},
      {90, &kTree32, "mma/bf16/r32-s4/sm90-table",
       {"wgmma: no request has more than 32 rows"}},
      {120, &kTree32, "mma/bf16/r32-s2/sm120-table", {}},
      // More than 32 rows: 64-row CTAs (16-token tiles in 99 KB), the wgmma kernel on sm_90a.
      {80, &kTree128, "mma/bf16/r64-s3/sm80-table",
       {"requests have more than 32 rows", "in two halves"}},
      {86, &kTree128, "mma/bf16/r64-s3-t16/sm86-table", {"16-token KV tiles"}},
      {89, &kTree128, "mma/bf16/r64-s3-t16/sm89-table", {}},
      {90, &kTree128, "wgmma/bf16/r64-t64/sm90a", {"wgmma (sm_90a)"}},
      {100, &kTree128, "mma/bf16/r64-s4/sm100-table", {"in two halves"}},
      {120, &kTree128, "mma/bf16/r64-s3-t16/sm120-table", {}},
      // TMA tensor copies: the wgmma kernel, pages of 64 rows, more than 128 rows a request.
      {90, &kTree256Page64, "wgmma/bf16/r64-t64+tma/sm90a", {"TMA tensor copies"}},
      // e4m3 decode: r16-s2 everywhere (bulk copies lost on e4m3), exact products.
      {90, &kE4M3Decode, "mma/bf16-e4m3kv/r16-s2/sm90-table", {"e4m3 widened to fp16"}},
      {120, &kE4M3Decode, "mma/bf16-e4m3kv/r16-s2/sm120-table", {"e4m3 widened to fp16"}},
      // Fast mode: native on sm_89 and sm_120, e4m3 wgmma on sm_90a; exact elsewhere, saying why.
      {89, &kE4M3Fast128, "mma/bf16-e4m3kv-fast/r64-s3-t16/sm89-table", {"e4m3 fast"}},
      {120, &kE4M3Fast128, "mma/bf16-e4m3kv-fast/r64-s3-t16/sm120-table", {"e4m3 fast"}},
      {90, &kE4M3Fast128, "wgmma/bf16-e4m3kv-fast/r64-t64+tma/sm90a", {"e4m3 fast"}},
      {80, &kE4M3Fast128, "mma/bf16-e4m3kv/r64-s3/sm80-table",
       {"fast asked, run exact: sm_80 has no e4m3 mma"}},
      {86, &kE4M3Fast128, "mma/bf16-e4m3kv/r64-s3-t16/sm86-table",
       {"fast asked, run exact: sm_86 has no e4m3 mma"}},
      {100, &kE4M3Fast128, "mma/bf16-e4m3kv/r64-s4/sm100-table",
       {"fast asked, run exact: sm_100's e4m3 mma.sync is not verified native"}},
  };
  return t;
}

// The metadata of one request of the class (a chain of p.tree nodes, identity page table): the
// selection reads lengths and sizes only.
struct Metadata {
  std::vector<int32_t> qo, kv_len, indptr, pages, parents;
  VerifyProblem problem;
};
Metadata make(const ProblemClass& p) {
  Metadata m;
  const int32_t len = p.prefix + p.tree, num_pages = (len + p.page - 1) / p.page;
  m.qo = {0, p.tree};
  m.kv_len = {len};
  m.indptr = {0, num_pages};
  for (int32_t i = 0; i < num_pages; ++i) m.pages.push_back(i);
  for (int32_t i = 0; i < p.tree; ++i) m.parents.push_back(i - 1);
  m.problem = VerifyProblem{.batch_size = 1,
                            .num_heads = p.heads,
                            .page_size = p.page,
                            .num_pages = num_pages,
                            .kv_format = p.kv,
                            .softmax_scale = 0.1447f,
                            .qo_indptr = m.qo.data(),
                            .kv_len = m.kv_len.data(),
                            .kv_page_indptr = m.indptr.data(),
                            .kv_page_indices = m.pages.data(),
                            .parents = m.parents.data()};
  return m;
}

Status choose(const Metadata& m, const Machine& machine, PlanOptions options,
              const PlanTuning& tuning, KernelChoice* choice) {
  ProblemSummary summary;
  TV_RETURN_IF_ERROR(validate_problem(m.problem, &summary));
  return select_kernel(m.problem, summary, options, tuning, machine, choice);
}

TEST(Select, EveryReleaseArchitectureGetsItsTablesKernel) {
  const BuildDescription build = release_build();
  for (const Expected& e : table()) {
    SCOPED_TRACE(std::string("sm_") + std::to_string(e.arch) + ", " + e.problem->name);
    const DeviceDescription device = described_device(e.arch, build);
    const Machine machine{.build = build, .device = &device};
    const Metadata host = make(*e.problem);
    KernelChoice c;
    const PlanOptions options{.precision = e.problem->precision};
    ASSERT_TRUE(choose(host, machine, options, {}, &c).ok());
    EXPECT_EQ(c.backend, Backend::kCuda);
    EXPECT_EQ(c.name(), e.kernel) << c.explain();
    const std::string reason = c.explain();
    EXPECT_NE(reason.find("an sm_" + std::to_string(e.arch) + " GPU"), std::string::npos) << reason;
    for (const char* words : e.reason_has)
      EXPECT_NE(reason.find(words), std::string::npos) << words << " not in: " << reason;
    EXPECT_EQ(c.precision == Precision::kFast, c.name().find("-fast") != std::string::npos);
  }
}

// The schedule in the choice covers the problem: every request's KV in whole chunks, and a
// CTA grid the device can launch.
TEST(Select, TheScheduleCoversTheProblem) {
  const BuildDescription build = release_build();
  for (int arch : build.archs) {
    const DeviceDescription device = described_device(arch, build);
    const Machine machine{.build = build, .device = &device};
    for (const ProblemClass* p : {&kDecode, &kTree32, &kTree128, &kE4M3Decode}) {
      SCOPED_TRACE(std::string("sm_") + std::to_string(arch) + ", " + p->name);
      KernelChoice c;
      ASSERT_TRUE(choose(make(*p), machine, {}, {}, &c).ok());
      const int64_t kv = p->prefix + p->tree;
      EXPECT_GE(static_cast<int64_t>(c.schedule.chunk_tokens) * c.schedule.num_chunks, kv);
      EXPECT_EQ(c.schedule.chunk_tokens % c.tile_tokens, 0);
      EXPECT_GE(c.schedule.max_row_blocks * c.rows_per_cta, p->heads * p->tree);
      EXPECT_GT(c.ctas_per_sm, 0);
    }
  }
}

// Tuning: a forced table runs the portable kernel, a forced row count its variant, and a table
// whose variants this code lacks is refused by name.
TEST(Select, TuningForcesTablesAndRows) {
  const BuildDescription build = release_build();
  const DeviceDescription h200 = described_device(90, build);
  const Machine machine{.build = build, .device = &h200};
  const Metadata host = make(kTree128);
  KernelChoice c;
  ASSERT_TRUE(choose(host, machine, {}, {.rows_per_cta = 32}, &c).ok());
  EXPECT_EQ(c.name(), "mma/bf16/r32-s4/sm90-table");
  EXPECT_NE(c.explain().find("32 rows a CTA forced"), std::string::npos) << c.explain();
  // The release build's sm_90 code holds no sm_120 variant (r64-s3-t16).
  const Status s = choose(host, machine, {}, {.config_arch = 120}, &c);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("argument 'tuning.config_arch'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("TREEVERIFY_ALL_VARIANTS"), std::string::npos) << s.message();
  // With every variant compiled it runs, under the sm_120 table.
  BuildDescription all = build;
  all.all_variants = true;
  const Machine dev_machine{.build = all, .device = &h200};
  ASSERT_TRUE(choose(host, dev_machine, {}, {.config_arch = 120}, &c).ok());
  EXPECT_EQ(c.name(), "mma/bf16/r64-s3-t16/sm120-table");
  EXPECT_EQ(choose(host, dev_machine, {}, {.chunk_tokens = 24}, &c).code(),
            StatusCode::kInvalidArgument);  // not whole 64-token tiles
}

// A release build's architectures with every variant compiled, and an sm_90 device under it.
const BuildDescription& every_variant_build() {
  static const BuildDescription all = [] {
    BuildDescription b = release_build();
    b.all_variants = true;
    return b;
  }();
  return all;
}
Machine h200_every_variant() {
  static const DeviceDescription h200 = described_device(90, every_variant_build());
  return {.build = every_variant_build(), .device = &h200};
}

// PlanTuning::pair_ctas: the pair variant for more than 32 rows of a 16-bit cache, on sm_90+
// devices in builds with every variant, under any table; refused by name elsewhere.
TEST(Select, TuningRunsThePairVariant) {
  const BuildDescription& all = every_variant_build();
  const Machine machine = h200_every_variant();
  KernelChoice c;
  for (int arch : {0, 120}) {
    ASSERT_TRUE(choose(make(kTree128), machine, {}, {.config_arch = arch, .pair_ctas = true}, &c)
                    .ok());
    EXPECT_EQ(c.name(), fmt::format("mma/bf16/r64-s3-c2/sm{}-table", arch == 0 ? 90 : 120));
    EXPECT_NE(c.explain().find("a pair of CTAs (one cluster)"), std::string::npos) << c.explain();
  }
  // 32 rows or fewer keep the table's variant.
  ASSERT_TRUE(choose(make(kTree32), machine, {}, {.pair_ctas = true}, &c).ok());
  EXPECT_EQ(c.name(), "mma/bf16/r32-s4/sm90-table");
  // Not in a release build, not on an e4m3 cache, not without clusters.
  const DeviceDescription h200_release = described_device(90, release_build());
  Status s = choose(make(kTree128), {.build = release_build(), .device = &h200_release}, {},
                    {.pair_ctas = true}, &c);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_NE(s.message().find("TREEVERIFY_ALL_VARIANTS"), std::string::npos) << s.message();
  s = choose(make(kE4M3Fast128), machine, {}, {.pair_ctas = true}, &c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  const DeviceDescription ada = described_device(89, all);
  s = choose(make(kTree128), {.build = all, .device = &ada}, {}, {.pair_ctas = true}, &c);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_NE(s.message().find("clusters"), std::string::npos) << s.message();
}

// PlanTuning::variant: the portable variant of that name for every request, under any table,
// in builds with every variant; an unknown name, a variant without a kernel for the cache, a
// contradicting row count or pair_ctas beside it are refused by name.
TEST(Select, TuningRunsANamedVariant) {
  const Machine machine = h200_every_variant();
  KernelChoice c;
  for (const char* v : {"r64-s2-k2", "r64-s3-t16-w16"}) {
    for (int arch : {0, 120}) {
      ASSERT_TRUE(
          choose(make(kTree128), machine, {}, {.config_arch = arch, .variant = v}, &c).ok());
      EXPECT_EQ(c.name(), fmt::format("mma/bf16/{}/sm{}-table", v, arch == 0 ? 90 : 120));
    }
  }
  // Also for fewer rows than it holds, and a tabled variant by its name.
  ASSERT_TRUE(choose(make(kTree32), machine, {}, {.variant = "r64-s2-k2"}, &c).ok());
  EXPECT_EQ(c.name(), "mma/bf16/r64-s2-k2/sm90-table");
  ASSERT_TRUE(choose(make(kTree128), machine, {}, {.variant = "r64-s3-t16"}, &c).ok());
  EXPECT_EQ(c.name(), "mma/bf16/r64-s3-t16/sm90-table");
  Status s = choose(make(kTree128), machine, {}, {.variant = "r64-s9"}, &c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  EXPECT_NE(s.message().find("r64-s2-k2"), std::string::npos) << s.message();  // the names
  // 16-bit caches only, as the pair.
  for (const char* v : {"r64-s2-k2", "r64-s3-t16-w16", "r64-s3-c2"}) {
    s = choose(make(kE4M3Fast128), machine, {}, {.variant = v}, &c);
    EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
    EXPECT_NE(s.message().find("no kernel for e4m3 caches"), std::string::npos) << s.message();
  }
  s = choose(make(kTree128), machine, {}, {.rows_per_cta = 32, .variant = "r64-s2-k2"}, &c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  s = choose(make(kTree128), machine, {}, {.pair_ctas = true, .variant = "r64-s2-k2"}, &c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.message();
  // Not compiled in a release build.
  const DeviceDescription h200_release = described_device(90, release_build());
  s = choose(make(kTree128), {.build = release_build(), .device = &h200_release}, {},
             {.variant = "r64-s2-k2"}, &c);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.message();
  EXPECT_NE(s.message().find("TREEVERIFY_ALL_VARIANTS"), std::string::npos) << s.message();
}

// Without a GPU: auto falls back to the CPU and says why; a CUDA backend asked is refused with
// the machine's reason; a GPU that cannot run the problem is an error, never a CPU fallback.
TEST(Select, NoGpuMeansTheCpuOnlyForAuto) {
  const Metadata host = make(kDecode);
  Machine none{.build = release_build(),
               .no_device_code = StatusCode::kNoDevice,
               .no_device = "backend cuda: no CUDA device found"};
  KernelChoice c;
  ASSERT_TRUE(choose(host, none, {}, {}, &c).ok());
  EXPECT_EQ(c.backend, Backend::kCpu);
  EXPECT_NE(c.explain().find("no GPU: backend cuda: no CUDA device found"), std::string::npos);
  EXPECT_EQ(choose(host, none, {.backend = Backend::kCuda}, {}, &c).code(),
            StatusCode::kNoDevice);
  const DeviceDescription turing = described_device(75, release_build());
  const Machine old{.build = release_build(), .device = &turing};
  const Status s = choose(host, old, {}, {}, &c);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("sm_80 or newer"), std::string::npos) << s.message();
}

// A device this build has no code for: the error names the device and the compiled list.
TEST(Select, ADeviceWithoutCodeNamesTheCompiledArchitectures) {
  BuildDescription only80 = release_build();
  only80.archs = {80};
  DeviceDescription device = described_device(90, release_build());
  device.info.has_kernel_code = false;
  const Machine machine{.build = only80, .device = &device};
  KernelChoice c;
  const Status s = choose(make(kDecode), machine, {}, {}, &c);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_NE(s.message().find("compiled for sm_80"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("including 90a"), std::string::npos) << s.message();
}

// kernels_by_arch (doctor's table) is the selection function's answer per request size.
TEST(Select, KernelsByArchAreTheTablesEntries) {
  for (const ArchKernels& k : kernels_by_arch(release_build())) {
    SCOPED_TRACE(k.arch);
    EXPECT_EQ(k.up_to_16_rows, k.arch == 90 || k.arch == 100 ? "r16-s2-bulk" : "r16-s2");
    EXPECT_EQ(k.up_to_16_rows_e4m3, "r16-s2");
    EXPECT_EQ(k.up_to_32_rows, k.arch == 80                   ? "r32-s3"
                               : k.arch == 90 || k.arch == 100 ? "r32-s4"
                                                               : "r32-s2");
    EXPECT_EQ(k.more_rows, k.arch == 80    ? "r64-s3"
                           : k.arch == 90  ? "wgmma-r64-t64"
                           : k.arch == 100 ? "r64-s4"
                                           : "r64-s3-t16");
  }
}

}  // namespace
}  // namespace treeverify::detail
