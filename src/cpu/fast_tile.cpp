// The CPU fast backend's inner loop: gather a KV tile into fp32 once, S = Q K^T and O += P V
// through BLAS, and the online softmax (fp32 scores and max, double row sums) in between.
#include "cpu/fast_tile.h"

#include <cblas.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

#include "core/check.h"
#include "core/fp8_rounding.h"
#include "treeverify/half.h"
#include "treeverify/tree.h"

namespace treeverify::detail::fast {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// fp16 -> fp32 through a 256 KB table: the exact conversion branches on subnormals and
// specials, and at decode (one query row) decoding the KV tile is most of the work.
const float* fp16_table() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t h = 0; h < 65536; ++h) t[h] = fp16_to_float(static_cast<uint16_t>(h));
    return t;
  }();
  return table.data();
}

// e4m3 -> fp32 through a 256-entry table, times the cache's scale.
void decode_e4m3(const uint8_t* src, int n, float scale, float* dst) {
  static const std::vector<float> table = [] {
    std::vector<float> t(256);
    for (uint32_t b = 0; b < 256; ++b) t[b] = e4m3_to_float(static_cast<uint8_t>(b));
    return t;
  }();
  for (int c = 0; c < n; ++c) dst[c] = table[src[c]] * scale;
}

void decode(DType dtype, const uint16_t* src, int n, float* dst) {
  if (dtype == DType::kBF16) {
    for (int c = 0; c < n; ++c) dst[c] = bf16_to_float(src[c]);
  } else {
    const float* table = fp16_table();
    for (int c = 0; c < n; ++c) dst[c] = table[src[c]];
  }
}

// Whether any of v[0, n) is a NaN or an infinity (all exponent bits set): an integer OR over
// the row, which the compiler vectorises.
bool any_nonfinite(const float* v, int n) {
  constexpr uint32_t kExp = 0x7f800000u;
  uint32_t bad = 0;
  for (int c = 0; c < n; ++c)
    bad |= static_cast<uint32_t>((std::bit_cast<uint32_t>(v[c]) & kExp) == kExp);
  return bad != 0;
}

// The non-finite policy (verify.h) without a NaN ever reaching BLAS: a gathered KV row holding
// a non-finite value becomes zeros, and each row that sees the token gets l = NaN, which every
// later update keeps (l * alpha + sum) and write_rows turns into a NaN row. A row that cannot
// see the token multiplies its P = 0 by those zeros, so nothing reaches it.
void quarantine_token(const FastRequest& req, int32_t heads, int64_t row0, int32_t rows,
                      int64_t tok, float* kv_row, double* l) {
  std::fill(kv_row, kv_row + kQKDim, 0.f);
  const int64_t tree = tok - req.span.prefix;
  for (int32_t r = 0; r < rows; ++r) {
    const int64_t node = (row0 + r) / heads;
    const uint32_t* words = &req.ancestors[node * req.words_per_row];
    if (tree < 0 || ((words[tree / 32] >> (tree % 32)) & 1u)) l[r] = kNaN;
  }
}

// Masks the tree tokens of a tile: token t0 + j (j < n) is tree node t0 + j - L, visible to
// row r's node only if it is that node or one of its ancestors. Prefix tokens stay visible.
void mask_tree_tokens(const FastRequest& req, int32_t heads, int64_t row0, int32_t rows, int64_t t0,
                      int32_t n, float* s) {
  const int64_t first = std::max<int64_t>(req.span.prefix - t0, 0);
  for (int32_t r = 0; r < rows; ++r) {
    const int64_t node = (row0 + r) / heads;
    const uint32_t* words = &req.ancestors[node * req.words_per_row];
    float* sr = s + int64_t{r} * kTileTokens;
    for (int64_t j = first; j < n; ++j) {
      const int64_t tree = t0 + j - req.span.prefix;
      if (!((words[tree / 32] >> (tree % 32)) & 1u)) sr[j] = kNegInf;
    }
  }
}

