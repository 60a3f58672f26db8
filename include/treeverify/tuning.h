// Tuning overrides for tests and benchmarks: they change which tile table, kernel variant,
// chunk length or copy engine a CUDA plan takes, never its results. A user leaves them alone:
// plan() without them picks what measured fastest. The CLI's tuning flags (--config-arch,
// --rows-per-cta, --pair-ctas, --variant, --chunk-tokens, --no-tma, --force-tma) set them.
#pragma once

#include <string>

#include "treeverify/status.h"
#include "treeverify/verify.h"

namespace treeverify {

struct PlanTuning {
  // Run the tile table of another SM version (e.g. 120 on an H200), so that the code that
  // ships for it is executed and timed here; the portable kernel then runs, never the wgmma
  // one. Needs a build with every variant (TREEVERIFY_ALL_VARIANTS). 0: the device's own.
  int config_arch = 0;
  // Split every request's KV sequence into chunks of this many tokens (a multiple of the
  // kernel's KV tile). 0: the split schedule's choice.
  int chunk_tokens = 0;
  // Run the variant with this many query rows a CTA (16, 32 or 64). 0: the tile table's entry
  // for the largest request (or fewer rows, where the schedule says so).
  int rows_per_cta = 0;
  // Requests of more than 32 rows on a 16-bit cache: run each 64-row block as a pair of CTAs
  // of one cluster, each over half of every KV row (the portable kernel's r64-s3-c2 variant,
  // docs/kernels/portable-mma.md). sm_90+ devices, builds with every variant; no table takes
  // it yet (slower than r64-s3-t16 under the sm_120 table on an H100).
  bool pair_ctas = false;
  // Run this variant of the portable kernel for every request, by the name a plan's kernel
  // shows (r64-s3-t16, r64-s2-k2, ...), in place of the table's choice: for variants no table
  // selects yet (r64-s2-k2, r64-s3-t16-w16: docs/kernels/portable-mma.md) and to time
  // one table's variant beside another. 16-bit caches and e4m3 exact mode, where the variant
  // has that kernel; builds with every variant. Empty: the table's.
  std::string variant = {};
  // The wgmma kernel: copy every KV tile with cp.async, never whole tiles by TMA tensor copies
  // (which plans take for pages of 64 rows or more: e4m3 caches always, 16-bit ones for
  // requests of more than 128 rows). The same results bit for bit.
  bool disable_tma = false;
  // ... or take TMA copies wherever they can run (pages of 64 rows or more), also for 16-bit
  // requests of 128 rows or fewer, where they measured slower. Not with disable_tma.
  bool force_tma = false;
};

// plan() and supports() with tuning overrides.
Status plan(const VerifyProblem& problem, const PlanOptions& options, const PlanTuning& tuning,
            Plan* plan);
Status supports(const VerifyProblem& problem, const PlanOptions& options,
                const PlanTuning& tuning);

}  // namespace treeverify
