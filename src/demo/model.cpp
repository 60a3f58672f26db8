// The demo model's host math. Every path (speculative, plain greedy, dense) runs this same
// code on the same inputs, so they can differ only through the attention outputs.
#include "demo/model.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "core/check.h"
#include "demo/kv_store.h"
#include "treeverify/half.h"
#include "treeverify/tree.h"
#include "treeverify/types.h"

namespace treeverify::demo {
namespace {

constexpr float kNormEps = 1e-6f;
constexpr float kGainJitter = 0.1f;  // RMSNorm gains are 1 + this * N(0, 1)

std::vector<float> gaussian(size_t n, float scale, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.f, 1.f);
  std::vector<float> v(n);
  for (float& x : v) x = scale * dist(rng);
  return v;
}
std::vector<float> gains(size_t n, std::mt19937_64& rng) {
  std::vector<float> v = gaussian(n, kGainJitter, rng);
  for (float& x : v) x += 1.f;
  return v;
}
std::vector<float> dense(int32_t fan_in, size_t n, std::mt19937_64& rng) {
  return gaussian(n, 1.f / std::sqrt(static_cast<float>(fan_in)), rng);
}

// y[o] = sum_i x[i] W[i, o] for W row-major [in, out]; a fixed summation order (i ascending),
// so equal inputs give bit-equal outputs on every path.
void matvec(const float* x, const float* w, int32_t in, int32_t out, float* y) {
  for (int32_t o = 0; o < out; ++o) y[o] = 0.f;
  for (int32_t i = 0; i < in; ++i) {
    const float xi = x[i];
    const float* row = w + static_cast<size_t>(i) * out;
    for (int32_t o = 0; o < out; ++o) y[o] += xi * row[o];
  }
}

void rmsnorm(const float* x, const float* gain, int32_t n, float* y) {
  double ss = 0.0;
  for (int32_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / n + kNormEps));
  for (int32_t i = 0; i < n; ++i) y[i] = x[i] * inv * gain[i];
}

// Rotary embedding of a 64-wide rope vector at `pos`, pairs (i, i + 32) (the NeoX layout).
void rope(float* x, int32_t pos, float base) {
  constexpr int32_t kHalf = kRopeDim / 2;
  for (int32_t i = 0; i < kHalf; ++i) {
    const double freq = std::pow(static_cast<double>(base), -2.0 * i / kRopeDim);
    const double angle = pos * freq;
    const float c = static_cast<float>(std::cos(angle)), s = static_cast<float>(std::sin(angle));
    const float a = x[i], b = x[i + kHalf];
    x[i] = a * c - b * s;
    x[i + kHalf] = a * s + b * c;
  }
}

}  // namespace

std::vector<float> kv_value_bound(const Weights& w) {
  // A KV row is [RMSNorm(h W_DKV) | RoPE(h W_KR)] (forward). RMSNorm's x_i / rms(x) is at most
  // sqrt(n) in magnitude (x_i^2 <= sum x^2), so a latent value is at most sqrt(512) max|gain|,
  // and h = RMSNorm(x) has ||h|| <= sqrt(hidden) max|gain|. A rope pair (k_i, k_i+32) is
  // rotated, so each of its values is at most its norm, which Cauchy-Schwarz bounds by
  // ||h|| sqrt(||W_KR[:, i]||^2 + ||W_KR[:, i+32]||^2). The margin covers the 16-bit rounding
  // of the stored value (bf16: 2^-8 relative) and float32's in the norms and products (~1e-5).
  // The bound is loose (about 30 where values reach ~5) but that costs e4m3 almost nothing:
  // its relative step is the same 2^-4 across its normal range, which spans 2^-6 .. 448.
  constexpr double kMargin = 1.03;
  auto max_abs = [](const std::vector<float>& v) {
    double m = 0;
    for (float x : v) m = std::max(m, static_cast<double>(std::fabs(x)));
    return m;
  };
  const int32_t hd = w.config.hidden;
  std::vector<float> bound;
  for (const LayerWeights& lw : w.layers) {
    const double latent = std::sqrt(double{kLatentDim}) * max_abs(lw.kv_norm);
    double pair = 0;  // the largest sqrt(||W_KR[:, i]||^2 + ||W_KR[:, i+32]||^2)
    for (int32_t i = 0; i < kRopeDim / 2; ++i) {
      double ss = 0;
      for (int32_t r = 0; r < hd; ++r) {
        for (int32_t c : {i, i + kRopeDim / 2}) {
          const double x = lw.w_kr[static_cast<size_t>(r) * kRopeDim + c];
          ss += x * x;
        }
      }
      pair = std::max(pair, std::sqrt(ss));
    }
    const double rope_key = std::sqrt(static_cast<double>(hd)) * max_abs(lw.attn_norm) * pair;
    bound.push_back(static_cast<float>(kMargin * std::max(latent, rope_key)));
  }
  return bound;
}

