// The oracle (docs/DESIGN.md section 7): float64 accumulation, plain loops, a two-pass softmax over
// each row's visible tokens, and visibility found by walking parents. Every other backend is
// judged against this file, so it trades speed for being obviously right.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "core/fp8_rounding.h"
#include "cpu/cpu_backend.h"
#include "cpu/cpu_util.h"
#include "treeverify/half.h"

namespace treeverify::detail {
namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// The score matrix of a block of rows is rows x kv_len doubles; this caps it at 128 MB so a
// 185k-token request with thousands of rows still fits, one row block at a time (fast rounding
// with the kernel's maxima keeps a second such matrix, the codes' slack: 256 MB).
constexpr int64_t kScoreBudget = int64_t{1} << 24;

void load_row(DType dtype, const uint16_t* src, int n, double* dst) {
  for (int c = 0; c < n; ++c) dst[c] = half_to_float(dtype, src[c]);
}

bool any_nonfinite(const double* v, int n) {
  return std::any_of(v, v + n, [](double x) { return !std::isfinite(x); });
}

// sees[i * T + j]: tree node i may attend tree token j (j is i or one of its ancestors).
std::vector<uint8_t> tree_visibility(const int32_t* parents, int32_t num_nodes) {
  std::vector<uint8_t> sees(static_cast<size_t>(num_nodes) * num_nodes, 0);
  for (int32_t i = 0; i < num_nodes; ++i) {
    for (int32_t j = i; j >= 0; j = parents[j]) sees[static_cast<size_t>(i) * num_nodes + j] = 1;
  }
  return sees;
}

void reference_request(const Plan& plan, const VerifyTensors& t, const RequestSpan& req,
                       bool round_p, FastRounding rounding, ReferenceResult* res) {
  const int32_t heads = plan.num_heads, nodes = req.num_nodes;
  const int64_t kvl = req.kv_len, rows = int64_t{nodes} * heads;
  const double scale = plan.softmax_scale;
  // Precision::kFast with round_p: Q and P rounded to e4m3 as the fast kernels round them
  // (core/fp8_rounding.h) instead of P to the input dtype.
  const bool fast = round_p && plan.precision == Precision::kFast;
  const Strides st = resolve_strides(plan, t);
  const auto* q = static_cast<const uint16_t*>(t.q);
  const std::vector<uint8_t> sees = tree_visibility(t.parents + req.q0, nodes);
  auto visible = [&](int64_t row, int64_t tok) {
    return tok < req.prefix || sees[(row / heads) * nodes + (tok - req.prefix)];
  };

  const int64_t block = std::clamp<int64_t>(kScoreBudget / std::max<int64_t>(kvl, 1), 1, rows);
  std::vector<double> qd(block * kQKDim), s(block * kvl), kd(kQKDim), acc(block * kVDim);
  std::vector<double> sum(block);
  // Fast rounding with the kernel's maxima (reference_attention sized out_slack then): the
  // step of each P code the kernel may round the other way, in units of the row max's p (0 for
  // the others), and the rows' out slack.
  const bool slack = !res->out_slack.empty();
  std::vector<double> flip(slack ? block * kvl : 0), slack_acc(block);
  // The non-finite policy (verify.h): a row whose q, or any token it sees, holds a NaN or an
  // infinity is NaN, decided by what the row sees, not by what the arithmetic would give.
  std::vector<uint8_t> tok_bad(kvl), row_bad(block);
  for (int64_t r0 = 0; r0 < rows; r0 += block) {
    const int64_t nr = std::min(block, rows - r0);
    for (int64_t r = 0; r < nr; ++r) {
      const int64_t node = (r0 + r) / heads, head = (r0 + r) % heads;
      load_row(plan.dtype, q + (req.q0 + node) * st.q_token + head * st.q_head, kQKDim,
               &qd[r * kQKDim]);
      row_bad[r] = any_nonfinite(&qd[r * kQKDim], kQKDim);
      // A bad row is NaN whatever it holds.
      if (fast) round_q_row_fast(&qd[r * kQKDim], kQKDim, rounding.q_terms);
    }
    // Pass 1: scaled scores, token-outer so each KV row is decoded once per block.
    for (int64_t tok = 0; tok < kvl; ++tok) {
      load_kv_row(plan, t, req, tok, kQKDim, kd.data());
      tok_bad[tok] = any_nonfinite(kd.data(), kQKDim);
      for (int64_t r = 0; r < nr; ++r) {
        double dot = 0;
        for (int c = 0; c < kQKDim; ++c) dot += qd[r * kQKDim + c] * kd[c];
        const bool vis = visible(r0 + r, tok);
        s[r * kvl + tok] = vis ? scale * dot : kNegInf;
        if (vis && tok_bad[tok]) row_bad[r] = 1;
      }
    }
    // Pass 2: p = exp(s - max) in place; the normaliser is the sum of the unrounded p's. With
    // round_p, P.V uses p rounded to p_round_dtype, as the GPU kernels feed bf16/fp16 P to
    // the tensor cores while summing the fp32 p's (fast: p x 448 rounded to e4m3). (The GPU
    // subtracts a running max, not the row max; the difference is far below the rounding step
    // itself. It moves where the rounding steps fall, so the rounded P matches the kernel's
    // in size of error, not bit for bit, for tiles before the row's max; fast rounding with
    // `rounding` subtracts the kernel's running maxima instead, FastRounding.)
    for (int64_t r = 0; r < nr; ++r) {
      double* sr = &s[r * kvl];
      const double mx = *std::max_element(sr, sr + kvl);
      const int64_t out_row = (int64_t{req.q0} * heads) + r0 + r;
      sum[r] = 0;
      if (slack) std::fill(&flip[r * kvl], &flip[r * kvl] + kvl, 0.0);
      if (row_bad[r]) {  // out NaN (below), lse NaN
        std::fill(sr, sr + kvl, 0.0);
        res->lse[out_row] = kNaN;
        continue;
      }
      if (mx == kNegInf) {  // sees nothing: out stays 0, lse -inf
        std::fill(sr, sr + kvl, 0.0);
        res->lse[out_row] = kNegInf;
        continue;
      }
      if (fast && rounding.tile_tokens > 0) {
        const int64_t chunk = rounding.chunk_tokens > 0 ? rounding.chunk_tokens : kvl;
        for (int64_t c0 = 0; c0 < kvl; c0 += chunk) {
          const int64_t c1 = std::min(kvl, c0 + chunk);
          double run = kNegInf;  // the chunk's running max, through the current tile
          for (int64_t t0 = c0; t0 < c1; t0 += rounding.tile_tokens) {
            const int64_t t1 = std::min(c1, t0 + rounding.tile_tokens);
            run = std::max(run, *std::max_element(sr + t0, sr + t1));
            for (int64_t tok = t0; tok < t1; ++tok) {
              const double p = std::exp(sr[tok] - mx);
              sum[r] += p;
              if (run == kNegInf) {
                sr[tok] = 0;
                continue;
              }
              // Rounded relative to `run`, as the kernel holds it, then brought to the row max.
              const double x = std::exp(sr[tok] - run), to_row = std::exp(run - mx);
              sr[tok] = round_p_fast(x) * to_row;
              const double lo = round_p_fast(x * (1 - rounding.p_code_margin));
              const double hi = round_p_fast(x * (1 + rounding.p_code_margin));
              flip[r * kvl + tok] = (hi - lo) * to_row;
            }
          }
        }
      } else {
        for (int64_t tok = 0; tok < kvl; ++tok) {
          const double p = std::exp(sr[tok] - mx);  // exp(-inf) = 0 for masked tokens
          sum[r] += p;
          sr[tok] = fast      ? round_p_fast(p)
                    : round_p ? round_to(p_round_dtype(plan), static_cast<float>(p))
                              : p;
        }
      }
      res->lse[out_row] = mx + std::log(sum[r]);
    }
    // Pass 3: out = P.V / sum, token-outer again; V is the first 512 columns of the KV row.
    std::fill(acc.begin(), acc.end(), 0.0);
    std::fill(slack_acc.begin(), slack_acc.end(), 0.0);
    for (int64_t tok = 0; tok < kvl; ++tok) {
      load_kv_row(plan, t, req, tok, kVDim, kd.data());
      double v_norm = 0;
      if (slack) {
        for (int c = 0; c < kVDim; ++c) v_norm += kd[c] * kd[c];
        v_norm = std::sqrt(v_norm);
      }
      for (int64_t r = 0; r < nr; ++r) {
        // (flip is 0 for the tokens a row does not see, whose V may not be finite.)
        if (slack && flip[r * kvl + tok] != 0) slack_acc[r] += flip[r * kvl + tok] * v_norm;
        const double p = s[r * kvl + tok];
        if (p == 0) continue;
        for (int c = 0; c < kVDim; ++c) acc[r * kVDim + c] += p * kd[c];
      }
    }
    for (int64_t r = 0; r < nr; ++r) {
      double* dst = &res->out[(int64_t{req.q0} * heads + r0 + r) * kVDim];
      if (row_bad[r]) {
        std::fill(dst, dst + kVDim, kNaN);
        continue;
      }
      if (sum[r] == 0) continue;
      for (int c = 0; c < kVDim; ++c) dst[c] = acc[r * kVDim + c] / sum[r];
      if (slack) res->out_slack[int64_t{req.q0} * heads + r0 + r] = slack_acc[r] / sum[r];
    }
  }
}

}  // namespace

