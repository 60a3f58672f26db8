// Helpers for the CPU backend tests: a local case generator filling testing::HostCase (until
// the shared make_case of src/testing/cases.cpp is used), a hand-filled Plan (the tests call
// the backends directly, not plan()/run()), and an independent float64 attention.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
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

inline std::vector<int32_t> local_tree(TreeShape shape, int32_t n, std::mt19937_64& rng) {
  std::vector<int32_t> parents(n);
  for (int32_t i = 0; i < n; ++i) {
    if (i == 0) {
      parents[i] = -1;
      continue;
    }
    const int32_t any = std::uniform_int_distribution<int32_t>(0, i - 1)(rng);
    switch (shape) {
      case TreeShape::kRandom:
        parents[i] = any;
        break;
      case TreeShape::kChain:
        parents[i] = i - 1;
        break;
      case TreeShape::kStar:
        parents[i] = 0;
        break;
      case TreeShape::kDeep:
        parents[i] = (rng() % 8 == 0) ? any : i - 1;
        break;
      case TreeShape::kBushy:
        parents[i] = (i - 1) / 4;
        break;
    }
  }
  return parents;
}

// Random N(0, 1) values rounded to dtype, as 16-bit bits.
inline void fill_random(DType dtype, std::mt19937_64& rng, std::vector<uint16_t>* v) {
  std::normal_distribution<float> normal(0.f, 1.f);
  for (uint16_t& x : *v) x = treeverify::float_to_half(dtype, normal(rng));
}

// The same contract as testing::make_case: pages of all requests are a random permutation of
// a pool with spare pages.
inline HostCase local_case(const CaseSpec& spec) {
  HostCase c;
  c.spec = spec;
  std::mt19937_64 rng(spec.seed);
  const size_t batch = spec.tree_sizes.size();
  c.qo_indptr = {0};
  c.kv_page_indptr = {0};
  int64_t used = 0;
  for (size_t b = 0; b < batch; ++b) {
    const int32_t t = spec.tree_sizes[b];
    c.qo_indptr.push_back(c.qo_indptr.back() + t);
    c.kv_len.push_back(static_cast<int32_t>(spec.prefix_lens[b] + t));
    const int64_t pages = (c.kv_len.back() + spec.page_size - 1) / spec.page_size;
    c.kv_page_indptr.push_back(static_cast<int32_t>(c.kv_page_indptr.back() + pages));
    used += pages;
    const std::vector<int32_t> tree = local_tree(spec.shape, t, rng);
    c.parents.insert(c.parents.end(), tree.begin(), tree.end());
  }
  c.num_pages = used + static_cast<int64_t>(std::ceil(used * spec.pool_slack));
  std::vector<int32_t> pool(c.num_pages);
  std::iota(pool.begin(), pool.end(), 0);
  std::shuffle(pool.begin(), pool.end(), rng);
  c.kv_page_indices.assign(pool.begin(), pool.begin() + used);
  c.q.resize(static_cast<size_t>(c.total_q()) * spec.num_heads * treeverify::kQKDim);
  c.kv.resize(static_cast<size_t>(c.num_pages) * spec.page_size * treeverify::kQKDim);
  fill_random(spec.dtype, rng, &c.q);
  fill_random(spec.dtype, rng, &c.kv);
  return c;
}

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

inline treeverify::VerifyTensors tensors_for(const HostCase& c, void* out, float* lse) {
  treeverify::VerifyTensors t;
  t.q = c.q.data();
  t.kv_cache = c.kv.data();
  t.qo_indptr = c.qo_indptr.data();
  t.kv_len = c.kv_len.data();
  t.kv_page_indptr = c.kv_page_indptr.data();
  t.kv_page_indices = c.kv_page_indices.data();
  t.parents = c.parents.data();
  t.out = out;
  t.lse = lse;
  return t;
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
