// verify_greedy and verify_sampling: hand-made trees, equivalence with greedy decoding, and a
// statistical test that rejection sampling reproduces the target distribution exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "random_trees.h"
#include "treeverify/ddtree.h"

namespace treeverify {
namespace {

std::vector<int32_t> path_of(const AcceptedPaths& a, size_t b) {
  return {a.nodes.begin() + a.indptr[b], a.nodes.begin() + a.indptr[b + 1]};
}

TEST(VerifyGreedy, HandMadeTrees) {
  //        0:5
  //      /     \.
  //    1:7     2:8
  //   /   \      \.
  // 3:9   4:7    5:9
  const std::vector<int32_t> parents = {-1, 0, 0, 1, 1, 2};
  const std::vector<int32_t> tokens = {5, 7, 8, 9, 7, 9};
  const std::vector<int32_t> one = {0, 6};
  AcceptedPaths a;
  // Full acceptance down to a leaf: the bonus is the target's argmax at the leaf.
  ASSERT_TRUE(verify_greedy(one, parents, tokens, std::vector<int32_t>{8, 0, 9, 0, 0, 4}, &a).ok());
  EXPECT_EQ(path_of(a, 0), (std::vector<int32_t>{0, 2, 5}));
  EXPECT_EQ(a.bonus_tokens, std::vector<int32_t>{4});
  // Rejection at the root: only the bonus is emitted.
  ASSERT_TRUE(verify_greedy(one, parents, tokens, std::vector<int32_t>{6, 7, 9, 0, 0, 4}, &a).ok());
  EXPECT_EQ(path_of(a, 0), std::vector<int32_t>{0});
  EXPECT_EQ(a.bonus_tokens, std::vector<int32_t>{6});
  // Stop in the middle: node 1's argmax 8 matches neither child.
  ASSERT_TRUE(verify_greedy(one, parents, tokens, std::vector<int32_t>{7, 8, 9, 0, 0, 4}, &a).ok());
  EXPECT_EQ(path_of(a, 0), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(a.bonus_tokens, std::vector<int32_t>{8});
  // Two siblings with the same token: the first in node order wins.
  const std::vector<int32_t> same = {5, 7, 7, 9, 7, 9};
  ASSERT_TRUE(verify_greedy(one, parents, same, std::vector<int32_t>{7, 7, 9, 0, 0, 4}, &a).ok());
  EXPECT_EQ(path_of(a, 0), (std::vector<int32_t>{0, 1, 4}));
  EXPECT_EQ(a.bonus_tokens, std::vector<int32_t>{0});
}

TEST(VerifyGreedy, BatchWithEmptyRequestsAndErrors) {
  // Requests: a 2-chain, an empty one, a single root.
  const std::vector<int32_t> qo = {0, 2, 2, 3}, parents = {-1, 0, -1}, tokens = {1, 2, 3};
  AcceptedPaths a;
  ASSERT_TRUE(verify_greedy(qo, parents, tokens, std::vector<int32_t>{2, 5, 6}, &a).ok());
  EXPECT_EQ(a.indptr, (std::vector<int32_t>{0, 2, 2, 3}));
  EXPECT_EQ(a.nodes, (std::vector<int32_t>{0, 1, 0}));
  EXPECT_EQ(a.bonus_tokens, (std::vector<int32_t>{5, -1, 6}));
  ASSERT_TRUE(verify_greedy(std::vector<int32_t>{0}, {}, {}, {}, &a).ok());
  EXPECT_EQ(a.indptr, std::vector<int32_t>{0});
  const Status s = verify_greedy(qo, parents, tokens, std::vector<int32_t>{2, 5}, &a);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("target_argmax"), std::string::npos) << s.message();
  EXPECT_EQ(a.indptr, std::vector<int32_t>{0}) << "a failed call must not write";
  EXPECT_FALSE(verify_greedy(qo, std::vector<int32_t>{-1, 1, -1}, tokens, tokens, &a).ok());
}

// A deterministic "target model": its argmax after a context is a hash of the context.
int32_t target_next(const std::vector<int32_t>& context, int32_t vocab) {
  uint64_t h = 1469598103934665603ull;
  for (int32_t t : context) h = (h ^ static_cast<uint64_t>(t)) * 1099511628211ull;
  return static_cast<int32_t>((h >> 29) % vocab);
}

// What verify_greedy emits is exactly the start of greedy decoding, and it stops only where
// no child continues it.
TEST(VerifyGreedy, EmitsWhatGreedyDecodingEmits) {
  std::mt19937_64 rng(31);
  const int32_t vocab = 3;  // small, so that many draft tokens match
  int64_t total_accepted = 0;
  for (int rep = 0; rep < 300; ++rep) {
    const int32_t n = 1 + static_cast<int32_t>(rng() % 200);
    const auto parents = testing::make_tree(test::kAllShapes[rep % 5], n, rng);
    std::vector<int32_t> tokens(n), argmax(n);
    std::vector<std::vector<int32_t>> context(n);
    for (int32_t i = 0; i < n; ++i) {
      tokens[i] = static_cast<int32_t>(rng() % vocab);
      context[i] = i == 0 ? std::vector<int32_t>{} : context[parents[i]];
      context[i].push_back(tokens[i]);
      argmax[i] = target_next(context[i], vocab);
    }
    AcceptedPaths a;
    ASSERT_TRUE(verify_greedy(std::vector<int32_t>{0, n}, parents, tokens, argmax, &a).ok());
    const auto path = path_of(a, 0);
    std::vector<int32_t> emitted, greedy = {tokens[0]};
    for (size_t k = 1; k < path.size(); ++k) emitted.push_back(tokens[path[k]]);
    emitted.push_back(a.bonus_tokens[0]);
    while (greedy.size() <= emitted.size()) greedy.push_back(target_next(greedy, vocab));
    ASSERT_EQ(emitted, std::vector<int32_t>(greedy.begin() + 1, greedy.end())) << "rep " << rep;
    for (int32_t i = 1; i < n; ++i) {
      ASSERT_FALSE(parents[i] == path.back() && tokens[i] == a.bonus_tokens[0])
          << "stopped although child " << i << " matches";
    }
    total_accepted += static_cast<int64_t>(path.size()) - 1;
  }
  EXPECT_GT(total_accepted, 300) << "the test should exercise acceptance, not only rejection";
}

// ---- verify_sampling: statistical test ----------------------------------------------------

constexpr int32_t kV = 4;
using Dist = std::array<double, kV>;
// The target: p1 for the first token, P2[x] for the token after x, uniform after that.
constexpr Dist kP1 = {0.4, 0.3, 0.2, 0.1};
constexpr std::array<Dist, kV> kP2 = {
    {{0.1, 0.6, 0.2, 0.1}, {0.25, 0.25, 0.25, 0.25}, {0.7, 0.1, 0.1, 0.1}, {0.05, 0.05, 0.1, 0.8}}};
// The drafter: deliberately far from the target.
constexpr Dist kQ1 = {0.1, 0.2, 0.3, 0.4};
constexpr std::array<Dist, kV> kQ2 = {
    {{0.4, 0.1, 0.4, 0.1}, {0.1, 0.5, 0.3, 0.1}, {0.3, 0.3, 0.2, 0.2}, {0.2, 0.2, 0.5, 0.1}}};
constexpr Dist kUniform = {0.25, 0.25, 0.25, 0.25};

int32_t draw(const Dist& d, std::mt19937_64& rng) {
  const double u = static_cast<double>(rng() >> 11) * 0x1p-53;
  double acc = 0;
  for (int32_t t = 0; t < kV; ++t) {
    acc += d[t];
    if (u < acc) return t;
  }
  return kV - 1;
}

// Children of a node drawn as the scheme says: k of them from q.
std::vector<int32_t> draw_children(DraftScheme scheme, const Dist& q, int k, std::mt19937_64& rng) {
  std::vector<int32_t> out;
  if (scheme == DraftScheme::kDeterministic) {
    // The k most probable draft tokens (ties to the smaller id): a top-K expansion.
    std::vector<int32_t> ids = {0, 1, 2, 3};
    std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return q[a] > q[b]; });
    return {ids.begin(), ids.begin() + k};
  }
  Dist rest = q;
  for (int j = 0; j < k; ++j) {
    double total = 0;
    for (double v : rest) total += v;
    Dist norm;
    for (int32_t t = 0; t < kV; ++t) norm[t] = rest[t] / total;
    const int32_t x = draw(norm, rng);
    out.push_back(x);
    if (scheme == DraftScheme::kSampledWithoutReplacement) rest[x] = 0;
  }
  return out;
}

