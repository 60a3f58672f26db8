// A graph plan (treeverify/graph.h) on the CPU backends: prepare_step checks and clamps the
// step's metadata into the (host) workspace with the same arithmetic as the device
// (core/graph_step.h), and run_layer runs the CPU backend on that metadata.
#include <cstring>

#include "core/check.h"
#include "core/graph_step.h"
#include "cpu/cpu_backend.h"
#include "treeverify/graph.h"

namespace treeverify::detail {

void cpu_graph_prepare(const GraphPlan& plan, const GraphStep& step, void* workspace) {
  const GraphBounds& g = plan.bounds;
  const GraphWorkspace w = graph_workspace(g, plan.state);
  char* ws = static_cast<char*>(workspace);
  auto* kv_len = reinterpret_cast<int32_t*>(ws + w.kv_len);
  auto* qo = reinterpret_cast<int32_t*>(ws + w.qo_indptr);
  auto* page_indptr = reinterpret_cast<int32_t*>(ws + w.page_indptr);
  auto* pages = reinterpret_cast<int32_t*>(ws + w.pages);
  auto* parents = reinterpret_cast<int32_t*>(ws + w.parents);
  auto* mask = reinterpret_cast<uint32_t*>(ws + w.mask);
  const int32_t T = g.tree_size, ppl = plan.state.pages_per_lane, words = mask_words_of(T);
  uint32_t flags = 0;
  for (int32_t b = 0; b < g.batch_size; ++b) {
    kv_len[b] = lane_kv_len(step.kv_len[b], g, &flags);
    qo[b] = b * T;
    page_indptr[b] = b * ppl;
    const int64_t lane_pages = pages_of(kv_len[b], g.page_size);
    for (int64_t k = 0; k < ppl; ++k)
      pages[int64_t{b} * ppl + k] = k < lane_pages ? lane_page(g, step, b, k, &flags) : 0;
    int32_t* lane_parents = parents + int64_t{b} * T;
    const LaneMask lm = lane_mask(g, step, b, &flags);
    for (int32_t i = 0; i < T; ++i) lane_parents[i] = lane_parent(g, step, lm, b, i, &flags);
    for (int32_t i = 0; i < T; ++i) {
      for (int32_t wi = 0; wi < words; ++wi) {
        const uint32_t bits = ancestor_word(lane_parents, i, wi);
        mask[(int64_t{b} * T + i) * words + wi] = bits;
        if (lm.base != nullptr && !mask_word_is_tree(lm.base + i * lm.stride, T, i, wi, bits))
          flags |= kGraphMaskNotTree;
      }
    }
  }
  qo[g.batch_size] = g.batch_size * T;
  page_indptr[g.batch_size] = g.batch_size * ppl;
  *reinterpret_cast<int32_t*>(ws + w.chunk) = 0;  // the CPU backends do not split
  if (step.error_flags != nullptr) *step.error_flags |= flags;
}

Status cpu_graph_run(const GraphPlan& plan, const GraphLayer& layer, void* workspace) {
  const GraphBounds& g = plan.bounds;
  const GraphWorkspace w = graph_workspace(g, plan.state);
  const char* ws = static_cast<const char*>(workspace);
  auto at = [&](size_t offset) { return reinterpret_cast<const int32_t*>(ws + offset); };
  const VerifyProblem problem{.batch_size = g.batch_size,
                              .num_heads = g.num_heads,
                              .page_size = g.page_size,
                              .num_pages = g.num_pages,
                              .dtype = g.dtype,
                              .kv_format = g.kv_format,
                              .softmax_scale = layer.softmax_scale,
                              .qo_indptr = at(w.qo_indptr),
                              .kv_len = at(w.kv_len),
                              .kv_page_indptr = at(w.page_indptr),
                              .kv_page_indices = at(w.pages),
                              .parents = at(w.parents)};
  PlanOptions options = plan.options;
  options.backend = plan.backend;
  Plan p;
  TV_RETURN_IF_ERROR(treeverify::plan(problem, options, &p));
  const VerifyTensors t{.q = layer.q,
                        .q_stride_token = layer.q_stride_token,
                        .q_stride_head = layer.q_stride_head,
                        .kv_cache = layer.kv_cache,
                        .kv_scale = layer.kv_scale,
                        .qo_indptr = problem.qo_indptr,
                        .kv_len = problem.kv_len,
                        .kv_page_indptr = problem.kv_page_indptr,
                        .kv_page_indices = problem.kv_page_indices,
                        .parents = problem.parents,
                        .out = layer.out,
                        .out_stride_token = layer.out_stride_token,
                        .out_stride_head = layer.out_stride_head,
                        .lse = layer.lse};
  return treeverify::run(p, t, nullptr, 0, nullptr);
}

}  // namespace treeverify::detail
