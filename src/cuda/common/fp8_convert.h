// Four e4m3 codes as two fp16 pairs by cuda_fp8.h's conversion, for code without the sm_89
// cvt.rn.f16x2.e4m3x2 (the kernels compiled for sm_80 and sm_86: tile_ops.cuh,
// e4m3x4_to_f16x2x2). Host and device, so tests/cpu/test_fp8_convert.cpp checks it, on every
// pair of codes, against the oracle's decoding: no GPU of those architectures is here to run it.
#pragma once

#include <cuda_fp8.h>

#include <cstdint>

namespace treeverify::cuda {

// Bytes 0 and 1 of `x` to the low and high halves of `lo`, bytes 2 and 3 to those of `hi`.
// Exact (every e4m3 value is an fp16 value), NaN kept.
__host__ __device__ inline void e4m3x4_to_f16x2x2_generic(uint32_t x, uint32_t& lo, uint32_t& hi) {
  auto two = [](uint32_t b) {
    const __half2_raw h =
        __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(b), __NV_E4M3);
    return static_cast<uint32_t>(h.x) | static_cast<uint32_t>(h.y) << 16;
  };
  lo = two(x & 0xffffu), hi = two(x >> 16);
}

// Exact mode's power of two for a bf16 Q row (the wgmma kernel's prepare_q_f16): s such that
// 2^s brings the row's largest magnitude into [2^14, 2^15), so that rounding the row to fp16
// keeps every value down to 2^-38 of the largest. `amax` is that magnitude's bf16 bits
// (magnitudes order as unsigned integers; a NaN reads above infinity); floor(log2) comes from
// its exponent field (a subnormal reads as -127). 0 for a zero row and for one with a NaN or
// infinity (which must end NaN). s lies in [-113, 126], so 2^s and 2^-s are normal floats. The
// portable kernel (cuda/sm80/fp8_ops.cuh) spells the same rule out: through this call ptxas
// spills 4 bytes in its 255-register r64-s3-t16 variant.
__host__ __device__ constexpr int exact_q_shift(uint32_t amax) {
  const int e = static_cast<int>(amax >> 7) - 127;
  return amax != 0 && e < 128 ? (14 - e < 126 ? 14 - e : 126) : 0;
}

}  // namespace treeverify::cuda
