// The selection function (select.h): backend, kernel family, tile table and variant, split
// schedule, precision and copy engine for one call, and the reason line that says why.
#include "core/select.h"

#include <fmt/format.h>

#include <utility>

#include "build_config.h"
#include "core/check.h"
#include "cuda/sm90/choice.h"
#include "cuda/sm90/tile.h"

namespace treeverify::detail {
namespace {

using cuda::KvMode;
using cuda::sm80::VariantId;

constexpr int kMaxGridDim = 65535;  // grid.y and grid.z: chunks and requests

// What the schedule and the reason need of one kernel on one device.
struct Facts {
  int rows = 0, tokens = 0, smem = 0, ctas_per_sm = 0;
  int cluster_ctas = 1;  // CTAs a row block (the pair variant: 2, one cluster)
  bool bulk = false, halves = false, wgmma = false;
  std::string name;
};

Facts variant_facts(const DeviceDescription& d, VariantId v, DType dtype, KvMode mode) {
  return cuda::sm80::with_variant(v, [&]<typename V>(V) {
    // Only the instances that exist (instance_selectable) can be asked; 0 CTAs for the others.
    const int ctas = cuda::sm80::instance_selectable<V>(mode)
                         ? d.ctas_per_sm({KernelFamily::kMma, v, dtype, mode})
                         : 0;
    return Facts{.rows = V::kRows,
                 .tokens = V::kTokens,
                 .smem = V::kSmemBytes,
                 .ctas_per_sm = ctas,
                 .cluster_ctas = V::kClusterCtas,
                 .bulk = V::kBulk,
                 .halves = V::kHalves,
                 .name = variant_name(v)};
  });
}

Facts wgmma_facts(const DeviceDescription& d, DType dtype, KvMode mode) {
  using cuda::sm90::WgmmaTile;
  return Facts{.rows = WgmmaTile::kRows,
               .tokens = WgmmaTile::kTokens,
               .smem = WgmmaTile::kSmemBytes,
               .ctas_per_sm = d.ctas_per_sm({KernelFamily::kWgmma, VariantId::kNone, dtype, mode}),
               .wgmma = true,
               .name = wgmma_name()};
}

// The split schedule's cost model for a kernel on a device (split_schedule.h), measured on the
// H200 (docs/kernels/portable-mma.md, "The schedule"): a portable CTA takes 62 ns a KV token at
// 64 rows (compute-bound), 39 ns at 32 rows and 60 ns at 16 (its 2-stage pipe waits on
// memory), the wgmma kernel 37 ns, the pair variant's CTA pair 48 ns (its V3 time, "The pair
// variant" in that doc); a CTA's fixed cost is 12 us at 64 portable rows and 9.5 us
// otherwise (the wgmma kernel's is not measured apart: priced as the small variants', which
// picks the grid that measured fastest for S1; an e4m3 cache keeps 12 us, its first tile is
// copied then widened). Other devices and tables use the same figures: they steer the choice,
// never the result.
SplitCosts split_costs(const Facts& f, const DeviceInfo& device, bool e4m3, int token_bytes) {
  SplitCosts c;
  c.token_ns = f.wgmma                ? 37
               : f.cluster_ctas > 1     ? 48
               : f.rows == 64           ? 62
               : f.rows == 32           ? 39
                                        : 60;
  c.cta_ns = f.wgmma && !e4m3 ? 9500 : f.rows == 64 ? 12000 : 9500;
  c.combine_ns = 3000;
  c.token_bytes = token_bytes;
  if (device.memory_bandwidth > 0) c.bytes_per_ns = device.memory_bandwidth * 1e-9;
  // Each partial row written and read back, priced at fp32 (4 bytes a value) although partials
  // are 16-bit: at the 16-bit price the model moves S1 to 64-token chunks, which measured 5%
  // slower than its 128 on the H200.
  c.partial_row_ns = (kVDim + 1) * 4 * 2 / c.bytes_per_ns;
  return c;
}

std::string device_text(const DeviceInfo& d) {
  return fmt::format("device {} '{}' (sm_{})", d.ordinal, d.name, d.cc_major * 10 + d.cc_minor);
}

// Why the code `where` runs, compiled for sm_<code_arch>, cannot run variant `v` of the
// sm_<config_arch> table (empty when it can): the predicate the kernel is compiled with
// (cuda/sm80/build.h), so a plan never launches a trap stub.
std::string variant_missing(VariantId v, int config_arch, const std::string& where, int code_arch,
                            const BuildDescription& build) {
  if (cuda::sm80::variant_in_build(v, code_arch, build.variants())) return {};
  const std::string what =
      fmt::format("the sm_{} configuration ({}) is not in the code {} runs, compiled for sm_{}",
                  config_arch, variant_name(v), where, code_arch);
  if (!cuda::sm80::variant_fits(v, code_arch)) {
    const bool bulk = cuda::sm80::with_variant(v, []<typename V>(V) { return V::kBulk; });
    const bool pair = v == VariantId::kR64C2;
    return fmt::format("{} (it needs more shared memory a block{})", what,
                       bulk ? " or cp.async.bulk, sm_90+" : pair ? " or clusters, sm_90+" : "");
  }
  return fmt::format(
      "{}: this build compiles only the variants of the tile tables that code serves "
      "(TREEVERIFY_ALL_VARIANTS=OFF); reconfigure with -DTREEVERIFY_ALL_VARIANTS=ON to force "
      "another architecture's table",
      what);
}

// Why a fast-mode request runs exact on an sm_<sm> device under the sm_<config_arch> table
// with `variant` (empty when it runs fast): the table's architecture must have native e4m3
// products, and so must the device unless the table was forced (an unforced table of another
// architecture runs by PTX JIT: an H100 running a build's sm_89 code would emulate them), and
// the code the device runs must hold the fast kernel.
std::string portable_fast_blocker(int sm, int config_arch, bool forced, VariantId variant,
                                  int code_arch, const BuildDescription& build) {
  auto not_native = [](int a) {
    return a < 89    ? fmt::format("sm_{} has no e4m3 mma", a)
           : a < 100 ? fmt::format(
                           "sm_{} emulates e4m3 mma.sync (fp16 products after conversion, "
                           "slower than exact)",
                           a)
                     : fmt::format("sm_{}'s e4m3 mma.sync is not verified native", a);
  };
  if (!cuda::sm80::native_fp8_mma(config_arch)) return not_native(config_arch);
  if (!forced && !cuda::sm80::native_fp8_mma(sm)) return not_native(sm);
  if (!cuda::sm80::fast_in_build(variant, code_arch, build.variants()))
    return fmt::format("the fast kernel of {} is not in the sm_{} code of this build{}",
                       variant_name(variant), code_arch,
                       build.e4m3_mma ? "" : " (built by CUDA before 12.8)");
  return {};
}

// The CPU fallback: it has no FP8 products, so it computes exact whatever was asked, and says
// so when fast was asked.
KernelChoice cpu_choice(const PlanOptions& options, std::string why) {
  KernelChoice c;
  c.backend = Backend::kCpu;
  c.family = KernelFamily::kCpu;
  c.precision = Precision::kExact;
  c.where = std::move(why);
  if (options.precision == Precision::kFast) {
    c.why_not_fast = "the CPU backend computes exact (fp32 products on the dequantized cache)";
    c.where += "; precision exact, not fast: " + c.why_not_fast;
  }
  return c;
}

KernelChoice reference_choice(const PlanOptions& options) {
  KernelChoice c;
  c.backend = Backend::kCpuReference;
  c.family = KernelFamily::kCpuReference;
  // The oracle of the fast kernels too: with round_p it rounds Q and P as they do, and without
  // round_p it computes exact whatever was asked.
  c.precision = options.round_p ? options.precision : Precision::kExact;
  c.where = "requested: the float64 oracle";
  if (options.precision == Precision::kFast)
    c.where += options.round_p
                   ? "; precision fast: Q and P rounded to e4m3 as the fast kernels round them"
                   : "; precision fast, but round_p is off: nothing rounded";
  return c;
}

Status select_cuda(const VerifyProblem& problem, const ProblemSummary& summary,
                   const PlanOptions& options, const PlanTuning& tuning,
                   const DeviceDescription& dev, const BuildDescription& build,
                   bool fixed_variant, KernelChoice* out) {
  const DeviceInfo& device = dev.info;
  const int sm = device.cc_major * 10 + device.cc_minor;
  const int code_arch = device.kernel_arch;
  const std::string where = device_text(device);
  std::string compiled;
  for (int a : build.archs) compiled += fmt::format("{}sm_{}", compiled.empty() ? "" : ",", a);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, sm >= 80, "device",
                  "{}: the portable kernel needs mma.sync bf16 and cp.async (sm_80 or newer)",
                  where);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, device.has_kernel_code, "device",
                  "{} has no code in this build (compiled for {}); rebuild with "
                  "TREEVERIFY_CUDA_ARCHS including {}{}",
                  where, compiled, sm, sm == 90 ? "a" : "");
  const int forced_rows = tuning.rows_per_cta;
  TV_REQUIRE(forced_rows == 0 || forced_rows == 16 || forced_rows == 32 || forced_rows == 64,
             "tuning.rows_per_cta", "{}; expected 0, 16, 32 or 64", forced_rows);
  // The tile table's entry for the largest request (rows: heads x tree nodes), or for a forced
  // row count.
  const int64_t max_rows = static_cast<int64_t>(summary.max_tree) * problem.num_heads;
  const bool e4m3 = problem.kv_format == KvFormat::kE4M3;
  const char* forced_arg = tuning.config_arch > 0 ? "tuning.config_arch" : "device";
  auto [config_arch, variant] =
      cuda::sm80::choose_tiles(sm, code_arch, tuning.config_arch,
                               forced_rows > 0 ? forced_rows : max_rows, build.variants(), e4m3);
  // The pair variant in place of the table's 64-row one (PlanTuning::pair_ctas).
  if (tuning.pair_ctas) {
    TV_REQUIRE(!e4m3, "tuning.pair_ctas", "the pair variant reads 16-bit caches only");
    TV_REQUIRE(forced_rows == 0 || forced_rows == 64, "tuning.pair_ctas",
               "runs 64 rows a CTA pair; rows_per_cta = {}", forced_rows);
    TV_REQUIRE_CODE(StatusCode::kUnsupported, sm >= 90, "tuning.pair_ctas",
                    "{}: the pair variant needs thread-block clusters (sm_90 or newer)", where);
    if (forced_rows == 64 || max_rows > 32) variant = VariantId::kR64C2;
  }
  // A variant asked for by name (PlanTuning::variant) in place of the table's.
  if (!tuning.variant.empty()) {
    TV_REQUIRE(!tuning.pair_ctas, "tuning.variant", "'{}' together with tuning.pair_ctas",
               tuning.variant);
    const VariantId named = variant_by_name(tuning.variant);
    TV_REQUIRE(named != VariantId::kNone, "tuning.variant",
               "'{}' is no variant of the portable kernel ({})", tuning.variant,
               variant_names());
    const bool has_kernel = cuda::sm80::with_variant(named, [&]<typename V>(V) {
      return cuda::sm80::instance_selectable<V>(e4m3 ? KvMode::kE4M3 : KvMode::k16);
    });
    TV_REQUIRE_CODE(StatusCode::kUnsupported, has_kernel, "tuning.variant",
                    "{} has no kernel for {} caches", tuning.variant,
                    e4m3 ? "e4m3" : "16-bit");
    const int rows = cuda::sm80::with_variant(named, []<typename V>(V) { return V::kRows; });
    TV_REQUIRE(forced_rows == 0 || forced_rows == rows, "tuning.variant",
               "{} holds {} rows a CTA; rows_per_cta = {}", tuning.variant, rows, forced_rows);
    variant = named;
  }
  TV_REQUIRE_CODE(StatusCode::kUnsupported, variant != VariantId::kNone, "tuning.config_arch",
                  "no tile configuration for sm_{}", config_arch);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, problem.batch_size <= kMaxGridDim, "batch_size",
                  "{} requests; the grid holds at most {} per call", problem.batch_size,
                  kMaxGridDim);
  // Before the variant's facts: those of a variant not compiled here are a trap stub's.
  const std::string missing = variant_missing(variant, config_arch, where, code_arch, build);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, missing.empty(), forced_arg, "{}{}", missing,
                  forced_rows > 0 ? fmt::format(" ({} rows a CTA forced)", forced_rows) : "");
  // The sm_90a wgmma kernel in place of the table's 64-row variant where it applies.
  const char* blocker = cuda::sm90::wgmma_blocker({.device_sm = sm,
                                                   .code_arch = code_arch,
                                                   .built = build.sm90a,
                                                   .forced_config_arch = tuning.config_arch,
                                                   .forced_rows = forced_rows,
                                                   .max_rows = max_rows});
  std::string no_wgmma = blocker != nullptr ? blocker : "";
  if (variant == VariantId::kR64C2) no_wgmma = "the pair variant was asked for (tuning.pair_ctas)";
  if (!tuning.variant.empty())
    no_wgmma = fmt::format("a portable variant was asked for (tuning.variant {})", tuning.variant);
  // Fast mode where the portable kernel has native e4m3 products or the wgmma kernel takes the
  // call (e4m3 wgmma); otherwise exact, and the reason says why. portable_mode is what the
  // portable kernel would run.
  KvMode mode = e4m3 ? KvMode::kE4M3 : KvMode::k16;
  KvMode portable_mode = mode;
  std::string fast_blocker;
  const bool fast_asked = e4m3 && options.precision == Precision::kFast;
  if (fast_asked) {
    fast_blocker = portable_fast_blocker(sm, config_arch, tuning.config_arch > 0, variant,
                                         code_arch, build);
    if (fast_blocker.empty()) portable_mode = KvMode::kE4M3Fast;
    if (fast_blocker.empty() || no_wgmma.empty()) mode = KvMode::kE4M3Fast;
  }
  const Facts table_facts = variant_facts(dev, variant, problem.dtype, portable_mode);
  TV_REQUIRE_CODE(StatusCode::kUnsupported,
                  table_facts.ctas_per_sm > 0 &&
                      static_cast<size_t>(table_facts.smem) <= device.smem_per_block_optin,
                  forced_arg,
                  "the sm_{} configuration ({}) needs {} bytes of shared memory per block; {} "
                  "allows {}",
                  config_arch, table_facts.name, table_facts.smem, where,
                  device.smem_per_block_optin);
  TV_REQUIRE(tuning.chunk_tokens >= 0 && tuning.chunk_tokens % table_facts.tokens == 0,
             "tuning.chunk_tokens", "{} is not a multiple of the {}-token KV tiles of {}",
             tuning.chunk_tokens, table_facts.tokens, table_facts.name);

  auto schedule_for = [&](const Facts& f) {
    SplitScheduleInput in;
    in.qo_indptr = {problem.qo_indptr, static_cast<size_t>(problem.batch_size) + 1};
    in.kv_len = {problem.kv_len, static_cast<size_t>(problem.batch_size)};
    in.num_heads = problem.num_heads;
    in.rows_per_cta = f.rows;
    // A forced chunk length need only be whole tiles of the table's variant: the wgmma
    // kernel's last tile of a chunk may be part of one (its copies and softmax stop at the
    // chunk's end).
    in.tile_tokens = tuning.chunk_tokens > 0 ? table_facts.tokens : f.tokens;
    in.concurrent_ctas = device.sm_count * f.ctas_per_sm / f.cluster_ctas;
    in.costs = split_costs(f, device, e4m3, kv_row_bytes(problem.kv_format, problem.dtype));
    in.forced_chunk_tokens = tuning.chunk_tokens;
    return problem.batch_size > 0 ? plan_split_schedule(in)
                                  : SplitSchedule{.chunk_tokens = f.tokens};
  };
  VariantId chosen = variant;
  Facts f = table_facts;
  if (no_wgmma.empty()) {
    const Facts wf = wgmma_facts(dev, problem.dtype, mode);
    // A device that cannot hold it (an sm_90 part with less shared memory a block) keeps the
    // portable kernel, which the checks above found runnable.
    if (wf.ctas_per_sm > 0 && static_cast<size_t>(wf.smem) <= device.smem_per_block_optin)
      f = wf;
    else
      no_wgmma = fmt::format("its {} bytes of shared memory a block do not fit ({} allows {})",
                             wf.smem, where, device.smem_per_block_optin);
  }
  if (mode != portable_mode && !f.wgmma) mode = portable_mode;  // the wgmma kernel does not fit
  SplitSchedule sched = schedule_for(f);
  // The table's variant, or one with fewer rows a CTA when the cost model says its schedule is
  // faster: more CTAs, each cheaper, which wins when the prefix is too short to keep the device
  // busy with the larger ones (S1 on the H200).
  if (!fixed_variant && forced_rows == 0 && tuning.chunk_tokens == 0 && mode == portable_mode &&
      variant != VariantId::kR64C2 && tuning.variant.empty()) {
    for (int64_t rows : {16, 32}) {
      const VariantId v = cuda::sm80::choose_tiles(sm, code_arch, tuning.config_arch, rows,
                                                   build.variants(), e4m3)
                              .variant;
      if (v == VariantId::kNone || v == chosen || rows >= table_facts.rows ||
          !cuda::sm80::variant_in_build(v, code_arch, build.variants()) ||
          (mode == KvMode::kE4M3Fast &&
           !cuda::sm80::fast_in_build(v, code_arch, build.variants())))
        continue;
      const Facts small = variant_facts(dev, v, problem.dtype, mode);
      if (small.ctas_per_sm == 0 || static_cast<size_t>(small.smem) > device.smem_per_block_optin)
        continue;
      const SplitSchedule s = schedule_for(small);
      if (s.est_ns < sched.est_ns) chosen = v, f = small, sched = s;
    }
  }
  TV_REQUIRE_CODE(StatusCode::kInternal,
                  sched.num_chunks <= kMaxGridDim && sched.max_row_blocks <= kMaxGridDim,
                  "schedule", "{} chunks x {} row blocks exceed the grid", sched.num_chunks,
                  sched.max_row_blocks);

  KernelChoice c;
  c.backend = Backend::kCuda;
  c.family = f.wgmma ? KernelFamily::kWgmma : KernelFamily::kMma;
  c.dtype = problem.dtype;
  c.kv_format = problem.kv_format;
  c.config_arch = config_arch;
  c.variant = chosen;  // the table's (or a smaller) variant, also where the wgmma kernel runs
  c.rows_per_cta = f.rows;
  c.tile_tokens = f.tokens;
  c.ctas_per_sm = f.ctas_per_sm;
  c.bulk = f.bulk;
  c.halves = f.halves;
  c.pair = f.cluster_ctas > 1;
  c.mode = mode;
  c.precision = mode == KvMode::kE4M3Fast ? Precision::kFast : Precision::kExact;
  c.schedule = sched;
  c.costs = split_costs(f, device, e4m3, kv_row_bytes(problem.kv_format, problem.dtype));
  c.concurrent_ctas = device.sm_count * f.ctas_per_sm / f.cluster_ctas;
  c.where = where;
  c.code_arch = code_arch;
  // The wgmma kernel's producer copies a whole 64-token tile inside one page by TMA tensor
  // copies from one thread where pages hold 64 rows or more. A 16-bit cache takes them only
  // where more than two row blocks share each tile of the largest request: they measured 4-10%
  // faster from 256 rows and 4-7% slower at 128 on the H200; e4m3 caches, exact and fast, are
  // faster at every row count measured (docs/kernels/sm90-wgmma.md). Partial and
  // page-straddling tiles keep cp.async.
  const bool tma_applies = f.wgmma && problem.page_size >= 64;
  const bool tma_by_rule = e4m3 || max_rows > 2 * cuda::sm90::WgmmaTile::kRows;
  const bool tma_pays = tma_by_rule || tuning.force_tma;
  c.tma = tma_applies && tma_pays && !tuning.disable_tma && dev.tma_maps;
  // A programmatic launch hides the combine's launch behind the main kernel's tail (faster for
  // every variant on the H200); griddepcontrol exists in code compiled for sm_90+, not merely
  // on an sm_90+ device.
  c.programmatic_combine = code_arch >= 90;

  // The reason's parts.
  c.why_family = f.wgmma ? ", wgmma (sm_90a): two consumer warpgroups scoring tiles in turns "
                           "and a producer warpgroup"
                 : sm == 90 && no_wgmma.empty()
                     ? ", the portable kernel: its schedule is faster here"
                 : sm == 90 ? ", the portable kernel (wgmma: " + no_wgmma + ")"
                            : "";
  c.why_rows = forced_rows > 0 ? fmt::format("{} rows a CTA forced", forced_rows)
               : f.rows < table_facts.rows
                   ? fmt::format(
                         "the table's {}-row CTAs would leave the device idle at this length",
                         table_facts.rows)
               : f.rows == 16 ? "no request has more than 16 rows"
               : f.rows == 32 ? "no request has more than 32 rows"
                              : "requests have more than 32 rows";
  c.why_copies = f.bulk ? " by bulk copies"
                 : c.tma ? (tma_by_rule
                                ? " (whole tiles inside one page by TMA tensor copies)"
                                : " (whole tiles inside one page by TMA tensor copies: forced)")
                 : !tma_applies ? ""
                 : !tma_pays    ? " by cp.async (TMA copies of a 16-bit cache need more than "
                                  "128 rows in the largest request: slower below)"
                                : " by cp.async (TMA copies disabled or unavailable)";
  if (e4m3 && c.precision == Precision::kFast) {
    c.why_precision = fmt::format(
        ", e4m3 fast: Q (a scale a row) and P in e4m3, e4m3 products{}",
        f.wgmma || cuda::sm80::native_fp8_mma(sm)
            ? ""
            : fmt::format(" (emulated on this sm_{}: a correctness run, not a speed one)", sm));
  } else if (e4m3) {
    c.why_precision =
        ", e4m3 widened to fp16 (exact: fp16 products, Q scaled into fp16 by a power of two a "
        "row)";
    if (fast_asked) {
      c.why_not_fast = fmt::format(
          "{}{}", fast_blocker,
          sm == 90 ? fmt::format(", and the wgmma kernel, whose e4m3 products are native, does "
                                 "not run ({})",
                                 no_wgmma)
                   : "");
      c.why_precision += "; fast asked, run exact: " + c.why_not_fast;
    }
  }
  *out = std::move(c);
  return Status::Ok();
}

}  // namespace

