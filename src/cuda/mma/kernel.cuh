// The portable split-KV MLA tree-verify kernel: mma.sync + ldmatrix + cp.async, sm_80..sm_120.
//
// One CTA = kRows query rows (row r of request b is node r / H, head r % H) x one chunk of
// that request's KV sequence. The chunk streams through a kStages-deep cp.async pipeline of
// kTileTokens-token tiles; each tile is read from memory once and used by all kRows rows:
//   1. S = Q K^T: warp (kgroup, nhalf) multiplies its register-resident 144-deep Q slice with
//      16 tokens of the tile; the 4 k-group partials meet in shared memory (s_red).
//   2. Online softmax (fp32, log2 units): warp w sums the partials of rows [4w, 4w+4),
//      applies the sequence end and, only in tiles that reach the tree region, the ancestor
//      mask; it writes P (rounded to the input dtype) and each row's rescale factor.
//   3. O += P V: warp w owns output columns [64w, 64w+64) of every row; V is the first 512
//      columns of the same KV tile (ldmatrix.trans), P comes from shared memory.
// A request with one chunk writes out/lse directly; otherwise each chunk writes a normalised
// fp32 partial and its lse, merged by the combine kernel. See DESIGN_NOTES.md beside this.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/arch.cuh"
#include "cuda/common/mma.cuh"
#include "cuda/mma/config.h"
#include "cuda/mma/params.h"

namespace treeverify::cuda::mma {

inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr float kNegInf = -INFINITY;

// Copies kTileTokens KV rows starting at sequence token `first` (rows past `end` are zero
// filled) into one pipeline stage: 8 threads per token, 9 x 16 bytes each, so one page-table
// lookup per thread and 128 contiguous bytes per 8 lanes.
__device__ __forceinline__ void load_kv_tile(const VerifyKernelParams& p, uint32_t stage_addr,
                                             int page_base, int first, int end) {
  constexpr int kChunks = kQKDim * 2 / 16;  // 72 16-byte pieces per row
  constexpr int kThreadsPerToken = kThreads / kTileTokens;  // 8
  static_assert(kChunks % kThreadsPerToken == 0);
  const int tok = threadIdx.x / kThreadsPerToken;
  const int sub = threadIdx.x % kThreadsPerToken;
  const int t = first + tok;
  const char* src = static_cast<const char*>(p.kv);
  int bytes = 0;
  if (t < end) {
    const int64_t page = p.kv_page_indices[page_base + (t >> p.page_shift)];
    const int64_t row = (page << p.page_shift) + (t & ((1 << p.page_shift) - 1));
    src += row * (kQKDim * 2);
    bytes = 16;
  }
  const uint32_t dst = stage_addr + tok * kKVRowBytes;
#pragma unroll
  for (int i = 0; i < kChunks / kThreadsPerToken; ++i) {
    const int c = sub + i * kThreadsPerToken;
    cp_async_16(dst + c * 16, src + c * 16 * (bytes != 0), bytes);
  }
}

template <typename T, int kStages>
__global__ void __launch_bounds__(kThreads, 1)
    verify_mma_kernel(const __grid_constant__ VerifyKernelParams p) {
#if TV_HAS_MMA_SYNC_16816
  const int b = blockIdx.z;
  const int q0 = p.qo_indptr[b];
  const int num_nodes = p.qo_indptr[b + 1] - q0;
  const int H = p.num_heads;
  const int rows_b = num_nodes * H;
  const int row0 = blockIdx.x * kRows;
  if (row0 >= rows_b) return;
  const int kv_len = p.kv_len[b];
  const int prefix = kv_len - num_nodes;
  const int tok_begin = blockIdx.y * p.chunk_tokens;
  if (tok_begin >= kv_len) return;
  const int tok_end = min(kv_len, tok_begin + p.chunk_tokens);
  const int n_chunks_b = (kv_len + p.chunk_tokens - 1) / p.chunk_tokens;
  const int page_base = p.kv_page_indptr[b];

  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t s_kv = smem_addr(smem);
  float* s_red = reinterpret_cast<float*>(smem + kStages * kStageBytes);
  T* s_p = reinterpret_cast<T*>(smem + kStages * kStageBytes + kRedBytes);
  float* s_alpha = reinterpret_cast<float*>(smem + kStages * kStageBytes + kRedBytes + kPBytes);
  float* s_lse = s_alpha + kRows;

  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int kgroup = warp % kKGroups;
  const int nhalf = warp / kKGroups;

  // ---- Q: stage it through pipeline buffer 0, then keep this warp's k-slice in registers.
  {
    const int r = threadIdx.x / 8;  // 8 threads per row, 9 x 16 bytes each
    const int sub = threadIdx.x % 8;
    const int gr = row0 + r;
    const char* src = static_cast<const char*>(p.q);
    int bytes = 0;
    if (gr < rows_b) {
      const int node = gr / H, head = gr % H;
      src += ((q0 + node) * p.q_stride_token + head * p.q_stride_head) * 2;
      bytes = 16;
    }
#pragma unroll
    for (int i = 0; i < 9; ++i) {
      const int c = sub + i * 8;
      cp_async_16(s_kv + r * kKVRowBytes + c * 16, src + c * 16 * (bytes != 0), bytes);
    }
    cp_async_commit();
    cp_async_wait<0>();
    __syncthreads();
  }
  uint32_t qf[kMTiles][kKSteps][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      const int row = mt * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
      const int col = (kgroup * kKSteps + ks) * 16 + 8 * (lane / 16);
      ldmatrix_x4(qf[mt][ks], s_kv + row * kKVRowBytes + col * 2);
    }
  }
  __syncthreads();  // buffer 0 becomes a KV stage

