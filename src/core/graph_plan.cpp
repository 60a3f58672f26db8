// The graph-safe plan (treeverify/graph.h): plan_graph() checks the bounds and asks the
// selection function (select.h) for the kernel of the largest step they allow; prepare_step()
// and run_layer() dispatch to the CPU (cpu/graph_cpu.cpp) or CUDA (cuda/graph/) backend.
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/cuda_backend.h"
#include "core/graph_step.h"
#include "core/select.h"
#include "core/validate.h"
#include "cpu/cpu_backend.h"
#include "treeverify/graph.h"

namespace treeverify {
namespace detail {
namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
size_t align_up(size_t n) { return (n + 255) / 256 * 256; }

Status validate_bounds(const GraphBounds& g) {
  TV_REQUIRE(g.batch_size >= 1 && g.batch_size <= 65535, "bounds.batch_size", "{}",
             g.batch_size);
  TV_REQUIRE(g.tree_size >= 1 && g.tree_size <= kMaxTreeSize, "bounds.tree_size", "{}",
             g.tree_size);
  TV_REQUIRE(g.num_heads >= 1 && g.num_heads <= kMaxHeads, "bounds.num_heads", "{}",
             g.num_heads);
  TV_REQUIRE(is_valid_page_size(g.page_size), "bounds.page_size", "{}", g.page_size);
  TV_REQUIRE(g.num_pages >= 1 && g.num_pages <= std::numeric_limits<int32_t>::max(),
             "bounds.num_pages", "{} (page ids are int32)", g.num_pages);
  TV_REQUIRE(g.max_kv_len >= g.tree_size, "bounds.max_kv_len", "{} with tree_size {}",
             g.max_kv_len, g.tree_size);
  TV_REQUIRE(g.dtype == DType::kBF16 || g.dtype == DType::kFP16, "bounds.dtype", "value {}",
             static_cast<int>(g.dtype));
  TV_REQUIRE(g.kv_format == KvFormat::kSameAsQ || g.kv_format == KvFormat::kE4M3,
             "bounds.kv_format", "value {}", static_cast<int>(g.kv_format));
  const int64_t total_q = int64_t{g.batch_size} * g.tree_size;
  TV_REQUIRE(total_q <= std::numeric_limits<int32_t>::max(), "bounds.batch_size",
             "{} lanes of {} nodes exceed int32 rows", g.batch_size, g.tree_size);
  const int64_t pages_per_lane = ceil_div(g.max_kv_len, g.page_size);
  TV_REQUIRE(pages_per_lane * g.batch_size <= std::numeric_limits<int32_t>::max(),
             "bounds.max_kv_len", "{} lanes of {} pages exceed an int32 page table",
             g.batch_size, pages_per_lane);
  switch (g.page_table) {
    case PageTable::kCsr:
      TV_REQUIRE(g.page_capacity >= 0, "bounds.page_capacity", "{}", g.page_capacity);
      break;
    case PageTable::kRows:
    case PageTable::kSlotRows: {
      TV_REQUIRE(g.page_capacity >= 1, "bounds.page_capacity", "{} table rows", g.page_capacity);
      const int64_t needed = g.page_table == PageTable::kRows
                                 ? pages_per_lane
                                 : (pages_per_lane - 1) * g.page_size + 1;
      TV_REQUIRE(g.table_stride >= needed, "bounds.table_stride",
                 "{} entries a row, but max_kv_len {} needs {} (pages of {})", g.table_stride,
                 g.max_kv_len, needed, g.page_size);
      TV_REQUIRE(g.page_capacity <= std::numeric_limits<int64_t>::max() / g.table_stride,
                 "bounds.page_capacity", "{} rows of {}", g.page_capacity, g.table_stride);
      break;
    }
    default:
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("argument 'bounds.page_table': unknown value {}",
                                static_cast<int>(g.page_table)));
  }
  TV_REQUIRE(g.tree == TreeInput::kChain || g.tree == TreeInput::kParents ||
                 g.tree == TreeInput::kMask || g.tree == TreeInput::kFullMask,
             "bounds.tree", "unknown value {}", static_cast<int>(g.tree));

  return Status::Ok();
}

}  // namespace

