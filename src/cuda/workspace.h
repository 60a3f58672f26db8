// The workspace of a CUDA plan: the step's ancestor mask and chunk length, then (split plans
// only) the partial outputs and their lses. plan() sizes it, run() carves it.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/common/constants.h"
#include "treeverify/verify.h"

namespace treeverify::detail {

inline constexpr size_t kWorkspaceAlign = 256;
inline size_t align_up(size_t n) {
  return (n + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
}

// 32-bit words of ancestor bits a tree node holds.
inline int32_t mask_words(int32_t max_tree) { return (max_tree + 31) / 32; }

struct WorkspaceLayout {
  size_t mask_bytes = 0, part_out_bytes = 0, part_lse_bytes = 0;
  size_t chunk_offset() const { return align_up(mask_bytes); }  // int32: the chunk length
  size_t part_out_offset() const { return chunk_offset() + kWorkspaceAlign; }
  size_t part_lse_offset() const { return part_out_offset() + align_up(part_out_bytes); }
  size_t total() const { return part_lse_offset() + part_lse_bytes; }
};

inline WorkspaceLayout workspace_layout(const Plan& plan) {
  WorkspaceLayout w;
  const size_t rows = static_cast<size_t>(plan.total_q) * plan.num_heads;
  w.mask_bytes = static_cast<size_t>(plan.total_q) * mask_words(plan.max_tree) * 4;
  if (plan.state.num_chunks > 1) {
    // Partial outputs in the output's 16-bit type (their lses in fp32): cuda/common/combine.cuh.
    w.part_out_bytes = static_cast<size_t>(plan.state.num_chunks) * rows * kVDim * 2;
    w.part_lse_bytes = static_cast<size_t>(plan.state.num_chunks) * rows * 4;
  }
  return w;
}

}  // namespace treeverify::detail
