// The CUDA backend's run() of a host plan (the step data, then the verify call: launch.h) and
// merge_state on the device. The selection function (core/select.h) chose what run() launches.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "core/check.h"
#include "core/cuda_backend.h"
#include "core/strides.h"
#include "cuda/common/combine.cuh"
#include "cuda/common/constants.h"
#include "cuda/common/tree_mask.cuh"
#include "cuda/host_checks.h"
#include "cuda/launch.h"
#include "cuda/step_data.h"
#include "cuda/workspace.h"

namespace treeverify::detail {

Status cuda_run(const Plan& plan, const VerifyTensors& t, void* workspace, size_t,
                void* stream_ptr) {
  int device = -1;
  if (cudaError_t err = cudaGetDevice(&device); err != cudaSuccess)
    return cuda_error("cudaGetDevice", err);
  TV_REQUIRE(device == plan.device, "plan", "made for device {}, but the current device is {}",
             plan.device, device);
  if (plan.total_q == 0) return Status::Ok();
  // Per layer: the tensors that change between layers.
  TV_RETURN_IF_ERROR(require_device_pointer(t.q, "q"));
  TV_RETURN_IF_ERROR(require_device_pointer(t.kv_cache, "kv_cache"));
  TV_RETURN_IF_ERROR(require_device_pointer(t.out, "out"));
  TV_RETURN_IF_ERROR(require_device_pointer(t.lse, "lse"));
  // `mode`: how every kernel of the call reads the cache.
  using cuda::KvMode;
  const KvMode mode = plan.kv_format != KvFormat::kE4M3 ? KvMode::k16
                      : plan.state.fast_products        ? KvMode::kE4M3Fast
                                                        : KvMode::kE4M3;
  const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const WorkspaceLayout w = workspace_layout(plan);
  char* ws = static_cast<char*>(workspace);
  auto* mask = reinterpret_cast<uint32_t*>(ws);
  auto* chunk_slot = reinterpret_cast<int32_t*>(ws + w.chunk_offset());
  void* part_out = ws + w.part_out_offset();
  auto* part_lse = reinterpret_cast<float*>(ws + w.part_lse_offset());
  const int32_t words = mask_words(plan.max_tree);
  const int64_t rows = static_cast<int64_t>(plan.total_q) * plan.num_heads;
  const int32_t max_rows = plan.max_tree * plan.num_heads;  // of the largest request

  // Once per step: the index arrays' checks, the ancestor mask and the chunk length the kernels
  // read, the first time this plan runs on this workspace (step_data.h).
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  unsigned long long capture_id = 0;
  if (cudaError_t err = cudaStreamGetCaptureInfo(stream, &capturing, &capture_id);
      err != cudaSuccess)
    return cuda_error("cudaStreamGetCaptureInfo", err);
  if (capturing != cudaStreamCaptureStatusActive) capture_id = 0;
  const StepArrays arrays{t.qo_indptr,       t.kv_len,  t.kv_page_indptr,
                          t.kv_page_indices, t.parents, capture_id};
  if (!holds_step_data(workspace, plan.state.id, arrays)) {
    TV_RETURN_IF_ERROR(require_device_pointer(t.qo_indptr, "qo_indptr"));
    TV_RETURN_IF_ERROR(require_device_pointer(t.kv_len, "kv_len"));
    TV_RETURN_IF_ERROR(require_device_pointer(t.kv_page_indptr, "kv_page_indptr"));
    TV_RETURN_IF_ERROR(require_device_pointer(t.kv_page_indices, "kv_page_indices"));
    TV_RETURN_IF_ERROR(require_device_pointer(t.parents, "parents"));
    TV_RETURN_IF_ERROR(require_device_pointer(workspace, "workspace"));
    // One-node trees (decode) need no mask: the kernel never reads a node's own bit.
    cuda::launch_step_data(t.qo_indptr, t.parents, plan.batch_size, plan.total_q,
                           plan.max_tree > 1 ? words : 0, mask, chunk_slot,
                           plan.state.chunk_tokens, stream);
    if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
      return cuda_error("step data launch", err);
    // Recorded for plans without a mask too: their partials may overwrite another plan's.
    record_step_data(workspace, plan.state.id, arrays);
  }

  const Strides strides = resolve_strides(plan.num_heads, t);
  // One request: the kernels take its metadata from the plan (the arrays must hold the same).
  const bool one_request = plan.batch_size == 1;
  cuda::VerifyKernelParams kp{
      .q = t.q,
      .q_stride_token = strides.q_token,
      .q_stride_head = strides.q_head,
      .kv = t.kv_cache,
      .kv_scale = t.kv_scale,
      .kv_page_indptr = t.kv_page_indptr,
      .kv_page_indices = t.kv_page_indices,
      .kv_len = t.kv_len,
      .qo_indptr = t.qo_indptr,
      .tree_mask = mask,
      .mask_words = words,
      .out = t.out,
      .out_stride_token = strides.out_token,
      .out_stride_head = strides.out_head,
      .lse = t.lse,
      .part_out = part_out,
      .part_lse = part_lse,
      .num_heads = plan.num_heads,
      .page_shift = __builtin_ctz(static_cast<unsigned>(plan.page_size)),
      .chunk_tokens_at = chunk_slot,
      .one_request_chunk_tokens = one_request ? plan.state.chunk_tokens : 0,
      .num_chunks = plan.state.num_chunks,
      .one_request_nodes = one_request ? plan.total_q : 0,
      .one_request_kv_len = one_request ? static_cast<int32_t>(plan.max_kv_len) : 0,
      .total_rows = rows,
      .scale_log2 = plan.softmax_scale * cuda::kLog2e,
  };
  const CallShape shape{.dtype = plan.dtype,
                        .kv_format = plan.kv_format,
                        .mode = mode,
                        .wgmma = plan.state.wgmma,
                        .tma = plan.state.tma,
                        .variant = plan.state.variant,
                        .row_blocks = (max_rows + plan.state.rows_per_cta - 1) / plan.state.rows_per_cta,
                        .batch = plan.batch_size,
                        .max_rows = max_rows,
                        .programmatic_combine = plan.state.programmatic_combine,
                        .device_sms = plan.state.device_sms,
                        .num_pages = plan.num_pages,
                        .page_size = plan.page_size};
  return launch_call(shape, kp, stream);
}

Status cuda_merge_state(const MergeStateArgs& a, void* stream) {
  TV_REQUIRE(a.dtype == DType::kBF16 || a.dtype == DType::kFP16, "dtype", "value {}",
             static_cast<int>(a.dtype));
  TV_REQUIRE(a.num_rows >= 0, "num_rows", "{}", a.num_rows);
  TV_REQUIRE(a.head_dim > 0, "head_dim", "{}", a.head_dim);
  if (a.num_rows == 0) return Status::Ok();
  TV_REQUIRE(a.v_a && a.s_a && a.v_b && a.s_b && a.v_out, "v_a/s_a/v_b/s_b/v_out",
             "a required pointer is null");
  for (auto [ptr, name] : {std::pair<const void*, const char*>{a.v_a, "v_a"},
                           {a.s_a, "s_a"},
                           {a.v_b, "v_b"},
                           {a.s_b, "s_b"},
                           {a.v_out, "v_out"},
                           {a.s_out, "s_out"}})
    TV_RETURN_IF_ERROR(require_device_pointer(ptr, name));
  cuda::launch_merge_state(a.dtype, a.num_rows, a.head_dim, a.v_a, a.s_a, a.v_b, a.s_b, a.v_out,
                           a.s_out, static_cast<cudaStream_t>(stream));
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return cuda_error("merge_state launch", e);
  return Status::Ok();
}

}  // namespace treeverify::detail
