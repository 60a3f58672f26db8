// build_tree / build_trees: exact selection against brute-force enumeration, ties, budgets,
// absent candidates and input validation.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "treeverify/ddtree.h"
#include "treeverify/tree.h"

namespace treeverify {
namespace {

struct Draft {
  int32_t depth, top_k;
  std::vector<float> log_probs;
  std::vector<int32_t> token_ids;
  DraftTopK view(int32_t root_token = 3) const {
    return {.depth = depth,
            .top_k = top_k,
            .log_probs = log_probs,
            .token_ids = token_ids,
            .root_token = root_token};
  }
};

// Random sorted rows; `quantum` > 0 rounds log-probs to multiples of it (many ties, zeros
// included); the last `absent` candidates of each row are -inf. Token ids distinct per row.
Draft random_draft(int32_t depth, int32_t top_k, double quantum, int32_t absent,
                   std::mt19937_64& rng) {
  Draft d{.depth = depth, .top_k = top_k, .log_probs = {}, .token_ids = {}};
  std::exponential_distribution<double> expo(1.0);
  for (int32_t row = 0; row < depth; ++row) {
    std::vector<float> lp(top_k);
    for (auto& v : lp) {
      double x = -expo(rng) * 2;
      if (quantum > 0) x = std::round(x / quantum) * quantum;
      v = static_cast<float>(std::min(x, 0.0));
    }
    std::sort(lp.rbegin(), lp.rend());
    for (int32_t c = top_k - absent; c < top_k; ++c) lp[c] = -INFINITY;
    std::vector<int32_t> ids(top_k);
    for (int32_t c = 0; c < top_k; ++c) ids[c] = 1000 * (row + 1) + 7 * c;  // distinct
    std::shuffle(ids.begin(), ids.end(), rng);
    d.log_probs.insert(d.log_probs.end(), lp.begin(), lp.end());
    d.token_ids.insert(d.token_ids.end(), ids.begin(), ids.end());
  }
  return d;
}

// The specification itself: enumerate every finite prefix, order by (score desc, index
// sequence lexicographically asc), keep the first budget - 1, number them in that order.
DraftTree brute_force(const Draft& d, int32_t budget, int32_t root_token) {
  struct Prefix {
    std::vector<int32_t> idx;
    double score;
  };
  std::vector<Prefix> all;
  std::vector<Prefix> level = {{{}, 0.0}};
  for (int32_t depth = 1; depth <= d.depth; ++depth) {
    std::vector<Prefix> next;
    for (const auto& p : level) {
      for (int32_t c = 0; c < d.top_k; ++c) {
        const float lp = d.log_probs[(depth - 1) * d.top_k + c];
        if (lp == -INFINITY) continue;
        Prefix e = p;
        e.idx.push_back(c);
        e.score = p.score + lp;  // the same double accumulation order as the library
        next.push_back(e);
      }
    }
    all.insert(all.end(), next.begin(), next.end());
    level = std::move(next);
  }
  std::sort(all.begin(), all.end(), [](const Prefix& a, const Prefix& b) {
    if (a.score != b.score) return a.score > b.score;
    return a.idx < b.idx;
  });
  all.resize(std::min<size_t>(all.size(), budget - 1));
  DraftTree t{.parents = {-1}, .tokens = {root_token}, .depths = {0}, .scores = {0.0}};
  for (const auto& p : all) {
    int32_t parent = 0;
    if (p.idx.size() > 1) {
      const std::vector<int32_t> up(p.idx.begin(), p.idx.end() - 1);
      parent = 1 + static_cast<int32_t>(std::find_if(all.begin(), all.end(),
                                                     [&](const Prefix& q) { return q.idx == up; }) -
                                        all.begin());
    }
    const int32_t depth = static_cast<int32_t>(p.idx.size());
    t.parents.push_back(parent);
    t.tokens.push_back(d.token_ids[(depth - 1) * d.top_k + p.idx.back()]);
    t.depths.push_back(depth);
    t.scores.push_back(p.score);
  }
  return t;
}

void expect_same_tree(const DraftTree& got, const DraftTree& want, const std::string& what) {
  EXPECT_EQ(got.parents, want.parents) << what;
  EXPECT_EQ(got.tokens, want.tokens) << what;
  EXPECT_EQ(got.depths, want.depths) << what;
  EXPECT_EQ(got.scores, want.scores) << what;
}

TEST(BuildTree, MatchesBruteForceWithAndWithoutTies) {
  std::mt19937_64 rng(21);
  int cases = 0;
  for (int rep = 0; rep < 300; ++rep) {
    const int32_t depth = 1 + rng() % 4, top_k = 1 + rng() % 4;
    const double quantum = rep % 3 == 0 ? 0.0 : (rep % 3 == 1 ? 0.5 : 2.0);
    const int32_t absent = static_cast<int32_t>(rng() % top_k);
    const Draft d = random_draft(depth, top_k, quantum, absent, rng);
    for (int32_t budget : {1, 2, 3, 5, 8, 20, 100, 400}) {
      DraftTree got;
      ASSERT_TRUE(build_tree(d.view(), budget, &got).ok());
      expect_same_tree(got, brute_force(d, budget, 3),
                       "rep " + std::to_string(rep) + " budget " + std::to_string(budget));
      ++cases;
    }
  }
  EXPECT_EQ(cases, 2400);
}

TEST(BuildTree, TieRuleOnHandMadeDrafts) {
  // Equal log-probs per depth: shallower prefixes score higher, then lexicographic order.
  Draft d{.depth = 2, .top_k = 2, .log_probs = {-1, -1, -1, -1}, .token_ids = {10, 11, 20, 21}};
  DraftTree t;
  ASSERT_TRUE(build_tree(d.view(5), 7, &t).ok());
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{5, 10, 11, 20, 21, 20, 21}));
  EXPECT_EQ(t.depths, (std::vector<int32_t>{0, 1, 1, 2, 2, 2, 2}));
  // All log-probs 0: every prefix ties, so the order is lexicographic (depth-first preorder)
  // and a prefix still comes before its extensions.
  d.log_probs = {0, 0, 0, 0};
  ASSERT_TRUE(build_tree(d.view(5), 7, &t).ok());
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, 1, 1, 0, 4, 4}));
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{5, 10, 20, 21, 11, 20, 21}));
  // A deeper prefix can beat a shallow one: (0, 0) = -0.2 beats (1) = -3.
  d.log_probs = {-0.1f, -3, -0.1f, -5};
  ASSERT_TRUE(build_tree(d.view(5), 4, &t).ok());
  EXPECT_EQ(t.parents, (std::vector<int32_t>{-1, 0, 1, 0}));
  EXPECT_EQ(t.tokens, (std::vector<int32_t>{5, 10, 20, 11}));
}

