// The lossless demo (src/demo/demo.h): speculative decoding with DDTree trees through
// treeverify must emit exactly the tokens of plain greedy decoding, and the trees must really
// be accepting several tokens per step (otherwise the check would be vacuous).
#include <gtest/gtest.h>

#include "demo/demo.h"

namespace treeverify::demo {
namespace {

DemoOptions options(Backend backend, int32_t page_size, uint64_t seed) {
  DemoOptions o;
  o.backend = backend;
  o.page_size = page_size;
  o.seed = seed;
  o.tokens = 48;
  return o;
}

std::string describe(const DemoReport& r) {
  return ::testing::PrintToString(r.speculative) + " vs greedy " +
         ::testing::PrintToString(r.greedy) + ", first mismatch " +
         std::to_string(r.first_mismatch) + " margin " + std::to_string(r.mismatch_margin);
}

// cpu-reference and the dense loop both sum in float64 in sequence order, so every path is
// bit-identical (demo.cpp explains why): the logits must agree exactly, not just the tokens.
TEST(Demo, ReferenceBackendIsBitExact) {
  for (int32_t page_size : {1, 16}) {
    for (uint64_t seed : {1, 2, 3}) {
      SCOPED_TRACE(::testing::Message() << "page_size " << page_size << " seed " << seed);
      DemoReport r;
      const Status s = run_demo(options(Backend::kCpuReference, page_size, seed), &r);
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_TRUE(r.passed) << describe(r);
      EXPECT_EQ(r.speculative, r.greedy);
      EXPECT_EQ(r.greedy, r.dense);
      EXPECT_EQ(r.max_logit_diff, 0.0);
      EXPECT_EQ(r.max_logit_diff_dense, 0.0);
      EXPECT_GT(r.acceptance_length, 1.5) << "the trees accept too little to test anything";
      EXPECT_LT(r.steps, 48);
    }
  }
}

// cpu-fast sums in fp32 in an order that depends on the prefix length, so logits differ by
// rounding (~1e-3): tokens must still agree, unless greedy itself was at a near-tie, which
// the report must show (margin at the mismatch within the measured logit noise).
TEST(Demo, FastBackendMatchesGreedy) {
  for (int32_t page_size : {1, 16, 128}) {
    for (uint64_t seed : {1, 2}) {
      SCOPED_TRACE(::testing::Message() << "page_size " << page_size << " seed " << seed);
      DemoReport r;
      const Status s = run_demo(options(Backend::kCpuFast, page_size, seed), &r);
      ASSERT_TRUE(s.ok()) << s.to_string();
      if (!r.passed) {
        const double noise = std::max(r.max_logit_diff, r.max_logit_diff_dense);
        EXPECT_LT(r.mismatch_margin, 4 * noise)
            << "a mismatch that is not a near-tie: " << describe(r);
      }
      EXPECT_LT(r.max_logit_diff, 0.1);  // a wrong position, mask or commit moves logits O(1)
      EXPECT_GT(r.acceptance_length, 1.5);
    }
  }
}

// Budget 1 is plain decoding (the root alone): one token per step. A large budget and deep
// drafts exercise big trees and long accepted paths with overlapping commits.
TEST(Demo, BudgetExtremes) {
  DemoOptions o = options(Backend::kCpuReference, 4, 7);
  o.budget = 1;
  o.tokens = 12;
  DemoReport r;
  ASSERT_TRUE(run_demo(o, &r).ok());
  EXPECT_TRUE(r.passed) << describe(r);
  EXPECT_EQ(r.steps, 12);
  o.budget = 128;
  o.draft_depth = 12;
  o.draft_top_k = 8;
  o.tokens = 40;
  ASSERT_TRUE(run_demo(o, &r).ok());
  EXPECT_TRUE(r.passed) << describe(r);
  EXPECT_GT(r.acceptance_length, 2.0);
}

TEST(Demo, BadOptionsAreErrors) {
  DemoOptions o = options(Backend::kCpuFast, 16, 1);
  o.draft_top_k = 100000;
  DemoReport r;
  EXPECT_FALSE(run_demo(o, &r).ok());
  o = options(Backend::kCpuFast, 3, 1);
  EXPECT_FALSE(run_demo(o, &r).ok());
  // Each named in its error, before anything is allocated (the CLI crashed on these).
  auto expect_named = [&](const char* arg, auto&& mutate) {
    DemoOptions bad = options(Backend::kCpuFast, 16, 1);
    mutate(bad);
    const Status s = run_demo(bad, &r);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << arg;
    EXPECT_NE(s.message().find(arg), std::string::npos) << s.message();
  };
  expect_named("layers", [](DemoOptions& x) { x.model.layers = 0; });
  expect_named("layers", [](DemoOptions& x) { x.model.layers = -1; });
  expect_named("page_size", [](DemoOptions& x) { x.page_size = 0; });
  expect_named("heads", [](DemoOptions& x) { x.model.heads = -1; });
  expect_named("heads", [](DemoOptions& x) { x.model.heads = 129; });
  expect_named("vocab", [](DemoOptions& x) { x.model.vocab = 0; });
  expect_named("tokens", [](DemoOptions& x) { x.tokens = 2147483647; });
  expect_named("budget", [](DemoOptions& x) { x.budget = 0; });
}

}  // namespace
}  // namespace treeverify::demo
