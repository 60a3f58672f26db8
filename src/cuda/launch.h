// One verify call on the device: the main kernel the plan chose (the portable variant or the
// wgmma kernel, with TMA tensor maps where chosen) and, when the call is split, the combine.
// Host plans (backend.cpp) and graph plans (graph/graph_backend.cpp) both launch through it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/common/params.h"
#include "treeverify/status.h"
#include "treeverify/types.h"

namespace treeverify::detail {

struct CallShape {
  DType dtype = DType::kBF16;
  KvFormat kv_format = KvFormat::kSameAsQ;
  cuda::KvMode mode = cuda::KvMode::k16;
  bool wgmma = false;     // the sm_90a wgmma kernel, else portable variant `variant`
  bool tma = false;       // wgmma: whole tiles by TMA tensor copies
  int32_t variant = 0;    // cuda::sm80::VariantId
  int32_t row_blocks = 0;  // grid.x
  int32_t batch = 0;       // grid.z
  int32_t max_rows = 0;    // T * H of the largest request
  bool programmatic_combine = false;
  int32_t device_sms = 0;
  int64_t num_pages = 0;  // of the cache (the TMA maps)
  int32_t page_size = 0;
};

// Launches the main kernel on grid (row_blocks, kp.num_chunks, batch) and, when kp.num_chunks
// > 1, the combine of its partials; kp holds every pointer (the cache, the metadata, the
// workspace's partials). Errors are launch errors (kCudaError) or a refused TMA map.
Status launch_call(const CallShape& shape, const cuda::VerifyKernelParams& kp, cudaStream_t stream);

}  // namespace treeverify::detail
