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

Status cuda_describe(int, Machine* machine, DeviceDescription*) {
  machine->device = nullptr;
  machine->no_device_code = StatusCode::kUnsupported;
  machine->no_device = std::string("backend cuda: ") + kNoCuda;
  return Status::Ok();
}

void cuda_finish_plan(Plan*) {}

Status cuda_run(const Plan&, const VerifyTensors&, void*, size_t, void*) {
  return Status(StatusCode::kUnsupported, kNoCuda);
}

Status cuda_graph_prepare(const GraphPlan&, const GraphStep&, void*, void*) {
  return Status(StatusCode::kUnsupported, std::string("prepare_step: ") + kNoCuda);
}

Status cuda_graph_run(const GraphPlan&, const GraphLayer&, void*, void*) {
  return Status(StatusCode::kUnsupported, std::string("run_layer: ") + kNoCuda);
}

Status cuda_merge_state(const MergeStateArgs&, void*) {
  return Status(StatusCode::kUnsupported, std::string("merge_state_cuda: ") + kNoCuda);
}

Status cuda_commit_kv_paged(const PagedKvCommit&, const AcceptedPaths&, const PagedKvCommitDevice&,
                            void*) {
  return Status(StatusCode::kUnsupported, std::string("commit_kv_paged_cuda: ") + kNoCuda);
}

}  // namespace treeverify::detail
