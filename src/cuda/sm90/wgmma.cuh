// Thin wrappers over the warpgroup MMA of sm_90a (wgmma.mma_async) and its fences, with B in
// shared memory and A in shared memory or registers. PTX ISA: "Asynchronous Warpgroup Level Matrix
// Multiply-Accumulate Operation" and its "Matrix Descriptor Format"; the canonical layouts are
// CUTLASS's (cute/atom/mma_traits_sm90_gmma.hpp, make_gmma_desc).
//
// Two layouts are used. Without swizzle ("interleave"), a core matrix is 8 rows of 16 bytes
// stored as 128 contiguous bytes; for a K-major operand (rows of M or N, 8 values of K in a
// row of the core matrix) and an N-major one (rows of K, 8 values of N), the leading byte
// offset is the distance between core matrices adjacent in K, the stride byte offset between
// core matrices adjacent in M or N. With the 128-byte swizzle, rows of 128 bytes (64 values)
// whose 16-byte units are XORed with the row's index mod 8, in 1024-byte atoms of 8 rows: for
// a K-major operand the stride byte offset is the distance between 8-row groups (the leading
// one is unused; a k step inside the row moves the start address by 32 bytes); for an N-major
// one the leading byte offset is the distance between 64-value blocks of N, the stride byte
// offset between 8-row groups of K.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/arch.cuh"

namespace treeverify::cuda::sm90 {

// A shared-memory matrix descriptor: start address, leading and stride byte offsets, each in
// 16-byte units in 14 bits, and the layout (bits 62-63: 0 no swizzle, 1 128-byte swizzle, 2 64-byte
// swizzle).
enum class Swizzle : uint64_t { kNone = 0, k128B = 1, k64B = 2 };
template <Swizzle kSwizzle = Swizzle::kNone>
__device__ __forceinline__ uint64_t smem_desc(uint32_t addr, uint32_t lead_bytes,
                                              uint32_t stride_bytes) {
  return static_cast<uint64_t>((addr >> 4) & 0x3fffu) |
         static_cast<uint64_t>((lead_bytes >> 4) & 0x3fffu) << 16 |
         static_cast<uint64_t>((stride_bytes >> 4) & 0x3fffu) << 32 |
         static_cast<uint64_t>(kSwizzle) << 62;
}

// Orders this thread's earlier register and shared-memory accesses before the warpgroup's
// next wgmma (required before the first wgmma, and whenever its accumulators were touched).
__device__ __forceinline__ void wgmma_fence() {
#if TV_HAS_WGMMA
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#endif
}
// Closes the wgmma operations issued so far into a group.
__device__ __forceinline__ void wgmma_commit() {
#if TV_HAS_WGMMA
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#endif
}
// Waits until at most kPending groups of this warpgroup are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
#if TV_HAS_WGMMA
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#endif
}
// Makes shared memory written by this thread's ordinary stores and cp.async copies visible to
// the async proxy that wgmma reads operands through (then a barrier for the other threads).
__device__ __forceinline__ void fence_proxy_async() {
#if TV_HAS_WGMMA
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// Stores four 8x8 matrices of 16-bit values held as mma accumulators hold them (register k of
// lane i: row i / 4, columns 2 (i % 4) and + 1 of matrix k); lane i gives the address of row
// i % 8 of matrix i / 8.
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2,
                                            uint32_t r3) {
#if TV_HAS_WGMMA
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r0), "r"(r1), "r"(r2), "r"(r3)
               : "memory");
#endif
}

// The registers a thread of this warpgroup holds from here on (every warp of the warpgroup
// executes the same one): .dec gives registers back to the SM, .inc waits until it has them.
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_dec() {
#if TV_HAS_WGMMA
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}
template <int kRegisters>
__device__ __forceinline__ void setmaxnreg_inc() {
#if TV_HAS_WGMMA
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#endif
}

