// merge_state_cpu: the split-KV algebra (attention over [0, n) is the merge of [0, k) and
// [k, n)), the -inf / NaN rules of merge.h, aliasing, and argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu_test_util.h"
#include "treeverify/merge.h"

namespace {

using treeverify::DType;
using treeverify::float_to_half;
using treeverify::kQKDim;
using treeverify::kVDim;
using treeverify::merge_state_cpu;
using treeverify::MergeStateArgs;
using treeverify::StatusCode;

constexpr float kInf = std::numeric_limits<float>::infinity();

// Decode problems (T = 1, prefix n - 1) for each dtype; the oracle's answer over all n tokens
// is compared with the merge of plain attention over [0, k) and [k, n) for every head.
TEST(MergeState, MergeOfSplitRangesEqualsWholeRange) {
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (int trial = 0; trial < 12; ++trial) {
      tvtest::CaseSpec spec;
      spec.num_heads = 4;
      spec.tree_sizes = {1};
      spec.prefix_lens = {20 + 7 * trial};
      spec.page_size = 8;
      spec.dtype = dtype;
      spec.seed = 50 + trial;
      const tvtest::HostCase c = treeverify::testing::make_case(spec);
      const int64_t n = c.kv_len[0], k = 1 + trial * 5 % (n - 1);
      treeverify::detail::ReferenceResult whole;
      ASSERT_TRUE(treeverify::detail::reference_attention(
                      tvtest::plan_for(c), c.tensors(nullptr, nullptr), false, &whole)
                      .ok());

      const int heads = spec.num_heads;
      std::vector<uint16_t> va(heads * kVDim), vb(heads * kVDim), vo(heads * kVDim);
      std::vector<float> sa(heads), sb(heads), so(heads);
      for (int h = 0; h < heads; ++h) {
        std::vector<const uint16_t*> first, second;
        for (int64_t t = 0; t < n; ++t)
          (t < k ? first : second).push_back(tvtest::token_row(c, 0, t));
        std::vector<double> o(kVDim);
        double lse;
        const double scale = spec.softmax_scale;
        tvtest::plain_attention(dtype, scale, &c.q[h * kQKDim], first, o.data(), &lse);
        for (int col = 0; col < kVDim; ++col) va[h * kVDim + col] = float_to_half(dtype, o[col]);
        sa[h] = static_cast<float>(lse);
        tvtest::plain_attention(dtype, scale, &c.q[h * kQKDim], second, o.data(), &lse);
        for (int col = 0; col < kVDim; ++col) vb[h * kVDim + col] = float_to_half(dtype, o[col]);
        sb[h] = static_cast<float>(lse);
      }
      const MergeStateArgs args{.num_rows = heads,
                                .head_dim = kVDim,
                                .dtype = dtype,
                                .v_a = va.data(),
                                .s_a = sa.data(),
                                .v_b = vb.data(),
                                .s_b = sb.data(),
                                .v_out = vo.data(),
                                .s_out = so.data()};
      ASSERT_TRUE(merge_state_cpu(args).ok());
      // Inputs and output are rounded to 16 bits: a few of its ulps, relative.
      const double tol = dtype == DType::kBF16 ? 8e-3 : 1e-3;
      EXPECT_LT(tvtest::rel_fro(tvtest::to_double(dtype, vo), whole.out), tol) << trial;
      for (int h = 0; h < heads; ++h) EXPECT_NEAR(so[h], whole.lse[h], 2e-6) << trial;
    }
  }
}

std::vector<uint16_t> row_of(DType dtype, int dim, float base) {
  std::vector<uint16_t> v(dim);
  for (int c = 0; c < dim; ++c) v[c] = float_to_half(dtype, base + 0.25f * c);
  return v;
}

