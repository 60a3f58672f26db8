// The online softmax's arithmetic that both verify kernels use (log2 units): the SFU's 2^x and
// the running max's update rule.
#pragma once

#include <cuda_runtime.h>

#include <cmath>

namespace treeverify::cuda {

inline constexpr float kNegInf = -INFINITY;

// 2^x by the SFU (ex2.approx.ftz: 2 ulp; results below 2^-126 flush to 0, which no 16-bit
// probability or fp32 running sum can tell apart). exp2f would add a denormal fix-up.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The running max a row moves to after a tile whose largest score is tile_max (log2 units).
// With kLagging (16-bit P) it moves only when the tile passes it by more than kMaxLag, so P =
// 2^(s - m) stays at most 2^kMaxLag and O and l are rescaled in few tiles (a warp skips the
// 128 multiplies of its O rows when none of them moved); out = O / l and lse = m + log2 l do
// not depend on which m O and l are relative to. 2^8 keeps 16-bit P and fp32 O and l far from
// overflow (FlashAttention-4's threshold). Fast mode's P codes (p x 448) need p <= 1: exact max.
// A row that has seen nothing keeps -inf (-inf - -inf is NaN, so no move).
inline constexpr float kMaxLag = 8.f;
template <bool kLagging>
__device__ __forceinline__ float next_running_max(float m, float tile_max) {
  if constexpr (kLagging) return tile_max - m > kMaxLag ? tile_max : m;
  return fmaxf(m, tile_max);
}

}  // namespace treeverify::cuda
