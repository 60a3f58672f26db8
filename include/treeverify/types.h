// Shapes, dtypes and limits of the MLA tree-verify computation (docs/DESIGN.md sections 2-3).
#pragma once

#include <cstdint>

namespace treeverify {

// MLA in absorbed form: one latent KV head per token, shared by all query heads.
inline constexpr int kLatentDim = 512;                // c_kv, also the width of V and out
inline constexpr int kRopeDim = 64;                   // rope part of q and k
inline constexpr int kQKDim = kLatentDim + kRopeDim;  // 576: width of q rows and KV rows
inline constexpr int kVDim = kLatentDim;              // V = the first 512 columns of a KV row

// Limits every backend supports; kernels may declare narrower ones (see supports()).
inline constexpr int kMaxTreeSize = 1024;  // T_b: tree nodes per request
inline constexpr int kMaxHeads = 128;      // H: query heads per call
inline constexpr int kMaxPageSize = 128;   // page_size: a power of two in [1, kMaxPageSize]

// page_size is a power of two in [1, kMaxPageSize].
inline constexpr bool is_valid_page_size(int32_t page_size) {
  return page_size >= 1 && page_size <= kMaxPageSize && (page_size & (page_size - 1)) == 0;
}

enum class DType : int32_t { kBF16 = 0, kFP16 = 1 };

const char* dtype_name(DType dtype);
inline constexpr int dtype_bytes(DType) { return 2; }

// How the KV cache stores its 576 values a token (docs/DESIGN.md section 3).
enum class KvFormat : int32_t {
  kSameAsQ = 0,  // the dtype of q and out: rows of 1152 bytes
  // float8 e4m3 (OCP e4m3fn: no infinities, NaN = 0x7f and 0xff), rows of 576 bytes; real
  // value = stored x kv_scale, one float a call (a layer), as SGLang's and vLLM's
  // --kv-cache-dtype fp8_e4m3 for MLA.
  kE4M3 = 1,
};
const char* kv_format_name(KvFormat format);

// kv_scale of an e4m3 cache: finite, and small enough that every stored value dequantized
// (at most kMaxE4M3 x |kv_scale|) is a finite float32. Past that the float32 backends read an
// infinity where the float64 oracle reads a finite value, so they could not agree on a row
// (cpu gave NaN and cpu-reference inf for kv_scale = 1e37).
inline constexpr float kMaxE4M3 = 448.f;  // the largest finite e4m3 (OCP e4m3fn) value
inline constexpr float kMaxKvScale = 3.40282347e38f / kMaxE4M3;  // FLT_MAX / 448, about 7.6e35
inline constexpr bool is_valid_kv_scale(float kv_scale) {
  return kv_scale >= -kMaxKvScale && kv_scale <= kMaxKvScale;  // false for NaN and +-inf
}
inline constexpr int kv_row_bytes(KvFormat format, DType dtype) {
  return format == KvFormat::kE4M3 ? kQKDim : kQKDim * dtype_bytes(dtype);
}

}  // namespace treeverify
