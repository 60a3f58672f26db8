// What `bench` and `check` share: the case-selection flags, L scaling for the CPU and the
// oracle, and the correctness check against the float64 oracle.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "suite.h"
#include "testing/compare.h"
#include "treeverify/tuning.h"
#include "treeverify/verify.h"

namespace treeverify::cli {

// Suite names, or a custom case when --tree or --prefix is given.
struct CaseFlags {
  std::vector<std::string> names;
  std::string suite_file;  // empty: the built-in suite
  int32_t heads = 8;
  std::vector<int32_t> tree;  // one value (every request) or one per request
  std::vector<int64_t> prefix;
  int32_t page = 64;
  int32_t batch = 1;
  std::string shape = "random";
  std::string dtype = "bf16";
  std::string kv_format = "same";   // "same" (the q dtype) or "e4m3"
  std::string precision = "exact";  // e4m3 caches: "exact" or "fast" (PlanOptions::precision)
  std::optional<uint64_t> seed;
  std::string backend = "auto";
  std::string scale_l = "auto";   // a factor for every prefix length, or "auto"
  // Tuning (PlanTuning, treeverify/tuning.h): speed only, never results.
  int config_arch = 0;            // CUDA: run another architecture's tile configuration
  int rows_per_cta = 0;           // CUDA: force the variant's rows a CTA (0: the table's)
  bool pair_ctas = false;         // CUDA: 64-row blocks as CTA pairs (r64-s3-c2)
  std::string variant;            // CUDA: a portable variant by name (empty: the table's)
  bool no_tma = false;            // CUDA: the wgmma kernel copies every tile with cp.async
  bool force_tma = false;         // CUDA: ... or by TMA wherever it can, at any row count
  std::vector<int> chunk_tokens;  // CUDA: force the split's chunk length (bench: each in turn)
};
// --seed's check (check, bench, demo): a decimal integer in [0, 2^64 - 1]. CLI11 alone reads
// "-1" as 2^64 - 1 and 2^64 as 2^64 - 1 into a uint64_t, so a seed would silently change.
CLI::Validator seed_validator();

// What plans the cases (bench, check and doctor): --suite, --backend, --kv-format, --precision.
void add_planning_flags(CLI::App* app, CaseFlags* flags);
// add_planning_flags and the rest of bench's and check's case flags.
void add_case_flags(CLI::App* app, CaseFlags* flags);
Status resolve_cases(const CaseFlags& flags, std::vector<SuiteCase>* cases);

// testing::make_case, with its exceptions (specs it cannot represent) turned into a Status.
Status build_case(const SuiteCase& c, testing::HostCase* host_case);

// Work budgets that keep a CPU run of each case well under a minute (the L scaling default):
// cpu reaches tens of GFLOP/s on a few cores (V1 at its full L, 51 GFLOP, takes ~1.6 s
// a call on 2 cores, so it runs unscaled), the float64 oracle about 1 GFLOP/s on one.
inline constexpr double kCpuFlopBudget = 6e10;
inline constexpr double kOracleFlopBudget = 2e9;

// The factor that brings `flops` under `budget` (1 when it already is).
double scale_for_budget(double flops, double budget);
// --scale-l: a factor in (0, 1], or "auto" (returns nullopt); an error for anything else.
Status parse_scale(const std::string& text, std::optional<double>* scale);
// --kv-format / --kv-dtype: "same" (the q dtype) or "e4m3"; an error for anything else.
Status parse_kv_format(const std::string& text, KvFormat* format);

// The plan() options for a backend name, with the round_p the comparison needs (GPU kernels
// round P to the input dtype, so the oracle and the CPU backends do too).
Status plan_options(const std::string& backend, PlanOptions* options);
// The same from the case flags: the backend and --precision.
Status plan_options(const CaseFlags& flags, PlanOptions* options);
// The tuning flags as plan() takes them; chunk_tokens from the first --chunk-tokens (bench
// runs each in turn).
PlanTuning plan_tuning(const CaseFlags& flags);
// Plans the case from its metadata alone (no KV), e.g. to learn which backend auto picks.
Status plan_metadata(const SuiteCase& c, const PlanOptions& options, const PlanTuning& tuning,
                     Plan* plan);

struct CheckResult {
  testing::Comparison cmp;
  bool pass = false;
  std::vector<int64_t> checked_prefix;  // the L_b the check ran at
  bool reduced = false;                 // checked on a copy with a shorter prefix
  Plan plan;                            // of the checked case
  std::string timed_kernel;             // Plan::kernel of the timed case ("" if unplannable)
};
// Builds the case (with its prefix scaled down when the oracle would need more than
// `oracle_flops` flops; pass infinity for the case as given), plans it with the rows a CTA of
// `timed` (default: c itself when shortened) so that it runs the CUDA kernel the timed case
// runs, runs it on the backend of `options` with poisoned outputs and compares with
// reference_attention (docs/BENCH.md's bounds), planned with the precision the checked plan
// computes, so it rounds like the kernel that ran.
Status check_case(const SuiteCase& c, const PlanOptions& options, const PlanTuning& tuning,
                  double oracle_flops, CheckResult* result, const SuiteCase* timed = nullptr);

}  // namespace treeverify::cli
