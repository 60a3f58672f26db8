// The CPU fast backend (fp32, BLAS, split-KV threads) against the float64 oracle: random trees
// of every shape, ragged batches, every page size, both dtypes, row blocks and KV splits.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "cpu/cpu_backend.h"
#include "cpu_test_util.h"
#include "testing/compare.h"

namespace {

using treeverify::DType;
using treeverify::kVDim;
using treeverify::PlanOptions;
using treeverify::detail::cpu_fast_run;
using treeverify::detail::reference_attention;
using treeverify::detail::ReferenceResult;
using treeverify::testing::Comparison;
using treeverify::testing::TreeShape;
using tvtest::CaseSpec;
using tvtest::HostCase;

// Bounds for fast (fp32 products, P in fp32 unless round_p) against the oracle with the same
// round_p. The out error is dominated by rounding out itself to 16 bits (bf16: 2^-9 relative
// per element, so about 1.3e-3 over a row; fp16: 8x smaller), far inside docs/BENCH.md's 1e-2.
double out_tol(DType dtype) { return dtype == DType::kBF16 ? 2.5e-3 : 5e-4; }
// Absolute, natural log. Each score is a 576-term fp32 dot product of N(0, 1) values: its
// rounding error is about sqrt(576) * ulp(32) / 2 * 0.1447 = 7e-6, which is what lse inherits
// (measured here: at most 6e-6). docs/BENCH.md's 1e-5 leaves too little room for another CPU's
// BLAS kernels, which round differently; 2e-5 still catches any real softmax error (e.g. a
// normaliser summing rounded p's is off by 3e-5 to 8e-4).
constexpr double kLseTol = 2e-5;

// Runs fast and the oracle (same round_p) and compares them with the shared helper, which also
// counts NaN/inf in out and lse rows that are NaN or -inf on one side only.
Comparison run_and_compare(const HostCase& c, PlanOptions options) {
  const treeverify::Plan plan = tvtest::plan_for(c, options);
  ReferenceResult ref;
  const auto rs = reference_attention(plan, c.tensors(nullptr, nullptr), options.round_p, &ref);
  EXPECT_TRUE(rs.ok()) << rs.to_string();
  std::vector<uint16_t> out(c.out_elems(), 0x7fff);  // NaN poison in both dtypes
  std::vector<float> lse(c.lse_elems(), NAN);
  const auto fs = cpu_fast_run(plan, c.tensors(out.data(), lse.data()));
  EXPECT_TRUE(fs.ok()) << fs.to_string();
  return treeverify::testing::compare_with_reference(c.spec.dtype, out, lse.data(), ref.out,
                                                     ref.lse);
}

CaseSpec random_spec(std::mt19937_64& rng, int page_size, DType dtype, int trial) {
  const TreeShape shapes[] = {TreeShape::kRandom, TreeShape::kChain, TreeShape::kStar,
                              TreeShape::kDeep, TreeShape::kBushy};
  CaseSpec spec;
  spec.num_heads = 1 + static_cast<int>(rng() % 4);
  spec.page_size = page_size;
  spec.dtype = dtype;
  spec.shape = shapes[trial % 5];
  spec.seed = rng();
  const int batch = 1 + static_cast<int>(rng() % 3);
  for (int b = 0; b < batch; ++b) {
    spec.tree_sizes.push_back(1 + static_cast<int32_t>(rng() % 24));
    // Prefixes from 0 to a few tiles, rarely a multiple of a page or a tile.
    spec.prefix_lens.push_back(b == 0 && trial % 4 == 0 ? 0 : static_cast<int64_t>(rng() % 400));
  }
  return spec;
}

TEST(CpuFast, RandomTreesEveryPageSizeBothDtypes) {
  std::mt19937_64 rng(11);
  int trial = 0;
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (int page = 1; page <= 128; page *= 2, ++trial) {
      const CaseSpec spec = random_spec(rng, page, dtype, trial);
      const HostCase c = treeverify::testing::make_case(spec);
      PlanOptions options;
      options.num_threads = 1 + trial % 3;
      const Comparison e = run_and_compare(c, options);
      EXPECT_TRUE(e.ok(out_tol(dtype), kLseTol))
          << "page " << page << " trial " << trial << ": " << e.to_string();
    }
  }
}

