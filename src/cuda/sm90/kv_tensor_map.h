// The TMA tensor maps of a KV cache, for the wgmma kernel's producer (operands.cuh): the cache
// as a 3-D tensor (576 values, page_size rows, num_pages pages) read in boxes of 64 rows,
// - 16-bit: 64 values a box, written to shared memory in wgmma's 128-byte swizzle (tile.h);
// - e4m3, exact mode: 128 codes a box (the last one half past the row, filled with zeros),
//   written as plain 128-byte rows for the producer to widen;
// - e4m3, fast mode: codes 0-511 in boxes of 128 in the 128-byte swizzle and codes 512-575 in
//   one box of 64 in the 64-byte swizzle (a second map, `tail`), where wgmma and ldmatrix read
//   them (tile.h, WgmmaTile::Fast).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <type_traits>

#include "cuda/common/params.h"

namespace treeverify::cuda::sm90 {

// A cache's maps: `main` for every mode, `tail` for fast mode's last 64 codes.
struct KvTensorMaps {
  CUtensorMap main;
  CUtensorMap tail;
};
// The kernel's parameter: both maps for fast mode's TMA instance, `main` alone for the others
// (so that their code and parameters do not carry fast mode's second map).
template <bool kFast, bool kTma>
using KernelMaps = std::conditional_t<kFast && kTma, KvTensorMaps, CUtensorMap>;

// Whether this build and driver can encode tensor maps (CUDA 12.5+ runtime, whose
// cudaGetDriverEntryPointByVersion finds cuTensorMapEncodeTiled): plan() chooses TMA copies
// only then.
bool kv_tensor_maps_available();

// Encodes the maps of `mode` (16-bit values, or e4m3 codes for exact or fast mode) for the
// cache at `kv` (num_pages pages of page_size rows of 576 values); page_size must be at least
// 64 (a 64-row box per tile). Returns false, with `maps` untouched, where the driver has no
// cuTensorMapEncodeTiled or refuses the tensor.
bool encode_kv_tensor_maps(KvTensorMaps* maps, const void* kv, int64_t num_pages, int page_size,
                           KvMode mode);

}  // namespace treeverify::cuda::sm90
