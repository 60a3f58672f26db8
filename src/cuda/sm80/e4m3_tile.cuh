// The portable kernel's e4m3 tiles in shared memory: where a tile's codes land in a stage, and
// their widening to fp16 in place (exact mode's 64-row variants; the codes' conversions:
// cuda/common/e4m3.cuh).
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/constants.h"
#include "cuda/common/e4m3.cuh"
#include "cuda/sm80/config.h"

namespace treeverify::cuda::sm80 {

// e4m3 caches (kE4M3): a tile's 576-byte rows land in the last 576 bytes of each 1168-byte
// stage row, where the products of the 16 and 32-row variants and fast mode read them
// (fp8_ops.cuh) and dequantize_tile widens them in place to fp16 for the 64-row variants
// (Variant::kE4M3InRegisters).
inline constexpr int kE4M3RowOffset = kKVRowBytes - kQKDim;  // 592, 16-byte aligned

// 16 e4m3 codes of a stage row, widened, as 16 fp16 values at shared address `dst`.
__device__ __forceinline__ void widen_piece(uint32_t dst, uint4 in) {
  const uint32_t w[4] = {in.x, in.y, in.z, in.w};
  uint32_t o[8];
#pragma unroll
  for (int j = 0; j < 4; ++j) e4m3x4_to_f16x2x2(w[j], o[2 * j], o[2 * j + 1]);
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst), "r"(o[0]), "r"(o[1]),
               "r"(o[2]), "r"(o[3]));
  asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(dst + 16), "r"(o[4]), "r"(o[5]),
               "r"(o[6]), "r"(o[7]));
}

// 16 bytes of shared memory at `addr` (16-byte aligned).
__device__ __forceinline__ uint4 ld_shared_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "r"(addr));
  return v;
}

// Widens the e4m3 tile at kE4M3RowOffset of each stage row into the fp16 row layout the
// products read (exact: every e4m3 value is an fp16 value; the cache's scale is applied to
// the scores and the output instead). A row's 16-bit values overwrite its own e4m3
// bytes and no other row's, so one warp takes a row: its lanes read the row's 36 pieces of 16
// values, meet at __syncwarp, then write. Warp w takes rows w, w + 8, ...: the rows it copied
// (load_kv_tile), so once each lane's own copies have landed a __syncwarp makes the rows
// visible to the warp. Few registers live at once (the 64-row variants sit at 255). The
// caller publishes the tile with a barrier.
template <typename V>
__device__ __forceinline__ void dequantize_tile(uint32_t stage) {
  constexpr int kRowPieces = kQKDim / 16;  // 36: lanes 0-31, then lanes 0-3 again
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  __syncwarp();  // the lanes' copies of the warp's rows, landed for each, seen by all
  for (int row = warp; row < V::kTokens; row += V::kWarps) {
    const uint32_t r = stage + row * kKVRowBytes;
    const uint4 a = ld_shared_v4(r + kE4M3RowOffset + lane * 16);
    uint4 b = make_uint4(0, 0, 0, 0);
    if (lane < kRowPieces - 32) b = ld_shared_v4(r + kE4M3RowOffset + (32 + lane) * 16);
    __syncwarp();
    widen_piece(r + lane * 32, a);
    if (lane < kRowPieces - 32) widen_piece(r + (32 + lane) * 32, b);
    __syncwarp();  // the row's reads and writes are done before the lanes move on
  }
}

}  // namespace treeverify::cuda::sm80
