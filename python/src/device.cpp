// device.h over the CUDA runtime when the library has its CUDA backend; refusals otherwise.
#include "device.h"

#include <fmt/format.h>

#include "common.h"

#if defined(TREEVERIFY_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace tvpy {

#if defined(TREEVERIFY_WITH_CUDA)
namespace {
void check_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  throw StatusError(
      fmt::format("CUDA error: {}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}
}  // namespace

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
}
DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

DeviceBuffer::DeviceBuffer(int device, size_t bytes) : device_(device) {
  if (bytes == 0) return;
  DeviceGuard guard(device);
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), "cudaMalloc (plan workspace)");
  data_ = static_cast<char*>(p);
}
DeviceBuffer::~DeviceBuffer() {
  if (data_ == nullptr) return;
  int previous = -1;
  (void)cudaGetDevice(&previous);
  (void)cudaSetDevice(device_);
  (void)cudaFree(data_);  // errors at interpreter exit (context gone) are harmless here
  (void)cudaGetLastError();
  if (previous >= 0) (void)cudaSetDevice(previous);
}

void copy_to_device(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  DeviceGuard guard(device);
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice), "cudaMemcpy to device");
}
void copy_to_host(void* dst, const void* src, size_t bytes, int device) {
  if (bytes == 0) return;
  DeviceGuard guard(device);
  check_cuda(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
}
int current_device() {
  int d = -1;
  if (cudaGetDevice(&d) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return d;
}

#else  // no CUDA backend in this build

namespace {
[[noreturn]] void no_cuda() {
  throw StatusError(
      "unsupported: this build of treeverify has no CUDA backend (nvcc was not found when the "
      "package was built, or TREEVERIFY_CUDA=OFF); reinstall on a machine with the CUDA toolkit");
}
}  // namespace

DeviceGuard::DeviceGuard(int) { no_cuda(); }
DeviceGuard::~DeviceGuard() = default;
DeviceBuffer::DeviceBuffer(int, size_t bytes) {
  if (bytes != 0) no_cuda();
}
DeviceBuffer::~DeviceBuffer() = default;
void copy_to_device(void*, const void*, size_t bytes, int) {
  if (bytes != 0) no_cuda();
}
void copy_to_host(void*, const void*, size_t bytes, int) {
  if (bytes != 0) no_cuda();
}
int current_device() { return -1; }

#endif

}  // namespace tvpy
