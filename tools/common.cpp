// Case-selection flags, L scaling and the oracle check shared by `bench` and `check`.
#include "common.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <memory>
#include <new>
#include <stdexcept>

#include "app.h"
#include "core/check.h"
#include "cpu/cpu_backend.h"
#include "testing/cases.h"
#include "timing.h"

namespace treeverify::cli {

CLI::Validator seed_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t seed = 0;
        const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seed);
        if (!text.empty() && error == std::errc() && end == text.data() + text.size()) return "";
        return fmt::format("'{}' is not an integer in [0, 2^64 - 1]", text);
      },
      "UINT64", "seed");
}

void add_planning_flags(CLI::App* app, CaseFlags* f) {
  app->add_option("--suite", f->suite_file, "suite JSON file instead of the built-in one")
      ->check(CLI::ExistingFile);
  app->add_option("--backend", f->backend, "auto, cpu-reference, cpu or cuda")
      ->capture_default_str();
  app->add_option("--kv-format,--kv-dtype", f->kv_format,
                  "KV cache of every case: same (the q dtype) or e4m3 (products as --precision "
                  "says); --kv-dtype is another name for it")
      ->capture_default_str();
  app->add_option("--precision", f->precision,
                  "e4m3 caches: exact (codes widened, fp16 products) or fast (Q and P rounded to "
                  "e4m3, FP8 products where the GPU has them; elsewhere the plan runs exact and "
                  "says why)")
      ->capture_default_str();
}

void add_case_flags(CLI::App* app, CaseFlags* f) {
  app->add_option("--config-arch", f->config_arch,
                  "CUDA: force the tile configuration of this SM version (e.g. 120 on an H200)");
  app->add_option("--rows-per-cta", f->rows_per_cta,
                  "CUDA: run the 16, 32 or 64-row variant instead of the table's choice (tuning)");
  app->add_flag("--pair-ctas", f->pair_ctas,
                "CUDA: run requests of more than 32 rows on a 16-bit cache as pairs of CTAs (one "
                "cluster, each over half of every KV row: r64-s3-c2; sm_90+, builds with every "
                "variant; tuning)");
  app->add_option("--variant", f->variant,
                  "CUDA: run this portable-kernel variant (r64-s3-t16, r64-s2-k2, ...) for every "
                  "request instead of the table's choice (builds with every variant; tuning)")
      ->excludes("--pair-ctas");
  app->add_flag("--no-tma", f->no_tma,
                "CUDA: the sm_90a wgmma kernel copies every KV tile with cp.async, not whole "
                "tiles by TMA tensor copies (tuning)");
  app->add_flag("--force-tma", f->force_tma,
                "CUDA: the sm_90a wgmma kernel copies whole tiles by TMA tensor copies also for "
                "requests of 128 rows or fewer (tuning)")
      ->excludes("--no-tma");
  app->add_option("--chunk-tokens", f->chunk_tokens,
                  "CUDA: split the KV sequence into chunks of this many tokens instead of the "
                  "schedule's choice (tuning; bench takes several and runs each case with each)")
      ->delimiter(',')
      ->allow_extra_args(false);
  add_planning_flags(app, f);
  app->add_option("--scale-l", f->scale_l,
                  "multiply every prefix length L by this factor in (0, 1], or 'auto'")
      ->capture_default_str();
  app->add_option("--seed", f->seed, "random seed of the case data (default: the case's)")
      ->check(seed_validator());
  auto* g = app->add_option_group("custom case", "a case given by flags instead of a suite name");
  g->add_option("--tree", f->tree, "T: one value, or one per request");
  g->add_option("--prefix", f->prefix, "L: one value, or one per request");
  g->add_option("--heads", f->heads, "H")->capture_default_str();
  g->add_option("--page", f->page, "page size")->capture_default_str();
  g->add_option("--batch", f->batch, "requests")->capture_default_str();
  g->add_option("--shape", f->shape, "tree shape: random, chain, star, deep, bushy")
      ->capture_default_str();
  g->add_option("--dtype", f->dtype, "bf16 or fp16")->capture_default_str();
}

