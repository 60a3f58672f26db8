// Host side of commit_kv_paged_cuda: device-pointer checks and the launch. The metadata was
// validated from its host copies by commit_kv_paged_cuda (src/core/kv_commit.cpp).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <utility>

#include "core/check.h"
#include "core/cuda_backend.h"
#include "cuda/commit/kv_commit.cuh"
#include "cuda/host_checks.h"
#include "treeverify/types.h"

namespace treeverify::detail {

Status cuda_commit_kv_paged(const PagedKvCommit& host, const AcceptedPaths& accepted,
                            const PagedKvCommitDevice& d, void* stream) {
  const int32_t batch = static_cast<int32_t>(host.qo_indptr.size()) - 1;
  if (batch == 0) return Status::Ok();
  // Nothing moves when every path is empty or only the root: no device memory is touched, so
  // the null pointers the contract allows in that case are fine.
  bool moves = false;
  for (int32_t b = 0; b < batch && !moves; ++b) {
    for (int32_t k = accepted.indptr[b]; k < accepted.indptr[b + 1]; ++k)
      moves = moves || accepted.nodes[k] != k - accepted.indptr[b];
  }
  if (!moves) return Status::Ok();
  for (auto [ptr, name] : {std::pair<const void*, const char*>{d.kv_cache, "device.kv_cache"},
                           {d.kv_page_indptr, "device.kv_page_indptr"},
                           {d.kv_page_indices, "device.kv_page_indices"},
                           {d.kv_len, "device.kv_len"},
                           {d.qo_indptr, "device.qo_indptr"},
                           {d.accepted_indptr, "device.accepted_indptr"},
                           {d.accepted_nodes, "device.accepted_nodes"}}) {
    TV_RETURN_IF_ERROR(require_device_pointer(ptr, name, /*required=*/true));
  }
  TV_REQUIRE(reinterpret_cast<uintptr_t>(d.kv_cache) % 16 == 0, "device.kv_cache",
             "pointer {} is not 16-byte aligned", d.kv_cache);
  const cuda::KvCommitParams p{
      .kv_cache = d.kv_cache,
      .kv_page_indptr = d.kv_page_indptr,
      .kv_page_indices = d.kv_page_indices,
      .kv_len = d.kv_len,
      .qo_indptr = d.qo_indptr,
      .accepted_indptr = d.accepted_indptr,
      .accepted_nodes = d.accepted_nodes,
      .batch = batch,
      .log2_page_size = std::countr_zero(static_cast<uint32_t>(host.page_size)),
      .row_bytes = kv_row_bytes(host.kv_format, DType::kBF16),
  };
  cuda::launch_kv_commit(p, static_cast<cudaStream_t>(stream));
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess)
    return cuda_error("kv_commit launch", e);
  return Status::Ok();
}

}  // namespace treeverify::detail
