// `treeverify check`: one case on one backend against the float64 oracle, PASS or FAIL.
#include <fmt/format.h>

#include <limits>
#include <memory>

#include "commands.h"
#include "common.h"

namespace treeverify::cli {
namespace {

int run_check(const CaseFlags& flags) {
  std::vector<SuiteCase> cases;
  PlanOptions options;
  std::optional<double> scale;
  Status s = resolve_cases(flags, &cases);
  if (s.ok()) s = plan_options(flags, &options);
  const PlanTuning tuning = plan_tuning(flags);
  if (s.ok() && flags.chunk_tokens.size() > 1)
    s = Status(StatusCode::kInvalidArgument, "--chunk-tokens: check takes one value");
  if (s.ok()) s = parse_scale(flags.scale_l, &scale);
  if (!s.ok()) {
    fmt::print(stderr, "treeverify check: {}\n", s.to_string());
    return kExitError;
  }
  int code = kExitOk;
  for (const SuiteCase& given : cases) {
    // An explicit --scale-l is applied as given and the oracle runs on exactly that case;
    // "auto" lets check_case shorten the prefix until the float64 oracle takes seconds.
    const SuiteCase c = scale ? scale_prefix(given, *scale) : given;
    const double budget = scale ? std::numeric_limits<double>::infinity() : kOracleFlopBudget;
    fmt::print("case {}: H={} T={} L={} page={} batch={} ({} tree, {}{}, seed {})\n", c.name,
               c.num_heads, format_lengths(c.tree_sizes), format_lengths(given.prefix_lens),
               c.page_size, c.tree_sizes.size(), testing::tree_shape_name(c.shape),
               dtype_name(c.dtype),
               c.kv_format == KvFormat::kE4M3
                   ? fmt::format(", e4m3 KV, precision {} asked", precision_name(options.precision))
                   : "",
               c.seed);
    std::fflush(stdout);
    CheckResult r;
    s = check_case(c, options, tuning, budget, &r, scale ? &given : nullptr);
    if (!s.ok()) {
      fmt::print("  ERROR {}\n", s.to_string());
      code = kExitError;
      continue;
    }
    fmt::print("  backend {}, kernel {}, precision {} ({})\n", backend_name(r.plan.backend),
               r.plan.kernel, precision_name(r.plan.precision), r.plan.reason);
    if (!r.timed_kernel.empty() && r.timed_kernel != r.plan.kernel)
      fmt::print("  the case as given runs {}; the shortened copy ran {}\n", r.timed_kernel,
                 r.plan.kernel);
    if (scale && *scale != 1.0) {
      fmt::print("  L scaled by --scale-l {}: checked at L={}\n", *scale,
                 format_lengths(r.checked_prefix));
    } else if (r.reduced) {
      fmt::print(
          "  checked at L={}: prefix scaled down so the float64 oracle runs in seconds "
          "(--scale-l 1 checks the full case)\n",
          format_lengths(r.checked_prefix));
    }
    const bool round_p = r.plan.backend == Backend::kCuda || r.plan.options.round_p;
    fmt::print("  oracle: float64, {}\n", !round_p ? "P in full precision like the backend"
                                          : r.plan.precision == Precision::kFast
                                              ? "Q and P rounded to e4m3 like the fast kernel"
                                              : "P rounded to the input dtype like the kernel");
    const testing::Tolerance tol = testing::tolerance_for(r.plan);
    fmt::print("  out rel Frobenius {:.3e} (bound {:.0e}; worst row {:.3e})\n", r.cmp.out_rel_fro,
               tol.out, r.cmp.out_row_rel_max);
    fmt::print("  lse max abs       {:.3e} (bound {:.0e})\n", r.cmp.lse_max_abs, tol.lse);
    fmt::print("  non-finite out {}, lse mismatches {}, empty rows not zero {}\n",
               r.cmp.out_nonfinite, r.cmp.lse_mismatch, r.cmp.out_zero_rows_bad);
    fmt::print("  {}\n", r.pass ? "PASS" : "FAIL");
    if (!r.pass && code == kExitOk) code = kExitFail;
  }
  return code;
}

}  // namespace

void add_check_command(CLI::App* app, int* exit_code) {
  auto flags = std::make_shared<CaseFlags>();
  CLI::App* cmd = app->add_subcommand(
      "check", "run a case on a backend against the float64 oracle; exit 1 on FAIL");
  cmd->add_option("case", flags->names, "suite case (V1 .. R1), or use --tree/--prefix");
  add_case_flags(cmd, flags.get());
  cmd->callback([flags, exit_code] { *exit_code = run_check(*flags); });
}

}  // namespace treeverify::cli
