// The TMA tensor map of a KV cache, for the wgmma kernel's producer (operands.cuh): the cache
// as a 3-D tensor (576 values, page_size rows, num_pages pages) read in boxes of 64 rows,
// - 16-bit: 64 values a box, written to shared memory in wgmma's 128-byte swizzle (tile.h);
// - e4m3: 128 codes a box (the last one half past the row, filled with zeros), written as
//   plain 128-byte rows for the producer to widen.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace treeverify::cuda::sm90 {

// Whether this build and driver can encode tensor maps (CUDA 12.5+ runtime, whose
// cudaGetDriverEntryPointByVersion finds cuTensorMapEncodeTiled): plan() chooses TMA copies
// only then.
bool kv_tensor_maps_available();

// Encodes `map` for the cache at `kv` (num_pages pages of page_size rows of 576 values,
// 16-bit or, with `e4m3`, one byte each); page_size must be at least 64 (a 64-row box per
// tile). Returns false, with the map untouched, where the driver has no
// cuTensorMapEncodeTiled or refuses the tensor.
bool encode_kv_tensor_map(CUtensorMap* map, const void* kv, int64_t num_pages, int page_size,
                          bool e4m3);

}  // namespace treeverify::cuda::sm90