struct Trial {
  std::vector<int32_t> parents, tokens;
  std::vector<float> target, draft;
  void add(int32_t parent, int32_t token, const Dist& p, const Dist& q) {
    parents.push_back(parent);
    tokens.push_back(token);
    target.insert(target.end(), p.begin(), p.end());
    draft.insert(draft.end(), q.begin(), q.end());
  }
};

// A batch of requests, each a two-level tree (2 children under the root, 2 under each child)
// drafted with `draft_scheme`; returns the per-request trees concatenated.
Trial make_batch(DraftScheme draft_scheme, int requests, std::mt19937_64& rng,
                 std::vector<int32_t>* qo) {
  Trial t;
  qo->assign(1, 0);
  for (int r = 0; r < requests; ++r) {
    const int32_t base = static_cast<int32_t>(t.parents.size());
    t.add(-1, 0, kP1, kQ1);
    for (int32_t x : draw_children(draft_scheme, kQ1, 2, rng)) {
      const int32_t child = static_cast<int32_t>(t.parents.size()) - base;
      t.add(0, x, kP2[x], kQ2[x]);
      for (int32_t y : draw_children(draft_scheme, kQ2[x], 2, rng)) {
        t.add(child, y, kUniform, kUniform);
      }
    }
    qo->push_back(static_cast<int32_t>(t.parents.size()));
  }
  return t;
}