BuildDescription this_build() {
  BuildDescription b;
#if defined(TREEVERIFY_WITH_CUDA)
  b.cuda = true;
  b.archs = {TREEVERIFY_CUDA_ARCH_NUMS};
#endif
  b.all_variants = b.cuda && TREEVERIFY_ALL_VARIANTS != 0;
  b.e4m3_mma = b.cuda && TREEVERIFY_CUDA_E4M3_MMA != 0;
  b.sm90a = b.cuda && TREEVERIFY_CUDA_SM90A != 0;
  return b;
}

Status select_kernel(const VerifyProblem& problem, const ProblemSummary& summary,
                     const PlanOptions& options, const PlanTuning& tuning, const Machine& machine,
                     KernelChoice* choice, bool fixed_variant) {
  TV_REQUIRE(options.num_threads >= 0, "options.num_threads", "num_threads = {}",
             options.num_threads);
  TV_REQUIRE(options.precision == Precision::kExact || options.precision == Precision::kFast,
             "options.precision", "unknown value {}", static_cast<int>(options.precision));
  TV_REQUIRE(options.precision == Precision::kExact || problem.kv_format == KvFormat::kE4M3,
             "options.precision",
             "fast needs an e4m3 KV cache (it rounds Q and P to e4m3 for FP8 products); this "
             "cache is {}",
             dtype_name(problem.dtype));
  TV_REQUIRE(!(tuning.disable_tma && tuning.force_tma), "tuning.force_tma",
             "cannot be set with tuning.disable_tma");
  KernelChoice c;
  switch (options.backend) {
    case Backend::kCpuReference:
      c = reference_choice(options);
      break;
    case Backend::kCpu:
      c = cpu_choice(options, "requested");
      break;
    case Backend::kCuda:
      if (machine.device == nullptr) return Status(machine.no_device_code, machine.no_device);
      TV_RETURN_IF_ERROR(select_cuda(problem, summary, options, tuning, *machine.device,
                                     machine.build, fixed_variant, &c));
      break;
    case Backend::kAuto:
      // The GPU when this machine has a usable one; the CPU fallback only when it has none. A
      // GPU that refuses the problem is an error, not a silent switch to the CPU: the caller
      // holds device tensors, which a CPU backend must never be given.
      if (machine.device == nullptr) {
        c = cpu_choice(options, "no GPU: " + machine.no_device);
      } else {
        TV_RETURN_IF_ERROR(select_cuda(problem, summary, options, tuning, *machine.device,
                                       machine.build, fixed_variant, &c));
      }
      break;
    default:
      return Status(StatusCode::kInvalidArgument,
                    fmt::format("argument 'options.backend': unknown value {}",
                                static_cast<int>(options.backend)));
  }
  c.dtype = problem.dtype;
  c.kv_format = problem.kv_format;
  *choice = std::move(c);
  return Status::Ok();
}

