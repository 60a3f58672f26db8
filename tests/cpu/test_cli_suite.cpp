// The CLI's pure parts: the suite file (built-in and malformed ones), case selection, L
// scaling, the metadata-only problem, and the roofline math.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include "common.h"
#include "roofline.h"
#include "suite.h"
#include "timing.h"
#include "treeverify/system.h"

namespace treeverify::cli {
namespace {

const SuiteCase* find(const std::vector<SuiteCase>& cases, const std::string& name) {
  for (const SuiteCase& c : cases) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

TEST(CliSuite, BuiltInSuiteIsBenchMd) {
  std::vector<SuiteCase> cases;
  ASSERT_TRUE(load_suite("", &cases).ok());
  // docs/BENCH.md's table; R1's heads list expands to one case per H.
  struct Want {
    const char* name;
    int h, t;
    int64_t l;
    int page, batch;
  };
  for (const Want& w : {Want{"V1", 8, 16, 185000, 1, 1}, Want{"V2", 8, 64, 185000, 64, 1},
                        Want{"V3", 16, 256, 65536, 64, 1}, Want{"V4", 64, 64, 185000, 64, 1},
                        Want{"D1", 16, 1, 8192, 64, 64}, Want{"D2", 128, 1, 185000, 64, 1}}) {
    const SuiteCase* c = find(cases, w.name);
    ASSERT_NE(c, nullptr) << w.name;
    EXPECT_EQ(c->num_heads, w.h) << w.name;
    EXPECT_EQ(c->page_size, w.page) << w.name;
    ASSERT_EQ(static_cast<int>(c->tree_sizes.size()), w.batch) << w.name;
    for (int b = 0; b < w.batch; ++b) {
      EXPECT_EQ(c->tree_sizes[b], w.t) << w.name;
      EXPECT_EQ(c->prefix_lens[b], w.l) << w.name;
    }
    EXPECT_EQ(c->shape, testing::TreeShape::kRandom);
    EXPECT_FLOAT_EQ(c->softmax_scale, 0.1447f);
  }
  const SuiteCase* r8 = find(cases, "R1.h8");
  const SuiteCase* r64 = find(cases, "R1.h64");
  ASSERT_NE(r8, nullptr);
  ASSERT_NE(r64, nullptr);
  EXPECT_EQ(r8->num_heads, 8);
  EXPECT_EQ(r64->num_heads, 64);
  ASSERT_EQ(r8->tree_sizes.size(), 8u);
  EXPECT_EQ(r8->page_size, 16);
  EXPECT_EQ(*std::min_element(r8->prefix_lens.begin(), r8->prefix_lens.end()), 1);
  EXPECT_EQ(*std::max_element(r8->prefix_lens.begin(), r8->prefix_lens.end()), 100000);
  EXPECT_EQ(*std::min_element(r8->tree_sizes.begin(), r8->tree_sizes.end()), 1);
  EXPECT_EQ(*std::max_element(r8->tree_sizes.begin(), r8->tree_sizes.end()), 64);
}

TEST(CliSuite, SelectsByNameAndFamily) {
  std::vector<SuiteCase> cases, sel;
  ASSERT_TRUE(load_suite("", &cases).ok());
  ASSERT_TRUE(select_cases(cases, {"V1", "R1"}, &sel).ok());
  ASSERT_EQ(sel.size(), 3u);
  EXPECT_EQ(sel[0].name, "V1");
  EXPECT_EQ(sel[1].name, "R1.h8");
  EXPECT_EQ(sel[2].name, "R1.h64");
  ASSERT_TRUE(select_cases(cases, {}, &sel).ok());
  EXPECT_EQ(sel.size(), cases.size());
  const Status s = select_cases(cases, {"V9"}, &sel);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("V9"), std::string::npos);
  EXPECT_NE(s.message().find("D2"), std::string::npos);  // lists the known cases
}

// --kv-dtype (issue 12's name) is --kv-format under another name: both set every case's KV
// format, and an unknown value names both.
TEST(CliSuite, KvDtypeIsAnAliasOfKvFormat) {
  for (const char* flag : {"--kv-format", "--kv-dtype"}) {
    CLI::App app;
    CaseFlags flags;
    add_case_flags(&app, &flags);
    std::vector<std::string> args = {"e4m3", flag};  // CLI11 parses a reversed list
    ASSERT_NO_THROW(app.parse(args)) << flag;
    flags.names = {"V1"};
    std::vector<SuiteCase> cases;
    ASSERT_TRUE(resolve_cases(flags, &cases).ok()) << flag;
    ASSERT_EQ(cases.size(), 1u);
    EXPECT_EQ(cases[0].kv_format, KvFormat::kE4M3) << flag;
  }
  CLI::App app;
  CaseFlags flags;
  add_case_flags(&app, &flags);
  std::vector<std::string> args = {"e5m2", "--kv-dtype"};
  ASSERT_NO_THROW(app.parse(args));
  flags.names = {"V1"};
  std::vector<SuiteCase> cases;
  const Status s = resolve_cases(flags, &cases);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("unknown --kv-format/--kv-dtype 'e5m2'"), std::string::npos)
      << s.message();
}

// --precision goes into the plan options; fast without an e4m3 cache, or an unknown name, is
// an error before any case runs.
TEST(CliSuite, PrecisionFlag) {
  auto options_of = [](std::vector<std::string> args, PlanOptions* o) {
    CLI::App app;
    CaseFlags flags;
    add_case_flags(&app, &flags);
    std::reverse(args.begin(), args.end());  // CLI11 parses a reversed list
    app.parse(args);
    return plan_options(flags, o);
  };
  PlanOptions o;
  ASSERT_TRUE(options_of({"--kv-format", "e4m3", "--precision", "fast"}, &o).ok());
  EXPECT_EQ(o.precision, Precision::kFast);
  ASSERT_TRUE(options_of({}, &o).ok());
  EXPECT_EQ(o.precision, Precision::kExact);
  Status s = options_of({"--precision", "fast"}, &o);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--precision fast needs --kv-format e4m3"), std::string::npos)
      << s.message();
  s = options_of({"--kv-format", "e4m3", "--precision", "fp8"}, &o);
  EXPECT_NE(s.message().find("--precision: unknown precision 'fp8'"), std::string::npos)
      << s.message();
}

// check_case's oracle takes the precision the checked plan computes: cpu-reference rounding
// as the fast kernels do (round_p, fast) passes against it, and cpu asked for fast runs,
// and is checked, exact. An oracle left exact would be 5e-2 away from the first: FAIL.
TEST(CliSuite, CheckRoundsTheOracleLikeThePlan) {
  const SuiteCase c{.name = "fast",
                    .num_heads = 4,
                    .page_size = 16,
                    .tree_sizes = {6},
                    .prefix_lens = {150},
                    .kv_format = KvFormat::kE4M3};
  PlanOptions o;
  o.backend = Backend::kCpuReference;
  o.round_p = true;
  o.precision = Precision::kFast;
  CheckResult r;
  ASSERT_TRUE(check_case(c, o, {}, 1e12, &r).ok());
  EXPECT_EQ(r.plan.precision, Precision::kFast);
  EXPECT_TRUE(r.pass) << r.cmp.to_string();
  EXPECT_LT(r.cmp.out_rel_fro, 5e-3) << r.cmp.to_string();  // out's own 16-bit rounding
  o.backend = Backend::kCpu;
  o.round_p = false;
  ASSERT_TRUE(check_case(c, o, {}, 1e12, &r).ok());
  EXPECT_EQ(r.plan.precision, Precision::kExact);
  EXPECT_TRUE(r.pass) << r.cmp.to_string();
}

// A case too long for the float64 oracle is checked on a copy with a shorter prefix, planned
// with the case's rows a CTA: the copy runs the kernel the case runs. (Planned by their own
// rows, on the H200 the copies of V1, V2, D2 and S2 would run the portable 32-row kernel and
// the cases run the wgmma one.)
TEST(CliSuite, AShortenedCheckRunsTheTimedKernel) {
  const SuiteCase c{.name = "v1-like",
                    .num_heads = 8,
                    .page_size = 1,
                    .tree_sizes = {16},
                    .prefix_lens = {185000}};
  PlanOptions o;
  o.backend = Backend::kCpu;
  CheckResult r;
  ASSERT_TRUE(check_case(c, o, {}, 2e9, &r).ok());
  EXPECT_TRUE(r.reduced);
  EXPECT_TRUE(r.pass) << r.cmp.to_string();
  EXPECT_EQ(r.plan.kernel, r.timed_kernel);
  const std::vector<DeviceInfo> devices = list_devices();
  if (devices.empty() || !devices[0].has_kernel_code)
    GTEST_SKIP() << "no GPU that runs this build's kernels: the CUDA half did not run";
  o.backend = Backend::kCuda;
  ASSERT_TRUE(check_case(c, o, {}, 2e9, &r).ok());
  EXPECT_TRUE(r.reduced);
  EXPECT_TRUE(r.pass) << r.cmp.to_string();
  EXPECT_EQ(r.plan.kernel, r.timed_kernel);
}

TEST(CliSuite, MalformedSuitesNameTheProblem) {
  std::vector<SuiteCase> cases;
  auto error_of = [&](const std::string& text) {
    const Status s = parse_suite(text, "t.json", &cases);
    EXPECT_FALSE(s.ok()) << text;
    return s.message();
  };
  EXPECT_NE(error_of("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(R"({"cases": 3})").find("'cases'"), std::string::npos);
  const std::string base = R"("heads": 8, "page": 64, "batch": 2, "prefix": 100)";
  EXPECT_NE(error_of(R"({"cases": [{"name": "X", "tree": [1, 2, 3], )" + base + "}]}")
                .find("'tree' has 3 values, batch is 2"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"cases": [{"name": "X", "tree": -1, )" + base + "}]}").find("negative"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"cases": [{"name": "X", "tree": 4, "shape": "oak", )" + base + "}]}")
                .find("oak"),
            std::string::npos);
  EXPECT_NE(error_of(R"({"cases": [{"name": "X", "tree": 4, "heads": 0, "page": 1, "batch": 1,
                         "prefix": 1}]})")
                .find("heads = 0"),
            std::string::npos);
  const std::string one = R"({"name": "X", "tree": 4, )" + base + "}";
  EXPECT_NE(error_of(R"({"cases": [)" + one + "," + one + "]}").find("duplicate"),
            std::string::npos);
  // Wrong types and values past their type are named, never thrown, wrapped or truncated.
  auto one_case = [](const std::string& fields) {
    return R"({"cases": [{"name": "X", )" + fields + "}]}";
  };
  const std::string hpb = R"("heads": 8, "page": 64, "batch": 1)";
  EXPECT_NE(error_of(one_case(R"("tree": 4, "prefix": 9, "why": 5, )" + hpb)).find("'why'"),
            std::string::npos);
  EXPECT_NE(error_of(one_case(R"("tree": 4, "prefix": 9, "shape": 5, )" + hpb)).find("'shape'"),
            std::string::npos);
  EXPECT_NE(error_of(one_case(R"("tree": 4294967297, "prefix": 9, )" + hpb)).find("'tree'"),
            std::string::npos);
  EXPECT_NE(
      error_of(one_case(R"("tree": 4, "prefix": 9, "heads": 8, "page": 4294967300, "batch": 1)"))
          .find("page = 4294967300"),
      std::string::npos);
  EXPECT_NE(error_of(one_case(R"("tree": 4, "prefix": 9223372036854775807, )" + hpb))
                .find("prefix + tree"),
            std::string::npos);
  EXPECT_NE(
      error_of(one_case(R"("tree": 4, "prefix": 185000, "heads": 8, "page": 64, "batch": 1048576)"))
          .find("KV tokens"),
      std::string::npos);
}

