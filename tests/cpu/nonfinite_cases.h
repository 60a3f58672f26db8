// The non-finite policy's cases (verify.h), shared by the CPU and GPU tests: a request whose
// tree is [-1, 0, 1, 1] (node 3 is a leaf under node 1, so nodes 0, 1 and 2 cannot see it),
// one value of its q or KV made NaN or infinite, and the result the policy demands: the rows
// that see the value NaN in all of out and lse, every other row as in the clean case.
#pragma once

#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu_test_util.h"
#include "treeverify/half.h"

namespace tvtest {

// Where the bad value goes, and which rows must come out NaN: those of nan_nodes (every
// head) for a KV value, the poisoned row alone for a q value.
struct Poison {
  std::string what;
  int64_t token = -1;          // KV token of the request (prefix first), or -1 for a q value
  int32_t node = 0, head = 0;  // the q row, when token = -1 (head -1: the last)
  int column = 0;              // of the 576
  float value = NAN;
  std::vector<int32_t> nan_nodes;
};

// The tree [-1, 0, 1, 1] after `prefix` tokens: its 4 tree tokens sit at prefix .. prefix + 3.
inline HostCase leaf_tree_case(int32_t heads, int64_t prefix, int32_t page, DType dtype,
                               uint64_t seed) {
  HostCase c = treeverify::testing::make_case(CaseSpec{.name = "non-finite",
                                                       .num_heads = heads,
                                                       .tree_sizes = {4},
                                                       .prefix_lens = {prefix},
                                                       .page_size = page,
                                                       .dtype = dtype,
                                                       .seed = seed});
  c.parents = {-1, 0, 1, 1};
  return c;
}

// Values in K and V of the leaf reach only its own rows; the same value in a prefix token, or
// in the q of one row, reaches every row, or that row; a pool slot past kv_len (in the
// request's last page, when the page has one) reaches none.
inline std::vector<Poison> poisons(int64_t prefix, int32_t page) {
  const int64_t leaf = prefix + 3;
  std::vector<Poison> list = {
      {"NaN in the leaf's V", leaf, 0, 0, 7, NAN, {3}},
      {"+inf in the leaf's V", leaf, 0, 0, 300, INFINITY, {3}},
      {"-inf in the leaf's V, column 0", leaf, 0, 0, 0, -INFINITY, {3}},
      {"NaN in the leaf's K only (column 540)", leaf, 0, 0, 540, NAN, {3}},
      {"NaN in node 1's V (seen by nodes 1, 2, 3)", prefix + 1, 0, 0, 511, NAN, {1, 2, 3}},
      {"NaN in the middle of the prefix", prefix / 2, 0, 0, 100, NAN, {0, 1, 2, 3}},
      {"NaN in q of node 2, head 0", -1, 2, 0, 5, NAN, {}},
      {"+inf in q of node 0, last head", -1, 0, -1, 575, INFINITY, {}},
  };
  if ((prefix + 4) % page != 0)
    list.push_back({"NaN in the pool past kv_len", prefix + 4, 0, 0, 3, NAN, {}});
  return list;
}

// The row (node * H + head) of a q poison.
inline size_t q_row(const HostCase& c, const Poison& p) {
  return static_cast<size_t>(p.node) * c.spec.num_heads +
         (p.head >= 0 ? p.head : c.spec.num_heads - 1);
}

// The case with the poison applied.
inline HostCase poisoned(const HostCase& clean, const Poison& p) {
  HostCase c = clean;
  const uint16_t bits = treeverify::float_to_half(c.spec.dtype, p.value);
  if (p.token >= 0) {
    c.kv[token_offset(c, 0, p.token) + p.column] = bits;
  } else {
    c.q[q_row(c, p) * treeverify::kQKDim + p.column] = bits;
  }
  return c;
}

// What the policy demands: the oracle of the clean case, with the rows of p.nan_nodes NaN.
inline treeverify::detail::ReferenceResult expected(const HostCase& clean, const Poison& p,
                                                    bool round_p) {
  treeverify::detail::ReferenceResult ref;
  const auto s = treeverify::detail::reference_attention(
      plan_for(clean), clean.tensors(nullptr, nullptr), round_p, &ref);
  if (!s.ok()) throw std::runtime_error(s.to_string());
  auto make_nan = [&](size_t row) {
    ref.lse[row] = NAN;
    for (int c = 0; c < treeverify::kVDim; ++c) ref.out[row * treeverify::kVDim + c] = NAN;
  };
  const int32_t heads = clean.spec.num_heads;
  if (p.token < 0) make_nan(q_row(clean, p));
  for (int32_t node : p.nan_nodes)
    for (int32_t h = 0; h < heads; ++h) make_nan(static_cast<size_t>(node) * heads + h);
  return ref;
}

}  // namespace tvtest
