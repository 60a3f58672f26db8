// The lossless speculative-decoding demo (issue 4 item 4): a tiny MLA decoder (model.h)
// decodes greedily in three ways and the tokens must be identical:
//   speculative  the drafter (the target with perturbed weights) proposes per-depth top-K,
//                build_tree makes a DDTree, the target verifies every node in one pass
//                through treeverify (each layer: the nodes' KV written after the committed
//                prefix, then plan/run), verify_greedy accepts a path, and commit_kv_paged
//                (page_size > 1, commit_kv_paged_cuda on cuda) or commit_slots
//                (page_size 1) makes the accepted rows the next prefix;
//   greedy       plain decoding, one token per step, through treeverify with T = 1;
//   dense        plain decoding with the dense float64 attention (kv_store.h), optional.
// The KV cache is 16-bit or e4m3 (kv_format), the same for all three paths and the drafter; an
// e4m3 cache gets a fixed kv_scale a layer from a bound on the model's KV values.
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
  Backend backend = Backend::kCpu;  // of every verify call (drafter, target, greedy)
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
  // does, to rehearse the GPU's numerics (PlanOptions::round_p). With cpu-reference and
  // precision fast, Q and P are rounded to e4m3 as the fast kernels round them instead.
  bool round_p = false;
  // The KV cache of every store: the 16-bit dtype, or e4m3 with one kv_scale a layer.
  KvFormat kv_format = KvFormat::kSameAsQ;
  // e4m3 only: the products of every verify call (PlanOptions::precision); fast with a 16-bit
  // cache is an error.
  Precision precision = Precision::kExact;
  // e4m3: kv_scale of every layer; 0 means each model's own, bound / 448 (kv_value_bound), so
  // no value can saturate. A value past 448 x kv_scale is an error either way.
  float kv_scale = 0.f;
  ModelConfig model;
  std::function<void(const StepReport&)> on_step;  // progress, may be empty
};

struct DemoReport {
  std::vector<int32_t> prompt;
  std::vector<int32_t> speculative, greedy, dense;  // generated tokens (dense: if checked)
  int32_t steps = 0;                                // speculative steps (target passes)
  double acceptance_length = 0;                     // tokens per speculative step
  std::string backend;  // backend, kernel, KV format and precision of the target's verify calls
  // e4m3: the target's kv_scale per layer, and the largest |value| / kv_scale it stored (at
  // most 448: how much of e4m3's range the scale leaves unused).
  std::vector<float> kv_scale;
  float kv_peak = 0.f;
  // Equality: speculative == greedy, and greedy == dense when checked and dense_required.
  bool greedy_equal = false, dense_equal = false, passed = false;
  // Whether dense computes the same attention as the verify calls (up to float64): not when
  // they round Q and P as precision fast does (KvStore::precision); then dense_equal and
  // max_logit_diff_dense only say how far fast moved the tokens and logits from exact.
  bool dense_required = true;
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
