// make_graph_case: a HostCase laid out as an engine hands a graph plan its step.
#include "testing/graph_case.h"

#include <algorithm>
#include <random>
#include <stdexcept>

#include "treeverify/half.h"

namespace treeverify::testing {

GraphCase make_graph_case(const HostCase& host, const GraphLayout& layout) {
  const int32_t R = static_cast<int32_t>(host.kv_len.size());
  if (R == 0) throw std::invalid_argument("make_graph_case: no requests");
  const int32_t T = host.qo_indptr[1] - host.qo_indptr[0];
  for (int32_t b = 0; b < R; ++b)
    if (host.qo_indptr[b + 1] - host.qo_indptr[b] != T)
      throw std::invalid_argument("make_graph_case: requests of different tree sizes");
  const int32_t P = host.spec.page_size, B = R + layout.padded_lanes;
  const int32_t pad_len = layout.pad_kv_len > 0 ? layout.pad_kv_len : T + 1;
  GraphCase g;
  g.real_lanes = R;
  int32_t max_kv = layout.max_kv_len;
  for (int32_t len : host.kv_len) max_kv = std::max(max_kv, len);
  max_kv = std::max(max_kv, pad_len);
  GraphBounds& bd = g.bounds;
  bd.batch_size = B;
  bd.tree_size = T;
  bd.num_heads = host.spec.num_heads;
  bd.page_size = P;
  bd.num_pages = host.num_pages;
  bd.max_kv_len = max_kv;
  bd.dtype = host.spec.dtype;
  bd.kv_format = host.spec.kv_format;
  bd.page_table = layout.page_table;
  bd.tree = layout.tree;
  bd.kv_len_excludes_tree = layout.kv_len_excludes_tree;
  const int64_t pages_per_lane = (max_kv + P - 1) / P;

  auto lane_len = [&](int32_t b) { return b < R ? host.kv_len[b] : pad_len; };
  for (int32_t b = 0; b < B; ++b)
    g.kv_len.push_back(lane_len(b) - (layout.kv_len_excludes_tree ? T : 0));
  // Pages: the case's CSR for its requests; padded lanes read page 0.
  auto page_of = [&](int32_t b, int64_t k) {
    return b < R && k < host.kv_page_indptr[b + 1] - host.kv_page_indptr[b]
               ? host.kv_page_indices[host.kv_page_indptr[b] + k]
               : 0;
  };
  if (layout.page_table == PageTable::kCsr) {
    g.indptr.push_back(0);
    for (int32_t b = 0; b < B; ++b) {
      const int64_t n = (lane_len(b) + P - 1) / P;
      for (int64_t k = 0; k < n; ++k) g.indices.push_back(page_of(b, k));
      g.indptr.push_back(static_cast<int32_t>(g.indices.size()));
    }
    bd.page_capacity = static_cast<int64_t>(g.indices.size());
  } else {
    // Row 0 is the padding row (SGLang's req_to_token keeps it); lane b < R is row b + 1.
    const bool slots = layout.page_table == PageTable::kSlotRows;
    const int64_t stride = slots ? pages_per_lane * P : pages_per_lane;
    g.indices.assign(static_cast<size_t>((R + 1) * stride), 0);
    for (int32_t b = 0; b < R; ++b) {
      g.table_rows.push_back(b + 1);
      for (int64_t k = 0; k < pages_per_lane; ++k) {
        const int32_t page = page_of(b, k);
        if (slots) {
          for (int32_t j = 0; j < P; ++j) g.indices[(b + 1) * stride + k * P + j] = page * P + j;
        } else {
          g.indices[(b + 1) * stride + k] = page;
        }
      }
    }
    for (int32_t b = R; b < B; ++b) g.table_rows.push_back(0);
    bd.page_capacity = R + 1;
    bd.table_stride = static_cast<int32_t>(stride);
  }
  // Trees: the case's parents, or its ancestor masks; padded lanes a chain / an unwritten mask.
  for (int32_t b = 0; b < B; ++b)
    for (int32_t i = 0; i < T; ++i)
      g.parents.push_back(b < R ? host.parents[host.qo_indptr[b] + i] : i - 1);
  auto seen = [&](int32_t b, int32_t i, int32_t j) {
    if (b >= R) return false;  // never written
    for (int32_t a = i; a >= 0; a = g.parents[b * T + a])
      if (a == j) return true;
    return false;
  };
  if (layout.tree == TreeInput::kMask) {
    for (int32_t b = 0; b < B; ++b)
      for (int32_t i = 0; i < T; ++i)
        for (int32_t j = 0; j < T; ++j) g.mask.push_back(seen(b, i, j) ? 1 : 0);
  } else if (layout.tree == TreeInput::kFullMask) {
    for (int32_t b = 0; b < B; ++b) {
      const int32_t len = lane_len(b);
      for (int32_t i = 0; i < T; ++i)
        for (int32_t c = 0; c < len; ++c)
          g.mask.push_back(c < len - T ? 1 : seen(b, i, c - (len - T)) ? 1 : 0);
    }
  }
  // q: the case's rows, then random ones for the padded lanes.
  g.q = host.q;
  std::mt19937_64 rng(host.spec.seed + 17);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int64_t i = 0; i < int64_t{B - R} * T * host.spec.num_heads * kQKDim; ++i)
    g.q.push_back(float_to_half(host.spec.dtype, normal(rng)));
  return g;
}

GraphStep GraphCase::step(uint32_t* error_flags) const {
  GraphStep s;
  s.kv_len = kv_len.data();
  s.kv_page_indptr = indptr.empty() ? nullptr : indptr.data();
  s.kv_page_indices = indices.data();
  s.table_rows = table_rows.empty() ? nullptr : table_rows.data();
  s.parents = parents.data();
  s.tree_mask = mask.empty() ? nullptr : mask.data();
  s.mask_bytes = static_cast<int64_t>(mask.size());
  s.error_flags = error_flags;
  return s;
}

}  // namespace treeverify::testing
