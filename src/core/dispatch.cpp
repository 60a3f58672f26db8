// The one dispatch point: plan() chooses the backend and kernel, run() launches what plan()
// chose, supports() answers with the same code. Backends sit behind it (cpu_backend.h,
// cuda_backend.h).
#include <fmt/format.h>

#include <string>
#include <utility>

#include "core/check.h"
#include "core/cuda_backend.h"
#include "core/validate.h"
#include "cpu/cpu_backend.h"
#include "treeverify/verify.h"

namespace treeverify {
namespace {

// Why the CUDA backend cannot be used on this machine at all (no CUDA in this build, no
// device, no driver), or empty when it can. Only then may kAuto fall back to the CPU: with a
// GPU present the caller holds device tensors, which a CPU backend must never be given.
std::string cuda_unavailable_reason() {
  std::string note;
  if (detail::cuda_device_count(&note) > 0) return {};
  if (!detail::cuda_compiled()) return "backend cuda-mma: " + note;
  return "backend cuda-mma: no CUDA device found" + (note.empty() ? "" : " (" + note + ")");
}

// Plans a kernel on the CUDA device the options name (or the current one).
Status plan_cuda(const VerifyProblem& problem, const detail::ProblemSummary& summary,
                 const PlanOptions& options, Plan* plan) {
  if (std::string why = cuda_unavailable_reason(); !why.empty()) {
    return Status(detail::cuda_compiled() ? StatusCode::kNoDevice : StatusCode::kUnsupported, why);
  }
  const int ordinal = options.device >= 0 ? options.device : detail::cuda_current_device();
  DeviceInfo device;
  TV_RETURN_IF_ERROR(detail::cuda_device_info(ordinal, &device));
  return detail::cuda_plan(problem, summary, options, device, plan);
}

// cpu-fast has no FP8 products: it computes exact whatever was asked, and says so when fast
// was asked.
void plan_cpu_fast(const PlanOptions& options, std::string reason, Plan* p) {
  p->backend = Backend::kCpuFast;
  p->kernel = "cpu-fast/fp32-blas";
  p->reason = std::move(reason);
  p->precision = Precision::kExact;
  if (options.precision == Precision::kFast) {
    p->reason +=
        "; precision exact, not fast: the CPU backend computes exact (fp32 products on the "
        "dequantized cache)";
  }
}

}  // namespace

Status plan(const VerifyProblem& problem, const PlanOptions& options, Plan* out) {
  detail::ProblemSummary summary;
  TV_RETURN_IF_ERROR(detail::validate_problem(problem, &summary));
  TV_REQUIRE(options.num_threads >= 0, "options.num_threads", "num_threads = {}",
             options.num_threads);
  TV_REQUIRE(options.precision == Precision::kExact || options.precision == Precision::kFast,
             "options.precision", "unknown value {}", static_cast<int>(options.precision));
  TV_REQUIRE(options.precision == Precision::kExact || problem.kv_format == KvFormat::kE4M3,
             "options.precision",
             "fast needs an e4m3 KV cache (it rounds Q and P to e4m3 for FP8 products); this "
             "cache is {}",
             dtype_name(problem.dtype));
  TV_REQUIRE(!(options.disable_tma && options.force_tma), "options.force_tma",
             "cannot be set with options.disable_tma");

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

  switch (options.backend) {
    case Backend::kCpuReference:
      p.backend = Backend::kCpuReference;
      p.kernel = "cpu-reference/fp64";
      p.reason = "requested: the float64 oracle";
      // The oracle of the fast kernels too: with round_p it rounds Q and P as they do, and
      // without round_p it computes exact whatever was asked.
      p.precision = options.round_p ? options.precision : Precision::kExact;
      if (options.precision == Precision::kFast) {
        p.reason += options.round_p ? "; precision fast: Q and P rounded to e4m3 as the fast "
                                      "kernels round them"
                                    : "; precision fast, but round_p is off: nothing rounded";
      }
      break;
    case Backend::kCpuFast:
      plan_cpu_fast(options, "requested", &p);
      break;
    case Backend::kCudaMma:
      TV_RETURN_IF_ERROR(plan_cuda(problem, summary, options, &p));
      p.backend = Backend::kCudaMma;
      break;
    case Backend::kAuto: {
      // The GPU when this machine has a usable one; the CPU fallback only when it has none.
      // A GPU that refuses the problem is an error, not a silent switch to the CPU.
      if (std::string why = cuda_unavailable_reason(); !why.empty()) {
        plan_cpu_fast(options, "no GPU: " + why, &p);
      } else {
        TV_RETURN_IF_ERROR(plan_cuda(problem, summary, options, &p));
        p.backend = Backend::kCudaMma;
      }
      break;
    }
    default:
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("argument 'options.backend': unknown value {}",
                                static_cast<int>(options.backend)));
  }
  *out = std::move(p);
  return Status::Ok();
}

Status run(const Plan& plan, const VerifyTensors& tensors, void* workspace, size_t workspace_bytes,
           void* stream) {
  TV_RETURN_IF_ERROR(detail::validate_tensors(plan, tensors));
  switch (plan.backend) {
    case Backend::kCpuReference:
      return detail::cpu_reference_run(plan, tensors);
    case Backend::kCpuFast:
      return detail::cpu_fast_run(plan, tensors);
    case Backend::kCudaMma:
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

Status supports(const VerifyProblem& problem, const PlanOptions& options) {
  Plan unused;
  return plan(problem, options, &unused);
}

Status verify_cpu(const VerifyProblem& problem, const VerifyTensors& tensors,
                  const PlanOptions& options) {
  PlanOptions cpu_options = options;
  if (cpu_options.backend == Backend::kAuto) cpu_options.backend = Backend::kCpuFast;
  TV_REQUIRE(
      cpu_options.backend == Backend::kCpuFast || cpu_options.backend == Backend::kCpuReference,
      "options.backend", "{} is not a CPU backend", backend_name(cpu_options.backend));
  Plan p;
  TV_RETURN_IF_ERROR(plan(problem, cpu_options, &p));
  return run(p, tensors, nullptr, 0, nullptr);
}

Status merge_state_cuda(const MergeStateArgs& args, void* stream) {
  return detail::cuda_merge_state(args, stream);
}

}  // namespace treeverify