GraphWorkspace graph_workspace(const GraphBounds& g, const GraphPlanState& s) {
  GraphWorkspace w;
  const size_t lanes = static_cast<size_t>(g.batch_size);
  const size_t nodes = lanes * g.tree_size;
  size_t at = 0;
  auto take = [&](size_t bytes) {
    const size_t offset = at;
    at = align_up(at + bytes);
    return offset;
  };
  w.kv_len = take(lanes * 4);
  w.qo_indptr = take((lanes + 1) * 4);
  w.page_indptr = take((lanes + 1) * 4);
  w.pages = take(lanes * static_cast<size_t>(s.pages_per_lane) * 4);
  w.parents = take(nodes * 4);
  w.mask = take(nodes * mask_words_of(g.tree_size) * 4);
  w.chunk = take(4);
  const size_t rows = nodes * g.num_heads;
  const bool split = s.chunk_cap > 1;
  w.part_out = take(split ? static_cast<size_t>(s.chunk_cap) * rows * kVDim * 2 : 0);
  w.part_lse = take(split ? static_cast<size_t>(s.chunk_cap) * rows * 4 : 0);
  w.total = at;
  return w;
}

}  // namespace detail

std::string graph_error_names(uint32_t flags) {
  if (flags == 0) return "none";
  std::string s;
  for (auto [bit, name] : {std::pair{kGraphKvLenClamped, "kv_len clamped"},
                           {kGraphPageClamped, "page id clamped"},
                           {kGraphTableClamped, "table row or range clamped"},
                           {kGraphParentClamped, "parent clamped"},
                           {kGraphMaskNotTree, "mask not a tree"}}) {
    if (flags & bit) s += (s.empty() ? "" : ", ") + std::string(name);
  }
  if (flags & ~uint32_t{0x1f}) s += fmt::format("{}unknown bits {:#x}", s.empty() ? "" : ", ",
                                                flags & ~uint32_t{0x1f});
  return s;
}

Status plan_graph(const GraphBounds& bounds, const PlanOptions& options, const PlanTuning& tuning,
                  GraphPlan* out) {
  using detail::KernelFamily;
  TV_RETURN_IF_ERROR(detail::validate_bounds(bounds));
  // The kernel is chosen for the largest step the bounds allow: every lane at max_kv_len.
  const int32_t B = bounds.batch_size, T = bounds.tree_size;
  std::vector<int32_t> qo(static_cast<size_t>(B) + 1), kv_len(static_cast<size_t>(B), bounds.max_kv_len);
  for (int32_t b = 0; b <= B; ++b) qo[b] = b * T;
  const VerifyProblem shape{.batch_size = B,
                            .num_heads = bounds.num_heads,
                            .page_size = bounds.page_size,
                            .num_pages = bounds.num_pages,
                            .dtype = bounds.dtype,
                            .kv_format = bounds.kv_format,
                            .softmax_scale = 1.f,  // each layer's own (GraphLayer)
                            .qo_indptr = qo.data(),
                            .kv_len = kv_len.data()};
  const detail::ProblemSummary summary{.total_q = B * T,
                                       .max_tree = T,
                                       .max_kv_len = bounds.max_kv_len,
                                       .max_prefix = bounds.max_kv_len - T,
                                       .total_kv = int64_t{B} * bounds.max_kv_len};
  detail::Machine machine;
  detail::DeviceDescription device;
  machine.build = detail::this_build();
  if (options.backend == Backend::kAuto || options.backend == Backend::kCuda)
    TV_RETURN_IF_ERROR(detail::cuda_describe(options.device, &machine, &device));
  // The graph plan keeps its variant at every step: the table's for its rows, never a smaller
  // one for a short step (the split follows the step's lengths instead).
  detail::KernelChoice choice;
  TV_RETURN_IF_ERROR(detail::select_kernel(shape, summary, options, tuning, machine, &choice,
                                           /*fixed_variant=*/true));

  GraphPlan p;
  p.backend = choice.backend;
  p.kernel = choice.name();
  p.bounds = bounds;
  p.options = options;
  p.precision = choice.precision;
  detail::GraphPlanState& st = p.state;
  st.pages_per_lane = static_cast<int32_t>(detail::ceil_div(bounds.max_kv_len, bounds.page_size));
  if (choice.backend != Backend::kCuda) {
    p.reason = choice.explain_kernel() + "; graph plan: the step's metadata checked on the CPU";
  } else {
    p.device = device.info.ordinal;
    st.variant = static_cast<int32_t>(choice.variant);
    st.config_arch = choice.config_arch;
    st.rows_per_cta = choice.rows_per_cta;
    st.tile_tokens = choice.tile_tokens;
    st.row_blocks = static_cast<int32_t>(detail::ceil_div(int64_t{T} * bounds.num_heads,
                                                          choice.rows_per_cta));
    st.concurrent_ctas = choice.concurrent_ctas;
    st.forced_chunk_tokens = tuning.chunk_tokens;
    const int64_t max_tiles = detail::ceil_div(bounds.max_kv_len, choice.tile_tokens);
    // The grid's chunks: enough for four waves of CTAs when every lane is as long as the
    // bounds allow (the host schedule's candidates go no further), or all a forced length needs.
    const int64_t waves4 = detail::ceil_div(4 * int64_t{st.concurrent_ctas},
                                            int64_t{st.row_blocks} * B);
    const int64_t cap = tuning.chunk_tokens > 0
                            ? detail::ceil_div(bounds.max_kv_len, tuning.chunk_tokens)
                            : std::clamp<int64_t>(waves4, 1, max_tiles);
    TV_REQUIRE(cap <= 65535, "tuning.chunk_tokens", "{} chunks exceed the grid", cap);
    st.chunk_cap = static_cast<int32_t>(cap);
    st.token_ns = choice.costs.token_ns;
    st.cta_ns = choice.costs.cta_ns;
    st.combine_ns = choice.costs.combine_ns;
    st.partial_row_ns = choice.costs.partial_row_ns;
    st.token_bytes = choice.costs.token_bytes;
    st.bytes_per_ns = choice.costs.bytes_per_ns;
    st.fast_products = choice.precision == Precision::kFast;
    st.wgmma = choice.family == KernelFamily::kWgmma;
    st.tma = choice.tma;
    st.programmatic_combine = choice.programmatic_combine;
    st.device_sms = device.info.sm_count;
    p.reason = fmt::format(
        "{}; graph plan: {} lane(s) x {} row block(s), the step's split on the device, at most "
        "{} chunk(s) (every lane at {} tokens: {} of {} tokens)",
        choice.explain_kernel(), B, st.row_blocks, st.chunk_cap, bounds.max_kv_len,
        choice.schedule.num_chunks, choice.schedule.chunk_tokens);
  }
  const detail::GraphWorkspace layout = detail::graph_workspace(bounds, st);
  st.chunk_offset = layout.chunk;
  p.workspace_bytes = layout.total;
  *out = std::move(p);
  return Status::Ok();
}

