// `treeverify bench`: each case checked against the oracle, then timed and set against the
// roofline of this machine, with the ceilings measured in the same run (docs/BENCH.md).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "app.h"
#include "commands.h"
#include "common.h"
#include "roofline.h"
#include "testing/cases.h"
#include "timing.h"
#include "treeverify/system.h"

namespace treeverify::cli {
namespace {

struct BenchFlags {
  CaseFlags cases;
  std::optional<int> iters, warmup;
  bool json = false;
  bool list = false;
  std::string flush = "read";  // how the device runner empties L2: "read" or "write"
  int layers = 0;              // > 0: also time that many runs of one plan (a step's layers)
};

// docs/BENCH.md asks for a median of at least 20 GPU runs; a CPU run of a suite case takes about a
// second, so a handful keeps a case under a minute.
constexpr int kCudaIters = 30, kCudaWarmup = 5, kCpuIters = 5, kCpuWarmup = 1;

bool is_cpu(Backend b) { return b == Backend::kCpu || b == Backend::kCpuReference; }

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) {
      return line.substr(line.find(':') + 2);
    }
  }
  return "unknown CPU";
}

void print_list(const std::vector<SuiteCase>& cases) {
  fmt::print("{:<7} {:>4} {:>6} {:>9} {:>5} {:>5} {:>9} {:>9}  {}\n", "case", "H", "T", "L", "page",
             "batch", "GB", "GFLOP", "why");
  for (const SuiteCase& c : cases) {
    fmt::print("{:<7} {:>4} {:>6} {:>9} {:>5} {:>5} {:>9.3f} {:>9.1f}  {}\n", c.name, c.num_heads,
               format_range(c.tree_sizes), format_range(c.prefix_lens), c.page_size,
               c.tree_sizes.size(), case_bytes(c) * 1e-9, case_flops(c) * 1e-9, c.why);
  }
}

nlohmann::json ceilings_json(const Ceilings& c) {
  return {{"bandwidth_gbps", c.bandwidth * 1e-9}, {"bandwidth_how", c.bandwidth_how},
          {"mma_tflops", c.mma_flops * 1e-12},    {"mma_how", c.mma_how},
          {"mma8_tflops", c.mma8_flops * 1e-12},  {"mma8_how", c.mma8_how}};
}

