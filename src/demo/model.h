// The demo's tiny MLA decoder (issue 4 item 4): real MLA attention shapes where the verify call
// fixes them (a 576-wide latent + rope KV row, 512-wide output, absorbed form), everything else
// scaled down. Random weights from a fixed seed; the drafter is the same model with perturbed
// weights. The model is host code; attention goes through a KvStore (kv_store.h), which is
// either treeverify's verify call over a paged cache or a dense float64 loop.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "treeverify/status.h"
#include "treeverify/types.h"

namespace treeverify::demo {

class KvStore;

struct ModelConfig {
  int32_t vocab = 512;
  int32_t hidden = 256;
  int32_t layers = 2;
  int32_t heads = 8;
  int32_t nope_dim = 64;    // per-head q_nope / k_nope width before absorption into 512
  int32_t v_head_dim = 64;  // per-head value width after W_UV
  int32_t mlp = 512;
  float rope_base = 10000.f;
  // Logits are scaled so that the drafter's distributions are peaked enough for trees to
  // matter; argmax is unaffected.
  float logit_scale = 3.f;
  // The 16-bit type of q, the KV cache and the attention output (the verify call's dtype).
  DType dtype = DType::kBF16;
};

struct LayerWeights {
  std::vector<float> attn_norm, kv_norm, mlp_norm;  // [hidden], [512], [hidden] RMSNorm gains
  std::vector<float> w_dkv;   // [hidden, 512]: down-projection to the latent c_kv
  std::vector<float> w_kr;    // [hidden, 64]: the shared rope key
  std::vector<float> w_q;     // [hidden, heads * (nope_dim + 64)]: per head q_nope then q_rope
  std::vector<float> w_uk;    // [heads, nope_dim, 512]: k_nope = c_kv W_UK^T, absorbed into q
  std::vector<float> w_uv;    // [heads, 512, v_head_dim]: v = c_kv W_UV, absorbed after attn
  std::vector<float> w_o;     // [heads * v_head_dim, hidden]
  std::vector<float> w_up;    // [hidden, mlp]
  std::vector<float> w_down;  // [mlp, hidden]
};

struct Weights {
  ModelConfig config;
  std::vector<float> embed;  // [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [hidden]
  std::vector<float> lm_head;     // [hidden, vocab]
};

// Gaussian weights scaled by 1 / sqrt(fan_in), RMSNorm gains near 1; fully determined by seed.
Weights make_weights(const ModelConfig& config, uint64_t seed);
// w + noise * N(0, 1) * (the tensor's init scale): the drafter, close to the target.
Weights perturb(const Weights& w, float noise, uint64_t seed);

// A bound on |value| of every KV row `forward` can write in each layer, [layers], from the
// weights alone, so an e4m3 cache can take a fixed per-layer kv_scale = bound / 448 before any
// token is decoded and never saturate (model.cpp derives it).
std::vector<float> kv_value_bound(const Weights& w);

// The softmax scale of absorbed MLA: 1 / sqrt(nope_dim + 64), the width of q.k before
// absorption (DeepSeek-V3's qk_head_dim).
float softmax_scale(const ModelConfig& config);

// One forward pass of a tree of T = tokens.size() nodes placed after the store's committed
// prefix (parents in node order, parents[0] = -1; a chain for prefill, one node for decode).
// Writes every node's KV row into the store layer by layer, as an engine does before each
// verify call, and returns the logits at every node, [T, vocab]. Node i sits at position
// L + depth(i) (tree_positions): its RoPE angle and its causal context are those of plain
// decoding of the path root..i.
Status forward(const Weights& w, KvStore* store, std::span<const int32_t> tokens,
               std::span<const int32_t> parents, std::vector<float>* logits);

}  // namespace treeverify::demo
