// An e4m3 KV cache on the CPU backends: the conversions, the oracle against the oracle on an
// equal 16-bit cache, cpu against the oracle, and the new arguments' errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu_test_util.h"
#include "testing/compare.h"

namespace tvtest {
namespace {

using treeverify::Backend;
using treeverify::e4m3_to_float;
using treeverify::float_to_e4m3;
using treeverify::KvFormat;
using treeverify::PlanOptions;
using treeverify::Status;
using treeverify::detail::reference_attention;
using treeverify::detail::ReferenceResult;

TEST(E4M3, KnownCodes) {
  EXPECT_EQ(e4m3_to_float(0x00), 0.f);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.f, -9));  // the smallest subnormal
  EXPECT_EQ(e4m3_to_float(0x07), 7 * std::ldexp(1.f, -9));
  EXPECT_EQ(e4m3_to_float(0x08), std::ldexp(1.f, -6));  // the smallest normal
  EXPECT_EQ(e4m3_to_float(0x38), 1.f);
  EXPECT_EQ(e4m3_to_float(0x39), 1.125f);
  EXPECT_EQ(e4m3_to_float(0x7e), 448.f);
  EXPECT_EQ(e4m3_to_float(0xfe), -448.f);
  EXPECT_TRUE(std::isnan(e4m3_to_float(0x7f)));
  EXPECT_TRUE(std::isnan(e4m3_to_float(0xff)));
  EXPECT_TRUE(std::signbit(e4m3_to_float(0x80)));
}

TEST(E4M3, RoundTripsEveryCodeAndRoundsToNearestEven) {
  for (int b = 0; b < 256; ++b) {
    if ((b & 0x7f) == 0x7f) continue;  // NaN
    EXPECT_EQ(float_to_e4m3(e4m3_to_float(static_cast<uint8_t>(b))), b) << "code " << b;
  }
  EXPECT_EQ(float_to_e4m3(1.0625f), 0x38);    // halfway 1 and 1.125: to the even mantissa
  EXPECT_EQ(float_to_e4m3(1.1875f), 0x3a);    // halfway 1.125 and 1.25: to 1.25
  EXPECT_EQ(float_to_e4m3(1.07f), 0x39);      // nearer 1.125
  EXPECT_EQ(float_to_e4m3(1000.f), 0x7e);     // saturates: e4m3fn has no infinity
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xfe);  // likewise
  EXPECT_EQ(float_to_e4m3(NAN), 0x7f);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.f, -10)), 0x00);  // halfway 0 and 2^-9: to 0
  EXPECT_EQ(float_to_e4m3(std::ldexp(3.f, -10)), 0x02);  // halfway 2^-9 and 2^-8: to 2^-8
}

// The 16-bit case holding exactly the dequantized values of the e4m3 case `c` (exact when
// kv_scale is a power of two: e4m3's 4 significant bits and exponents fit bf16 and fp16).
HostCase dequantized(const HostCase& c) {
  HostCase d = c;
  d.spec.kv_format = KvFormat::kSameAsQ;
  d.kv.resize(c.kv8.size());
  for (size_t i = 0; i < c.kv8.size(); ++i)
    d.kv[i] = treeverify::float_to_half(c.spec.dtype, e4m3_to_float(c.kv8[i]) * c.kv_scale);
  d.kv8.clear();
  return d;
}

HostCase e4m3_case(int heads, std::vector<int32_t> trees, std::vector<int64_t> prefixes, int page,
                   DType dtype, uint64_t seed, float scale) {
  return treeverify::testing::make_case(CaseSpec{.name = "e4m3",
                                                 .num_heads = heads,
                                                 .tree_sizes = std::move(trees),
                                                 .prefix_lens = std::move(prefixes),
                                                 .page_size = page,
                                                 .dtype = dtype,
                                                 .seed = seed,
                                                 .kv_format = KvFormat::kE4M3,
                                                 .kv_scale = scale});
}

// The oracle on the e4m3 cache gives the same bits as the oracle on the 16-bit cache holding
// its dequantized values: the e4m3 path checked by a path that does not decode e4m3.
TEST(E4M3, OracleEqualsTheOracleOnTheDequantizedCache) {
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (float scale : {0.5f, 0.0625f}) {
      const HostCase c = e4m3_case(3, {7, 1}, {40, 300}, 16, dtype, 21, scale);
      const HostCase d = dequantized(c);
      PlanOptions o;
      o.backend = Backend::kCpuReference;
      treeverify::Plan p8 = plan_for(c, o);
      p8.kv_format = KvFormat::kE4M3;
      ReferenceResult ref16, ref8;
      ASSERT_TRUE(
          reference_attention(plan_for(d, o), d.tensors(nullptr, nullptr), false, &ref16).ok());
      ASSERT_TRUE(reference_attention(p8, c.tensors(nullptr, nullptr), false, &ref8).ok());
      EXPECT_EQ(ref8.out, ref16.out);
      EXPECT_EQ(ref8.lse, ref16.lse);
    }
  }
}