TEST(BuildTree, BudgetOneIsTheRootAlone) {
  std::mt19937_64 rng(22);
  const Draft d = random_draft(16, 8, 0.0, 0, rng);
  DraftTree t;
  ASSERT_TRUE(build_tree(d.view(42), 1, &t).ok());
  EXPECT_EQ(t.parents, std::vector<int32_t>{-1});
  EXPECT_EQ(t.tokens, std::vector<int32_t>{42});
  // No draft depths at all: also only the root, whatever the budget.
  const Draft empty{.depth = 0, .top_k = 4, .log_probs = {}, .token_ids = {}};
  ASSERT_TRUE(build_tree(empty.view(42), 1024, &t).ok());
  EXPECT_EQ(t.parents.size(), 1u);
}

TEST(BuildTree, KLargerThanTheAvailableCandidates) {
  // K = 8 but only 3 candidates per depth are present: every finite prefix fits the budget
  // (3 + 9 + 27 = 39 of them) and no absent candidate appears.
  std::mt19937_64 rng(23);
  const Draft d = random_draft(3, 8, 0.0, 5, rng);
  DraftTree t;
  ASSERT_TRUE(build_tree(d.view(), 1024, &t).ok());
  ASSERT_EQ(t.parents.size(), 40u);
  for (size_t i = 1; i < t.parents.size(); ++i) {
    const int32_t depth = t.depths[i];
    const auto row = d.token_ids.begin() + (depth - 1) * 8;
    const int32_t c = static_cast<int32_t>(std::find(row, row + 8, t.tokens[i]) - row);
    ASSERT_LT(c, 3) << "node " << i << " uses an absent candidate";
  }
  expect_same_tree(t, brute_force(d, 1024, 3), "all prefixes");
}

