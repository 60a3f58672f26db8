// What the CUDA backend of this binary offers: compiled architectures, devices, and whether
// each device has code to run.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <map>
#include <mutex>
#include <sstream>

#include "build_config.h"
#include "core/cuda_backend.h"
#include "cuda/sm80/launcher.h"

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

namespace {

// Properties of device `d`, and whether a compiled architecture runs there. Makes `d`
// current for the kernel-attribute query and restores the caller's device.
DeviceInfo query_device(int d) {
  DeviceInfo info;
  info.ordinal = d;
  cudaDeviceProp prop{};
  if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
    (void)cudaGetLastError();
    info.ordinal = -1;
    return info;
  }
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
  int mem_khz = 0, bus_bits = 0;
  if (cudaDeviceGetAttribute(&mem_khz, cudaDevAttrMemoryClockRate, d) == cudaSuccess &&
      cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, d) == cudaSuccess)
    info.memory_bandwidth = 2.0 * mem_khz * 1e3 * bus_bits / 8;  // double data rate
  // Ask the runtime which compiled binary it would run: the honest answer to "is there code
  // for this GPU", including PTX that the driver compiles for newer architectures.
  int previous = 0;
  (void)cudaGetDevice(&previous);
  cudaFuncAttributes attr{};
  if (cudaSetDevice(d) == cudaSuccess &&
      cuda::sm80::verify_attributes<__nv_bfloat16, cuda::sm80::VariantR32S2>(&attr) == cudaSuccess) {
    info.has_kernel_code = true;
    // The architecture the code was compiled for (its PTX target), which decides what the
    // kernels contain: binaryVersion would say the device's own when the driver JIT-compiles
    // PTX built for an older one.
    info.kernel_arch = attr.ptxVersion > 0 ? attr.ptxVersion : attr.binaryVersion;
  }
  (void)cudaGetLastError();
  (void)cudaSetDevice(previous);
  return info;
}

}  // namespace

int cuda_device_count(std::string* note) {
  int count = 0;
  const cudaError_t err = cudaGetDeviceCount(&count);
  if (err == cudaSuccess) return count;
  (void)cudaGetLastError();
  if (note) {
    *note = err == cudaErrorNoDevice ? "no CUDA device is visible"
            : err == cudaErrorInsufficientDriver
                ? "the NVIDIA driver is missing or older than this build's CUDA runtime"
                : fmt::format("cudaGetDeviceCount failed: {}", cudaGetErrorString(err));
  }
  return 0;
}

namespace {

// Per-ordinal cache: plan() runs once per decoding step and must not re-query the device.
std::mutex cache_mutex;
std::map<int, DeviceInfo> cache;

}  // namespace

Status cuda_device_info(int ordinal, DeviceInfo* info) {
  std::lock_guard<std::mutex> lock(cache_mutex);
  auto it = cache.find(ordinal);
  if (it == cache.end()) {
    std::string note;
    const int count = cuda_device_count(&note);
    if (ordinal < 0 || ordinal >= count) {
      return Status(StatusCode::kNoDevice,
                    fmt::format("backend cuda: device {} does not exist ({} device(s) found{})",
                                ordinal, count, note.empty() ? "" : "; " + note));
    }
    it = cache.emplace(ordinal, query_device(ordinal)).first;
  }
  if (it->second.ordinal < 0)
    return Status(StatusCode::kNoDevice, fmt::format("device {} could not be queried", ordinal));
  *info = it->second;
  return Status::Ok();
}

std::vector<DeviceInfo> cuda_list_devices(std::string* note) {
  std::vector<DeviceInfo> devices;
  const int count = cuda_device_count(note);
  for (int d = 0; d < count; ++d) {
    DeviceInfo info;
    if (cuda_device_info(d, &info).ok()) devices.push_back(info);
  }
  if (count > 0 && devices.empty() && note) *note = "no CUDA device could be queried";
  return devices;
}

}  // namespace treeverify::detail