Status config_runnable(int config_arch, const DeviceDescription& dev,
                       const BuildDescription& build) {
  const DeviceInfo& device = dev.info;
  const std::string where = device_text(device);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, device.has_kernel_code, "device",
                  "{} has no code in this build", where);
  for (int64_t rows : {16, 32, 64}) {
    const VariantId v = cuda::sm80::choose_variant(config_arch, rows);
    TV_REQUIRE_CODE(StatusCode::kUnsupported, v != VariantId::kNone, "tuning.config_arch",
                    "no tile configuration for sm_{}", config_arch);
    const std::string missing =
        variant_missing(v, config_arch, where, device.kernel_arch, build);
    TV_REQUIRE_CODE(StatusCode::kUnsupported, missing.empty(), "tuning.config_arch", "{}",
                    missing);
    const int smem = cuda::sm80::with_variant(v, []<typename V>(V) { return V::kSmemBytes; });
    TV_REQUIRE_CODE(StatusCode::kUnsupported,
                    static_cast<size_t>(smem) <= device.smem_per_block_optin,
                    "tuning.config_arch",
                    "the sm_{} configuration ({}) needs {} bytes of shared memory per block; {} "
                    "allows {}",
                    config_arch, variant_name(v), smem, where, device.smem_per_block_optin);
  }
  return Status::Ok();
}

