// The portable split-KV MLA tree-verify kernel: mma.sync + ldmatrix + cp.async, sm_80..sm_120.
//
// One CTA = V::kRows query rows (row r of request b is node r / H, head r % H) x one chunk of
// that request's KV sequence. The chunk streams through a V::kStages-deep pipeline of
// V::kTokens-token tiles (cp.async, or cp.async.bulk for V::kBulk); each tile is read once
// and used by all rows of the CTA:
//   1. S = Q K^T (qk_partial; on an e4m3 cache also qk_partial_e4m3_exact, or in fast mode
//      e4m3 products, qk_partial_e4m3, both in fp8_ops.cuh):
//      warp (kgroup, sub) multiplies its register-resident Q slice (at most 32 rows x 144
//      deep, or 16 x 288) with its tokens; the V::kKGroups partials meet in shared memory
//      (s_red).
//   2. Online softmax (softmax_tile, fp32, log2 units), with the ancestor mask only in tiles
//      that reach the tree region.
//   3. O += P V (pv_tile; pv_tile_e4m3_exact, pv_tile_e4m3 on e4m3): in 64-row CTAs of
//      32-token tiles (V::kHalves) warp w owns 128 output columns of the 32 rows of its half
//      (warps 0-3: rows 0-31), otherwise 64 columns of every row; V is the first 512 columns
//      of the same KV tile.
// The variant's schedule orders these steps: halves_loop, overlap_loop or in_order_loop
// (each instantiation file names its own).
// A request with one chunk writes out/lse directly; otherwise each chunk writes a
// normalised partial (in the output's type) and its lse, merged by the combine kernel
// (cuda/common/combine.cu). Rows that come out with a non-finite value are recomputed exactly
// (cuda/common/nonfinite.cuh). The pair variant (PairVariant, config.h) runs pair_cta
// (pair_kernel.cuh) instead of verify_cta. Figures and limits: docs/kernels/portable-mma.md.
#pragma once

#include "cuda/common/arch.cuh"
#include "cuda/common/nonfinite.cuh"
#include "cuda/sm80/build.h"
#include "cuda/sm80/fp8_ops.cuh"
#include "cuda/sm80/pair_kernel.cuh"
#include "cuda/sm80/tile_ops.cuh"

