// Tree helpers: the per-step host work between the drafter's tree and the verify kernels.
//
// A batch of trees is given as `parents` concatenated by `qo_indptr` (docs/DESIGN.md section 3):
// request b owns nodes [qo_indptr[b], qo_indptr[b+1]); within a request node 0 is the root
// (parent -1) and every other node's parent is an earlier node of the same request.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "treeverify/status.h"

namespace treeverify {

// Checks the tree contract for every request; the error names the request, node and value.
Status validate_trees(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents);

// Depth of each node (root = 0), concatenated like parents.
Status tree_depths(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                   std::vector<int32_t>* depths);

// Position of each node in its sequence: L_b + depth, with L_b = kv_len[b] - T_b.
Status tree_positions(std::span<const int32_t> qo_indptr, std::span<const int32_t> kv_len,
                      std::span<const int32_t> parents, std::vector<int32_t>* positions);

// Packed ancestor bitmask, the form kernels read: words_per_row = ceil(max T_b / 32), and
// row r = qo_indptr[b] + i holds words [r * words_per_row, (r + 1) * words_per_row); bit j
// (word j / 32, bit j % 32) is set iff tree node j of request b is i or an ancestor of i.
struct AncestorMask {
  int32_t words_per_row = 0;
  std::vector<uint32_t> words;  // [total_q * words_per_row]
  bool visible(int64_t row, int32_t j) const {
    return (words[row * words_per_row + j / 32] >> (j % 32)) & 1u;
  }
};
Status build_ancestor_mask(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                           AncestorMask* mask);

// SGLang's flat bool custom_mask: for request b a row-major [T_b, kv_len[b]] block starting at
// mask_indptr[b], true where query node i may attend KV token j. Converted to parents when it
// is exactly a tree mask: every node sees the whole prefix, itself, and a set of earlier tree
// nodes that is its parent's set plus the parent. Anything else is rejected, naming the
// request, the row and the first offending column.
Status parents_from_custom_mask(std::span<const int32_t> qo_indptr, std::span<const int32_t> kv_len,
                                std::span<const int32_t> mask_indptr,
                                std::span<const uint8_t> custom_mask,
                                std::vector<int32_t>* parents);

// The inverse, for tests and for engines that still need the flat mask: mask_indptr [B+1]
// and the mask as above.
Status custom_mask_from_parents(std::span<const int32_t> qo_indptr, std::span<const int32_t> kv_len,
                                std::span<const int32_t> parents, std::vector<int32_t>* mask_indptr,
                                std::vector<uint8_t>* custom_mask);

}  // namespace treeverify