Status plan_graph(const GraphBounds& bounds, const PlanOptions& options, GraphPlan* plan) {
  return plan_graph(bounds, options, PlanTuning{}, plan);
}

namespace {

Status check_graph_plan(const GraphPlan& plan, const void* workspace, size_t workspace_bytes) {
  TV_REQUIRE(plan.backend == Backend::kCpuReference || plan.backend == Backend::kCpu ||
                 plan.backend == Backend::kCuda,
             "plan", "not a plan returned by a successful plan_graph() call");
  TV_REQUIRE(workspace_bytes >= plan.workspace_bytes, "workspace_bytes",
             "{} bytes given, the plan needs {}", workspace_bytes, plan.workspace_bytes);
  TV_REQUIRE(workspace != nullptr, "workspace", "null, the plan needs {} bytes",
             plan.workspace_bytes);
  return Status::Ok();
}

}  // namespace

Status prepare_step(const GraphPlan& plan, const GraphStep& step, void* workspace,
                    size_t workspace_bytes, void* stream) {
  TV_RETURN_IF_ERROR(check_graph_plan(plan, workspace, workspace_bytes));
  const GraphBounds& g = plan.bounds;
  TV_REQUIRE(step.kv_len != nullptr, "step.kv_len", "null");
  TV_REQUIRE(step.kv_page_indices != nullptr, "step.kv_page_indices", "null");
  TV_REQUIRE(g.page_table != PageTable::kCsr || step.kv_page_indptr != nullptr,
             "step.kv_page_indptr", "null with a CSR page table");
  TV_REQUIRE(g.tree != TreeInput::kParents || step.parents != nullptr, "step.parents",
             "null with TreeInput::kParents");
  TV_REQUIRE((g.tree != TreeInput::kMask && g.tree != TreeInput::kFullMask) ||
                 step.tree_mask != nullptr,
             "step.tree_mask", "null with a mask tree input");
  TV_REQUIRE(step.mask_bytes >= 0, "step.mask_bytes", "{}", step.mask_bytes);
  if (plan.backend == Backend::kCuda)
    return detail::cuda_graph_prepare(plan, step, workspace, stream);
  detail::cpu_graph_prepare(plan, step, workspace);
  return Status::Ok();
}

Status run_layer(const GraphPlan& plan, const GraphLayer& layer, void* workspace,
                 size_t workspace_bytes, void* stream) {
  TV_RETURN_IF_ERROR(check_graph_plan(plan, workspace, workspace_bytes));
  TV_REQUIRE(std::isfinite(layer.softmax_scale), "layer.softmax_scale", "{}", layer.softmax_scale);
  if (plan.backend == Backend::kCuda)
    return detail::cuda_graph_run(plan, layer, workspace, stream);
  return detail::cpu_graph_run(plan, layer, workspace);
}

}  // namespace treeverify
