// Helpers for the CPU backend tests: a hand-filled Plan (the tests call the backends directly),
// the paging rule and a plain float64 attention written independently of src/cpu.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include "testing/cases.h"
#include "treeverify/half.h"
#include "treeverify/types.h"
#include "treeverify/verify.h"

namespace tvtest {

using treeverify::DType;
using treeverify::testing::CaseSpec;
using treeverify::testing::HostCase;
using treeverify::testing::TreeShape;

// Random N(0, 1) values rounded to dtype, as 16-bit bits.
inline void fill_random(DType dtype, std::mt19937_64& rng, std::vector<uint16_t>* v) {
  std::normal_distribution<float> normal(0.f, 1.f);
  for (uint16_t& x : *v) x = treeverify::float_to_half(dtype, normal(rng));
}

// The shape of the case as a Plan, filled by hand so the backends are tested on their own,
// whatever plan() does.
inline treeverify::Plan plan_for(const HostCase& c, treeverify::PlanOptions options = {}) {
  treeverify::Plan p;
  p.backend = options.backend;
  p.batch_size = static_cast<int32_t>(c.kv_len.size());
  p.num_heads = c.spec.num_heads;
  p.page_size = c.spec.page_size;
  p.total_q = c.total_q();
  p.num_pages = c.num_pages;
  p.nnz_pages = static_cast<int64_t>(c.kv_page_indices.size());
  for (size_t b = 0; b < c.kv_len.size(); ++b) {
    p.max_tree = std::max(p.max_tree, c.qo_indptr[b + 1] - c.qo_indptr[b]);
    p.max_kv_len = std::max<int64_t>(p.max_kv_len, c.kv_len[b]);
  }
  p.dtype = c.spec.dtype;
  p.softmax_scale = c.spec.softmax_scale;
  p.options = options;
  return p;
}

// Offset in c.kv of KV token `tok` of request b (the paging rule written out again,
// independently of src/cpu).
inline size_t token_offset(const HostCase& c, int b, int64_t tok) {
  const int32_t page = c.kv_page_indices[c.kv_page_indptr[b] + tok / c.spec.page_size];
  return (static_cast<size_t>(page) * c.spec.page_size + tok % c.spec.page_size) *
         treeverify::kQKDim;
}
inline const uint16_t* token_row(const HostCase& c, int b, int64_t tok) {
  return &c.kv[token_offset(c, b, tok)];
}

// Plain softmax attention of one query row (576 values, 16-bit bits) over a list of KV rows,
// in float64: out [512] and the natural-log lse.
inline void plain_attention(DType dtype, double scale, const uint16_t* q,
                            const std::vector<const uint16_t*>& keys, double* out, double* lse) {
  std::vector<double> s(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) {
    double dot = 0;
    for (int c = 0; c < treeverify::kQKDim; ++c) {
      dot += double{treeverify::half_to_float(dtype, q[c])} *
             treeverify::half_to_float(dtype, keys[k][c]);
    }
    s[k] = scale * dot;
  }
  std::fill(out, out + treeverify::kVDim, 0.0);
  if (keys.empty()) {
    *lse = -std::numeric_limits<double>::infinity();
    return;
  }
  const double mx = *std::max_element(s.begin(), s.end());
  double sum = 0;
  for (size_t k = 0; k < keys.size(); ++k) {
    const double p = std::exp(s[k] - mx);
    sum += p;
    for (int c = 0; c < treeverify::kVDim; ++c) {
      out[c] += p * treeverify::half_to_float(dtype, keys[k][c]);
    }
  }
  for (int c = 0; c < treeverify::kVDim; ++c) out[c] /= sum;
  *lse = mx + std::log(sum);
}

// ||a - b|| / ||b|| over all entries.
inline double rel_fro(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < b.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    den += b[i] * b[i];
  }
  return std::sqrt(num / den);
}

inline std::vector<double> to_double(DType dtype, const std::vector<uint16_t>& bits) {
  std::vector<double> v(bits.size());
  for (size_t i = 0; i < bits.size(); ++i) v[i] = treeverify::half_to_float(dtype, bits[i]);
  return v;
}

}  // namespace tvtest
