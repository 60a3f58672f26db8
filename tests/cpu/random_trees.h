// Random trees for the tree-utility and KV-commit tests, over the shared generator
// testing::make_tree (src/testing/cases.h).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "testing/cases.h"

namespace treeverify::test {

using Shape = testing::TreeShape;
inline constexpr Shape kAllShapes[] = {Shape::kChain, Shape::kStar, Shape::kBushy, Shape::kRandom,
                                       Shape::kDeep};

// Concatenates trees of the given sizes into qo_indptr / parents.
inline void random_batch(const std::vector<int32_t>& sizes, Shape shape, std::mt19937_64& rng,
                         std::vector<int32_t>* qo_indptr, std::vector<int32_t>* parents) {
  qo_indptr->assign(1, 0);
  parents->clear();
  for (int32_t n : sizes) {
    const auto tree = testing::make_tree(shape, n, rng);
    parents->insert(parents->end(), tree.begin(), tree.end());
    qo_indptr->push_back(static_cast<int32_t>(parents->size()));
  }
}

// Whether tree node j is i or one of its ancestors, by walking up from i.
inline bool is_ancestor_or_self(const int32_t* parents, int32_t j, int32_t i) {
  for (int32_t u = i; u >= 0; u = parents[u]) {
    if (u == j) return true;
  }
  return false;
}

}  // namespace treeverify::test
