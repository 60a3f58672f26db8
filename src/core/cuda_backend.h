// The CUDA backend as the dispatch point sees it. Defined in src/cuda/ when CUDA is compiled
// in, and in src/core/cuda_absent.cpp otherwise (every entry then reports kUnsupported).
#pragma once

#include <string>
#include <vector>

#include "core/select.h"
#include "core/validate.h"
#include "treeverify/ddtree.h"
#include "treeverify/graph.h"
#include "treeverify/merge.h"
#include "treeverify/system.h"
#include "treeverify/verify.h"

namespace treeverify::detail {

bool cuda_compiled();
std::vector<int> cuda_compiled_archs();
std::string cuda_compiler_version();
// How many CUDA devices are visible (0 with *note saying why: no CUDA build, no driver, ...).
int cuda_device_count(std::string* note);
// Every visible device (queried once per process and cached: the set does not change).
std::vector<DeviceInfo> cuda_list_devices(std::string* note);
// One device, queried once per process and cached; touches no other GPU.
Status cuda_device_info(int ordinal, DeviceInfo* info);
// The calling thread's current CUDA device, or -1 when there is none.
int cuda_current_device();

// The CUDA device `ordinal` names (-1: the current one) as the selection function reads it
// (select.h): its properties, the occupancy of each kernel there, whether the driver encodes
// TMA tensor maps. With no device or no CUDA build, *device is untouched and machine->device
// stays null with the reason (the CPU fallback's cue); a device that does not exist is an
// error.
Status cuda_describe(int ordinal, Machine* machine, DeviceDescription* device);
// Completes a CUDA plan select_kernel chose: its id (the step data's name in a workspace) and
// workspace size.
void cuda_finish_plan(Plan* plan);
Status cuda_run(const Plan& plan, const VerifyTensors& tensors, void* workspace,
                size_t workspace_bytes, void* stream);
Status cuda_merge_state(const MergeStateArgs& args, void* stream);
// A graph plan's step (the metadata kernels) and layer (verify and combine) on the device
// (cuda/graph/).
Status cuda_graph_prepare(const GraphPlan& plan, const GraphStep& step, void* workspace,
                          void* stream);
Status cuda_graph_run(const GraphPlan& plan, const GraphLayer& layer, void* workspace,
                      void* stream);
// The device side of commit_kv_paged_cuda, after the host metadata passed validation: checks
// the device pointers and launches the row moves.
Status cuda_commit_kv_paged(const PagedKvCommit& host, const AcceptedPaths& accepted,
                            const PagedKvCommitDevice& device, void* stream);

}  // namespace treeverify::detail