  // ---- KV pipeline prologue.
  const int n_tiles = (tok_end - tok_begin + kTileTokens - 1) / kTileTokens;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_tiles)
      load_kv_tile(p, s_kv + s * kStageBytes, page_base, tok_begin + s * kTileTokens, tok_end);
    cp_async_commit();
  }

  float o[kMTiles][kVColsPerWarp / 8][4];
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
    for (int nt = 0; nt < kVColsPerWarp / 8; ++nt)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[mt][nt][i] = 0.f;

  // Softmax state of row sm_row, held by its 8 lanes (identical copies).
  const int sm_row = warp * kSoftmaxRowsPerWarp + lane / 8;
  const int sm_col = (lane % 8) * 4;
  const int sm_grow = row0 + sm_row;
  const bool sm_row_valid = sm_grow < rows_b;
  const uint32_t* mask_row =
      p.tree_mask + static_cast<int64_t>(q0 + (sm_row_valid ? sm_grow / H : 0)) * p.mask_words;
  float m_run = kNegInf, l_run = 0.f;

  for (int tile = 0; tile < n_tiles; ++tile) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile ready everywhere; the previous tile's stage, s_p and s_red free
    {
      const int next = tile + kStages - 1;
      if (next < n_tiles)
        load_kv_tile(p, s_kv + (next % kStages) * kStageBytes, page_base,
                     tok_begin + next * kTileTokens, tok_end);
      cp_async_commit();
    }
    const uint32_t stage = s_kv + (tile % kStages) * kStageBytes;
    const int first = tok_begin + tile * kTileTokens;

    // 1. Partial scores over this warp's k-slice.
    float acc[kMTiles][2][4];
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int nt = 0; nt < 2; ++nt)
#pragma unroll
        for (int i = 0; i < 4; ++i) acc[mt][nt][i] = 0.f;
#pragma unroll
    for (int ks = 0; ks < kKSteps; ++ks) {
      uint32_t kb[4];
      const int tok = nhalf * kTokensPerHalf + (lane % 8) + 8 * (lane / 16);
      const int col = (kgroup * kKSteps + ks) * 16 + 8 * ((lane / 8) % 2);
      ldmatrix_x4(kb, stage + tok * kKVRowBytes + col * 2);
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        mma_16816<T>(acc[mt][0], qf[mt][ks], kb[0], kb[1]);
        mma_16816<T>(acc[mt][1], qf[mt][ks], kb[2], kb[3]);
      }
    }
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        const int row = mt * 16 + lane / 4;
        const int col = nhalf * kTokensPerHalf + nt * 8 + 2 * (lane % 4);
        float* dst = s_red + (kgroup * kRows + row) * kRedStride + col;
        *reinterpret_cast<float2*>(dst) = make_float2(acc[mt][nt][0], acc[mt][nt][1]);
        *reinterpret_cast<float2*>(dst + 8 * kRedStride) =
            make_float2(acc[mt][nt][2], acc[mt][nt][3]);
      }
    }
    __syncthreads();

    // 2. Online softmax of row sm_row, tokens [sm_col, sm_col + 4) of the tile.
    {
      float x[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
      for (int g = 0; g < kKGroups; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(
            s_red + (g * kRows + sm_row) * kRedStride + sm_col);
        x[0] += v.x, x[1] += v.y, x[2] += v.z, x[3] += v.w;
      }
      const bool in_tree = first + kTileTokens > prefix;  // only such tiles read the mask
      float tile_max = kNegInf;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int t = first + sm_col + j;
        bool visible = sm_row_valid && t < tok_end;
        if (in_tree && visible && t >= prefix) {
          const int node = t - prefix;
          visible = (mask_row[node / 32] >> (node % 32)) & 1u;
        }
        x[j] = visible ? x[j] * p.scale_log2 : kNegInf;
        tile_max = fmaxf(tile_max, x[j]);
      }
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 1));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 2));
      tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 4));
      const float m_new = fmaxf(m_run, tile_max);
      // A row that has seen nothing yet keeps m = -inf; subtract 0 then so exp2 gives 0.
      const float m_ref = m_new == kNegInf ? 0.f : m_new;
      const float alpha = exp2f(m_run - m_ref);
      float pr[4], sum = 0.f;
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        pr[j] = exp2f(x[j] - m_ref);
        sum += pr[j];
      }
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      sum += __shfl_xor_sync(0xffffffffu, sum, 4);
      l_run = l_run * alpha + sum;
      m_run = m_new;
      uint2 packed = make_uint2(pack2<T>(pr[0], pr[1]), pack2<T>(pr[2], pr[3]));
      *reinterpret_cast<uint2*>(s_p + sm_row * kPStride + sm_col) = packed;
      if (lane % 8 == 0) s_alpha[sm_row] = alpha;
    }
    __syncthreads();

    // 3. O = alpha * O + P V over this warp's 64 output columns.
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt) {
      const float a_lo = s_alpha[mt * 16 + lane / 4];
      const float a_hi = s_alpha[mt * 16 + lane / 4 + 8];
#pragma unroll
      for (int nt = 0; nt < kVColsPerWarp / 8; ++nt) {
        o[mt][nt][0] *= a_lo, o[mt][nt][1] *= a_lo;
        o[mt][nt][2] *= a_hi, o[mt][nt][3] *= a_hi;
      }
    }
    const uint32_t s_p_addr = smem_addr(s_p);