// With round_p both sides round P to the dtype before P.V and sum the unrounded p's.
TEST(CpuFast, RoundPMatchesTheRoundingOracle) {
  std::mt19937_64 rng(12);
  for (int trial = 0; trial < 6; ++trial) {
    const DType dtype = trial % 2 ? DType::kFP16 : DType::kBF16;
    const HostCase c = treeverify::testing::make_case(random_spec(rng, 16, dtype, trial));
    PlanOptions options;
    options.round_p = true;
    options.num_threads = 2;
    const Comparison e = run_and_compare(c, options);
    EXPECT_TRUE(e.ok(out_tol(dtype), kLseTol)) << trial << ": " << e.to_string();
  }
}

// One request long enough to be split over the KV on several threads, with more rows than a
// row block (7 heads x 40 nodes = 280), and trees that straddle tile boundaries.
TEST(CpuFast, KvSplitsRowBlocksAndTileBoundaries) {
  struct Shape {
    int heads, nodes;
    int64_t prefix;
  };
  const Shape shapes[] = {{7, 40, 2000}, {2, 20, 120}, {2, 20, 128}, {1, 200, 0}, {3, 1, 3001}};
  for (const Shape& s : shapes) {
    for (int threads : {1, 4}) {
      CaseSpec spec;
      spec.num_heads = s.heads;
      spec.tree_sizes = {s.nodes};
      spec.prefix_lens = {s.prefix};
      spec.page_size = 32;
      spec.seed = 77 + s.nodes;
      PlanOptions options;
      options.num_threads = threads;
      const Comparison e = run_and_compare(treeverify::testing::make_case(spec), options);
      EXPECT_TRUE(e.ok(out_tol(spec.dtype), kLseTol))
          << s.heads << "x" << s.nodes << " L " << s.prefix << ": " << e.to_string();
    }
  }
}

// Strided q and out give the contiguous result bit for bit and leave the padding alone; a null
// lse is allowed; a request with no tree nodes is skipped; a failed call writes nothing.
TEST(CpuFast, StridesNullLseAndNothingWrittenOnFailure) {
  CaseSpec spec;
  spec.num_heads = 3;
  spec.tree_sizes = {5, 0, 3};
  spec.prefix_lens = {300, 40, 17};
  spec.page_size = 8;
  const HostCase c = treeverify::testing::make_case(spec);
  const int heads = spec.num_heads, total_q = c.total_q();
  const Comparison e = run_and_compare(c, {.num_threads = 2});
  EXPECT_TRUE(e.ok(out_tol(spec.dtype), kLseTol)) << e.to_string();
  const treeverify::Plan plan = tvtest::plan_for(c, {.num_threads = 2});
  std::vector<uint16_t> dense(c.out_elems());
  std::vector<float> lse(c.lse_elems());
  ASSERT_TRUE(cpu_fast_run(plan, c.tensors(dense.data(), lse.data())).ok());

  const int64_t qsh = 600, qst = heads * qsh + 16, osh = 528, ost = heads * osh + 24;
  std::vector<uint16_t> q(total_q * qst, 0), out(total_q * ost, 0x7e00);
  for (int64_t row = 0; row < total_q; ++row) {
    for (int h = 0; h < heads; ++h) {
      std::copy_n(&c.q[(row * heads + h) * treeverify::kQKDim], treeverify::kQKDim,
                  &q[row * qst + h * qsh]);
    }
  }
  treeverify::VerifyTensors t = c.tensors(out.data(), nullptr);
  t.q = q.data();
  t.q_stride_token = qst;
  t.q_stride_head = qsh;
  t.out_stride_token = ost;
  t.out_stride_head = osh;
  treeverify::VerifyTensors bad = t;
  bad.parents = nullptr;
  EXPECT_EQ(cpu_fast_run(plan, bad).code(), treeverify::StatusCode::kInvalidArgument);
  for (uint16_t v : out) ASSERT_EQ(v, 0x7e00);

  ASSERT_TRUE(cpu_fast_run(plan, t).ok());
  for (int64_t row = 0; row < total_q; ++row) {
    for (int64_t col = 0; col < ost; ++col) {
      const int64_t h = col / osh, in_head = col % osh;
      const uint16_t got = out[row * ost + col];
      if (h < heads && in_head < kVDim) {
        ASSERT_EQ(got, dense[(row * heads + h) * kVDim + in_head]) << row << " " << col;
      } else {
        ASSERT_EQ(got, 0x7e00) << "padding " << row << " " << col;
      }
    }
  }
}

