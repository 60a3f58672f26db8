// Host-side checks shared by the CUDA entry points.
#include "cuda/host_checks.h"

#include <fmt/format.h>

#include "core/check.h"

namespace treeverify::detail {

Status cuda_error(const char* what, cudaError_t err) {
  return Status(StatusCode::kCudaError,
                fmt::format("{}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

Status require_device_pointer(const void* ptr, const char* arg, bool required) {
  TV_REQUIRE(ptr != nullptr || !required, arg, "a required device pointer is null");
  if (ptr == nullptr) return Status::Ok();
  cudaPointerAttributes attr{};
  const cudaError_t err = cudaPointerGetAttributes(&attr, ptr);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    return cuda_error(fmt::format("cudaPointerGetAttributes('{}')", arg).c_str(), err);
  }
  TV_REQUIRE(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged, arg,
             "host memory given to a CUDA call (pointer {})", ptr);
  return Status::Ok();
}

}  // namespace treeverify::detail
