// `treeverify demo`: the lossless speculative-decoding demo (src/demo/demo.h) with a progress
// line per step; exit 1 when the tokens differ from plain greedy decoding.
#include "demo/demo.h"

#include <fmt/format.h>

#include <cstdio>
#include <memory>
#include <string>

#include "commands.h"
#include "common.h"

namespace treeverify::cli {
namespace {

struct DemoFlags {
  std::string backend = "cpu";
  std::string dtype = "bf16";
  std::string kv_format = "same";   // "same" (the dtype) or "e4m3"
  std::string precision = "exact";  // e4m3: "exact" or "fast"
  demo::DemoOptions options;
};

std::string head(const std::vector<int32_t>& tokens, size_t n) {
  std::string s;
  for (size_t i = 0; i < std::min(n, tokens.size()); ++i) s += fmt::format("{} ", tokens[i]);
  return s + (tokens.size() > n ? "..." : "");
}

int run_demo_command(DemoFlags flags) {
  demo::DemoOptions& o = flags.options;
  if (Status s = parse_backend(flags.backend, &o.backend); !s.ok()) {
    fmt::print(stderr, "treeverify demo: {}\n", s.to_string());
    return kExitError;
  }
  if (flags.dtype != "bf16" && flags.dtype != "fp16") {
    fmt::print(stderr, "treeverify demo: --dtype must be bf16 or fp16, not '{}'\n", flags.dtype);
    return kExitError;
  }
  o.model.dtype = flags.dtype == "bf16" ? DType::kBF16 : DType::kFP16;
  if (Status s = parse_kv_format(flags.kv_format, &o.kv_format); !s.ok()) {
    fmt::print(stderr, "treeverify demo: {}\n", s.to_string());
    return kExitError;
  }
  if (Status s = parse_precision(flags.precision, &o.precision); !s.ok()) {
    fmt::print(stderr, "treeverify demo: --precision: {}\n", s.to_string());
    return kExitError;
  }
  const demo::ModelConfig& m = o.model;
  fmt::print(
      "model: {} layers, {} heads, hidden {}, vocab {}, KV row 576 (512 latent + 64 rope), "
      "{}, seed {}\n",
      m.layers, m.heads, m.hidden, m.vocab, dtype_name(m.dtype), o.seed);
  fmt::print("KV cache: {}; precision {}{}\n",
             o.kv_format == KvFormat::kE4M3 ? "e4m3, one kv_scale a layer" : dtype_name(m.dtype),
             precision_name(o.precision), o.round_p ? "; round_p" : "");
  fmt::print("drafter: target + {} noise; DDTree depth {}, top-{}, budget {}; page size {}\n",
             o.draft_noise, o.draft_depth, o.draft_top_k, o.budget, o.page_size);
  o.on_step = [](const demo::StepReport& s) {
    fmt::print("step {:4d}  tree {:4d}  accepted {:3d}  tokens {:5d}  acceptance length {:.2f}\n",
               s.step, s.tree_size, s.emitted, s.total, s.acceptance_length);
    std::fflush(stdout);
  };
  demo::DemoReport r;
  if (Status s = demo::run_demo(o, &r); !s.ok()) {
    fmt::print(stderr, "treeverify demo: {}\n", s.to_string());
    return kExitError;
  }
  fmt::print("backend: {}\n", r.backend);
  if (!r.kv_scale.empty()) {
    std::string scales;
    for (float s : r.kv_scale) scales += fmt::format(" {:.4g}", s);
    fmt::print("kv_scale per layer:{} ({}); largest |value| / kv_scale stored {:.3g} of 448\n",
               scales, o.kv_scale > 0 ? "--kv-scale" : "the weights' bound on |KV value| / 448",
               r.kv_peak);
  }
  fmt::print("prompt: {}\n", head(r.prompt, 16));
  fmt::print("output: {}\n", head(r.speculative, 24));
  fmt::print("{} tokens in {} target passes: acceptance length {:.2f} tokens/step\n",
             r.speculative.size(), r.steps, r.acceptance_length);
  fmt::print("speculative == greedy (treeverify, T = 1): {}; max logit difference {:.3g}\n",
             r.greedy_equal ? "yes" : "NO", r.max_logit_diff);
  if (o.check_dense && r.dense_required) {
    fmt::print("greedy == dense float64 attention: {}; max logit difference {:.3g}\n",
               r.dense_equal ? "yes" : "NO", r.max_logit_diff_dense);
  } else if (o.check_dense) {
    // Fast rounds Q and P, dense does not: the gap is fast's own error, not a failure.
    fmt::print(
        "greedy (fast) vs dense float64 attention on the same cache (exact, not "
        "required): tokens {}; max logit difference {:.3g}\n",
        r.dense_equal ? "equal" : "differ", r.max_logit_diff_dense);
  }
  fmt::print("smallest greedy top-1 margin {:.3g}\n", r.min_margin);
  if (!r.passed) {
    fmt::print("first mismatch at generated token {} (greedy top-1 margin there {:.3g}: {})\n",
               r.first_mismatch, r.mismatch_margin,
               r.mismatch_margin < 1e-2 ? "a near-tie flipped by rounding" : "not a near-tie");
  }
  fmt::print("{}\n", r.passed ? "PASS: lossless" : "FAIL");
  return r.passed ? kExitOk : kExitFail;
}

}  // namespace

void add_demo_command(CLI::App* app, int* exit_code) {
  auto flags = std::make_shared<DemoFlags>();
  demo::DemoOptions& o = flags->options;
  CLI::App* cmd = app->add_subcommand(
      "demo",
      "speculative decoding of a tiny MLA model with DDTree trees; exit 1 unless it "
      "reproduces plain greedy decoding exactly");
  cmd->add_option("--backend", flags->backend, "cpu, cpu-reference, cuda or auto")
      ->capture_default_str();
  cmd->add_option("--tokens,--steps", o.tokens, "tokens to generate")->capture_default_str();
  cmd->add_option("--page-size", o.page_size, "KV page size (1: slot lists)")
      ->capture_default_str();
  cmd->add_option("--budget", o.budget, "DDTree node budget, root included")->capture_default_str();
  cmd->add_option("--depth", o.draft_depth, "drafted depths per step")->capture_default_str();
  cmd->add_option("--top-k", o.draft_top_k, "drafter candidates per depth")->capture_default_str();
  cmd->add_option("--seed", o.seed, "weights, prompt and drafter seed")
      ->check(seed_validator())
      ->capture_default_str();
  cmd->add_option("--prompt", o.prompt_len, "random prompt tokens")->capture_default_str();
  cmd->add_option("--draft-noise", o.draft_noise, "drafter weight perturbation")
      ->capture_default_str();
  cmd->add_option("--layers", o.model.layers, "model layers")->capture_default_str();
  cmd->add_option("--heads", o.model.heads, "query heads")->capture_default_str();
  cmd->add_option("--vocab", o.model.vocab, "vocabulary size")->capture_default_str();
  cmd->add_option("--dtype", flags->dtype, "bf16 or fp16 (q, KV cache, attention output)")
      ->capture_default_str();
  cmd->add_option("--kv-format,--kv-dtype", flags->kv_format,
                  "KV cache: same (the --dtype) or e4m3 (one kv_scale a layer, from a bound on "
                  "the model's KV values); --kv-dtype is another name for it")
      ->capture_default_str();
  cmd->add_option("--precision", flags->precision,
                  "e4m3 caches: exact or fast (FP8 products where the GPU has them; the CPU "
                  "backends run exact, except cpu-reference with --round-p, which rounds Q and "
                  "P as the fast kernels do)")
      ->capture_default_str();
  cmd->add_option("--kv-scale", o.kv_scale,
                  "e4m3: every layer's kv_scale instead of the bound's (a value past 448 x "
                  "kv_scale is an error)");
  cmd->add_flag("--round-p", o.round_p,
                "CPU: round P like the GPU kernel (16-bit; e4m3 Q and P with --precision fast "
                "on cpu-reference)");
  cmd->add_flag("!--no-dense", o.check_dense, "skip the dense float64 greedy check");
  cmd->callback([flags, exit_code] { *exit_code = run_demo_command(*flags); });
}

}  // namespace treeverify::cli
