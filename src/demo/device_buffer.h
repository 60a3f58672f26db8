// A device allocation for the demo's cuda path; in a build without CUDA every call
// reports kUnsupported, so the demo says why instead of failing to link.
#pragma once

#include <cstddef>

#include "treeverify/status.h"

namespace treeverify::demo {

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  // Grows to at least `bytes` (contents are not kept when it grows).
  Status reserve(size_t bytes);
  Status upload(const void* src, size_t bytes, size_t offset = 0);
  Status download(void* dst, size_t bytes, size_t offset = 0) const;
  Status synchronize() const;
  void* get() const { return ptr_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(ptr_);
  }
  size_t size() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace treeverify::demo
