// A graph plan on the device (treeverify/graph.h): prepare_step's two step kernels
// (prepare_step.cu) and run_layer's verify call (launch.h) on the workspace they filled.
#include <cuda_runtime.h>

#include "core/check.h"
#include "core/cuda_backend.h"
#include "core/graph_step.h"
#include "core/strides.h"
#include "cuda/common/constants.h"
#include "cuda/graph/prepare_step.cuh"
#include "cuda/host_checks.h"
#include "cuda/launch.h"

namespace treeverify::detail {
namespace {

Status check_device(const GraphPlan& plan) {
  int device = -1;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    return cuda_error("cudaGetDevice", err);
  TV_REQUIRE(device == plan.device, "plan", "made for device {}, but the current device is {}",
             plan.device, device);
  return Status::Ok();
}

template <typename T>
T* at(void* workspace, size_t offset) {
  return reinterpret_cast<T*>(static_cast<char*>(workspace) + offset);
}

}  // namespace

Status cuda_graph_prepare(const GraphPlan& plan, const GraphStep& step, void* workspace,
                          void* stream) {
  TV_RETURN_IF_ERROR(check_device(plan));
  TV_RETURN_IF_ERROR(require_device_pointer(workspace, "workspace"));
  TV_RETURN_IF_ERROR(require_device_pointer(step.kv_len, "step.kv_len"));
  TV_RETURN_IF_ERROR(require_device_pointer(step.kv_page_indptr, "step.kv_page_indptr"));
  TV_RETURN_IF_ERROR(require_device_pointer(step.kv_page_indices, "step.kv_page_indices"));
  TV_RETURN_IF_ERROR(require_device_pointer(step.table_rows, "step.table_rows"));
  TV_RETURN_IF_ERROR(require_device_pointer(step.parents, "step.parents"));
  TV_RETURN_IF_ERROR(require_device_pointer(step.tree_mask, "step.tree_mask"));
  TV_RETURN_IF_ERROR(require_device_pointer(step.error_flags, "step.error_flags"));
  const GraphWorkspace w = graph_workspace(plan.bounds, plan.state);
  const cuda::StepOutputs out{.kv_len = at<int32_t>(workspace, w.kv_len),
                              .qo_indptr = at<int32_t>(workspace, w.qo_indptr),
                              .page_indptr = at<int32_t>(workspace, w.page_indptr),
                              .pages = at<int32_t>(workspace, w.pages),
                              .parents = at<int32_t>(workspace, w.parents),
                              .mask = at<uint32_t>(workspace, w.mask),
                              .chunk = at<int32_t>(workspace, w.chunk)};
  if (cudaError_t err = cuda::launch_prepare_step(plan.bounds, plan.state, step, out,
                                                  static_cast<cudaStream_t>(stream));
      err != cudaSuccess)
    return cuda_error("prepare_step launch", err);
  return Status::Ok();
}

Status cuda_graph_run(const GraphPlan& plan, const GraphLayer& layer, void* workspace,
                      void* stream) {
  TV_RETURN_IF_ERROR(check_device(plan));
  const GraphBounds& g = plan.bounds;
  const GraphWorkspace w = graph_workspace(g, plan.state);
  const int32_t total_q = g.batch_size * g.tree_size;
  // The checks of a host plan's run() (validate.h), with the metadata in the workspace.
  Plan shape;
  shape.batch_size = g.batch_size;
  shape.num_heads = g.num_heads;
  shape.total_q = total_q;
  shape.dtype = g.dtype;
  shape.kv_format = g.kv_format;
  const VerifyTensors t{.q = layer.q,
                        .q_stride_token = layer.q_stride_token,
                        .q_stride_head = layer.q_stride_head,
                        .kv_cache = layer.kv_cache,
                        .kv_scale = layer.kv_scale,
                        .qo_indptr = at<int32_t>(workspace, w.qo_indptr),
                        .kv_len = at<int32_t>(workspace, w.kv_len),
                        .kv_page_indptr = at<int32_t>(workspace, w.page_indptr),
                        .kv_page_indices = at<int32_t>(workspace, w.pages),
                        .parents = at<int32_t>(workspace, w.parents),
                        .out = layer.out,
                        .out_stride_token = layer.out_stride_token,
                        .out_stride_head = layer.out_stride_head,
                        .lse = layer.lse};
  TV_RETURN_IF_ERROR(validate_tensors(shape, t));
  for (auto [ptr, name] : {std::pair<const void*, const char*>{layer.q, "q"},
                           {layer.kv_cache, "kv_cache"},
                           {layer.out, "out"},
                           {layer.lse, "lse"},
                           {layer.kv_scale, "kv_scale"},
                           {workspace, "workspace"}})
    TV_RETURN_IF_ERROR(require_device_pointer(ptr, name));

  const GraphPlanState& st = plan.state;
  const Strides strides = resolve_strides(g.num_heads, t);
  const cuda::VerifyKernelParams kp{
      .q = t.q,
      .q_stride_token = strides.q_token,
      .q_stride_head = strides.q_head,
      .kv = t.kv_cache,
      .kv_scale = t.kv_scale,
      .kv_page_indptr = t.kv_page_indptr,
      .kv_page_indices = t.kv_page_indices,
      .kv_len = t.kv_len,
      .qo_indptr = t.qo_indptr,
      .tree_mask = at<uint32_t>(workspace, w.mask),
      .mask_words = mask_words_of(g.tree_size),
      .out = t.out,
      .out_stride_token = strides.out_token,
      .out_stride_head = strides.out_head,
      .lse = t.lse,
      .part_out = at<void>(workspace, w.part_out),
      .part_lse = at<float>(workspace, w.part_lse),
      .num_heads = g.num_heads,
      .page_shift = __builtin_ctz(static_cast<unsigned>(g.page_size)),
      .chunk_tokens_at = at<int32_t>(workspace, w.chunk),  // the step's (prepare_step)
      .one_request_chunk_tokens = 0,
      .num_chunks = st.chunk_cap,
      .one_request_nodes = 0,  // the lengths change between steps: always read
      .one_request_kv_len = 0,
      .total_rows = static_cast<int64_t>(total_q) * g.num_heads,
      .scale_log2 = layer.softmax_scale * cuda::kLog2e,
  };
  using cuda::KvMode;
  const CallShape shape_of_call{
      .dtype = g.dtype,
      .kv_format = g.kv_format,
      .mode = g.kv_format != KvFormat::kE4M3 ? KvMode::k16
              : st.fast_products             ? KvMode::kE4M3Fast
                                             : KvMode::kE4M3,
      .wgmma = st.wgmma,
      .tma = st.tma,
      .variant = st.variant,
      .row_blocks = st.row_blocks,
      .batch = g.batch_size,
      .max_rows = g.tree_size * g.num_heads,
      .programmatic_combine = st.programmatic_combine,
      .device_sms = st.device_sms,
      .num_pages = g.num_pages,
      .page_size = g.page_size};
  return launch_call(shape_of_call, kp, static_cast<cudaStream_t>(stream));
}

}  // namespace treeverify::detail
