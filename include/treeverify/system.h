// What this build and this machine offer: compiled backends, CUDA architectures, devices.
#pragma once

#include <string>
#include <vector>

#include "treeverify/status.h"

namespace treeverify {

struct BuildInfo {
  std::string version;                // treeverify version
  std::string git_commit;             // commit the library was built from, or "unknown"
  bool cuda_compiled = false;         // whether the CUDA backend is in this binary
  std::string cuda_compiler_version;  // nvcc version used, empty without CUDA
  std::vector<int> cuda_archs;        // compiled SM architectures, e.g. {80, 86, 89, 90, 100, 120}
  bool cuda_all_variants = false;     // each architecture's code holds every kernel variant that
                                      // fits it (TREEVERIFY_ALL_VARIANTS: any tile table can be
                                      // forced), not only its tile tables' variants
  bool cuda_e4m3_mma = false;         // the compiler had every e4m3 mma.sync fast mode uses
                                      // (CUDA 12.8+), so sm_89/sm_120 code holds its kernels
  bool cuda_sm90a = false;            // the sm_90 code is sm_90a, with the wgmma kernel
  std::string blas;                   // BLAS the CPU fast backend uses, e.g. "OpenBLAS 0.3.21"
};
BuildInfo build_info();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;
  size_t global_mem_bytes = 0;
  size_t l2_bytes = 0;
  size_t smem_per_block_optin = 0;  // the most dynamic shared memory one block may use
  int clock_mhz = 0;
  double memory_bandwidth = 0;   // bytes/s at the memory's peak clock and bus width (0: unknown)
  bool has_kernel_code = false;  // a compiled architecture can run on this device
  int kernel_arch = 0;           // the architecture the code it runs was compiled for (0 if
                                 // none; below the device's when the driver JIT-compiles PTX)
};

// The portable CUDA kernel variant (the middle of Plan::kernel, e.g. "r64-s4") that a GPU of
// SM version `arch` runs with this build's code for that architecture, by the most query rows
// (heads x tree nodes) of any request in the call. Needs no GPU; one entry per compiled
// architecture, none without the CUDA backend. Decode-sized requests on an e4m3 cache may run
// another variant (up_to_16_rows_e4m3).
struct ArchKernels {
  int arch = 0;
  std::string up_to_16_rows, up_to_32_rows, more_rows;
  std::string up_to_16_rows_e4m3;
};
std::vector<ArchKernels> cuda_kernels_by_arch();

// The CUDA devices present; empty (and ok) with no GPU or without the CUDA backend.
// *driver_note says why no device is listed when that is not obvious (driver missing, ...).
std::vector<DeviceInfo> list_devices(std::string* driver_note = nullptr);

}  // namespace treeverify
