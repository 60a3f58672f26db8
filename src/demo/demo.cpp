// run_demo: speculative decoding with DDTree trees through treeverify, against plain greedy.
//
// Why the token check is exact and when it could fail. The model's host math (model.cpp) is
// deterministic and shared by every path, so two paths can differ only through the attention
// outputs, which the verify call rounds to bf16. With cpu-reference (float64, rows summed in
// sequence order, which is the same order for a tree node and for plain decoding of its path)
// and the dense float64 loop, the values before rounding agree to ~1e-16 relative, so the bf16
// outputs, and from them every hidden state, KV row and logit, are bit-identical: the tokens
// then agree for any logits, exact ties included (argmax takes the lowest id). With the fp32
// backends (cpu, cuda) the reduction order depends on the prefix length and on where
// the tree rows sit, so an output can differ by one bf16 ulp and a logit by ~1e-4; an argmax
// flips only if greedy's top-2 margin is below that. Rather than hide such a flip behind a
// tolerance, the demo requires exact equality and reports, with the verdict, the largest logit
// difference between the paths and greedy's smallest margin (and the margin at a mismatch), so
// a near-tie flip (margin ~ difference ~ 1e-4) is told apart from a real bug (a wrong position,
// mask or commit moves logits by O(1)).
//
// An e4m3 cache changes none of this: every store quantizes the same 16-bit rows with the same
// per-layer scale, so the paths attend to the same dequantized values, and the oracle and the
// dense loop dequantize them alike. Precision fast on cpu-reference with round_p rounds each Q
// row with its own amax and P against its row's maximum; a tree node's row and its plain-decode
// twin see the same values, so the rounding agrees too and speculative == greedy stays bit-exact.
// The GPU's fast kernels round P against running maxima that depend on where their tiles fall,
// so there the paths differ by rounding as on the fp32 backends, in e4m3's coarser steps. Dense
// rounds neither Q nor P, so against fast it is a distance, not a check (dense_required).
#include "demo/demo.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <random>

#include "core/check.h"
#include "core/fp8_rounding.h"
#include "demo/kv_store.h"
#include "treeverify/ddtree.h"

namespace treeverify::demo {
namespace {

// Seeds of the independent random streams derived from options.seed.
constexpr uint64_t kDrafterSalt = 0x9e3779b97f4a7c15ull;
constexpr uint64_t kPromptSalt = 0x2545f4914f6cdd1dull;

int32_t argmax(const float* row, int32_t n) {
  return static_cast<int32_t>(std::max_element(row, row + n) - row);  // first max: lowest id
}

double top2_margin(const float* row, int32_t n) {
  float a = -INFINITY, b = -INFINITY;
  for (int32_t i = 0; i < n; ++i) {
    if (row[i] > a) {
      b = a;
      a = row[i];
    } else if (row[i] > b) {
      b = row[i];
    }
  }
  return static_cast<double>(a) - b;
}

// A pass over `tokens` as a chain after the store's prefix, every node kept: prefill, plain
// decode (one token) and the drafter's catch-up all use it.
Status chain_pass(const Weights& w, KvStore* store, std::span<const int32_t> tokens,
                  std::vector<float>* logits) {
  std::vector<int32_t> parents(tokens.size()), path(tokens.size());
  std::iota(parents.begin(), parents.end(), -1);
  std::iota(path.begin(), path.end(), 0);
  TV_RETURN_IF_ERROR(forward(w, store, tokens, parents, logits));
  return store->commit(path);
}

// The drafter's per-depth top-K: it catches up on the committed tokens it has not seen, then
// runs greedily along its own top-1 chain for `depth` tokens, and rolls its draft back.
Status draft(const Weights& w, KvStore* store, const std::vector<int32_t>& seq, int32_t depth,
             int32_t top_k, std::vector<float>* log_probs, std::vector<int32_t>* ids) {
  const int32_t vocab = w.config.vocab, committed = static_cast<int32_t>(seq.size());
  std::vector<float> logits;
  std::vector<int32_t> order(vocab);
  log_probs->clear();
  ids->clear();
  std::vector<int32_t> next(seq.begin() + store->length(), seq.end());
  for (int32_t d = 0; d < depth; ++d) {
    TV_RETURN_IF_ERROR(chain_pass(w, store, next, &logits));
    const float* row = logits.data() + (next.size() - 1) * vocab;
    const float m = *std::max_element(row, row + vocab);
    double sum = 0.0;
    for (int32_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v]) - m);
    const double log_z = m + std::log(sum);
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + top_k, order.end(), [&](int32_t a, int32_t b) {
      return row[a] > row[b] || (row[a] == row[b] && a < b);
    });
    for (int32_t k = 0; k < top_k; ++k) {
      ids->push_back(order[k]);
      log_probs->push_back(static_cast<float>(std::min(0.0, row[order[k]] - log_z)));
    }
    next = {order[0]};
  }
  return store->truncate(std::min(committed, store->length()));
}

