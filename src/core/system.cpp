// build_info(), cuda_kernels_by_arch() and list_devices(): what this binary contains and what
// it finds.
#include "treeverify/system.h"

#include <cblas.h>

#include "build_config.h"
#include "core/cuda_backend.h"
#include "core/select.h"
#include "git_commit.h"

namespace treeverify {

BuildInfo build_info() {
  BuildInfo info;
  info.version = TREEVERIFY_VERSION;
  info.git_commit = TREEVERIFY_GIT_COMMIT;
  info.cuda_compiled = detail::cuda_compiled();
  info.cuda_compiler_version = detail::cuda_compiler_version();
  info.cuda_archs = detail::cuda_compiled_archs();
  info.cuda_all_variants = info.cuda_compiled && TREEVERIFY_ALL_VARIANTS != 0;
  info.cuda_e4m3_mma = info.cuda_compiled && TREEVERIFY_CUDA_E4M3_MMA != 0;
  info.cuda_sm90a = info.cuda_compiled && TREEVERIFY_CUDA_SM90A != 0;
  info.blas = openblas_get_config();  // "OpenBLAS 0.3.21 ..."
  return info;
}

std::vector<ArchKernels> cuda_kernels_by_arch() { return detail::kernels_by_arch(detail::this_build()); }

std::vector<DeviceInfo> list_devices(std::string* driver_note) {
  return detail::cuda_list_devices(driver_note);
}

}  // namespace treeverify