// Head strides given and token strides left 0 (contiguous): a token is then H head strides,
// not H rows of 576 / 512, on both CPU backends (they once disagreed with validation and the
// CUDA launch on this).
TEST(CpuFast, HeadStridesAloneMeanTokensOfHHeadStrides) {
  CaseSpec spec;
  spec.num_heads = 3;
  spec.tree_sizes = {4, 2};
  spec.prefix_lens = {70, 20};
  spec.page_size = 8;
  const HostCase c = treeverify::testing::make_case(spec);
  const int heads = spec.num_heads, total_q = c.total_q();
  const int64_t qsh = 600, osh = 520;
  std::vector<uint16_t> q(total_q * heads * qsh, 0x7e00);  // NaN padding: read, it shows
  for (int64_t row = 0; row < total_q; ++row)
    for (int h = 0; h < heads; ++h)
      std::copy_n(&c.q[(row * heads + h) * treeverify::kQKDim], treeverify::kQKDim,
                  &q[(row * heads + h) * qsh]);
  for (treeverify::Backend backend :
       {treeverify::Backend::kCpu, treeverify::Backend::kCpuReference}) {
    treeverify::Plan plan;
    ASSERT_TRUE(treeverify::plan(c.problem(), {.backend = backend, .num_threads = 2}, &plan).ok());
    std::vector<uint16_t> dense(c.out_elems()), out(total_q * heads * osh, 0x7e00);
    std::vector<float> lse(c.lse_elems()), lse2(c.lse_elems());
    std::vector<char> ws(plan.workspace_bytes);
    const treeverify::VerifyTensors dense_t = c.tensors(dense.data(), lse.data());
    ASSERT_TRUE(treeverify::run(plan, dense_t, ws.data(), ws.size()).ok());
    treeverify::VerifyTensors t = c.tensors(out.data(), lse2.data());
    t.q = q.data();
    t.q_stride_head = qsh;
    t.out_stride_head = osh;
    const treeverify::Status st = treeverify::run(plan, t, ws.data(), ws.size());
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(lse, lse2) << treeverify::backend_name(backend);
    for (int64_t r = 0; r < total_q * heads; ++r) {
      ASSERT_TRUE(std::equal(&dense[r * kVDim], &dense[(r + 1) * kVDim], &out[r * osh]))
          << treeverify::backend_name(backend) << " row " << r;
      for (int64_t i = kVDim; i < osh; ++i) ASSERT_EQ(out[r * osh + i], 0x7e00);
    }
  }
}

// plan() + run() reach the same backends: bit-identical to calling them directly.
TEST(CpuFast, DispatchRunsTheSameBackends) {
  CaseSpec spec;
  spec.num_heads = 2;
  spec.tree_sizes = {6, 2};
  spec.prefix_lens = {150, 9};
  spec.page_size = 16;
  const HostCase c = treeverify::testing::make_case(spec);
  for (treeverify::Backend backend :
       {treeverify::Backend::kCpu, treeverify::Backend::kCpuReference}) {
    const PlanOptions options{.backend = backend, .num_threads = 2};
    treeverify::Plan plan;
    ASSERT_TRUE(treeverify::plan(c.problem(), options, &plan).ok());
    std::vector<uint16_t> out(c.out_elems()), direct(c.out_elems());
    std::vector<float> lse(c.lse_elems()), direct_lse(c.lse_elems());
    ASSERT_TRUE(treeverify::run(plan, c.tensors(out.data(), lse.data()), nullptr, 0).ok());
    const auto t = c.tensors(direct.data(), direct_lse.data());
    const treeverify::Plan hand = tvtest::plan_for(c, options);
    ASSERT_TRUE((backend == treeverify::Backend::kCpu
                     ? cpu_fast_run(hand, t)
                     : treeverify::detail::cpu_reference_run(hand, t))
                    .ok());
    EXPECT_EQ(out, direct) << treeverify::backend_name(backend);
    EXPECT_EQ(lse, direct_lse) << treeverify::backend_name(backend);
  }
}

