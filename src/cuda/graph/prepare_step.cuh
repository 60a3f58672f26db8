// The step kernels of a graph plan (treeverify/graph.h): the step's metadata checked into the
// workspace, then its split schedule. Launched by graph_backend.cpp.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "treeverify/graph.h"

namespace treeverify::cuda {

// Where prepare writes the step's metadata (the workspace's arrays, core/graph_step.h).
struct StepOutputs {
  int32_t* kv_len;
  int32_t* qo_indptr;
  int32_t* page_indptr;
  int32_t* pages;
  int32_t* parents;
  uint32_t* mask;
  int32_t* chunk;
};

// Two launches on `stream`: the lanes' metadata (a CTA a slice of a lane's pages; the first
// of each lane also its length and tree), then the schedule (one CTA).
cudaError_t launch_prepare_step(const GraphBounds& bounds, const detail::GraphPlanState& state,
                                const GraphStep& step, const StepOutputs& out,
                                cudaStream_t stream);

}  // namespace treeverify::cuda
