// The one dispatch point: plan() validates, asks the selection function (select.h) once and
// records its choice; run() launches what plan() chose; supports() answers with the same code.
// Backends sit behind it (cpu_backend.h, cuda_backend.h).
#include <fmt/format.h>

#include <string>
#include <utility>

#include "core/check.h"
#include "core/cuda_backend.h"
#include "core/select.h"
#include "core/validate.h"
#include "cpu/cpu_backend.h"
#include "treeverify/tuning.h"
#include "treeverify/verify.h"

namespace treeverify {

Status plan(const VerifyProblem& problem, const PlanOptions& options, const PlanTuning& tuning,
            Plan* out) {
  detail::ProblemSummary summary;
  TV_RETURN_IF_ERROR(detail::validate_problem(problem, &summary));
  // The GPU is asked about only when a CUDA backend may run.
  detail::Machine machine;
  detail::DeviceDescription device;
  machine.build = detail::this_build();
  if (options.backend == Backend::kAuto || options.backend == Backend::kCuda)
    TV_RETURN_IF_ERROR(detail::cuda_describe(options.device, &machine, &device));
  detail::KernelChoice choice;
  TV_RETURN_IF_ERROR(
      detail::select_kernel(problem, summary, options, tuning, machine, &choice));

  Plan p;
  p.batch_size = problem.batch_size;
  p.num_heads = problem.num_heads;
  p.page_size = problem.page_size;
  p.num_pages = problem.num_pages;
  p.total_q = summary.total_q;
  p.max_tree = summary.max_tree;
  p.nnz_pages = summary.nnz_pages;
  p.max_kv_len = summary.max_kv_len;
  p.dtype = problem.dtype;
  p.kv_format = problem.kv_format;
  p.softmax_scale = problem.softmax_scale;
  p.options = options;
  p.backend = choice.backend;
  p.kernel = choice.name();
  p.reason = choice.explain();
  p.precision = choice.precision;
  if (choice.backend == Backend::kCuda) {
    p.device = device.info.ordinal;
    detail::PlanState& st = p.state;
    st.chunk_tokens = choice.schedule.chunk_tokens;
    st.num_chunks = choice.schedule.num_chunks;
    st.config_arch = choice.config_arch;
    st.variant = static_cast<int32_t>(choice.variant);
    st.tile_tokens = choice.tile_tokens;
    st.rows_per_cta = choice.rows_per_cta;
    st.fast_products = choice.precision == Precision::kFast;
    st.wgmma = choice.family == detail::KernelFamily::kWgmma;
    st.tma = choice.tma;
    st.programmatic_combine = choice.programmatic_combine;
    st.device_sms = device.info.sm_count;
    detail::cuda_finish_plan(&p);
  }
  *out = std::move(p);
  return Status::Ok();
}

Status plan(const VerifyProblem& problem, const PlanOptions& options, Plan* out) {
  return plan(problem, options, PlanTuning{}, out);
}

Status run(const Plan& plan, const VerifyTensors& tensors, void* workspace, size_t workspace_bytes,
           void* stream) {
  TV_RETURN_IF_ERROR(detail::validate_tensors(plan, tensors));
  switch (plan.backend) {
    case Backend::kCpuReference:
      return detail::cpu_reference_run(plan, tensors);
    case Backend::kCpu:
      return detail::cpu_fast_run(plan, tensors);
    case Backend::kCuda:
      TV_REQUIRE(workspace_bytes >= plan.workspace_bytes, "workspace_bytes",
                 "{} bytes given, the plan needs {}", workspace_bytes, plan.workspace_bytes);
      TV_REQUIRE(workspace != nullptr || plan.workspace_bytes == 0, "workspace",
                 "null, the plan needs {} bytes", plan.workspace_bytes);
      return detail::cuda_run(plan, tensors, workspace, workspace_bytes, stream);
    case Backend::kAuto:
      break;
  }
  return Status(StatusCode::kInvalidArgument,
                "argument 'plan': not a plan returned by a successful plan() call");
}

Status supports(const VerifyProblem& problem, const PlanOptions& options,
                const PlanTuning& tuning) {
  Plan unused;
  return plan(problem, options, tuning, &unused);
}

Status supports(const VerifyProblem& problem, const PlanOptions& options) {
  return supports(problem, options, PlanTuning{});
}

Status verify_cpu(const VerifyProblem& problem, const VerifyTensors& tensors,
                  const PlanOptions& options) {
  PlanOptions cpu_options = options;
  if (cpu_options.backend == Backend::kAuto) cpu_options.backend = Backend::kCpu;
  TV_REQUIRE(
      cpu_options.backend == Backend::kCpu || cpu_options.backend == Backend::kCpuReference,
      "options.backend", "{} is not a CPU backend", backend_name(cpu_options.backend));
  Plan p;
  TV_RETURN_IF_ERROR(plan(problem, cpu_options, &p));
  return run(p, tensors, nullptr, 0, nullptr);
}

Status merge_state_cuda(const MergeStateArgs& args, void* stream) {
  return detail::cuda_merge_state(args, stream);
}

}  // namespace treeverify
