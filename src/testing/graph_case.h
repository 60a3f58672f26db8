// A HostCase as a graph plan's step (treeverify/graph.h): its requests as lanes, their pages in
// any of the page-table layouts and their trees in any of the tree inputs, with padded lanes
// as an engine adds them, for the CPU and GPU tests of graph plans.
#pragma once

#include <cstdint>
#include <vector>

#include "testing/cases.h"
#include "treeverify/graph.h"

namespace treeverify::testing {

struct GraphLayout {
  PageTable page_table = PageTable::kCsr;
  TreeInput tree = TreeInput::kParents;
  int32_t padded_lanes = 0;  // lanes after the case's: table row 0, kv_len pad_kv_len
  int32_t pad_kv_len = 0;    // their kv_len as given (0: T + 1)
  bool kv_len_excludes_tree = false;
  int32_t max_kv_len = 0;  // 0: the case's longest kv_len
};

// The step's host arrays and the bounds that describe them. Lane b < the case's requests is
// request b; every request of the case must have the same tree size.
struct GraphCase {
  GraphBounds bounds;
  std::vector<int32_t> kv_len, indptr, indices, table_rows, parents;
  std::vector<uint8_t> mask;
  std::vector<uint16_t> q;  // [B * T, H, 576]: the case's q, then padded lanes' (random)
  int32_t real_lanes = 0;
  GraphStep step(uint32_t* error_flags) const;  // host pointers into this case
};

// Throws std::invalid_argument when the case's trees differ in size.
GraphCase make_graph_case(const HostCase& host, const GraphLayout& layout);

}  // namespace treeverify::testing