// Integers past 2^63 - 1 are kept unsigned by the JSON reader; read as int64 they wrapped, and
// "heads": 2^63 was refused as heads = -9223372036854775808 (issue 52). Seeds take all of
// uint64 and nothing negative.
TEST(CliSuite, IntegersPastInt64AreQuotedNotWrapped) {
  std::vector<SuiteCase> cases;
  auto error_of = [&](const std::string& fields) {
    const Status s = parse_suite(R"({"cases": [{"name": "X", )" + fields + "}]}", "t.json", &cases);
    EXPECT_FALSE(s.ok()) << fields;
    EXPECT_EQ(s.message().find("-9223372036854775808"), std::string::npos) << s.message();
    return s.message();
  };
  const std::string tl = R"("tree": 4, "prefix": 9, )";
  EXPECT_NE(error_of(tl + R"("heads": 9223372036854775808, "page": 64, "batch": 1)")
                .find("heads = 9223372036854775808 is not in [1, 128]"),
            std::string::npos);
  EXPECT_NE(error_of(tl + R"("heads": [8, 9223372036854775808], "page": 64, "batch": 1)")
                .find("heads = 9223372036854775808 is not in [1, 128]"),
            std::string::npos);
  EXPECT_NE(error_of(tl + R"("heads": 8, "page": 64, "batch": 9223372036854775808)")
                .find("batch = 9223372036854775808 is not in [1, 1048576]"),
            std::string::npos);
  EXPECT_NE(error_of(tl + R"("heads": 8, "page": 18446744073709551615, "batch": 1)")
                .find("page = 18446744073709551615 is not in [1, 128]"),
            std::string::npos);
  EXPECT_NE(error_of(tl + R"("heads": 8, "page": 64, "batch": 1, "seed": -1)")
                .find("seed = -1 is not an integer in [0, 2^64 - 1]"),
            std::string::npos);
  EXPECT_NE(error_of(tl + R"("heads": 8, "page": 48, "batch": 1)")
                .find("page = 48 is not a power of two"),
            std::string::npos);
  ASSERT_TRUE(
      parse_suite(R"({"cases": [{"name": "X", )" + tl +
                      R"("heads": 8, "page": 64, "batch": 1, "seed": 18446744073709551615}]})",
                  "t.json", &cases)
          .ok());
  EXPECT_EQ(cases.at(0).seed, UINT64_MAX);
}