// Turns each row of scores into probabilities against the new running max, rescales the
// row's O and l by exp(m_old - m_new), and adds the tile's sum to l. The sum is of the
// unrounded p's even with round_p, as in the GPU kernels and the oracle.
void softmax_update(const Plan& plan, int32_t rows, int32_t n, float* s, RowState st) {
  for (int32_t r = 0; r < rows; ++r) {
    float* sr = s + int64_t{r} * kTileTokens;
    const float m_new = std::max(st.m[r], *std::max_element(sr, sr + n));
    if (m_new == kNegInf) {  // nothing visible yet: this tile adds nothing
      std::fill(sr, sr + n, 0.f);
      continue;
    }
    double sum = 0;
    for (int32_t j = 0; j < n; ++j) {
      const float p = std::exp(sr[j] - m_new);
      sum += p;
      sr[j] = plan.options.round_p ? round_to(p_round_dtype(plan), p) : p;
    }
    const float alpha = std::exp(st.m[r] - m_new);  // 0 while m was -inf; 1 if unchanged
    if (alpha != 1.f) {
      float* o = st.o + int64_t{r} * kVDim;
      for (int c = 0; c < kVDim; ++c) o[c] *= alpha;
    }
    st.l[r] = st.l[r] * alpha + sum;
    st.m[r] = m_new;
  }
}

}  // namespace

Status make_fast_request(const VerifyTensors& tensors, int32_t b, FastRequest* req) {
  req->span = request_span(tensors, b);
  const int32_t nodes = req->span.num_nodes;
  // The request's tree on its own: one row of words per node, as the tree helpers lay it out.
  const int32_t indptr[2] = {0, nodes};
  AncestorMask mask;
  TV_RETURN_IF_ERROR(build_ancestor_mask(
      indptr, {tensors.parents + req->span.q0, static_cast<size_t>(nodes)}, &mask));
  req->words_per_row = mask.words_per_row;
  req->ancestors = std::move(mask.words);
  return Status::Ok();
}

Scratch::Scratch()
    : q(kRowBlock * kQKDim),
      kv(kTileTokens * kQKDim),
      s(kRowBlock * kTileTokens),
      o(kRowBlock * kVDim),
      m(kRowBlock),
      l(kRowBlock) {}

void attend_range(const Plan& plan, const VerifyTensors& tensors, const FastRequest& req,
                  int64_t row0, int32_t rows, int64_t tok0, int64_t tok1, Scratch* scratch,
                  RowState state) {
  const int32_t heads = plan.num_heads;
  const Strides st = resolve_strides(plan, tensors);
  const auto* q = static_cast<const uint16_t*>(tensors.q);
  float* qb = scratch->q.data();
  for (int32_t r = 0; r < rows; ++r) {
    const int64_t node = (row0 + r) / heads, head = (row0 + r) % heads;
    decode(plan.dtype, q + (req.span.q0 + node) * st.q_token + head * st.q_head, kQKDim,
           qb + int64_t{r} * kQKDim);
  }
  std::fill(state.o, state.o + int64_t{rows} * kVDim, 0.f);
  std::fill(state.m, state.m + rows, kNegInf);
  std::fill(state.l, state.l + rows, 0.0);
  for (int32_t r = 0; r < rows; ++r) {  // a non-finite q: the row is NaN, l says so
    float* qr = qb + int64_t{r} * kQKDim;
    if (any_nonfinite(qr, kQKDim)) {
      std::fill(qr, qr + kQKDim, 0.f);
      state.l[r] = kNaN;
    }
  }

  float* kv = scratch->kv.data();
  float* s = scratch->s.data();
  for (int64_t t0 = tok0; t0 < tok1; t0 += kTileTokens) {
    const int32_t n = static_cast<int32_t>(std::min<int64_t>(kTileTokens, tok1 - t0));
    for (int32_t j = 0; j < n; ++j) {
      float* row = kv + int64_t{j} * kQKDim;
      if (plan.kv_format == KvFormat::kE4M3) {
        decode_e4m3(kv_row_e4m3(tensors, plan.page_size, req.span, t0 + j), kQKDim,
                    *tensors.kv_scale, row);
      } else {
        decode(plan.dtype, kv_row(tensors, plan.page_size, req.span, t0 + j), kQKDim, row);
      }
      if (any_nonfinite(row, kQKDim))
        quarantine_token(req, heads, row0, rows, t0 + j, row, state.l);
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, n, kQKDim, plan.softmax_scale, qb,
                kQKDim, kv, kQKDim, 0.f, s, kTileTokens);
    // Only the tiles that reach the tree tokens pay for the mask.
    if (t0 + n > req.span.prefix) mask_tree_tokens(req, heads, row0, rows, t0, n, s);
    softmax_update(plan, rows, n, s, state);
    // V is the first 512 columns of the gathered rows: same buffer, leading dimension 576.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, rows, kVDim, n, 1.f, s, kTileTokens, kv,
                kQKDim, 1.f, state.o, kVDim);
  }
}

}  // namespace treeverify::detail::fast