// Pins accumulator registers at this point of the program: the compiler may neither read them
// before a wgmma_wait nor write them after a wgmma is issued (wgmma updates them behind its
// back). CUTLASS's warpgroup_fence_operand.
template <int N>
__device__ __forceinline__ void fence_accumulators(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// One wgmma with both operands in shared memory, D in fp32: `shape` and `type` (bf16 or f16)
// name the instruction, `regs` is the text of D's operand list and `outs` its constraints; the
// operands after D are numbered from `next` (desc_a, desc_b, the accumulate predicate, the
// B transpose flag). A macro because inline assembly takes only literal strings.
#define TV_WGMMA_SS(shape, type, regs, outs, next_a, next_b, next_p, next_t)                       \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" next_p                                         \
               ", 0;\n"                                                                            \
               "wgmma.mma_async.sync.aligned." shape ".f32." type "." type " {" regs "}, %" next_a \
               ", %" next_b ", p, 1, 1, 0, %" next_t ";\n}\n"                                      \
               : outs                                                                              \
               : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransB))
// The same with A from registers (four 32-bit registers a thread, operands `a0`-`a3`); only B
// takes a transpose flag.
#define TV_WGMMA_RS(shape, type, regs, outs, a0, a1, a2, a3, next_b, next_p, next_t)            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" next_p                                      \
               ", 0;\n"                                                                         \
               "wgmma.mma_async.sync.aligned." shape ".f32." type "." type " {" regs "}, {%" a0 \
               ", %" a1 ", %" a2 ", %" a3 "}, %" next_b ", p, 1, 1, %" next_t ";\n}\n"          \
               : outs                                                                           \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),                       \
                 "r"(static_cast<int>(accumulate)), "n"(kTransB))
#define TV_WGMMA_D32_REGS                                                                      \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, " \
  "%20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
#define TV_WGMMA_D32_OUTS                                                                         \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
#define TV_WGMMA_D128_REGS \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, \
  %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, \
  %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, \
  %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, \
  %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, \
  %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, \
  %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, \
  %127"
#define TV_WGMMA_D128_OUTS                                                                        \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), \
      "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]),    \
      "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]),  \
      "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]),  \
      "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),  \
      "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]),  \
      "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]),  \
      "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),  \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),  \
      "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]),  \
      "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),  \
      "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]),  \
      "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]),  \
      "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]),  \
      "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),          \
      "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]),         \
      "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),         \
      "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]),         \
      "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])

// D (m64n64, fp32) {=, +=} A (m64k16, shared memory, K-major) x B (k16n64, shared memory;
// kTransB: N-major), T = bf16 or fp16. `accumulate` false overwrites D.
template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_m64n64k16(float (&d)[32], uint64_t desc_a, uint64_t desc_b,
                                                bool accumulate) {
#if TV_HAS_WGMMA
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    TV_WGMMA_SS("m64n64k16", "bf16", TV_WGMMA_D32_REGS, TV_WGMMA_D32_OUTS, "32", "33", "34", "35");
  else
    TV_WGMMA_SS("m64n64k16", "f16", TV_WGMMA_D32_REGS, TV_WGMMA_D32_OUTS, "32", "33", "34", "35");
#endif
}

// D (m64n256, fp32) {=, +=} A (m64k16, shared memory, K-major) x B (k16n256, shared memory;
// kTransB: N-major), T = bf16 or fp16. `accumulate` false overwrites D.
template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b,
                                                 bool accumulate) {
#if TV_HAS_WGMMA
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    TV_WGMMA_SS("m64n256k16", "bf16", TV_WGMMA_D128_REGS, TV_WGMMA_D128_OUTS, "128", "129", "130",
                "131");
  else
    TV_WGMMA_SS("m64n256k16", "f16", TV_WGMMA_D128_REGS, TV_WGMMA_D128_OUTS, "128", "129", "130",
                "131");
#endif
}