// Plain greedy decoding of `count` tokens after `prompt`; logits [count, vocab] of each step.
Status greedy_decode(const Weights& w, KvStore* store, const std::vector<int32_t>& prompt,
                     int32_t count, std::vector<int32_t>* out, std::vector<float>* rows) {
  const int32_t vocab = w.config.vocab;
  std::vector<float> logits;
  std::vector<int32_t> seq = prompt;
  TV_RETURN_IF_ERROR(chain_pass(w, store, std::span(seq).first(seq.size() - 1), &logits));
  for (int32_t i = 0; i < count; ++i) {
    TV_RETURN_IF_ERROR(chain_pass(w, store, std::span(seq).last(1), &logits));
    seq.push_back(argmax(logits.data(), vocab));
    rows->insert(rows->end(), logits.begin(), logits.end());
  }
  out->assign(seq.begin() + prompt.size(), seq.end());
  return Status::Ok();
}

// The first index where a and b differ (-1 if none) and the largest logit difference before it.
int32_t compare(const std::vector<int32_t>& a, const std::vector<float>& rows_a,
                const std::vector<int32_t>& b, const std::vector<float>& rows_b, int32_t vocab,
                double* max_diff) {
  int32_t mismatch = -1;
  *max_diff = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    for (int32_t v = 0; v < vocab; ++v) {
      *max_diff = std::max(
          *max_diff, static_cast<double>(std::fabs(rows_a[i * vocab + v] - rows_b[i * vocab + v])));
    }
    if (a[i] != b[i]) {
      mismatch = static_cast<int32_t>(i);
      break;
    }
  }
  if (mismatch < 0 && a.size() != b.size())
    mismatch = static_cast<int32_t>(std::min(a.size(), b.size()));
  return mismatch;
}

// The e4m3 scale of each layer of a model: a fixed one, chosen before decoding. An engine takes
// amax / 448 over a layer's values, but here they appear token by token, so the scale comes
// from a bound on every value the model can write (kv_value_bound): no value can saturate,
// and since e4m3's relative step is the same across its normal range, the unused headroom
// costs nothing but the few values that fall below the normals (|v| < 2^-6 kv_scale).
std::vector<float> layer_kv_scales(const Weights& w, float override_scale) {
  std::vector<float> s = kv_value_bound(w);
  for (float& x : s) x = override_scale > 0.f ? override_scale : x / cuda::kE4M3Max;
  return s;
}

// Bounds of a demo run (it is a tiny model decoding on the CPU or one GPU).
constexpr int32_t kMaxLayers = 64;
constexpr int32_t kMaxVocab = 1 << 20;
constexpr int64_t kMaxSequence = 1 << 20;

}  // namespace

