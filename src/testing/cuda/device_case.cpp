// DeviceCase: cudaMalloc'd copies of a HostCase. Any CUDA failure here is a broken test
// environment, so it throws.
#include "testing/cuda/device_case.h"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <stdexcept>

namespace treeverify::testing {
namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw std::runtime_error(fmt::format("{}: {}", what, cudaGetErrorString(err)));
}

template <typename T>
T* upload(const std::vector<T>& v) {
  T* d = nullptr;
  const size_t bytes = std::max<size_t>(1, v.size()) * sizeof(T);
  check(cudaMalloc(&d, bytes), "cudaMalloc");
  if (!v.empty())
    check(cudaMemcpy(d, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
  return d;
}

}  // namespace

DeviceCase::DeviceCase(const HostCase& host, int copies) : host_(host) {
  for (int c = 0; c < copies; ++c) {
    q_.push_back(upload(host.q));
    kv_.push_back(host.spec.kv_format == KvFormat::kE4M3 ? static_cast<void*>(upload(host.kv8))
                                                         : static_cast<void*>(upload(host.kv)));
  }
  if (host.spec.kv_format == KvFormat::kE4M3) kv_scale_ = upload(std::vector<float>{host.kv_scale});
  qo_indptr_ = upload(host.qo_indptr);
  kv_len_ = upload(host.kv_len);
  kv_page_indptr_ = upload(host.kv_page_indptr);
  kv_page_indices_ = upload(host.kv_page_indices);
  parents_ = upload(host.parents);
  check(cudaMalloc(&out_, std::max<size_t>(1, host.out_elems()) * 2), "cudaMalloc out");
  check(cudaMalloc(&lse_, std::max<size_t>(1, host.lse_elems()) * 4), "cudaMalloc lse");
  poison_outputs();
}

DeviceCase::~DeviceCase() {
  for (void* p : q_) cudaFree(p);
  for (void* p : kv_) cudaFree(p);
  for (void* p : {static_cast<void*>(qo_indptr_), static_cast<void*>(kv_len_),
                  static_cast<void*>(kv_page_indptr_), static_cast<void*>(kv_page_indices_),
                  static_cast<void*>(parents_), out_, static_cast<void*>(lse_), workspace_,
                  static_cast<void*>(kv_scale_)})
    cudaFree(p);
}

VerifyTensors DeviceCase::tensors(int copy) const {
  return VerifyTensors{.q = q_.at(copy),
                       .kv_cache = kv_.at(copy),
                       .kv_scale = kv_scale_,
                       .qo_indptr = qo_indptr_,
                       .kv_len = kv_len_,
                       .kv_page_indptr = kv_page_indptr_,
                       .kv_page_indices = kv_page_indices_,
                       .parents = parents_,
                       .out = out_,
                       .lse = lse_};
}

void DeviceCase::ensure_workspace(size_t bytes) {
  if (bytes <= workspace_bytes_ && workspace_ != nullptr) return;
  cudaFree(workspace_);
  workspace_ = nullptr;
  check(cudaMalloc(&workspace_, std::max<size_t>(bytes, 256)), "cudaMalloc workspace");
  workspace_bytes_ = std::max<size_t>(bytes, 256);
}

void DeviceCase::poison_outputs() {
  check(cudaMemset(out_, 0xff, std::max<size_t>(1, host_.out_elems()) * 2), "poison out");
  check(cudaMemset(lse_, 0xff, std::max<size_t>(1, host_.lse_elems()) * 4), "poison lse");
  check(cudaDeviceSynchronize(), "poison sync");
}

void DeviceCase::download(std::vector<uint16_t>* out, std::vector<float>* lse) const {
  check(cudaDeviceSynchronize(), "kernel execution");
  out->resize(host_.out_elems());
  lse->resize(host_.lse_elems());
  if (!out->empty())
    check(cudaMemcpy(out->data(), out_, out->size() * 2, cudaMemcpyDeviceToHost), "download out");
  if (!lse->empty())
    check(cudaMemcpy(lse->data(), lse_, lse->size() * 4, cudaMemcpyDeviceToHost), "download lse");
}

bool cuda_device_available(std::string* why) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess || count == 0) {
    (void)cudaGetLastError();
    if (why) *why = err != cudaSuccess ? cudaGetErrorString(err) : "no CUDA device";
    return false;
  }
  return true;
}

}  // namespace treeverify::testing
