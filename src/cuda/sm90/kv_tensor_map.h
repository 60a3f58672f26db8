// The TMA tensor map of a 16-bit KV cache, for the wgmma kernel's producer (operands.cuh):
// the cache as a 3-D tensor (576 values, page_size rows, num_pages pages) read in boxes of 64
// values x 64 rows, written to shared memory in wgmma's 128-byte swizzle (tile.h).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace treeverify::cuda::sm90 {

// Whether this build and driver can encode tensor maps (CUDA 12.5+ runtime, whose
// cudaGetDriverEntryPointByVersion finds cuTensorMapEncodeTiled): plan() chooses TMA copies
// only then.
bool kv_tensor_maps_available();

// Encodes `map` for the 16-bit cache at `kv` (num_pages pages of page_size rows of 576
// values); page_size must be at least 64 (a 64-row box per tile). Returns false, with the
// map untouched, where the driver has no cuTensorMapEncodeTiled or refuses the tensor.
bool encode_kv_tensor_map(CUtensorMap* map, const void* kv, int64_t num_pages, int page_size);

}  // namespace treeverify::cuda::sm90