// Joint counts of the first two emitted tokens over `trials` steps. When a step emits only
// the bonus x, the second token is drawn from the target P2[x] as the next step would.
enum class Verifier { kSampling, kGreedy };
std::array<std::array<int64_t, kV>, kV> emitted_counts(DraftScheme draft_scheme,
                                                       DraftScheme verify_scheme, Verifier verifier,
                                                       int trials, uint64_t seed) {
  std::mt19937_64 tree_rng(seed), verify_rng(seed + 1), next_rng(seed + 2);
  std::array<std::array<int64_t, kV>, kV> counts{};
  constexpr int kBatch = 1000;
  for (int done = 0; done < trials; done += kBatch) {
    std::vector<int32_t> qo;
    const Trial t = make_batch(draft_scheme, kBatch, tree_rng, &qo);
    AcceptedPaths a;
    if (verifier == Verifier::kSampling) {
      const SamplingInputs in{.vocab_size = kV,
                              .target_probs = t.target,
                              .draft_probs = t.draft,
                              .scheme = verify_scheme};
      EXPECT_TRUE(verify_sampling(qo, t.parents, t.tokens, in, &verify_rng, &a).ok());
    } else {  // plain greedy acceptance: a wrong algorithm for sampling
      std::vector<int32_t> argmax(t.parents.size());
      for (size_t i = 0; i < argmax.size(); ++i) {
        const float* row = &t.target[i * kV];
        argmax[i] = static_cast<int32_t>(std::max_element(row, row + kV) - row);
      }
      EXPECT_TRUE(verify_greedy(qo, t.parents, t.tokens, argmax, &a).ok());
    }
    for (int r = 0; r < kBatch; ++r) {
      std::vector<int32_t> emitted;
      for (int32_t k = a.indptr[r] + 1; k < a.indptr[r + 1]; ++k) {
        emitted.push_back(t.tokens[qo[r] + a.nodes[k]]);
      }
      emitted.push_back(a.bonus_tokens[r]);
      if (emitted.size() < 2) emitted.push_back(draw(kP2[emitted[0]], next_rng));
      ++counts[emitted[0]][emitted[1]];
    }
  }
  return counts;
}

// Pearson chi-square statistics of the first token (3 degrees of freedom) and of the first
// two (15) against the target.
struct ChiSquare {
  double first = 0, joint = 0;
};
ChiSquare chi_square(const std::array<std::array<int64_t, kV>, kV>& counts, int trials) {
  ChiSquare c;
  for (int32_t x = 0; x < kV; ++x) {
    int64_t row = 0;
    for (int32_t y = 0; y < kV; ++y) {
      const double expected = trials * kP1[x] * kP2[x][y];
      c.joint += (counts[x][y] - expected) * (counts[x][y] - expected) / expected;
      row += counts[x][y];
    }
    const double expected = trials * kP1[x];
    c.first += (row - expected) * (row - expected) / expected;
  }
  return c;
}

// Chi-square quantile with upper tail ~1e-6 (Wilson-Hilferty, z = 4.75): a correct sampler
// exceeds it about once in a million seeds; the seeds are fixed, so the test is deterministic.
double chi_square_limit(int dof) {
  const double a = 2.0 / (9.0 * dof);
  return dof * std::pow(1 - a + 4.75 * std::sqrt(a), 3);
}

constexpr int kTrials = 200000;

TEST(VerifySampling, KeepsTheTargetDistributionForEveryScheme) {
  for (DraftScheme scheme : {DraftScheme::kDeterministic, DraftScheme::kSampledWithReplacement,
                             DraftScheme::kSampledWithoutReplacement}) {
    const auto counts = emitted_counts(scheme, scheme, Verifier::kSampling, kTrials, 41);
    const ChiSquare c = chi_square(counts, kTrials);
    EXPECT_LT(c.first, chi_square_limit(3)) << "scheme " << static_cast<int>(scheme);
    EXPECT_LT(c.joint, chi_square_limit(15)) << "scheme " << static_cast<int>(scheme);
  }
}

