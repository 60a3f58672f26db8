// What one CTA of either verify kernel works on (grid: x row blocks, y chunks, z requests), read
// from the kernel's parameters: the portable kernel (sm80/) and the wgmma one (sm90/) share it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/arch.cuh"
#include "cuda/common/params.h"

namespace treeverify::cuda {


// What one CTA works on, fixed for its lifetime.
struct CtaWork {
  int q0;                  // first query node of the request
  int rows_b;              // T_b * H rows in the request
  int row0;                // first row of this CTA
  int prefix;              // L_b
  int tok_begin, tok_end;  // this CTA's chunk of the KV sequence
  int page_base;           // first entry of the request in kv_page_indices
  bool final_out;          // the request has one chunk: write out/lse directly
};

// This CTA's work (grid: x row blocks, V::kClusterCtas CTAs each; y chunks; z requests);
// false when it has none (then for every CTA of its cluster).
// kReload: read the index arrays with volatile loads, which the compiler cannot merge with
// the first call's: a value kept instead would stay live through the main loop.
template <typename V, bool kReload = false, bool kChunkInMemory = false>
__device__ __forceinline__ bool cta_work(const VerifyKernelParams& p, CtaWork* w) {
  auto ld = [](const int32_t* a, int i) {
    if constexpr (kReload)
      return *reinterpret_cast<const volatile int32_t*>(a + i);
    else
      return a[i];
  };
  const int b = blockIdx.z;
  // One request: its metadata is in the parameters (qo_indptr[0] = kv_page_indptr[0] = 0),
  // except where that spills (TV_FITS_HALVES_PARAM_METADATA).
  const bool one = (TV_FITS_HALVES_PARAM_METADATA || !V::kHalves) && p.one_request_kv_len > 0;
  w->q0 = one ? 0 : ld(p.qo_indptr, b);
  const int nodes = one ? p.one_request_nodes : ld(p.qo_indptr, b + 1) - w->q0;
  w->rows_b = nodes * p.num_heads;
  w->row0 = blockIdx.x / V::kClusterCtas * V::kRows;
  if (w->row0 >= w->rows_b) return false;
  const int kv_len = one ? p.one_request_kv_len : ld(p.kv_len, b);
  w->prefix = kv_len - nodes;
  // Batch 1 of a host plan takes the chunk length from the parameters with the rest of its
  // metadata; with kChunkInMemory (a kernel without a register to spare for that) and for
  // graph plans (lengths that change) it is read from memory.
  const int chunk = !kChunkInMemory && one ? p.one_request_chunk_tokens : ld(p.chunk_tokens_at, 0);
  w->tok_begin = blockIdx.y * chunk;
  if (w->tok_begin >= kv_len) return false;
  w->tok_end = min(kv_len, w->tok_begin + chunk);
  w->page_base = one ? 0 : ld(p.kv_page_indptr, b);
  w->final_out = kv_len <= chunk;
  return true;
}

}  // namespace treeverify::cuda
