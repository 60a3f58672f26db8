// cuda's error paths and strided tensors: host memory, a missing configuration, a short
// workspace, and q and out tensors with padded rows that must give the contiguous result.
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
  GpuOptions o;
  o.backend = Backend::kCuda;
  ASSERT_TRUE(plan(host.problem(), o, o.tuning, &p).ok());
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
  GpuOptions o;
  o.backend = Backend::kCuda;
  o.tuning.config_arch = 75;  // no mma.sync bf16 there: no tile configuration
  const Status s = plan(host.problem(), o, o.tuning, &p);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported) << s.to_string();
  EXPECT_NE(s.message().find("sm_75"), std::string::npos) << s.message();

  o.tuning.config_arch = 0;
  ASSERT_TRUE(plan(host.problem(), o, o.tuning, &p).ok());
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
  GpuOptions o;
  o.backend = Backend::kCuda;
  ASSERT_TRUE(plan(host.problem(), o, o.tuning, &p).ok());
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

// q with padding between heads and between tokens (a slice of a wider projection output, as
// engines pass it): every variant that reads q (16, 32 and 64 rows a CTA, split and one pass)
// gives the contiguous run's result bit for bit, and never reads the padding (filled with
// NaN, which would reach out under the non-finite policy).
TEST(GpuErrors, StridedQueryMatchesContiguous) {
  TV_SKIP_WITHOUT_GPU();
  for (int rows : {16, 32, 64}) {
    for (int chunk : {0, 32}) {
      CaseSpec spec = small_spec();
      spec.name = fmt::format("strided q, {} rows a CTA, chunk {}", rows, chunk);
      spec.tree_sizes = {rows == 16 ? 1 : 17};
      SCOPED_TRACE(spec.name);
      const HostCase host = make_case(spec);
      GpuOptions o;
      o.backend = Backend::kCuda;
      o.tuning.rows_per_cta = rows;
      o.tuning.chunk_tokens = chunk;
      const GpuResult ref = run_on_gpu(host, o);
      Plan p;
      ASSERT_TRUE(plan(host.problem(), o, o.tuning, &p).ok());
      const int64_t heads = host.spec.num_heads, head_stride = kQKDim + 24;
      const int64_t token_stride = (heads + 2) * head_stride;
      const size_t padded = static_cast<size_t>(host.total_q()) * token_stride;
      std::vector<uint16_t> q(padded, 0x7fff);  // NaN in bf16 and fp16
      for (int64_t t = 0; t < host.total_q(); ++t) {
        for (int64_t h = 0; h < heads; ++h) {
          std::memcpy(&q[t * token_stride + h * head_stride], &host.q[(t * heads + h) * kQKDim],
                      kQKDim * 2);
        }
      }
      void* dq = nullptr;
      ASSERT_EQ(cudaMalloc(&dq, padded * 2), cudaSuccess);
      ASSERT_EQ(cudaMemcpy(dq, q.data(), padded * 2, cudaMemcpyHostToDevice), cudaSuccess);
      DeviceCase dev(host);
      dev.ensure_workspace(p.workspace_bytes);
      dev.poison_outputs();
      VerifyTensors t = dev.tensors();
      t.q = dq;
      t.q_stride_token = token_stride;
      t.q_stride_head = head_stride;
      const Status rs = run(p, t, dev.workspace(), dev.workspace_bytes(), nullptr);
      EXPECT_TRUE(rs.ok()) << rs.to_string();
      std::vector<uint16_t> out;
      std::vector<float> lse;
      dev.download(&out, &lse);
      cudaFree(dq);
      ASSERT_EQ(out.size(), ref.out.size());
      EXPECT_EQ(0, std::memcmp(out.data(), ref.out.data(), out.size() * 2)) << p.kernel;
      EXPECT_EQ(0, std::memcmp(lse.data(), ref.lse.data(), lse.size() * 4)) << p.kernel;
    }
  }
}

}  // namespace
}  // namespace treeverify::testing
