// DeviceBuffer over the CUDA runtime (synchronous copies: the demo is not timed).
#include "demo/device_buffer.h"

#include <fmt/format.h>

#include "core/check.h"

#ifdef TREEVERIFY_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace treeverify::demo {

#ifdef TREEVERIFY_WITH_CUDA
namespace {
Status check(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return Status::Ok();
  return Status(StatusCode::kCudaError, fmt::format("demo {}: {}", what, cudaGetErrorString(err)));
}
}  // namespace

DeviceBuffer::~DeviceBuffer() {
  if (ptr_ != nullptr) (void)cudaFree(ptr_);
}
Status DeviceBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return Status::Ok();
  if (ptr_ != nullptr) (void)cudaFree(ptr_);
  ptr_ = nullptr;
  bytes_ = 0;
  TV_RETURN_IF_ERROR(check(cudaMalloc(&ptr_, bytes), "cudaMalloc"));
  bytes_ = bytes;
  return Status::Ok();
}
Status DeviceBuffer::upload(const void* src, size_t bytes, size_t offset) {
  if (bytes == 0) return Status::Ok();
  return check(cudaMemcpy(static_cast<char*>(ptr_) + offset, src, bytes, cudaMemcpyHostToDevice),
               "upload");
}
Status DeviceBuffer::download(void* dst, size_t bytes, size_t offset) const {
  if (bytes == 0) return Status::Ok();
  return check(
      cudaMemcpy(dst, static_cast<const char*>(ptr_) + offset, bytes, cudaMemcpyDeviceToHost),
      "download");
}
Status DeviceBuffer::synchronize() const {
  return check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
}
#else
namespace {
Status no_cuda() {
  return Status(StatusCode::kUnsupported, "the demo's device path needs a build with CUDA");
}
}  // namespace

DeviceBuffer::~DeviceBuffer() = default;
Status DeviceBuffer::reserve(size_t) { return no_cuda(); }
Status DeviceBuffer::upload(const void*, size_t, size_t) { return no_cuda(); }
Status DeviceBuffer::download(void*, size_t, size_t) const { return no_cuda(); }
Status DeviceBuffer::synchronize() const { return no_cuda(); }
#endif

}  // namespace treeverify::demo
