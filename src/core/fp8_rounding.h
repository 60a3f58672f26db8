// The roundings of Precision::kFast (verify.h), written out for the float64 oracle
// (src/cpu/reference.cpp) so that it rounds Q and P exactly as the fast CUDA kernels do. They
// mirror the kernels' arithmetic step by step (float32 where the kernels use float32); the
// kernels do not include this header, so a change to either side must be made to both, and the
// GPU tests, which compare the kernels with this oracle, are what keeps them together.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cuda/common/constants.h"  // kE4M3Max, kFastQInvCap: the kernels' constants
#include "treeverify/half.h"
#include "treeverify/verify.h"

namespace treeverify::detail {

// The largest finite e4m3 value: the fast kernels scale Q rows and P so their largest
// magnitude lands on it, using all of e4m3's normal range (its smallest normal is 2^-6).
using cuda::kE4M3Max;

// A query row's e4m3 scaling (a row: one token's head, 576 values): code = e4m3(q x inv) and
// the value the products see is code x scale. A zero row keeps scale 1 (its codes are 0).
struct FastQRow {
  float amax = 0.f;    // max |q| over the row, float32
  float inv = 1.f;     // 448 / amax in float32, as the kernel multiplies by it, capped at 2^126
  double scale = 1.0;  // 1 / inv (float64, about amax / 448): the dequantization factor
};

// T is float or double holding values read from bf16/fp16, so the float conversion is exact.
template <typename T>
FastQRow fast_q_row(const T* q, int n) {
  FastQRow r;
  for (int c = 0; c < n; ++c) r.amax = std::max(r.amax, std::fabs(static_cast<float>(q[c])));
  if (r.amax > 0.f) {
    // The cap keeps a row of tiny values (amax under 448 / FLT_MAX: bf16 subnormals) finite.
    r.inv = std::min(kE4M3Max / r.amax, cuda::kFastQInvCap);
    r.scale = 1.0 / r.inv;
  }
  return r;
}

// The e4m3 code of one value of the row: a float32 product, then the saturating
// round-to-nearest-even conversion (as cvt.rn.satfinite.e4m3x2.f32 does).
inline uint8_t fast_q_code(float q, const FastQRow& row) { return float_to_e4m3(q * row.inv); }

// The code of the value's second term, with the same scale: what the first leaves of the
// float32 product, rounded the same way (x - e4m3(x) is exact in float32).
inline uint8_t fast_q_lo_code(float q, const FastQRow& row) {
  const float x = q * row.inv;
  return float_to_e4m3(x - e4m3_to_float(float_to_e4m3(x)));
}

// How many e4m3 terms a fast kernel holds each Q value in: two (hi + lo, the second the
// first's rounding error) in the mma.sync kernels (cuda/sm80/fp8_ops.cuh, quantize_q), one in
// the sm_90a wgmma kernel (cuda/sm90/fast_operands.cuh).
inline constexpr int kFastQTerms = 2;
inline int fast_q_terms(const Plan& plan) { return plan.state.wgmma ? 1 : kFastQTerms; }

// In place: each value of the row replaced by the one the fast kernels' Q.K products see,
// for a kernel that holds Q in `terms` (1 or 2) e4m3 terms.
inline void round_q_row_fast(double* q, int n, int terms) {
  const FastQRow row = fast_q_row(q, n);
  for (int c = 0; c < n; ++c) {
    const float v = static_cast<float>(q[c]);
    double codes = e4m3_to_float(fast_q_code(v, row));
    if (terms == 2) codes += e4m3_to_float(fast_q_lo_code(v, row));
    q[c] = codes * row.scale;
  }
}

// A softmax probability p = exp(s - max) in [0, 1] as the fast kernels' P.V product sees it:
// p x 448 (float32) rounded to e4m3, then divided by 448 again. The row's normaliser sums the
// unrounded p's, here and in the kernels.
inline double round_p_fast(double p) {
  return e4m3_to_float(float_to_e4m3(static_cast<float>(p) * kE4M3Max)) / double{kE4M3Max};
}

// The type round_p rounds P to for exact products, as the GPU kernels feed P to them: the
// input dtype, or fp16 with an e4m3 cache (exact mode's products are fp16: every e4m3 value
// is an fp16 value, and Q is brought to fp16 by a power of two a row; cuda/sm80/fp8_ops.cuh).
inline DType p_round_dtype(const Plan& plan) {
  return plan.kv_format == KvFormat::kE4M3 ? DType::kFP16 : plan.dtype;
}

}  // namespace treeverify::detail
