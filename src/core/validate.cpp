// Validation of a verify call's inputs (docs/DESIGN.md section 3). Every check reports through
// TV_REQUIRE, so the message is the condition's own text plus the argument, request and value.
// All arithmetic on sizes is done in int64 so that no check can be fooled by int32 overflow.
#include "core/validate.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include "core/check.h"
#include "core/strides.h"
#include "treeverify/tree.h"
#include "treeverify/types.h"

namespace treeverify::detail {
namespace {

// GPU loads move 16 bytes at a time (cp.async / ldmatrix / TMA), so every row start must be
// 16-byte aligned: the base pointer, and every stride in bytes.
constexpr int64_t kLoadAlignBytes = 16;
constexpr int64_t kLoadAlignElems = kLoadAlignBytes / 2;  // 16-bit elements per 16 bytes

bool aligned(const void* p, int64_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0;
}

// Element strides of a [rows, H, width] tensor whose last dimension is contiguous. Rules
// (documented in one place so the kernels can rely on them):
//   - 0 means contiguous: stride_head = width, stride_token = H * stride_head;
//   - stride_head >= width: the heads of one token do not overlap;
//   - stride_token >= H * stride_head: tokens are laid out token-major and do not overlap
//     (every kernel indexes token-major; a head-major view has to be made contiguous first);
//   - both strides are multiples of 8 elements, so each row starts 16-byte aligned;
//   - the furthest element, (rows - 1) * stride_token + (H - 1) * stride_head + width, is
//     under 2^61, so its byte offset cannot overflow 64-bit offset arithmetic in the kernels
//     (each of the two products is bounded by kMaxElems below, their sum by twice that).
Status validate_strides(const char* token_arg, const char* head_arg, int64_t stride_token,
                        int64_t stride_head, int32_t rows, int32_t num_heads, int64_t width) {
  const int64_t head = resolve_head_stride(stride_head, width);
  TV_REQUIRE(head >= width, head_arg, "{} = {} with row width {}", head_arg, stride_head, width);
  TV_REQUIRE(head % kLoadAlignElems == 0, head_arg, "{} = {} elements", head_arg, stride_head);
  constexpr int64_t kMaxElems = int64_t{1} << 60;
  TV_REQUIRE(head <= kMaxElems / num_heads, head_arg, "{} = {} with {} heads", head_arg,
             stride_head, num_heads);
  const int64_t token = resolve_token_stride(stride_token, num_heads, head);
  TV_REQUIRE(token >= num_heads * head, token_arg, "{} = {} with {} heads of stride {}", token_arg,
             stride_token, num_heads, head);
  TV_REQUIRE(token % kLoadAlignElems == 0, token_arg, "{} = {} elements", token_arg, stride_token);
  const int64_t last_row = rows > 0 ? rows - 1 : 0;
  TV_REQUIRE(last_row == 0 || token <= kMaxElems / last_row, token_arg, "{} = {} with {} rows",
             token_arg, stride_token, rows);
  return Status::Ok();
}

}  // namespace

Status validate_problem(const VerifyProblem& p, ProblemSummary* summary) {
  TV_REQUIRE(p.batch_size >= 0, "batch_size", "batch_size = {}", p.batch_size);
  TV_REQUIRE(p.num_heads >= 1 && p.num_heads <= kMaxHeads, "num_heads", "num_heads = {}",
             p.num_heads);
  TV_REQUIRE(is_valid_page_size(p.page_size), "page_size", "page_size = {}", p.page_size);
  TV_REQUIRE(p.num_pages >= 0, "num_pages", "num_pages = {}", p.num_pages);
  TV_REQUIRE(p.dtype == DType::kBF16 || p.dtype == DType::kFP16, "dtype", "dtype = {}",
             static_cast<int32_t>(p.dtype));
  TV_REQUIRE(p.kv_format == KvFormat::kSameAsQ || p.kv_format == KvFormat::kE4M3, "kv_format",
             "kv_format = {}", static_cast<int32_t>(p.kv_format));
  TV_REQUIRE(std::isfinite(p.softmax_scale) && p.softmax_scale > 0.f, "softmax_scale",
             "softmax_scale = {}", p.softmax_scale);

  const int32_t B = p.batch_size;
  ProblemSummary s;
  // With no requests there is nothing to read; the CSR arrays may then be null (an engine's
  // empty step). When given, they must still start at 0.
  if (B == 0) {
    TV_REQUIRE(p.qo_indptr == nullptr || p.qo_indptr[0] == 0, "qo_indptr", "qo_indptr[0] = {}",
               p.qo_indptr[0]);
    TV_REQUIRE(p.kv_page_indptr == nullptr || p.kv_page_indptr[0] == 0, "kv_page_indptr",
               "kv_page_indptr[0] = {}", p.kv_page_indptr[0]);
    if (summary != nullptr) *summary = s;
    return Status::Ok();
  }

  TV_REQUIRE(p.qo_indptr != nullptr, "qo_indptr", "null with batch_size = {}", B);
  TV_REQUIRE(p.kv_len != nullptr, "kv_len", "null with batch_size = {}", B);
  TV_REQUIRE(p.kv_page_indptr != nullptr, "kv_page_indptr", "null with batch_size = {}", B);
  TV_REQUIRE(p.qo_indptr[0] == 0, "qo_indptr", "qo_indptr[0] = {}", p.qo_indptr[0]);
  TV_REQUIRE(p.kv_page_indptr[0] == 0, "kv_page_indptr", "kv_page_indptr[0] = {}",
             p.kv_page_indptr[0]);

  // CSR structure first, so that the totals below index arrays of a known size.
  for (int32_t b = 0; b < B; ++b) {
    const int64_t tree_size = int64_t{p.qo_indptr[b + 1]} - p.qo_indptr[b];
    TV_REQUIRE(tree_size >= 0, "qo_indptr", "request {}: qo_indptr[{}] = {} < qo_indptr[{}] = {}",
               b, b + 1, p.qo_indptr[b + 1], b, p.qo_indptr[b]);
    TV_REQUIRE(tree_size <= kMaxTreeSize, "qo_indptr", "request {}: tree size T = {}", b,
               tree_size);
    const int64_t num_req_pages = int64_t{p.kv_page_indptr[b + 1]} - p.kv_page_indptr[b];
    TV_REQUIRE(num_req_pages >= 0, "kv_page_indptr",
               "request {}: kv_page_indptr[{}] = {} < kv_page_indptr[{}] = {}", b, b + 1,
               p.kv_page_indptr[b + 1], b, p.kv_page_indptr[b]);
  }
  s.total_q = p.qo_indptr[B];
  s.nnz_pages = p.kv_page_indptr[B];
  TV_REQUIRE(s.total_q == 0 || p.parents != nullptr, "parents", "null with {} tree nodes",
             s.total_q);
  TV_REQUIRE(s.nnz_pages == 0 || p.kv_page_indices != nullptr, "kv_page_indices",
             "null with {} pages", s.nnz_pages);

  for (int32_t b = 0; b < B; ++b) {
    const int32_t first_row = p.qo_indptr[b];
    const int32_t tree_size = p.qo_indptr[b + 1] - first_row;
    const int64_t kv_len = p.kv_len[b];
    TV_REQUIRE(kv_len >= tree_size, "kv_len", "request {}: kv_len = {} with tree size T = {}", b,
               kv_len, tree_size);
    const int64_t first_page = p.kv_page_indptr[b];
    const int64_t num_req_pages = p.kv_page_indptr[b + 1] - first_page;
    const int64_t capacity = num_req_pages * p.page_size;  // int64: cannot overflow
    TV_REQUIRE(kv_len <= capacity, "kv_len", "request {}: kv_len = {} with {} pages of {} tokens",
               b, kv_len, num_req_pages, p.page_size);
    for (int64_t k = first_page; k < first_page + num_req_pages; ++k) {
      const int32_t page = p.kv_page_indices[k];
      TV_REQUIRE(0 <= page && page < p.num_pages, "kv_page_indices",
                 "request {}: kv_page_indices[{}] = {} with num_pages = {}", b, k, page,
                 p.num_pages);
    }

    s.max_tree = std::max(s.max_tree, tree_size);
    s.max_kv_len = std::max(s.max_kv_len, kv_len);
    s.max_prefix = std::max(s.max_prefix, kv_len - tree_size);
    s.total_kv += kv_len;
  }
  // The tree contract (node 0 the only root, parents before children), by the tree helpers.
  TV_RETURN_IF_ERROR(validate_trees({p.qo_indptr, static_cast<size_t>(B) + 1},
                                    {p.parents, static_cast<size_t>(s.total_q)}));
  if (summary != nullptr) *summary = s;
  return Status::Ok();
}

Status validate_tensors(const Plan& plan, const VerifyTensors& t) {
  // A default-constructed Plan (plan() never called, or it failed) must not pass silently.
  TV_REQUIRE(plan.num_heads >= 1 && plan.num_heads <= kMaxHeads && plan.total_q >= 0 &&
                 plan.batch_size >= 0,
             "plan", "num_heads = {}, total_q = {}, batch_size = {}: not made by plan()",
             plan.num_heads, plan.total_q, plan.batch_size);
  // Nothing is read or written when there are no query rows; any pointers may then be null.
  if (plan.total_q == 0) return Status::Ok();

  TV_REQUIRE(t.q != nullptr, "q", "null with total_q = {}", plan.total_q);
  TV_REQUIRE(t.kv_cache != nullptr, "kv_cache", "null with total_q = {}", plan.total_q);
  TV_REQUIRE(t.out != nullptr, "out", "null with total_q = {}", plan.total_q);
  TV_REQUIRE(t.qo_indptr != nullptr, "qo_indptr", "null with total_q = {}", plan.total_q);
  TV_REQUIRE(t.kv_len != nullptr, "kv_len", "null with total_q = {}", plan.total_q);
  TV_REQUIRE(t.kv_page_indptr != nullptr, "kv_page_indptr", "null with total_q = {}", plan.total_q);
  TV_REQUIRE(t.kv_page_indices != nullptr, "kv_page_indices", "null with total_q = {}",
             plan.total_q);
  TV_REQUIRE(t.parents != nullptr, "parents", "null with total_q = {}", plan.total_q);
  if (plan.kv_format == KvFormat::kE4M3) {
    TV_REQUIRE(t.kv_scale != nullptr, "kv_scale", "null with an e4m3 KV cache");
    TV_REQUIRE(aligned(t.kv_scale, alignof(float)), "kv_scale", "address {} is not {}-byte aligned",
               static_cast<const void*>(t.kv_scale), alignof(float));
  } else {
    TV_REQUIRE(t.kv_scale == nullptr, "kv_scale",
               "given, but the KV cache is {} (kv_scale is for an e4m3 cache)",
               dtype_name(plan.dtype));
  }

  TV_REQUIRE(aligned(t.q, kLoadAlignBytes), "q", "address {} is not 16-byte aligned", t.q);
  TV_REQUIRE(aligned(t.kv_cache, kLoadAlignBytes), "kv_cache", "address {} is not 16-byte aligned",
             t.kv_cache);
  TV_REQUIRE(aligned(t.out, kLoadAlignBytes), "out", "address {} is not 16-byte aligned", t.out);
  // Misaligned int32/fp32 pointers can only come from casts, but they fault on the GPU.
  TV_REQUIRE(t.lse == nullptr || aligned(t.lse, alignof(float)), "lse",
             "address {} is not {}-byte aligned", static_cast<const void*>(t.lse), alignof(float));
  for (auto [ptr, name] : {std::pair{t.qo_indptr, "qo_indptr"},
                           {t.kv_len, "kv_len"},
                           {t.kv_page_indptr, "kv_page_indptr"},
                           {t.kv_page_indices, "kv_page_indices"},
                           {t.parents, "parents"}}) {
    TV_REQUIRE(aligned(ptr, alignof(int32_t)), name, "address {} is not {}-byte aligned",
               static_cast<const void*>(ptr), alignof(int32_t));
  }

  TV_RETURN_IF_ERROR(validate_strides("q_stride_token", "q_stride_head", t.q_stride_token,
                                      t.q_stride_head, plan.total_q, plan.num_heads, kQKDim));
  TV_RETURN_IF_ERROR(validate_strides("out_stride_token", "out_stride_head", t.out_stride_token,
                                      t.out_stride_head, plan.total_q, plan.num_heads, kVDim));
  return Status::Ok();
}

}  // namespace treeverify::detail
