// Tree KV commit on the device (docs/DESIGN.md section 5.3): after acceptance, each request's
// accepted rows move to the front of its tree region of the paged cache.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace treeverify::cuda {

struct KvCommitParams {
  void* kv_cache;                  // [num_pages, page_size, 576] 16-bit or e4m3, 16-byte aligned
  const int32_t* kv_page_indptr;   // [B+1]
  const int32_t* kv_page_indices;  // [nnz]
  const int32_t* kv_len;           // [B] L_b + T_b before the commit
  const int32_t* qo_indptr;        // [B+1]
  const int32_t* accepted_indptr;  // [B+1]
  const int32_t* accepted_nodes;   // [indptr[B]] local node indices, root first
  int32_t batch;
  int32_t log2_page_size;  // page_size is a power of two
  int32_t row_bytes;       // 1152 (bf16/fp16) or 576 (e4m3)
};

// Launches the row moves of every request; the inputs were validated on the host.
void launch_kv_commit(const KvCommitParams& p, cudaStream_t stream);

}  // namespace treeverify::cuda
