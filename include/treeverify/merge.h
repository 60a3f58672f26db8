// merge_state: combine two attention results over disjoint KV ranges by their lse.
#pragma once

#include <cstdint>

#include "treeverify/status.h"
#include "treeverify/types.h"

namespace treeverify {

// Semantics of SGLang's merge_state_v2 (natural-log lse): with m = max(s_a, s_b),
//   s = m + log(exp(s_a - m) + exp(s_b - m)),  v = v_a * exp(s_a - s) + v_b * exp(s_b - s).
// A side with lse = -inf (it saw nothing) contributes nothing; when both are -inf the result
// is v = 0 and s = -inf. +inf or NaN lse is passed through as NaN (it is never a valid lse).
struct MergeStateArgs {
  int64_t num_rows = 0;  // N: tokens x heads, rows of width head_dim
  int32_t head_dim = 0;  // D, any positive value (512 for MLA)
  DType dtype = DType::kBF16;
  const void* v_a = nullptr;   // [N, D] dtype, contiguous
  const float* s_a = nullptr;  // [N] fp32
  const void* v_b = nullptr;   // [N, D] dtype, contiguous
  const float* s_b = nullptr;  // [N] fp32
  void* v_out = nullptr;       // [N, D] dtype; may alias v_a or v_b
  float* s_out = nullptr;      // [N] fp32, may be null; may alias s_a or s_b
};

// Host pointers.
Status merge_state_cpu(const MergeStateArgs& args);
// Device pointers, launched on `stream` (a cudaStream_t). kUnsupported without CUDA.
Status merge_state_cuda(const MergeStateArgs& args, void* stream = nullptr);

}  // namespace treeverify
