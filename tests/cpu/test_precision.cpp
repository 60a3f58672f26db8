// Precision (verify.h): its names, and plan()'s choice and errors on the CPU backends.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "cpu_test_util.h"

namespace tvtest {
namespace {

using treeverify::Backend;
using treeverify::KvFormat;
using treeverify::Plan;
using treeverify::PlanOptions;
using treeverify::Precision;
using treeverify::Status;
using treeverify::StatusCode;

HostCase small_case(KvFormat kv_format, uint64_t seed = 31) {
  return treeverify::testing::make_case(CaseSpec{.name = "precision",
                                                 .num_heads = 4,
                                                 .tree_sizes = {9, 3},
                                                 .prefix_lens = {200, 45},
                                                 .page_size = 16,
                                                 .seed = seed,
                                                 .kv_format = kv_format});
}

TEST(Precision, NamesRoundTripAndUnknownNamesAreErrors) {
  for (Precision p : {Precision::kExact, Precision::kFast}) {
    Precision back = p == Precision::kExact ? Precision::kFast : Precision::kExact;
    ASSERT_TRUE(treeverify::parse_precision(treeverify::precision_name(p), &back).ok());
    EXPECT_EQ(back, p);
  }
  EXPECT_STREQ(treeverify::precision_name(Precision::kFast), "fast");
  Precision untouched = Precision::kFast;
  for (const char* bad : {"fp8", "Fast", ""}) {
    const Status s = treeverify::parse_precision(bad, &untouched);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(s.message().find(std::string("'") + bad + "'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("exact or fast"), std::string::npos) << s.message();
  }
  EXPECT_EQ(untouched, Precision::kFast);
}

TEST(Precision, FastWithA16BitCacheIsAnArgumentError) {
  const HostCase c = small_case(KvFormat::kSameAsQ);
  for (Backend b : {Backend::kAuto, Backend::kCpuReference, Backend::kCpuFast}) {
    PlanOptions o;
    o.backend = b;
    o.precision = Precision::kFast;
    Plan p;
    const Status s = treeverify::plan(c.problem(), o, &p);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << treeverify::backend_name(b);
    EXPECT_NE(s.message().find("options.precision"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find("bf16"), std::string::npos) << s.message();
    o.precision = static_cast<Precision>(7);
    const Status u = treeverify::plan(small_case(KvFormat::kE4M3).problem(), o, &p);
    EXPECT_EQ(u.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(u.message().find("options.precision"), std::string::npos) << u.message();
  }
}

// cpu-fast has no FP8 products: fast asked, exact computed, and the reason says so. The
// oracle takes the precision asked (it rounds by it when round_p is on).
TEST(Precision, CpuBackendsPlanTheirPrecision) {
  const HostCase c = small_case(KvFormat::kE4M3);
  for (Precision asked : {Precision::kExact, Precision::kFast}) {
    PlanOptions o;
    o.precision = asked;
    o.backend = Backend::kCpuFast;
    Plan p;
    ASSERT_TRUE(treeverify::plan(c.problem(), o, &p).ok());
    EXPECT_EQ(p.precision, Precision::kExact);
    EXPECT_EQ(p.reason.find("computes exact") != std::string::npos, asked == Precision::kFast)
        << p.reason;
    o.backend = Backend::kCpuReference;
    ASSERT_TRUE(treeverify::plan(c.problem(), o, &p).ok());
    EXPECT_EQ(p.precision, asked);
    // auto falls back to cpu-fast only on a machine without a usable GPU.
    o.backend = Backend::kAuto;
    ASSERT_TRUE(treeverify::plan(c.problem(), o, &p).ok());
    if (p.backend == Backend::kCpuFast) {
      EXPECT_EQ(p.precision, Precision::kExact);
      EXPECT_EQ(p.reason.find("computes exact") != std::string::npos, asked == Precision::kFast)
          << p.reason;
    }
  }
}

}  // namespace
}  // namespace tvtest
