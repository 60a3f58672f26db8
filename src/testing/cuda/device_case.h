// A HostCase uploaded to the GPU, for GPU tests and `treeverify bench/check` on CUDA.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "testing/cases.h"
#include "treeverify/verify.h"

namespace treeverify::testing {

// Owns device copies of a case's inputs, poisoned outputs and a workspace.
class DeviceCase {
 public:
  // Uploads everything; `copies` > 1 keeps that many copies of q and the KV pool, so timing
  // loops can rotate through them and measure memory rather than L2 (docs/BENCH.md).
  explicit DeviceCase(const HostCase& host, int copies = 1);
  ~DeviceCase();
  DeviceCase(const DeviceCase&) = delete;
  DeviceCase& operator=(const DeviceCase&) = delete;

  VerifyTensors tensors(int copy = 0) const;
  void ensure_workspace(size_t bytes);
  void* workspace() const { return workspace_; }
  size_t workspace_bytes() const { return workspace_bytes_; }
  // Fills out with NaN bit patterns and lse with NaN, so unwritten elements fail the check.
  void poison_outputs();
  void download(std::vector<uint16_t>* out, std::vector<float>* lse) const;
  int copies() const { return static_cast<int>(q_.size()); }

 private:
  const HostCase& host_;
  std::vector<void*> q_, kv_;
  float* kv_scale_ = nullptr;  // e4m3: the scale, in device memory
  int32_t *qo_indptr_ = nullptr, *kv_len_ = nullptr, *kv_page_indptr_ = nullptr,
          *kv_page_indices_ = nullptr, *parents_ = nullptr;
  void* out_ = nullptr;
  float* lse_ = nullptr;
  void* workspace_ = nullptr;
  size_t workspace_bytes_ = 0;
};

// Whether a CUDA device is usable; *why says why not.
bool cuda_device_available(std::string* why);

}  // namespace treeverify::testing
