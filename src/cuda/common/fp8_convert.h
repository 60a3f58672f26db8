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

}  // namespace treeverify::cuda
