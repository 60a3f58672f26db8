// The shared case generators and the comparison helper: valid problems of the promised shape,
// deterministic in the seed, and a comparison that catches NaN, wrong values, unwritten rows.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/validate.h"
#include "testing/cases.h"
#include "testing/compare.h"
#include "treeverify/half.h"

namespace treeverify::testing {
namespace {

constexpr TreeShape kShapes[] = {TreeShape::kRandom, TreeShape::kChain, TreeShape::kStar,
                                 TreeShape::kDeep, TreeShape::kBushy};

TEST(TreeShapeNames, RoundTrip) {
  for (TreeShape shape : kShapes) {
    TreeShape parsed = TreeShape::kChain == shape ? TreeShape::kStar : TreeShape::kChain;
    ASSERT_TRUE(parse_tree_shape(tree_shape_name(shape), &parsed)) << tree_shape_name(shape);
    EXPECT_EQ(parsed, shape);
  }
  TreeShape s = TreeShape::kStar;
  EXPECT_FALSE(parse_tree_shape("binary", &s));
  EXPECT_EQ(s, TreeShape::kStar);
}

TEST(MakeTree, ShapesAreAsPromised) {
  std::mt19937_64 rng(3);
  constexpr int32_t kN = 200;
  EXPECT_TRUE(make_tree(TreeShape::kRandom, 0, rng).empty());
  for (TreeShape shape : kShapes) {
    const std::vector<int32_t> p = make_tree(shape, kN, rng);
    ASSERT_EQ(p.size(), size_t{kN});
    ASSERT_EQ(p[0], -1) << tree_shape_name(shape);
    int32_t chain_edges = 0;
    for (int32_t i = 1; i < kN; ++i) {
      ASSERT_GE(p[i], 0) << tree_shape_name(shape) << " node " << i;
      ASSERT_LT(p[i], i) << tree_shape_name(shape) << " node " << i;
      chain_edges += p[i] == i - 1;
      if (shape == TreeShape::kChain) {
        EXPECT_EQ(p[i], i - 1);
      }
      if (shape == TreeShape::kStar) {
        EXPECT_EQ(p[i], 0);
      }
      if (shape == TreeShape::kBushy) {
        EXPECT_EQ(p[i], (i - 1) / 4);
      }
    }
    // Random: parent uniform in [0, i) extends the chain with probability 1/i, so a handful
    // of chain edges; deep: about 7 in 8 edges extend the chain, but not all of them.
    if (shape == TreeShape::kRandom) {
      EXPECT_LT(chain_edges, kN / 10);
    }
    if (shape == TreeShape::kDeep) {
      EXPECT_GT(chain_edges, kN * 3 / 4);
      EXPECT_LT(chain_edges, kN - 1);
    }
  }
}

// Ragged batch: empty tree, empty prefix, lengths that are multiples of nothing.
CaseSpec ragged_spec(TreeShape shape, int32_t page_size) {
  return CaseSpec{.name = "ragged",
                  .num_heads = 2,
                  .tree_sizes = {7, 0, 1, 33, 4},
                  .prefix_lens = {129, 5, 0, 61, 0},
                  .page_size = page_size,
                  .shape = shape,
                  .seed = 11};
}

TEST(MakeCase, ValidForEveryShapeAndPageSize) {
  for (TreeShape shape : kShapes) {
    for (int32_t page_size = 1; page_size <= kMaxPageSize; page_size *= 2) {
      const HostCase c = make_case(ragged_spec(shape, page_size));
      detail::ProblemSummary s;
      const Status st = detail::validate_problem(c.problem(), &s);
      ASSERT_TRUE(st.ok()) << tree_shape_name(shape) << " page " << page_size << ": "
                           << st.to_string();
      EXPECT_EQ(s.total_q, 45);
      EXPECT_EQ(c.total_q(), 45);
      EXPECT_EQ(s.max_tree, 33);
      EXPECT_EQ(s.max_prefix, 129);
      EXPECT_EQ(c.kv_len, (std::vector<int32_t>{136, 5, 1, 94, 4}));
      EXPECT_EQ(c.q.size(), size_t{45} * 2 * kQKDim);
      EXPECT_EQ(c.kv.size(), static_cast<size_t>(c.num_pages) * page_size * kQKDim);
      EXPECT_EQ(c.out_elems(), size_t{45} * 2 * kVDim);
      EXPECT_EQ(c.lse_elems(), size_t{45} * 2);
      // Each request's tree is its own tree of the chosen shape, rooted at its first row.
      std::mt19937_64 unused(0);
      if (shape == TreeShape::kChain) {
        EXPECT_EQ(std::vector<int32_t>(c.parents.begin() + c.qo_indptr[3],
                                       c.parents.begin() + c.qo_indptr[4]),
                  make_tree(TreeShape::kChain, 33, unused));
      }
    }
  }
}

TEST(MakeCase, PagesAreDistinctScatteredAndPoolHasSlack) {
  CaseSpec spec = ragged_spec(TreeShape::kRandom, 1);
  spec.pool_slack = 0.5;
  const HostCase c = make_case(spec);
  const int64_t used = 136 + 5 + 1 + 94 + 4;
  ASSERT_EQ(static_cast<int64_t>(c.kv_page_indices.size()), used);
  EXPECT_EQ(c.kv_page_indptr.back(), used);
  EXPECT_EQ(c.num_pages, 360);  // 240 * 1.5
  const std::set<int32_t> distinct(c.kv_page_indices.begin(), c.kv_page_indices.end());
  EXPECT_EQ(static_cast<int64_t>(distinct.size()), used);
  EXPECT_FALSE(std::is_sorted(c.kv_page_indices.begin(), c.kv_page_indices.end()));
  EXPECT_GE(*distinct.begin(), 0);
  EXPECT_LT(*distinct.rbegin(), c.num_pages);
}

TEST(MakeCase, SameSeedSameCaseOtherSeedOtherCase) {
  const CaseSpec spec = ragged_spec(TreeShape::kRandom, 16);
  const HostCase a = make_case(spec), b = make_case(spec);
  EXPECT_EQ(a.parents, b.parents);
  EXPECT_EQ(a.kv_page_indices, b.kv_page_indices);
  EXPECT_EQ(a.q, b.q);
  EXPECT_EQ(a.kv, b.kv);
  CaseSpec other = spec;
  other.seed = spec.seed + 1;
  const HostCase d = make_case(other);
  EXPECT_NE(a.parents, d.parents);
  EXPECT_NE(a.kv_page_indices, d.kv_page_indices);
  EXPECT_NE(a.q, d.q);
  EXPECT_NE(a.kv, d.kv);
}

TEST(MakeCase, ValuesAreRoughlyStandardNormalInEitherDType) {
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    CaseSpec spec = ragged_spec(TreeShape::kRandom, 64);
    spec.dtype = dtype;
    const HostCase c = make_case(spec);
    double sum = 0, sum_sq = 0;
    for (uint16_t x : c.kv) {
      const double v = half_to_float(dtype, x);
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sum_sq += v * v;
    }
    const double n = static_cast<double>(c.kv.size());
    EXPECT_NEAR(sum / n, 0.0, 0.01) << dtype_name(dtype);
    EXPECT_NEAR(sum_sq / n, 1.0, 0.02) << dtype_name(dtype);
  }
}

TEST(MakeCase, UnrepresentableSpecsThrow) {
  CaseSpec spec = ragged_spec(TreeShape::kRandom, 4);
  spec.prefix_lens.pop_back();
  EXPECT_THROW(make_case(spec), std::invalid_argument);
  spec = ragged_spec(TreeShape::kRandom, 4);
  spec.prefix_lens[0] = std::numeric_limits<int32_t>::max();
  EXPECT_THROW(make_case(spec), std::invalid_argument);
}

TEST(Roofline, BytesAndFlopsFollowBench) {
  const HostCase c = make_case(CaseSpec{.name = "roofline",
                                        .num_heads = 8,
                                        .tree_sizes = {16, 2},
                                        .prefix_lens = {1000, 10},
                                        .page_size = 64});
  EXPECT_DOUBLE_EQ(verify_bytes(c), (1016.0 + 12.0) * 576 * 2);
  EXPECT_DOUBLE_EQ(verify_flops(c), 2.0 * 8 * 1088 * (16.0 * 1016 + 2.0 * 12));
}

// A reference of `rows` rows with distinct values and the kernel output it rounds to.
struct Fixture {
  static constexpr size_t kRows = 6;
  std::vector<double> ref_out, ref_lse;
  std::vector<uint16_t> out;
  std::vector<float> lse;
  Fixture() : ref_out(kRows * kVDim), ref_lse(kRows), out(kRows * kVDim), lse(kRows) {
    for (size_t i = 0; i < ref_out.size(); ++i) {
      ref_out[i] = std::sin(0.37 * static_cast<double>(i));
      out[i] = float_to_bf16(static_cast<float>(ref_out[i]));
    }
    for (size_t r = 0; r < kRows; ++r) {
      ref_lse[r] = 3.0 + 0.25 * static_cast<double>(r);
      lse[r] = static_cast<float>(ref_lse[r]);
    }
  }
  Comparison compare() const {
    return compare_with_reference(DType::kBF16, out, lse.data(), ref_out, ref_lse);
  }
};

TEST(Compare, RoundedReferencePasses) {
  const Fixture f;
  const Comparison c = f.compare();
  EXPECT_TRUE(c.ok(kOutRelTol, kLseAbsTol)) << c.to_string();
  EXPECT_GT(c.out_rel_fro, 0.0);  // bf16 rounding is measured, not hidden
  EXPECT_LT(c.out_rel_fro, 4e-3);
  EXPECT_LT(c.lse_max_abs, 1e-6);
  EXPECT_EQ(c.to_string().find('\n'), std::string::npos);
}

TEST(Compare, FlagsNaNInOut) {
  Fixture f;
  f.out[3 * kVDim + 17] = 0x7fc0;  // bf16 quiet NaN
  const Comparison c = f.compare();
  EXPECT_EQ(c.out_nonfinite, 1);
  EXPECT_FALSE(c.ok(kOutRelTol, kLseAbsTol)) << c.to_string();
}

TEST(Compare, FlagsAWrongValue) {
  Fixture f;
  f.out[100] = float_to_bf16(static_cast<float>(f.ref_out[100]) + 40.0f);
  const Comparison c = f.compare();
  EXPECT_GT(c.out_rel_fro, kOutRelTol);
  EXPECT_FALSE(c.ok(kOutRelTol, kLseAbsTol)) << c.to_string();
}

TEST(Compare, FlagsLseErrorsAndNaN) {
  Fixture f;
  f.lse[2] += 1e-3f;
  Comparison c = f.compare();
  EXPECT_NEAR(c.lse_max_abs, 1e-3, 1e-6);
  EXPECT_EQ(c.lse_mismatch, 0);
  EXPECT_FALSE(c.ok(kOutRelTol, kLseAbsTol));
  f.lse[2] = std::nanf("");
  c = f.compare();
  EXPECT_EQ(c.lse_mismatch, 1);
  EXPECT_FALSE(c.ok(kOutRelTol, kLseAbsTol));
}

TEST(Compare, FlagsAnUnwrittenRow) {
  // The kernel skipped row 4: out keeps its zero poison, lse its -inf poison.
  Fixture f;
  std::fill(f.out.begin() + 4 * kVDim, f.out.begin() + 5 * kVDim, uint16_t{0});
  f.lse[4] = -std::numeric_limits<float>::infinity();
  const Comparison c = f.compare();
  EXPECT_EQ(c.lse_mismatch, 1);
  EXPECT_GT(c.out_rel_fro, kOutRelTol);
  EXPECT_FALSE(c.ok(kOutRelTol, kLseAbsTol)) << c.to_string();
}

TEST(Compare, EmptyRowsMustBeZeroWithMinusInfLse) {
  Fixture f;
  const float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t r : {1, 5}) {
    f.ref_lse[r] = kNegInf;
    f.lse[r] = kNegInf;
    for (size_t k = r * kVDim; k < (r + 1) * kVDim; ++k) {
      f.ref_out[k] = 0;
      f.out[k] = 0;
    }
  }
  EXPECT_TRUE(f.compare().ok(kOutRelTol, kLseAbsTol)) << f.compare().to_string();
  f.out[5 * kVDim + 9] = float_to_bf16(1e-3f);  // tiny, but an empty row must be exactly 0
  EXPECT_EQ(f.compare().out_zero_rows_bad, 1);
  EXPECT_FALSE(f.compare().ok(kOutRelTol, kLseAbsTol));
  f.out[5 * kVDim + 9] = 0;
  f.lse[1] = 0.f;  // finite lse for a row that saw nothing
  EXPECT_EQ(f.compare().lse_mismatch, 1);
}