namespace treeverify::cuda::sm80 {

// The main loops below take the steps of one tile as closures over one CTA's state
// (verify_cta), each called with the tile's index in the chunk:
//   load        copies of the tile (and page-table entries ahead): one cp.async group
//   wait_bulk   V::kBulk: wait for the tile's stage mbarrier
//   dequantize  e4m3 exact mode, 64 rows: this warp widens the rows of the tile it copied
//   qk          S = Q K^T of the tile: the k-group partials into s_red
//   softmax     online softmax of the tile: P, the rescale alpha
//   pv          O += P V of the tile
// (by reference: the 64-row variants sit at 255 registers, and a copy of the closures into a
// struct changed their register allocation enough to spill)

// The halves schedule (V::kHalves: 64-row CTAs of 32-token tiles, 3 or 4 stages). Halves A
// (warps 0-3, rows 0-31) and B (warps 4-7, rows 32-63) run the same steps in opposite order,
// so on each scheduler (one warp of each half) one half's softmax runs beside the other's
// products. Between the CTA barriers X(i) and X(i+1):
//   A: QK(i+1) -> s_red_A, PV(i) | bar_A | softmax(i+1)
//   B: softmax(i) | bar_B | QK(i+1) -> s_red_B, PV(i)
// and each thread copies its part of tile i+kStages-1 (load_kv_tile) into tile i-1's stage:
// after its products with 4 stages (kLateCopies), first thing with 3. A half's own barrier
// orders its s_red and P; X(i) publishes tile i+1 and the P and s_red written before it, and
// frees tile i-1's stage (both halves are past its PV). Either way the copies still pending
// at X(i+1) number kStages - 3.
template <typename V, class Load, class WaitBulk, class Dequantize, class QK, class Softmax,
          class PV>
__device__ __forceinline__ void halves_loop(int n_tiles, int warp, Load& load, WaitBulk& wait_bulk,
                                            Dequantize& dequantize, QK& qk, Softmax& softmax,
                                            PV& pv) {
  const bool half_a = V::half_of(warp) == 0;
  constexpr int kHalfThreads = V::kWarpsPerHalf * 32;
  auto products = [&](int tile) {
    if (tile + 1 < n_tiles) qk(tile + 1);
    pv(tile);
  };
  cp_async_wait<V::kStages - 2>();  // tile 0 has landed
  dequantize(0);
  __syncthreads();
  qk(0);
  if (half_a) {  // the second phase of half A's tile -1
    named_barrier_sync<1, kHalfThreads>();
    softmax(0);
  }
  cp_async_wait<V::kStages - 3>();  // tile 1 has landed
  dequantize(1);
  __syncthreads();  // X(0)
  for (int tile = 0; tile < n_tiles; ++tile) {
    if constexpr (!V::kLateCopies) load(tile + V::kStages - 1);
    if (half_a) {
      products(tile);
      if constexpr (V::kLateCopies) load(tile + V::kStages - 1);
      named_barrier_sync<1, kHalfThreads>();  // s_red_A holds QK(i+1); P_A(i) consumed
      if (tile + 1 < n_tiles) softmax(tile + 1);
    } else {
      softmax(tile);
      named_barrier_sync<2, kHalfThreads>();  // P_B(i) visible; s_red_B consumed
      products(tile);
      if constexpr (V::kLateCopies) load(tile + V::kStages - 1);
    }
    cp_async_wait<V::kStages - 3>();  // tile + 2 has landed
    dequantize(tile + 2);             // QK(tile + 2), after X(tile + 1), reads it first
    __syncthreads();                  // X(tile + 1)
  }
}

// The overlap schedule (V::kOverlap: 3+ stages, all other 16, 32 and 64-row variants):
// barrier | softmax(i) | barrier | QK(i+1) + PV(i), so the tensor cores get both products
// between two barriers. Tile i+kStages-1 goes to tile i-1's stage, free since the first
// barrier of tile i; its copies are issued then or after PV(i) (V::kLateCopies), and the copy
// groups still pending when tile i+1 must have landed number one less in the latter.
template <typename V, class Load, class WaitBulk, class Dequantize, class QK, class Softmax,
          class PV>
__device__ __forceinline__ void overlap_loop(int n_tiles, Load& load, WaitBulk& wait_bulk,
                                             Dequantize& dequantize, QK& qk, Softmax& softmax,
                                             PV& pv) {
  constexpr int kPending = V::kLateCopies ? V::kStages - 3 : V::kStages - 2;
  cp_async_wait<V::kStages - 2>();
  wait_bulk(0);
  dequantize(0);
  __syncthreads();
  qk(0);
  for (int tile = 0; tile < n_tiles; ++tile) {
    __syncthreads();  // s_red holds tile's scores; PV(tile-1) is done, its stage is free
    if constexpr (!V::kLateCopies) load(tile + V::kStages - 1);
    softmax(tile);
    cp_async_wait<kPending>();  // tile + 1 has landed
    wait_bulk(tile + 1);
    dequantize(tile + 1);
    __syncthreads();  // P, alpha and tile + 1 visible; s_red consumed
    if (tile + 1 < n_tiles) qk(tile + 1);
    pv(tile);
    if constexpr (V::kLateCopies) load(tile + V::kStages - 1);
  }
}

// The in-order schedule (2 stages: overlapping would leave no stage to prefetch into): the
// three phases of each tile in order, a barrier between each.
template <typename V, class Load, class WaitBulk, class Dequantize, class QK, class Softmax,
          class PV>
__device__ __forceinline__ void in_order_loop(int n_tiles, Load& load, WaitBulk& wait_bulk,
                                              Dequantize& dequantize, QK& qk, Softmax& softmax,
                                              PV& pv) {
  for (int tile = 0; tile < n_tiles; ++tile) {
    cp_async_wait<V::kStages - 2>();
    wait_bulk(tile);
    dequantize(tile);
    __syncthreads();  // tile landed; PV(tile-1) done, so its stage, s_p and s_red are free
    load(tile + V::kStages - 1);
    qk(tile);
    __syncthreads();
    softmax(tile);
    __syncthreads();
    pv(tile);
  }
}

// One CTA's work; the kernel below decides where it is compiled. kMode (params.h): the cache
// is 16-bit, or e4m3 in exact mode: Q rescaled to fp16 in the prologue (prepare_q_f16) and
// fp16 products, on K and V widened in registers (16 and 32 rows) or in shared memory
// (dequantize_tile, 64 rows: V::kE4M3InRegisters), or e4m3 in fast mode: Q rounded to e4m3
// (quantize_q) and e4m3 products (fp8_ops.cuh). The prologue (Q, the first copies), one of the
// three main loops above, then the epilogue.
template <typename T, typename V, KvMode kMode>
__device__ __forceinline__ void verify_cta(const VerifyKernelParams& p) {
  constexpr bool kE4M3 = kMode != KvMode::k16, kFast = kMode == KvMode::kE4M3Fast;
  // Exact mode on e4m3: K and V widened in registers, or the tile in shared memory (Widen).
  constexpr bool kE4M3Regs = kMode == KvMode::kE4M3 && V::kE4M3InRegisters;
  constexpr bool kE4M3Widen = kMode == KvMode::kE4M3 && !V::kE4M3InRegisters;
  using MmaT = std::conditional_t<kE4M3, __half, T>;  // the 16-bit products' type
  CtaWork w;
  // Kernels with no register to spare for batch 1's chunk length in the parameters read it from
  // memory: the two-halves 64-row variants, and fast mode where its e4m3 products are emulated
  // (sm_90 code, run only with a forced table).
  constexpr bool kChunkInMemory = V::kHalves || (kFast && !TV_HAS_NATIVE_MMA_E4M3);
  if (!cta_work<V, false, kChunkInMemory>(p, &w)) return;

  extern __shared__ __align__(128) uint8_t smem[];
  const uint32_t s_kv = smem_addr(smem);
  float* s_red = reinterpret_cast<float*>(smem + V::kRedOffset);
  T* s_p = reinterpret_cast<T*>(smem + V::kPOffset);
  const uint32_t s_p_addr = smem_addr(s_p);
  float* s_alpha = reinterpret_cast<float*>(smem + V::kAlphaOffset);
  float* s_lse = reinterpret_cast<float*>(smem + V::kLseOffset);
  const int32_t* s_idx = reinterpret_cast<const int32_t*>(smem + V::kIdxOffset);
  const uint32_t s_idx_addr = smem_addr(s_idx);
  const uint32_t s_bar = s_kv + V::kBarOffset;  // kBulk: one mbarrier a stage
  if constexpr (V::kBulk) {
    if (threadIdx.x == 0) {
      for (int s = 0; s < V::kStages; ++s) mbar_init(s_bar + s * 8);
      mbar_init_fence();
    }  // the prologue's first barrier publishes them before the first copy
  }

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int kgroup = warp % V::kKGroups, sub = warp / V::kKGroups;

  // Page-table entries travel kIdxAhead tiles ahead of the KV rows: those of tile t are in
  // the copy group of tile t - kIdxAhead, complete before tile t's rows are requested.
  constexpr int kIdxAhead = V::kStages - 1;
  const int n_tiles = (w.tok_end - w.tok_begin + V::kTokens - 1) / V::kTokens;
  auto stage_of = [&](int tile) { return s_kv + (tile % V::kStages) * V::kStageBytes; };
  auto ids_slot = [&](int tile) { return (tile % V::kStages) * V::kTokens; };
  auto load_ids = [&](int tile) {
    if (tile < n_tiles)
      load_page_ids<V>(p, s_idx_addr + ids_slot(tile) * 4, w.page_base,
                       w.tok_begin + tile * V::kTokens, w.tok_end);
  };
  auto load = [&](int tile) {
    if (tile < n_tiles) {
      if constexpr (V::kBulk)
        load_kv_tile_bulk<V, kE4M3>(p, stage_of(tile), s_idx + ids_slot(tile),
                                    w.tok_begin + tile * V::kTokens, w.tok_end,
                                    s_bar + (tile % V::kStages) * 8);
      else
        load_kv_tile<V, kE4M3>(p, stage_of(tile), s_idx + ids_slot(tile),
                               w.tok_begin + tile * V::kTokens, w.tok_end);
    }
    load_ids(tile + kIdxAhead);
    cp_async_commit();  // always, so the group count per tile stays uniform
  };
  // The prologue. The page-table entries of the first tiles, then Q (copy groups of their
  // own); the first kStages - 1 tiles' copies need only the entries. A barrier between those
  // copies: load(s) reuses the page-id slot load(s - 1) reads.
  for (int t = 0; t < kIdxAhead; ++t) load_ids(t);
  cp_async_commit();
  const uint32_t s_q = s_kv + V::kQOffset;
  copy_q<V>(p, w, s_q);
  cp_async_commit();
  auto prologue_copies = [&] {
#pragma unroll
    for (int s = 0; s < V::kStages - 1; ++s) {
      if (s > 0) __syncthreads();
      load(s);
    }
  };
  // Q's fragments in registers for the whole chunk: 16-bit, or on an e4m3 cache fp16 (exact
  // mode) or e4m3 codes (fast mode) with each row's scale times kv_scale in s_lse (free until
  // the epilogue), applied by the softmax.
  std::conditional_t<kFast, QFragsE4M3<V>, uint32_t[V::kQKMTiles][V::kKSteps][4]> qf;
  // After Q has landed and a barrier: on an e4m3 cache Q is rewritten in place (its row
  // scales to s_lse) and published by a barrier of its own; then each warp loads its fragments.
  auto load_q_fragments = [&] {
    if constexpr (kFast) {
      quantize_q<T, V>(smem + V::kQOffset, s_lse, __ldg(p.kv_scale));
      __syncthreads();
      q_fragments_e4m3<V>(s_q, kgroup, sub / V::kQKTokenGroups, qf);
    } else if constexpr (kE4M3) {
      prepare_q_f16<T, V, kE4M3Regs>(smem + V::kQOffset, s_lse, __ldg(p.kv_scale));
      __syncthreads();
      q_fragments<V>(s_q, kgroup, sub / V::kQKTokenGroups, qf);
    } else {
      q_fragments<V>(s_q, kgroup, sub / V::kQKTokenGroups, qf);
    }
  };
  if constexpr (V::kQBesideCopies) {
    // Q lands beyond the stages these copies fill, and the loop's first copy into its stage
    // (or first store to s_red) comes after a CTA barrier that follows every warp's
    // q_fragments.
    cp_async_wait<1>();  // the entries have landed (Q may still be in flight)
    __syncthreads();     // ... for every thread; also publishes the bulk copies' mbarriers
    prologue_copies();
    cp_async_wait<V::kStages - 1>();  // Q has landed (the tiles' copies may still be in flight)
    __syncthreads();
    load_q_fragments();
  } else {
    cp_async_wait<0>();
    __syncthreads();
    load_q_fragments();
    __syncthreads();  // Q's buffer becomes a KV stage
    prologue_copies();
  }

  float o[V::kOMTiles][V::kONTiles][4] = {};
  const int sm_row = warp * V::kRowsPerWarp + lane / V::kLanesPerRow;
  const bool row_valid = w.row0 + sm_row < w.rows_b;
  // The tree node of this thread's softmax row (request-relative) and its ancestor bits; a
  // node always sees itself, so requests of one node (decode) never read the mask.
  const int own_node = row_valid ? (w.row0 + sm_row) / p.num_heads : 0;
  const uint32_t* mask_row = p.tree_mask + static_cast<int64_t>(w.q0 + own_node) * p.mask_words;
  RowState st;
  auto softmax = [&](int tile) {
    // The scores' factor beyond softmax_scale on an e4m3 cache: kv_scale x Q's row scale, in
    // s_lse since the prologue's barriers; a shared load a tile, not a register held through
    // the loop (the 64-row variants sit at 255: that register spills them on sm_90).
    float score_scale = 1.f;
    if constexpr (kE4M3) score_scale = ld_shared_volatile(s_lse + sm_row);
    softmax_tile<T, V, kE4M3, kFast>(p, w, s_red, s_p, s_alpha, w.tok_begin + tile * V::kTokens,
                                     mask_row, own_node, row_valid, st, score_scale);
  };
  // e4m3: this thread's copies of tile `tile` have landed (its wait_group or the stage's
  // mbarrier); its warp widens the rows it copied (dequantize_tile), and the CTA barrier the
  // loop reaches next publishes them, so widening costs no barrier of its own.
  auto dequantize = [&](int tile) {
    if constexpr (kE4M3Widen)
      if (tile < n_tiles) dequantize_tile<V>(stage_of(tile));
  };

  // Tile `tile` has landed: its cp.async group is complete (the caller's wait_group) and, for
  // bulk copies, its stage's mbarrier has finished the phase of this use of the stage.
  auto wait_bulk = [&](int tile) {
    if constexpr (V::kBulk)
      if (tile < n_tiles) mbar_wait(s_bar + (tile % V::kStages) * 8, (tile / V::kStages) & 1);
  };
  auto qk = [&](int tile) {
    if constexpr (kFast)
      qk_partial_e4m3<V>(stage_of(tile), qf, s_red, kgroup, sub);
    else if constexpr (kE4M3Regs)
      qk_partial_e4m3_exact<V>(stage_of(tile), qf, s_red, kgroup, sub);
    else
      qk_partial<MmaT, V>(stage_of(tile), qf, s_red, kgroup, sub);
  };
  auto pv = [&](int tile) {
    if constexpr (kFast)
      pv_tile_e4m3<V>(stage_of(tile), s_p_addr, s_alpha, o);
    else if constexpr (kE4M3Regs)
      pv_tile_e4m3_exact<V>(stage_of(tile), s_p_addr, s_alpha, o);
    else
      pv_tile<MmaT, V>(stage_of(tile), s_p_addr, s_alpha, o);
  };
  if constexpr (V::kHalves)
    halves_loop<V>(n_tiles, warp, load, wait_bulk, dequantize, qk, softmax, pv);
  else if constexpr (V::kOverlap)
    overlap_loop<V>(n_tiles, load, wait_bulk, dequantize, qk, softmax, pv);
  else
    in_order_loop<V>(n_tiles, load, wait_bulk, dequantize, qk, softmax, pv);
  cp_async_wait<0>();
  __syncthreads();  // every warp is past its last read of s_alpha, which the epilogue reuses
  // O's factor: kv_scale (V's values are kv_scale times the codes), over 448 in fast mode; a
  // partial's leaves kv_scale to the combine.
  constexpr float kPartScale = kFast ? 1.f / kE4M3Max : 1.f;
  float v_scale = 1.f;
  if constexpr (kE4M3) v_scale = __ldg(p.kv_scale) * kPartScale;
  epilogue<T, V, kE4M3, kFast || kE4M3Regs>(p, w, st, s_alpha, s_lse, o, v_scale, kPartScale);
  __syncthreads();  // the epilogue's stores and its NaN rows in s_lse
  if (V::kWarps > kRecomputeWarps && warp >= kRecomputeWarps) return;  // 16 warps: 8 recompute
  recompute_nan_rows<T, V, kE4M3>(p, smem, s_lse);
}

// A variant this build does not compile for the architecture (build.h: one that needs more
// shared memory than it gives a block or bulk copies it lacks, or, unless
// TREEVERIFY_ALL_VARIANTS, one that no tile table its code serves selects) is never launched
// there (dispatch checks the same variant_compiled_for), so a trap stands in its place.
template <typename T, typename V, KvMode kMode>
__global__ void __launch_bounds__(V::kThreads, V::kMinBlocks)
    verify_mma_kernel(const __grid_constant__ VerifyKernelParams p) {
#if TV_HAS_PDL
  // Lets the combine kernel, launched as a programmatic dependent, be scheduled as SMs free up;
  // it waits for this whole grid (griddepcontrol.wait) before reading any partial.
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
#if TV_HAS_MMA_SYNC_16816
  constexpr int kArch = __CUDA_ARCH__ / 10;
  if constexpr (kMode == KvMode::kE4M3Fast ? fast_compiled_for<V>(kArch)
                                           : variant_compiled_for<V>(kArch)) {
    if constexpr (V::kClusterCtas > 1) {
      static_assert(kMode == KvMode::k16, "the pair variant reads 16-bit caches only");
      pair_cta<T, V>(p);
    } else {
      verify_cta<T, V, kMode>(p);
    }
  }
  else  // a constant message: printf with arguments would need a stack frame
    printf(
        "treeverify: this verify_mma_kernel variant is not compiled for this architecture "
        "(cuda/sm80/build.h); dispatch should not have launched it\n"),
        __trap();
#elif TV_DEVICE_PASS
  TV_NO_DEVICE_CODE("verify_mma_kernel");
#endif
}

}  // namespace treeverify::cuda::sm80
