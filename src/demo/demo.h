// The lossless speculative-decoding demo (issue 4 item 4): a tiny MLA decoder (model.h)
// decodes greedily in three ways and the tokens must be identical:
//   speculative  the drafter (the target with perturbed weights) proposes per-depth top-K,
//                build_tree makes a DDTree, the target verifies every node in one pass
//                through treeverify (each layer: the nodes' KV written after the committed
//                prefix, then plan/run), verify_greedy accepts a path, and commit_kv_paged
//                (page_size > 1, commit_kv_paged_cuda on cuda-mma) or commit_slots
//                (page_size 1) makes the accepted rows the next prefix;
//   greedy       plain decoding, one token per step, through treeverify with T = 1;
//   dense        plain decoding with the dense float64 attention (kv_store.h), optional.
// Used by tests/cpu/test_demo.cpp and `treeverify demo`.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "demo/model.h"
#include "treeverify/status.h"
#include "treeverify/verify.h"

namespace treeverify::demo {

struct StepReport {
  int32_t step = 0;              // 1-based
  int32_t tree_size = 0;         // nodes verified, root included
  int32_t emitted = 0;           // tokens this step: accepted drafts + the bonus token
  int32_t total = 0;             // tokens generated so far
  double acceptance_length = 0;  // mean emitted per step so far
};

struct DemoOptions {
  Backend backend = Backend::kCpuFast;  // of every verify call (drafter, target, greedy)
  int32_t tokens = 64;                  // tokens to generate after the prompt
  int32_t prompt_len = 8;               // random prompt tokens
  int32_t page_size = 16;               // a power of two in [1, 128]
  int32_t budget = 16;                  // DDTree node budget, root included
  int32_t draft_depth = 6;              // L: drafted depths per step
  int32_t draft_top_k = 4;              // K: candidates per depth
  uint64_t seed = 1;                    // weights, prompt, drafter noise and page shuffles
  float draft_noise = 0.1f;             // drafter = target + noise * init-scaled N(0, 1)
  bool check_dense = true;              // also decode with the dense float64 attention
  // CPU backends: round softmax probabilities to the 16-bit type before P.V as the GPU kernel
  // does, to rehearse the GPU's numerics (PlanOptions::round_p).
  bool round_p = false;
  ModelConfig model;
  std::function<void(const StepReport&)> on_step;  // progress, may be empty
};

struct DemoReport {
  std::vector<int32_t> prompt;
  std::vector<int32_t> speculative, greedy, dense;  // generated tokens (dense: if checked)
  int32_t steps = 0;                                // speculative steps (target passes)
  double acceptance_length = 0;                     // tokens per speculative step
  std::string backend;  // backend and kernel of the target's verify calls
  // Equality: speculative == greedy, and greedy == dense when checked.
  bool greedy_equal = false, dense_equal = false, passed = false;
  // Where the first disagreement is (index into the generated tokens, -1 if none), and the
  // greedy path's top-1 minus top-2 logit there: a tiny margin means a near-tie flipped by
  // rounding, a large one a real bug.
  int32_t first_mismatch = -1;
  double mismatch_margin = 0;
  // Largest |logit difference| between the paths at the positions where they agree, and the
  // smallest top-1 minus top-2 margin of greedy decoding: how close any flip came.
  double max_logit_diff = 0, max_logit_diff_dense = 0, min_margin = 0;
};

Status run_demo(const DemoOptions& options, DemoReport* report);

}  // namespace treeverify::demo
