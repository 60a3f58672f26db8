// Constants shared by the CUDA kernels and their host code. Scores are kept in log2 units
// (softmax_scale * log2(e) folded into the scale) so the kernels use exp2; lse leaves them in
// natural log. The MLA widths (kQKDim, kVDim, ...) are the public ones of treeverify/types.h,
// which code in treeverify::cuda sees unqualified.
#pragma once

#include "treeverify/types.h"

namespace treeverify::cuda {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

// e4m3 fast mode (src/cuda/sm80/fp8_ops.cuh, and the oracle's src/core/fp8_rounding.h, which
// must round the same way): the largest e4m3 value, onto which Q rows (amax) and P (1) are
// scaled, and the cap of Q's multiplier 448 / amax, which keeps a row of tiny values finite.
inline constexpr float kE4M3Max = 448.f;
inline constexpr float kFastQInvCap = 0x1p126f;

}  // namespace treeverify::cuda