// Budget 1024 with L = 16, K = 1024: too big to enumerate, so check an optimality
// certificate instead. Best-first selection is optimal iff every prefix that is not selected
// but whose parent is (the boundary) scores no higher than the worst selected prefix, with
// the tie rule deciding equal scores.
TEST(BuildTree, Budget1024IsOptimalAndWellFormed) {
  std::mt19937_64 rng(24);
  for (double quantum : {0.0, 0.25}) {
    const Draft d = random_draft(16, 1024, quantum, 100, rng);
    DraftTree t;
    ASSERT_TRUE(build_tree(d.view(), 1024, &t).ok());
    ASSERT_EQ(t.parents.size(), 1024u);
    ASSERT_TRUE(validate_trees(std::vector<int32_t>{0, 1024}, t.parents).ok());
    std::vector<int32_t> depths;
    ASSERT_TRUE(tree_depths(std::vector<int32_t>{0, 1024}, t.parents, &depths).ok());
    EXPECT_EQ(depths, t.depths);
    std::vector<std::vector<int32_t>> used_children(1024);  // candidate indices per node
    for (int32_t i = 1; i < 1024; ++i) {
      ASSERT_LE(t.scores[i], t.scores[i - 1]) << "selection order is best first";
      const int32_t depth = t.depths[i], p = t.parents[i];
      const auto row = d.token_ids.begin() + (depth - 1) * 1024;
      const int32_t c = static_cast<int32_t>(std::find(row, row + 1024, t.tokens[i]) - row);
      ASSERT_LT(c, 1024 - 100);
      ASSERT_EQ(t.scores[i], t.scores[p] + d.log_probs[(depth - 1) * 1024 + c]);
      used_children[p].push_back(c);
    }
    const double worst = t.scores.back();
    for (int32_t n = 0; n < 1024; ++n) {
      if (t.depths[n] == 16) continue;
      auto& used = used_children[n];
      std::sort(used.begin(), used.end());
      // Children of a node are taken as a prefix of its sorted row: 0, 1, ..., m - 1.
      for (size_t j = 0; j < used.size(); ++j) ASSERT_EQ(used[j], static_cast<int32_t>(j));
      const int32_t next = static_cast<int32_t>(used.size());
      const float lp = d.log_probs[t.depths[n] * 1024 + next];
      if (lp != -INFINITY) ASSERT_LE(t.scores[n] + lp, worst) << "boundary beats a selection";
    }
  }
}

TEST(BuildTree, ValidationErrors) {
  Draft d{.depth = 2, .top_k = 2, .log_probs = {-1, -2, -1, -2}, .token_ids = {1, 2, 3, 4}};
  DraftTree t{.parents = {99}, .tokens = {}, .depths = {}, .scores = {}};
  auto expect_error = [&](const Draft& bad, int32_t budget, const std::string& fragment) {
    const Status s = build_tree(bad.view(), budget, &t);
    ASSERT_FALSE(s.ok()) << fragment;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
    EXPECT_EQ(t.parents, std::vector<int32_t>{99}) << "a failed call must not write";
  };
  expect_error(d, 0, "budget = 0");
  expect_error(d, 1025, "budget = 1025");
  Draft bad = d;
  bad.log_probs = {-2, -1, -1, -2};
  expect_error(bad, 4, "depth 1 candidate 1: -1 after -2");
  bad.log_probs = {0.5f, -1, -1, -2};
  expect_error(bad, 4, "depth 1 candidate 0: log-prob = 0.5");
  bad.log_probs = {-1, -2, NAN, -2};
  expect_error(bad, 4, "depth 2 candidate 0");
  bad = d;
  bad.token_ids = {1, 2, 3, 3};
  expect_error(bad, 4, "depth 2: token id 3 appears twice");
  bad.token_ids = {1, -2, 3, 4};
  expect_error(bad, 4, "depth 1 candidate 1: token id = -2");
  bad = d;
  bad.log_probs.pop_back();
  expect_error(bad, 4, "log_probs");
  bad = d;
  bad.top_k = 0;
  expect_error(bad, 4, "K = 0");
  // A duplicate id on an absent candidate is harmless: absent ids are ignored.
  bad = d;
  bad.log_probs = {-1, -INFINITY, -1, -2};
  bad.token_ids = {1, 1, 3, 4};
  EXPECT_TRUE(build_tree(bad.view(), 4, &t).ok());
}

