// Acceptance of a verified draft tree: greedy walk and lossless rejection sampling, see
// include/treeverify/ddtree.h for the contract.
#include <algorithm>
#include <cmath>
#include <utility>
#include <vector>

#include "core/check.h"
#include "treeverify/ddtree.h"
#include "treeverify/tree.h"

namespace treeverify {
namespace {

// Children of every node of one request in node order, as CSR over local indices.
struct Children {
  std::vector<int32_t> indptr, nodes;
  std::span<const int32_t> of(int32_t u) const {
    return {nodes.data() + indptr[u], nodes.data() + indptr[u + 1]};
  }
};

Children children_of(std::span<const int32_t> parents) {
  const int32_t n = static_cast<int32_t>(parents.size());
  Children ch{.indptr = std::vector<int32_t>(n + 1, 0), .nodes = std::vector<int32_t>(n)};
  for (int32_t i = 1; i < n; ++i) ++ch.indptr[parents[i] + 1];
  for (int32_t u = 0; u < n; ++u) ch.indptr[u + 1] += ch.indptr[u];
  std::vector<int32_t> fill(ch.indptr.begin(), ch.indptr.end() - 1);
  for (int32_t i = 1; i < n; ++i) ch.nodes[fill[parents[i]]++] = i;  // i ascending: node order
  return ch;
}

Status validate_tokens(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                       std::span<const int32_t> tokens, std::span<const int32_t> per_node,
                       const char* per_node_name) {
  TV_RETURN_IF_ERROR(validate_trees(qo_indptr, parents));
  TV_REQUIRE(tokens.size() == parents.size(), "tokens", "has {} entries for {} nodes",
             tokens.size(), parents.size());
  TV_REQUIRE(per_node.size() == parents.size(), per_node_name, "has {} entries for {} nodes",
             per_node.size(), parents.size());
  return Status::Ok();
}

// Uniform in [0, 1) from the top 53 bits: the same numbers on every standard library.
double uniform(std::mt19937_64* rng) { return static_cast<double>((*rng)() >> 11) * 0x1p-53; }

// Inverse-CDF draw from a non-negative vector with a positive sum.
int32_t sample(const std::vector<double>& p, std::mt19937_64* rng) {
  double total = 0;
  for (double v : p) total += v;
  const double u = uniform(rng) * total;
  double acc = 0;
  int32_t last_positive = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    if (p[t] <= 0) continue;
    acc += p[t];
    last_positive = static_cast<int32_t>(t);
    if (u < acc) return last_positive;
  }
  return last_positive;  // u landed in the rounding gap at the top
}

// Copies a distribution row into doubles and normalizes it.
void load_row(std::span<const float> row, std::vector<double>* out) {
  out->assign(row.begin(), row.end());
  double total = 0;
  for (double v : *out) total += v;
  for (double& v : *out) v /= total;
}

Status validate_distributions(std::span<const float> probs, size_t rows, int32_t vocab,
                              const char* name) {
  TV_REQUIRE(probs.size() == rows * vocab, name, "has {} entries, total_q * V = {}", probs.size(),
             rows * vocab);
  for (size_t r = 0; r < rows; ++r) {
    double total = 0;
    for (int32_t t = 0; t < vocab; ++t) {
      const float v = probs[r * vocab + t];
      TV_REQUIRE(std::isfinite(v) && v >= 0.f, name, "row {} token {}: probability {}", r, t, v);
      total += v;
    }
    TV_REQUIRE(total > 0, name, "row {}: all probabilities are zero", r);
  }
  return Status::Ok();
}

}  // namespace

Status verify_greedy(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                     std::span<const int32_t> tokens, std::span<const int32_t> target_argmax,
                     AcceptedPaths* accepted) {
  TV_RETURN_IF_ERROR(validate_tokens(qo_indptr, parents, tokens, target_argmax, "target_argmax"));
  const size_t batch = qo_indptr.size() - 1;
  AcceptedPaths result{.indptr = {0}, .nodes = {}, .bonus_tokens = std::vector<int32_t>(batch)};
  for (size_t b = 0; b < batch; ++b) {
    const int32_t begin = qo_indptr[b], tree_size = qo_indptr[b + 1] - begin;
    int32_t bonus = -1;
    if (tree_size > 0) {
      const Children ch = children_of(parents.subspan(begin, tree_size));
      int32_t u = 0;
      result.nodes.push_back(u);
      for (;;) {
        const int32_t want = target_argmax[begin + u];
        const auto kids = ch.of(u);
        const auto hit = std::find_if(kids.begin(), kids.end(),
                                      [&](int32_t c) { return tokens[begin + c] == want; });
        if (hit == kids.end()) break;
        u = *hit;
        result.nodes.push_back(u);
      }
      bonus = target_argmax[begin + u];
    }
    result.bonus_tokens[b] = bonus;
    result.indptr.push_back(static_cast<int32_t>(result.nodes.size()));
  }
  *accepted = std::move(result);
  return Status::Ok();
}