Status resolve_cases(const CaseFlags& f, std::vector<SuiteCase>* cases) {
  std::vector<SuiteCase> out;
  if (f.tree.empty() && f.prefix.empty()) {
    std::vector<SuiteCase> suite;
    TV_RETURN_IF_ERROR(load_suite(f.suite_file, &suite));
    TV_RETURN_IF_ERROR(select_cases(suite, f.names, &out));
  } else {
    if (!f.names.empty()) {
      return Status(StatusCode::kInvalidArgument,
                    "give suite case names or --tree/--prefix for a custom case, not both");
    }
    SuiteCase c;
    c.name = c.family = "custom";
    c.why = "given on the command line";
    c.num_heads = f.heads;
    c.page_size = f.page;
    if (f.batch < 1) return Status(StatusCode::kInvalidArgument, "--batch must be >= 1");
    auto expand = [&](auto values, auto fallback, const char* flag, auto* dst) -> Status {
      if (values.empty()) values.push_back(fallback);
      if (values.size() == 1) values.assign(f.batch, values[0]);
      if (static_cast<int32_t>(values.size()) != f.batch) {
        return Status(StatusCode::kInvalidArgument,
                      fmt::format("{} has {} values, --batch is {}", flag, values.size(), f.batch));
      }
      dst->assign(values.begin(), values.end());
      return Status::Ok();
    };
    TV_RETURN_IF_ERROR(expand(f.tree, int32_t{16}, "--tree", &c.tree_sizes));
    TV_RETURN_IF_ERROR(expand(f.prefix, int64_t{8192}, "--prefix", &c.prefix_lens));
    if (!testing::parse_tree_shape(f.shape, &c.shape)) {
      return Status(StatusCode::kInvalidArgument, fmt::format("unknown --shape '{}'", f.shape));
    }
    if (f.dtype == "fp16") {
      c.dtype = DType::kFP16;
    } else if (f.dtype != "bf16") {
      return Status(StatusCode::kInvalidArgument, fmt::format("unknown --dtype '{}'", f.dtype));
    }
    // Refused as the suite parser refuses it: a case that cannot exist has no scaled copy.
    if (Status s = check_case_lengths(c); !s.ok())
      return Status(s.code(), "--tree/--prefix: " + s.message());
    out.push_back(std::move(c));
  }
  if (f.seed) {
    for (SuiteCase& c : out) c.seed = *f.seed;
  }
  KvFormat kv_format = KvFormat::kSameAsQ;
  TV_RETURN_IF_ERROR(parse_kv_format(f.kv_format, &kv_format));
  for (SuiteCase& c : out) c.kv_format = kv_format;
  *cases = std::move(out);
  return Status::Ok();
}

Status build_case(const SuiteCase& c, testing::HostCase* host_case) {
  try {
    *host_case = testing::make_case(to_spec(c));
  } catch (const std::bad_alloc&) {
    throw;  // a valid case too large for this machine: run_app (app.h) reports what it costs
  } catch (const std::length_error&) {
    throw;
  } catch (const std::exception& e) {
    return Status(StatusCode::kInvalidArgument, fmt::format("case {}: {}", c.name, e.what()));
  }
  return Status::Ok();
}

double scale_for_budget(double flops, double budget) {
  return flops <= budget ? 1.0 : budget / flops;
}

Status parse_kv_format(const std::string& text, KvFormat* format) {
  if (text != "same" && text != "e4m3")
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("unknown --kv-format/--kv-dtype '{}': expected same or e4m3", text));
  *format = text == "e4m3" ? KvFormat::kE4M3 : KvFormat::kSameAsQ;
  return Status::Ok();
}

Status parse_scale(const std::string& text, std::optional<double>* scale) {
  if (text == "auto") {
    scale->reset();
    return Status::Ok();
  }
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (end == text.c_str() || *end != '\0' || !(v > 0 && v <= 1)) {
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("--scale-l '{}': expected a factor in (0, 1] or 'auto'", text));
  }
  *scale = v;
  return Status::Ok();
}

Status plan_options(const std::string& backend, PlanOptions* options) {
  PlanOptions o;
  TV_RETURN_IF_ERROR(parse_backend(backend, &o.backend));
  // CPU backends keep P in full precision (their natural mode); the oracle matches each
  // backend's choice in check_case.
  o.round_p = false;
  *options = o;
  return Status::Ok();
}

Status plan_options(const CaseFlags& flags, PlanOptions* options) {
  PlanOptions o;
  TV_RETURN_IF_ERROR(plan_options(flags.backend, &o));
  if (Status s = parse_precision(flags.precision, &o.precision); !s.ok()) {
    return Status(s.code(), "--precision: " + s.message());
  }
  // plan() refuses it too, case by case; said once here, before any case runs.
  if (o.precision == Precision::kFast && flags.kv_format != "e4m3") {
    return Status(StatusCode::kInvalidArgument,
                  "--precision fast needs --kv-format e4m3 (fast rounds Q and P to e4m3 for FP8 "
                  "products against an e4m3 KV cache)");
  }
  *options = o;
  return Status::Ok();
}

PlanTuning plan_tuning(const CaseFlags& f) {
  return PlanTuning{.config_arch = f.config_arch,
                    .chunk_tokens = f.chunk_tokens.empty() ? 0 : f.chunk_tokens[0],
                    .rows_per_cta = f.rows_per_cta,
                    .pair_ctas = f.pair_ctas,
                    .variant = f.variant,
                    .disable_tma = f.no_tma,
                    .force_tma = f.force_tma};
}

