// `treeverify doctor`: what this build contains, which GPUs are here, and which backend and
// kernel each suite case gets on this machine, with the reason.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <utility>

#include "commands.h"
#include "common.h"
#include "core/cuda_backend.h"
#include "core/select.h"
#include "cuda/sm80/config.h"
#include "testing/compare.h"
#include "treeverify/system.h"

namespace treeverify::cli {
namespace {

struct DoctorFlags {
  bool json = false;
  // What doctor shares with bench and check: the suite file, the backend, the KV cache and the
  // precision the cases are planned for (no case names: every suite case).
  CaseFlags cases;
};

std::string archs_text(const std::vector<int>& archs, bool sm90a = false) {
  std::vector<std::string> names;
  for (int a : archs) names.push_back(fmt::format("sm_{}{}", a, a == 90 && sm90a ? "a" : ""));
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, " "));
}

// Device `d` as the selection function (core/select.h) reads it; false when it cannot be.
bool describe(const DeviceInfo& d, detail::Machine* machine, detail::DeviceDescription* device) {
  machine->build = detail::this_build();
  return detail::cuda_describe(d.ordinal, machine, device).ok() && machine->device != nullptr;
}

// The tile tables (--config-arch) device `d` can run with this build's code, and the reason
// for the first it cannot.
std::vector<int> runnable_tables(const DeviceInfo& d, std::string* first_missing) {
  detail::Machine machine;
  detail::DeviceDescription device;
  if (!describe(d, &machine, &device)) {
    *first_missing = "the device could not be described";
    return {};
  }
  std::vector<int> archs;
  for (const cuda::sm80::TileConfig& c : cuda::sm80::kTileConfigs) {
    const Status s = detail::config_runnable(c.arch, device, machine.build);
    if (s.ok())
      archs.push_back(c.arch);
    else if (first_missing->empty())
      *first_missing = s.message();
  }
  return archs;
}

// The SM versions whose mma.sync e4m3 products are native (cuda::sm80::native_fp8_mma), or
// not, for the legend.
constexpr int kSmVersions[] = {80, 86, 89, 90, 100, 120, 121};
std::vector<int> fast_sms(bool native) {
  std::vector<int> sms;
  for (int sm : kSmVersions)
    if (cuda::sm80::native_fp8_mma(sm) == native) sms.push_back(sm);
  return sms;
}

// What a fast request on an e4m3 cache runs on device `d`, and why: the selection function's
// answer for a request of 16 rows and one of 64.
std::pair<std::string, std::string> fast_on_device(const DeviceInfo& d) {
  if (!d.has_kernel_code) return {"nothing", "no compiled code runs on it"};
  detail::Machine machine;
  detail::DeviceDescription device;
  if (!describe(d, &machine, &device)) return {"nothing", "the device could not be described"};
  detail::KernelChoice small, large;
  const Status ss =
      detail::select_for_rows(16, KvFormat::kE4M3, Precision::kFast, {}, machine, &small);
  const Status ls =
      detail::select_for_rows(64, KvFormat::kE4M3, Precision::kFast, {}, machine, &large);
  if (!ss.ok() || !ls.ok()) return {"nothing", (ss.ok() ? ls : ss).message()};
  const bool fast_small = small.precision == Precision::kFast;
  const bool fast_large = large.precision == Precision::kFast;
  if (fast_small && fast_large)
    return {"fast", fmt::format("{} and {}", small.name(), large.name())};
  if (fast_large)
    return {"fast above 32 rows",
            fmt::format("{}; requests of at most 32 rows run exact: {}", large.name(),
                        small.why_not_fast)};
  return {"exact", large.why_not_fast};
}

