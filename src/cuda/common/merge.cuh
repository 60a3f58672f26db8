// The running merge of split-KV partials by their lse, shared by the combine kernel
// (combine.cu) and the combine fused into the verify kernels (cuda/mma/row_block_merge.cuh),
// so that both merge, and treat empty and non-finite partials, the same way.
#pragma once

#include <cuda_runtime.h>

#include "cuda/common/constants.h"

namespace treeverify::cuda {

// Running merge of partials normalised by their own sum: acc / sum is the merged output and
// m + log2(sum) its lse (log2 units).
struct Merge {
  float m = -INFINITY, sum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  // Adds a partial of lse s and values v, or (weight_sum != 1) another merge with m = s,
  // acc = v and sum = weight_sum. A NaN partial (lse NaN: its rows saw a non-finite value)
  // makes w, and so acc and sum, NaN for good; the kernel wrote finite values everywhere else.
  __device__ void add(float s, float4 v, float weight_sum = 1.f) {
    // An empty partial, or a stream that added nothing, or only NaN (sum NaN, m -inf: go on).
    if (s == -INFINITY && !isnan(weight_sum)) return;
    const float m_new = fmaxf(m, s);
    const float scale = exp2f(m - m_new), w = exp2f(s - m_new);  // scale = 0 while m = -inf
    acc.x = acc.x * scale + w * v.x, acc.y = acc.y * scale + w * v.y;
    acc.z = acc.z * scale + w * v.z, acc.w = acc.w * scale + w * v.w;
    sum = sum * scale + w * weight_sum;
    m = m_new;
  }
  // Merges in each lane the merges of the lanes whose index differs from its own only in the
  // bits from `first` (a power of two) up to, not including, `end` (a power of two <= 32).
  // Every lane of the warp must call it.
  __device__ void merge_lanes(int first, int end) {
#pragma unroll
    for (int off = first; off < end; off *= 2) {
      const float m2 = __shfl_xor_sync(0xffffffffu, m, off);
      const float sum2 = __shfl_xor_sync(0xffffffffu, sum, off);
      const float4 acc2 = make_float4(
          __shfl_xor_sync(0xffffffffu, acc.x, off), __shfl_xor_sync(0xffffffffu, acc.y, off),
          __shfl_xor_sync(0xffffffffu, acc.z, off), __shfl_xor_sync(0xffffffffu, acc.w, off));
      add(m2, acc2, sum2);
    }
  }
  // The merged output's factor (0 where the row saw nothing, NaN where it is NaN) and its lse
  // in natural log (-inf where the row saw nothing).
  __device__ float inverse_sum() const { return sum == 0.f ? 0.f : 1.f / sum; }
  __device__ float lse_ln() const { return sum == 0.f ? -INFINITY : (m + __log2f(sum)) * kLn2; }
};

}  // namespace treeverify::cuda
