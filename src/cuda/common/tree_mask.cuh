// Device-side construction of the packed ancestor bitmask (the layout of
// treeverify::AncestorMask in include/treeverify/tree.h) from the parents array, so that
// run() needs no host data and can be captured in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace treeverify::cuda {

// Writes mask[q * words + w] for every tree node q and word w of [0, words).
void launch_build_tree_mask(const int32_t* qo_indptr, const int32_t* parents, int32_t batch,
                            int32_t total_q, int32_t words, uint32_t* mask, cudaStream_t stream);

}  // namespace treeverify::cuda
