// Helpers shared by the CPU backends: strides and the paged KV address of a token.
#pragma once

#include <cmath>
#include <cstdint>

#include "core/check.h"
#include "core/paging.h"
#include "core/strides.h"
#include "treeverify/half.h"
#include "treeverify/types.h"
#include "treeverify/verify.h"

namespace treeverify::detail {

inline Strides resolve_strides(const Plan& plan, const VerifyTensors& t) {
  return resolve_strides(plan.num_heads, t);
}

// One request's slice of the batch: T query nodes starting at row q0, L prefix tokens, then the
// T tree tokens in node order (docs/DESIGN.md section 3).
struct RequestSpan {
  int32_t q0 = 0, num_nodes = 0;
  int64_t prefix = 0, kv_len = 0;
  const int32_t* pages = nullptr;  // the request's entries of kv_page_indices
};
inline RequestSpan request_span(const VerifyTensors& t, int32_t b) {
  RequestSpan r;
  r.q0 = t.qo_indptr[b];
  r.num_nodes = t.qo_indptr[b + 1] - r.q0;
  r.kv_len = t.kv_len[b];
  r.prefix = r.kv_len - r.num_nodes;
  r.pages = t.kv_page_indices + t.kv_page_indptr[b];
  return r;
}

// KV token `tok` of a request lives in row tok % page_size of page pages[tok / page_size]
// (core/paging.h).
inline const uint16_t* kv_row(const VerifyTensors& t, int32_t page_size, const RequestSpan& r,
                              int64_t tok) {
  const auto* kv = static_cast<const uint16_t*>(t.kv_cache);
  return kv + paged_row(r.pages, page_size, tok) * kQKDim;
}
// The same row of an e4m3 cache: 576 bytes.
inline const uint8_t* kv_row_e4m3(const VerifyTensors& t, int32_t page_size, const RequestSpan& r,
                                  int64_t tok) {
  const auto* kv = static_cast<const uint8_t*>(t.kv_cache);
  return kv + paged_row(r.pages, page_size, tok) * kQKDim;
}

// The first n values of KV token `tok` as T (float or double), dequantized: kv_scale times
// the stored e4m3 value, or the 16-bit value as stored.
template <typename T>
inline void load_kv_row(const Plan& plan, const VerifyTensors& t, const RequestSpan& r, int64_t tok,
                        int n, T* dst) {
  if (plan.kv_format == KvFormat::kE4M3) {
    const uint8_t* src = kv_row_e4m3(t, plan.page_size, r, tok);
    const T scale = *t.kv_scale;
    for (int c = 0; c < n; ++c) dst[c] = static_cast<T>(e4m3_to_float(src[c])) * scale;
  } else {
    const uint16_t* src = kv_row(t, plan.page_size, r, tok);
    for (int c = 0; c < n; ++c) dst[c] = half_to_float(plan.dtype, src[c]);
  }
}

// The checks a CPU backend needs to stay in bounds on input that validate_problem and
// validate_tensors passed; the full contract is theirs. need_out: out must be non-null.
inline Status check_host_inputs(const Plan& plan, const VerifyTensors& t, bool need_out) {
  TV_REQUIRE(plan.batch_size >= 0, "plan.batch_size", "batch_size = {}", plan.batch_size);
  TV_REQUIRE(plan.num_heads > 0, "plan.num_heads", "num_heads = {}", plan.num_heads);
  TV_REQUIRE(plan.page_size > 0, "plan.page_size", "page_size = {}", plan.page_size);
  TV_REQUIRE(plan.dtype == DType::kBF16 || plan.dtype == DType::kFP16, "plan.dtype", "dtype = {}",
             static_cast<int>(plan.dtype));
  if (plan.batch_size == 0) return Status::Ok();
  TV_REQUIRE(t.qo_indptr != nullptr, "qo_indptr", "null");
  TV_REQUIRE(t.kv_len != nullptr, "kv_len", "null");
  TV_REQUIRE(t.kv_page_indptr != nullptr, "kv_page_indptr", "null");
  TV_REQUIRE(t.qo_indptr[plan.batch_size] == plan.total_q, "qo_indptr",
             "qo_indptr[B] = {}, plan.total_q = {}", t.qo_indptr[plan.batch_size], plan.total_q);
  if (plan.total_q == 0) return Status::Ok();
  TV_REQUIRE(t.q != nullptr, "q", "null");
  TV_REQUIRE(t.kv_cache != nullptr, "kv_cache", "null");
  TV_REQUIRE(t.kv_page_indices != nullptr, "kv_page_indices", "null");
  TV_REQUIRE(t.parents != nullptr, "parents", "null");
  if (need_out) TV_REQUIRE(t.out != nullptr, "out", "null");
  if (plan.kv_format == KvFormat::kE4M3) {
    TV_REQUIRE(t.kv_scale != nullptr, "kv_scale", "null with an e4m3 KV cache");
    TV_REQUIRE(is_valid_kv_scale(*t.kv_scale), "kv_scale",
               "*kv_scale = {}; {} x |kv_scale| (the largest value dequantized) must be a "
               "finite float32: |kv_scale| <= {}",
               *t.kv_scale, kMaxE4M3, kMaxKvScale);
  }
  return Status::Ok();
}

}  // namespace treeverify::detail
