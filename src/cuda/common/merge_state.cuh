// The running merge of attention partials by their lse, on the device: what the combine kernel
// (combine.cu) and the verify kernels' in-kernel merge (cuda/mma/merge_in_kernel.cuh) share.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace treeverify::cuda {

// Running merge of kN columns of partials normalised by their own sum: acc / sum is the merged
// output and m + log2(sum) its lse (log2 units).
template <int kN>
struct Merge {
  float m = -INFINITY, sum = 0.f;
  float acc[kN] = {};
  // Adds a partial of lse s and values v, or (weight_sum != 1) another merge with m = s,
  // acc = v and sum = weight_sum. A NaN partial (lse NaN: its rows saw a non-finite value)
  // makes w, and so acc and sum, NaN for good; the kernels wrote finite values everywhere else.
  __device__ __forceinline__ void add(float s, const float (&v)[kN], float weight_sum = 1.f) {
    // An empty partial, or a stream that added nothing, or only NaN (sum NaN, m -inf: go on).
    if (s == -INFINITY && !isnan(weight_sum)) return;
    const float m_new = fmaxf(m, s);
    const float scale = exp2f(m - m_new), w = exp2f(s - m_new);  // scale = 0 while m = -inf
#pragma unroll
    for (int i = 0; i < kN; ++i) acc[i] = acc[i] * scale + w * v[i];
    sum = sum * scale + w * weight_sum;
    m = m_new;
  }
  // Adds the merge held by the lane `offset` lanes away (xor) in the same warp.
  __device__ __forceinline__ void add_lane(int offset) {
    const float m_o = __shfl_xor_sync(0xffffffffu, m, offset);
    const float sum_o = __shfl_xor_sync(0xffffffffu, sum, offset);
    float acc_o[kN];
#pragma unroll
    for (int i = 0; i < kN; ++i) acc_o[i] = __shfl_xor_sync(0xffffffffu, acc[i], offset);
    add(m_o, acc_o, sum_o);
  }
  // 1 / sum, times `scale` (an e4m3 partial's kv_scale); 0 where the row saw nothing.
  __device__ __forceinline__ float inv_sum(float scale) const {
    return sum == 0.f ? 0.f : scale / sum;
  }
  // The merged lse in log2 units: -inf where the row saw nothing, NaN where it saw NaN.
  __device__ __forceinline__ float lse2() const {
    return sum == 0.f ? -INFINITY : m + __log2f(sum);
  }
};

}  // namespace treeverify::cuda
