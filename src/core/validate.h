// Validation of a verify call's inputs (docs/DESIGN.md section 3), before anything runs.
#pragma once

#include <cstdint>

#include "treeverify/verify.h"

namespace treeverify::detail {

// Facts about a valid problem that planning needs.
struct ProblemSummary {
  int32_t total_q = 0;     // qo_indptr[B]
  int32_t max_tree = 0;    // max T_b
  int64_t nnz_pages = 0;   // kv_page_indptr[B]
  int64_t max_kv_len = 0;  // max L_b + T_b
  int64_t max_prefix = 0;  // max L_b
  int64_t total_kv = 0;    // sum of kv_len
};

// Every check on the host metadata: sizes and limits, CSR monotonicity, page ids in range,
// enough pages for kv_len, kv_len >= T_b, the tree contract. Errors name the argument, the
// request and the value.
Status validate_problem(const VerifyProblem& problem, ProblemSummary* summary);

// Checks of one run's buffers against the plan: non-null where required, strides that fit
// the shapes, 16-byte alignment of q, kv_cache and out rows (the GPU loads 16 bytes at a
// time). Pointers are never dereferenced: they may be device pointers.
Status validate_tensors(const Plan& plan, const VerifyTensors& tensors);

}  // namespace treeverify::detail
