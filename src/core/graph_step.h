// A graph plan's step, written once for the CPU and the GPU (TV_HD): how each value of the
// step's metadata is checked and clamped (treeverify/graph.h says the rules), the workspace's
// layout, and the split schedule the step takes.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/host_device.h"
#include "core/wave_model.h"
#include "treeverify/graph.h"

namespace treeverify::detail {

// log2 of the page size (a power of two): pages by shifts, no 64-bit divisions on the device.
TV_HD inline int32_t page_shift_of(int32_t page_size) {
  int32_t shift = 0;
  while ((1 << shift) < page_size) ++shift;
  return shift;
}
// The pages of `tokens` KV tokens.
TV_HD inline int64_t pages_of(int64_t tokens, int32_t page_size) {
  return (tokens + page_size - 1) >> page_shift_of(page_size);
}

// Lane b's KV tokens, clamped into [T, max_kv_len]; sets kGraphKvLenClamped in *flags when it
// had to.
TV_HD inline int32_t lane_kv_len(int32_t raw, const GraphBounds& b, uint32_t* flags) {
  const int64_t v = static_cast<int64_t>(raw) + (b.kv_len_excludes_tree ? b.tree_size : 0);
  if (v >= b.tree_size && v <= b.max_kv_len) return static_cast<int32_t>(v);
  *flags |= kGraphKvLenClamped;
  return v < b.tree_size ? b.tree_size : b.max_kv_len;
}

// Page k (< the lane's pages) of lane b, read from the caller's table inside its bounds; what
// is out of range reads page 0 and is flagged.
TV_HD inline int32_t lane_page(const GraphBounds& bounds, const GraphStep& step, int32_t b,
                               int64_t k, uint32_t* flags) {
  int64_t at = -1;
  if (bounds.page_table != PageTable::kCsr) {
    int64_t row = step.table_rows != nullptr ? step.table_rows[b] : b;
    if (row < 0 || row >= bounds.page_capacity) {
      *flags |= kGraphTableClamped;
      row = 0;
    }
    // Inside the row: plan_graph checked table_stride against max_kv_len.
    if (bounds.page_table == PageTable::kSlotRows) {
      const int32_t slot = step.kv_page_indices[row * bounds.table_stride + k * bounds.page_size];
      const int32_t page = slot >> page_shift_of(bounds.page_size);
      if (slot >= 0 && (slot & (bounds.page_size - 1)) == 0 && page < bounds.num_pages) return page;
      *flags |= kGraphPageClamped;
      return 0;
    }
    at = row * bounds.table_stride + k;
  } else {
    const int64_t begin = step.kv_page_indptr[b], end = step.kv_page_indptr[b + 1];
    at = begin + k;
    if (begin < 0 || at >= end || at >= bounds.page_capacity) {
      *flags |= kGraphTableClamped;
      return 0;
    }
  }
  const int32_t page = step.kv_page_indices[at];
  if (page >= 0 && page < bounds.num_pages) return page;
  *flags |= kGraphPageClamped;
  return 0;
}

// Lane b's rows of a mask (kMask, kFullMask): row i's tree columns at base + i * stride, or
// base null where the lane lies outside the mask (kFullMask; flagged).
struct LaneMask {
  const uint8_t* base = nullptr;
  int64_t stride = 0;
};
TV_HD inline LaneMask lane_mask(const GraphBounds& g, const GraphStep& step, int32_t b,
                                uint32_t* flags) {
  if (g.tree == TreeInput::kMask)
    return {step.tree_mask + static_cast<int64_t>(b) * g.tree_size * g.tree_size, g.tree_size};
  if (g.tree != TreeInput::kFullMask) return {};
  // Each lane's rows are as long as its kv_len as given (the engine's layout), not clamped.
  auto full_len = [&](int32_t lane) {
    const int64_t v =
        static_cast<int64_t>(step.kv_len[lane]) + (g.kv_len_excludes_tree ? g.tree_size : 0);
    return v > 0 ? v : int64_t{0};
  };
  int64_t offset = 0;
  for (int32_t lane = 0; lane < b; ++lane) offset += g.tree_size * full_len(lane);
  const int64_t len = full_len(b);
  if (len < g.tree_size || offset + g.tree_size * len > step.mask_bytes) {
    *flags |= kGraphMaskNotTree;
    return {};
  }
  return {step.tree_mask + offset + (len - g.tree_size), len};
}

// Node i's parent in lane b's tree (kChain, kParents: checked, an invalid one taken as i - 1;
// masks: the largest j < i the node sees, or 0 for a row never written; a lane outside its
// mask: i - 1).
TV_HD inline int32_t lane_parent(const GraphBounds& bounds, const GraphStep& step,
                                 const LaneMask& mask, int32_t b, int32_t i, uint32_t* flags) {
  if (bounds.tree == TreeInput::kParents) {
    const int32_t p = step.parents[static_cast<int64_t>(b) * bounds.tree_size + i];
    if (i == 0 ? p == -1 : p >= 0 && p < i) return p;
    *flags |= kGraphParentClamped;
    return i - 1;
  }
  if (mask.base != nullptr) {
    const uint8_t* row = mask.base + i * mask.stride;
    if (row[i] == 0) return i == 0 ? -1 : 0;  // never written: padding
    for (int32_t j = i - 1; j >= 0; --j)
      if (row[j] != 0) return j;
    return -1;
  }
  return i - 1;
}

// Word w of node i's ancestor bits, given the lane's parents (parents[j] < j or -1): bit k of
// word w is set iff node 32 w + k is a proper ancestor of i (the node's own bit is never read).
TV_HD inline uint32_t ancestor_word(const int32_t* parents, int32_t i, int32_t w) {
  uint32_t bits = 0;
  for (int32_t j = parents[i]; j >= 32 * w; j = parents[j])
    if (j < 32 * w + 32) bits |= 1u << (j - 32 * w);
  return bits;
}

// Whether word w of mask row i says what its tree's bits say: ancestors and the node itself
// seen, nothing else (a row never written, own entry 0, passes).
TV_HD inline bool mask_word_is_tree(const uint8_t* row, int32_t tree_size, int32_t i, int32_t w,
                                    uint32_t bits) {
  if (row[i] == 0) return true;
  for (int32_t k = 0; k < 32 && 32 * w + k < tree_size; ++k) {
    const int32_t j = 32 * w + k;
    const bool seen = row[j] != 0, want = j == i || ((bits >> k) & 1u);
    if (seen != want) return false;
  }
  return true;
}

inline constexpr int32_t mask_words_of(int32_t tree_size) { return (tree_size + 31) / 32; }

// The step's split-KV schedule: the host plan's wave model (split_schedule.h) ranks the chunk
// lengths a graph plan's grid allows (at most chunk_cap chunks), longest first on ties. `kv(b)`
// gives lane b's clamped length; the CPU and the device's step kernel both call this, the
// latter one candidate a thread (candidate/num_candidates).
struct StepSchedule {
  int32_t chunk_tokens = 0;
  double est_ns = 0;
};
template <class Lanes>
TV_HD inline int64_t max_lane_kv(const Lanes& lanes) {
  int64_t m = 0;
  for (int64_t b = 0; b < lanes.count(); ++b) m = lanes.kv(b) > m ? lanes.kv(b) : m;
  return m;
}
// Candidate c (0 <= c < count) of chunk lengths in tiles for a longest lane of max_tiles
// tiles: first the short lengths 1 .. short_tiles (up to 2048 tokens), then the lengths that
// split the longest lane into n = 1 .. chunk_cap equal chunks. Lengths over max_tiles or that
// would need more than chunk_cap chunks are not candidates (0).
TV_HD inline int64_t chunk_candidate(int64_t c, int64_t max_tiles, int32_t tile_tokens,
                                     int32_t chunk_cap) {
  const int64_t short_tiles = 2048 / tile_tokens < max_tiles ? 2048 / tile_tokens : max_tiles;
  int64_t tiles = c < short_tiles ? c + 1 : (max_tiles + (c - short_tiles)) / (c - short_tiles + 1);
  if (c >= short_tiles + chunk_cap) return 0;
  if ((max_tiles + tiles - 1) / tiles > chunk_cap) return 0;
  return tiles;
}
TV_HD inline int64_t chunk_candidates(int64_t max_tiles, int32_t tile_tokens, int32_t chunk_cap) {
  const int64_t short_tiles = 2048 / tile_tokens < max_tiles ? 2048 / tile_tokens : max_tiles;
  return short_tiles + chunk_cap;
}
// Whether schedule a beats b: less modelled time, or as much with longer chunks.
TV_HD inline bool better_schedule(const StepSchedule& a, const StepSchedule& b) {
  if (b.chunk_tokens == 0) return a.chunk_tokens != 0;
  if (a.chunk_tokens == 0) return false;
  return a.est_ns < b.est_ns * (1 - 1e-9) ||
         (!(b.est_ns < a.est_ns * (1 - 1e-9)) && a.chunk_tokens > b.chunk_tokens);
}

// The wave model of a graph plan (its kernel on its device).
TV_HD inline WaveModel wave_model(const GraphPlanState& s) {
  return WaveModel{.rows_per_cta = s.rows_per_cta,
                   .tile_tokens = s.tile_tokens,
                   .concurrent_ctas = s.concurrent_ctas,
                   .costs = SplitCosts{.token_ns = s.token_ns,
                                       .cta_ns = s.cta_ns,
                                       .combine_ns = s.combine_ns,
                                       .partial_row_ns = s.partial_row_ns,
                                       .token_bytes = s.token_bytes,
                                       .bytes_per_ns = s.bytes_per_ns}};
}

// The graph plan's workspace: byte offsets of the step's metadata and the split partials.
struct GraphWorkspace {
  size_t kv_len = 0;       // [B] int32: clamped L_b + T
  size_t qo_indptr = 0;    // [B+1] int32: b T
  size_t page_indptr = 0;  // [B+1] int32: b pages_per_lane
  size_t pages = 0;        // [B, pages_per_lane] int32: the checked page table
  size_t parents = 0;      // [B * T] int32: the checked tree
  size_t mask = 0;         // [B * T, mask words] uint32: ancestor bits
  size_t chunk = 0;        // [1] int32: the step's chunk length
  size_t part_out = 0;     // [chunk_cap, B T H, 512] dtype
  size_t part_lse = 0;     // [chunk_cap, B T H] fp32
  size_t total = 0;
};
GraphWorkspace graph_workspace(const GraphBounds& bounds, const GraphPlanState& state);

// The step's schedule for a graph plan's kernel on clamped lanes: every candidate ranked on the
// CPU (the device ranks the same candidates a thread each: cuda/graph/prepare_step.cu).
template <class Lanes>
StepSchedule host_step_schedule(const GraphPlanState& st, const Lanes& lanes) {
  const int64_t max_kv = max_lane_kv(lanes);
  const int64_t max_tiles = (max_kv + st.tile_tokens - 1) / st.tile_tokens;
  if (st.forced_chunk_tokens > 0 || max_tiles == 0)
    return {st.forced_chunk_tokens > 0 ? st.forced_chunk_tokens : st.tile_tokens, 0};
  const WaveModel m = wave_model(st);
  StepSchedule best;
  const int64_t n = chunk_candidates(max_tiles, st.tile_tokens, st.chunk_cap);
  for (int64_t c = 0; c < n; ++c) {
    const int64_t tiles = chunk_candidate(c, max_tiles, st.tile_tokens, st.chunk_cap);
    if (tiles == 0) continue;
    const SplitSchedule s = evaluate_chunks(lanes, m, tiles, max_tiles, max_kv, st.row_blocks);
    const StepSchedule cand{s.chunk_tokens, s.est_ns};
    if (better_schedule(cand, best)) best = cand;
  }
  return best;
}

}  // namespace treeverify::detail