Status plan_metadata(const SuiteCase& c, const PlanOptions& options, const PlanTuning& tuning,
                     Plan* p) {
  double entries = 0;  // make_metadata's page table: one int32 a page
  for (size_t b = 0; b < c.tree_sizes.size(); ++b)
    entries += std::ceil((static_cast<double>(c.prefix_lens[b]) + c.tree_sizes[b]) /
                         std::max<int32_t>(c.page_size, 1));
  const AllocationNote note(
      fmt::format("planning case {} (a page table of {:.0f} entries: {:.2f} GB)", c.name, entries,
                  entries * sizeof(int32_t) * 1e-9));
  const CaseMetadata m = make_metadata(c);
  return plan(m.problem(c), options, tuning, p);
}

Status check_case(const SuiteCase& c, const PlanOptions& options, const PlanTuning& tuning,
                  double oracle_flops, CheckResult* result, const SuiteCase* timed) {
  // A shortened copy passing says nothing of a case that cannot exist.
  auto exists = [](const SuiteCase& whole) {
    const Status s = check_case_lengths(whole);
    return s.ok() ? s : Status(s.code(), fmt::format("case {}: {}", whole.name, s.message()));
  };
  TV_RETURN_IF_ERROR(exists(c));
  if (timed != nullptr) TV_RETURN_IF_ERROR(exists(*timed));
  // The oracle is single-threaded float64: shorten the prefix until it takes seconds.
  const double scale = scale_for_budget(case_flops(c), oracle_flops);
  const SuiteCase small = scale < 1 ? scale_prefix(c, scale) : c;
  if (timed == nullptr && scale < 1) timed = &c;
  const AllocationNote note(
      fmt::format("checking case {}{} ({})", c.name,
                  small.prefix_lens != c.prefix_lens ? " at a shorter prefix" : "",
                  case_memory(small).to_string()));
  testing::HostCase hc;
  TV_RETURN_IF_ERROR(build_case(small, &hc));
  // The copy runs the kernel the timed case runs: at a shorter prefix the CUDA schedule could
  // pick another (on the H200, V1 checked at L = 7180 would run the portable 32-row kernel and
  // V1 runs the wgmma one), so the copy takes that case's rows a CTA unless they were forced
  // already. A timed case that cannot be planned leaves the copy as it plans itself.
  PlanTuning small_tuning = tuning;
  Plan full;
  const bool full_planned = timed != nullptr && plan_metadata(*timed, options, tuning, &full).ok();
  if (full_planned && full.backend == Backend::kCuda && tuning.rows_per_cta == 0)
    small_tuning.rows_per_cta = full.state.rows_per_cta;
  Plan p;
  TV_RETURN_IF_ERROR(plan(hc.problem(), options, small_tuning, &p));
  result->timed_kernel = timed == nullptr ? p.kernel : full_planned ? full.kernel : "";
  std::unique_ptr<Runner> runner;
  TV_RETURN_IF_ERROR(make_runner(p, hc, Flush::kRead, &runner));
  std::vector<uint16_t> out;
  std::vector<float> lse;
  TV_RETURN_IF_ERROR(runner->run_once(&out, &lse));

  // GPU kernels round P to the input dtype before P.V; CPU backends do what round_p says. The
  // oracle takes the precision the checked plan computes (fast: Q and P rounded to e4m3 as
  // the fast kernels do), not the one asked: a fast request that ran exact is checked as exact.
  const bool round_p = p.backend == Backend::kCuda || p.options.round_p;
  PlanOptions ref_options;
  ref_options.backend = Backend::kCpuReference;
  ref_options.precision = p.precision;
  ref_options.round_p = round_p;  // the oracle computes that precision only with round_p
  Plan ref_plan;
  TV_RETURN_IF_ERROR(plan(hc.problem(), ref_options, &ref_plan));
  detail::ReferenceResult ref;
  std::vector<uint16_t> unused_out(hc.out_elems());
  std::vector<float> unused_lse(hc.lse_elems());
  // Fast kernels round P relative to their running maxima and hold Q in their number of
  // terms: the oracle rounds the same way.
  const testing::Tolerance tol = testing::tolerance_for(p);
  TV_RETURN_IF_ERROR(detail::reference_attention(
      ref_plan, hc.tensors(unused_out.data(), unused_lse.data()), round_p, &ref,
      detail::fast_rounding_of(p, tol.p_code_margin)));

  // A fast plan's row errors count beyond the P codes its float32 arithmetic may round the
  // other way (ReferenceResult::out_slack).
  result->cmp =
      testing::compare_with_reference(c.dtype, out, lse.data(), ref.out, ref.lse, ref.out_slack);
  result->pass = result->cmp.ok(tol.out, tol.lse);
  result->checked_prefix = small.prefix_lens;
  result->reduced = scale < 1;
  result->plan = p;
  return Status::Ok();
}

}  // namespace treeverify::cli