float softmax_scale(const ModelConfig& c) {
  return 1.f / std::sqrt(static_cast<float>(c.nope_dim + kRopeDim));
}

Weights make_weights(const ModelConfig& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Weights w;
  w.config = c;
  const size_t hd = c.hidden, h = c.heads;
  w.embed = gaussian(static_cast<size_t>(c.vocab) * hd, 1.f, rng);
  for (int32_t l = 0; l < c.layers; ++l) {
    LayerWeights lw;
    lw.attn_norm = gains(hd, rng);
    lw.kv_norm = gains(kLatentDim, rng);
    lw.mlp_norm = gains(hd, rng);
    lw.w_dkv = dense(c.hidden, hd * kLatentDim, rng);
    lw.w_kr = dense(c.hidden, hd * kRopeDim, rng);
    lw.w_q = dense(c.hidden, hd * h * (c.nope_dim + kRopeDim), rng);
    lw.w_uk = dense(c.nope_dim, h * c.nope_dim * kLatentDim, rng);
    lw.w_uv = dense(kLatentDim, h * kLatentDim * c.v_head_dim, rng);
    lw.w_o = dense(c.heads * c.v_head_dim, h * c.v_head_dim * hd, rng);
    lw.w_up = dense(c.hidden, hd * c.mlp, rng);
    lw.w_down = dense(c.mlp, static_cast<size_t>(c.mlp) * hd, rng);
    w.layers.push_back(std::move(lw));
  }
  w.final_norm = gains(hd, rng);
  w.lm_head = dense(c.hidden, hd * c.vocab, rng);
  for (float& x : w.lm_head) x *= c.logit_scale;
  return w;
}

Weights perturb(const Weights& w, float noise, uint64_t seed) {
  // The same generator as make_weights, so the noise of each tensor has that tensor's scale.
  const Weights n = make_weights(w.config, seed);
  Weights out = w;
  auto add = [noise](std::vector<float>& dst, const std::vector<float>& src) {
    for (size_t i = 0; i < dst.size(); ++i) dst[i] += noise * src[i];
  };
  add(out.embed, n.embed);
  add(out.lm_head, n.lm_head);
  for (size_t l = 0; l < out.layers.size(); ++l) {
    LayerWeights& d = out.layers[l];
    const LayerWeights& s = n.layers[l];
    for (auto [dst, src] : {std::pair{&d.w_dkv, &s.w_dkv},
                            {&d.w_kr, &s.w_kr},
                            {&d.w_q, &s.w_q},
                            {&d.w_uk, &s.w_uk},
                            {&d.w_uv, &s.w_uv},
                            {&d.w_o, &s.w_o},
                            {&d.w_up, &s.w_up},
                            {&d.w_down, &s.w_down}}) {
      add(*dst, *src);
    }
  }
  return out;
}