// D (m64n256, fp32) {=, +=} A (m64k16, registers: a thread's 4 registers of 16-bit pairs in
// the accumulator layout of 16 columns, see verify_wgmma.cuh) x B (k16n256, shared memory;
// kTransB: N-major), T = bf16 or fp16.
template <typename T, int kTransB>
__device__ __forceinline__ void wgmma_m64n256k16_rs(float (&d)[128], const uint32_t (&a)[4],
                                                    uint64_t desc_b, bool accumulate) {
#if TV_HAS_WGMMA
  if constexpr (std::is_same_v<T, __nv_bfloat16>)
    TV_WGMMA_RS("m64n256k16", "bf16", TV_WGMMA_D128_REGS, TV_WGMMA_D128_OUTS, "128", "129", "130",
                "131", "132", "133", "134");
  else
    TV_WGMMA_RS("m64n256k16", "f16", TV_WGMMA_D128_REGS, TV_WGMMA_D128_OUTS, "128", "129", "130",
                "131", "132", "133", "134");
#endif
}

// e4m3 x e4m3 (fast mode), fp32 D: both operands K-major (wgmma takes no transpose for 8-bit
// types), 32 values of K a step. A from shared memory (SS) or from registers (RS: a thread's 4
// registers of 4 codes, rows lo = 16 (warp % 4) + lane / 4 and hi = lo + 8: register 0 holds
// row lo, k 4 (lane % 4) .. + 3, register 1 row hi at the same k, registers 2 and 3 the same
// 16 values of k further).
#define TV_WGMMA8_SS(shape, regs, outs, next_a, next_b, next_p)                            \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" next_p                                 \
               ", 0;\n"                                                                    \
               "wgmma.mma_async.sync.aligned." shape ".f32.e4m3.e4m3 {" regs "}, %" next_a \
               ", %" next_b ", p, 1, 1;\n}\n"                                              \
               : outs                                                                      \
               : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)))
#define TV_WGMMA8_RS(shape, regs, outs, a0, a1, a2, a3, next_b, next_p)                          \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" next_p                                       \
               ", 0;\n"                                                                          \
               "wgmma.mma_async.sync.aligned." shape ".f32.e4m3.e4m3 {" regs "}, {%" a0 ", %" a1 \
               ", %" a2 ", %" a3 "}, %" next_b ", p, 1, 1;\n}\n"                                 \
               : outs                                                                            \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b),                        \
                 "r"(static_cast<int>(accumulate)))

// D (m64n64, fp32) {=, +=} A (m64k32 e4m3, shared memory) x B (k32n64 e4m3, shared memory).
__device__ __forceinline__ void wgmma_m64n64k32_e4m3(float (&d)[32], uint64_t desc_a,
                                                     uint64_t desc_b, bool accumulate) {
#if TV_HAS_WGMMA
  TV_WGMMA8_SS("m64n64k32", TV_WGMMA_D32_REGS, TV_WGMMA_D32_OUTS, "32", "33", "34");
#endif
}

// D (m64n64, fp32) {=, +=} A (m64k32 e4m3, registers) x B (k32n64 e4m3, shared memory).
__device__ __forceinline__ void wgmma_m64n64k32_e4m3_rs(float (&d)[32], const uint32_t (&a)[4],
                                                        uint64_t desc_b, bool accumulate) {
#if TV_HAS_WGMMA
  TV_WGMMA8_RS("m64n64k32", TV_WGMMA_D32_REGS, TV_WGMMA_D32_OUTS, "32", "33", "34", "35", "36",
               "37");
#endif
}

#undef TV_WGMMA_SS
#undef TV_WGMMA_RS
#undef TV_WGMMA8_SS
#undef TV_WGMMA8_RS
#undef TV_WGMMA_D32_REGS
#undef TV_WGMMA_D32_OUTS
#undef TV_WGMMA_D128_REGS
#undef TV_WGMMA_D128_OUTS

}  // namespace treeverify::cuda::sm90