// A certain token's log-probability rounded just above 0 (float64 1.1e-16, or float32 log(1)
// a few ulps up) is 0, not an error (issue 52): the tree is the one of exact zeros, scores
// included. Past kLogProbRounding a positive value is still refused.
TEST(BuildTree, RoundingOfLogOneIsZero) {
  const Draft zeros{.depth = 2, .top_k = 2, .log_probs = {0, -1, 0, -2}, .token_ids = {1, 2, 3, 4}};
  DraftTree want;
  ASSERT_TRUE(build_tree(zeros.view(), 6, &want).ok());
  for (float tiny : {1.1e-16f, 1e-7f, kLogProbRounding, std::numeric_limits<float>::denorm_min()}) {
    // At the head of a row, and tied with a 0 before it (read as 0, the row stays sorted).
    for (const std::vector<float>& lp :
         {std::vector<float>{tiny, -1, tiny, -2}, std::vector<float>{0, -1, tiny, -2}}) {
      Draft d = zeros;
      d.log_probs = lp;
      DraftTree t;
      const Status s = build_tree(d.view(), 6, &t);
      ASSERT_TRUE(s.ok()) << tiny << ": " << s.to_string();
      EXPECT_EQ(t.parents, want.parents) << tiny;
      EXPECT_EQ(t.tokens, want.tokens) << tiny;
      EXPECT_EQ(t.scores, want.scores) << tiny;
    }
  }
  Draft d = zeros;
  d.log_probs = {0, -1, std::nextafter(kLogProbRounding, 1.f), -2};
  DraftTree t;
  const Status s = build_tree(d.view(), 6, &t);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("depth 2 candidate 0: log-prob = 9.536744e-07 (positive past"),
            std::string::npos)
      << s.message();
  d.log_probs = {0, 1e-7f, -1, -2};  // 0 then a tiny positive: equal as read, sorted
  EXPECT_TRUE(build_tree(d.view(), 6, &t).ok());
}

TEST(BuildTrees, BatchConcatenatesPerRequestTrees) {
  std::mt19937_64 rng(25);
  std::vector<Draft> drafts;
  for (int b = 0; b < 5; ++b) drafts.push_back(random_draft(1 + b * 3, 1 + b * 5, 0.5, b, rng));
  std::vector<DraftTopK> views;
  for (const auto& d : drafts) views.push_back(d.view(static_cast<int32_t>(100 + views.size())));
  const std::vector<int32_t> budgets = {1, 7, 64, 1024, 300};
  DraftTreeBatch batch;
  ASSERT_TRUE(build_trees(views, budgets, &batch).ok());
  ASSERT_TRUE(validate_trees(batch.qo_indptr, batch.parents).ok());
  ASSERT_EQ(batch.qo_indptr.size(), 6u);
  for (size_t b = 0; b < views.size(); ++b) {
    DraftTree t;
    ASSERT_TRUE(build_tree(views[b], budgets[b], &t).ok());
    const auto begin = batch.qo_indptr[b], end = batch.qo_indptr[b + 1];
    EXPECT_EQ(std::vector<int32_t>(batch.parents.begin() + begin, batch.parents.begin() + end),
              t.parents);
    EXPECT_EQ(std::vector<int32_t>(batch.tokens.begin() + begin, batch.tokens.begin() + end),
              t.tokens);
  }
  DraftTreeBatch untouched{.qo_indptr = {7}};
  const std::vector<int32_t> bad_budgets = {1, 7, 0, 4, 4};
  const Status s = build_trees(views, bad_budgets, &untouched);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("request 2"), std::string::npos) << s.message();
  EXPECT_EQ(untouched.qo_indptr, std::vector<int32_t>{7});
  EXPECT_FALSE(build_trees(views, std::vector<int32_t>{1}, &batch).ok());
  ASSERT_TRUE(build_trees({}, {}, &batch).ok());
  EXPECT_EQ(batch.qo_indptr, std::vector<int32_t>{0});
}

}  // namespace
}  // namespace treeverify
