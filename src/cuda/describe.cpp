// What the selection function (core/select.h) needs to know of a CUDA device: its properties,
// each kernel's occupancy there, TMA support; and the CUDA part of a finished plan (its id and
// workspace size).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "core/check.h"
#include "core/cuda_backend.h"
#include "cuda/sm80/launcher.h"
#include "cuda/sm90/kv_tensor_map.h"
#include "cuda/sm90/launcher.h"
#include "cuda/step_data.h"
#include "cuda/workspace.h"

namespace treeverify::detail {
namespace {

using cuda::KvMode;

// CTAs of `key` one SM of the current device runs at once (0: none, or an instance that does
// not exist: the selection function asks only for those instance_selectable names).
int ctas_on_current_device(const KernelKey& key) {
  if (key.family == KernelFamily::kWgmma) return cuda::sm90::verify_wgmma_ctas_per_sm(key.dtype, key.mode);
  return cuda::sm80::with_variant(key.variant, [&]<typename V>(V) {
    auto ctas = [&]<KvMode kMode>() {
      return key.dtype == DType::kBF16 ? cuda::sm80::verify_ctas_per_sm<__nv_bfloat16, V, kMode>()
                                       : cuda::sm80::verify_ctas_per_sm<__half, V, kMode>();
    };
    if (!cuda::sm80::instance_selectable<V>(key.mode)) return 0;
    if (key.mode == KvMode::k16) return ctas.template operator()<KvMode::k16>();
    if (key.mode == KvMode::kE4M3) {
      if constexpr (cuda::sm80::instance_selectable<V>(KvMode::kE4M3))
        return ctas.template operator()<KvMode::kE4M3>();
    } else if constexpr (cuda::sm80::instance_selectable<V>(KvMode::kE4M3Fast)) {
      return ctas.template operator()<KvMode::kE4M3Fast>();
    }
    return 0;
  });
}

}  // namespace

Status cuda_describe(int ordinal, Machine* machine, DeviceDescription* device) {
  std::string note;
  if (cuda_device_count(&note) == 0) {
    machine->device = nullptr;
    machine->no_device_code = StatusCode::kNoDevice;
    machine->no_device =
        "backend cuda: no CUDA device found" + (note.empty() ? "" : " (" + note + ")");
    return Status::Ok();
  }
  if (ordinal < 0) ordinal = cuda_current_device();
  TV_RETURN_IF_ERROR(cuda_device_info(ordinal, &device->info));
  device->tma_maps = cuda::sm90::kv_tensor_maps_available();
  // The occupancy queries run on the plan's device, the caller's device restored.
  device->ctas_per_sm = [ordinal](const KernelKey& key) {
    int previous = 0;
    (void)cudaGetDevice(&previous);
    (void)cudaSetDevice(ordinal);
    const int ctas = ctas_on_current_device(key);
    (void)cudaSetDevice(previous);
    return ctas;
  };
  machine->device = device;
  return Status::Ok();
}

void cuda_finish_plan(Plan* plan) {
  plan->state.id = new_plan_id();
  plan->workspace_bytes = workspace_layout(*plan).total();
}

}  // namespace treeverify::detail