// The lengths rule one place holds for suite files and --tree/--prefix alike.
TEST(CliSuite, CaseLengthsBelow2To31) {
  const SuiteCase ok{.tree_sizes = {4}, .prefix_lens = {2147483643}};
  EXPECT_TRUE(check_case_lengths(ok).ok());
  SuiteCase c = ok;
  c.prefix_lens = {2147483644};
  EXPECT_NE(check_case_lengths(c).message().find("prefix + tree = 2147483644 + 4 is past 2^31 - 1"),
            std::string::npos);
  c.prefix_lens = {INT64_MAX};  // no int64 overflow in the sum either
  EXPECT_FALSE(check_case_lengths(c).ok());
  c = SuiteCase{.tree_sizes = {4, 4}, .prefix_lens = {1 << 30, 1 << 30}};
  EXPECT_NE(check_case_lengths(c).message().find("2147483656 KV tokens"), std::string::npos);
  c = SuiteCase{.tree_sizes = {-1}, .prefix_lens = {5}};
  EXPECT_NE(check_case_lengths(c).message().find("lengths are >= 0"), std::string::npos);
  // check_case refuses such a case itself, before it scales a copy down to check.
  CheckResult r;
  c = SuiteCase{.name = "huge",
                .num_heads = 8,
                .page_size = 64,
                .tree_sizes = {4},
                .prefix_lens = {2147483647}};
  PlanOptions o;
  o.backend = Backend::kCpu;
  const Status s = check_case(c, o, {}, kOracleFlopBudget, &r);
  EXPECT_NE(s.message().find("case huge: request 0: prefix + tree"), std::string::npos)
      << s.to_string();
  EXPECT_FALSE(r.pass);
}