// The same statistic rejects wrong algorithms, so the test above has power.
TEST(VerifySampling, TheStatisticCatchesWrongAlgorithms) {
  // Plain greedy acceptance.
  auto c = chi_square(emitted_counts(DraftScheme::kDeterministic, DraftScheme::kDeterministic,
                                     Verifier::kGreedy, kTrials, 42),
                      kTrials);
  EXPECT_GT(c.joint, 10 * chi_square_limit(15));
  // Top-K trees verified as if their children had been sampled from q.
  c = chi_square(emitted_counts(DraftScheme::kDeterministic, DraftScheme::kSampledWithReplacement,
                                Verifier::kSampling, kTrials, 43),
                 kTrials);
  EXPECT_GT(c.joint, 10 * chi_square_limit(15));
  // Without-replacement drafts verified without adjusting q after each rejection.
  c = chi_square(
      emitted_counts(DraftScheme::kSampledWithoutReplacement, DraftScheme::kSampledWithReplacement,
                     Verifier::kSampling, kTrials, 44),
      kTrials);
  EXPECT_GT(c.joint, chi_square_limit(15));
}

TEST(VerifySampling, SameSeedSameResultAndPerfectDraftAcceptsAll) {
  // A drafter equal to the target is always accepted: min(1, p/q) = 1.
  const std::vector<int32_t> qo = {0, 3}, parents = {-1, 0, 1}, tokens = {0, 2, 1};
  std::vector<float> probs = {0.2f, 0.3f, 0.5f, 0.1f, 0.1f, 0.8f, 0.6f, 0.2f, 0.2f};
  const SamplingInputs in{.vocab_size = 3,
                          .target_probs = probs,
                          .draft_probs = probs,
                          .scheme = DraftScheme::kSampledWithReplacement};
  std::mt19937_64 rng(7), rng2(7);
  for (int rep = 0; rep < 100; ++rep) {
    AcceptedPaths a, b;
    ASSERT_TRUE(verify_sampling(qo, parents, tokens, in, &rng, &a).ok());
    ASSERT_TRUE(verify_sampling(qo, parents, tokens, in, &rng2, &b).ok());
    EXPECT_EQ(a.nodes, (std::vector<int32_t>{0, 1, 2}));
    EXPECT_EQ(a.bonus_tokens, b.bonus_tokens);
  }
}

TEST(VerifySampling, ValidationErrors) {
  const std::vector<int32_t> qo = {0, 2}, parents = {-1, 0}, tokens = {0, 1};
  std::vector<float> p = {0.5f, 0.5f, 0.5f, 0.5f}, q = {1.f, 0.f, 0.5f, 0.5f};
  std::mt19937_64 rng(1);
  AcceptedPaths a{.indptr = {9}};
  auto expect_error = [&](const SamplingInputs& in, std::span<const int32_t> toks,
                          const std::string& fragment) {
    const Status s = verify_sampling(qo, parents, toks, in, &rng, &a);
    ASSERT_FALSE(s.ok()) << fragment;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
    EXPECT_EQ(a.indptr, std::vector<int32_t>{9});
  };
  SamplingInputs in{.vocab_size = 2,
                    .target_probs = p,
                    .draft_probs = q,
                    .scheme = DraftScheme::kSampledWithReplacement};
  // Child token 1 has draft probability 0 at the root: it cannot have been drawn.
  expect_error(in, tokens, "child 1 has token 1 of draft probability 0");
  expect_error(in, std::vector<int32_t>{0, 2}, "token 2, V = 2");
  std::vector<float> negative = {0.5f, -0.5f, 0.5f, 0.5f};
  in.target_probs = negative;
  expect_error(in, tokens, "row 0 token 1: probability -0.5");
  std::vector<float> zeros = {0.f, 0.f, 0.5f, 0.5f};
  in.target_probs = zeros;
  expect_error(in, tokens, "row 0: all probabilities are zero");
  in.target_probs = p;
  in.draft_probs = {};
  expect_error(in, tokens, "draft_probs");
  in.scheme = DraftScheme::kDeterministic;  // needs no draft distribution
  EXPECT_TRUE(verify_sampling(qo, parents, tokens, in, &rng, &a).ok());
  EXPECT_FALSE(verify_sampling(qo, parents, tokens, in, nullptr, &a).ok());
}

}  // namespace
}  // namespace treeverify