// One case end to end; fills `row` and returns the exit code it contributes.
int bench_case(const SuiteCase& given, const PlanOptions& options, const PlanTuning& tuning,
               const std::optional<double>& scale_flag, const BenchFlags& flags,
               const Ceilings& ceilings, Backend backend, nlohmann::json* row) {
  // CPU backends get a shorter prefix by default so a case finishes well under a minute; the
  // scale is reported with every row.
  double scale = 1.0;
  if (scale_flag) {
    scale = *scale_flag;
  } else if (is_cpu(backend)) {
    scale = scale_for_budget(case_flops(given),
                             backend == Backend::kCpu ? kCpuFlopBudget : kOracleFlopBudget);
  }
  const SuiteCase c = scale < 1 ? scale_prefix(given, scale) : given;
  (*row)["case"] = c.name;
  (*row)["heads"] = c.num_heads;
  (*row)["tree"] = c.tree_sizes;
  (*row)["page"] = c.page_size;
  (*row)["batch"] = c.tree_sizes.size();
  (*row)["prefix_suite"] = given.prefix_lens;
  (*row)["prefix_run"] = c.prefix_lens;
  (*row)["l_scale"] = scale;

  CheckResult check;
  Status s = check_case(c, options, tuning, kOracleFlopBudget, &check);
  if (!s.ok()) {
    (*row)["error"] = s.to_string();
    return kExitError;
  }
  (*row)["check"] = {{"pass", check.pass},
                     {"prefix_checked", check.checked_prefix},
                     {"out_rel_fro", check.cmp.out_rel_fro},
                     {"lse_max_abs", check.cmp.lse_max_abs},
                     {"out_nonfinite", check.cmp.out_nonfinite},
                     {"lse_mismatch", check.cmp.lse_mismatch},
                     {"kernel", check.plan.kernel}};
  if (!check.pass) {
    (*row)["error"] = "correctness check failed: " + check.cmp.to_string();
    return kExitFail;  // correctness before speed: a wrong kernel is not timed
  }

  const AllocationNote note(
      fmt::format("building case {} to time it ({})", c.name, case_memory(c).to_string()));
  testing::HostCase hc;
  Plan plan;
  std::unique_ptr<Runner> runner;
  s = build_case(c, &hc);
  if (s.ok()) s = treeverify::plan(hc.problem(), options, tuning, &plan);
  if (s.ok()) {
    s = make_runner(plan, hc, flags.flush == "write" ? Flush::kWrite : Flush::kRead, &runner);
  }
  std::vector<double> samples;
  const bool cpu = is_cpu(plan.backend);
  const int warmup = flags.warmup.value_or(cpu ? kCpuWarmup : kCudaWarmup);
  const int iters = flags.iters.value_or(cpu ? kCpuIters : kCudaIters);
  if (s.ok()) s = runner->time(warmup, iters, &samples);
  (*row)["warmup"] = warmup;
  (*row)["iters"] = iters;
  (*row)["backend"] = backend_name(plan.backend);
  (*row)["kernel"] = plan.kernel;
  (*row)["reason"] = plan.reason;
  (*row)["kv_format"] = plan.kv_format == KvFormat::kE4M3 ? "e4m3" : dtype_name(plan.dtype);
  (*row)["precision"] = precision_name(plan.precision);  // what ran; options.precision was asked
  if (!s.ok()) {
    (*row)["error"] = s.to_string();
    return kExitError;
  }
  const double ms = median(samples);
  // Fast mode's products are e4m3: its roof is the e4m3 product rate's.
  const Ceilings held_to =
      plan.precision == Precision::kFast ? ceilings_for_fast(ceilings) : ceilings;
  (*row)["mma_ceiling_tflops"] = held_to.mma_flops * 1e-12;
  const RooflinePoint p =
      roofline(testing::verify_bytes(hc), testing::verify_flops(hc), ms * 1e-3, held_to);
  if (flags.layers > 0 && !cpu) {
    constexpr int kLayerReps = 10;
    LayerTimes lt;
    s = runner->time_layers(flags.layers, kLayerReps, &lt);
    if (!s.ok()) {
      (*row)["error"] = s.to_string();
      return kExitError;
    }
    (*row)["layers"] = {{"layers", lt.layers},
                        {"reps", kLayerReps},
                        {"enqueue_us_per_run", lt.enqueue_us},
                        {"gpu_ms", lt.gpu_ms},
                        {"rebuild_enqueue_us_per_run", lt.rebuild_enqueue_us},
                        {"rebuild_gpu_ms", lt.rebuild_gpu_ms},
                        {"graph_launch_us", lt.graph_launch_us},
                        {"graph_gpu_ms", lt.graph_gpu_ms}};
  }
  (*row)["method"] = runner->method();
  (*row)["time_ms"] = ms;
  (*row)["samples_ms"] = samples;
  (*row)["gbps"] = p.gbps;
  (*row)["tflops"] = p.tflops;
  (*row)["floor_ms"] = p.floor_s * 1e3;
  (*row)["roofline_fraction"] = p.fraction;
  (*row)["bound"] = p.compute_bound ? "compute" : "memory";
  return kExitOk;
}

void print_row(const nlohmann::json& r) {
  const std::string l_run = format_lengths(r["prefix_run"].get<std::vector<int64_t>>());
  std::string l_checked = "-";
  if (r.contains("check")) {
    l_checked = format_lengths(r["check"]["prefix_checked"].get<std::vector<int64_t>>());
  }
  // e4m3 rows name the precision that ran beside the kernel: a fast request may run exact.
  std::string kernel = r.value("kernel", "-");
  if (r.value("kv_format", "") == "e4m3") kernel += " (" + r.value("precision", "?") + ")";
  fmt::print("{:<7} {:>4} {:>6} {:>8} {:>8}  {:<14} {:<35} {:<5}", r["case"].get<std::string>(),
             r["heads"].get<int>(), format_lengths(r["tree"].get<std::vector<int32_t>>()), l_run,
             l_checked, r.value("backend", "-"), kernel,
             !r.contains("check")             ? "-"
             : r["check"]["pass"].get<bool>() ? "PASS"
                                              : "FAIL");
  if (r.contains("error")) {
    fmt::print("  ERROR {}\n", r["error"].get<std::string>());
    return;
  }
  // check_case plans a shortened copy with the case's rows a CTA; say so if it still ran
  // another kernel than the one timed.
  const bool other_kernel = r.contains("check") && r["check"].contains("kernel") &&
                            r["check"]["kernel"].get<std::string>() != r.value("kernel", "-");
  fmt::print(" {:>10.4f} {:>8.1f} {:>8.3f} {:>6.3f} {}\n", r["time_ms"].get<double>(),
             r["gbps"].get<double>(), r["tflops"].get<double>(),
             r["roofline_fraction"].get<double>(), r["bound"].get<std::string>());
  if (other_kernel)
    fmt::print("        the check ran {}, not the timed kernel\n",
               r["check"]["kernel"].get<std::string>());
  if (r.contains("layers")) {
    const auto& l = r["layers"];
    const int n = l["layers"].get<int>();
    fmt::print(
        "        {} layers, one stream: enqueue {:.2f} us a run, GPU {:.4f} ms ({:.4f} a run); "
        "step data rebuilt by every run: enqueue {:.2f} us, GPU {:.4f} ms; graph replay: "
        "launch {:.2f} us, GPU {:.4f} ms ({:.4f} a run)\n",
        n, l["enqueue_us_per_run"].get<double>(), l["gpu_ms"].get<double>(),
        l["gpu_ms"].get<double>() / n, l["rebuild_enqueue_us_per_run"].get<double>(),
        l["rebuild_gpu_ms"].get<double>(), l["graph_launch_us"].get<double>(),
        l["graph_gpu_ms"].get<double>(), l["graph_gpu_ms"].get<double>() / n);
  }
}