TEST(CliSuite, ScalingKeepsNonEmptyPrefixes) {
  SuiteCase c;
  c.prefix_lens = {0, 1, 10, 185000};
  const SuiteCase s = scale_prefix(c, 0.1);
  EXPECT_EQ(s.prefix_lens, (std::vector<int64_t>{0, 1, 1, 18500}));
  EXPECT_DOUBLE_EQ(scale_for_budget(10, 20), 1.0);
  EXPECT_DOUBLE_EQ(scale_for_budget(40, 20), 0.5);
  std::optional<double> f;
  EXPECT_TRUE(parse_scale("auto", &f).ok());
  EXPECT_FALSE(f.has_value());
  EXPECT_TRUE(parse_scale("0.25", &f).ok());
  EXPECT_DOUBLE_EQ(*f, 0.25);
  EXPECT_FALSE(parse_scale("0", &f).ok());
  EXPECT_FALSE(parse_scale("2", &f).ok());
  EXPECT_FALSE(parse_scale("0.1x", &f).ok());
}

TEST(CliSuite, MetadataMatchesTheCase) {
  std::vector<SuiteCase> cases;
  ASSERT_TRUE(load_suite("", &cases).ok());
  const SuiteCase& r1 = *find(cases, "R1.h64");
  const CaseMetadata m = make_metadata(r1);
  ASSERT_EQ(m.qo_indptr.size(), 9u);
  for (size_t b = 0; b < 8; ++b) {
    EXPECT_EQ(m.qo_indptr[b + 1] - m.qo_indptr[b], r1.tree_sizes[b]);
    EXPECT_EQ(m.kv_len[b], r1.prefix_lens[b] + r1.tree_sizes[b]);
    const int64_t pages = m.kv_page_indptr[b + 1] - m.kv_page_indptr[b];
    EXPECT_EQ(pages, (m.kv_len[b] + r1.page_size - 1) / r1.page_size);
    EXPECT_EQ(m.parents[m.qo_indptr[b]], -1);  // every tree has its root first
  }
  EXPECT_EQ(m.num_pages, static_cast<int64_t>(m.kv_page_indices.size()));
  const VerifyProblem p = m.problem(r1);
  EXPECT_EQ(p.batch_size, 8);
  EXPECT_EQ(p.num_heads, 64);
  EXPECT_EQ(p.kv_len, m.kv_len.data());
}

