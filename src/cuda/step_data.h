// Which plan's step data each workspace holds. The ancestor mask depends only on a step's tree,
// so run() builds it in the workspace the first time a plan runs there and every later layer
// reuses it; the device-pointer checks of the index arrays, which are the same for every
// layer of a step, are paid once with it.
#pragma once

#include <cstdint>

namespace treeverify::detail {

// The index arrays a run reads, and the stream capture it is recorded into; equal tuples mean
// the same step metadata on the device. A graph is replayed later, after whatever else ran on
// the workspace, so a capture never trusts step data built outside it: the first run of a
// plan in each capture builds it again inside the graph, and a run outside any capture
// (capture 0) never trusts what a capture recorded.
struct StepArrays {
  const void* qo_indptr;
  const void* kv_len;
  const void* kv_page_indptr;
  const void* kv_page_indices;
  const void* parents;
  unsigned long long capture_id;  // cudaStreamGetCaptureInfo's id; 0 when not capturing
  bool operator==(const StepArrays&) const = default;
};

// A new plan id, distinct within the process (Plan::state.id).
uint64_t new_plan_id();

// Whether `workspace` holds the step data of plan `plan_id` built from `arrays`, i.e. the last
// record_step_data for this workspace had the same plan and arrays.
bool holds_step_data(const void* workspace, uint64_t plan_id, const StepArrays& arrays);

// Records that `workspace` now holds plan `plan_id`'s step data (after its launch succeeded).
// The registry keeps a bounded number of workspaces: one it forgot is only rebuilt.
void record_step_data(const void* workspace, uint64_t plan_id, const StepArrays& arrays);

}  // namespace treeverify::detail
