// Shared by the binding files: turning Status into Python exceptions, and the checks every
// array argument goes through before its pointer reaches the library (device, dtype, shape,
// layout), each naming the argument in the library's message format.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "treeverify/status.h"
#include "treeverify/types.h"

namespace tvpy {

namespace nb = nanobind;

// Any framework, device and dtype: each argument is checked by hand so that a mismatch raises
// an error naming it, instead of nanobind's generic "incompatible function arguments".
using InArray = nb::ndarray<nb::ro>;  // read-only inputs (q, kv_cache, ...)
using OutArray = nb::ndarray<>;       // written in place (out, lse, a committed KV cache)

// Host int32 vector argument: the Python wrappers convert whatever the user passed.
using HostI32 = nb::ndarray<const int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Raised for every non-ok Status other than kInvalidArgument (which raises ValueError);
// registered in Python as treeverify.Error, a RuntimeError.
struct StatusError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Raises ValueError (kInvalidArgument) or treeverify.Error with Status::to_string().
[[noreturn]] void raise_status(const treeverify::Status& status);
inline void check(const treeverify::Status& status) {
  if (!status.ok()) raise_status(status);
}
// "invalid argument: argument 'NAME': DETAIL", as the library words its own checks.
[[noreturn]] void raise_value(const char* arg, const std::string& detail);
[[noreturn]] void raise_type(const char* arg, const std::string& detail);

// Where an array lives: device_type is kDLCPU (1) or kDLCUDA (2); id the CUDA ordinal.
struct Location {
  int32_t device_type = 1;
  int32_t device_id = 0;
  bool cuda() const { return device_type == nb::device::cuda::value; }
  bool operator==(const Location&) const = default;
};
std::string location_name(const Location& loc);
// CPU or CUDA memory (CUDA host/managed memory counts as neither and is refused).
Location location_of(const nb::ndarray<nb::ro>& a, const char* arg);
void require_location(const nb::ndarray<nb::ro>& a, const char* arg, const Location& where);

// 16-bit storage of `dtype`: bf16 (DLPack kDLBfloat 16), fp16 (kDLFloat 16), or uint16
// holding the bits (numpy has no bf16).
void require_half(const nb::ndarray<nb::ro>& a, const char* arg, treeverify::DType dtype);
// The dtype an array's element type names; uint16 bits need `fallback` ("bf16"/"fp16"/"").
treeverify::DType half_dtype_of(const nb::ndarray<nb::ro>& a, const char* arg,
                                const std::string& fallback);
// An e4m3 KV cache: float8_e4m3fn (DLPack kDLFloat8_e4m3fn) or uint8 holding the bits.
void require_e4m3(const nb::ndarray<nb::ro>& a, const char* arg);
void require_float32(const nb::ndarray<nb::ro>& a, const char* arg);
// Exact shape; -1 matches any extent.
void require_shape(const nb::ndarray<nb::ro>& a, const char* arg,
                   std::initializer_list<int64_t> shape);
std::string shape_string(const nb::ndarray<nb::ro>& a);
// Row-major contiguity (extents of 1 may have any stride).
void require_contiguous(const nb::ndarray<nb::ro>& a, const char* arg);
inline std::span<const int32_t> span_of(const HostI32& a) { return {a.data(), a.shape(0)}; }

// The bytes an array's elements occupy, [begin, end) (empty without elements); strides may be
// negative. Pointers only: a CUDA tensor's range comes from its data pointer, with no sync.
struct ByteRange {
  uintptr_t begin = 0, end = 0;
  bool empty() const { return begin == end; }
  bool operator==(const ByteRange&) const = default;
};
ByteRange byte_range(const nb::ndarray<nb::ro>& a);
// Raises ValueError naming `arg` when its bytes meet those of `other`: a call that writes
// `arg` while it reads `other` (or writes it too) would read back its own partial results.
// Byte ranges, not elements: interleaved views of one buffer are refused as well. Both arrays
// must already be on one device.
void require_disjoint(const nb::ndarray<nb::ro>& a, const char* arg,
                      const nb::ndarray<nb::ro>& other, const char* other_name);

treeverify::DType parse_dtype(const std::string& name);

// A new 1-D numpy array that owns `values` (moved, not copied).
template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<1>> to_numpy(std::vector<T>&& values) {
  auto* heap = new std::vector<T>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<1>>(heap->data(), {heap->size()}, owner);
}
// The same with a 2-D shape [rows, cols]; values.size() == rows * cols.
template <typename T>
nb::ndarray<nb::numpy, T, nb::ndim<2>> to_numpy_2d(std::vector<T>&& values, size_t rows,
                                                   size_t cols) {
  auto* heap = new std::vector<T>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::ndarray<nb::numpy, T, nb::ndim<2>>(heap->data(), {rows, cols}, owner);
}

// Strides of a [rows, H, width] 16-bit tensor (its last dimension contiguous), 0 meaning
// contiguous as the library's structs take them.
void half_strides(const nb::ndarray<nb::ro>& a, const char* arg, int64_t* token, int64_t* head);

// Module parts, one per binding file.
void bind_system(nb::module_& m);
void bind_verify(nb::module_& m);
void bind_merge(nb::module_& m);
void bind_tree(nb::module_& m);
void bind_graph(nb::module_& m);

}  // namespace tvpy
