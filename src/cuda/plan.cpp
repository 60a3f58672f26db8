// The CUDA backend's plan(): the kernel variant and the split-KV schedule for a validated
// problem on a device, the reason line that says why, and the workspace size.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include "core/check.h"
#include "core/cuda_backend.h"
#include "core/split_schedule.h"
#include "cuda/mma/build.h"
#include "cuda/mma/launcher.h"
#include "cuda/sm90/choice.h"
#include "cuda/sm90/kv_tensor_map.h"
#include "cuda/sm90/launcher.h"
#include "cuda/step_data.h"
#include "cuda/workspace.h"

namespace treeverify::detail {
namespace {

using cuda::mma::KvMode;
using cuda::mma::VariantId;

struct VariantFacts {
  int rows, tokens, smem, ctas_per_sm;
  bool bulk;    // needs bulk copies (sm_90+)
  bool halves;  // two 32-row halves that alternate softmax and products
  std::string name;
  bool wgmma = false;  // the sm_90a wgmma kernel (cuda/sm90), not a portable variant
};

// "r<rows>-s<stages>[-t<tokens>][-bulk]", the variant's part of Plan::kernel.
std::string variant_name(VariantId v) {
  return cuda::mma::with_variant(v, [&]<typename V>(V) {
    const std::string tokens = V::kTokens != 32 ? fmt::format("-t{}", V::kTokens) : "";
    return fmt::format("r{}-s{}{}{}", V::kRows, V::kStages, tokens, V::kBulk ? "-bulk" : "");
  });
}

// Rows, shared memory and measured occupancy of a variant's kernel for `mode` on the current
// device.
VariantFacts variant_facts(VariantId v, DType dtype, KvMode mode) {
  return cuda::mma::with_variant(v, [&]<typename V>(V) {
    using cuda::mma::verify_ctas_per_sm;
    auto ctas_for = [&]<KvMode kMode>() {
      return dtype == DType::kBF16 ? verify_ctas_per_sm<__nv_bfloat16, V, kMode>()
                                   : verify_ctas_per_sm<__half, V, kMode>();
    };
    // Only the instantiated kernels (e4m3_variant, fast_mode_variant); 0 CTAs for the others.
    constexpr VariantId id = cuda::mma::variant_id<V>();
    int ctas = 0;
    if (mode == KvMode::k16) {
      ctas = ctas_for.template operator()<KvMode::k16>();
    } else if (mode == KvMode::kE4M3) {
      if constexpr (cuda::mma::e4m3_variant(id))
        ctas = ctas_for.template operator()<KvMode::kE4M3>();
    } else if constexpr (cuda::mma::fast_mode_variant(id)) {
      ctas = ctas_for.template operator()<KvMode::kE4M3Fast>();
    }
    return VariantFacts{V::kRows, V::kTokens, V::kSmemBytes,  ctas,
                        V::kBulk, V::kHalves, variant_name(v)};
  });
}

// "wgmma-r<rows>-t<tokens>", the wgmma kernel's part of Plan::kernel and doctor's name for it.
std::string wgmma_name() {
  return fmt::format("wgmma-r{}-t{}", cuda::sm90::WgmmaTile::kRows, cuda::sm90::WgmmaTile::kTokens);
}

// The same facts for the sm_90a wgmma kernel's instance for `mode` on the current device.
VariantFacts wgmma_facts(DType dtype, KvMode mode) {
  using cuda::sm90::WgmmaTile;
  const int ctas = cuda::sm90::verify_wgmma_ctas_per_sm(dtype, mode);
  return VariantFacts{WgmmaTile::kRows,
                      WgmmaTile::kTokens,
                      WgmmaTile::kSmemBytes,
                      ctas,
                      false,
                      false,
                      wgmma_name(),
                      true};
}

// facts() with `device` made current for its occupancy query, the caller's device restored.
template <class Facts>
VariantFacts facts_on(const DeviceInfo& device, Facts facts) {
  int previous = 0;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(device.ordinal);
  VariantFacts f = facts();
  (void)cudaSetDevice(previous);
  return f;
}
VariantFacts variant_facts_on(const DeviceInfo& device, VariantId v, DType dtype, KvMode mode) {
  return facts_on(device, [&] { return variant_facts(v, dtype, mode); });
}

// The split schedule's cost model for a variant on a device (split_schedule.h). Measured on
// the H200 with the sm_90 variants (2026-11-30, bench/results/h200.md, "Small work"):
// per KV token a 64-row CTA takes 62 ns (2.0 us a 32-token tile, compute-bound), a 32-row one
// 39 ns, a 16-row one 60 ns (its 2-stage pipe waits on memory); a CTA's fixed cost is 12 us
// at 64 rows and 9.5 us below; the combine about 3 us beyond its reads. Other devices and
// tables use the same figures: they steer the choice, never the result.
SplitCosts split_costs(const VariantFacts& facts, const DeviceInfo& device, bool e4m3,
                       int token_bytes) {
  SplitCosts c;
  // The wgmma kernel (64 rows, 64-token tiles): 37 ns a token (V4 on the H200, 2026-12-01,
  // bench/results/h200-2026-12-01-wgmma: 3.22-3.26 ms, 2.3 us a tile of each CTA). Its fixed
  // cost a CTA is not measured apart; on a 16-bit cache it is priced as the small portable
  // variants' 9.5 us: with the portable 64-row figure, 12 us, the model gave S1 (128 rows, L
  // 4112) the portable r32-s4 (21.1 us against 23.3 modelled), which measured slower than
  // this kernel on the same grid (0.0194-0.0195 ms against 0.0184-0.0185, H200, 2026-12-02,
  // two runs each: bench/results/h200-2026-12-02-small/); no other suite case changes its
  // grid. An e4m3 cache keeps 12 us (its first tile is copied, then widened; not measured).
  c.token_ns = facts.wgmma ? 37 : facts.rows == 64 ? 62 : facts.rows == 32 ? 39 : 60;
  c.cta_ns = facts.wgmma && !e4m3 ? 9500 : facts.rows == 64 ? 12000 : 9500;
  c.combine_ns = 3000;
  c.token_bytes = token_bytes;
  // The memory's peak as the device reports it; the H200's measured copy rate is 4.2 TB/s.
  if (device.memory_bandwidth > 0) c.bytes_per_ns = device.memory_bandwidth * 1e-9;
  // Each partial row written and read back, priced at fp32 (4 bytes a value) although partials
  // are 16-bit since e0bd52a: at the 16-bit price the model moves S1 to 64-token chunks, which
  // measured 5% slower than its 128 (H200, 2026-12-03,
  // bench/results/h200-2026-12-03-ffd1207-tests).
  c.partial_row_ns = (kVDim + 1) * 4 * 2 / c.bytes_per_ns;
  return c;
}

// Why the code `where` runs, compiled for sm_<code_arch>, cannot run variant `v` of the
// sm_<config_arch> table (empty when it can): the predicate the kernel is compiled with
// (cuda/mma/build.h), so a plan never launches a trap stub.
std::string variant_missing(VariantId v, int config_arch, const std::string& where, int code_arch) {
  if (cuda::mma::variant_compiled_for(v, code_arch)) return {};
  const std::string what =
      fmt::format("the sm_{} configuration ({}) is not in the code {} runs, compiled for sm_{}",
                  config_arch, variant_name(v), where, code_arch);
  if (!cuda::mma::variant_fits(v, code_arch)) {
    const bool bulk = cuda::mma::with_variant(v, []<typename V>(V) { return V::kBulk; });
    return fmt::format("{} (it needs more shared memory a block{})", what,
                       bulk ? " or cp.async.bulk, sm_90+" : "");
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
// the code the device runs must hold the fast kernel. doctor asks the same (fast_on_device).
std::string fast_mode_blocker(int sm, int config_arch, bool forced, VariantId variant,
                              int code_arch) {
  auto not_native = [](int a) {
    return a < 89    ? fmt::format("sm_{} has no e4m3 mma", a)
           : a < 100 ? fmt::format(
                           "sm_{} emulates e4m3 mma.sync (fp16 products after conversion, "
                           "slower than exact)",
                           a)
                     : fmt::format("sm_{}'s e4m3 mma.sync is not verified native", a);
  };
  if (!cuda::mma::native_fp8_mma(config_arch)) return not_native(config_arch);
  if (!forced && !cuda::mma::native_fp8_mma(sm)) return not_native(sm);
  if (!cuda::mma::fast_compiled_for(variant, code_arch))
    return fmt::format("the fast kernel of {} is not in the sm_{} code of this build{}",
                       variant_name(variant), code_arch,
                       TREEVERIFY_CUDA_E4M3_MMA ? "" : " (built by CUDA before 12.8)");
  return {};
}

}  // namespace

Status cuda_config_runnable(int config_arch, const DeviceInfo& device) {
  const std::string where = fmt::format("device {} '{}' (sm_{})", device.ordinal, device.name,
                                        device.cc_major * 10 + device.cc_minor);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, device.has_kernel_code, "device",
                  "{} has no code in this build", where);
  for (int64_t rows : {16, 32, 64}) {
    const VariantId v = cuda::mma::choose_variant(config_arch, rows);
    TV_REQUIRE_CODE(StatusCode::kUnsupported, v != VariantId::kNone, "options.force_config_arch",
                    "no tile configuration for sm_{}", config_arch);
    const std::string missing = variant_missing(v, config_arch, where, device.kernel_arch);
    TV_REQUIRE_CODE(StatusCode::kUnsupported, missing.empty(), "options.force_config_arch", "{}",
                    missing);
    const int smem = cuda::mma::with_variant(v, []<typename V>(V) { return V::kSmemBytes; });
    TV_REQUIRE_CODE(StatusCode::kUnsupported,
                    static_cast<size_t>(smem) <= device.smem_per_block_optin,
                    "options.force_config_arch",
                    "the sm_{} configuration ({}) needs {} bytes of shared memory per block; {} "
                    "allows {}",
                    config_arch, variant_name(v), smem, where, device.smem_per_block_optin);
  }
  return Status::Ok();
}

std::vector<ArchKernels> cuda_kernels_by_arch() {
  std::vector<ArchKernels> out;
  for (int arch : cuda_compiled_archs()) {
    auto name = [&](int64_t rows, bool e4m3 = false) {
      const VariantId v =
          cuda::mma::choose_tiles(arch, arch, 0, rows, cuda::mma::kThisBuild, e4m3).variant;
      return v == VariantId::kNone ? std::string("none") : variant_name(v);
    };
    // sm_90a code (TREEVERIFY_CUDA_SM90A) runs more than 32 rows on the wgmma kernel.
    const std::string more = arch == 90 && cuda::sm90::kWgmmaBuilt ? wgmma_name() : name(33);
    out.push_back({arch, name(16), name(32), more, name(16, true)});
  }
  return out;
}

Status cuda_plan(const VerifyProblem& problem, const ProblemSummary& summary,
                 const PlanOptions& options, const DeviceInfo& device, Plan* plan) {
  const int sm = device.cc_major * 10 + device.cc_minor;
  const std::string where = fmt::format("device {} '{}' (sm_{})", device.ordinal, device.name, sm);
  std::string compiled;
  for (int a : cuda_compiled_archs())
    compiled += fmt::format("{}sm_{}", compiled.empty() ? "" : ",", a);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, sm >= 80, "device",
                  "{}: the portable kernel needs mma.sync bf16 and cp.async (sm_80 or newer)",
                  where);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, device.has_kernel_code, "device",
                  "{} has no code in this build (compiled for {}); rebuild with "
                  "TREEVERIFY_CUDA_ARCHS including {}{}",
                  where, compiled, sm, sm == 90 ? "a" : "");
  // 16-row CTAs when no request has more rows (decode with H <= 16): half the tensor work per
  // KV tile, and two CTAs per SM; 32-row CTAs up to 32 rows, 64-row CTAs above.
  // device.kernel_arch is the architecture the loaded device code was compiled for.
  const int64_t max_rows = static_cast<int64_t>(summary.max_tree) * problem.num_heads;
  const int forced_rows = options.force_rows_per_cta;
  TV_REQUIRE(forced_rows == 0 || forced_rows == 16 || forced_rows == 32 || forced_rows == 64,
             "options.force_rows_per_cta", "{}; expected 0, 16, 32 or 64", forced_rows);
  // A forced row count picks the table entry of requests that size.
  const bool e4m3 = problem.kv_format == KvFormat::kE4M3;
  const auto [config_arch, variant] = cuda::mma::choose_tiles(
      sm, device.kernel_arch, options.force_config_arch, forced_rows > 0 ? forced_rows : max_rows,
      cuda::mma::kThisBuild, e4m3);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, variant != VariantId::kNone,
                  "options.force_config_arch", "no tile configuration for sm_{}", config_arch);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, problem.batch_size <= 65535, "batch_size",
                  "{} requests; the grid holds at most 65535 per call", problem.batch_size);
  // Before the variant's facts: those of a variant not compiled here are a trap stub's.
  const std::string missing = variant_missing(variant, config_arch, where, device.kernel_arch);
  TV_REQUIRE_CODE(StatusCode::kUnsupported, missing.empty(),
                  options.force_config_arch > 0 ? "options.force_config_arch" : "device", "{}{}",
                  missing,
                  forced_rows > 0 ? fmt::format(" ({} rows a CTA forced)", forced_rows) : "");
  // The sm_90a wgmma kernel in place of the table's 64-row variant where it applies
  // (cuda/sm90/choice.h).
  const char* blocker = cuda::sm90::wgmma_blocker({.device_sm = sm,
                                                   .code_arch = device.kernel_arch,
                                                   .built = cuda::sm90::kWgmmaBuilt,
                                                   .forced_config_arch = options.force_config_arch,
                                                   .forced_rows = forced_rows,
                                                   .max_rows = max_rows});
  std::string no_wgmma = blocker != nullptr ? blocker : "";
  // Fast mode (Precision::kFast) where the portable kernel has native e4m3 products
  // (fast_mode_blocker finds nothing against it) or the wgmma kernel takes the call (e4m3
  // wgmma); otherwise the call runs exact, and says why. portable_mode is what the portable
  // kernel would run.
  KvMode mode = e4m3 ? KvMode::kE4M3 : KvMode::k16;
  KvMode portable_mode = mode;
  std::string precision_note, portable_fast_blocker;
  if (e4m3 && options.precision == Precision::kFast) {
    portable_fast_blocker = fast_mode_blocker(sm, config_arch, options.force_config_arch > 0,
                                              variant, device.kernel_arch);
    if (portable_fast_blocker.empty()) portable_mode = KvMode::kE4M3Fast;
    if (portable_fast_blocker.empty() || no_wgmma.empty()) mode = KvMode::kE4M3Fast;
  }
  const VariantFacts facts = variant_facts_on(device, variant, problem.dtype, portable_mode);
  TV_REQUIRE_CODE(
      StatusCode::kUnsupported,
      facts.ctas_per_sm > 0 && static_cast<size_t>(facts.smem) <= device.smem_per_block_optin,
      options.force_config_arch > 0 ? "options.force_config_arch" : "device",
      "the sm_{} configuration ({}) needs {} bytes of shared memory per block; {} "
      "allows {}",
      config_arch, facts.name, facts.smem, where, device.smem_per_block_optin);

  TV_REQUIRE(options.force_chunk_tokens >= 0 && options.force_chunk_tokens % facts.tokens == 0,
             "options.force_chunk_tokens", "{} is not a multiple of the {}-token KV tiles of {}",
             options.force_chunk_tokens, facts.tokens, facts.name);

  // The table's variant, or one with fewer rows a CTA when the cost model says its schedule
  // is faster: more CTAs, each cheaper, which wins when the prefix is too short to keep the
  // device busy with the larger ones (H200: S1, 128 rows of a 4112-token sequence, 0.0251 ms
  // with 64-row CTAs, 0.0207 with 32-row ones).
  auto schedule_for = [&](const VariantFacts& f) {
    SplitScheduleInput in;
    in.qo_indptr = {problem.qo_indptr, static_cast<size_t>(problem.batch_size) + 1};
    in.kv_len = {problem.kv_len, static_cast<size_t>(problem.batch_size)};
    in.num_heads = problem.num_heads;
    in.rows_per_cta = f.rows;
    // A forced chunk length need only be whole tiles of the table's variant: the wgmma
    // kernel's last tile of a chunk may be part of one (its copies and softmax stop at the
    // chunk's end).
    in.tile_tokens = options.force_chunk_tokens > 0 ? facts.tokens : f.tokens;
    in.concurrent_ctas = device.sm_count * f.ctas_per_sm;
    in.costs = split_costs(f, device, e4m3, kv_row_bytes(problem.kv_format, problem.dtype));
    in.forced_chunk_tokens = options.force_chunk_tokens;
    return problem.batch_size > 0 ? plan_split_schedule(in)
                                  : SplitSchedule{.chunk_tokens = f.tokens};
  };
  VariantId chosen = variant;
  VariantFacts chosen_facts = facts;
  if (no_wgmma.empty()) {
    const VariantFacts wf = facts_on(device, [&] { return wgmma_facts(problem.dtype, mode); });
    // A device that cannot hold it (an sm_90 part with less shared memory a block) keeps the
    // portable kernel, which the checks above found runnable.
    if (wf.ctas_per_sm > 0 && static_cast<size_t>(wf.smem) <= device.smem_per_block_optin)
      chosen_facts = wf;
    else
      no_wgmma = fmt::format("its {} bytes of shared memory a block do not fit ({} allows {})",
                             wf.smem, where, device.smem_per_block_optin);
  }
  if (mode != portable_mode && !chosen_facts.wgmma) mode = portable_mode;  // it does not fit
  if (e4m3 && options.precision == Precision::kFast && mode != KvMode::kE4M3Fast)
    precision_note = fmt::format("; fast asked, run exact: {}{}", portable_fast_blocker,
                                 sm == 90 ? fmt::format(", and the wgmma kernel, whose e4m3 "
                                                        "products are native, does not run ({})",
                                                        no_wgmma)
                                          : "");
  SplitSchedule sched = schedule_for(chosen_facts);
  if (forced_rows == 0 && options.force_chunk_tokens == 0) {
    for (int64_t rows : {16, 32}) {
      const VariantId v = cuda::mma::choose_tiles(sm, device.kernel_arch, options.force_config_arch,
                                                  rows, cuda::mma::kThisBuild, e4m3)
                              .variant;
      if (v == VariantId::kNone || v == chosen || rows >= facts.rows ||
          !cuda::mma::variant_compiled_for(v, device.kernel_arch) ||
          (mode == KvMode::kE4M3Fast && !cuda::mma::fast_compiled_for(v, device.kernel_arch)) ||
          mode != portable_mode)  // fast mode runs only on the wgmma kernel here
        continue;
      const VariantFacts f = variant_facts_on(device, v, problem.dtype, mode);
      if (f.ctas_per_sm == 0 || static_cast<size_t>(f.smem) > device.smem_per_block_optin) continue;
      const SplitSchedule s = schedule_for(f);
      if (s.est_ns < sched.est_ns) chosen = v, chosen_facts = f, sched = s;
    }
  }
  TV_REQUIRE_CODE(StatusCode::kInternal, sched.num_chunks <= 65535 && sched.max_row_blocks <= 65535,
                  "schedule", "{} chunks x {} row blocks exceed the grid", sched.num_chunks,
                  sched.max_row_blocks);

  plan->state.id = new_plan_id();
  plan->device = device.ordinal;
  plan->state.config_arch = config_arch;
  plan->state.variant = static_cast<int32_t>(chosen);
  plan->state.wgmma = chosen_facts.wgmma;
  // Its producer copies a whole 64-token tile inside one page by TMA tensor copies from one
  // thread (16-bit: 9 copies and no proxy fence; e4m3: 5 copies, which the producer then
  // widens) where pages hold 64 rows or more; for a 16-bit cache only where more than two row
  // blocks share each tile of the largest request (a ragged batch follows its largest
  // request; PlanOptions::force_tma drops that rule). Partial and page-straddling tiles keep
  // cp.async. H200, L = 185000, page 64, TMA against cp.async in one binary:
  // - 16-bit (2026-12-01): 256 rows or more 4-10% faster (V2 0.3743 -> 0.3556 ms, V3 1.017 ->
  //   0.965, V4 2.91 -> 2.62-2.68, H 128 T 2 0.1979 -> 0.1906), 128 rows 4-7% slower (D2
  //   0.1149 -> 0.1192, H 8 T 16 0.1144 -> 0.1197, four 64-row requests 0.2368 -> 0.2523;
  //   again 2026-12-04: D2 0.1067-0.1068 -> 0.1150-0.1162); 129-255 rows were not measured;
  // - e4m3 (2026-12-02): faster at every row count measured (V2 0.5663-0.5674 -> 0.5476-0.5478,
  //   V3 1.544-1.550 -> 1.5005-1.5007, V4 4.27-4.28 -> 4.15-4.19, D2 0.1545 -> 0.1520).
  // - e4m3 fast mode (2026-12-04, two maps: kv_tensor_map.h): 256 rows or more 3.6-4.0% faster
  //   (V2 0.2745-0.2769 -> 0.2638-0.2660, V3 0.7387-0.7434 -> 0.7103-0.7158, V4 1.972-1.986 ->
  //   1.893-1.908), 128 rows 3% (D2 0.0817-0.0820 -> 0.0793-0.0796), S1 and S2 equal.
  // cuda/sm90/DESIGN_NOTES.md, versions 13 and 14, and "Fast mode: whole tiles by TMA".
  const bool tma_applies = chosen_facts.wgmma && problem.page_size >= 64;
  const bool tma_by_rule = e4m3 || max_rows > 2 * cuda::sm90::WgmmaTile::kRows;
  const bool tma_pays = tma_by_rule || options.force_tma;
  plan->state.tma =
      tma_applies && tma_pays && !options.disable_tma && cuda::sm90::kv_tensor_maps_available();
  plan->state.tile_tokens = chosen_facts.tokens;
  plan->state.rows_per_cta = chosen_facts.rows;
  plan->state.chunk_tokens = sched.chunk_tokens;
  plan->state.num_chunks = sched.num_chunks;
  // A programmatic launch hides the combine's launch behind the main kernel's tail. With the
  // combine of one CTA a row, 64-row grids measured slower with it (V1 0.244 -> 0.262 ms);
  // with the combine split over columns and warps (H200, 2026-11-30, two machine starts):
  // V1 0.1981 -> 0.1952 ms, D2 0.1983 -> 0.1958, S1 0.0312 -> 0.0289, so every variant uses
  // it. griddepcontrol exists in code compiled for sm_90+ (kernel_arch), not merely on the
  // device.
  plan->state.programmatic_combine = device.kernel_arch >= 90;
  plan->state.device_sms = device.sm_count;
  const VariantFacts& f = chosen_facts;
  const bool fast = mode == KvMode::kE4M3Fast;
  plan->precision = fast ? Precision::kFast : Precision::kExact;
  plan->state.fast_products = fast;
  plan->kernel = f.wgmma
                     ? fmt::format("cuda-wgmma/{}{}{}/{}{}/sm90a", dtype_name(problem.dtype),
                                   e4m3 ? "-e4m3kv" : "", fast ? "-fast" : "", f.name,
                                   plan->state.tma ? "+tma" : "")
                     : fmt::format("cuda-mma/{}{}{}/{}/sm{}-config", dtype_name(problem.dtype),
                                   e4m3 ? "-e4m3kv" : "", fast ? "-fast" : "", f.name, config_arch);
  // On an sm_90 device, why the portable kernel runs instead of the wgmma one.
  const std::string kernel_note = f.wgmma ? ", wgmma (sm_90a): two consumer warpgroups scoring "
                                            "tiles in turns and a producer warpgroup"
                                  : sm == 90 && no_wgmma.empty()
                                      ? ", the portable kernel: its schedule is faster here"
                                  : sm == 90 ? ", the portable kernel (wgmma: " + no_wgmma + ")"
                                             : "";
  // Why these tiles: the table in cuda/mma/config.h, unless the schedule took fewer rows.
  const std::string tiles = forced_rows > 0 ? fmt::format("{} rows a CTA forced", forced_rows)
                            : f.rows < facts.rows
                                ? fmt::format(
                                      "the table's {}-row CTAs would leave the device idle at "
                                      "this length",
                                      facts.rows)
                            : f.rows == 16 ? "no request has more than 16 rows"
                            : f.rows == 32 ? "no request has more than 32 rows"
                                           : "requests have more than 32 rows";
  // How the KV tiles reach shared memory, where it is not the variant's plain cp.async.
  const char* copies =
      f.bulk ? " by bulk copies"
      : plan->state.tma
          ? (tma_by_rule ? " (whole tiles inside one page by TMA tensor copies)"
                         : " (whole tiles inside one page by TMA tensor copies: forced)")
      : !tma_applies ? ""
      : !tma_pays    ? " by cp.async (TMA copies of a 16-bit cache need more than 128 rows in the "
                       "largest request: slower below)"
                     : " by cp.async (TMA copies disabled or unavailable)";
  const std::string split = sched.partial_rows > 0
                                ? fmt::format(", {} partial rows to combine", sched.partial_rows)
                                : ", no request split";
  plan->reason = fmt::format(
      "{} runs sm_{} code; {} rows a CTA ({}){}{}, {}-token KV tiles{}{}; {} row block(s) x {} "
      "chunk(s) of {} tokens = {} CTAs, {} per SM{}; modelled {:.1f} us",
      where, device.kernel_arch, f.rows, tiles, kernel_note,
      f.halves ? " in two halves, one's softmax beside the other's products" : "", f.tokens, copies,
      !e4m3  ? ""
      : fast ? fmt::format(", e4m3 fast: Q (a scale a row) and P in e4m3, e4m3 products{}",
                           f.wgmma || cuda::mma::native_fp8_mma(sm)
                               ? ""
                               : fmt::format(" (emulated on this sm_{}: a correctness run, not a "
                                             "speed one)",
                                             sm))
             : ", e4m3 widened to fp16 (exact: fp16 products, Q scaled into fp16 by a power of "
               "two a row)" +
                   precision_note,
      sched.max_row_blocks, sched.num_chunks, sched.chunk_tokens, sched.num_ctas, f.ctas_per_sm,
      split, sched.est_ns * 1e-3);
  plan->workspace_bytes = workspace_layout(*plan).total();
  return Status::Ok();
}

}  // namespace treeverify::detail
