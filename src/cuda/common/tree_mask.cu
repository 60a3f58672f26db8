// Packed ancestor bitmask on the device: one thread per (node, 32-node word).
#include <algorithm>

#include "cuda/common/request.cuh"
#include "cuda/common/tree_mask.cuh"

namespace treeverify::cuda {
namespace {

// Thread (q, w) walks node q's ancestors while they are >= 32 w (parents only decrease), and
// sets the bits of those inside word w. The walk is as long as the node is deep: DDTree trees
// are shallow (depth <= 16); a 1024-node chain costs about 1024 L1 hits on its longest walk.
__global__ void step_data_kernel(const int32_t* __restrict__ qo_indptr,
                                 const int32_t* __restrict__ parents, int batch, int total_q,
                                 int words, uint32_t* __restrict__ mask,
                                 int32_t* __restrict__ chunk_slot, int32_t chunk_tokens) {
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx == 0) *chunk_slot = chunk_tokens;
  if (idx >= static_cast<int64_t>(total_q) * words) return;
  const int q = static_cast<int>(idx / words);
  const int w = static_cast<int>(idx % words);
  const int q0 = __ldg(qo_indptr + find_request(qo_indptr, batch, q));
  uint32_t bits = 0;
  for (int j = q - q0; j >= 32 * w; j = __ldg(parents + q0 + j)) {
    if (j < 32 * w + 32) bits |= 1u << (j - 32 * w);
  }
  mask[idx] = bits;
}

}  // namespace

void launch_step_data(const int32_t* qo_indptr, const int32_t* parents, int32_t batch,
                      int32_t total_q, int32_t words, uint32_t* mask, int32_t* chunk_slot,
                      int32_t chunk_tokens, cudaStream_t stream) {
  const int64_t n = std::max<int64_t>(static_cast<int64_t>(total_q) * words, 1);
  constexpr int kBlock = 256;
  step_data_kernel<<<static_cast<unsigned>((n + kBlock - 1) / kBlock), kBlock, 0, stream>>>(
      qo_indptr, parents, batch, total_q, words, mask, chunk_slot, chunk_tokens);
}

}  // namespace treeverify::cuda
