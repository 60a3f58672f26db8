// A host plan's step data on the device: the packed ancestor bitmask (the layout of
// treeverify::AncestorMask in include/treeverify/tree.h) from the parents array, and the
// call's chunk length where the kernels read it, so that run() needs no host data and can be
// captured in a CUDA graph.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace treeverify::cuda {

// Writes mask[q * words + w] for every tree node q and word w of [0, words) (none when
// words is 0: one-node trees read no mask), and *chunk_slot = chunk_tokens.
void launch_step_data(const int32_t* qo_indptr, const int32_t* parents, int32_t batch,
                      int32_t total_q, int32_t words, uint32_t* mask, int32_t* chunk_slot,
                      int32_t chunk_tokens, cudaStream_t stream);

}  // namespace treeverify::cuda