Status reference_attention(const Plan& plan, const VerifyTensors& tensors, bool round_p,
                           ReferenceResult* result, FastRounding rounding) {
  TV_REQUIRE(result != nullptr, "result", "null");
  TV_RETURN_IF_ERROR(check_host_inputs(plan, tensors, /*need_out=*/false));
  // As plan() requires: fast rounding exists for e4m3 caches only.
  TV_REQUIRE(plan.precision == Precision::kExact ||
                 (plan.precision == Precision::kFast && plan.kv_format == KvFormat::kE4M3),
             "plan.precision", "{} with a {} KV cache", precision_name(plan.precision),
             plan.kv_format == KvFormat::kE4M3 ? "e4m3" : dtype_name(plan.dtype));
  const int64_t rows = int64_t{plan.total_q} * plan.num_heads;
  ReferenceResult res;
  res.out.assign(rows * kVDim, 0.0);
  res.lse.assign(rows, kNegInf);
  if (round_p && plan.precision == Precision::kFast && rounding.tile_tokens > 0)
    res.out_slack.assign(rows, 0.0);
  for (int32_t b = 0; b < plan.batch_size; ++b) {
    const RequestSpan req = request_span(tensors, b);
    if (req.num_nodes > 0) reference_request(plan, tensors, req, round_p, rounding, &res);
  }
  *result = std::move(res);
  return Status::Ok();
}

Status cpu_reference_run(const Plan& plan, const VerifyTensors& tensors) {
  TV_RETURN_IF_ERROR(check_host_inputs(plan, tensors, /*need_out=*/true));
  ReferenceResult res;
  TV_RETURN_IF_ERROR(reference_attention(plan, tensors, plan.options.round_p, &res));
  const Strides st = resolve_strides(plan, tensors);
  auto* out = static_cast<uint16_t*>(tensors.out);
  for (int64_t row = 0; row < int64_t{plan.total_q}; ++row) {
    for (int32_t h = 0; h < plan.num_heads; ++h) {
      const int64_t r = row * plan.num_heads + h;
      uint16_t* dst = out + row * st.out_token + h * st.out_head;
      // Rounded through float: this differs from rounding the double directly only within
      // 2^-24 of a 16-bit tie, one ulp at most, far inside every tolerance.
      for (int c = 0; c < kVDim; ++c) {
        dst[c] = float_to_half(plan.dtype, static_cast<float>(res.out[r * kVDim + c]));
      }
      if (tensors.lse != nullptr) tensors.lse[r] = static_cast<float>(res.lse[r]);
    }
  }
  return Status::Ok();
}

}  // namespace treeverify::detail
