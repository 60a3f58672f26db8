// The step kernels of a graph plan: the per-lane checks and clamps of core/graph_step.h, and
// the split schedule ranked by the host plan's wave model, one candidate a thread.
#include "cuda/graph/prepare_step.cuh"

#include "core/graph_step.h"

namespace treeverify::cuda {
namespace {

using detail::GraphPlanState;

constexpr int kLaneThreads = 256;
constexpr int kScheduleThreads = 256;
// Page-table entries a lane CTA copies: enough work a CTA, few CTAs for short lanes.
constexpr int kPagesPerCta = kLaneThreads * 16;

// ORs this thread's flags into *flags once per warp.
__device__ void report(uint32_t* flags, uint32_t mine) {
  const uint32_t warp = __reduce_or_sync(0xffffffffu, mine);
  if (flags != nullptr && warp != 0 && threadIdx.x % 32 == 0) atomicOr(flags, warp);
}

// Grid (ceil(pages_per_lane / kPagesPerCta), B): lane blockIdx.y's pages [x kPagesPerCta, ...);
// CTA x = 0 also writes the lane's length, offsets and tree.
__global__ void __launch_bounds__(kLaneThreads, 1)
    prepare_lanes_kernel(const GraphBounds g, const GraphStep step, const int32_t pages_per_lane,
                         const StepOutputs out) {
  const int32_t b = blockIdx.y, T = g.tree_size;
  uint32_t flags = 0;
  const int32_t len = detail::lane_kv_len(step.kv_len[b], g, &flags);
  const int64_t lane_pages = detail::pages_of(len, g.page_size);
  const int64_t end = min(lane_pages, static_cast<int64_t>(blockIdx.x + 1) * kPagesPerCta);
  int32_t* lane_out = out.pages + static_cast<int64_t>(b) * pages_per_lane;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * kPagesPerCta + threadIdx.x; k < end;
       k += kLaneThreads)
    lane_out[k] = detail::lane_page(g, step, b, k, &flags);
  if (blockIdx.x == 0) {
    if (threadIdx.x == 0) {
      out.kv_len[b] = len;
      out.qo_indptr[b] = b * T;
      out.page_indptr[b] = b * pages_per_lane;
      if (b == g.batch_size - 1) {
        out.qo_indptr[b + 1] = (b + 1) * T;
        out.page_indptr[b + 1] = (b + 1) * pages_per_lane;
      }
    } else {
      flags &= ~kGraphKvLenClamped;  // the length's flag once a lane
    }
    __shared__ int32_t parents[kMaxTreeSize];
    uint32_t mask_flags = 0;
    const detail::LaneMask lm = detail::lane_mask(g, step, b, &mask_flags);
    if (threadIdx.x == 0) flags |= mask_flags;
    for (int32_t i = threadIdx.x; i < T; i += kLaneThreads) {
      parents[i] = detail::lane_parent(g, step, lm, b, i, &flags);
      out.parents[static_cast<int64_t>(b) * T + i] = parents[i];
    }
    __syncthreads();
    const int32_t words = detail::mask_words_of(T);
    for (int32_t idx = threadIdx.x; idx < T * words; idx += kLaneThreads) {
      const int32_t i = idx / words, w = idx % words;
      const uint32_t bits = detail::ancestor_word(parents, i, w);
      out.mask[(static_cast<int64_t>(b) * T + i) * words + w] = bits;
      if (lm.base != nullptr && !detail::mask_word_is_tree(lm.base + i * lm.stride, T, i, w, bits))
        flags |= kGraphMaskNotTree;
    }
  } else {
    flags &= ~kGraphKvLenClamped;
  }
  report(step.error_flags, flags);
}

// The lanes as the wave model reads them: clamped lengths from the workspace.
struct DeviceLanes {
  const int32_t* kv_len;
  int32_t lanes, rows_per_lane;
  TV_HD int64_t count() const { return lanes; }
  TV_HD int64_t rows(int64_t) const { return rows_per_lane; }
  TV_HD int64_t kv(int64_t b) const { return kv_len[b]; }
};

// One CTA: the step's chunk length, the best candidate by the wave model (ties: longer).
__global__ void __launch_bounds__(kScheduleThreads)
    step_schedule_kernel(const GraphBounds g, const GraphPlanState st, const int32_t* kv_len,
                         int32_t* chunk) {
  const DeviceLanes lanes{kv_len, g.batch_size, g.tree_size * g.num_heads};
  __shared__ int64_t s_max[kScheduleThreads / 32];
  __shared__ detail::StepSchedule s_best[kScheduleThreads / 32];
  int64_t max_kv = 0;
  for (int32_t b = threadIdx.x; b < g.batch_size; b += kScheduleThreads)
    max_kv = max(max_kv, static_cast<int64_t>(kv_len[b]));
  for (int off = 16; off > 0; off /= 2) max_kv = max(max_kv, __shfl_xor_sync(0xffffffffu, max_kv, off));
  if (threadIdx.x % 32 == 0) s_max[threadIdx.x / 32] = max_kv;
  __syncthreads();
  for (int w = 0; w < kScheduleThreads / 32; ++w) max_kv = max(max_kv, s_max[w]);
  const int64_t max_tiles = (max_kv + st.tile_tokens - 1) / st.tile_tokens;
  if (st.forced_chunk_tokens > 0) {
    if (threadIdx.x == 0) *chunk = st.forced_chunk_tokens;
    return;
  }
  const detail::WaveModel m = detail::wave_model(st);
  detail::StepSchedule best;
  const int64_t n = detail::chunk_candidates(max_tiles, st.tile_tokens, st.chunk_cap);
  for (int64_t c = threadIdx.x; c < n; c += kScheduleThreads) {
    const int64_t tiles = detail::chunk_candidate(c, max_tiles, st.tile_tokens, st.chunk_cap);
    if (tiles == 0) continue;
    const detail::SplitSchedule s =
        detail::evaluate_chunks(lanes, m, tiles, max_tiles, max_kv, st.row_blocks);
    const detail::StepSchedule cand{s.chunk_tokens, s.est_ns};
    if (detail::better_schedule(cand, best)) best = cand;
  }
  for (int off = 16; off > 0; off /= 2) {
    const detail::StepSchedule other{__shfl_xor_sync(0xffffffffu, best.chunk_tokens, off),
                                     __shfl_xor_sync(0xffffffffu, best.est_ns, off)};
    if (detail::better_schedule(other, best)) best = other;
  }
  if (threadIdx.x % 32 == 0) s_best[threadIdx.x / 32] = best;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kScheduleThreads / 32; ++w)
      if (detail::better_schedule(s_best[w], best)) best = s_best[w];
    // No candidate only if no chunk length fits the grid, which plan_graph rules out: one
    // chunk of the longest lane is always one.
    *chunk = best.chunk_tokens > 0 ? best.chunk_tokens : static_cast<int32_t>(max_tiles * st.tile_tokens);
  }
}

}  // namespace

cudaError_t launch_prepare_step(const GraphBounds& g, const GraphPlanState& st,
                                const GraphStep& step, const StepOutputs& out,
                                cudaStream_t stream) {
  const dim3 lanes((st.pages_per_lane + kPagesPerCta - 1) / kPagesPerCta, g.batch_size);
  prepare_lanes_kernel<<<lanes, kLaneThreads, 0, stream>>>(g, step, st.pages_per_lane, out);
  if (cudaError_t err = cudaGetLastError(); err != cudaSuccess) return err;
  step_schedule_kernel<<<1, kScheduleThreads, 0, stream>>>(g, st, out.kv_len, out.chunk);
  return cudaGetLastError();
}

}  // namespace treeverify::cuda
