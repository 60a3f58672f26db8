// The one place where VerifyTensors' "stride 0 means contiguous" rule (verify.h) is resolved:
// validation, the CPU backends and the CUDA launch all read strides through it.
#pragma once

#include <cstdint>

#include "treeverify/types.h"
#include "treeverify/verify.h"

namespace treeverify::detail {

// A head stride of 0 means the row width; a token stride of 0 means H head strides.
inline int64_t resolve_head_stride(int64_t stride_head, int64_t width) {
  return stride_head != 0 ? stride_head : width;
}
inline int64_t resolve_token_stride(int64_t stride_token, int32_t num_heads, int64_t head_stride) {
  return stride_token != 0 ? stride_token : num_heads * head_stride;
}

// Element strides of q [total_q, H, 576] and out [total_q, H, 512].
struct Strides {
  int64_t q_token, q_head, out_token, out_head;
};
inline Strides resolve_strides(int32_t num_heads, const VerifyTensors& t) {
  const int64_t q_head = resolve_head_stride(t.q_stride_head, kQKDim);
  const int64_t out_head = resolve_head_stride(t.out_stride_head, kVDim);
  return {resolve_token_stride(t.q_stride_token, num_heads, q_head), q_head,
          resolve_token_stride(t.out_stride_token, num_heads, out_head), out_head};
}

}  // namespace treeverify::detail
