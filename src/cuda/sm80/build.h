// Which kernel variants this build compiles for each architecture: the one predicate that the
// kernel (a trap stub in place of a variant not compiled, kernel.cuh) and every host decision
// (plan, supports, doctor, forced tables and row counts) share. The architectures and the
// TREEVERIFY_ALL_VARIANTS choice come from CMake through build_config.h.
#pragma once

#include "build_config.h"
#include "cuda/sm80/config.h"

namespace treeverify::cuda::sm80 {

inline constexpr int kBuiltArchs[] = {TREEVERIFY_CUDA_ARCH_NUMS};
inline constexpr VariantBuild kThisBuild{kBuiltArchs,
                                         static_cast<int>(sizeof(kBuiltArchs) / sizeof(int)),
                                         TREEVERIFY_ALL_VARIANTS != 0,
                                         TREEVERIFY_CUDA_E4M3_MMA != 0};

// Whether this build's code for SM version `arch` holds variant V (variant_in_build).
constexpr bool variant_compiled_for(VariantId id, int arch) {
  return variant_in_build(id, arch, kThisBuild);
}
template <typename V>
constexpr bool variant_compiled_for(int arch) {
  static_assert(variant_id<V>() != VariantId::kNone, "a variant without a VariantId");
  return variant_compiled_for(variant_id<V>(), arch);
}

// Whether this build's code for SM version `arch` holds the fast-mode kernel of `id`
// (fast_in_build).
constexpr bool fast_compiled_for(VariantId id, int arch) {
  return fast_in_build(id, arch, kThisBuild);
}
template <typename V>
constexpr bool fast_compiled_for(int arch) {
  return fast_compiled_for(variant_id<V>(), arch);
}

}  // namespace treeverify::cuda::sm80
