// Host conversions between float and the storage types of q, KV and out (bf16, fp16, e4m3).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#include "treeverify/types.h"

namespace treeverify {

// bf16: the top half of an IEEE float; round to nearest even, NaN kept quiet.
inline uint16_t float_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float bf16_to_float(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16, round to nearest even, with subnormals, overflow to inf and NaN.
inline uint16_t float_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u);   // NaN
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // rounds to >= 65520
  if (x < 0x38800000u) {  // below the smallest normal fp16 (2^-14): subnormal or zero
    if (x < 0x33000000u) return static_cast<uint16_t>(sign);  // below half the smallest
    const uint32_t mant = (x & 0x7fffffu) | 0x800000u;
    const int shift = 126 - static_cast<int>(x >> 23);  // value = mant * 2^(e-126) / 2^-24
    uint32_t r = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rem > half || (rem == half && (r & 1u))) ++r;
    return static_cast<uint16_t>(sign | r);
  }
  uint32_t r = ((x >> 13) - (112u << 10));  // rebias exponent 127 -> 15
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1u))) ++r;
  return static_cast<uint16_t>(sign | r);
}

inline float fp16_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: value = mant * 2^-24
      float f = static_cast<float>(mant) * 5.9604644775390625e-8f;
      std::memcpy(&u, &f, 4);
      u |= sign;
    }
  } else if (exp == 31) {
    u = sign | 0x7f800000u | (mant << 13);
  } else {
    u = sign | ((exp + 112u) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float half_to_float(DType dtype, uint16_t h) {
  return dtype == DType::kBF16 ? bf16_to_float(h) : fp16_to_float(h);
}
inline uint16_t float_to_half(DType dtype, float f) {
  return dtype == DType::kBF16 ? float_to_bf16(f) : float_to_fp16(f);
}
// Rounds a float through the 16-bit type and back.
inline float round_to(DType dtype, float f) {
  return half_to_float(dtype, float_to_half(dtype, f));
}

// float8 e4m3 (OCP e4m3fn): sign, 4 exponent bits (bias 7), 3 mantissa bits; exponent 0 is
// subnormal (m x 2^-9); 0x7f and 0xff are NaN; no infinities; largest finite 448.
inline float e4m3_to_float(uint8_t b) {
  const int e = (b >> 3) & 15, m = b & 7;
  float v;
  if ((b & 0x7f) == 0x7f) {
    v = std::numeric_limits<float>::quiet_NaN();
  } else if (e == 0) {
    v = std::ldexp(static_cast<float>(m), -9);
  } else {
    v = std::ldexp(1.f + m / 8.f, e - 7);
  }
  return (b & 0x80) ? -v : v;
}

// Round to nearest even; NaN gives 0x7f; magnitudes past the largest finite value saturate to
// +-448 (e4m3fn has no infinity), as the saturating conversions of CUDA and the engines do.
inline uint8_t float_to_e4m3(float f) {
  if (std::isnan(f)) return 0x7f;
  const uint8_t sign = std::signbit(f) ? 0x80 : 0;
  const float a = std::fabs(f);
  if (a >= 448.f) return sign | 0x7e;
  if (a < 0x1p-6f) {  // subnormal; m = 8 rounds up to the smallest normal, whose code is 8
    return sign | static_cast<uint8_t>(std::nearbyint(a * 512.f));
  }
  int k;
  const float frac = std::frexp(a, &k);  // a = frac x 2^k, frac in [0.5, 1)
  int e = k - 1 + 7;
  int m = static_cast<int>(std::nearbyint((frac * 2.f - 1.f) * 8.f));
  if (m == 8) m = 0, ++e;
  if (e > 15 || (e == 15 && m == 7)) return sign | 0x7e;
  return sign | static_cast<uint8_t>(e << 3 | m);
}

}  // namespace treeverify
