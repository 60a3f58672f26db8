// launch_call (launch.h): the main kernel of a verify call, then its combine.
#include "cuda/launch.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "core/check.h"
#include "cuda/common/combine.cuh"
#include "cuda/host_checks.h"
#include "cuda/sm80/config.h"
#include "cuda/sm80/launcher.h"
#include "cuda/sm90/kv_tensor_map.h"
#include "cuda/sm90/launcher.h"

namespace treeverify::detail {

using cuda::KvMode;
using cuda::sm80::VariantId;

Status launch_call(const CallShape& s, const cuda::VerifyKernelParams& kp, cudaStream_t stream) {
  // The wgmma kernel copies whole tiles of pages of 64 rows or more by TMA tensor copies where
  // the selection function chose so. The maps name this layer's cache, so they are encoded for
  // every call: a host call with no device work, which a graph capture records as a kernel
  // parameter like the cache's address.
  cuda::sm90::KvTensorMaps kv_maps{};
  TV_REQUIRE_CODE(StatusCode::kInternal,
                  !s.tma || cuda::sm90::encode_kv_tensor_maps(&kv_maps, kp.kv, s.num_pages,
                                                              s.page_size, s.mode),
                  "kv_cache",
                  "the driver refused a TMA tensor map of it ({} pages of {} rows at {}); "
                  "PlanTuning::disable_tma copies every tile with cp.async",
                  s.num_pages, s.page_size, kp.kv);
  const dim3 grid(s.row_blocks, kp.num_chunks, s.batch);
  const cudaError_t err =
      s.wgmma
          ? cuda::sm90::launch_verify_wgmma(kp, grid, stream, s.dtype, s.mode,
                                            s.tma ? &kv_maps : nullptr)
          : cuda::sm80::with_variant(static_cast<VariantId>(s.variant), [&]<typename V>(V) {
              auto launch = [&]<KvMode kMode>() {
                return s.dtype == DType::kBF16
                           ? cuda::sm80::launch_verify<__nv_bfloat16, V, kMode>(kp, grid, stream)
                           : cuda::sm80::launch_verify<__half, V, kMode>(kp, grid, stream);
              };
              if (s.mode == KvMode::k16) return launch.template operator()<KvMode::k16>();
              // Fast only where the selection chose the fast kernel (the plan's precision says so).
              if (s.mode == KvMode::kE4M3Fast) {
                if constexpr (cuda::sm80::instance_selectable<V>(KvMode::kE4M3Fast))
                  return launch.template operator()<KvMode::kE4M3Fast>();
                else
                  return cudaErrorInvalidValue;  // no such instance: never planned
              }
              if constexpr (cuda::sm80::instance_selectable<V>(KvMode::kE4M3))
                return launch.template operator()<KvMode::kE4M3>();
              else
                return cudaErrorInvalidValue;  // no such instance: never planned
            });
  if (err != cudaSuccess)
    return cuda_error(s.wgmma ? "verify_wgmma_kernel launch" : "verify_mma_kernel launch", err);
  if (kp.num_chunks <= 1) return Status::Ok();
  cuda::CombineParams cp{
      .part_out = kp.part_out,
      .v_scale = s.kv_format == KvFormat::kE4M3 ? kp.kv_scale : nullptr,
      .part_lse = kp.part_lse,
      .qo_indptr = kp.qo_indptr,
      .kv_len = kp.kv_len,
      .batch = s.batch,
      .max_rows = s.max_rows,
      .num_heads = kp.num_heads,
      .chunk_tokens_at = kp.chunk_tokens_at,
      .one_request_chunk_tokens = kp.one_request_chunk_tokens,
      .num_chunks = kp.num_chunks,
      .total_rows = kp.total_rows,
      .one_request_nodes = kp.one_request_nodes,
      .one_request_kv_len = kp.one_request_kv_len,
      .out = kp.out,
      .out_stride_token = kp.out_stride_token,
      .out_stride_head = kp.out_stride_head,
      .lse = kp.lse,
  };
  if (cudaError_t e =
          cuda::launch_combine(cp, s.dtype, s.programmatic_combine, s.device_sms, stream);
      e != cudaSuccess)
    return cuda_error("combine launch", e);
  return Status::Ok();
}

}  // namespace treeverify::detail
