// The selection function: for a validated problem, the machine it runs on and the caller's
// options, which backend and kernel run, with which tiles, schedule, precision and copies, and
// why. plan() calls it once per call; supports() and `treeverify doctor` ask the same function,
// and tests/cpu/test_select.cpp drives it with every release architecture's description, no GPU
// needed. Host code only: it reads the tile tables (cuda/sm80/config.h, cuda/sm90/choice.h) and
// the split schedule's cost model (split_schedule.h), and whatever it needs to know of a GPU
// comes in the Machine.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/split_schedule.h"
#include "core/validate.h"
#include "cuda/common/params.h"
#include "cuda/sm80/config.h"
#include "treeverify/system.h"
#include "treeverify/tuning.h"
#include "treeverify/verify.h"

namespace treeverify::detail {

// What this binary holds for GPUs.
struct BuildDescription {
  bool cuda = false;          // the CUDA backend is compiled in
  std::vector<int> archs;     // compiled SM versions (90 for sm_90a code)
  bool all_variants = false;  // TREEVERIFY_ALL_VARIANTS: every variant that fits each arch
  bool e4m3_mma = false;      // the compiler had e4m3 mma.sync (fast-mode kernels exist)
  bool sm90a = false;         // the sm_90 code is sm_90a: the wgmma kernel exists
  // The portable kernel's variants as cuda/sm80/config.h reads a build.
  cuda::sm80::VariantBuild variants() const {
    return {archs.data(), static_cast<int>(archs.size()), all_variants, e4m3_mma};
  }
};
// This binary's description (build_config.h).
BuildDescription this_build();

// The two CUDA kernel families: the portable mma.sync kernel (src/cuda/sm80, sm_80..sm_120)
// and the sm_90a wgmma kernel (src/cuda/sm90).
enum class KernelFamily : int32_t { kNone = 0, kCpuReference, kCpu, kMma, kWgmma };

// One compiled CUDA kernel, as the occupancy query names it.
struct KernelKey {
  KernelFamily family = KernelFamily::kMma;
  cuda::sm80::VariantId variant = cuda::sm80::VariantId::kNone;  // kMma only
  DType dtype = DType::kBF16;
  cuda::KvMode mode = cuda::KvMode::k16;
};

// The GPU a plan is for: what the runtime reports (DeviceInfo: SM version, the architecture of
// the code this binary runs there, SMs, shared memory, bandwidth) and what it answers of our
// kernels there.
struct DeviceDescription {
  DeviceInfo info;
  bool tma_maps = false;  // the driver encodes TMA tensor maps (cuda/sm90/kv_tensor_map.h)
  // CTAs of `key` one SM runs at once, 0 when it cannot run (the runtime's occupancy query on
  // a GPU; a model in the CPU tests).
  std::function<int(const KernelKey&)> ctas_per_sm;
};

// Where the call would run: this build, and the CUDA device the options name (or the current
// one), or none with the reason.
struct Machine {
  BuildDescription build;
  const DeviceDescription* device = nullptr;  // null: no usable GPU
  StatusCode no_device_code = StatusCode::kUnsupported;
  std::string no_device = "";  // why device is null: "this build has no CUDA backend ...", ...
};

// What runs, and everything explain() and run() need to know of it.
struct KernelChoice {
  Backend backend = Backend::kAuto;
  KernelFamily family = KernelFamily::kNone;
  Precision precision = Precision::kExact;  // what the kernel computes
  DType dtype = DType::kBF16;
  KvFormat kv_format = KvFormat::kSameAsQ;
  // CUDA only.
  int config_arch = 0;  // the tile table's SM version
  cuda::sm80::VariantId variant = cuda::sm80::VariantId::kNone;  // kMma: the table's entry
  int rows_per_cta = 0, tile_tokens = 0, ctas_per_sm = 0;
  bool bulk = false, halves = false;  // the variant's copies and main loop (sm80/config.h)
  bool pair = false;  // two CTAs of a cluster a row block (the pair variant)
  cuda::KvMode mode = cuda::KvMode::k16;
  bool tma = false;                   // kWgmma: whole tiles by TMA tensor copies
  bool programmatic_combine = false;  // the combine launches programmatically (sm_90+ code)
  SplitSchedule schedule;
  SplitCosts costs;         // the schedule's cost model for this kernel on this device
  int concurrent_ctas = 0;  // SMs x ctas_per_sm
  // Why (explain() assembles the reason line from these).
  std::string where;        // "device 0 'NVIDIA H200' (sm_90)", or the CPU backend's why
  int code_arch = 0;        // the architecture of the code the device runs
  std::string why_rows;     // why this many rows a CTA
  std::string why_family;   // on sm_90: why this family
  std::string why_copies;   // how the tiles reach shared memory, where not plain cp.async
  std::string why_precision;  // e4m3: the products, and why exact when fast was asked
  std::string why_not_fast;   // fast asked and exact runs: why (empty otherwise)