TEST(MergeState, NegInfSideContributesNothingAndNaNPropagates) {
  const DType d = DType::kFP16;
  const int dim = 8;
  // Rows: a = -inf; b = -inf; both -inf; a = NaN; b = +inf.
  const std::vector<float> sa = {-kInf, 1.5f, -kInf, NAN, 0.f};
  const std::vector<float> sb = {2.5f, -kInf, -kInf, 0.f, kInf};
  std::vector<uint16_t> va, vb;
  for (int r = 0; r < 5; ++r) {
    const auto a = row_of(d, dim, static_cast<float>(r)), b = row_of(d, dim, -3.f * r - 1);
    va.insert(va.end(), a.begin(), a.end());
    vb.insert(vb.end(), b.begin(), b.end());
  }
  std::vector<uint16_t> vo(5 * dim, 0x1234);
  std::vector<float> so(5, 7.f);
  ASSERT_TRUE(merge_state_cpu({.num_rows = 5,
                               .head_dim = dim,
                               .dtype = d,
                               .v_a = va.data(),
                               .s_a = sa.data(),
                               .v_b = vb.data(),
                               .s_b = sb.data(),
                               .v_out = vo.data(),
                               .s_out = so.data()})
                  .ok());
  for (int c = 0; c < dim; ++c) {
    EXPECT_EQ(vo[0 * dim + c], vb[0 * dim + c]);  // only b saw anything
    EXPECT_EQ(vo[1 * dim + c], va[1 * dim + c]);  // only a
    EXPECT_EQ(treeverify::fp16_to_float(vo[2 * dim + c]), 0.f);
    EXPECT_TRUE(std::isnan(treeverify::fp16_to_float(vo[3 * dim + c])));
    EXPECT_TRUE(std::isnan(treeverify::fp16_to_float(vo[4 * dim + c])));
  }
  EXPECT_EQ(so[0], 2.5f);
  EXPECT_EQ(so[1], 1.5f);
  EXPECT_EQ(so[2], -kInf);
  EXPECT_TRUE(std::isnan(so[3]));
  EXPECT_TRUE(std::isnan(so[4]));
}

TEST(MergeState, OutputMayAliasEitherInput) {
  const DType d = DType::kBF16;
  const int rows = 6, dim = 40;
  std::mt19937_64 rng(3);
  std::vector<uint16_t> va(rows * dim), vb(rows * dim);
  tvtest::fill_random(d, rng, &va);
  tvtest::fill_random(d, rng, &vb);
  std::vector<float> sa = {0.f, 1.f, -2.f, 30.f, -kInf, 4.f},
                     sb = {0.5f, -1.f, -2.f, 1.f, 3.f, -kInf};
  std::vector<uint16_t> expect_v(rows * dim);
  std::vector<float> expect_s(rows);
  MergeStateArgs args{.num_rows = rows,
                      .head_dim = dim,
                      .dtype = d,
                      .v_a = va.data(),
                      .s_a = sa.data(),
                      .v_b = vb.data(),
                      .s_b = sb.data(),
                      .v_out = expect_v.data(),
                      .s_out = expect_s.data()};
  ASSERT_TRUE(merge_state_cpu(args).ok());
  EXPECT_NE(expect_v, va);

  for (bool into_a : {true, false}) {
    std::vector<uint16_t> a = va, b = vb;
    std::vector<float> s_a = sa, s_b = sb;
    MergeStateArgs alias = args;
    alias.v_a = a.data();
    alias.v_b = b.data();
    alias.s_a = s_a.data();
    alias.s_b = s_b.data();
    alias.v_out = into_a ? a.data() : b.data();
    alias.s_out = into_a ? s_a.data() : s_b.data();
    ASSERT_TRUE(merge_state_cpu(alias).ok());
    EXPECT_EQ(into_a ? a : b, expect_v) << into_a;
    EXPECT_EQ(into_a ? s_a : s_b, expect_s) << into_a;
  }
}

TEST(MergeState, ChecksArguments) {
  std::vector<uint16_t> v(4);
  std::vector<float> s(1);
  const MergeStateArgs ok{.num_rows = 1,
                          .head_dim = 4,
                          .dtype = DType::kBF16,
                          .v_a = v.data(),
                          .s_a = s.data(),
                          .v_b = v.data(),
                          .s_b = s.data(),
                          .v_out = v.data(),
                          .s_out = nullptr};
  EXPECT_TRUE(merge_state_cpu(ok).ok());  // s_out may be null
  auto with = [&](auto edit) {
    MergeStateArgs a = ok;
    edit(a);
    return merge_state_cpu(a).code();
  };
  EXPECT_EQ(with([](MergeStateArgs& a) { a.num_rows = -1; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](MergeStateArgs& a) { a.head_dim = 0; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](MergeStateArgs& a) { a.v_a = nullptr; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](MergeStateArgs& a) { a.s_b = nullptr; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](MergeStateArgs& a) { a.v_out = nullptr; }), StatusCode::kInvalidArgument);
  EXPECT_EQ(with([](MergeStateArgs& a) { a.dtype = static_cast<DType>(7); }),
            StatusCode::kInvalidArgument);
  // No rows: nothing is read, so null tensors (as frameworks give for empty ones) are fine.
  EXPECT_TRUE(merge_state_cpu({.num_rows = 0, .head_dim = 512}).ok());
  const auto s_err = merge_state_cpu({.num_rows = 2, .head_dim = 512});
  EXPECT_NE(s_err.message().find("v_a"), std::string::npos) << s_err.message();
}

}  // namespace
