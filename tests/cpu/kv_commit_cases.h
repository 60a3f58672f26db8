// Random paged-commit cases shared by the host commit tests (tests/cpu/test_kv_commit.cpp)
// and the device commit tests (tests/cuda/test_kv_commit_gpu.cpp): a batch of random trees and
// accepted paths in a shuffled page pool, and the commit computed out of place.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "random_trees.h"
#include "treeverify/ddtree.h"
#include "treeverify/types.h"

namespace treeverify::test {

// A batch of requests in a shuffled page pool; every row of the pool has distinct contents.
struct PagedBatch {
  int32_t page_size = 0;
  std::vector<int32_t> qo_indptr = {0}, parents, kv_len, page_indptr = {0}, page_indices;
  std::vector<uint16_t> cache;
  AcceptedPaths accepted{.indptr = {0}, .nodes = {}, .bonus_tokens = {}};

  PagedKvCommit args() {
    return {.page_size = page_size,
            .kv_cache = cache,
            .kv_page_indptr = page_indptr,
            .kv_page_indices = page_indices,
            .kv_len = kv_len,
            .qo_indptr = qo_indptr,
            .parents = parents};
  }
  size_t row_offset(size_t b, int32_t pos) const {
    const int32_t page = page_indices[page_indptr[b] + pos / page_size];
    return (static_cast<size_t>(page) * page_size + pos % page_size) * kQKDim;
  }
};

// A random root-down path: keep following a random child, stopping early with probability
// 1/4 at each node; `full` follows the last child (the deepest in a chain) to a leaf.
inline std::vector<int32_t> random_path(const std::vector<int32_t>& parents, bool full,
                                        std::mt19937_64& rng) {
  std::vector<int32_t> path = {0};
  for (;;) {
    std::vector<int32_t> kids;
    for (int32_t i = path.back() + 1; i < static_cast<int32_t>(parents.size()); ++i) {
      if (parents[i] == path.back()) kids.push_back(i);
    }
    if (kids.empty() || (!full && rng() % 4 == 0)) return path;
    path.push_back(full ? kids.back() : kids[rng() % kids.size()]);
  }
}

// Gives every row of a pool of `pool` pages distinct contents: element e of row r is distinct
// across rows through its first two elements (r's bits).
inline void fill_distinct_rows(PagedBatch& pb, int32_t pool) {
  pb.cache.resize(static_cast<size_t>(pool) * pb.page_size * kQKDim);
  for (size_t e = 0; e < pb.cache.size(); ++e) {
    const size_t r = e / kQKDim, col = e % kQKDim;
    pb.cache[e] = static_cast<uint16_t>(col == 0 ? r & 0xffff : col == 1 ? r >> 16 : r * 31 + col);
  }
}

inline PagedBatch make_batch(int32_t page_size, const std::vector<int32_t>& tree_sizes, Shape shape,
                             bool full_paths, std::mt19937_64& rng) {
  PagedBatch pb{.page_size = page_size};
  std::vector<int32_t> pages_per_request;
  for (int32_t n : tree_sizes) {
    const auto tree = testing::make_tree(shape, n, rng);
    pb.parents.insert(pb.parents.end(), tree.begin(), tree.end());
    pb.qo_indptr.push_back(static_cast<int32_t>(pb.parents.size()));
    pb.kv_len.push_back(n + static_cast<int32_t>(rng() % 300));
    const int32_t pages = (pb.kv_len.back() + page_size - 1) / page_size + (rng() % 2);
    pages_per_request.push_back(pages);
    pb.page_indptr.push_back(pb.page_indptr.back() + pages);
    if (n > 0) {
      const auto path = random_path(tree, full_paths, rng);
      pb.accepted.nodes.insert(pb.accepted.nodes.end(), path.begin(), path.end());
    }
    pb.accepted.indptr.push_back(static_cast<int32_t>(pb.accepted.nodes.size()));
  }
  const int32_t used = pb.page_indptr.back(), pool = used + 3;  // a few pages nobody owns
  std::vector<int32_t> perm(pool);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  pb.page_indices.assign(perm.begin(), perm.begin() + used);
  fill_distinct_rows(pb, pool);
  return pb;
}

// The commit computed out of place on a pool of rows of 576 elements of any type (pb.cache,
// or an e4m3 pool of the same rows): read every source from the original, then write.
template <typename T>
std::vector<T> reference_commit(const PagedBatch& pb, const std::vector<T>& cache) {
  std::vector<T> out = cache;
  for (size_t b = 0; b + 1 < pb.qo_indptr.size(); ++b) {
    const int32_t prefix_len = pb.kv_len[b] - (pb.qo_indptr[b + 1] - pb.qo_indptr[b]);
    for (int32_t k = pb.accepted.indptr[b]; k < pb.accepted.indptr[b + 1]; ++k) {
      const int32_t step = k - pb.accepted.indptr[b];
      const size_t src = pb.row_offset(b, prefix_len + pb.accepted.nodes[k]);
      const size_t dst = pb.row_offset(b, prefix_len + step);
      std::copy_n(cache.begin() + src, kQKDim, out.begin() + dst);
    }
  }
  return out;
}
inline std::vector<uint16_t> reference_commit(const PagedBatch& pb) {
  return reference_commit(pb, pb.cache);
}

// The same pool as an e4m3 cache (rows of 576 bytes, the layout pb.row_offset indexes in
// bytes): every row distinct through its first three bytes, the other bytes varied.
inline std::vector<uint8_t> distinct_e4m3_rows(const PagedBatch& pb) {
  std::vector<uint8_t> bytes(pb.cache.size());
  for (size_t e = 0; e < bytes.size(); ++e) {
    const size_t r = e / kQKDim, col = e % kQKDim;
    bytes[e] = static_cast<uint8_t>(col < 3 ? r >> (8 * col) : r * 31 + col * 7);
  }
  return bytes;
}
// pb's commit arguments over an e4m3 pool.
inline PagedKvCommit e4m3_args(PagedBatch& pb, std::vector<uint8_t>& pool) {
  PagedKvCommit args = pb.args();
  args.kv_cache = {};
  args.kv_format = KvFormat::kE4M3;
  args.kv_cache_e4m3 = pool;
  return args;
}

// Moves whose source row is the destination of a later move of the same request (step k reads
// position path[k] > k, which step path[k] overwrites): the overlap that makes the order
// matter. Counted to be sure the tests cover it.
inline int64_t overlapping_moves(const PagedBatch& pb) {
  int64_t n = 0;
  for (size_t b = 0; b + 1 < pb.qo_indptr.size(); ++b) {
    const int32_t start = pb.accepted.indptr[b], len = pb.accepted.indptr[b + 1] - start;
    for (int32_t k = 0; k < len; ++k) {
      const int32_t src = pb.accepted.nodes[start + k];
      if (src != k && src < len) ++n;
    }
  }
  return n;
}

}  // namespace treeverify::test
