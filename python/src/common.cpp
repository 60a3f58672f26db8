// Status -> exception translation and the argument checks declared in common.h.
#include "common.h"

#include <fmt/format.h>

namespace tvpy {

using treeverify::DType;
using treeverify::Status;
using treeverify::StatusCode;
namespace dl = nb::dlpack;

void raise_status(const Status& status) {
  if (status.code() == StatusCode::kInvalidArgument)
    throw nb::value_error(status.to_string().c_str());
  throw StatusError(status.to_string());
}

namespace {
std::string message(const char* arg, const std::string& detail) {
  return Status(StatusCode::kInvalidArgument, fmt::format("argument '{}': {}", arg, detail))
      .to_string();
}
}  // namespace

void raise_value(const char* arg, const std::string& detail) {
  throw nb::value_error(message(arg, detail).c_str());
}
void raise_type(const char* arg, const std::string& detail) {
  throw nb::type_error(message(arg, detail).c_str());
}

std::string location_name(const Location& loc) {
  return loc.cuda() ? fmt::format("cuda:{}", loc.device_id) : std::string("cpu");
}

Location location_of(const nb::ndarray<nb::ro>& a, const char* arg) {
  const int32_t type = a.device_type();
  if (type != nb::device::cpu::value && type != nb::device::cuda::value) {
    raise_type(arg, fmt::format("DLPack device type {}; only CPU (1) and CUDA (2) memory is "
                                "accepted",
                                type));
  }
  return {type, type == nb::device::cuda::value ? a.device_id() : 0};
}

void require_location(const nb::ndarray<nb::ro>& a, const char* arg, const Location& where) {
  const Location loc = location_of(a, arg);
  if (!(loc == where)) {
    raise_value(arg, fmt::format("is on {}, expected {} (the device of the plan / of the "
                                 "first tensor)",
                                 location_name(loc), location_name(where)));
  }
}

namespace {
std::string dtype_string(dl::dtype t) {
  const char* code = t.code == uint8_t(dl::dtype_code::Int)      ? "int"
                     : t.code == uint8_t(dl::dtype_code::UInt)   ? "uint"
                     : t.code == uint8_t(dl::dtype_code::Float)  ? "float"
                     : t.code == uint8_t(dl::dtype_code::Bfloat) ? "bfloat"
                     : t.code == uint8_t(dl::dtype_code::Bool)   ? "bool"
                     : t.code == uint8_t(dl::dtype_code::Float8_E4M3FN) ? "float8_e4m3fn"
                                                                 : "code";
  if (t.code == uint8_t(dl::dtype_code::Float8_E4M3FN) && t.bits == 8 && t.lanes == 1) return code;
  return fmt::format("{}{}{}", code, t.bits, t.lanes == 1 ? "" : fmt::format("x{}", t.lanes));
}
bool is_bf16(dl::dtype t) { return t == dl::dtype{uint8_t(dl::dtype_code::Bfloat), 16, 1}; }
bool is_fp16(dl::dtype t) { return t == dl::dtype{uint8_t(dl::dtype_code::Float), 16, 1}; }
bool is_u16(dl::dtype t) { return t == nb::dtype<uint16_t>(); }
}  // namespace

DType parse_dtype(const std::string& name) {
  if (name == "bf16" || name == "bfloat16") return DType::kBF16;
  if (name == "fp16" || name == "float16") return DType::kFP16;
  raise_value("dtype", fmt::format("'{}' (expected 'bf16' or 'fp16')", name));
}

void require_half(const nb::ndarray<nb::ro>& a, const char* arg, DType dtype) {
  const dl::dtype t = a.dtype();
  const bool match = dtype == DType::kBF16 ? is_bf16(t) : is_fp16(t);
  if (!match && !is_u16(t)) {
    raise_type(arg, fmt::format("dtype {}, expected {} (or uint16 holding its bits)",
                                dtype_string(t), treeverify::dtype_name(dtype)));
  }
}

DType half_dtype_of(const nb::ndarray<nb::ro>& a, const char* arg, const std::string& fallback) {
  const dl::dtype t = a.dtype();
  if (is_bf16(t)) return DType::kBF16;
  if (is_fp16(t)) return DType::kFP16;
  if (is_u16(t) && !fallback.empty()) return parse_dtype(fallback);
  raise_type(arg, fmt::format("dtype {}, expected bf16 or fp16 (uint16 bits need dtype='bf16' "
                              "or 'fp16')",
                              dtype_string(t)));
}

void require_e4m3(const nb::ndarray<nb::ro>& a, const char* arg) {
  const dl::dtype t = a.dtype();
  const bool fp8 = t == dl::dtype{uint8_t(dl::dtype_code::Float8_E4M3FN), 8, 1};
  if (!fp8 && t != nb::dtype<uint8_t>()) {
    raise_type(arg, fmt::format("dtype {}, expected float8_e4m3fn (or uint8 holding its bits): "
                                "the plan's kv_dtype is e4m3",
                                dtype_string(t)));
  }
}

void require_float32(const nb::ndarray<nb::ro>& a, const char* arg) {
  if (a.dtype() != nb::dtype<float>())
    raise_type(arg, fmt::format("dtype {}, expected float32", dtype_string(a.dtype())));
}

std::string shape_string(const nb::ndarray<nb::ro>& a) {
  std::string s = "[";
  for (size_t i = 0; i < a.ndim(); ++i) s += fmt::format("{}{}", i ? ", " : "", a.shape(i));
  return s + "]";
}

void require_shape(const nb::ndarray<nb::ro>& a, const char* arg,
                   std::initializer_list<int64_t> shape) {
  bool ok = a.ndim() == shape.size();
  std::string want = "[";
  size_t i = 0;
  for (int64_t d : shape) {
    want += i ? ", " : "";
    want += d < 0 ? std::string("*") : std::to_string(d);
    if (ok && d >= 0 && static_cast<int64_t>(a.shape(i)) != d) ok = false;
    ++i;
  }
  if (!ok) raise_value(arg, fmt::format("shape {}, expected {}]", shape_string(a), want));
}

ByteRange byte_range(const nb::ndarray<nb::ro>& a) {
  if (a.size() == 0) return {};
  const int64_t item = (a.dtype().bits * a.dtype().lanes + 7) / 8;
  int64_t low = 0, high = 0;  // element offsets of the extreme elements
  for (size_t i = 0; i < a.ndim(); ++i) {
    const int64_t span = (static_cast<int64_t>(a.shape(i)) - 1) * a.stride(i);
    (span < 0 ? low : high) += span;
  }
  const auto base = reinterpret_cast<uintptr_t>(a.data());
  return {base + static_cast<uintptr_t>(low * item),
          base + static_cast<uintptr_t>((high + 1) * item)};
}

void require_disjoint(const nb::ndarray<nb::ro>& a, const char* arg,
                      const nb::ndarray<nb::ro>& other, const char* other_name) {
  const ByteRange x = byte_range(a), y = byte_range(other);
  if (x.empty() || y.empty() || x.end <= y.begin || y.end <= x.begin) return;
  raise_value(arg, fmt::format("shares memory with {} (bytes [{:#x}, {:#x}) and [{:#x}, {:#x})); "
                               "an output must not overlap another argument of the call",
                               other_name, x.begin, x.end, y.begin, y.end));
}

void require_contiguous(const nb::ndarray<nb::ro>& a, const char* arg) {
  if (a.size() == 0) return;  // nothing is addressed; exporters give such arrays any strides
  int64_t expected = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expected) {
      raise_value(arg, fmt::format("is not contiguous (shape {}, stride {} in dimension {}, "
                                   "expected {}); pass a contiguous array",
                                   shape_string(a), a.stride(i), i, expected));
    }
    expected *= static_cast<int64_t>(a.shape(i));
  }
}

// Strides of a [rows, H, width] tensor whose last dimension must be contiguous; 0 (the
// library's "contiguous") where an extent of 1 makes the stride meaningless. The binding's one
// place that turns an array's layout into VerifyTensors and GraphLayer strides.
void half_strides(const nb::ndarray<nb::ro>& a, const char* arg, int64_t* token, int64_t* head) {
  *token = *head = 0;
  if (a.size() == 0) return;  // nothing is read or written
  if (a.stride(2) != 1 && a.shape(2) != 1)
    raise_value(arg, fmt::format("last dimension has stride {}, expected 1 (shape {})", a.stride(2),
                                 shape_string(a)));
  for (size_t i = 0; i < 2; ++i) {
    if (a.shape(i) > 1 && a.stride(i) <= 0)
      raise_value(arg, fmt::format("stride {} in dimension {} (broadcast or reversed views are "
                                   "not accepted)",
                                   a.stride(i), i));
  }
  *token = a.shape(0) > 1 ? a.stride(0) : 0;
  *head = a.shape(1) > 1 ? a.stride(1) : 0;
}

}  // namespace tvpy
