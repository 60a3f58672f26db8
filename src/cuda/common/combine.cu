// Combine kernel for split-KV partials, and merge_state.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common/combine.cuh"
#include "cuda/common/constants.h"
#include "cuda/common/mma.cuh"

namespace treeverify::cuda {
namespace {

constexpr int kCombineThreads = kVDim / 4;  // 4 columns a thread: one float4 load per partial

// Block (r, b) merges row r of request b: the lse-weighted sum of its chunk partials, in one
// pass with a running max, so every chunk's lse and values are requested together. The grid
// names the request, so no block searches qo_indptr.
template <typename T>
__global__ void __launch_bounds__(kCombineThreads) combine_kernel(const CombineParams p) {
#if TV_HAS_PDL
  // Launched as a programmatic dependent of the main kernel: wait for all of it to finish.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  const int b = blockIdx.y;
  const int q0 = __ldg(p.qo_indptr + b);
  const int rows_b = (__ldg(p.qo_indptr + b + 1) - q0) * p.num_heads;
  const int n = (__ldg(p.kv_len + b) + p.chunk_tokens - 1) / p.chunk_tokens;
  if (static_cast<int>(blockIdx.x) >= rows_b || n <= 1) return;
  const int64_t grow = static_cast<int64_t>(q0) * p.num_heads + blockIdx.x;
  const int col = threadIdx.x * 4;
  float m = -INFINITY, sum = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
  for (int c = 0; c < n; ++c) {
    // Every chunk c < n ran and wrote finite values (0 where it saw nothing, lse -inf).
    const float s = __ldg(p.part_lse + c * p.total_rows + grow);
    const float4 v = __ldg(
        reinterpret_cast<const float4*>(p.part_out + (c * p.total_rows + grow) * kVDim + col));
    if (s == -INFINITY) continue;
    const float m_new = fmaxf(m, s);
    const float scale = exp2f(m - m_new), w = exp2f(s - m_new);  // scale = 0 while m = -inf
    acc.x = acc.x * scale + w * v.x, acc.y = acc.y * scale + w * v.y;
    acc.z = acc.z * scale + w * v.z, acc.w = acc.w * scale + w * v.w;
    sum = sum * scale + w;
    m = m_new;
  }
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  const int node = static_cast<int>(grow / p.num_heads),
            head = static_cast<int>(grow % p.num_heads);
  T* dst = static_cast<T*>(p.out) + node * p.out_stride_token + head * p.out_stride_head + col;
  *reinterpret_cast<uint2*>(dst) =
      make_uint2(pack2<T>(acc.x * inv, acc.y * inv), pack2<T>(acc.z * inv, acc.w * inv));
  if (p.lse != nullptr && threadIdx.x == 0)
    p.lse[grow] = sum > 0.f ? (m + __log2f(sum)) * kLn2 : -INFINITY;
}

// One block per row. lse in natural log; a side at -inf contributes nothing, both at -inf
// give v = 0 and s = -inf; NaN or +inf lse propagate as NaN (merge.h).
template <typename T>
__global__ void merge_state_kernel(const T* __restrict__ v_a, const float* __restrict__ s_a,
                                   const T* __restrict__ v_b, const float* __restrict__ s_b,
                                   T* v_out, float* s_out, int32_t dim) {
  const int64_t row = blockIdx.x;
  const float sa = s_a[row], sb = s_b[row];
  float wa, wb, s;
  if (isnan(sa) || isnan(sb) || sa == INFINITY || sb == INFINITY) {
    wa = wb = s = NAN;
  } else if (sa == -INFINITY && sb == -INFINITY) {
    wa = wb = 0.f;
    s = -INFINITY;
  } else {
    const float m = fmaxf(sa, sb);
    const float ea = exp2f((sa - m) * kLog2e), eb = exp2f((sb - m) * kLog2e);
    wa = ea / (ea + eb);
    wb = eb / (ea + eb);
    s = m + __logf(ea + eb);
  }
  for (int c = threadIdx.x; c < dim; c += blockDim.x) {
    const float a = to_float(v_a[row * dim + c]), bv = to_float(v_b[row * dim + c]);
    const float v = (wa == 0.f ? 0.f : wa * a) + (wb == 0.f ? 0.f : wb * bv);
    v_out[row * dim + c] = from_float<T>(v);
  }
  // Every thread read s_a/s_b before any writes s_out, which may alias them.
  __syncthreads();
  if (s_out != nullptr && threadIdx.x == 0) s_out[row] = s;
}

}  // namespace

cudaError_t launch_combine(const CombineParams& p, DType dtype, bool programmatic,
                           cudaStream_t stream) {
  if (p.total_rows == 0) return cudaSuccess;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(p.max_rows), static_cast<unsigned>(p.batch));
  config.blockDim = dim3(kCombineThreads);
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = programmatic ? 1 : 0;
  return dtype == DType::kBF16 ? cudaLaunchKernelEx(&config, combine_kernel<__nv_bfloat16>, p)
                               : cudaLaunchKernelEx(&config, combine_kernel<__half>, p);
}

void launch_merge_state(DType dtype, int64_t num_rows, int32_t head_dim, const void* v_a,
                        const float* s_a, const void* v_b, const float* s_b, void* v_out,
                        float* s_out, cudaStream_t stream) {
  if (num_rows == 0) return;
  const dim3 grid(static_cast<unsigned>(num_rows));
  const int threads = head_dim >= 256 ? 256 : ((head_dim + 31) / 32) * 32;
  if (dtype == DType::kBF16) {
    using T = __nv_bfloat16;
    merge_state_kernel<T><<<grid, threads, 0, stream>>>(static_cast<const T*>(v_a), s_a,
                                                        static_cast<const T*>(v_b), s_b,
                                                        static_cast<T*>(v_out), s_out, head_dim);
  } else {
    using T = __half;
    merge_state_kernel<T><<<grid, threads, 0, stream>>>(static_cast<const T*>(v_a), s_a,
                                                        static_cast<const T*>(v_b), s_b,
                                                        static_cast<T*>(v_out), s_out, head_dim);
  }
}

}  // namespace treeverify::cuda
