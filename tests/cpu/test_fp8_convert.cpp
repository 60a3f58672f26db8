// The e4m3 -> fp16 widening that the exact-mode kernels compiled for sm_80 and sm_86 use
// (src/cuda/common/fp8_convert.h; sm_89 and newer use cvt.rn.f16x2.e4m3x2), on every pair of
// codes against the oracle's decoding (treeverify/half.h): no such GPU is here to run it. And
// exact mode's power of two for a Q row (the wgmma kernel's; the portable kernel spells it out).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

#include "treeverify/half.h"

#if TREEVERIFY_WITH_CUDA
#include "cuda/common/fp8_convert.h"
#endif

namespace treeverify {
namespace {

TEST(Fp8Convert, GenericWideningIsExactOnEveryPairOfCodes) {
#if TREEVERIFY_WITH_CUDA
  // The fp16 bits of code b: its value is an fp16 value, so float_to_fp16 rounds nothing.
  auto expected = [](uint32_t b) { return float_to_fp16(e4m3_to_float(static_cast<uint8_t>(b))); };
  auto same = [&](uint32_t b, uint32_t half) {
    if (std::isnan(e4m3_to_float(static_cast<uint8_t>(b))))
      return std::isnan(fp16_to_float(static_cast<uint16_t>(half)));
    return half == expected(b);
  };
  int wrong = 0;
  for (uint32_t pair = 0; pair < 0x10000u; ++pair) {
    const uint32_t x = pair | (pair ^ 0xa55au) << 16;  // every pair low; another pair high
    uint32_t lo = 0, hi = 0;
    cuda::e4m3x4_to_f16x2x2_generic(x, lo, hi);
    for (int k = 0; k < 4; ++k) {
      const uint32_t b = x >> (8 * k) & 0xffu;
      const uint32_t half = (k < 2 ? lo : hi) >> (16 * (k % 2)) & 0xffffu;
      if (!same(b, half) && ++wrong <= 5)
        ADD_FAILURE() << "code 0x" << std::hex << b << " byte " << k << " of 0x" << x
                      << " gave fp16 0x" << half << ", expected 0x" << expected(b);
    }
  }
  EXPECT_EQ(wrong, 0);
#else
  GTEST_SKIP() << "built without the CUDA backend (cuda_fp8.h)";
#endif
}

// Exact mode's power of two for a bf16 Q row (cuda::exact_q_shift, the wgmma kernel's prepare_q_f16),
// on every bf16 magnitude: a finite nonzero largest magnitude lands in [2^14, 2^15) (subnormals
// as far up as 2^126 takes them), 2^s and 2^-s are normal floats, and zero, infinity and NaN
// keep s = 0.
TEST(Fp8Convert, ExactModeQShiftOnEveryBf16Magnitude) {
#if TREEVERIFY_WITH_CUDA
  for (uint32_t amax = 0; amax <= 0x7fffu; ++amax) {
    const int s = cuda::exact_q_shift(amax);
    const float m = bf16_to_float(static_cast<uint16_t>(amax));
    if (amax == 0 || !std::isfinite(m)) {
      EXPECT_EQ(s, 0) << "bits 0x" << std::hex << amax;
      continue;
    }
    ASSERT_GE(s, -113) << "bits 0x" << std::hex << amax;
    ASSERT_LE(s, 126) << "bits 0x" << std::hex << amax;
    const double scaled = std::ldexp(static_cast<double>(m), s);
    EXPECT_LT(scaled, 32768.0) << "bits 0x" << std::hex << amax;
    if (s < 126) EXPECT_GE(scaled, 16384.0) << "bits 0x" << std::hex << amax;
  }
#else
  GTEST_SKIP() << "built without the CUDA backend";
#endif
}

}  // namespace
}  // namespace treeverify
