// When plan() runs an sm_90a wgmma kernel (verify_wgmma.cuh, decode_wgmma.cuh) in place of the
// portable one: host-only constexpr code, so tests/cpu/test_tile_config.cpp checks it without a
// GPU.
#pragma once

#include <cstdint>

namespace treeverify::cuda::sm90 {

struct WgmmaQuery {
  int device_sm;           // the GPU's SM version
  int code_arch;           // the architecture its loaded code was compiled for
  bool built;              // this build has sm_90a code (launcher.h, kWgmmaBuilt)
  int forced_config_arch;  // PlanOptions::force_config_arch (0: none)
  int forced_rows;         // PlanOptions::force_rows_per_cta (0: none)
  int64_t max_rows;        // rows (heads x nodes) of the largest request
  bool fast;               // an e4m3 cache in fast mode (e4m3 products)
  bool e4m3 = false;       // an e4m3 cache
};

// What both wgmma kernels need: sm_90a code (an sm_90 device), no forced tile table (the GPU
// tests force sm_90's table to keep the portable kernel covered there), and a 16-bit cache or
// an e4m3 one in exact mode (fp16 products; on an sm_90 device plan() never picks fast mode).
constexpr const char* wgmma_code_blocker(const WgmmaQuery& q) {
  if (q.device_sm != 90 || q.code_arch != 90) return "not an sm_90 device running sm_90 code";
  if (!q.built) return "this build has no sm_90a code (TREEVERIFY_CUDA_ARCHS with 90a)";
  if (q.forced_config_arch > 0) return "a tile table is forced";
  if (q.fast) return "fast mode's e4m3 products run the portable kernel";
  return nullptr;
}

// Why the call does not run the wgmma verify kernel (verify_wgmma.cuh), or nullptr when it
// does: it takes requests of more than 32 rows (those the sm_90 table gives 64-row CTAs),
// unless a row count other than 64 is forced.
constexpr const char* wgmma_blocker(const WgmmaQuery& q) {
  if (const char* why = wgmma_code_blocker(q)) return why;
  if (q.forced_rows != 0 && q.forced_rows != 64) return "a row count other than 64 is forced";
  if (q.forced_rows == 0 && q.max_rows <= 32) return "no request has more than 32 rows";
  return nullptr;
}

// Why the call does not run the wgmma decode kernel (decode_wgmma.cuh), or nullptr when it
// does: an e4m3 cache in exact mode (a 16-bit one keeps the portable kernel, faster there:
// DESIGN_NOTES.md), requests of at most 16 rows (decode with H <= 16), unless a row count
// other than 16 is forced (16 forced: any request, in row blocks of 16).
constexpr const char* decode_blocker(const WgmmaQuery& q) {
  if (const char* why = wgmma_code_blocker(q)) return why;
  if (!q.e4m3) return "a 16-bit cache's decode runs the portable kernel";
  if (q.forced_rows != 0 && q.forced_rows != 16) return "a row count other than 16 is forced";
  if (q.forced_rows == 0 && q.max_rows > 16) return "a request has more than 16 rows";
  return nullptr;
}

}  // namespace treeverify::cuda::sm90
