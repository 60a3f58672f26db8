// The CUDA backend as the dispatch point sees it. Defined in src/cuda/ when CUDA is compiled
// in, and in src/core/cuda_absent.cpp otherwise (every entry then reports kUnsupported).
#pragma once

#include <string>
#include <vector>

#include "core/validate.h"
#include "treeverify/ddtree.h"
#include "treeverify/merge.h"
#include "treeverify/system.h"
#include "treeverify/verify.h"

namespace treeverify::detail {

bool cuda_compiled();
std::vector<int> cuda_compiled_archs();
std::string cuda_compiler_version();
// The variant each compiled architecture's tile table picks per request size (no GPU needed).
std::vector<ArchKernels> cuda_kernels_by_arch();
// How many CUDA devices are visible (0 with *note saying why: no CUDA build, no driver, ...).
int cuda_device_count(std::string* note);
// Every visible device (queried once per process and cached: the set does not change).
std::vector<DeviceInfo> cuda_list_devices(std::string* note);
// One device, queried once per process and cached; touches no other GPU.
Status cuda_device_info(int ordinal, DeviceInfo* info);
// The calling thread's current CUDA device, or -1 when there is none.
int cuda_current_device();

// Whether `device` can run every variant of the sm_<config_arch> tile table when forced
// (PlanOptions::force_config_arch): this build compiled them into the code it runs
// (TREEVERIFY_ALL_VARIANTS, cuda/mma/build.h) and their shared memory fits. kUnsupported with
// the reason plan() would give otherwise.
Status cuda_config_runnable(int config_arch, const DeviceInfo& device);
// Chooses the kernel configuration and split schedule for a validated problem on `device`;
// fills plan->kernel, reason, workspace_bytes, chunk_tokens, num_chunks, config_arch.
// kUnsupported with the device name, capability and compiled list when nothing fits.
Status cuda_plan(const VerifyProblem& problem, const ProblemSummary& summary,
                 const PlanOptions& options, const DeviceInfo& device, Plan* plan);
Status cuda_run(const Plan& plan, const VerifyTensors& tensors, void* workspace,
                size_t workspace_bytes, void* stream);
Status cuda_merge_state(const MergeStateArgs& args, void* stream);
// The device side of commit_kv_paged_cuda, after the host metadata passed validation: checks
// the device pointers and launches the row moves.
Status cuda_commit_kv_paged(const PagedKvCommit& host, const AcceptedPaths& accepted,
                            const PagedKvCommitDevice& device, void* stream);

}  // namespace treeverify::detail
