// fuzz_plan's run-and-check on the CPU backends (fuzz_plan.cpp says what the target feeds and
// asserts): q and the KV cache from the input, run() or verify_cpu() on a planned problem, its
// invalid-tensors variants, and what the call writes, leaves alone and reads.
#pragma once

#include "fuzz_common.h"
#include "fuzz_plan_problem.h"
#include "treeverify/treeverify.h"

namespace tvfuzz::plan {

// Reads run()'s values from the rest of the input and checks one call on the planned problem
// (and, when d.bad_variant says so, one call with invalid tensors first). p: what plan() made of
// d.prob and d.opt; the problem is small enough to run (fuzz_plan.cpp's limits).
void check_run(Input& in, const PlanInput& d, const treeverify::Plan& p);

}  // namespace tvfuzz::plan
