// Constants shared by the CUDA kernels and their host code. Scores are kept in log2 units
// (softmax_scale * log2(e) folded into the scale) so the kernels use exp2; lse leaves them in
// natural log. The MLA widths (kQKDim, kVDim, ...) are the public ones of treeverify/types.h,
// which code in treeverify::cuda sees unqualified.
#pragma once

#include "treeverify/types.h"

namespace treeverify::cuda {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;

}  // namespace treeverify::cuda
