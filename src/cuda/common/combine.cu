// Combine kernel for split-KV partials, and merge_state.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <iterator>

#include "cuda/common/combine.cuh"
#include "cuda/common/combine_shape.h"
#include "cuda/common/constants.h"
#include "cuda/common/mma.cuh"

namespace treeverify::cuda {
namespace {

// A stream of lanes merges kLanes x kCols columns (an 8 or 16-byte load a lane) of one row
// over every streams-th chunk; a warp holds 32 / kLanes streams. The launch shape (how many
// columns and lanes, how many warps): combine_shape.h.

// Running merge of partials normalised by their own sum: acc / sum is the merged output and
// m + log2(sum) its lse (log2 units).
template <int kCols>
struct Merge {
  float m = -INFINITY, sum = 0.f;
  float acc[kCols] = {};
  // Adds a partial of lse s and values v, or (weight_sum != 1) another merge with m = s,
  // acc = v and sum = weight_sum. A NaN partial (lse NaN: its rows saw a non-finite value)
  // makes w, and so acc and sum, NaN for good; the kernel wrote finite values everywhere else.
  __device__ void add(float s, const float (&v)[kCols], float weight_sum = 1.f) {
    // An empty partial, or a stream that added nothing, or only NaN (sum NaN, m -inf: go on).
    if (s == -INFINITY && !isnan(weight_sum)) return;
    const float m_new = fmaxf(m, s);
    const float scale = exp2f(m - m_new), w = exp2f(s - m_new);  // scale = 0 while m = -inf
#pragma unroll
    for (int j = 0; j < kCols; ++j) acc[j] = acc[j] * scale + w * v[j];
    sum = sum * scale + w * weight_sum;
    m = m_new;
  }
};

// kCols 16-bit values (the kCols / 2 registers of a load), as floats.
template <typename T, int kCols>
__device__ __forceinline__ void unpack_cols(const uint32_t (&v)[kCols / 2], float (&out)[kCols]) {
#pragma unroll
  for (int j = 0; j < kCols / 2; ++j) {
    const float2 f = unpack2<T>(v[j]);
    out[2 * j] = f.x, out[2 * j + 1] = f.y;
  }
}

// The lane's kCols values of a partial: one 8 or 16-byte load.
template <int kCols>
__device__ __forceinline__ void load_cols(const void* src, uint32_t (&v)[kCols / 2]) {
  if constexpr (kCols == 8) {
    const uint4 x = __ldg(static_cast<const uint4*>(src));
    v[0] = x.x, v[1] = x.y, v[2] = x.z, v[3] = x.w;
  } else {
    static_assert(kCols == 4);
    const uint2 x = __ldg(static_cast<const uint2*>(src));
    v[0] = x.x, v[1] = x.y;
  }
}

// Block (r, slice, b) merges columns [kCols kLanes slice, +kCols kLanes) of row r of
// request b. Its streams split the request's chunks (stream i takes i, i + streams, ...) with
// kCombineBatch loads in flight a lane; the streams of a warp meet by shuffles, the warps in
// shared memory. The grid names the request: no search.
template <typename T, int kLanes, int kCols>
__global__ void __launch_bounds__(kCombineMaxWarps * 32) combine_kernel(const CombineParams p) {
  static_assert(kLanes == 4 || kLanes == 8 || kLanes == 16 || kLanes == 32);
  static_assert(kCols == 4 || kCols == 8);
#if TV_HAS_PDL
  // Launched as a programmatic dependent of the main kernel: wait for all of it to finish.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  constexpr int kStreamsPerWarp = 32 / kLanes;
  const int b = blockIdx.z;
  const bool one = p.one_request_kv_len > 0;  // batch 1: no metadata to read
  const int q0 = one ? 0 : __ldg(p.qo_indptr + b);
  const int rows_b = (one ? p.one_request_nodes : __ldg(p.qo_indptr + b + 1) - q0) * p.num_heads;
  const int chunk = one ? p.one_request_chunk_tokens : __ldg(p.chunk_tokens_at);
  const int n = ((one ? p.one_request_kv_len : __ldg(p.kv_len + b)) + chunk - 1) / chunk;
  if (static_cast<int>(blockIdx.x) >= rows_b || n <= 1) return;
  const int64_t grow = static_cast<int64_t>(q0) * p.num_heads + blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int streams = warps * kStreamsPerWarp;
  const int col = (blockIdx.y * kLanes + lane % kLanes) * kCols;

  const T* part = static_cast<const T*>(p.part_out) + grow * kVDim + col;
  Merge<kCols> mg;
  for (int c0 = warp * kStreamsPerWarp + lane / kLanes; c0 < n; c0 += kCombineBatch * streams) {
    float s[kCombineBatch];
    uint32_t v[kCombineBatch][kCols / 2];  // kCols columns in T
#pragma unroll
    for (int i = 0; i < kCombineBatch; ++i) {
      const int c = c0 + i * streams;
      // Every chunk c < n ran and wrote its partial: finite values (0 where it saw nothing,
      // lse -inf), or NaN values and lse where its rows saw a non-finite value.
      s[i] = c < n ? __ldg(p.part_lse + c * p.total_rows + grow) : -INFINITY;
      if (c < n) {
        load_cols<kCols>(part + c * p.total_rows * kVDim, v[i]);
      } else {
#pragma unroll
        for (int j = 0; j < kCols / 2; ++j) v[i][j] = 0u;
      }
    }
#pragma unroll
    for (int i = 0; i < kCombineBatch; ++i) {
      float f[kCols];
      unpack_cols<T, kCols>(v[i], f);
      mg.add(s[i], f);
    }
  }
#pragma unroll
  for (int off = kLanes; off < 32; off *= 2) {  // the warp's streams meet
    const float m = __shfl_xor_sync(0xffffffffu, mg.m, off);
    const float sum = __shfl_xor_sync(0xffffffffu, mg.sum, off);
    float acc[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) acc[j] = __shfl_xor_sync(0xffffffffu, mg.acc[j], off);
    mg.add(m, acc, sum);
  }
  if (warps > 1) {  // the warps meet in shared memory; warp 0 finishes the slice
    __shared__ float s_m[kCombineMaxWarps], s_sum[kCombineMaxWarps];
    __shared__ float s_acc[kCombineMaxWarps][kLanes][kCols];
    if (lane == 0) s_m[warp] = mg.m, s_sum[warp] = mg.sum;
    if (lane < kLanes)
#pragma unroll
      for (int j = 0; j < kCols; ++j) s_acc[warp][lane][j] = mg.acc[j];
    __syncthreads();
    if (warp != 0) return;
    mg = Merge<kCols>{};
    if (lane < kLanes)
      for (int w = 0; w < warps; ++w) mg.add(s_m[w], s_acc[w][lane], s_sum[w]);
  }
  if (lane >= kLanes) return;
  // sum = 0: the row saw nothing (out 0, lse -inf); sum = NaN: the whole row is NaN. An e4m3
  // cache's partials are in its codes' units: kv_scale makes them values.
  const float v_scale = p.v_scale != nullptr ? __ldg(p.v_scale) : 1.f;
  const float inv = mg.sum == 0.f ? 0.f : v_scale / mg.sum;
  const int node = static_cast<int>(grow / p.num_heads),
            head = static_cast<int>(grow % p.num_heads);
  T* dst = static_cast<T*>(p.out) + node * p.out_stride_token + head * p.out_stride_head + col;
  const float* a = mg.acc;
  if constexpr (kCols == 8) {
    *reinterpret_cast<uint4*>(dst) =
        make_uint4(pack2<T>(a[0] * inv, a[1] * inv), pack2<T>(a[2] * inv, a[3] * inv),
                   pack2<T>(a[4] * inv, a[5] * inv), pack2<T>(a[6] * inv, a[7] * inv));
  } else {
    *reinterpret_cast<uint2*>(dst) =
        make_uint2(pack2<T>(a[0] * inv, a[1] * inv), pack2<T>(a[2] * inv, a[3] * inv));
  }
  if (p.lse != nullptr && blockIdx.y == 0 && lane == 0)
    p.lse[grow] = mg.sum == 0.f ? -INFINITY : (mg.m + __log2f(mg.sum)) * kLn2;
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

template <int kLanes, int kCols>
cudaError_t launch_combine_shape(const CombineParams& p, DType dtype, bool programmatic, int warps,
                                 cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.max_rows), kVDim / (kCols * kLanes),
                  static_cast<unsigned>(p.batch));
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = dim3(32 * warps);
  config.stream = stream;
  cudaLaunchAttribute attr{};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = programmatic ? 1 : 0;
  return dtype == DType::kBF16
             ? cudaLaunchKernelEx(&config, combine_kernel<__nv_bfloat16, kLanes, kCols>, p)
             : cudaLaunchKernelEx(&config, combine_kernel<__half, kLanes, kCols>, p);
}

// Launches the instance of kCombineSlices[I] or a later one that `shape` names.
template <size_t I = 0>
cudaError_t launch_combine_slice(const CombineShape& shape, const CombineParams& p, DType dtype,
                                 bool programmatic, cudaStream_t stream) {
  if constexpr (I == std::size(kCombineSlices)) {
    return cudaErrorInvalidConfiguration;  // a shape choose_combine_shape never returns
  } else {
    constexpr CombineSlice kSlice = kCombineSlices[I];
    if (shape.cols == kSlice.cols && shape.lanes == kSlice.lanes)
      return launch_combine_shape<kSlice.lanes, kSlice.cols>(p, dtype, programmatic, shape.warps,
                                                             stream);
    return launch_combine_slice<I + 1>(shape, p, dtype, programmatic, stream);
  }
}

}  // namespace

cudaError_t launch_combine(const CombineParams& p, DType dtype, bool programmatic, int device_sms,
                           cudaStream_t stream) {
  if (p.total_rows == 0) return cudaSuccess;
  const CombineShape shape =
      choose_combine_shape(static_cast<int64_t>(p.max_rows) * p.batch, p.num_chunks, device_sms);
  return launch_combine_slice(shape, p, dtype, programmatic, stream);
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
