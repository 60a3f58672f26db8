// Arguments of both verify kernels (the portable one, sm80/, and the wgmma one, sm90/), built by
// src/cuda/backend.cpp from a Plan and the tensors.
#pragma once

#include <cstdint>

namespace treeverify::cuda {

// How the kernel reads the KV cache and what its products take (a kernel template argument).
enum class KvMode : int {
  k16 = 0,        // a cache in the q dtype: products in that dtype
  kE4M3 = 1,      // e4m3, exact (Precision::kExact): fp16 products on K, V widened (fp8_ops.cuh)
  kE4M3Fast = 2,  // e4m3, fast (Precision::kFast): Q and P in e4m3, e4m3 products (fp8_ops.cuh)
};

struct VerifyKernelParams {
  const void* q;                   // [total_q, H, 576] dtype, rows strided as below
  int64_t q_stride_token;          // elements
  int64_t q_stride_head;           // elements
  const void* kv;                  // [num_pages, page_size, 576] dtype, or e4m3 bytes
  const float* kv_scale;           // e4m3: the scale (device memory); null for 16-bit caches
  const int32_t* kv_page_indptr;   // [B+1]
  const int32_t* kv_page_indices;  // [nnz]
  const int32_t* kv_len;           // [B]
  const int32_t* qo_indptr;        // [B+1]
  const uint32_t* tree_mask;       // [total_q, mask_words]: ancestor bits (workspace)
  int32_t mask_words;
  void* out;                 // [total_q, H, 512] dtype
  int64_t out_stride_token;  // elements
  int64_t out_stride_head;   // elements
  float* lse;                // [total_q, H] fp32, may be null
  void* part_out;            // [num_chunks, total_q * H, 512] dtype (workspace)
  float* part_lse;           // [num_chunks, total_q * H] fp32 (workspace), log2 units
  int32_t num_heads;
  int32_t page_shift;    // log2(page_size)
  // [1] device memory: the call's chunk length, a multiple of the variant's kTokens (the
  // wgmma kernel's 64-token tiles: of 32 when forced; a chunk's last tile may be partial).
  // Written once a step: by a host plan's first run with the step's mask, by a graph plan's
  // prepare_step for the step's lengths.
  const int32_t* chunk_tokens_at;
  // Batch 1 of a host plan: the same length, read from here with the request's metadata below
  // (no load before the first copies).
  int32_t one_request_chunk_tokens;
  int32_t num_chunks;    // grid.y: the most chunks any request has
  // Batch 1: the request's node count and kv_len, the plan's (the index arrays must hold the
  // values plan() was given, verify.h), so a CTA reads no metadata from memory before its
  // first copies; 0 for larger batches, which read qo_indptr, kv_len and kv_page_indptr.
  int32_t one_request_nodes;
  int32_t one_request_kv_len;
  int64_t total_rows;  // total_q * H
  float scale_log2;    // softmax_scale * log2(e): scores in log2 units
};

}  // namespace treeverify::cuda
