// quantize_e4m3 (kv_store.h): the e4m3 KV write shared by the paged and the dense store, so
// both hold the same codes.
#include <algorithm>
#include <cmath>

#include "core/check.h"
#include "core/fp8_rounding.h"
#include "demo/kv_store.h"
#include "treeverify/half.h"

namespace treeverify::demo {

Status quantize_e4m3(DType dtype, std::span<const uint16_t> rows, float kv_scale,
                     std::span<uint8_t> codes, float* peak) {
  TV_REQUIRE(std::isfinite(kv_scale) && kv_scale > 0.f, "kv_scale", "{}", kv_scale);
  TV_REQUIRE(codes.size() == rows.size(), "codes", "{} values for {}", codes.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    // A float32 division, as the repository's e4m3 test cases quantize (src/testing/cases.cpp).
    const float value = half_to_float(dtype, rows[i]) / kv_scale;
    const float magnitude = std::fabs(value);
    TV_REQUIRE(magnitude <= cuda::kE4M3Max, "kv_scale",
               "{}: KV value {} (column {}) is {} x kv_scale, which would saturate at {}", kv_scale,
               half_to_float(dtype, rows[i]), i % kQKDim, magnitude, cuda::kE4M3Max);
    *peak = std::max(*peak, magnitude);
    codes[i] = float_to_e4m3(value);
  }
  return Status::Ok();
}

}  // namespace treeverify::demo