int run_doctor(const DoctorFlags& flags) {
  const BuildInfo build = build_info();
  std::string note;
  const std::vector<DeviceInfo> devices = list_devices(&note);
  std::vector<SuiteCase> suite;
  PlanOptions options;
  Status s = resolve_cases(flags.cases, &suite);
  if (s.ok()) s = plan_options(flags.cases, &options);
  if (!s.ok()) {
    fmt::print(stderr, "treeverify doctor: {}\n", s.to_string());
    return kExitError;
  }
  std::vector<std::string> backends = {"cpu-reference", "cpu"};
  if (build.cuda_compiled) backends.push_back("cuda");
  const unsigned threads = std::thread::hardware_concurrency();
  std::vector<int> compiled_fast;  // compiled architectures whose code has FP8 products
  for (int sm : build.cuda_archs)
    if ((build.cuda_e4m3_mma && cuda::sm80::native_fp8_mma(sm)) || (sm == 90 && build.cuda_sm90a))
      compiled_fast.push_back(sm);  // sm_90a: the wgmma kernel's e4m3 instance

  // Planning reads metadata only, so every suite case plans in milliseconds at full size.
  struct Row {
    const SuiteCase* c;
    Status status;
    Plan plan;
  };
  std::vector<Row> rows;
  for (const SuiteCase& c : suite) {
    Row r{&c, Status::Ok(), Plan{}};
    r.status = plan_metadata(c, options, PlanTuning{}, &r.plan);
    rows.push_back(std::move(r));
  }

  if (flags.json) {
    nlohmann::json j;
    j["build"] = {{"version", build.version},
                  {"git_commit", build.git_commit},
                  {"backends", backends},
                  {"cuda_compiled", build.cuda_compiled},
                  {"cuda_compiler", build.cuda_compiler_version},
                  {"cuda_archs", build.cuda_archs},
                  {"cuda_all_variants", build.cuda_all_variants},
                  {"cuda_sm90a", build.cuda_sm90a},
                  {"blas", build.blas}};
    j["kernels_by_arch"] = nlohmann::json::array();
    for (const ArchKernels& k : cuda_kernels_by_arch()) {
      j["kernels_by_arch"].push_back({{"arch", k.arch},
                                      {"up_to_16_rows", k.up_to_16_rows},
                                      {"up_to_32_rows", k.up_to_32_rows},
                                      {"more_rows", k.more_rows},
                                      {"up_to_16_rows_e4m3", k.up_to_16_rows_e4m3}});
    }
    j["cpu_threads"] = threads;
    j["devices"] = nlohmann::json::array();
    for (const DeviceInfo& d : devices) {
      std::string missing;
      const std::vector<int> tables = runnable_tables(d, &missing);
      j["devices"].push_back({{"ordinal", d.ordinal},
                              {"name", d.name},
                              {"capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
                              {"sm_count", d.sm_count},
                              {"global_mem_bytes", d.global_mem_bytes},
                              {"l2_bytes", d.l2_bytes},
                              {"smem_per_block_optin", d.smem_per_block_optin},
                              {"clock_mhz", d.clock_mhz},
                              {"has_kernel_code", d.has_kernel_code},
                              {"kernel_arch", d.kernel_arch},
                              {"config_archs", tables}});
    }
    j["device_note"] = note;
    j["e4m3_precision"] = {{"exact", "every backend, every architecture"},
                           {"fast_native_sms", fast_sms(true)},
                           {"fast_runs_exact_sms", fast_sms(false)},
                           {"fast_native_compiled", compiled_fast}};
    for (size_t i = 0; i < devices.size(); ++i) {
      const auto [runs, why] = fast_on_device(devices[i]);
      j["devices"][i]["precision_fast_runs"] = runs;
      j["devices"][i]["precision_fast_why"] = why;
    }
    j["plans_kv_format"] = flags.cases.kv_format;
    j["plans_precision_asked"] = precision_name(options.precision);
    j["plans"] = nlohmann::json::array();
    for (const Row& r : rows) {
      nlohmann::json p = {{"case", r.c->name},       {"heads", r.c->num_heads},
                          {"tree", r.c->tree_sizes}, {"prefix", r.c->prefix_lens},
                          {"page", r.c->page_size},  {"ok", r.status.ok()}};
      if (r.status.ok()) {
        p["backend"] = backend_name(r.plan.backend);
        p["kernel"] = r.plan.kernel;
        p["precision"] = precision_name(r.plan.precision);  // what runs; the asked one is above
        p["reason"] = r.plan.reason;
        p["workspace_bytes"] = r.plan.workspace_bytes;
        p["chunk_tokens"] = r.plan.state.chunk_tokens;
        p["num_chunks"] = r.plan.state.num_chunks;
      } else {
        p["error"] = r.status.to_string();
      }
      j["plans"].push_back(std::move(p));
    }
    fmt::print("{}\n", j.dump(2));
    return kExitOk;
  }

  fmt::print("treeverify {} (commit {})\n", build.version, build.git_commit);
  fmt::print("  backends compiled: {}\n", fmt::join(backends, ", "));
  if (build.cuda_compiled) {
    fmt::print("  CUDA: {}, architectures {}\n", build.cuda_compiler_version,
               archs_text(build.cuda_archs, build.cuda_sm90a));
    fmt::print(
        "  kernel variants: {}\n",
        build.cuda_all_variants
            ? "every one that fits each architecture (TREEVERIFY_ALL_VARIANTS): --config-arch "
              "can run any architecture's table the GPU's shared memory holds"
            : "only those of the tile tables each architecture's code serves "
              "(TREEVERIFY_ALL_VARIANTS=OFF): --config-arch runs another architecture's table "
              "only where that code holds it");
    // Known without a GPU: what a GPU of each compiled architecture would run.
    fmt::print(
        "  CUDA kernels, by the GPU's architecture and the most query rows (heads x tree nodes)\n"
        "  of a request in the call:\n");
    fmt::print("    {:<7} {:<14} {:<14} {:<14} {}\n", "arch", "<= 16 rows", "<= 32 rows", "more",
               "<= 16 rows, e4m3 cache");
    for (const ArchKernels& k : cuda_kernels_by_arch()) {
      fmt::print("    sm_{:<4} {:<14} {:<14} {:<14} {}\n", k.arch, k.up_to_16_rows, k.up_to_32_rows,
                 k.more_rows, k.up_to_16_rows_e4m3);
    }
    fmt::print(
        "    (rR-sS: R query rows a CTA, an S-stage copy pipeline; -t16: 16-token KV tiles; "
        "-bulk:\n     one bulk copy a KV row; r64 with 32-token tiles: two halves, one's softmax "
        "beside\n     the other's products; wgmma-rR-tT: the sm_90a wgmma kernel, R rows a CTA, "
        "T-token\n     KV tiles, for 16-bit caches and e4m3 ones (exact and fast mode); a forced "
        "--config-arch\n     runs the portable one; +tma in a plan's kernel: whole tiles by TMA "
        "tensor copies, on\n     pages of 64 rows or more, for e4m3 caches and 16-bit requests "
        "of more than 128 rows)\n");
  } else {
    fmt::print(
        "  CUDA: not compiled into this build (configured with TREEVERIFY_CUDA=OFF or "
        "without nvcc)\n");
  }
  fmt::print("  BLAS: {}\n", build.blas.empty() ? "unknown" : build.blas);
  fmt::print("  CPU: {} hardware threads\n\n", threads);

  if (devices.empty()) {
    fmt::print(
        "GPU: none usable here{}\n  The CPU backends run everything (cpu by default).\n\n",
        note.empty() ? "." : ": " + note);
  } else {
    fmt::print("GPUs:\n");
    for (const DeviceInfo& d : devices) {
      fmt::print("  [{}] {}: sm_{}{}, {} SMs, {:.1f} GiB, L2 {} MiB, smem/block {} KiB, {} MHz\n",
                 d.ordinal, d.name, d.cc_major, d.cc_minor, d.sm_count,
                 static_cast<double>(d.global_mem_bytes) / (1 << 30), d.l2_bytes >> 20,
                 d.smem_per_block_optin >> 10, d.clock_mhz);
      if (d.has_kernel_code) {
        fmt::print("      runs: yes, with the code compiled for sm_{}\n", d.kernel_arch);
        std::string missing;
        fmt::print("      tile tables it can run (--config-arch): {}\n",
                   archs_text(runnable_tables(d, &missing)));
        if (!missing.empty()) fmt::print("      not all: {}\n", missing);
      } else {
        fmt::print(
            "      runs: NO, no compiled architecture runs on sm_{}{} (compiled: {}); "
            "rebuild with TREEVERIFY_CUDA_ARCHS including {}{}{}\n",
            d.cc_major, d.cc_minor, archs_text(build.cuda_archs, build.cuda_sm90a), d.cc_major,
            d.cc_minor, d.cc_major == 9 && d.cc_minor == 0 ? "a" : "");
      }
    }
    if (!note.empty()) fmt::print("  note: {}\n", note);
    fmt::print("\n");
  }

  fmt::print(
      "e4m3 KV caches (--kv-format e4m3), by --precision:\n"
      "  exact: fp16 products on the cache's values widened exactly (CUDA), fp32/fp64 (CPU);\n"
      "         every backend, every architecture; more than 32 rows on sm_90a code: the wgmma\n"
      "         kernel, whose producer widens the tiles in shared memory\n"
      "  fast:  Q and P rounded to e4m3; native FP8 products (mma.sync e4m3 -> QMMA) in code for\n"
      "         {}, and wgmma e4m3 in sm_90a code (more than 32 rows). A fast request on code\n"
      "         for {} otherwise, or on a CPU backend, runs exact, and the plan's reason says "
      "why\n"
      "         error against exact attention, as the tests bound it (docs/DESIGN.md): mma.sync\n"
      "         kernels (Q in two e4m3 terms) lse {:g} nats, out {:g} relative, and with outlier\n"
      "         latent channels lse {:g}, out {:g}; the sm_90a wgmma kernel (Q in one term) lse {:g}\n"
      "         and {:g} nats, out {:g}\n",
      archs_text(fast_sms(true)), archs_text(fast_sms(false)), testing::kExactLseTol,
      testing::kExactOutTol, testing::kOutlierLseTol, testing::kOutlierOutTol,
      testing::kOneTermExactLseTol, testing::kOneTermOutlierLseTol, testing::kOneTermExactOutTol);
  if (build.cuda_compiled)
    fmt::print("  compiled with fast products: {}\n", archs_text(compiled_fast, build.cuda_sm90a));
  for (const DeviceInfo& d : devices) {
    const auto [runs, why] = fast_on_device(d);
    fmt::print("  [{}] {}: a fast request runs {} ({})\n", d.ordinal, d.name, runs, why);
  }
  fmt::print("\n");

  fmt::print("Suite cases (backend {}{}; planned from lengths only, nothing allocated):\n",
             flags.cases.backend,
             flags.cases.kv_format == "e4m3" ? fmt::format(", e4m3 KV cache, precision {} asked",
                                                           precision_name(options.precision))
                                             : "");
  // One reason for every case (the usual CPU-only answer) is said once, not on every row.
  const bool same_reason = std::all_of(rows.begin(), rows.end(), [&](const Row& r) {
    return r.status.ok() && r.plan.reason == rows.front().plan.reason;
  });
  fmt::print("  {:<7} {:>4} {:>6} {:>9} {:>5} {:>5}  {:<14} {}\n", "case", "H", "T", "L", "page",
             "batch", "backend", same_reason ? "kernel" : fmt::format("{:<24} reason", "kernel"));
  for (const Row& r : rows) {
    const SuiteCase& c = *r.c;
    const std::string head = fmt::format(
        "  {:<7} {:>4} {:>6} {:>9} {:>5} {:>5}  ", c.name, c.num_heads, format_range(c.tree_sizes),
        format_range(c.prefix_lens), c.page_size, c.tree_sizes.size());
    if (!r.status.ok()) {
      fmt::print("{}{:<14} {:<24} {}\n", head, "-", "-", r.status.to_string());
    } else if (same_reason) {
      fmt::print("{}{:<14} {}\n", head, backend_name(r.plan.backend), r.plan.kernel);
    } else {
      fmt::print("{}{:<14} {:<24} {}\n", head, backend_name(r.plan.backend), r.plan.kernel,
                 r.plan.reason);
    }
  }
  if (same_reason && !rows.empty())
    fmt::print("  why, for every case: {}\n", rows.front().plan.reason);
  return kExitOk;
}

}  // namespace

void add_doctor_command(CLI::App* app, int* exit_code) {
  auto flags = std::make_shared<DoctorFlags>();
  CLI::App* cmd = app->add_subcommand(
      "doctor", "build info, GPUs, and which backend and kernel each suite case gets here");
  cmd->add_flag("--json", flags->json, "machine-readable output");
  add_planning_flags(cmd, &flags->cases);
  cmd->callback([flags, exit_code] { *exit_code = run_doctor(*flags); });
}

}  // namespace treeverify::cli
