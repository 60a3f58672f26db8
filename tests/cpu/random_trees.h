// Random tree shapes for the tree-utility tests. Kept local to the tests: the shared case
// generators in src/testing/ serve the attention suites and may not be built yet.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace treeverify::test {

enum class Shape { kChain, kStar, kBushy, kRandom, kDeep };
inline constexpr Shape kAllShapes[] = {Shape::kChain, Shape::kStar, Shape::kBushy, Shape::kRandom,
                                       Shape::kDeep};

// Parents of a tree of n nodes in node order (parents[0] = -1, parents[i] < i).
inline std::vector<int32_t> random_tree(Shape shape, int32_t n, std::mt19937_64& rng) {
  std::vector<int32_t> parents(n);
  for (int32_t i = 0; i < n; ++i) {
    if (i == 0) {
      parents[i] = -1;
      continue;
    }
    switch (shape) {
      case Shape::kChain:
        parents[i] = i - 1;
        break;
      case Shape::kStar:
        parents[i] = 0;
        break;
      case Shape::kBushy:
        parents[i] = (i - 1) / 4;
        break;
      case Shape::kRandom:
        parents[i] = static_cast<int32_t>(rng() % i);
        break;
      case Shape::kDeep:
        parents[i] = rng() % 8 == 0 ? static_cast<int32_t>(rng() % i) : i - 1;
        break;
    }
  }
  return parents;
}

// Concatenates trees of the given sizes into qo_indptr / parents.
inline void random_batch(const std::vector<int32_t>& sizes, Shape shape, std::mt19937_64& rng,
                         std::vector<int32_t>* qo_indptr, std::vector<int32_t>* parents) {
  qo_indptr->assign(1, 0);
  parents->clear();
  for (int32_t n : sizes) {
    const auto tree = random_tree(shape, n, rng);
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
