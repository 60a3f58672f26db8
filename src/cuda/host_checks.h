// Host-side checks shared by the CUDA entry points: CUDA errors as Status, and a clear error
// (instead of a crash) when host memory reaches a device call.
#pragma once

#include <cuda_runtime.h>

#include "treeverify/status.h"

namespace treeverify::detail {

// "<what>: <CUDA message> (<error name>)" as kCudaError.
Status cuda_error(const char* what, cudaError_t err);

// kInvalidArgument unless `ptr` is device or managed memory. A null pointer passes unless
// `required` (optional arguments such as lse are checked by the caller's contract).
Status require_device_pointer(const void* ptr, const char* arg, bool required = false);

}  // namespace treeverify::detail