DeviceDescription described_device(int sm, const BuildDescription& build) {
  DeviceDescription d;
  d.info.ordinal = 0;
  d.info.name = fmt::format("an sm_{} GPU", sm);
  d.info.cc_major = sm / 10;
  d.info.cc_minor = sm % 10;
  d.info.sm_count = 128;
  d.info.smem_per_block_optin = static_cast<size_t>(cuda::sm80::smem_per_block(sm));
  for (int a : build.archs)
    if (a <= sm && a > d.info.kernel_arch) d.info.kernel_arch = a;
  d.info.has_kernel_code = build.cuda && d.info.kernel_arch > 0;
  d.tma_maps = sm >= 90;  // a driver that encodes TMA tensor maps (CUDA 12+)
  d.ctas_per_sm = [smem = d.info.smem_per_block_optin](const KernelKey& key) {
    const int bytes = key.family == KernelFamily::kWgmma
                          ? cuda::sm90::WgmmaTile::kSmemBytes
                          : cuda::sm80::with_variant(key.variant,
                                                     []<typename V>(V) { return V::kSmemBytes; });
    return static_cast<size_t>(bytes) <= smem ? 1 : 0;
  };
  return d;
}

Status select_for_rows(int rows, KvFormat kv_format, Precision precision, const PlanTuning& tuning,
                       const Machine& machine, KernelChoice* choice) {
  constexpr int32_t kPrefix = 65536;
  const int32_t kv_len = kPrefix + rows;
  const std::vector<int32_t> qo = {0, rows}, lens = {kv_len}, indptr = {0, kv_len};
  std::vector<int32_t> pages(kv_len), parents(rows);
  for (int32_t i = 0; i < kv_len; ++i) pages[i] = i;
  for (int32_t i = 0; i < rows; ++i) parents[i] = i - 1;
  const VerifyProblem problem{.batch_size = 1,
                              .num_heads = 1,
                              .page_size = 1,
                              .num_pages = kv_len,
                              .kv_format = kv_format,
                              .softmax_scale = 0.1f,
                              .qo_indptr = qo.data(),
                              .kv_len = lens.data(),
                              .kv_page_indptr = indptr.data(),
                              .kv_page_indices = pages.data(),
                              .parents = parents.data()};
  ProblemSummary summary;
  TV_RETURN_IF_ERROR(validate_problem(problem, &summary));
  const PlanOptions options{.backend = Backend::kCuda, .precision = precision};
  return select_kernel(problem, summary, options, tuning, machine, choice);
}

std::vector<ArchKernels> kernels_by_arch(const BuildDescription& build) {
  std::vector<ArchKernels> out;
  for (int arch : build.archs) {
    const DeviceDescription device = described_device(arch, build);
    const Machine machine{.build = build, .device = &device};
    // The table's entry for each request size: rows a CTA forced to it.
    auto name = [&](int rows, KvFormat kv) -> std::string {
      const PlanTuning tuning{.rows_per_cta = rows};
      KernelChoice c;
      if (!select_for_rows(rows, kv, Precision::kExact, tuning, machine, &c).ok()) return "none";
      return c.family == KernelFamily::kWgmma ? wgmma_name() : variant_name(c.variant);
    };
    out.push_back({arch, name(16, KvFormat::kSameAsQ), name(32, KvFormat::kSameAsQ),
                   name(64, KvFormat::kSameAsQ), name(16, KvFormat::kE4M3)});
  }
  return out;
}

}  // namespace treeverify::detail
