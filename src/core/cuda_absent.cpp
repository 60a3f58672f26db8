// The CUDA backend's entry points in a build without CUDA: nothing is compiled, so every
// entry says so and the dispatch point falls back to the CPU.
#include "core/cuda_backend.h"

namespace treeverify::detail {
namespace {
constexpr const char* kNoCuda =
    "this build has no CUDA backend (configured with TREEVERIFY_CUDA=OFF or without nvcc)";
}

bool cuda_compiled() { return false; }
std::vector<int> cuda_compiled_archs() { return {}; }
std::string cuda_compiler_version() { return {}; }
std::vector<ArchKernels> cuda_kernels_by_arch() { return {}; }
int cuda_current_device() { return -1; }

int cuda_device_count(std::string* note) {
  if (note) *note = kNoCuda;
  return 0;
}

std::vector<DeviceInfo> cuda_list_devices(std::string* note) {
  if (note) *note = kNoCuda;
  return {};
}

Status cuda_device_info(int, DeviceInfo*) { return Status(StatusCode::kUnsupported, kNoCuda); }

Status cuda_config_runnable(int, const DeviceInfo&) {
  return Status(StatusCode::kUnsupported, kNoCuda);
}

Status cuda_plan(const VerifyProblem&, const ProblemSummary&, const PlanOptions&, const DeviceInfo&,
                 Plan*) {
  return Status(StatusCode::kUnsupported, kNoCuda);
}

Status cuda_run(const Plan&, const VerifyTensors&, void*, size_t, void*) {
  return Status(StatusCode::kUnsupported, kNoCuda);
}

Status cuda_merge_state(const MergeStateArgs&, void*) {
  return Status(StatusCode::kUnsupported, std::string("merge_state_cuda: ") + kNoCuda);
}

Status cuda_commit_kv_paged(const PagedKvCommit&, const AcceptedPaths&, const PagedKvCommitDevice&,
                            void*) {
  return Status(StatusCode::kUnsupported, std::string("commit_kv_paged_cuda: ") + kNoCuda);
}

}  // namespace treeverify::detail
