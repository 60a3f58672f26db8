// The lossless demo on cuda-mma (issue 4 item 4 on the GPU): device KV pools, verify through
// the portable kernel, and commit_kv_paged_cuda for page_size > 1.
#include <gtest/gtest.h>

#include "demo/demo.h"
#include "gpu_check.h"

namespace treeverify::demo {
namespace {

// The GPU sums in fp32 and rounds P to the 16-bit type, so logits differ from the dense
// float64 path by rounding (~1e-2 in bf16, ~2e-3 in fp16; demo.cpp): equality is required,
// and a failure prints the margin so a near-tie flip is told apart from a bug.
TEST(DemoGpu, MatchesGreedy) {
  TV_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (int32_t page_size : {1, 16, 64}) {
      SCOPED_TRACE(::testing::Message() << dtype_name(dtype) << " page_size " << page_size);
      DemoOptions o;
      o.backend = Backend::kCudaMma;
      o.page_size = page_size;
      o.model.dtype = dtype;
      o.tokens = 64;
      DemoReport r;
      const Status s = run_demo(o, &r);
      ASSERT_TRUE(s.ok()) << s.to_string();
      EXPECT_TRUE(r.passed) << "first mismatch " << r.first_mismatch << ", margin "
                            << r.mismatch_margin << ", logit differences " << r.max_logit_diff
                            << " / " << r.max_logit_diff_dense;
      EXPECT_LT(r.max_logit_diff, 0.1);
      EXPECT_GT(r.acceptance_length, 1.5);
    }
  }
}

}  // namespace
}  // namespace treeverify::demo
