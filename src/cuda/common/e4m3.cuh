// e4m3 codes to float and to fp16 on the device, for both verify kernels and the NaN
// recomputation (exact: every e4m3 value is an fp16 value).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/arch.cuh"
#include "cuda/common/fp8_convert.h"

namespace treeverify::cuda {

// e4m3 (OCP e4m3fn) to float: sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0
// is subnormal (m x 2^-9); 0x7f and 0xff are NaN. Exact, without the scale.
__device__ __forceinline__ float e4m3_to_float(uint32_t b) {
  const uint32_t e = (b >> 3) & 15u, m = b & 7u;
  float v = e == 0 ? static_cast<float>(m) * 0x1p-9f : __uint_as_float((e + 120u) << 23 | m << 20);
  v = (b & 0x7fu) == 0x7fu ? __int_as_float(0x7fc00000) : v;
  return (b & 0x80u) ? -v : v;
}

// Four e4m3 codes (low byte first) as two fp16 pairs: bytes 0, 1 to `lo`, 2, 3 to `hi`. Two
// cvt.rn.f16x2.e4m3x2 on sm_89+ (ptxas reads the high half in place: F2FP ... R.H1); before
// sm_89, cuda_fp8.h's integer code (fp8_convert.h). Exact, NaN kept.
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t x, uint32_t& lo, uint32_t& hi) {
#if TV_HAS_CVT_E4M3
  asm("{\n .reg .b16 l, h;\n mov.b32 {l, h}, %2;\n cvt.rn.f16x2.e4m3x2 %0, l;\n"
      " cvt.rn.f16x2.e4m3x2 %1, h;\n}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(x));
#else
  e4m3x4_to_f16x2x2_generic(x, lo, hi);  // checked on the CPU (fp8_convert.h)
#endif
}

}  // namespace treeverify::cuda