Status verify_sampling(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                       std::span<const int32_t> tokens, const SamplingInputs& inputs,
                       std::mt19937_64* rng, AcceptedPaths* accepted) {
  TV_RETURN_IF_ERROR(validate_trees(qo_indptr, parents));
  TV_REQUIRE(tokens.size() == parents.size(), "tokens", "has {} entries for {} nodes",
             tokens.size(), parents.size());
  TV_REQUIRE(rng != nullptr, "rng", "is null");
  const int32_t vocab = inputs.vocab_size;
  TV_REQUIRE(vocab >= 1, "vocab_size", "V = {}", vocab);
  const bool deterministic = inputs.scheme == DraftScheme::kDeterministic;
  TV_REQUIRE(deterministic || inputs.scheme == DraftScheme::kSampledWithReplacement ||
                 inputs.scheme == DraftScheme::kSampledWithoutReplacement,
             "scheme", "scheme = {}", static_cast<int32_t>(inputs.scheme));
  for (size_t i = 0; i < tokens.size(); ++i) {
    TV_REQUIRE(tokens[i] >= 0 && tokens[i] < vocab, "tokens", "node row {}: token {}, V = {}", i,
               tokens[i], vocab);
  }
  TV_RETURN_IF_ERROR(
      validate_distributions(inputs.target_probs, parents.size(), vocab, "target_probs"));
  if (!deterministic) {
    TV_RETURN_IF_ERROR(
        validate_distributions(inputs.draft_probs, parents.size(), vocab, "draft_probs"));
  }

  const size_t batch = qo_indptr.size() - 1;
  AcceptedPaths result{.indptr = {0}, .nodes = {}, .bonus_tokens = std::vector<int32_t>(batch)};
  std::vector<double> p, q, residual;  // reused across nodes: no allocation per rejection
  for (size_t b = 0; b < batch; ++b) {
    const int32_t begin = qo_indptr[b], tree_size = qo_indptr[b + 1] - begin;
    int32_t bonus = -1;
    if (tree_size > 0) {
      const Children ch = children_of(parents.subspan(begin, tree_size));
      int32_t u = 0;
      result.nodes.push_back(u);
      for (;;) {
        const size_t row = static_cast<size_t>(begin + u) * vocab;
        load_row(inputs.target_probs.subspan(row, vocab), &p);
        if (!deterministic) load_row(inputs.draft_probs.subspan(row, vocab), &q);
        int32_t next = -1;
        for (int32_t c : ch.of(u)) {
          const int32_t x = tokens[begin + c];
          // Deterministic children are point masses: q(x) = 1 and max(p - q, 0) is p with x
          // zeroed.
          const double qx = deterministic ? 1.0 : q[x];
          TV_REQUIRE(qx > 0, "draft_probs",
                     "request {} node {}: child {} has token {} of draft probability 0", b, u, c,
                     x);
          if (uniform(rng) < std::min(1.0, p[x] / qx)) {
            next = c;
            break;
          }
          // Rejected: the residual keeps exactly the target mass the draft did not cover.
          residual.assign(p.begin(), p.end());
          double total = 0;
          for (int32_t t = 0; t < vocab; ++t) {
            const double qt = deterministic ? (t == x ? 1.0 : 0.0) : q[t];
            residual[t] = std::max(residual[t] - qt, 0.0);
            total += residual[t];
          }
          if (total > 0) {
            for (int32_t t = 0; t < vocab; ++t) p[t] = residual[t] / total;
          }
          if (inputs.scheme == DraftScheme::kSampledWithoutReplacement) {
            // The next child was drawn from q without the tokens already drawn.
            q[x] = 0;
            double rest = 0;
            for (double v : q) rest += v;
            if (rest > 0) {
              for (double& v : q) v /= rest;
            }
          }
        }
        if (next < 0) break;
        u = next;
        result.nodes.push_back(u);
      }
      bonus = sample(p, rng);
    }
    result.bonus_tokens[b] = bonus;
    result.indptr.push_back(static_cast<int32_t>(result.nodes.size()));
  }
  *accepted = std::move(result);
  return Status::Ok();
}

}  // namespace treeverify
