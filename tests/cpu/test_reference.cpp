// The float64 oracle against cases computed by hand, and against plain causal attention for
// decode and chains.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu_test_util.h"

namespace {

using treeverify::DType;
using treeverify::float_to_half;
using treeverify::kQKDim;
using treeverify::kVDim;
using treeverify::detail::cpu_reference_run;
using treeverify::detail::reference_attention;
using treeverify::detail::ReferenceResult;
using tvtest::CaseSpec;
using tvtest::HostCase;

// A case with all q and KV zero, for the test to fill by hand.
HostCase zero_case(int heads, std::vector<int32_t> trees, std::vector<int64_t> prefix,
                   int page_size, float scale, DType dtype = DType::kBF16) {
  CaseSpec spec;
  spec.num_heads = heads;
  spec.tree_sizes = std::move(trees);
  spec.prefix_lens = std::move(prefix);
  spec.page_size = page_size;
  spec.softmax_scale = scale;
  spec.dtype = dtype;
  spec.shape = treeverify::testing::TreeShape::kChain;
  HostCase c = treeverify::testing::make_case(spec);
  std::fill(c.q.begin(), c.q.end(), 0);
  std::fill(c.kv.begin(), c.kv.end(), 0);
  return c;
}

// Writable element `col` of KV token `tok` of request b, and of q row (node, head).
uint16_t& kv_at(HostCase& c, int b, int64_t tok, int col) {
  return c.kv[tvtest::token_offset(c, b, tok) + col];
}
uint16_t& q_at(HostCase& c, int64_t node, int head, int col) {
  return c.q[(node * c.spec.num_heads + head) * kQKDim + col];
}
uint16_t bf(float f) { return float_to_half(DType::kBF16, f); }

ReferenceResult run_reference(const HostCase& c, bool round_p = false) {
  ReferenceResult r;
  const treeverify::Status s =
      reference_attention(tvtest::plan_for(c), c.tensors(nullptr, nullptr), round_p, &r);
  EXPECT_TRUE(s.ok()) << s.to_string();
  return r;
}

TEST(Reference, PrefixZeroNodeSeesOnlyItself) {
  HostCase c = zero_case(1, {1}, {0}, 1, 0.5f);
  q_at(c, 0, 0, 512) = bf(1);  // scores live in the rope columns, V in the first 512
  q_at(c, 0, 0, 513) = bf(2);
  kv_at(c, 0, 0, 512) = bf(3);
  kv_at(c, 0, 0, 513) = bf(0.5f);
  for (int col = 0; col < kVDim; ++col) kv_at(c, 0, 0, col) = bf(static_cast<float>(col % 7 - 3));
  const ReferenceResult r = run_reference(c);
  EXPECT_DOUBLE_EQ(r.lse[0], 0.5 * (3 + 2 * 0.5));
  for (int col = 0; col < kVDim; ++col) EXPECT_DOUBLE_EQ(r.out[col], col % 7 - 3) << col;
}

TEST(Reference, TwoTokenSoftmaxIsExact) {
  HostCase c = zero_case(1, {1}, {1}, 2, 1.f);
  q_at(c, 0, 0, 512) = bf(1);
  kv_at(c, 0, 1, 512) = bf(1);  // scores: prefix 0, the node itself 1
  kv_at(c, 0, 0, 0) = bf(1);
  kv_at(c, 0, 1, 0) = bf(3);
  kv_at(c, 0, 1, 1) = bf(-2);
  const ReferenceResult r = run_reference(c);
  const double e = std::exp(1.0);
  EXPECT_NEAR(r.out[0], (1 + 3 * e) / (1 + e), 1e-15);
  EXPECT_NEAR(r.out[1], -2 * e / (1 + e), 1e-15);
  for (int col = 2; col < kVDim; ++col) EXPECT_EQ(r.out[col], 0.0);
  EXPECT_NEAR(r.lse[0], std::log(1 + e), 1e-15);
}

// parents {-1, 0, 1, 0} after a prefix of 2: tokens 0, 1 are the prefix, token 2 + j is node j.
// Visible token sets, by hand: node 0 {0,1,2}, node 1 {0,1,2,3}, node 2 {0,1,2,3,4},
// node 3 {0,1,2,5}. Head 0 has q = 0 (uniform weights); head 1 has score t on token t.
TEST(Reference, HandComputedTreeVisibility) {
  HostCase c = zero_case(2, {4}, {2}, 4, 1.f);
  c.parents = {-1, 0, 1, 0};
  for (int64_t t = 0; t < 6; ++t) {
    kv_at(c, 0, t, 0) = bf(static_cast<float>(t + 1));
    kv_at(c, 0, t, 1) = bf(static_cast<float>(1 << t));
    kv_at(c, 0, t, 512) = bf(static_cast<float>(t));
  }
  for (int node = 0; node < 4; ++node) q_at(c, node, 1, 512) = bf(1);
  const std::vector<std::vector<int>> sees = {
      {0, 1, 2}, {0, 1, 2, 3}, {0, 1, 2, 3, 4}, {0, 1, 2, 5}};
  const ReferenceResult r = run_reference(c);
  for (int node = 0; node < 4; ++node) {
    for (int head = 0; head < 2; ++head) {
      double sum = 0, o0 = 0, o1 = 0;
      for (int t : sees[node]) {
        const double w = head == 0 ? 1.0 : std::exp(static_cast<double>(t));
        sum += w;
        o0 += w * (t + 1);
        o1 += w * (1 << t);
      }
      const int64_t row = node * 2 + head;
      EXPECT_NEAR(r.out[row * kVDim + 0], o0 / sum, 1e-13) << "node " << node << " head " << head;
      EXPECT_NEAR(r.out[row * kVDim + 1], o1 / sum, 1e-13) << "node " << node << " head " << head;
      EXPECT_NEAR(r.lse[row], std::log(sum), 1e-13) << "node " << node << " head " << head;
    }
  }
}

// With round_p, P.V uses p rounded to bf16 while the normaliser sums the unrounded p's.
TEST(Reference, RoundPRoundsProbabilitiesNotTheNormaliser) {
  HostCase c = zero_case(1, {1}, {1}, 1, 1.f);
  const float x = treeverify::bf16_to_float(bf(-1.1f));
  q_at(c, 0, 0, 512) = bf(1);
  kv_at(c, 0, 1, 512) = bf(x);  // scores: prefix 0 (the max), node x
  kv_at(c, 0, 1, 0) = bf(1);    // out[0] = p_node / sum
  const double p = std::exp(static_cast<double>(x));
  const double p_rounded = treeverify::round_to(DType::kBF16, static_cast<float>(p));
  ASSERT_NE(p, p_rounded);
  EXPECT_NEAR(run_reference(c, false).out[0], p / (1 + p), 1e-15);
  EXPECT_NEAR(run_reference(c, true).out[0], p_rounded / (1 + p), 1e-15);
  EXPECT_NEAR(run_reference(c, true).lse[0], std::log(1 + p), 1e-15);
}

// Decode (T = 1) and chains (parent[i] = i - 1) are causal attention: node i sees tokens
// 0 .. L + i. Ragged batches with an empty request in the middle.
TEST(Reference, DecodeAndChainAreCausalAttention) {
  for (int trial = 0; trial < 40; ++trial) {
    CaseSpec spec;
    spec.num_heads = 1 + trial % 3;
    spec.shape = treeverify::testing::TreeShape::kChain;
    spec.page_size = 1 << (trial % 5);
    spec.dtype = trial % 2 ? DType::kFP16 : DType::kBF16;
    spec.seed = 100 + trial;
    const bool decode = trial < 20;
    spec.tree_sizes = {decode ? 1 : 5, 0, decode ? 1 : 3};
    spec.prefix_lens = {trial % 7, 3, 40 + trial};
    const HostCase c = treeverify::testing::make_case(spec);
    const ReferenceResult r = run_reference(c);
    for (int b = 0; b < 3; ++b) {
      const int64_t prefix = spec.prefix_lens[b];
      for (int32_t i = 0; i < spec.tree_sizes[b]; ++i) {
        std::vector<const uint16_t*> keys;
        for (int64_t t = 0; t <= prefix + i; ++t) keys.push_back(tvtest::token_row(c, b, t));
        for (int h = 0; h < spec.num_heads; ++h) {
          const int64_t row = (int64_t{c.qo_indptr[b] + i}) * spec.num_heads + h;
          std::vector<double> out(kVDim);
          double lse;
          tvtest::plain_attention(spec.dtype, spec.softmax_scale, &c.q[row * kQKDim], keys,
                                  out.data(), &lse);
          const std::vector<double> got(r.out.begin() + row * kVDim,
                                        r.out.begin() + (row + 1) * kVDim);
          EXPECT_LT(tvtest::rel_fro(got, out), 1e-13) << "trial " << trial << " b " << b;
          EXPECT_NEAR(r.lse[row], lse, 1e-12) << "trial " << trial << " b " << b;
        }
      }
    }
  }
}

// cpu_reference_run writes the oracle rounded to dtype, honours strides, leaves the padding
// between strided rows alone, accepts a null lse, and writes nothing when it fails.
TEST(Reference, RunRoundsHonoursStridesAndWritesNothingOnFailure) {
  CaseSpec spec;
  spec.num_heads = 3;
  spec.tree_sizes = {4, 2};
  spec.prefix_lens = {9, 0};
  spec.page_size = 4;
  spec.dtype = DType::kFP16;
  const HostCase c = treeverify::testing::make_case(spec);
  const int heads = spec.num_heads, total_q = c.total_q();
  const ReferenceResult r = run_reference(c);

  // q copied into rows padded to 640 per head and 1952 per token; out padded likewise.
  const int64_t qsh = 640, qst = heads * qsh + 32, osh = 520, ost = heads * osh + 8;
  std::vector<uint16_t> q(total_q * qst, 0x7e00), out(total_q * ost, 0x7e00);
  for (int64_t row = 0; row < total_q; ++row) {
    for (int h = 0; h < heads; ++h) {
      std::copy_n(&c.q[(row * heads + h) * kQKDim], kQKDim, &q[row * qst + h * qsh]);
    }
  }
  std::vector<float> lse(total_q * heads, 12345.f);
  treeverify::VerifyTensors t = c.tensors(out.data(), lse.data());
  t.q = q.data();
  t.q_stride_token = qst;
  t.q_stride_head = qsh;
  t.out_stride_token = ost;
  t.out_stride_head = osh;
  const treeverify::Plan plan = tvtest::plan_for(c);

  treeverify::VerifyTensors bad = t;
  bad.kv_cache = nullptr;
  EXPECT_EQ(cpu_reference_run(plan, bad).code(), treeverify::StatusCode::kInvalidArgument);
  for (uint16_t v : out) ASSERT_EQ(v, 0x7e00);
  for (float v : lse) ASSERT_EQ(v, 12345.f);

  ASSERT_TRUE(cpu_reference_run(plan, t).ok());
  for (int64_t row = 0; row < total_q; ++row) {
    for (int h = 0; h < heads; ++h) {
      const int64_t ref = row * heads + h;
      EXPECT_EQ(lse[ref], static_cast<float>(r.lse[ref]));
      for (int col = 0; col < kVDim; ++col) {
        ASSERT_EQ(out[row * ost + h * osh + col],
                  float_to_half(DType::kFP16, static_cast<float>(r.out[ref * kVDim + col])));
      }
    }
    for (int64_t col = 0; col < ost; ++col) {  // padding untouched
      const int64_t in_head = col % osh;
      if (col >= heads * osh || in_head >= kVDim) ASSERT_EQ(out[row * ost + col], 0x7e00) << col;
    }
  }
  t.lse = nullptr;
  EXPECT_TRUE(cpu_reference_run(plan, t).ok());
}

}  // namespace
