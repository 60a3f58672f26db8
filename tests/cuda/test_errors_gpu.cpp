// cuda-mma's error paths and strided outputs: host memory, a missing configuration, a short
// workspace, and an out tensor with padded rows that must equal the contiguous result.
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>

#include "gpu_check.h"

namespace treeverify::testing {
namespace {

CaseSpec small_spec() {
  return CaseSpec{.name = "errors",
                  .num_heads = 4,
                  .tree_sizes = {9},
                  .prefix_lens = {300},
                  .page_size = 16,
                  .seed = fresh_seed()};
}

TEST(GpuErrors, HostMemoryIsAClearError) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase host = make_case(small_spec());
  Plan p;
  PlanOptions o;
  o.backend = Backend::kCudaMma;
  ASSERT_TRUE(plan(host.problem(), o, &p).ok());
  DeviceCase dev(host);
  dev.ensure_workspace(p.workspace_bytes);
  dev.poison_outputs();
  VerifyTensors t = dev.tensors();
  t.q = host.q.data();  // host memory where device memory belongs
  const Status s = run(p, t, dev.workspace(), dev.workspace_bytes(), nullptr);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  EXPECT_NE(s.message().find("'q'"), std::string::npos) << s.message();
  // A failed call writes nothing: the poison (all bits set) is still everywhere.
  std::vector<uint16_t> out;
  std::vector<float> lse;
  dev.download(&out, &lse);
  for (uint16_t v : out) ASSERT_EQ(v, 0xffff);
  for (float v : lse) ASSERT_TRUE(std::isnan(v));
}

TEST(GpuErrors, UnknownConfigurationAndShortWorkspace) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase host = make_case(small_spec());
  Plan p;
  PlanOptions o;
  o.backend = Backend::kCudaMma;
  o.force_config_arch = 75;  // no mma.sync bf16 there: no tile configuration
  const Status s = plan(host.problem(), o, &p);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("sm_75"), std::string::npos) << s.message();

  o.force_config_arch = 0;
  ASSERT_TRUE(plan(host.problem(), o, &p).ok());
  ASSERT_GT(p.workspace_bytes, 0u);
  DeviceCase dev(host);
  dev.ensure_workspace(p.workspace_bytes);
  const Status w = run(p, dev.tensors(), dev.workspace(), p.workspace_bytes - 1, nullptr);
  EXPECT_EQ(w.code(), StatusCode::kInvalidArgument) << w.to_string();
}

// out with 3 padding heads per token: the written rows equal the contiguous run bit for bit,
// and the padding is left as it was.
TEST(GpuErrors, StridedOutputMatchesContiguous) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase host = make_case(small_spec());
  const GpuResult ref = run_on_gpu(host, {});
  Plan p;
  PlanOptions o;
  o.backend = Backend::kCudaMma;
  ASSERT_TRUE(plan(host.problem(), o, &p).ok());
  const int64_t heads = host.spec.num_heads, pad = 3, stride = (heads + pad) * kVDim;
  const size_t padded = static_cast<size_t>(host.total_q()) * stride;
  void* out = nullptr;
  ASSERT_EQ(cudaMalloc(&out, padded * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(out, 0x7b, padded * 2), cudaSuccess);
  DeviceCase dev(host);
  dev.ensure_workspace(p.workspace_bytes);
  VerifyTensors t = dev.tensors();
  t.out = out;
  t.out_stride_token = stride;
  ASSERT_TRUE(run(p, t, dev.workspace(), dev.workspace_bytes(), nullptr).ok());
  std::vector<uint16_t> got(padded);
  ASSERT_EQ(cudaMemcpy(got.data(), out, padded * 2, cudaMemcpyDeviceToHost), cudaSuccess);
  cudaFree(out);
  for (int64_t q = 0; q < host.total_q(); ++q) {
    EXPECT_EQ(0, std::memcmp(&got[q * stride], &ref.out[q * heads * kVDim], heads * kVDim * 2))
        << "token " << q;
    for (int64_t i = heads * kVDim; i < stride; ++i) ASSERT_EQ(got[q * stride + i], 0x7b7b);
  }
}

}  // namespace
}  // namespace treeverify::testing
