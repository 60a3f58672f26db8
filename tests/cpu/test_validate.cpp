// validate_problem: every contract check of docs/DESIGN.md section 3 rejects a broken field with a
// message naming the argument and the value, and the valid edge cases pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/validate.h"
#include "testing/cases.h"

namespace treeverify {
namespace {

using detail::ProblemSummary;
using detail::validate_problem;
using testing::CaseSpec;
using testing::HostCase;
using testing::make_case;

// Three requests: a 5-node tree over 37 prefix tokens, an empty tree, a 3-node tree with no
// prefix. Page size 4, so request 0 spans 11 pages and its last page is partly used.
HostCase small_case(int32_t page_size = 4) {
  return make_case(CaseSpec{.name = "small",
                            .num_heads = 4,
                            .tree_sizes = {5, 0, 3},
                            .prefix_lens = {37, 9, 0},
                            .page_size = page_size,
                            .seed = 7});
}

// The call failed as invalid input, the message names `arg` and contains `value`.
void ExpectInvalid(const Status& s, const std::string& arg, const std::string& value) {
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("argument '" + arg + "'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(value), std::string::npos) << s.message();
}

Status Validate(const VerifyProblem& p) {
  ProblemSummary summary;
  return validate_problem(p, &summary);
}

TEST(ValidateProblem, SmallCaseIsValidAndSummarized) {
  const HostCase c = small_case();
  ProblemSummary s;
  ASSERT_TRUE(validate_problem(c.problem(), &s).ok());
  EXPECT_EQ(s.total_q, 8);
  EXPECT_EQ(s.max_tree, 5);
  EXPECT_EQ(s.nnz_pages, 11 + 3 + 1);  // ceil(42 / 4), ceil(9 / 4), ceil(3 / 4)
  EXPECT_EQ(s.max_kv_len, 42);
  EXPECT_EQ(s.max_prefix, 37);
  EXPECT_EQ(s.total_kv, 42 + 9 + 3);
  EXPECT_TRUE(validate_problem(c.problem(), nullptr).ok());
}

TEST(ValidateProblem, NegativeBatchSize) {
  VerifyProblem p = small_case().problem();
  p.batch_size = -1;
  ExpectInvalid(Validate(p), "batch_size", "-1");
}

TEST(ValidateProblem, NumHeadsOutOfRange) {
  const HostCase c = small_case();
  VerifyProblem p = c.problem();
  p.num_heads = 0;
  ExpectInvalid(Validate(p), "num_heads", "= 0");
  p.num_heads = kMaxHeads + 1;
  ExpectInvalid(Validate(p), "num_heads", std::to_string(kMaxHeads + 1));
}

TEST(ValidateProblem, PageSizeNotAPowerOfTwoOrOutOfRange) {
  const HostCase c = small_case();
  VerifyProblem p = c.problem();
  for (int32_t bad : {0, -4, 3, 48, 2 * kMaxPageSize}) {
    p.page_size = bad;
    ExpectInvalid(Validate(p), "page_size", "page_size = " + std::to_string(bad));
  }
}

TEST(ValidateProblem, NegativeNumPages) {
  const HostCase c = small_case();
  VerifyProblem p = c.problem();
  p.num_pages = -3;
  ExpectInvalid(Validate(p), "num_pages", "-3");
}

TEST(ValidateProblem, UnknownDType) {
  const HostCase c = small_case();
  VerifyProblem p = c.problem();
  p.dtype = static_cast<DType>(7);
  ExpectInvalid(Validate(p), "dtype", "7");
}

TEST(ValidateProblem, SoftmaxScaleNotFinitePositive) {
  const HostCase c = small_case();
  VerifyProblem p = c.problem();
  p.softmax_scale = std::nanf("");
  ExpectInvalid(Validate(p), "softmax_scale", "nan");
  p.softmax_scale = std::numeric_limits<float>::infinity();
  ExpectInvalid(Validate(p), "softmax_scale", "inf");
  p.softmax_scale = 0.f;
  ExpectInvalid(Validate(p), "softmax_scale", "= 0");
  p.softmax_scale = -0.5f;
  ExpectInvalid(Validate(p), "softmax_scale", "-0.5");
}

TEST(ValidateProblem, NullArraysWithRequests) {
  const HostCase c = small_case();
  VerifyProblem p = c.problem();
  p.qo_indptr = nullptr;
  ExpectInvalid(Validate(p), "qo_indptr", "batch_size = 3");
  p = c.problem();
  p.kv_len = nullptr;
  ExpectInvalid(Validate(p), "kv_len", "batch_size = 3");
  p = c.problem();
  p.kv_page_indptr = nullptr;
  ExpectInvalid(Validate(p), "kv_page_indptr", "batch_size = 3");
  p = c.problem();
  p.kv_page_indices = nullptr;
  ExpectInvalid(Validate(p), "kv_page_indices", "15 pages");
  p = c.problem();
  p.parents = nullptr;
  ExpectInvalid(Validate(p), "parents", "8 tree nodes");
}

TEST(ValidateProblem, QoIndptrMustStartAtZero) {
  HostCase c = small_case();
  c.qo_indptr[0] = 1;
  ExpectInvalid(Validate(c.problem()), "qo_indptr", "qo_indptr[0] = 1");
}

TEST(ValidateProblem, QoIndptrMustNotDecrease) {
  HostCase c = small_case();
  c.qo_indptr = {0, 5, 4, 8};  // request 1 would have T = -1
  ExpectInvalid(Validate(c.problem()), "qo_indptr", "request 1: qo_indptr[2] = 4");
}

TEST(ValidateProblem, KvPageIndptrMustStartAtZero) {
  HostCase c = small_case();
  c.kv_page_indptr[0] = 2;
  ExpectInvalid(Validate(c.problem()), "kv_page_indptr", "kv_page_indptr[0] = 2");
}

TEST(ValidateProblem, KvPageIndptrMustNotDecrease) {
  HostCase c = small_case();
  c.kv_page_indptr[2] = 10;  // request 1: 11 -> 10
  ExpectInvalid(Validate(c.problem()), "kv_page_indptr", "request 1: kv_page_indptr[2] = 10");
}

TEST(ValidateProblem, TreeOverMaxTreeSize) {
  const HostCase c = make_case(CaseSpec{.name = "big tree",
                                        .num_heads = 1,
                                        .tree_sizes = {2, kMaxTreeSize + 1},
                                        .prefix_lens = {3, 5},
                                        .page_size = 128,
                                        .shape = testing::TreeShape::kChain});
  ExpectInvalid(Validate(c.problem()), "qo_indptr",
                "request 1: tree size T = " + std::to_string(kMaxTreeSize + 1));
}

TEST(ValidateProblem, KvLenBelowTreeSize) {
  HostCase c = small_case();
  c.kv_len[2] = 2;  // T_2 = 3
  ExpectInvalid(Validate(c.problem()), "kv_len", "request 2: kv_len = 2 with tree size T = 3");
  c.kv_len[2] = -1;
  ExpectInvalid(Validate(c.problem()), "kv_len", "request 2: kv_len = -1");
}

TEST(ValidateProblem, KvLenBeyondItsPages) {
  HostCase c = small_case();
  c.kv_len[0] = 45;  // 11 pages of 4 hold 44 tokens
  ExpectInvalid(Validate(c.problem()), "kv_len", "request 0: kv_len = 45 with 11 pages of 4");
}

TEST(ValidateProblem, PageIndexOutOfRange) {
  HostCase c = small_case();
  c.kv_page_indices[12] = static_cast<int32_t>(c.num_pages);  // request 1's second page
  ExpectInvalid(Validate(c.problem()), "kv_page_indices",
                "request 1: kv_page_indices[12] = " + std::to_string(c.num_pages));
  c = small_case();
  c.kv_page_indices[0] = -1;
  ExpectInvalid(Validate(c.problem()), "kv_page_indices", "request 0: kv_page_indices[0] = -1");
}

TEST(ValidateProblem, RootMustHaveParentMinusOne) {
  HostCase c = small_case();
  c.parents[5] = 0;  // request 2's root (rows 5..7)
  ExpectInvalid(Validate(c.problem()), "parents", "request 2 node 0: parent = 0 (parents[5])");
}

TEST(ValidateProblem, ParentMustBeAnEarlierNode) {
  HostCase c = small_case();
  c.parents[3] = 3;  // request 0 node 3 is its own parent
  ExpectInvalid(Validate(c.problem()), "parents", "request 0 node 3: parent = 3");
  c = small_case();
  c.parents[7] = 4;  // request 2 node 2 points at a later node index
  ExpectInvalid(Validate(c.problem()), "parents", "request 2 node 2: parent = 4 (parents[7])");
  c = small_case();
  c.parents[2] = -1;  // a second root in request 0
  ExpectInvalid(Validate(c.problem()), "parents", "request 0 node 2: parent = -1");
}

TEST(ValidateProblem, EmptyBatchWithOrWithoutArrays) {
  VerifyProblem p{.batch_size = 0, .num_heads = 8, .page_size = 64, .softmax_scale = 0.1f};
  EXPECT_TRUE(Validate(p).ok());
  const int32_t zero = 0, one = 1;
  p.qo_indptr = &zero;
  p.kv_page_indptr = &zero;
  ProblemSummary s;
  s.total_q = 99;  // must be overwritten
  ASSERT_TRUE(validate_problem(p, &s).ok());
  EXPECT_EQ(s.total_q, 0);
  EXPECT_EQ(s.total_kv, 0);
  p.qo_indptr = &one;
  ExpectInvalid(Validate(p), "qo_indptr", "qo_indptr[0] = 1");
}

TEST(ValidateProblem, EmptyTreesAndEmptyPrefixesAreValid) {
  // Every request with T = 0 (nothing to verify), and requests with L = 0.
  for (auto [trees, prefixes] :
       {std::pair<std::vector<int32_t>, std::vector<int64_t>>{{0, 0}, {10, 0}},
        {{4, 1}, {0, 0}},
        {{1}, {0}}}) {
    const HostCase c =
        make_case(CaseSpec{.name = "empty parts", .tree_sizes = trees, .prefix_lens = prefixes});
    ProblemSummary s;
    EXPECT_TRUE(validate_problem(c.problem(), &s).ok());
    EXPECT_EQ(s.max_prefix, *std::max_element(prefixes.begin(), prefixes.end()));
  }
}

TEST(ValidateProblem, ExtremePageSizesAreValid) {
  for (int32_t page_size : {1, kMaxPageSize}) {
    const HostCase c = small_case(page_size);
    EXPECT_TRUE(Validate(c.problem()).ok()) << "page_size " << page_size;
  }
}

TEST(ValidateProblem, CapacityIsComputedWithoutInt32Overflow) {
  // kv_len = 2^31 - 1 tokens in 2^24 pages of 128: the capacity 2^31 overflows int32.
  constexpr int32_t kPages = 1 << 24;
  const std::vector<int32_t> qo_indptr = {0, 1}, parents = {-1}, page_indptr = {0, kPages};
  const std::vector<int32_t> kv_len = {std::numeric_limits<int32_t>::max()};
  const std::vector<int32_t> pages(kPages, 0);
  VerifyProblem p{.batch_size = 1,
                  .num_heads = 1,
                  .page_size = 128,
                  .num_pages = 1,
                  .softmax_scale = 1.f,
                  .qo_indptr = qo_indptr.data(),
                  .kv_len = kv_len.data(),
                  .kv_page_indptr = page_indptr.data(),
                  .kv_page_indices = pages.data(),
                  .parents = parents.data()};
  ProblemSummary s;
  ASSERT_TRUE(validate_problem(p, &s).ok());
  EXPECT_EQ(s.total_kv, std::numeric_limits<int32_t>::max());
  p.page_size = 64;  // now 2^30 tokens of room
  ExpectInvalid(Validate(p), "kv_len", "kv_len = 2147483647 with 16777216 pages of 64");
}

TEST(ValidateProblem, FailureLeavesSummaryUnchanged) {
  HostCase c = small_case();
  c.parents[1] = 5;
  ProblemSummary s;
  s.total_q = 42;
  EXPECT_FALSE(validate_problem(c.problem(), &s).ok());
  EXPECT_EQ(s.total_q, 42);
}

}  // namespace
}  // namespace treeverify
