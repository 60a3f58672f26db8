// The CPU backends behind the dispatch point. Host pointers only; inputs already validated.
#pragma once

#include <vector>

#include "treeverify/merge.h"
#include "treeverify/verify.h"

namespace treeverify::detail {

// Exact attention in float64 (docs/DESIGN.md section 7): out [total_q, H, 512] and natural-log lse
// [total_q, H], for tests and `treeverify check` to compare any backend against. With round_p,
// probabilities are rounded to the input dtype before P.V, like the GPU kernels; with round_p
// and plan.precision kFast (e4m3 caches), Q and P are rounded to e4m3 as the fast kernels
// round them instead (core/fp8_rounding.h).
struct ReferenceResult {
  std::vector<double> out;
  std::vector<double> lse;
};
Status reference_attention(const Plan& plan, const VerifyTensors& tensors, bool round_p,
                           ReferenceResult* result);

// Backend kCpuReference: reference_attention rounded into out (dtype) and lse (fp32).
Status cpu_reference_run(const Plan& plan, const VerifyTensors& tensors);
// Backend kCpuFast: float32, multithreaded over requests, row blocks and KV splits, tile
// products through BLAS.
Status cpu_fast_run(const Plan& plan, const VerifyTensors& tensors);

}  // namespace treeverify::detail
