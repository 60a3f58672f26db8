// The CPU backends behind the dispatch point. Host pointers only; inputs already validated.
#pragma once

#include <vector>

#include "core/fp8_rounding.h"
#include "treeverify/graph.h"
#include "treeverify/merge.h"
#include "treeverify/verify.h"

namespace treeverify::detail {

// Exact attention in float64 (docs/DESIGN.md section 7): out [total_q, H, 512] and natural-log lse
// [total_q, H], for tests and `treeverify check` to compare any backend against. With round_p,
// probabilities are rounded to the type the GPU kernels' P.V takes (p_round_dtype); with round_p
// and plan.precision kFast (e4m3 caches), Q and P are rounded to e4m3 as the fast kernels
// round them instead (core/fp8_rounding.h).
struct ReferenceResult {
  std::vector<double> out;
  std::vector<double> lse;
  // Fast rounding with the kernel's maxima only (else empty), one a row: how far (L2 norm,
  // absolute) the row's out may move when every P code that a float32 kernel could round the
  // other way does (p x 448 within kFastPCodeMargin of the midpoint of two e4m3 values): the
  // sum over those tokens of the code step x |v| / the row's normaliser. One such code on a
  // heavy token can move a row by 1e-2 where the rest of the row agrees to 1e-3 (on the H200,
  // one row of a 64-request decode batch at 2.1e-2: tests/cuda/fast_check.h).
  std::vector<double> out_slack;
};
// The relative distance of p x 448 from a rounding midpoint inside which the fast kernel's
// code may differ from the oracle's: its scores are float32 sums of 576 products accumulated
// by the tensor cores (which truncate), its exp is exp2.approx; the lse they give differs from
// the oracle's by at most 2.6e-5 nats in 118 cases (tests/cuda/fast_check.h), so 1e-4 holds
// every such p with room.
inline constexpr double kFastPCodeMargin = 1e-4;
// The fast kernels round p x 448 after subtracting their online softmax's running max: the
// max of the token's chunk up to the end of its KV tile. Given the GPU plan's chunk and tile
// lengths (PlanState), the oracle with fast rounding subtracts the same maxima, so its P codes
// are the kernel's (up to float rounding of the max); without them it subtracts the row's max,
// and its P matches the kernel's in the size of its error only.
// With them goes the number of e4m3 terms the kernel holds Q in (fast_q_terms).
struct FastRounding {
  int32_t chunk_tokens = 0;  // 0: one chunk
  int32_t tile_tokens = 0;   // 0: the row's max
  // The out_slack's margin (kFastPCodeMargin for fp32 scores; wider for a kernel whose scores
  // carry larger errors: testing::tolerance_for).
  double p_code_margin = kFastPCodeMargin;
  int q_terms = kFastQTerms;  // 2: the mma.sync kernels' hi + lo; 1: the sm_90a wgmma kernel's
};
// The rounding of `plan`'s fast kernel: its chunk and tile lengths, its number of Q terms, and
// the given margin (testing::tolerance_for(plan).p_code_margin).
inline FastRounding fast_rounding_of(const Plan& plan, double p_code_margin) {
  return {.chunk_tokens = plan.state.chunk_tokens,
          .tile_tokens = plan.state.tile_tokens,
          .p_code_margin = p_code_margin,
          .q_terms = fast_q_terms(plan)};
}
Status reference_attention(const Plan& plan, const VerifyTensors& tensors, bool round_p,
                           ReferenceResult* result, FastRounding rounding = {});

// Backend kCpuReference: reference_attention rounded into out (dtype) and lse (fp32).
Status cpu_reference_run(const Plan& plan, const VerifyTensors& tensors);
// Backend kCpu: float32, multithreaded over requests, row blocks and KV splits, tile
// products through BLAS, on cpu_threads(plan.options.num_threads) threads.
Status cpu_fast_run(const Plan& plan, const VerifyTensors& tensors);

// The one bound on CPU threads (PlanOptions::num_threads): the hardware threads this process
// may run on (its CPU affinity; std::thread::hardware_concurrency() where that is unknown; at
// least 1) for 0 and for any larger request, else `requested`. More threads than that only add
// work items (the schedule cuts the KV into a few items per thread), their partial results and
// thread stacks, and could not run at once anyway. requested >= 0 (plan() refuses a negative
// count).
int cpu_threads(int requested);

// A graph plan on a CPU backend (treeverify/graph.h; host pointers and a host workspace):
// the step's metadata checked and clamped into the workspace, and one layer run on it.
void cpu_graph_prepare(const GraphPlan& plan, const GraphStep& step, void* workspace);
Status cpu_graph_run(const GraphPlan& plan, const GraphLayer& layer, void* workspace);

}  // namespace treeverify::detail
