// The little of the CUDA runtime the binding needs itself: plan-owned device memory and the
// current-device switch. In a build without the CUDA backend every call raises
// treeverify.Error, and nothing here is reached for CPU arrays.
#pragma once

#include <cstddef>

namespace tvpy {

// Makes `device` current for the lifetime of the guard (the library runs on the current
// device; a plan made for cuda:1 must not run while torch has cuda:0 current).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// One device allocation, freed on destruction. cudaFree synchronizes the device, so kernels
// still reading the memory on the caller's stream finish before it is released.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(int device, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  char* data() const { return data_; }

 private:
  int device_ = -1;
  char* data_ = nullptr;
};

// Blocking copies (plan time only, never in run()).
void copy_to_device(void* dst, const void* src, size_t bytes, int device);
void copy_to_host(void* dst, const void* src, size_t bytes, int device);
// The calling thread's current device (-1 without CUDA).
int current_device();

}  // namespace tvpy
