// When plan() runs the sm_90a wgmma kernel (verify_wgmma.cuh) in place of the portable one:
// host-only constexpr code, so tests/cpu/test_tile_config.cpp checks it without a GPU.
#pragma once

#include <cstdint>

namespace treeverify::cuda::sm90 {

struct WgmmaQuery {
  int device_sm;           // the GPU's SM version
  int code_arch;           // the architecture its loaded code was compiled for
  bool built;              // this build has sm_90a code (launcher.h, kWgmmaBuilt)
  int forced_config_arch;  // PlanTuning::config_arch (0: none)
  int forced_rows;         // PlanTuning::rows_per_cta (0: none)
  int64_t max_rows;        // rows (heads x nodes) of the largest request
};

// Why the call does not run the wgmma kernel, or nullptr when it does. It exists in sm_90a code
// only (an sm_90 device), for 16-bit caches and e4m3 ones in either mode (exact: fp16 products;
// fast: e4m3 wgmma, native on sm_90a, so on an sm_90 device fast mode runs only here), and
// takes requests of more than 32 rows (those the sm_90 table gives 64-row CTAs), unless a tile
// table or a row count other than 64 is forced: the GPU tests force sm_90's table to keep the
// portable kernel covered there.
constexpr const char* wgmma_blocker(const WgmmaQuery& q) {
  if (q.device_sm != 90 || q.code_arch != 90) return "not an sm_90 device running sm_90 code";
  if (!q.built) return "this build has no sm_90a code (TREEVERIFY_CUDA_ARCHS with 90a)";
  if (q.forced_config_arch > 0) return "a tile table is forced";
  if (q.forced_rows != 0 && q.forced_rows != 64) return "a row count other than 64 is forced";
  if (q.forced_rows == 0 && q.max_rows <= 32) return "no request has more than 32 rows";
  return nullptr;
}

}  // namespace treeverify::cuda::sm90
