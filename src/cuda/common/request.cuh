// Mapping a global query row back to its request.
#pragma once

#include <cstdint>

namespace treeverify::cuda {

// The request that owns global node q: the last b with qo_indptr[b] <= q. Requests with no
// nodes share their start with the next one, and the search skips them.
__device__ __forceinline__ int find_request(const int32_t* qo_indptr, int batch, int q) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (__ldg(qo_indptr + mid) <= q) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

}  // namespace treeverify::cuda
