// What the CUDA backend of this binary offers: compiled architectures, devices, and whether
// each device has code to run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <sstream>

#include "build_config.h"
#include "core/cuda_backend.h"
#include "cuda/mma/launcher.h"

namespace treeverify::detail {

bool cuda_compiled() { return true; }

std::vector<int> cuda_compiled_archs() {
  std::vector<int> archs;
  std::stringstream list(TREEVERIFY_CUDA_ARCH_LIST);  // "80;86;89;90;100;120", maybe "90a"
  for (std::string item; std::getline(list, item, ';');) {
    if (!item.empty()) archs.push_back(std::stoi(item));
  }
  return archs;
}

std::string cuda_compiler_version() { return TREEVERIFY_CUDA_COMPILER_VERSION; }

int cuda_current_device() {
  int device = -1;
  if (cudaGetDevice(&device) != cudaSuccess) {
    (void)cudaGetLastError();
    return -1;
  }
  return device;
}

std::vector<DeviceInfo> cuda_list_devices(std::string* note) {
  std::vector<DeviceInfo> devices;
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    if (note) {
      *note = err == cudaErrorNoDevice ? "no CUDA device is visible"
              : err == cudaErrorInsufficientDriver
                  ? "the NVIDIA driver is missing or older than this build's CUDA runtime"
                  : fmt::format("cudaGetDeviceCount failed: {}", cudaGetErrorString(err));
    }
    return devices;
  }
  int previous = 0;
  (void)cudaGetDevice(&previous);
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop{};
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      (void)cudaGetLastError();
      continue;
    }
    DeviceInfo info;
    info.ordinal = d;
    info.name = prop.name;
    info.cc_major = prop.major;
    info.cc_minor = prop.minor;
    info.sm_count = prop.multiProcessorCount;
    info.global_mem_bytes = prop.totalGlobalMem;
    info.l2_bytes = static_cast<size_t>(prop.l2CacheSize);
    info.smem_per_block_optin = prop.sharedMemPerBlockOptin;
    int khz = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrClockRate, d) == cudaSuccess)
      info.clock_mhz = khz / 1000;
    // Ask the runtime which compiled binary it would run: the honest answer to "is there
    // code for this GPU", including PTX that the driver compiles for newer architectures.
    cudaFuncAttributes attr{};
    if (cudaSetDevice(d) == cudaSuccess &&
        cuda::mma::verify_attributes<__nv_bfloat16, 2>(&attr) == cudaSuccess) {
      info.has_kernel_code = true;
      info.kernel_arch = attr.binaryVersion;
    }
    (void)cudaGetLastError();
    devices.push_back(info);
  }
  (void)cudaSetDevice(previous);
  if (devices.empty() && note) *note = "no CUDA device could be queried";
  return devices;
}

}  // namespace treeverify::detail
