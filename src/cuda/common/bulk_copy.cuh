// Thin wrappers over mbarriers and the bulk asynchronous copy (sm_90+): one instruction moves
// a whole contiguous row into shared memory and reports its bytes to an mbarrier, which
// threads then wait on by phase parity. PTX ISA: "Parallel Synchronization and Communication
// Instructions: mbarrier" and "cp.async.bulk".
#pragma once

#include <cstdint>

#include "cuda/common/arch.cuh"

namespace treeverify::cuda {

// Makes the mbarrier at `bar` expect `count` arrivals per phase.
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count = 1) {
#if TV_HAS_BULK_COPY
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(count));
#endif
}

// Orders mbarrier initialisation before their use by the async proxy (follow with a barrier).
__device__ __forceinline__ void mbar_init_fence() {
#if TV_HAS_BULK_COPY
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#endif
}

// One arrival on the mbarrier's current phase.
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
#if TV_HAS_BULK_COPY
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
#endif
}

// One arrival on the mbarrier's current phase where `pred` holds, without a branch: for code
// that must not join control flow (a wgmma in flight, sm90/verify_wgmma.cuh).
__device__ __forceinline__ void mbar_arrive_if(uint32_t bar, bool pred) {
#if TV_HAS_BULK_COPY
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "setp.ne.u32 p, %1, 0;\n"
      "@p mbarrier.arrive.shared::cta.b64 _, [%0];\n"
      "}\n" ::"r"(bar),
      "r"(static_cast<uint32_t>(pred))
      : "memory");
#endif
}

// One arrival, made when every cp.async this thread issued before it has landed (the
// mbarrier's count includes it: .noinc).
__device__ __forceinline__ void cp_async_mbar_arrive(uint32_t bar) {
#if TV_HAS_BULK_COPY
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(bar) : "memory");
#endif
}

// The phase's one arrival, announcing `bytes` of copies that will complete on it.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
#if TV_HAS_BULK_COPY
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}

// Waits until the phase of parity `parity` of the mbarrier has completed.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#if TV_HAS_BULK_COPY
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "wait_%=:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra wait_%=;\n"
      "}\n" ::"r"(bar),
      "r"(parity)
      : "memory");
#endif
}

// Whether the phase of parity `parity` of the mbarrier has completed, without waiting.
__device__ __forceinline__ bool mbar_test(uint32_t bar, uint32_t parity) {
  uint32_t done = 1;
#if TV_HAS_BULK_COPY
  asm volatile(
      "{\n"
      ".reg .pred p;\n"
      "mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n"
      "}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
#endif
  return done != 0;
}

// Copies `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to shared
// memory; completion is counted on the mbarrier at `bar`.
__device__ __forceinline__ void bulk_copy_g2s(uint32_t dst, const void* src, uint32_t bytes,
                                              uint32_t bar) {
#if TV_HAS_BULK_COPY
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::
          "r"(dst),
      "l"(src), "r"(bytes), "r"(bar)
      : "memory");
#endif
}

// A TMA tensor copy of the box at coordinates (c0, c1, c2) of the tensor map `map` (a
// __grid_constant__ kernel parameter) to shared memory at `dst`, in the map's swizzle;
// completion is counted on the mbarrier at `bar`.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const void* map, int c0, int c1, int c2,
                                            uint32_t bar) {
#if TV_HAS_BULK_COPY
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], "
      "[%1, {%2, %3, %4}], [%5];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
      : "memory");
#endif
}

}  // namespace treeverify::cuda
