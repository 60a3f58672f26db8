// merge_state on the host: SGLang merge_state_v2 semantics (treeverify/merge.h).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/check.h"
#include "treeverify/half.h"
#include "treeverify/merge.h"

namespace treeverify {

Status merge_state_cpu(const MergeStateArgs& args) {
  TV_REQUIRE(args.num_rows >= 0, "num_rows", "num_rows = {}", args.num_rows);
  TV_REQUIRE(args.head_dim > 0, "head_dim", "head_dim = {}", args.head_dim);
  TV_REQUIRE(args.dtype == DType::kBF16 || args.dtype == DType::kFP16, "dtype", "dtype = {}",
             static_cast<int>(args.dtype));
  // Empty tensors from frameworks may carry null data pointers; with no rows nothing is read.
  if (args.num_rows == 0) return Status::Ok();
  TV_REQUIRE(args.v_a != nullptr, "v_a", "null with num_rows = {}", args.num_rows);
  TV_REQUIRE(args.s_a != nullptr, "s_a", "null with num_rows = {}", args.num_rows);
  TV_REQUIRE(args.v_b != nullptr, "v_b", "null with num_rows = {}", args.num_rows);
  TV_REQUIRE(args.s_b != nullptr, "s_b", "null with num_rows = {}", args.num_rows);
  TV_REQUIRE(args.v_out != nullptr, "v_out", "null with num_rows = {}", args.num_rows);

  constexpr float kInf = std::numeric_limits<float>::infinity();
  const int64_t d = args.head_dim;
  const auto* va = static_cast<const uint16_t*>(args.v_a);
  const auto* vb = static_cast<const uint16_t*>(args.v_b);
  auto* vo = static_cast<uint16_t*>(args.v_out);
  for (int64_t r = 0; r < args.num_rows; ++r) {
    // Both lse values are read before anything is written: s_out may alias s_a or s_b.
    const float sa = args.s_a[r], sb = args.s_b[r];
    double wa, wb, s;
    if (std::isnan(sa) || std::isnan(sb) || sa == kInf || sb == kInf) {
      wa = wb = s = std::numeric_limits<double>::quiet_NaN();
    } else if (sa == -kInf && sb == -kInf) {
      wa = wb = 0;
      s = -kInf;
    } else {
      // Weights in double: exp(-inf - m) = 0 drops a side that saw nothing, and the host
      // merge need not mimic the fp32 rounding of the device one.
      const double m = std::max(sa, sb);
      const double ea = std::exp(sa - m), eb = std::exp(sb - m), e = ea + eb;
      wa = ea / e;
      wb = eb / e;
      s = m + std::log(e);
    }
    // Element c of v_a and v_b is read before element c of v_out is written, so v_out may
    // alias either input.
    for (int64_t c = 0; c < d; ++c) {
      const int64_t i = r * d + c;
      const double a = half_to_float(args.dtype, va[i]), b = half_to_float(args.dtype, vb[i]);
      // 0 * inf would be NaN: a side with weight 0 contributes exactly nothing.
      const double v = (wa == 0 ? 0 : wa * a) + (wb == 0 ? 0 : wb * b);
      vo[i] = float_to_half(args.dtype, static_cast<float>(v));
    }
    if (args.s_out != nullptr) args.s_out[r] = static_cast<float>(s);
  }
  return Status::Ok();
}

}  // namespace treeverify