int run_bench(const BenchFlags& flags) {
  std::vector<SuiteCase> cases;
  PlanOptions options;
  std::optional<double> scale;
  Status s = resolve_cases(flags.cases, &cases);
  if (s.ok()) s = plan_options(flags.cases, &options);
  PlanTuning tuning = plan_tuning(flags.cases);
  tuning.chunk_tokens = 0;  // each run's own, below
  if (s.ok()) s = parse_scale(flags.cases.scale_l, &scale);
  if (s.ok() && ((flags.iters && *flags.iters < 1) || (flags.warmup && *flags.warmup < 0))) {
    s = Status(StatusCode::kInvalidArgument, "--iters must be >= 1 and --warmup >= 0");
  }
  if (s.ok() && (flags.layers < 0 || flags.layers > 1000)) {
    s = Status(StatusCode::kInvalidArgument, "--layers must be in [0, 1000]");
  }
  if (!s.ok()) {
    fmt::print(stderr, "treeverify bench: {}\n", s.to_string());
    return kExitError;
  }
  if (flags.list) {
    print_list(cases);
    return kExitOk;
  }
  // --chunk-tokens a,b,...: every case once per chunk length, named CASE/cN.
  std::vector<int> chunks = flags.cases.chunk_tokens;
  if (chunks.empty()) chunks.push_back(0);
  std::vector<SuiteCase> runs;
  std::vector<int> run_chunks;
  for (const SuiteCase& c : cases) {
    for (int chunk : chunks) {
      runs.push_back(c);
      if (chunk > 0) runs.back().name += fmt::format("/c{}", chunk);
      run_chunks.push_back(chunk);
    }
  }
  cases = std::move(runs);

  // Which backend each case gets, from its lengths alone: it decides the ceilings to measure
  // and the default L scale.
  std::vector<Backend> backends;
  bool need_cpu = false, need_cuda = false;
  for (const SuiteCase& c : cases) {
    Plan p;
    Status ps = plan_metadata(c, options, tuning, &p);
    backends.push_back(ps.ok() ? p.backend : Backend::kAuto);
    need_cpu |= ps.ok() && is_cpu(p.backend);
    need_cuda |= ps.ok() && p.backend == Backend::kCuda;
  }
  Ceilings cpu_ceil, gpu_ceil;
  nlohmann::json out;
  const BuildInfo build = build_info();
  out["build"] = {{"version", build.version}, {"git_commit", build.git_commit}};
  out["precision_asked"] = precision_name(options.precision);  // each case says what ran
  if (need_cpu) {
    fmt::print(stderr, "measuring CPU ceilings ...\n");
    cpu_ceil = measure_cpu_ceilings(options.num_threads);
    out["cpu"] = ceilings_json(cpu_ceil);
    out["cpu"]["model"] = cpu_model();
  }
  if (need_cuda) {
    fmt::print(stderr, "measuring GPU ceilings ...\n");
    s = measure_cuda_ceilings(options.device, &gpu_ceil);
    if (!s.ok()) {
      fmt::print(stderr, "treeverify bench: {}\n", s.to_string());
      return kExitError;
    }
    std::vector<DeviceInfo> devs = list_devices();
    out["gpu"] = ceilings_json(gpu_ceil);
    out["gpu"]["device"] = devs.empty() ? "unknown" : devs[0].name;
  }
  if (!flags.json) {
    fmt::print("treeverify {} (commit {}), bench\n", build.version, build.git_commit);
    for (const char* k : {"cpu", "gpu"}) {
      if (!out.contains(k)) continue;
      const auto& c = out[k];
      fmt::print("{} {}: ceilings BW {:.1f} GB/s ({}), MMA {:.3f} TFLOP/s ({})\n", k,
                 c.value("model", c.value("device", "")), c["bandwidth_gbps"].get<double>(),
                 c["bandwidth_how"].get<std::string>(), c["mma_tflops"].get<double>(),
                 c["mma_how"].get<std::string>());
      if (!c.value("mma8_how", "").empty())
        fmt::print("{} e4m3 MMA {:.3f} TFLOP/s ({}): fast mode's roof\n", k,
                   c["mma8_tflops"].get<double>(), c["mma8_how"].get<std::string>());
    }
    fmt::print("\n{:<7} {:>4} {:>6} {:>8} {:>8}  {:<14} {:<35} {:<5} {:>10} {:>8} {:>8} {:>6}\n",
               "case", "H", "T", "L run", "L check", "backend", "kernel", "check", "ms", "GB/s",
               "TFLOP/s", "roof");
    std::fflush(stdout);
  }

  int code = kExitOk;
  out["cases"] = nlohmann::json::array();
  for (size_t i = 0; i < cases.size(); ++i) {
    fmt::print(stderr, "[{}/{}] {}: H={} T={} L={} page={} batch={}\n", i + 1, cases.size(),
               cases[i].name, cases[i].num_heads, format_lengths(cases[i].tree_sizes),
               format_lengths(cases[i].prefix_lens), cases[i].page_size,
               cases[i].tree_sizes.size());
    nlohmann::json row;
    const Ceilings& ceil = backends[i] == Backend::kCuda ? gpu_ceil : cpu_ceil;
    PlanTuning case_tuning = tuning;
    case_tuning.chunk_tokens = run_chunks[i];
    const int rc =
        bench_case(cases[i], options, case_tuning, scale, flags, ceil, backends[i], &row);
    code = std::max(code, rc);
    if (!flags.json) {
      print_row(row);
      std::fflush(stdout);
    }
    out["cases"].push_back(std::move(row));
  }
  if (flags.json) {
    fmt::print("{}\n", out.dump(2));
    return code;
  }

  std::vector<std::string> scaled, timing;
  bool reduced_check = false;
  for (const auto& r : out["cases"]) {
    const double f = r["l_scale"].get<double>();
    if (f < 1) scaled.push_back(fmt::format("{} x{:.3g}", r["case"].get<std::string>(), f));
    reduced_check |= r.contains("check") && r["check"]["prefix_checked"] != r["prefix_run"];
    if (r.contains("method")) {
      const std::string t =
          fmt::format("median of {} runs after {} warm-up, {}", r["iters"].get<int>(),
                      r["warmup"].get<int>(), r["method"].get<std::string>());
      if (std::find(timing.begin(), timing.end(), t) == timing.end()) timing.push_back(t);
    }
  }
  fmt::print("\n");
  if (!scaled.empty()) {
    fmt::print(
        "L run: the suite's prefix L was SCALED DOWN ({}) {}; --scale-l 1 runs the full "
        "suite L\n",
        fmt::join(scaled, ", "),
        scale ? "by --scale-l"
              : "for the CPU backend, so each case finishes in well under a minute");
  }
  if (reduced_check) {
    fmt::print(
        "L check: the float64 oracle checked a copy with a shorter prefix (same H, T, "
        "page, tree shape) so it runs in seconds\n");
  }
  for (const std::string& t : timing) fmt::print("time: {}\n", t);
  fmt::print(
      "roof = floor / time, floor = max(bytes/BW, flops/MMA), bytes and flops as in "
      "docs/BENCH.md; the last column says which term sets the floor\n");
  return code;
}

}  // namespace

