// Merging attention partials by their lse: the split-KV combine of the verify kernels and
// the public merge_state (SGLang merge_state_v2 semantics).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "treeverify/types.h"

namespace treeverify::cuda {

// A split request's partial outputs are stored in the output's 16-bit type, not fp32: half the
// bytes for the main kernel to write and the combine to read back (at V1's 66 chunks, 8.6 MB
// instead of 17.3). The cost is one more rounding to the output type before the merge, which
// at most doubles the output's own rounding error (bound: 1e-2 relative, src/testing/compare.h);
// engines merge 16-bit states the same way (merge_state, SGLang's merge_state_v2). A partial
// of an e4m3 cache is kept in the codes' units (an average of codes, |x| <= 448) and the combine
// multiplies by kv_scale (v_scale): with kv_scale in it, an fp16 partial would overflow wherever
// kv_scale x 448 passes 65504, although the merged output can be well inside fp16's range. A
// partial of an fp16 cache averages fp16 values, so it cannot overflow.
struct CombineParams {
  const void* part_out;      // [num_chunks, total_rows, kVDim] dtype, each normalised by its l
  const float* v_scale;      // e4m3 cache: kv_scale (device memory), the partials' unit; else null
  const float* part_lse;     // [num_chunks, total_rows] fp32, log2 units, -inf if empty
  const int32_t* qo_indptr;  // [B+1]
  const int32_t* kv_len;     // [B]
  int32_t batch;
  int32_t max_rows;  // T * H of the largest request
  int32_t num_heads;
  const int32_t* chunk_tokens_at;  // [1]: the call's chunk length (params.h)
  int32_t one_request_chunk_tokens;  // batch 1 of a host plan: the same (params.h)
  int32_t num_chunks;  // the most chunks of any request
  int64_t total_rows;  // total_q * H
  // Batch 1: the request's node count and kv_len (the plan's), read from here instead of
  // qo_indptr and kv_len; 0 for larger batches.
  int32_t one_request_nodes;
  int32_t one_request_kv_len;
  void* out;                 // [total_q, H, 512] dtype
  int64_t out_stride_token;  // elements
  int64_t out_stride_head;   // elements
  float* lse;                // [total_q, H] fp32 natural log, may be null
};

// Writes out/lse for every row whose request was split into more than one chunk (rows of
// single-chunk requests were written by the main kernel and are left alone). `programmatic`
// (sm_90+ devices) launches it as a programmatic dependent of the main kernel just enqueued;
// `device_sms` (the device's SM count) sizes its blocks.
cudaError_t launch_combine(const CombineParams& p, DType dtype, bool programmatic, int device_sms,
                           cudaStream_t stream);

// merge_state on device pointers; rows of width head_dim, contiguous.
void launch_merge_state(DType dtype, int64_t num_rows, int32_t head_dim, const void* v_a,
                        const float* s_a, const void* v_b, const float* s_b, void* v_out,
                        float* s_out, cudaStream_t stream);

}  // namespace treeverify::cuda