Status run_demo(const DemoOptions& o, DemoReport* report) {
  const ModelConfig& mc = o.model;
  TV_REQUIRE(o.tokens >= 1, "tokens", "{}", o.tokens);
  TV_REQUIRE(o.prompt_len >= 1 && o.prompt_len <= kMaxTreeSize, "prompt_len", "{}", o.prompt_len);
  TV_REQUIRE(o.draft_top_k >= 1 && o.draft_top_k <= mc.vocab, "draft_top_k", "{} (vocab {})",
             o.draft_top_k, mc.vocab);
  TV_REQUIRE(o.draft_depth >= 0 && o.draft_depth <= kMaxTreeSize, "draft_depth", "{}",
             o.draft_depth);
  TV_REQUIRE(o.budget >= 1 && o.budget <= kMaxTreeSize, "budget", "{}; expected 1 to {}",
             o.budget, kMaxTreeSize);
  TV_REQUIRE(is_valid_page_size(o.page_size), "page_size", "{}; expected a power of two in "
             "[1, {}]", o.page_size, kMaxPageSize);
  TV_REQUIRE(mc.layers >= 1 && mc.layers <= kMaxLayers, "layers", "{}; expected 1 to {}",
             mc.layers, kMaxLayers);
  TV_REQUIRE(mc.heads >= 1 && mc.heads <= kMaxHeads, "heads", "{}; expected 1 to {}", mc.heads,
             kMaxHeads);
  TV_REQUIRE(mc.vocab >= 2 && mc.vocab <= kMaxVocab, "vocab", "{}; expected 2 to {}", mc.vocab,
             kMaxVocab);
  TV_REQUIRE(o.kv_format == KvFormat::kSameAsQ || o.kv_format == KvFormat::kE4M3, "kv_format",
             "unknown value {}", static_cast<int>(o.kv_format));
  TV_REQUIRE(o.precision == Precision::kExact || o.kv_format == KvFormat::kE4M3, "precision",
             "fast needs an e4m3 KV cache (kv_format), not {}", kv_format_name(o.kv_format));
  TV_REQUIRE(std::isfinite(o.kv_scale) && o.kv_scale >= 0.f, "kv_scale",
             "{}; expected 0 (from the weights) or a positive scale", o.kv_scale);
  // The KV stores hold the prompt, every generated token and one step's tree.
  TV_REQUIRE(int64_t{o.prompt_len} + o.tokens + o.budget + o.draft_depth <= kMaxSequence,
             "tokens", "{} after a {}-token prompt: the demo holds at most {} tokens", o.tokens,
             o.prompt_len, kMaxSequence);
  DemoReport r;
  const Weights target = make_weights(mc, o.seed);
  const Weights drafter = perturb(target, o.draft_noise, o.seed ^ kDrafterSalt);
  std::mt19937_64 rng(o.seed ^ kPromptSalt);
  for (int32_t i = 0; i < o.prompt_len; ++i)
    r.prompt.push_back(static_cast<int32_t>(rng() % mc.vocab));

  const bool e4m3 = o.kv_format == KvFormat::kE4M3;
  StoreOptions so{.layers = mc.layers,
                  .heads = mc.heads,
                  .softmax_scale = softmax_scale(mc),
                  .dtype = mc.dtype,
                  .kv_format = o.kv_format,
                  .kv_scale = e4m3 ? layer_kv_scales(target, o.kv_scale) : std::vector<float>{},
                  .page_size = o.page_size,
                  .capacity = o.prompt_len + o.tokens + std::max(o.budget, o.draft_depth) + 1,
                  .seed = o.seed,
                  .plan = {}};
  so.plan.backend = o.backend;
  so.plan.round_p = o.round_p;
  so.plan.precision = o.precision;
  r.kv_scale = so.kv_scale;
  // The drafter's cache has the target's format and precision but its own weights' scale.
  StoreOptions draft_so = so;
  draft_so.seed = o.seed + 1;
  if (e4m3) draft_so.kv_scale = layer_kv_scales(drafter, o.kv_scale);
  std::unique_ptr<KvStore> spec, draft_store, plain;
  TV_RETURN_IF_ERROR(make_paged_store(so, &spec));
  TV_RETURN_IF_ERROR(make_paged_store(draft_so, &draft_store));
  so.seed = o.seed + 2;
  TV_RETURN_IF_ERROR(make_paged_store(so, &plain));

  // Speculative decoding. The target's cache holds every committed token but the last, which
  // is the root of the next tree (the previous step's bonus token).
  const int32_t vocab = mc.vocab;
  std::vector<int32_t> seq = r.prompt;
  std::vector<float> logits, spec_rows, lp;
  std::vector<int32_t> ids;
  TV_RETURN_IF_ERROR(chain_pass(target, spec.get(), std::span(seq).first(seq.size() - 1), &logits));
  while (static_cast<int32_t>(r.speculative.size()) < o.tokens) {
    TV_RETURN_IF_ERROR(
        draft(drafter, draft_store.get(), seq, o.draft_depth, o.draft_top_k, &lp, &ids));
    DraftTree tree;
    const DraftTopK topk{.depth = o.draft_depth,
                         .top_k = o.draft_top_k,
                         .log_probs = lp,
                         .token_ids = ids,
                         .root_token = seq.back()};
    TV_RETURN_IF_ERROR(build_tree(topk, o.budget, &tree));
    TV_RETURN_IF_ERROR(forward(target, spec.get(), tree.tokens, tree.parents, &logits));
    const int32_t t = static_cast<int32_t>(tree.tokens.size());
    std::vector<int32_t> best(t);
    for (int32_t i = 0; i < t; ++i)
      best[i] = argmax(&logits[static_cast<size_t>(i) * vocab], vocab);
    AcceptedPaths acc;
    const int32_t qo[2] = {0, t};
    TV_RETURN_IF_ERROR(verify_greedy(qo, tree.parents, tree.tokens, best, &acc));
    TV_RETURN_IF_ERROR(spec->commit(acc.nodes));
    // Emitted token k was predicted at path node k: the next path node's token, then the bonus.
    const int32_t emitted = static_cast<int32_t>(acc.nodes.size());
    for (int32_t k = 0; k < emitted; ++k) {
      const int32_t node = acc.nodes[k];
      const int32_t token = k + 1 < emitted ? tree.tokens[acc.nodes[k + 1]] : acc.bonus_tokens[0];
      seq.push_back(token);
      r.speculative.push_back(token);
      spec_rows.insert(spec_rows.end(), logits.begin() + static_cast<size_t>(node) * vocab,
                       logits.begin() + static_cast<size_t>(node + 1) * vocab);
    }
    ++r.steps;
    if (o.on_step) {
      o.on_step({.step = r.steps,
                 .tree_size = t,
                 .emitted = emitted,
                 .total = static_cast<int32_t>(r.speculative.size()),
                 .acceptance_length = static_cast<double>(r.speculative.size()) / r.steps});
    }
  }
  r.acceptance_length = static_cast<double>(r.speculative.size()) / r.steps;
  r.speculative.resize(o.tokens);  // the last step may overshoot
  spec_rows.resize(static_cast<size_t>(o.tokens) * vocab);
  r.backend = spec->describe();

  std::vector<float> greedy_rows, dense_rows;
  TV_RETURN_IF_ERROR(
      greedy_decode(target, plain.get(), r.prompt, o.tokens, &r.greedy, &greedy_rows));
  r.first_mismatch =
      compare(r.speculative, spec_rows, r.greedy, greedy_rows, vocab, &r.max_logit_diff);
  r.greedy_equal = r.first_mismatch < 0;
  r.kv_peak = std::max(spec->kv_peak(), plain->kv_peak());
  r.dense_equal = true;
  r.dense_required = spec->precision() == Precision::kExact;
  if (o.check_dense) {
    so.seed = o.seed + 3;
    const auto dense = make_dense_store(so);
    TV_RETURN_IF_ERROR(
        greedy_decode(target, dense.get(), r.prompt, o.tokens, &r.dense, &dense_rows));
    const int32_t m =
        compare(r.greedy, greedy_rows, r.dense, dense_rows, vocab, &r.max_logit_diff_dense);
    r.dense_equal = m < 0;
    if (r.first_mismatch < 0 && r.dense_required) r.first_mismatch = m;
  }
  r.min_margin = INFINITY;
  for (int32_t i = 0; i < o.tokens; ++i) {
    r.min_margin =
        std::min(r.min_margin, top2_margin(&greedy_rows[static_cast<size_t>(i) * vocab], vocab));
  }
  if (r.first_mismatch >= 0) {
    r.mismatch_margin =
        top2_margin(&greedy_rows[static_cast<size_t>(r.first_mismatch) * vocab], vocab);
  }
  r.passed = r.greedy_equal && (r.dense_equal || !r.dense_required);
  *report = std::move(r);
  return Status::Ok();
}

}  // namespace treeverify::demo