// num_threads is capped at the hardware threads this process may use (issue 52: 1000 threads
// at H=64, T=64, L=8192 took 2.1 GB and 5.4 s where 2 took 94 MB and 0.9 s, and 10000 ran for
// minutes): any larger count runs exactly what that many threads run, bit for bit; a negative
// count is refused by plan().
TEST(CpuFast, ThreadsAreCappedAtTheHardware) {
  using treeverify::detail::cpu_threads;
  const int hardware = cpu_threads(0);
  ASSERT_GE(hardware, 1);
  EXPECT_EQ(cpu_threads(1), 1);
  EXPECT_EQ(cpu_threads(hardware), hardware);
  EXPECT_EQ(cpu_threads(hardware + 1), hardware);
  EXPECT_EQ(cpu_threads(1000), std::min(hardware, 1000));
  EXPECT_EQ(cpu_threads(INT32_MAX), hardware);

  CaseSpec spec;
  spec.num_heads = 8;
  spec.tree_sizes = {16, 3};
  spec.prefix_lens = {3000, 700};
  spec.page_size = 16;
  const HostCase c = treeverify::testing::make_case(spec);
  auto run_with = [&](int threads, std::vector<uint16_t>* out, std::vector<float>* lse) {
    out->assign(c.out_elems(), 0x7fff);
    lse->assign(c.lse_elems(), NAN);
    treeverify::Plan plan;
    const PlanOptions options{.backend = treeverify::Backend::kCpu, .num_threads = threads};
    ASSERT_TRUE(treeverify::plan(c.problem(), options, &plan).ok());
    ASSERT_TRUE(treeverify::run(plan, c.tensors(out->data(), lse->data()), nullptr, 0).ok());
  };
  std::vector<uint16_t> want, got;
  std::vector<float> want_lse, got_lse;
  run_with(hardware, &want, &want_lse);
  for (int threads : {hardware + 1, 1 << 20, INT32_MAX}) {
    run_with(threads, &got, &got_lse);
    EXPECT_EQ(got, want) << threads << " threads";
    EXPECT_EQ(got_lse, want_lse) << threads << " threads";
  }

  treeverify::Plan plan;
  const treeverify::Status s = treeverify::plan(
      c.problem(), {.backend = treeverify::Backend::kCpu, .num_threads = -1}, &plan);
  EXPECT_EQ(s.code(), treeverify::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("argument 'options.num_threads': num_threads = -1"), std::string::npos)
      << s.message();
}

// Not a correctness test: prints the time of docs/BENCH.md's H=8 T=16 L=65536 case (page 64) on
// this machine. Run with --gtest_also_run_disabled_tests.
TEST(CpuFast, DISABLED_Speed) {
  CaseSpec spec;
  spec.num_heads = 8;
  spec.tree_sizes = {16};
  spec.prefix_lens = {65536};
  spec.page_size = 64;
  const HostCase c = treeverify::testing::make_case(spec);
  const treeverify::Plan plan = tvtest::plan_for(c);
  std::vector<uint16_t> out(c.out_elems());
  std::vector<float> lse(c.lse_elems());
  const auto t = c.tensors(out.data(), lse.data());
  ASSERT_TRUE(cpu_fast_run(plan, t).ok());  // warm-up
  std::vector<double> ms;
  for (int i = 0; i < 5; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_TRUE(cpu_fast_run(plan, t).ok());
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double kvl = c.kv_len[0], bytes = kvl * treeverify::kQKDim * 2;
  const double flops = 2.0 * 16 * 8 * kvl * (treeverify::kQKDim + kVDim);
  std::printf("cpu H=8 T=16 L=65536 page 64: median %.2f ms, %.2f GB/s, %.1f GFLOP/s\n", ms[2],
              bytes / ms[2] / 1e6, flops / ms[2] / 1e6);
}

}  // namespace