void add_bench_command(CLI::App* app, int* exit_code) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App* cmd = app->add_subcommand(
      "bench", "time suite cases (or a custom one) against this machine's roofline");
  cmd->add_option("cases", flags->cases.names, "suite cases (V1 .. R1); all when none given");
  add_case_flags(cmd, &flags->cases);
  cmd->add_option("--iters", flags->iters, "timed runs per case (default: CUDA 30, CPU 5)");
  cmd->add_option("--warmup", flags->warmup, "untimed runs first (default: CUDA 5, CPU 1)");
  cmd->add_flag("--json", flags->json, "machine-readable results on stdout");
  cmd->add_flag("--list", flags->list, "list the suite cases and exit");
  cmd->add_option("--flush", flags->flush,
                  "CUDA: empty L2 between calls by a read (clean lines) or a write (dirty lines "
                  "the next call writes back)")
      ->check(CLI::IsMember({"read", "write"}))
      ->capture_default_str();
  cmd->add_option("--layers", flags->layers,
                  "CUDA: also time this many runs of one plan on one stream, as a step's layers "
                  "(enqueue cost, GPU time, a CUDA graph replay of them)")
      ->capture_default_str();
  cmd->callback([flags, exit_code] { *exit_code = run_bench(*flags); });
}

}  // namespace treeverify::cli