Status forward(const Weights& w, KvStore* store, std::span<const int32_t> tokens,
               std::span<const int32_t> parents, std::vector<float>* logits) {
  const ModelConfig& c = w.config;
  const int32_t t = static_cast<int32_t>(tokens.size());
  const int32_t hd = c.hidden, qw = c.nope_dim + kRopeDim;
  const int32_t prefix = store->length();
  const int32_t qo[2] = {0, t}, kv_len = prefix + t;
  std::vector<int32_t> pos;
  TV_RETURN_IF_ERROR(tree_positions(qo, std::span(&kv_len, 1), parents, &pos));
  TV_RETURN_IF_ERROR(store->begin(parents));

  std::vector<float> x(static_cast<size_t>(t) * hd);
  for (int32_t i = 0; i < t; ++i) {
    std::copy_n(w.embed.begin() + static_cast<size_t>(tokens[i]) * hd, hd, x.begin() + i * hd);
  }
  std::vector<float> h(hd), lat(kLatentDim), kr(kRopeDim), q(c.heads * qw), ql(kLatentDim);
  std::vector<float> vh(c.v_head_dim), vcat(c.heads * c.v_head_dim), attn(hd), up(c.mlp);
  std::vector<uint16_t> rows(static_cast<size_t>(t) * kQKDim);
  std::vector<uint16_t> qbits(static_cast<size_t>(t) * c.heads * kQKDim);
  std::vector<uint16_t> out(static_cast<size_t>(t) * c.heads * kLatentDim);
  for (int32_t l = 0; l < c.layers; ++l) {
    const LayerWeights& lw = w.layers[l];
    for (int32_t i = 0; i < t; ++i) {
      rmsnorm(&x[i * hd], lw.attn_norm.data(), hd, h.data());
      // KV row: [RMSNorm(h W_DKV) | RoPE(h W_KR, pos)], stored in the cache's 16-bit type.
      matvec(h.data(), lw.w_dkv.data(), hd, kLatentDim, lat.data());
      rmsnorm(lat.data(), lw.kv_norm.data(), kLatentDim, lat.data());
      matvec(h.data(), lw.w_kr.data(), hd, kRopeDim, kr.data());
      rope(kr.data(), pos[i], c.rope_base);
      uint16_t* row = &rows[static_cast<size_t>(i) * kQKDim];
      for (int32_t j = 0; j < kLatentDim; ++j) row[j] = float_to_half(c.dtype, lat[j]);
      for (int32_t j = 0; j < kRopeDim; ++j) row[kLatentDim + j] = float_to_half(c.dtype, kr[j]);
      // q per head: q_nope absorbed through W_UK into the 512 latent columns, then q_rope.
      matvec(h.data(), lw.w_q.data(), hd, c.heads * qw, q.data());
      for (int32_t hh = 0; hh < c.heads; ++hh) {
        float* qh = &q[hh * qw];
        matvec(qh, &lw.w_uk[static_cast<size_t>(hh) * c.nope_dim * kLatentDim], c.nope_dim,
               kLatentDim, ql.data());
        rope(qh + c.nope_dim, pos[i], c.rope_base);
        uint16_t* qrow = &qbits[(static_cast<size_t>(i) * c.heads + hh) * kQKDim];
        for (int32_t j = 0; j < kLatentDim; ++j) qrow[j] = float_to_half(c.dtype, ql[j]);
        for (int32_t j = 0; j < kRopeDim; ++j)
          qrow[kLatentDim + j] = float_to_half(c.dtype, qh[c.nope_dim + j]);
      }
    }
    TV_RETURN_IF_ERROR(store->write_rows(l, rows));
    TV_RETURN_IF_ERROR(store->attend(l, qbits, out));
    for (int32_t i = 0; i < t; ++i) {
      // The attention output is in latent space; W_UV (absorbed after attention) maps it to
      // each head's values, W_O back to the residual stream.
      for (int32_t hh = 0; hh < c.heads; ++hh) {
        const uint16_t* o = &out[(static_cast<size_t>(i) * c.heads + hh) * kLatentDim];
        for (int32_t j = 0; j < kLatentDim; ++j) lat[j] = half_to_float(c.dtype, o[j]);
        matvec(lat.data(), &lw.w_uv[static_cast<size_t>(hh) * kLatentDim * c.v_head_dim],
               kLatentDim, c.v_head_dim, vh.data());
        std::copy(vh.begin(), vh.end(), vcat.begin() + hh * c.v_head_dim);
      }
      matvec(vcat.data(), lw.w_o.data(), c.heads * c.v_head_dim, hd, attn.data());
      float* xi = &x[i * hd];
      for (int32_t j = 0; j < hd; ++j) xi[j] += attn[j];
      rmsnorm(xi, lw.mlp_norm.data(), hd, h.data());
      matvec(h.data(), lw.w_up.data(), hd, c.mlp, up.data());
      for (float& u : up) u = u / (1.f + std::exp(-u));  // SiLU
      matvec(up.data(), lw.w_down.data(), c.mlp, hd, attn.data());
      for (int32_t j = 0; j < hd; ++j) xi[j] += attn[j];
    }
  }
  logits->resize(static_cast<size_t>(t) * c.vocab);
  for (int32_t i = 0; i < t; ++i) {
    rmsnorm(&x[i * hd], w.final_norm.data(), hd, h.data());
    matvec(h.data(), w.lm_head.data(), hd, c.vocab,
           logits->data() + static_cast<size_t>(i) * c.vocab);
  }
  return Status::Ok();
}

}  // namespace treeverify::demo
