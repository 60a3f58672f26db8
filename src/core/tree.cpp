// Tree helpers (include/treeverify/tree.h): validation, depths, positions, the packed ancestor
// mask, and SGLang's flat custom_mask in both directions. Every function validates first and
// builds its result in a local, so a failed call leaves the outputs untouched.
#include "treeverify/tree.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "core/tree_checks.h"
#include "treeverify/types.h"

namespace treeverify {
namespace {

// The CSR contract of qo_indptr alone: B+1 entries, starting at 0, non-decreasing, every T_b
// within kMaxTreeSize, ending at the number of nodes.
Status validate_indptr(std::span<const int32_t> qo_indptr, size_t total_nodes) {
  TV_REQUIRE(!qo_indptr.empty(), "qo_indptr", "needs B+1 entries, got 0");
  TV_REQUIRE(qo_indptr[0] == 0, "qo_indptr", "qo_indptr[0] = {}", qo_indptr[0]);
  for (size_t b = 0; b + 1 < qo_indptr.size(); ++b) {
    const int64_t tree_size = int64_t{qo_indptr[b + 1]} - qo_indptr[b];
    TV_REQUIRE(tree_size >= 0, "qo_indptr", "request {}: qo_indptr[{}] = {} < qo_indptr[{}] = {}",
               b, b + 1, qo_indptr[b + 1], b, qo_indptr[b]);
    TV_REQUIRE(tree_size <= kMaxTreeSize, "qo_indptr", "request {}: T_b = {}", b, tree_size);
  }
  TV_REQUIRE(static_cast<size_t>(qo_indptr.back()) == total_nodes, "qo_indptr",
             "qo_indptr[B] = {} but {} tree nodes were given", qo_indptr.back(), total_nodes);
  return Status::Ok();
}

}  // namespace

namespace detail {

Status validate_kv_len(std::span<const int32_t> qo_indptr, std::span<const int32_t> kv_len) {
  const size_t batch = qo_indptr.size() - 1;
  TV_REQUIRE(kv_len.size() == batch, "kv_len", "has {} entries for {} requests", kv_len.size(),
             batch);
  for (size_t b = 0; b < batch; ++b) {
    const int32_t tree_size = qo_indptr[b + 1] - qo_indptr[b];
    TV_REQUIRE(kv_len[b] >= tree_size, "kv_len", "request {}: kv_len = {}, T_b = {}", b, kv_len[b],
               tree_size);
  }
  return Status::Ok();
}

}  // namespace detail

using detail::validate_kv_len;

Status validate_trees(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents) {
  TV_RETURN_IF_ERROR(validate_indptr(qo_indptr, parents.size()));
  for (size_t b = 0; b + 1 < qo_indptr.size(); ++b) {
    const int32_t begin = qo_indptr[b], tree_size = qo_indptr[b + 1] - begin;
    for (int32_t i = 0; i < tree_size; ++i) {
      const int32_t parent = parents[begin + i];
      if (i == 0) {
        TV_REQUIRE(parent == -1, "parents", "request {} node 0: parent = {} (parents[{}])", b,
                   parent, begin);
      } else {
        // parent >= 0 also rules out a second root; parent < i gives topological order.
        TV_REQUIRE(parent >= 0 && parent < i, "parents",
                   "request {} node {}: parent = {} (parents[{}])", b, i, parent, begin + i);
      }
    }
  }
  return Status::Ok();
}

Status tree_depths(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                   std::vector<int32_t>* depths) {
  TV_RETURN_IF_ERROR(validate_trees(qo_indptr, parents));
  std::vector<int32_t> result(parents.size());
  for (size_t b = 0; b + 1 < qo_indptr.size(); ++b) {
    const int32_t begin = qo_indptr[b], end = qo_indptr[b + 1];
    // Parents come first (parent < i), so one forward pass suffices.
    for (int32_t r = begin; r < end; ++r) {
      result[r] = r == begin ? 0 : result[begin + parents[r]] + 1;
    }
  }
  *depths = std::move(result);
  return Status::Ok();
}

Status tree_positions(std::span<const int32_t> qo_indptr, std::span<const int32_t> kv_len,
                      std::span<const int32_t> parents, std::vector<int32_t>* positions) {
  std::vector<int32_t> depths;
  TV_RETURN_IF_ERROR(tree_depths(qo_indptr, parents, &depths));
  TV_RETURN_IF_ERROR(validate_kv_len(qo_indptr, kv_len));
  for (size_t b = 0; b + 1 < qo_indptr.size(); ++b) {
    const int32_t prefix_len = kv_len[b] - (qo_indptr[b + 1] - qo_indptr[b]);
    // depth <= T_b - 1 and kv_len fits int32, so prefix_len + depth cannot overflow.
    for (int32_t r = qo_indptr[b]; r < qo_indptr[b + 1]; ++r) depths[r] += prefix_len;
  }
  *positions = std::move(depths);
  return Status::Ok();
}

Status build_ancestor_mask(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                           AncestorMask* mask) {
  TV_RETURN_IF_ERROR(validate_trees(qo_indptr, parents));
  int32_t max_tree = 0;
  for (size_t b = 0; b + 1 < qo_indptr.size(); ++b) {
    max_tree = std::max(max_tree, qo_indptr[b + 1] - qo_indptr[b]);
  }
  const int32_t words_per_row = (max_tree + 31) / 32;
  AncestorMask result{.words_per_row = words_per_row,
                      .words = std::vector<uint32_t>(parents.size() * words_per_row, 0u)};
  for (size_t b = 0; b + 1 < qo_indptr.size(); ++b) {
    const int32_t begin = qo_indptr[b], tree_size = qo_indptr[b + 1] - begin;
    for (int32_t i = 0; i < tree_size; ++i) {
      uint32_t* row = &result.words[static_cast<size_t>(begin + i) * words_per_row];
      // A node sees what its parent sees plus itself; the parent's row is already complete.
      if (i > 0) {
        const uint32_t* parent_row =
            &result.words[static_cast<size_t>(begin + parents[begin + i]) * words_per_row];
        std::copy(parent_row, parent_row + words_per_row, row);
      }
      row[i / 32] |= 1u << (i % 32);
    }
  }
  *mask = std::move(result);
  return Status::Ok();
}

Status parents_from_custom_mask(std::span<const int32_t> qo_indptr, std::span<const int32_t> kv_len,
                                std::span<const int32_t> mask_indptr,
                                std::span<const uint8_t> custom_mask,
                                std::vector<int32_t>* parents) {
  TV_REQUIRE(!qo_indptr.empty(), "qo_indptr", "needs B+1 entries, got 0");
  TV_RETURN_IF_ERROR(validate_indptr(qo_indptr, static_cast<size_t>(qo_indptr.back())));
  TV_RETURN_IF_ERROR(validate_kv_len(qo_indptr, kv_len));
  const size_t batch = qo_indptr.size() - 1;
  TV_REQUIRE(mask_indptr.size() == batch + 1, "mask_indptr", "has {} entries for {} requests",
             mask_indptr.size(), batch);
  TV_REQUIRE(mask_indptr[0] == 0, "mask_indptr", "mask_indptr[0] = {}", mask_indptr[0]);
  for (size_t b = 0; b < batch; ++b) {
    const int64_t block = int64_t{qo_indptr[b + 1] - qo_indptr[b]} * kv_len[b];
    const int64_t given = int64_t{mask_indptr[b + 1]} - mask_indptr[b];
    TV_REQUIRE(given == block, "mask_indptr", "request {}: {} entries, T_b * kv_len = {}", b, given,
               block);
  }
  TV_REQUIRE(static_cast<size_t>(mask_indptr[batch]) <= custom_mask.size(), "custom_mask",
             "has {} entries, mask_indptr[B] = {}", custom_mask.size(), mask_indptr[batch]);

  std::vector<int32_t> result(qo_indptr.back());
  for (size_t b = 0; b < batch; ++b) {
    const int32_t begin = qo_indptr[b], tree_size = qo_indptr[b + 1] - begin;
    const int64_t width = kv_len[b], prefix_len = width - tree_size;
    const uint8_t* block = custom_mask.data() + mask_indptr[b];
    auto row_of = [&](int32_t i) { return block + i * width; };
    for (int32_t i = 0; i < tree_size; ++i) {
      const uint8_t* row = row_of(i);
      const int64_t prefix_column = std::find(row, row + prefix_len, 0) - row;
      TV_REQUIRE(prefix_column == prefix_len, "custom_mask",
                 "request {} row {} column {}: a prefix token is hidden", b, i, prefix_column);
      const uint8_t* tree_row = row + prefix_len;
      TV_REQUIRE(tree_row[i] != 0, "custom_mask",
                 "request {} row {} column {}: the node does not see itself", b, i, prefix_len + i);
      // Nonzero is visible, here as everywhere (a 2 or 255 must not slip past this check).
      const int64_t later_column =
          std::find_if(tree_row + i + 1, tree_row + tree_size, [](uint8_t v) { return v != 0; }) -
          tree_row;
      TV_REQUIRE(later_column == tree_size, "custom_mask",
                 "request {} row {} column {}: the node sees a later node", b, i,
                 prefix_len + later_column);
      // Ancestors have smaller indices than the parent, so the parent is the last earlier
      // node the row sees; none means a root, allowed only at node 0.
      int32_t parent = i - 1;
      while (parent >= 0 && tree_row[parent] == 0) --parent;
      TV_REQUIRE(i == 0 || parent >= 0, "custom_mask",
                 "request {} row {}: sees no earlier node, a second root", b, i);
      // The row's earlier nodes must be exactly the parent's visible set (its ancestors and
      // itself); the parent's row was checked before this one.
      if (parent >= 0) {
        const uint8_t* parent_row = row_of(parent) + prefix_len;
        for (int32_t j = 0; j < parent; ++j) {
          const bool sees = tree_row[j] != 0, parent_sees = parent_row[j] != 0;
          TV_REQUIRE(sees == parent_sees, "custom_mask",
                     "request {} row {} column {}: differs from its parent node {}'s row", b, i,
                     prefix_len + j, parent);
        }
      }
      result[begin + i] = parent;
    }
  }
  *parents = std::move(result);
  return Status::Ok();
}

Status custom_mask_from_parents(std::span<const int32_t> qo_indptr, std::span<const int32_t> kv_len,
                                std::span<const int32_t> parents, std::vector<int32_t>* mask_indptr,
                                std::vector<uint8_t>* custom_mask) {
  TV_RETURN_IF_ERROR(validate_trees(qo_indptr, parents));
  TV_RETURN_IF_ERROR(validate_kv_len(qo_indptr, kv_len));
  const size_t batch = qo_indptr.size() - 1;
  std::vector<int32_t> indptr(batch + 1, 0);
  int64_t total = 0;
  for (size_t b = 0; b < batch; ++b) {
    total += int64_t{qo_indptr[b + 1] - qo_indptr[b]} * kv_len[b];
    // mask_indptr is int32 (SGLang's dtype); a larger batch must be converted in parts.
    TV_REQUIRE(total <= INT32_MAX, "kv_len", "request {}: the mask would hold {} entries", b,
               total);
    indptr[b + 1] = static_cast<int32_t>(total);
  }
  std::vector<uint8_t> mask(total, 0);
  for (size_t b = 0; b < batch; ++b) {
    const int32_t begin = qo_indptr[b], tree_size = qo_indptr[b + 1] - begin;
    const int64_t width = kv_len[b], prefix_len = width - tree_size;
    uint8_t* block = mask.data() + indptr[b];
    for (int32_t i = 0; i < tree_size; ++i) {
      uint8_t* row = block + i * width;
      std::fill(row, row + prefix_len, 1);
      for (int32_t j = i; j >= 0; j = parents[begin + j]) row[prefix_len + j] = 1;
    }
  }
  *mask_indptr = std::move(indptr);
  *custom_mask = std::move(mask);
  return Status::Ok();
}

}  // namespace treeverify