TEST(E4M3, CpuFastMatchesTheOracle) {
  struct Shape {
    int heads;
    std::vector<int32_t> trees;
    std::vector<int64_t> prefixes;
    int page;
  };
  const Shape shapes[] = {{8, {16}, {3000}, 1}, {2, {5, 33, 1}, {0, 517, 9000}, 64}};
  for (const Shape& s : shapes) {
    for (DType dtype : {DType::kBF16, DType::kFP16}) {
      for (int threads : {1, 4}) {
        const HostCase c = e4m3_case(s.heads, s.trees, s.prefixes, s.page, dtype, 22, 0.037f);
        PlanOptions ro;
        ro.backend = Backend::kCpuReference;
        treeverify::Plan rp = plan_for(c, ro);
        rp.kv_format = KvFormat::kE4M3;
        ReferenceResult ref;
        ASSERT_TRUE(reference_attention(rp, c.tensors(nullptr, nullptr), false, &ref).ok());
        std::vector<uint16_t> out(c.out_elems(), 0x7fff);
        std::vector<float> lse(c.lse_elems(), NAN);
        PlanOptions o;
        o.backend = Backend::kCpu;
        o.num_threads = threads;
        const Status st = treeverify::verify_cpu(c.problem(), c.tensors(out.data(), lse.data()), o);
        ASSERT_TRUE(st.ok()) << st.to_string();
        const auto cmp =
            treeverify::testing::compare_with_reference(dtype, out, lse.data(), ref.out, ref.lse);
        EXPECT_TRUE(cmp.ok(treeverify::testing::kOutRelTol, 2e-5))
            << "page " << s.page << " threads " << threads << ": " << cmp.to_string();
      }
    }
  }
}

// A NaN code in the leaf of [-1, 0, 1, 1] reaches only the leaf's rows (verify.h's policy).
TEST(E4M3, NanCodeReachesOnlyTheRowsThatSeeIt) {
  HostCase c = e4m3_case(2, {4}, {50}, 16, DType::kBF16, 23, 0.25f);
  c.parents = {-1, 0, 1, 1};
  HostCase b = c;
  b.kv8[token_offset(c, 0, 53) + 9] = 0x7f;
  for (Backend backend : {Backend::kCpuReference, Backend::kCpu}) {
    std::vector<uint16_t> clean(c.out_elems()), bad(c.out_elems());
    std::vector<float> lse_clean(c.lse_elems()), lse_bad(c.lse_elems());
    PlanOptions o;
    o.backend = backend;
    ASSERT_TRUE(
        treeverify::verify_cpu(c.problem(), c.tensors(clean.data(), lse_clean.data()), o).ok());
    ASSERT_TRUE(treeverify::verify_cpu(b.problem(), b.tensors(bad.data(), lse_bad.data()), o).ok());
    const size_t seeing_rows = 3 * 2;  // nodes 0-2, 2 heads: unchanged
    EXPECT_TRUE(
        std::equal(bad.begin(), bad.begin() + seeing_rows * treeverify::kVDim, clean.begin()));
    EXPECT_TRUE(std::equal(lse_bad.begin(), lse_bad.begin() + seeing_rows, lse_clean.begin()));
    for (size_t r = seeing_rows; r < lse_bad.size(); ++r) EXPECT_TRUE(std::isnan(lse_bad[r]));
  }
}

TEST(E4M3, ScaleArgumentErrorsAreNamedAndWriteNothing) {
  const HostCase c = e4m3_case(2, {3}, {20}, 4, DType::kBF16, 24, 0.5f);
  const HostCase d = dequantized(c);
  std::vector<uint16_t> out(c.out_elems(), 0x1234);
  std::vector<float> lse(c.lse_elems(), 7.f);
  auto expect_error = [&](const treeverify::VerifyProblem& p, const treeverify::VerifyTensors& t,
                          const char* arg) {
    const Status s = treeverify::verify_cpu(p, t);
    EXPECT_FALSE(s.ok());
    EXPECT_NE(s.to_string().find(arg), std::string::npos) << s.to_string();
    EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint16_t v) { return v == 0x1234; }));
    EXPECT_TRUE(std::all_of(lse.begin(), lse.end(), [](float v) { return v == 7.f; }));
  };
  treeverify::VerifyTensors t = c.tensors(out.data(), lse.data());
  t.kv_scale = nullptr;
  expect_error(c.problem(), t, "kv_scale");
  const float nan_scale = NAN;
  t.kv_scale = &nan_scale;
  expect_error(c.problem(), t, "kv_scale");
  // A scale whose products overflow float32 (issue 52: kv_scale = 1e37 gave NaN on cpu
  // and inf on cpu-reference), on both backends, with either sign; the largest allowed runs.
  for (treeverify::Backend backend :
       {treeverify::Backend::kCpu, treeverify::Backend::kCpuReference}) {
    for (float scale : {1e37f, -1e37f, std::nextafter(treeverify::kMaxKvScale, INFINITY),
                        std::numeric_limits<float>::max(), INFINITY}) {
      t.kv_scale = &scale;
      const Status s = treeverify::verify_cpu(c.problem(), t, {.backend = backend});
      EXPECT_NE(s.to_string().find("argument 'kv_scale': *kv_scale = "), std::string::npos)
          << scale << ": " << s.to_string();
      EXPECT_TRUE(std::all_of(out.begin(), out.end(), [](uint16_t v) { return v == 0x1234; }));
    }
    const float largest = treeverify::kMaxKvScale;
    t.kv_scale = &largest;
    EXPECT_TRUE(treeverify::verify_cpu(c.problem(), t, {.backend = backend}).ok());
    std::fill(out.begin(), out.end(), 0x1234);
    std::fill(lse.begin(), lse.end(), 7.f);
  }
  EXPECT_TRUE(std::isfinite(treeverify::kMaxE4M3 * treeverify::kMaxKvScale));  // the bound's own
  t = c.tensors(out.data(), lse.data());
  // A scale with a 16-bit cache is a caller's mistake, not something to ignore.
  treeverify::VerifyTensors t16 = d.tensors(out.data(), lse.data());
  t16.kv_scale = &c.kv_scale;
  expect_error(d.problem(), t16, "kv_scale");
  treeverify::VerifyProblem bad_format = c.problem();
  bad_format.kv_format = static_cast<KvFormat>(7);
  expect_error(bad_format, c.tensors(out.data(), lse.data()), "kv_format");
}

}  // namespace
}  // namespace tvtest