#pragma unroll
    for (int ks = 0; ks < kTileTokens / 16; ++ks) {
      uint32_t pa[kMTiles][4];
#pragma unroll
      for (int mt = 0; mt < kMTiles; ++mt) {
        const int row = mt * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
        const int col = ks * 16 + 8 * (lane / 16);
        ldmatrix_x4(pa[mt], s_p_addr + (row * kPStride + col) * 2);
      }
#pragma unroll
      for (int np = 0; np < kVColsPerWarp / 16; ++np) {
        uint32_t vb[4];
        const int tok = ks * 16 + (lane % 8) + 8 * ((lane / 8) % 2);
        const int col = warp * kVColsPerWarp + np * 16 + 8 * (lane / 16);
        ldmatrix_x4_trans(vb, stage + tok * kKVRowBytes + col * 2);
#pragma unroll
        for (int mt = 0; mt < kMTiles; ++mt) {
          mma_16816<T>(o[mt][2 * np], pa[mt], vb[0], vb[1]);
          mma_16816<T>(o[mt][2 * np + 1], pa[mt], vb[2], vb[3]);
        }
      }
    }
  }
  cp_async_wait<0>();

  // ---- Epilogue: normalise by l; final output when this request has one chunk, else an
  // fp32 partial and its lse (log2 units) for the combine kernel.
  if (lane % 8 == 0) {
    s_alpha[sm_row] = l_run > 0.f ? 1.f / l_run : 0.f;
    s_lse[sm_row] = l_run > 0.f ? m_run + __log2f(l_run) : kNegInf;
  }
  __syncthreads();
  const bool final_out = n_chunks_b == 1;
#pragma unroll
  for (int mt = 0; mt < kMTiles; ++mt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = mt * 16 + lane / 4 + 8 * half;
      const int gr = row0 + r;
      if (gr >= rows_b) continue;
      const float inv_l = s_alpha[r];
      const int node = gr / H, head = gr % H;
      const int64_t grow = static_cast<int64_t>(q0) * H + gr;
#pragma unroll
      for (int nt = 0; nt < kVColsPerWarp / 8; ++nt) {
        const int col = warp * kVColsPerWarp + nt * 8 + 2 * (lane % 4);
        const float v0 = o[mt][nt][2 * half] * inv_l;
        const float v1 = o[mt][nt][2 * half + 1] * inv_l;
        if (final_out) {
          T* dst = static_cast<T*>(p.out) + (q0 + node) * p.out_stride_token +
                   head * p.out_stride_head + col;
          *reinterpret_cast<uint32_t*>(dst) = pack2<T>(v0, v1);
        } else {
          float* dst = p.part_out + (blockIdx.y * p.total_rows + grow) * kVDim + col;
          *reinterpret_cast<float2*>(dst) = make_float2(v0, v1);
        }
      }
    }
  }
  if (threadIdx.x < kRows && row0 + threadIdx.x < rows_b) {
    const int64_t grow = static_cast<int64_t>(q0) * H + row0 + threadIdx.x;
    const float lse2 = s_lse[threadIdx.x];
    if (final_out) {
      if (p.lse) p.lse[grow] = lse2 * kLn2;
    } else {
      p.part_lse[blockIdx.y * p.total_rows + grow] = lse2;
    }
  }
#elif TV_DEVICE_PASS
  TV_NO_DEVICE_CODE("verify_mma_kernel");
#endif
}

}  // namespace treeverify::cuda::mma
