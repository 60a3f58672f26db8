// The non-finite policy (verify.h) on the CPU backends: the oracle itself, exactly, and
// cpu-reference and cpu (one thread, and four: KV split into chunks and merged) through
// verify_cpu, against what the policy demands (nonfinite_cases.h).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "nonfinite_cases.h"
#include "testing/compare.h"

namespace tvtest {
namespace {

using treeverify::Backend;
using treeverify::PlanOptions;
using treeverify::detail::reference_attention;
using treeverify::detail::ReferenceResult;

constexpr int64_t kPrefixes[] = {37, 3000};  // inside the first tile; long enough to split
constexpr int32_t kPage = 16;

TEST(NonFinite, OracleKeepsTheValueInTheRowsThatSeeIt) {
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (int64_t prefix : kPrefixes) {
      const HostCase clean = leaf_tree_case(3, prefix, kPage, dtype, 11);
      for (const Poison& p : poisons(prefix, kPage)) {
        SCOPED_TRACE(p.what);
        const ReferenceResult want = expected(clean, p, /*round_p=*/false);
        const HostCase bad = poisoned(clean, p);
        ReferenceResult got;
        ASSERT_TRUE(
            reference_attention(plan_for(bad), bad.tensors(nullptr, nullptr), false, &got).ok());
        // Bit for bit: a row the value cannot reach is computed exactly as without it.
        for (size_t r = 0; r < want.lse.size(); ++r) {
          const bool nan_row = std::isnan(want.lse[r]);
          EXPECT_EQ(std::isnan(got.lse[r]), nan_row) << "row " << r;
          if (!nan_row) EXPECT_EQ(got.lse[r], want.lse[r]) << "row " << r;
          for (size_t k = r * treeverify::kVDim; k < (r + 1) * treeverify::kVDim; ++k) {
            if (nan_row ? !std::isnan(got.out[k]) : got.out[k] != want.out[k]) {
              ADD_FAILURE() << "row " << r << " column " << k % treeverify::kVDim << ": "
                            << got.out[k] << ", want " << want.out[k];
              break;
            }
          }
        }
      }
    }
  }
}

TEST(NonFinite, CpuBackendsFollowThePolicy) {
  struct Run {
    Backend backend;
    int threads;
    double out_tol, lse_tol;
  };
  const Run runs[] = {{Backend::kCpuReference, 1, 1e-2, 1e-6},
                      {Backend::kCpu, 1, 1e-2, 2e-5},
                      {Backend::kCpu, 4, 1e-2, 2e-5}};
  for (const Run& run : runs) {
    for (DType dtype : {DType::kBF16, DType::kFP16}) {
      for (int64_t prefix : kPrefixes) {
        const HostCase clean = leaf_tree_case(3, prefix, kPage, dtype, 12);
        for (const Poison& p : poisons(prefix, kPage)) {
          SCOPED_TRACE(fmt::format("{} threads {} prefix {}: {}",
                                   treeverify::backend_name(run.backend), run.threads, prefix,
                                   p.what));
          const ReferenceResult want = expected(clean, p, /*round_p=*/false);
          const HostCase bad = poisoned(clean, p);
          // Finite sentinels, so a row the backend forgot to write cannot pass for NaN.
          std::vector<uint16_t> out(bad.out_elems(), treeverify::float_to_half(dtype, 12345.f));
          std::vector<float> lse(bad.lse_elems(), 12345.f);
          PlanOptions o;
          o.backend = run.backend;
          o.num_threads = run.threads;
          const auto s =
              treeverify::verify_cpu(bad.problem(), bad.tensors(out.data(), lse.data()), o);
          ASSERT_TRUE(s.ok()) << s.to_string();
          const auto c = treeverify::testing::compare_with_reference(dtype, out, lse.data(),
                                                                     want.out, want.lse);
          EXPECT_TRUE(c.ok(run.out_tol, run.lse_tol)) << c.to_string();
        }
      }
    }
  }
}

}  // namespace
}  // namespace tvtest