TEST(Compare, NullLseIsNotCompared) {
  Fixture f;
  f.lse[0] = std::nanf("");
  const Comparison c = compare_with_reference(DType::kBF16, f.out, nullptr, f.ref_out, f.ref_lse);
  EXPECT_EQ(c.lse_mismatch, 0);
  EXPECT_TRUE(c.ok(kOutRelTol, kLseAbsTol)) << c.to_string();
}

TEST(Compare, SizeMismatchThrows) {
  Fixture f;
  f.out.pop_back();
  EXPECT_THROW(f.compare(), std::invalid_argument);
}

// A reference slack (ReferenceResult::out_slack, fast mode's P codes): each row's error counts
// only beyond its own row's slack; the worst row before it is kept; the aggregate is unchanged.
TEST(Compare, RowErrorsCountBeyondTheirSlack) {
  Fixture f;
  // Row 2 moved by 1 in one column: an absolute row error of about 1.
  f.out[2 * kVDim + 40] = float_to_bf16(static_cast<float>(f.ref_out[2 * kVDim + 40]) + 1.f);
  double norm = 0;
  for (size_t k = 2 * kVDim; k < 3 * kVDim; ++k) norm += f.ref_out[k] * f.ref_out[k];
  norm = std::sqrt(norm);
  auto with_slack = [&](std::vector<double> slack) {
    return compare_with_reference(DType::kBF16, f.out, f.lse.data(), f.ref_out, f.ref_lse, slack);
  };
  const Comparison plain = f.compare();
  EXPECT_FALSE(plain.slack);
  EXPECT_NEAR(plain.out_row_rel_max, 1.0 / norm, 0.02 / norm);
  std::vector<double> slack(Fixture::kRows, 0.0);
  slack[2] = 1.1;  // covers it: what is left is bf16 rounding
  Comparison c = with_slack(slack);
  EXPECT_TRUE(c.slack);
  EXPECT_LT(c.out_row_rel_max, 4e-3);
  EXPECT_EQ(c.out_row_rel_max_raw, plain.out_row_rel_max);
  EXPECT_EQ(c.out_rel_fro, plain.out_rel_fro);
  EXPECT_NE(c.to_string().find("before it"), std::string::npos);
  slack[2] = 0.5;  // half of it
  EXPECT_NEAR(with_slack(slack).out_row_rel_max, 0.5 / norm, 0.02 / norm);
  slack[2] = 0;
  slack[3] = 1.1;  // another row's slack does not cover this one
  EXPECT_EQ(with_slack(slack).out_row_rel_max, plain.out_row_rel_max);
  slack.pop_back();
  EXPECT_THROW(with_slack(slack), std::invalid_argument);
}

}  // namespace
}  // namespace treeverify::testing
