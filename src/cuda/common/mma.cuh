// Thin wrappers over the warp-level tensor-core, ldmatrix and cp.async instructions.
// Fragment layouts follow the PTX ISA, section "Matrix Fragments for mma.m16n8k16 with
// floating point type"; ldmatrix: section "Warp-level matrix load instruction: ldmatrix".
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common/arch.cuh"

namespace treeverify::cuda {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 b16 matrices; lane l supplies the row address of matrix l / 8, row l % 8.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
#if TV_HAS_MMA_SYNC_16816
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

// The same, transposed: for B operands stored k-major (V rows are tokens = the k dimension).
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
#if TV_HAS_MMA_SYNC_16816
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
#endif
}

// Two 8x8 b16 matrices (lanes 0-15 supply the row addresses), plain and transposed.
__device__ __forceinline__ void ldmatrix_x2(uint32_t (&r)[2], uint32_t addr) {
#if TV_HAS_MMA_SYNC_16816
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
#endif
}
__device__ __forceinline__ void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t addr) {
#if TV_HAS_MMA_SYNC_16816
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
#endif
}

// D = A * B + D with e4m3 A and B, fp32 accumulators: m16n8k32 (A 4 registers, B 2) and
// m16n8k16 (A 2, B 1). In byte pairs the fragments have the layouts of the bf16 m16n8k16
// and m16n8k8 ones (docs/kernels/fp8-fast-mode.md, "Fragments").
__device__ __forceinline__ void mma_e4m3_16832(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                               uint32_t b1) {
#if TV_HAS_MMA_E4M3
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}
__device__ __forceinline__ void mma_e4m3_16816(float (&d)[4], const uint32_t (&a)[2], uint32_t b) {
#if TV_HAS_MMA_E4M3
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.e4m3.e4m3.f32 "
      "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b));
#endif
}

// Two floats -> two e4m3 bytes (low byte = first), rounded to nearest even, saturated to
// +-448 (NaN stays NaN).
__device__ __forceinline__ uint16_t pack_e4m3x2(float lo, float hi) {
  uint16_t r = 0;
#if TV_HAS_MMA_E4M3
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;\n" : "=h"(r) : "f"(hi), "f"(lo));
#endif
  return r;
}

// D = A * B + D, m16n8k16, fp32 accumulators. T is __nv_bfloat16 or __half.
template <typename T>
__device__ __forceinline__ void mma_16816(float (&d)[4], const uint32_t (&a)[4], uint32_t b0,
                                          uint32_t b1) {
#if TV_HAS_MMA_SYNC_16816
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#endif
}

// 16-byte global -> shared copy that bypasses L1 (.cg: the KV stream is read once per CTA).
// src_bytes = 0 writes 16 zero bytes without reading: used for rows past the sequence end,
// whose probabilities are 0 but whose values must still be finite.
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, int src_bytes) {
#if TV_HAS_CP_ASYNC
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src),
               "r"(src_bytes));
#endif
}
// 4-byte global -> shared copy (cp.async allows only .ca, through L1, at this size).
__device__ __forceinline__ void cp_async_4(uint32_t dst, const void* src) {
#if TV_HAS_CP_ASYNC
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(dst), "l"(src));
#endif
}
__device__ __forceinline__ void cp_async_commit() {
#if TV_HAS_CP_ASYNC
  asm volatile("cp.async.commit_group;\n" ::);
#endif
}
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if TV_HAS_CP_ASYNC
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
#endif
}

// Barrier kId (1-15; 0 is __syncthreads') over kThreads threads, a multiple of 32: whole
// warps of one group of the CTA wait for each other, the other warps run on. The id is an
// immediate so ptxas reserves only the barriers used.
template <int kId, int kThreads>
__device__ __forceinline__ void named_barrier_sync() {
  static_assert(kId >= 1 && kId <= 15 && kThreads % 32 == 0);
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "n"(kThreads) : "memory");
}

// Two floats -> one register of two 16-bit values (low half = first).
template <typename T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<uint32_t*>(&v);
  }
}

// Stores 16 adjacent columns of a row held by a quad as mma accumulators hold them: lane q of
// the quad has columns 2q, 2q + 1 (w0, packed by pack2) and 8 + 2q, 9 + 2q (w1). One exchange
// with the neighbouring lane gives each lane 4 adjacent columns, so the quad writes its 32
// bytes as 4 stores of 8 (whole sectors) instead of 8 stores of 4 (half a sector each).
// `quad_mask`: the quad's lanes (all four call it together); dst16: column 0, 8-byte aligned.
template <typename T>
__device__ __forceinline__ void store_quad_columns(T* dst16, uint32_t w0, uint32_t w1, int lane,
                                                   uint32_t quad_mask) {
  const int q = lane % 4;
  const uint32_t got = __shfl_xor_sync(quad_mask, q % 2 ? w0 : w1, 1);
  *reinterpret_cast<uint2*>(dst16 + 4 * (q / 2) + 8 * (q % 2)) =
      q % 2 ? make_uint2(got, w1) : make_uint2(w0, got);
}

// One register of two 16-bit values -> two floats (pack2's inverse).
template <typename T>
__device__ __forceinline__ float2 unpack2(uint32_t v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&v));
  } else {
    return __half22float2(*reinterpret_cast<const __half2*>(&v));
  }
}

template <typename T>
__device__ __forceinline__ float to_float(T v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __bfloat162float(v);
  } else {
    return __half2float(v);
  }
}

template <typename T>
__device__ __forceinline__ T from_float(float v) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    return __float2bfloat16_rn(v);
  } else {
    return __float2half_rn(v);
  }
}

}  // namespace treeverify::cuda
