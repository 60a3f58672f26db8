// cuTensorMapEncodeTiled through the runtime's driver entry point (no link to libcuda).
#include "cuda/sm90/kv_tensor_map.h"

#include <cudaTypedefs.h>

#include "cuda/common/constants.h"

namespace treeverify::cuda::sm90 {
namespace {

PFN_cuTensorMapEncodeTiled_v12000 encode_function() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
#if CUDART_VERSION >= 12050  // before: no cudaGetDriverEntryPointByVersion, cp.async only
    cudaDriverEntryPointQueryResult status{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault,
                                         &status) != cudaSuccess ||
        status != cudaDriverEntryPointSuccess) {
      (void)cudaGetLastError();
      f = nullptr;
    }
#endif
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

}  // namespace

bool kv_tensor_maps_available() { return encode_function() != nullptr; }

bool encode_kv_tensor_maps(KvTensorMaps* maps, const void* kv, int64_t num_pages, int page_size,
                           KvMode mode) {
  const PFN_cuTensorMapEncodeTiled_v12000 encode = encode_function();
  if (encode == nullptr || page_size < 64 || num_pages <= 0) return false;
  const bool e4m3 = mode != KvMode::k16;
  const cuuint64_t row_bytes = e4m3 ? kQKDim : kQKDim * 2;
  const cuuint64_t dims[3] = {kQKDim, static_cast<cuuint64_t>(page_size),
                              static_cast<cuuint64_t>(num_pages)};
  const cuuint64_t strides[2] = {row_bytes, row_bytes * static_cast<cuuint64_t>(page_size)};
  const cuuint32_t element_strides[3] = {1, 1, 1};
  // A box of `values` values of each of a tile's 64 rows, landing in `swizzle`.
  auto encode_box = [&](CUtensorMap* m, cuuint32_t values, CUtensorMapSwizzle swizzle) {
    const cuuint32_t box[3] = {values, 64, 1};
    return encode(m, e4m3 ? CU_TENSOR_MAP_DATA_TYPE_UINT8 : CU_TENSOR_MAP_DATA_TYPE_UINT16, 3,
                  const_cast<void*>(kv), dims, strides, box, element_strides,
                  CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                  CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
  };
  KvTensorMaps m{};
  bool ok = false;
  switch (mode) {
    case KvMode::k16:  // one 64-value block of a 64-token tile
      ok = encode_box(&m.main, 64, CU_TENSOR_MAP_SWIZZLE_128B);
      break;
    case KvMode::kE4M3:  // 128 codes of each of its rows, unswizzled
      ok = encode_box(&m.main, 128, CU_TENSOR_MAP_SWIZZLE_NONE);
      break;
    case KvMode::kE4M3Fast:  // codes 128 j .. 128 j + 127 (j < 4), then codes 512-575
      ok = encode_box(&m.main, 128, CU_TENSOR_MAP_SWIZZLE_128B) &&
           encode_box(&m.tail, kQKDim - 512, CU_TENSOR_MAP_SWIZZLE_64B);
      break;
  }
  if (!ok) return false;
  *maps = m;
  return true;
}

}  // namespace treeverify::cuda::sm90
