// Tree KV commit kernel: moves row L_b + path[k] to row L_b + k for every accepted step k.
//
// Why it is safe in place, in parallel. The path is strictly increasing with path[0] = 0, so
// path[k] >= k: every move goes down or stays. A request's path is processed in chunks of
// kRowsPerChunk consecutive steps; in a chunk, every thread first loads its source into a
// register, the block synchronizes, then every thread stores. Hazards:
//  - inside a chunk, step j < k may read row L + k (path[j] = k) that step k writes: the
//    barrier puts every read of the chunk before any write of the chunk;
//  - a later chunk never reads a row an earlier chunk wrote: the earlier chunk writes rows
//    L + k with k < k0 (the later chunk's first step), the later chunk reads L + path[j] with
//    path[j] >= j >= k0;
//  - a later chunk's writes come after its own barrier, which every thread reaches only after
//    finishing its reads of every earlier chunk, so no earlier source is overwritten early.
// Destinations are distinct, so no row is written twice. The 576 columns are independent, so
// blocks split them (kSlices per request) without interacting; requests own disjoint pages
// (the page-table contract). The outcome is therefore exactly the host commit's (which moves
// in increasing k), for any tree and path.
#include "cuda/commit/kv_commit.cuh"
#include "treeverify/types.h"

namespace treeverify::cuda {
namespace {

// A row splits into kSlices column slices, one block each; a thread moves one 16-byte vector
// of a slice. 16-bit rows (1152 bytes, 72 vectors): 8 vectors = 128 bytes a slice, one fully
// used memory transaction. e4m3 rows (576 bytes, 36 vectors): 4 vectors = 64 bytes a slice.
constexpr int kSlices = 9;
// One uint4 per thread per chunk: 32 steps x kVecPerSlice vectors, so a chunk is staged in
// registers alone (no shared memory) and a 1024-node path needs 32 barriers.
constexpr int kRowsPerChunk = 32;
template <int kRowBytes>
struct RowShape {
  static constexpr int kVecPerRow = kRowBytes / 16;
  static constexpr int kVecPerSlice = kVecPerRow / kSlices;
  static constexpr int kThreads = kRowsPerChunk * kVecPerSlice;
  static_assert(kVecPerRow * 16 == kRowBytes && kSlices * kVecPerSlice == kVecPerRow,
                "a row splits into whole slices of 16-byte vectors");
};

template <int kRowBytes>
__global__ void __launch_bounds__(RowShape<kRowBytes>::kThreads)
    kv_commit_kernel(const KvCommitParams p) {
  constexpr int kVecPerRow = RowShape<kRowBytes>::kVecPerRow;
  constexpr int kVecPerSlice = RowShape<kRowBytes>::kVecPerSlice;
  const int b = blockIdx.y;
  const int32_t tree_size = __ldg(p.qo_indptr + b + 1) - __ldg(p.qo_indptr + b);
  const int32_t prefix_len = __ldg(p.kv_len + b) - tree_size;
  const int32_t start = __ldg(p.accepted_indptr + b);
  const int32_t path_len = __ldg(p.accepted_indptr + b + 1) - start;
  const int32_t* pages = p.kv_page_indices + __ldg(p.kv_page_indptr + b);
  const int32_t page_mask = (1 << p.log2_page_size) - 1;
  const int step_in_chunk = threadIdx.x / kVecPerSlice;
  const int vec = blockIdx.x * kVecPerSlice + threadIdx.x % kVecPerSlice;
  uint4* cache = static_cast<uint4*>(p.kv_cache);
  auto at = [&](int32_t pos) {
    const int64_t row =
        (static_cast<int64_t>(__ldg(pages + (pos >> p.log2_page_size))) << p.log2_page_size) +
        (pos & page_mask);
    return cache + row * kVecPerRow + vec;
  };
  // Uniform trip count for the whole block: every thread reaches every barrier.
  for (int32_t k0 = 0; k0 < path_len; k0 += kRowsPerChunk) {
    const int32_t k = k0 + step_in_chunk;
    int32_t node = k;  // self-moves (node == k) neither load nor store
    uint4 value;
    if (k < path_len) {
      node = __ldg(p.accepted_nodes + start + k);
      if (node != k) value = *at(prefix_len + node);
    }
    __syncthreads();
    if (node != k) *at(prefix_len + k) = value;
  }
}

template <int kRowBytes>
void launch(const KvCommitParams& p, cudaStream_t stream) {
  kv_commit_kernel<kRowBytes>
      <<<dim3(kSlices, p.batch), RowShape<kRowBytes>::kThreads, 0, stream>>>(p);
}

}  // namespace

void launch_kv_commit(const KvCommitParams& p, cudaStream_t stream) {
  if (p.batch == 0) return;
  if (p.row_bytes == kQKDim) {
    launch<kQKDim>(p, stream);  // e4m3
  } else {
    launch<kQKDim * 2>(p, stream);  // bf16/fp16
  }
}

}  // namespace treeverify::cuda
