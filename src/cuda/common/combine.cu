// Combine kernel for split-KV partials, and merge_state.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cuda/common/combine.cuh"
#include "cuda/common/constants.h"
#include "cuda/common/mma.cuh"

namespace treeverify::cuda {
namespace {

// A stream of lanes merges kLanes x 4 columns (a float4 a lane) of one row over every
// streams-th chunk; a warp holds 32 / kLanes streams.
constexpr int kMaxWarps = 16;  // 512 threads leave 128 registers a thread: no spills anywhere
// Chunks a stream requests at once: their loads are all in flight before the first is used.
constexpr int kBatch = 8;

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
};

// Block (r, slice, b) merges columns [4 kLanes slice, +4 kLanes) of row r of request b. Its
// streams split the request's chunks (stream i takes i, i + streams, ...) with kBatch loads in
// flight a lane; the streams of a warp meet by shuffles, the warps in shared memory. Rows of
// few partials (decode, batch 1) take narrow slices (kLanes 8: 16 blocks a row) so that the
// combine still spreads over the device. The grid names the request: no search.
template <typename T, int kLanes>
__global__ void __launch_bounds__(kMaxWarps * 32) combine_kernel(const CombineParams p) {
  static_assert(kLanes == 8 || kLanes == 16 || kLanes == 32);
#if TV_HAS_PDL
  // Launched as a programmatic dependent of the main kernel: wait for all of it to finish.
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
  constexpr int kStreamsPerWarp = 32 / kLanes;
  const int b = blockIdx.z;
  const bool one = p.one_request_kv_len > 0;  // batch 1: no metadata to read
  const int q0 = one ? 0 : __ldg(p.qo_indptr + b);
  const int rows_b = (one ? p.one_request_nodes : __ldg(p.qo_indptr + b + 1) - q0) * p.num_heads;
  const int n =
      ((one ? p.one_request_kv_len : __ldg(p.kv_len + b)) + p.chunk_tokens - 1) / p.chunk_tokens;
  if (static_cast<int>(blockIdx.x) >= rows_b || n <= 1) return;
  const int64_t grow = static_cast<int64_t>(q0) * p.num_heads + blockIdx.x;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, warps = blockDim.x / 32;
  const int streams = warps * kStreamsPerWarp;
  const int col = blockIdx.y * kLanes * 4 + (lane % kLanes) * 4;

  const T* part = static_cast<const T*>(p.part_out) + grow * kVDim + col;
  Merge mg;
  for (int c0 = warp * kStreamsPerWarp + lane / kLanes; c0 < n; c0 += kBatch * streams) {
    float s[kBatch];
    uint2 v[kBatch];  // 4 columns in T
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const int c = c0 + i * streams;
      // Every chunk c < n ran and wrote its partial: finite values (0 where it saw nothing,
      // lse -inf), or NaN values and lse where its rows saw a non-finite value.
      s[i] = c < n ? __ldg(p.part_lse + c * p.total_rows + grow) : -INFINITY;
      v[i] = c < n ? __ldg(reinterpret_cast<const uint2*>(part + c * p.total_rows * kVDim))
                   : make_uint2(0u, 0u);
    }
#pragma unroll
    for (int i = 0; i < kBatch; ++i) {
      const float2 lo = unpack2<T>(v[i].x), hi = unpack2<T>(v[i].y);
      mg.add(s[i], make_float4(lo.x, lo.y, hi.x, hi.y));
    }
  }
#pragma unroll
  for (int off = kLanes; off < 32; off *= 2) {  // the warp's streams meet
    const float m = __shfl_xor_sync(0xffffffffu, mg.m, off);
    const float sum = __shfl_xor_sync(0xffffffffu, mg.sum, off);
    const float4 acc = make_float4(
        __shfl_xor_sync(0xffffffffu, mg.acc.x, off), __shfl_xor_sync(0xffffffffu, mg.acc.y, off),
        __shfl_xor_sync(0xffffffffu, mg.acc.z, off), __shfl_xor_sync(0xffffffffu, mg.acc.w, off));
    mg.add(m, acc, sum);
  }
  if (warps > 1) {  // the warps meet in shared memory; warp 0 finishes the slice
    __shared__ float s_m[kMaxWarps], s_sum[kMaxWarps];
    __shared__ float4 s_acc[kMaxWarps][kLanes];
    if (lane == 0) s_m[warp] = mg.m, s_sum[warp] = mg.sum;
    if (lane < kLanes) s_acc[warp][lane] = mg.acc;
    __syncthreads();
    if (warp != 0) return;
    mg = Merge{};
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
  const float4 a = mg.acc;
  *reinterpret_cast<uint2*>(dst) =
      make_uint2(pack2<T>(a.x * inv, a.y * inv), pack2<T>(a.z * inv, a.w * inv));
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

template <int kLanes>
cudaError_t launch_combine_lanes(const CombineParams& p, DType dtype, bool programmatic,
                                 int device_sms, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(p.max_rows), kVDim / (4 * kLanes),
                  static_cast<unsigned>(p.batch));
  // Enough streams that each reads about kBatch chunks, unless the blocks would no longer all
  // fit the device at once (64 registers a thread: 32 warps a SM): a second wave of blocks
  // costs more than streams that read twice. H200, 2026-12-01, 512 blocks of 66 chunks (V1,
  // D2; ncu, caches flushed): 16 warps a block 11.9 us, 8 warps 10.1 us, and the call 1.5%
  // faster; 128 blocks of 257 chunks (S3) keep 16 (6.6 us, 8 warps 7.0).
  const int64_t blocks = static_cast<int64_t>(grid.x) * grid.y * grid.z;
  int warps = 1;
  while (warps < kMaxWarps && warps * (32 / kLanes) * kBatch < p.num_chunks &&
         blocks * warps * 2 <= 32 * static_cast<int64_t>(device_sms))
    warps *= 2;
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
             ? cudaLaunchKernelEx(&config, combine_kernel<__nv_bfloat16, kLanes>, p)
             : cudaLaunchKernelEx(&config, combine_kernel<__half, kLanes>, p);
}

}  // namespace

cudaError_t launch_combine(const CombineParams& p, DType dtype, bool programmatic, int device_sms,
                           cudaStream_t stream) {
  if (p.total_rows == 0) return cudaSuccess;
  // Narrower slices for fewer rows, so the grid has a few hundred blocks: 4 a row from 128
  // rows up, 8 from 64, else 16 (batch-1 decode of 8 heads: 128 blocks).
  const int64_t rows = static_cast<int64_t>(p.max_rows) * p.batch;
  if (rows >= 128) return launch_combine_lanes<32>(p, dtype, programmatic, device_sms, stream);
  if (rows >= 64) return launch_combine_lanes<16>(p, dtype, programmatic, device_sms, stream);
  return launch_combine_lanes<8>(p, dtype, programmatic, device_sms, stream);
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