TEST(CliRoofline, BytesAndFlopsFollowBenchMd) {
  SuiteCase v1;
  v1.num_heads = 8;
  v1.tree_sizes = {16};
  v1.prefix_lens = {185000};
  EXPECT_DOUBLE_EQ(case_bytes(v1), 185016.0 * 576 * 2);
  EXPECT_DOUBLE_EQ(case_flops(v1), 2.0 * 16 * 8 * 185016 * (576 + 512));
}

TEST(CliRoofline, FloorIsTheSlowerCeiling) {
  Ceilings c{.bandwidth = 1e12, .mma_flops = 1e15};
  // Memory-bound: 1 GB at 1 TB/s = 1 ms; 1 GFLOP at 1 PFLOP/s = 1 us.
  RooflinePoint p = roofline(1e9, 1e9, 2e-3, c);
  EXPECT_DOUBLE_EQ(p.floor_s, 1e-3);
  EXPECT_DOUBLE_EQ(p.fraction, 0.5);
  EXPECT_FALSE(p.compute_bound);
  EXPECT_DOUBLE_EQ(p.gbps, 500);
  EXPECT_DOUBLE_EQ(p.tflops, 0.5);
  // Compute-bound: 4 TFLOP at 1 PFLOP/s = 4 ms.
  p = roofline(1e9, 4e12, 4e-3, c);
  EXPECT_TRUE(p.compute_bound);
  EXPECT_DOUBLE_EQ(p.fraction, 1.0);
  // An unmeasured ceiling contributes nothing rather than dividing by zero.
  p = roofline(1e9, 4e12, 4e-3, Ceilings{.bandwidth = 1e12});
  EXPECT_DOUBLE_EQ(p.floor_s, 1e-3);
  EXPECT_TRUE(std::isfinite(p.fraction));
}

TEST(CliRoofline, MedianOfSamples) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_DOUBLE_EQ(median({}), 0);
}

}  // namespace
}  // namespace treeverify::cli
