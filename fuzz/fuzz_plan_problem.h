// fuzz_plan's problem decoder (fuzz_plan.cpp says what the target feeds and asserts): a
// VerifyProblem, PlanOptions and the run() flags from the input, and verify.h's contract on a
// problem written out independently of src/core/validate.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "treeverify/treeverify.h"

namespace tvfuzz::plan {

// What decode_problem reads from the input, in that order, before run()'s values.
struct PlanInput {
  treeverify::VerifyProblem prob;  // its five arrays point into the Bufs below (or are null)
  treeverify::PlanOptions opt;
  bool use_verify_cpu = false, lse_null = false;
  // The layouts of q and out (Layout), which fuzz_plan_run.cpp pads and poisons accordingly.
  enum Layout { kContiguous, kBothStrides, kHeadStrideOnly, kTokenStrideOnly };
  Layout q_layout = kContiguous, out_layout = kContiguous;
  int bad_variant = 0;  // 0: valid tensors; 1..13: the invalid-tensors variant run() gets
  bool huge = false;    // one request's kv_len near 2^31 over a sparse page table
  // The index arrays as decoded: a valid batch, then damaged, then grown to the length the
  // contract makes a caller provide.
  std::vector<int32_t> qo, kv_len, kpi, kpidx, parents;
  // Exact-size heap copies of them (ASan sees a read one past the end).
  Buf<int32_t> qo_buf, kv_len_buf, kpi_buf, kpidx_buf, parents_buf;
};

// Decodes the problem part of the input into *d. False when the input is skipped (a valid page
// table too large to allocate).
bool decode_problem(Input& in, PlanInput* d);

// verify.h's contract, written out independently of src/core/validate.cpp.
bool problem_is_valid(const treeverify::VerifyProblem& p);

// Every field of a Plan, so that "unchanged" can be checked whole.
std::string fingerprint(const treeverify::Plan& p);

// A Plan with every field set to a value plan() never writes.
treeverify::Plan sentinel_plan();

}  // namespace tvfuzz::plan
