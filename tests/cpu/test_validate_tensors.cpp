// validate_tensors: null buffers, strides that overlap or misalign rows, misaligned pointers
// are rejected by name and value; contiguous and padded layouts pass.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/validate.h"
#include "cpu_test_util.h"
#include "testing/cases.h"

namespace treeverify {
namespace {

using detail::validate_tensors;
using testing::CaseSpec;
using testing::HostCase;
using testing::make_case;

constexpr int32_t kHeads = 4;

// The shape of a valid case as a plan, without plan(), so these tests need only validation.
Plan plan_for(const HostCase& c) {
  EXPECT_TRUE(detail::validate_problem(c.problem(), nullptr).ok());
  return tvtest::plan_for(c, {.backend = Backend::kCpuReference});
}

class ValidateTensors : public ::testing::Test {
 protected:
  ValidateTensors()
      : c_(make_case(CaseSpec{.name = "tensors",
                              .num_heads = kHeads,
                              .tree_sizes = {6, 2},
                              .prefix_lens = {20, 3},
                              .page_size = 8})),
        plan_(plan_for(c_)),
        out_(c_.out_elems()),
        lse_(c_.lse_elems()) {}

  VerifyTensors tensors() { return c_.tensors(out_.data(), lse_.data()); }

  void ExpectInvalid(const VerifyTensors& t, const std::string& arg, const std::string& value) {
    const Status s = validate_tensors(plan_, t);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
    EXPECT_NE(s.message().find("argument '" + arg + "'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(value), std::string::npos) << s.message();
  }

  HostCase c_;
  Plan plan_;
  std::vector<uint16_t> out_;
  std::vector<float> lse_;
};

TEST_F(ValidateTensors, ContiguousHostTensorsAreValid) {
  EXPECT_TRUE(validate_tensors(plan_, tensors()).ok());
  VerifyTensors t = tensors();
  t.lse = nullptr;  // lse is optional
  EXPECT_TRUE(validate_tensors(plan_, t).ok());
}

TEST_F(ValidateTensors, ExplicitAndPaddedStridesAreValid) {
  VerifyTensors t = tensors();
  t.q_stride_head = kQKDim;
  t.q_stride_token = kHeads * kQKDim;
  t.out_stride_head = kVDim;
  t.out_stride_token = kHeads * kVDim;
  EXPECT_TRUE(validate_tensors(plan_, t).ok());
  // Rows padded to 640 / 520 elements and tokens padded by one more row: still aligned.
  t.q_stride_head = 640;
  t.q_stride_token = kHeads * 640 + 64;
  t.out_stride_head = 520;
  t.out_stride_token = 0;  // contiguous over the padded heads
  EXPECT_TRUE(validate_tensors(plan_, t).ok());
}

TEST_F(ValidateTensors, DefaultPlanIsRejected) {
  const Status s = validate_tensors(Plan{}, tensors());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("argument 'plan'"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("num_heads = 0"), std::string::npos) << s.message();
}

TEST_F(ValidateTensors, NullBuffers) {
  const std::string total_q = "total_q = " + std::to_string(plan_.total_q);
  VerifyTensors t = tensors();
  t.q = nullptr;
  ExpectInvalid(t, "q", total_q);
  t = tensors();
  t.kv_cache = nullptr;
  ExpectInvalid(t, "kv_cache", total_q);
  t = tensors();
  t.out = nullptr;
  ExpectInvalid(t, "out", total_q);
  t = tensors();
  t.qo_indptr = nullptr;
  ExpectInvalid(t, "qo_indptr", total_q);
  t = tensors();
  t.kv_len = nullptr;
  ExpectInvalid(t, "kv_len", total_q);
  t = tensors();
  t.kv_page_indptr = nullptr;
  ExpectInvalid(t, "kv_page_indptr", total_q);
  t = tensors();
  t.kv_page_indices = nullptr;
  ExpectInvalid(t, "kv_page_indices", total_q);
  t = tensors();
  t.parents = nullptr;
  ExpectInvalid(t, "parents", total_q);
}

TEST_F(ValidateTensors, NothingIsRequiredWithoutQueryRows) {
  const HostCase empty = make_case(CaseSpec{
      .name = "no rows", .num_heads = kHeads, .tree_sizes = {0, 0}, .prefix_lens = {5, 0}});
  EXPECT_TRUE(validate_tensors(plan_for(empty), VerifyTensors{}).ok());
}

TEST_F(ValidateTensors, MisalignedBasePointers) {
  // One element (2 bytes) past an aligned start: still a valid uint16_t address.
  VerifyTensors t = tensors();
  t.q = c_.q.data() + 1;
  ExpectInvalid(t, "q", "is not 16-byte aligned");
  t = tensors();
  t.kv_cache = c_.kv.data() + 4;
  ExpectInvalid(t, "kv_cache", "is not 16-byte aligned");
  t = tensors();
  t.out = out_.data() + 3;
  ExpectInvalid(t, "out", "is not 16-byte aligned");
  t = tensors();
  t.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(lse_.data()) + 2);
  ExpectInvalid(t, "lse", "is not 4-byte aligned");
}

TEST_F(ValidateTensors, HeadStrideBelowRowWidth) {
  VerifyTensors t = tensors();
  t.q_stride_head = 512;
  ExpectInvalid(t, "q_stride_head", "q_stride_head = 512 with row width 576");
  t = tensors();
  t.out_stride_head = 256;
  ExpectInvalid(t, "out_stride_head", "out_stride_head = 256 with row width 512");
  t = tensors();
  t.q_stride_head = -576;
  ExpectInvalid(t, "q_stride_head", "q_stride_head = -576");
}

TEST_F(ValidateTensors, TokenStrideOverlapsHeads) {
  VerifyTensors t = tensors();
  t.q_stride_token = (kHeads - 1) * kQKDim;
  ExpectInvalid(t, "q_stride_token",
                "q_stride_token = " + std::to_string((kHeads - 1) * kQKDim) + " with 4 heads");
  t = tensors();
  t.out_stride_head = 520;
  t.out_stride_token = kHeads * kVDim;  // would fit 512-wide heads, not 520-wide ones
  ExpectInvalid(t, "out_stride_token", "with 4 heads of stride 520");
}

TEST_F(ValidateTensors, StridesMustKeepRows16ByteAligned) {
  VerifyTensors t = tensors();
  t.q_stride_head = 580;  // 1160 bytes
  ExpectInvalid(t, "q_stride_head", "q_stride_head = 580 elements");
  t = tensors();
  t.q_stride_token = kHeads * kQKDim + 4;
  ExpectInvalid(t, "q_stride_token", std::to_string(kHeads * kQKDim + 4) + " elements");
  t = tensors();
  t.out_stride_head = 514;
  ExpectInvalid(t, "out_stride_head", "out_stride_head = 514 elements");
  t = tensors();
  t.out_stride_token = kHeads * kVDim + 2;
  ExpectInvalid(t, "out_stride_token", std::to_string(kHeads * kVDim + 2) + " elements");
}

TEST_F(ValidateTensors, StridesWhoseOffsetsOverflowAreRejected) {
  VerifyTensors t = tensors();
  t.q_stride_token = int64_t{1} << 62;  // aligned, non-overlapping, but 8 rows overflow
  ExpectInvalid(t, "q_stride_token", "with 8 rows");
  t = tensors();
  t.out_stride_head = int64_t{1} << 60;
  ExpectInvalid(t, "out_stride_head", "with 4 heads");
}

}  // namespace
}  // namespace treeverify
