// The strongest oracle check (docs/DESIGN.md section 7): tree verify of node i equals attention
// over the prefix followed by the path root..i laid out as a chain, with the path's KV rows and q
// rows copied into a separately paged problem. Thousands of small random trees of every shape.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu_test_util.h"

namespace {

using treeverify::DType;
using treeverify::kQKDim;
using treeverify::kVDim;
using treeverify::detail::reference_attention;
using treeverify::detail::ReferenceResult;
using treeverify::testing::TreeShape;
using tvtest::CaseSpec;
using tvtest::HostCase;

// The chain problem of request b's `path` (tree node ids, root first): one request, prefix L,
// then the path's nodes as a chain; page size 1 with the tokens stored in reverse order, so the
// paging differs from the tree case's.
HostCase chain_case(const HostCase& tree, int b, const std::vector<int32_t>& path) {
  const int heads = tree.spec.num_heads;
  const int64_t prefix = tree.kv_len[b] - (tree.qo_indptr[b + 1] - tree.qo_indptr[b]);
  const int32_t n = static_cast<int32_t>(path.size());
  const int32_t kvl = static_cast<int32_t>(prefix + n);
  HostCase c;
  c.spec = tree.spec;
  c.spec.page_size = 1;
  c.spec.tree_sizes = {n};
  c.spec.prefix_lens = {prefix};
  c.num_pages = kvl;
  c.qo_indptr = {0, n};
  c.kv_len = {kvl};
  c.kv_page_indptr = {0, kvl};
  for (int32_t t = 0; t < kvl; ++t) c.kv_page_indices.push_back(kvl - 1 - t);
  for (int32_t k = 0; k < n; ++k) c.parents.push_back(k - 1);
  c.kv.resize(static_cast<size_t>(kvl) * kQKDim);
  for (int32_t t = 0; t < kvl; ++t) {
    const int64_t src_tok = t < prefix ? t : prefix + path[t - prefix];
    std::copy_n(tvtest::token_row(tree, b, src_tok), kQKDim, &c.kv[tvtest::token_offset(c, 0, t)]);
  }
  for (int32_t node : path) {
    const auto* q = &tree.q[static_cast<size_t>(tree.qo_indptr[b] + node) * heads * kQKDim];
    c.q.insert(c.q.end(), q, q + heads * kQKDim);
  }
  return c;
}

ReferenceResult reference(const HostCase& c, bool round_p) {
  ReferenceResult r;
  const auto s = reference_attention(tvtest::plan_for(c), c.tensors(nullptr, nullptr), round_p, &r);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return r;
}

TEST(ChainIdentity, TreeNodeEqualsItsPathAsAChain) {
  constexpr int kTrees = 2000;
  const TreeShape shapes[] = {TreeShape::kRandom, TreeShape::kChain, TreeShape::kStar,
                              TreeShape::kDeep, TreeShape::kBushy};
  std::mt19937_64 rng(7);
  int64_t rows_checked = 0;
  for (int trial = 0; trial < kTrees; ++trial) {
    CaseSpec spec;
    spec.num_heads = 1 + trial % 2;
    spec.shape = shapes[trial % 5];
    spec.page_size = 1 << (trial % 4);
    spec.dtype = (trial / 5) % 2 ? DType::kFP16 : DType::kBF16;
    spec.seed = 1000 + trial;
    const int batch = 1 + static_cast<int>(rng() % 3);
    for (int b = 0; b < batch; ++b) {
      spec.tree_sizes.push_back(1 + static_cast<int32_t>(rng() % 8));
      spec.prefix_lens.push_back(static_cast<int64_t>(rng() % 7));
    }
    const HostCase tree = treeverify::testing::make_case(spec);
    const bool round_p = trial % 3 == 0;
    const ReferenceResult tr = reference(tree, round_p);
    for (int b = 0; b < batch; ++b) {
      const int32_t q0 = tree.qo_indptr[b];
      for (int32_t i = 0; i < spec.tree_sizes[b]; ++i) {
        std::vector<int32_t> path;
        for (int32_t j = i; j >= 0; j = tree.parents[q0 + j]) path.push_back(j);
        std::reverse(path.begin(), path.end());
        const HostCase chain = chain_case(tree, b, path);
        const ReferenceResult cr = reference(chain, round_p);
        // The chain's last node is tree node i. Both sides add the same terms in the same
        // order (masked tokens add exact zeros), so they agree to rounding of a double.
        const int64_t last = static_cast<int64_t>(path.size()) - 1;
        for (int h = 0; h < spec.num_heads; ++h) {
          const int64_t trow = (int64_t{q0} + i) * spec.num_heads + h;
          const int64_t crow = last * spec.num_heads + h;
          const std::vector<double> a(tr.out.begin() + trow * kVDim,
                                      tr.out.begin() + (trow + 1) * kVDim);
          const std::vector<double> e(cr.out.begin() + crow * kVDim,
                                      cr.out.begin() + (crow + 1) * kVDim);
          ASSERT_LT(tvtest::rel_fro(a, e), 1e-12)
              << "trial " << trial << " request " << b << " node " << i << " head " << h;
          ASSERT_NEAR(tr.lse[trow], cr.lse[crow], 1e-12)
              << "trial " << trial << " request " << b << " node " << i << " head " << h;
          ++rows_checked;
        }
      }
    }
  }
  EXPECT_GT(rows_checked, kTrees * 4);
}

}  // namespace
