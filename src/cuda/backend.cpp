// The CUDA backend's launches: run() (the step data, the verify kernel, the combine) and
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
#include "cuda/sm80/config.h"
#include "cuda/sm80/launcher.h"
#include "cuda/sm90/kv_tensor_map.h"
#include "cuda/sm90/launcher.h"
#include "cuda/step_data.h"
#include "cuda/workspace.h"

namespace treeverify::detail {

using cuda::sm80::VariantId;

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
  // The wgmma kernel copies whole tiles of pages of 64 rows or more by TMA tensor copies where
  // the selection function chose so (state.tma). The maps name this layer's cache, so they are encoded for
  // every run: a host call with no device work, which a graph capture records as a kernel
  // parameter like the cache's address. `mode`: how every kernel of the call reads the cache.
  using cuda::KvMode;
  const KvMode mode = plan.kv_format != KvFormat::kE4M3 ? KvMode::k16
                      : plan.state.fast_products        ? KvMode::kE4M3Fast
                                                        : KvMode::kE4M3;
  cuda::sm90::KvTensorMaps kv_maps{};
  TV_REQUIRE_CODE(
      StatusCode::kInternal,
      !plan.state.tma || cuda::sm90::encode_kv_tensor_maps(&kv_maps, t.kv_cache, plan.num_pages,
                                                           plan.page_size, mode),
      "kv_cache",
      "the driver refused a TMA tensor map of it ({} pages of {} rows at {}); "
      "PlanTuning::disable_tma copies every tile with cp.async",
      plan.num_pages, plan.page_size, t.kv_cache);

  const cudaStream_t stream = static_cast<cudaStream_t>(stream_ptr);
  const WorkspaceLayout w = workspace_layout(plan);
  char* ws = static_cast<char*>(workspace);
  auto* mask = reinterpret_cast<uint32_t*>(ws);
  void* part_out = ws + w.part_out_offset();
  auto* part_lse = reinterpret_cast<float*>(ws + w.part_lse_offset());
  const int32_t words = mask_words(plan.max_tree);
  const int64_t rows = static_cast<int64_t>(plan.total_q) * plan.num_heads;
  const int32_t max_rows = plan.max_tree * plan.num_heads;  // of the largest request

  // Once per step: the index arrays' checks and the ancestor mask, the first time this plan
  // runs on this workspace (step_data.h). One-node trees (decode) need no mask: the kernel
  // never reads a node's own bit.
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
    if (plan.max_tree > 1) {
      cuda::launch_build_tree_mask(t.qo_indptr, t.parents, plan.batch_size, plan.total_q, words,
                                   mask, stream);
      if (cudaError_t err = cudaGetLastError(); err != cudaSuccess)
        return cuda_error("build_tree_mask launch", err);
    }
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
      .chunk_tokens = plan.state.chunk_tokens,
      .num_chunks = plan.state.num_chunks,
      .one_request_nodes = one_request ? plan.total_q : 0,
      .one_request_kv_len = one_request ? static_cast<int32_t>(plan.max_kv_len) : 0,
      .total_rows = rows,
      .scale_log2 = plan.softmax_scale * cuda::kLog2e,
  };
  auto launch_wgmma = [&] {
    using Tile = cuda::sm90::WgmmaTile;
    const dim3 grid((max_rows + Tile::kRows - 1) / Tile::kRows, plan.state.num_chunks,
                    plan.batch_size);
    return cuda::sm90::launch_verify_wgmma(kp, grid, stream, plan.dtype, mode,
                                           plan.state.tma ? &kv_maps : nullptr);
  };
  const cudaError_t err =
      plan.state.wgmma
          ? launch_wgmma()
          : cuda::sm80::with_variant(static_cast<VariantId>(plan.state.variant), [&]<typename V>(V) {
              const dim3 grid((max_rows + V::kRows - 1) / V::kRows, plan.state.num_chunks,
                              plan.batch_size);
              auto launch = [&]<KvMode kMode>() {
                return plan.dtype == DType::kBF16
                           ? cuda::sm80::launch_verify<__nv_bfloat16, V, kMode>(kp, grid, stream)
                           : cuda::sm80::launch_verify<__half, V, kMode>(kp, grid, stream);
              };
              if (mode == KvMode::k16) return launch.template operator()<KvMode::k16>();
              // Fast only where the selection chose the fast kernel (the public Plan::precision says
              // so).
              if (mode == KvMode::kE4M3Fast) {
                if constexpr (cuda::sm80::fast_mode_variant(cuda::sm80::variant_id<V>()))
                  return launch.template operator()<KvMode::kE4M3Fast>();
                else
                  return cudaErrorInvalidValue;  // fast_mode_variant: never planned
              }
              if constexpr (cuda::sm80::e4m3_variant(cuda::sm80::variant_id<V>()))
                return launch.template operator()<KvMode::kE4M3>();
              else
                return cudaErrorInvalidValue;  // e4m3_variant: never planned
            });
  if (err != cudaSuccess)
    return cuda_error(plan.state.wgmma ? "verify_wgmma_kernel launch" : "verify_mma_kernel launch",
                      err);

  if (plan.state.num_chunks > 1) {
    cuda::CombineParams cp{
        .part_out = part_out,
        .v_scale = plan.kv_format == KvFormat::kE4M3 ? t.kv_scale : nullptr,
        .part_lse = part_lse,
        .qo_indptr = t.qo_indptr,
        .kv_len = t.kv_len,
        .batch = plan.batch_size,
        .max_rows = max_rows,
        .num_heads = plan.num_heads,
        .chunk_tokens = plan.state.chunk_tokens,
        .num_chunks = plan.state.num_chunks,
        .total_rows = rows,
        .one_request_nodes = kp.one_request_nodes,
        .one_request_kv_len = kp.one_request_kv_len,
        .out = t.out,
        .out_stride_token = kp.out_stride_token,
        .out_stride_head = kp.out_stride_head,
        .lse = t.lse,
    };
    if (cudaError_t e = cuda::launch_combine(cp, plan.dtype, plan.state.programmatic_combine,
                                             plan.state.device_sms, stream);
        e != cudaSuccess)
      return cuda_error("combine launch", e);
  }
  return Status::Ok();
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
