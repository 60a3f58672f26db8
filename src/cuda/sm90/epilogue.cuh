// The sm_90a verify kernel's epilogue (verify_wgmma.cuh): a CTA's O normalised and written as
// the output or as a split chunk's partial, through shared memory, with the rows that came out
// non-finite marked for the exact recomputation.
#pragma once

#include <type_traits>

#include "cuda/common/cta_work.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/common/online_softmax.cuh"
#include "cuda/sm90/softmax.cuh"

namespace treeverify::cuda::sm90 {

// The consumer warpgroups' barrier (named barrier 1; the producer warpgroup never joins it).
__device__ __forceinline__ void consumer_sync() { named_barrier_sync<1, Tile::kConsumerThreads>(); }

// Whether either 16-bit value of a packed pair is an infinity or a NaN (all exponent bits set).
template <typename T>
__device__ __forceinline__ bool nonfinite2(uint32_t v) {
  constexpr uint32_t kExp = std::is_same_v<T, __nv_bfloat16> ? 0x7f807f80u : 0x7c007c00u;
  return __vcmpeq2(v & kExp, kExp) != 0u;
}

// Writes O v_scale / l (v_scale: kv_scale on an e4m3 cache, whose codes the products used, over
// 448 in fast mode, whose P was p x 448; else 1) as the output (one-chunk requests), or O
// part_scale / l (1, or 1 / 448 in fast mode) as a partial in T and its lse (log2) for the
// combine, which applies kv_scale (an e4m3 partial in the codes' units: combine.cuh); a
// row with a non-finite value in O or l is marked NaN in s_lse for the recomputation (the portable
// epilogue's contract, cuda/sm80/tile_ops.cuh).
// The rows go through shared memory (s_out, a free stage) so that the code each CTA runs once is
// short: stored from the accumulators in place, the unrolled normalise/pack/exchange/store
// sequence is 13.8 KB of SASS, and fetching it cold makes about half of S1's instruction-fetch
// stalls, which make 36% of its warp samples (H200: docs/kernels/sm90-wgmma.md). Here the
// unrolled part is the normalise, pack and 16 stmatrix a thread; the copy out and the
// non-finite test are a loop. kTransposed: o is O^T (fast mode, fast_pipeline.cuh), staged by
// 32-bit stores instead.
template <typename T, bool kTransposed = false>
__device__ __forceinline__ void epilogue(const VerifyKernelParams& p, const CtaWork& w,
                                         const Rows& rows, const float (&o)[128], int wg,
                                         float v_scale, float part_scale, float* s_sum,
                                         float* s_lse, float* s_inv_l, uint8_t* s_out) {
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  if (lane % 4 == 0)
    for (int h = 0; h < 2; ++h) s_sum[wg * Tile::kRows + rows.r[h]] = rows.l[h];
  consumer_sync();
  if (wg == 0 && lane % 4 == 0) {
    for (int h = 0; h < 2; ++h) {
      const int r = rows.r[h];
      const float l = s_sum[r] + s_sum[Tile::kRows + r];
      // A partial stays in the codes' units (combine.cuh); the combine applies kv_scale.
      s_inv_l[r] = l == 0.f ? 0.f : (w.final_out ? v_scale : part_scale) / l;
      s_lse[r] = l == 0.f ? kNegInf : rows.m[h] + __log2f(l);
    }
  }
  consumer_sync();
  // O v_scale / l in T, row r at s_out + r kOutPitch: stmatrix j writes 8-column blocks 2 j and
  // 2 j + 1 of this warpgroup's 256 columns, rows lo and hi (matrix k = lane / 8: block
  // 2 j + k / 2, rows 8 (k % 2) + lane % 8 of the warp's 16). A partial's 1/l is at most 1 (l >=
  // 1 where a row saw anything, else 0), so a value non-finite in T marks a row whose O or l was
  // not finite; an output may also overflow T by kv_scale (e4m3), and its exact recomputation
  // writes the same infinity.
  if constexpr (kTransposed) {
    // O^T block mb: accumulator i is column c0 + 2 (lane / 4) (i / 2 % 2 == 0) or + 1, row 8
    // (i / 4) + 2 (lane % 4) + i % 2, c0 = 256 wg + 64 mb + 16 (warp % 4) (load_v_fragments):
    // a thread's two columns of a row are one 32-bit store; a warp's store covers 32 banks
    // (rows 2 (lane % 4) + e are kOutPitch = 8 banks mod 32 apart, columns 4 bytes).
    const int q = lane % 4;
    float inv_l[16];
#pragma unroll
    for (int k = 0; k < 16; ++k) inv_l[k] = s_inv_l[8 * (k / 2) + 2 * q + k % 2];
    uint8_t* col = s_out + (256 * wg + 16 * (warp % 4) + 2 * (lane / 4)) * 2;
#pragma unroll
    for (int mb = 0; mb < 4; ++mb)
#pragma unroll
      for (int k = 0; k < 16; ++k) {
        const float* a = o + 32 * mb + 4 * (k / 2) + k % 2;  // lo at a[0], hi at a[2]
        *reinterpret_cast<uint32_t*>(col + (8 * (k / 2) + 2 * q + k % 2) * Tile::kOutPitch +
                                     128 * mb) = pack2<T>(a[0] * inv_l[k], a[2] * inv_l[k]);
      }
  } else {
    const float inv_l[2] = {s_inv_l[rows.r[0]], s_inv_l[rows.r[1]]};
    const uint32_t row_addr =
        smem_addr(s_out) + (16 * (warp % 4) + 8 * ((lane / 8) % 2) + lane % 8) * Tile::kOutPitch +
        (256 * wg + 8 * (lane / 16)) * 2;
#pragma unroll
    for (int j = 0; j < 16; ++j) {
      const float* a = o + 8 * j;  // accumulators of blocks 2 j (a[0..3]) and 2 j + 1 (a[4..7])
      stmatrix_x4(row_addr + 32 * j, pack2<T>(a[0] * inv_l[0], a[1] * inv_l[0]),
                  pack2<T>(a[2] * inv_l[1], a[3] * inv_l[1]),
                  pack2<T>(a[4] * inv_l[0], a[5] * inv_l[0]),
                  pack2<T>(a[6] * inv_l[1], a[7] * inv_l[1]));
    }
  }
  consumer_sync();  // the staged rows, for every warp's copy
  // Warp w copies rows w, w + 8, ..., 8 bytes a lane (a row's 1 KB in 4 warp stores of whole
  // lines), and marks a row with a non-finite value for the recomputation.
  const int H = p.num_heads;
  constexpr int kWarps = Tile::kConsumerThreads / 32;
#pragma unroll 1
  for (int r = warp; r < Tile::kRows && w.row0 + r < w.rows_b; r += kWarps) {
    const int gr = w.row0 + r, node = gr / H, head = gr % H;
    const int64_t grow = static_cast<int64_t>(w.q0) * H + gr;
    T* out = w.final_out ? static_cast<T*>(p.out) + (w.q0 + node) * p.out_stride_token +
                               head * p.out_stride_head
                         : static_cast<T*>(p.part_out) + (blockIdx.y * p.total_rows + grow) * kVDim;
    const uint8_t* src = s_out + r * Tile::kOutPitch;
    bool bad = false;
#pragma unroll
    for (int k = 0; k < kVDim / 128; ++k) {
      const uint2 v = *reinterpret_cast<const uint2*>(src + 8 * (lane + 32 * k));
      bad |= nonfinite2<T>(v.x) || nonfinite2<T>(v.y);
      *reinterpret_cast<uint2*>(out + 4 * (lane + 32 * k)) = v;
    }
    if (__any_sync(0xffffffffu, bad) && lane == 0) s_lse[r] = NAN;
  }
  consumer_sync();  // the rows' marks
  const int r = static_cast<int>(threadIdx.x);
  if (r < Tile::kRows && w.row0 + r < w.rows_b) {
    const int64_t grow = static_cast<int64_t>(w.q0) * H + w.row0 + r;
    if (w.final_out) {
      if (p.lse != nullptr) p.lse[grow] = s_lse[r] * kLn2;
    } else {
      p.part_lse[blockIdx.y * p.total_rows + grow] = s_lse[r];
    }
  }
}

}  // namespace treeverify::cuda::sm90