  std::string name() const;     // Plan::kernel, e.g. "mma/bf16/r64-s3-t16/sm120-table"
  std::string explain() const;  // Plan::reason: one line
  // The reason without the schedule: where it runs, its tiles, copies and products.
  std::string explain_kernel() const;
};

// "r<rows>-s<stages>[-t<tokens>][-bulk][-c<ctas>][-k<kgroups>][-w<warps>]": a portable
// variant's name, in code, CLI and docs (kernel_names.cpp, as the rest of this block).
std::string variant_name(cuda::sm80::VariantId v);
// The variant of that name (kNone if none), and every variant's name, for an error message.
cuda::sm80::VariantId variant_by_name(const std::string& name);
std::string variant_names();
// "r<rows>-t<tokens>": the wgmma kernel's tile.
std::string wgmma_name();

// The choice for a problem validate_problem() accepted (summary is its result). Errors: the
// options' and tuning's contract (kInvalidArgument), no device for a CUDA backend asked
// (machine.no_device_code), a device or a forced table this build cannot run (kUnsupported,
// naming the device, its capability and the compiled list).
// fixed_variant: the table's variant (or the wgmma kernel) whatever the lengths, never a
// smaller one that the schedule would model faster (graph plans, whose lengths change).
Status select_kernel(const VerifyProblem& problem, const ProblemSummary& summary,
                     const PlanOptions& options, const PlanTuning& tuning, const Machine& machine,
                     KernelChoice* choice, bool fixed_variant = false);

// Whether `device` can run every entry of the sm_<config_arch> tile table when it is forced
// (PlanTuning::config_arch): this build compiled them into the code it runs and their shared
// memory fits. kUnsupported with the reason select_kernel would give.
Status config_runnable(int config_arch, const DeviceDescription& device,
                       const BuildDescription& build);

// A GPU of SM version `sm` running `build`'s code for it, as far as the selection function
// needs to know without one: the code of the newest built architecture not above `sm`, the
// shared memory a block may have there, one CTA an SM of every kernel that fits, and TMA
// tensor maps on sm_90 and newer.
DeviceDescription described_device(int sm, const BuildDescription& build);

// What a request of `rows` query rows runs on `machine`: the choice for one request of `rows`
// tree nodes (a chain) of one head over a 65536-token prefix, on a 16-bit or an e4m3 cache with
// `precision`, the CUDA backend asked. How doctor and kernels_by_arch ask about a request size.
Status select_for_rows(int rows, KvFormat kv_format, Precision precision, const PlanTuning& tuning,
                       const Machine& machine, KernelChoice* choice);

// What a GPU of each compiled architecture runs (system.h, ArchKernels): the selection
// function's answer on described_device for requests of 16, 32 and 64 rows (rows a CTA forced
// to the table's entries) and for 16 rows on an e4m3 cache.
std::vector<ArchKernels> kernels_by_arch(const BuildDescription& build);

}  // namespace treeverify::detail
