// What a chosen kernel is called and how its choice is explained: the portable variants'
// names (and a variant by its name), the wgmma kernel's, and KernelChoice's name and reason
// line (select.h).
#include "core/select.h"

#include <fmt/format.h>

#include <string>

#include "cuda/sm90/tile.h"

namespace treeverify::detail {

using cuda::sm80::VariantId;

std::string variant_name(VariantId v) {
  return cuda::sm80::with_variant(v, [&]<typename V>(V) {
    const std::string tokens = V::kTokens != 32 ? fmt::format("-t{}", V::kTokens) : "";
    const std::string pair = V::kClusterCtas > 1 ? fmt::format("-c{}", V::kClusterCtas) : "";
    std::string kgroups;
    if constexpr (V::kClusterCtas == 1)
      if (V::kKGroups != cuda::sm80::kKGroupsDefault) kgroups = fmt::format("-k{}", V::kKGroups);
    const std::string warps =
        V::kWarps != cuda::sm80::kWarpsDefault ? fmt::format("-w{}", V::kWarps) : "";
    return fmt::format("r{}-s{}{}{}{}{}{}", V::kRows, V::kStages, tokens, V::kBulk ? "-bulk" : "",
                       pair, kgroups, warps);
  });
}

VariantId variant_by_name(const std::string& name) {
  for (int i = 0; i <= static_cast<int>(VariantId::kLast); ++i)
    if (variant_name(static_cast<VariantId>(i)) == name) return static_cast<VariantId>(i);
  return VariantId::kNone;
}

std::string variant_names() {
  std::string names;
  for (int i = 0; i <= static_cast<int>(VariantId::kLast); ++i)
    names += fmt::format("{}{}", i == 0 ? "" : ", ", variant_name(static_cast<VariantId>(i)));
  return names;
}

std::string wgmma_name() {
  return fmt::format("wgmma-r{}-t{}", cuda::sm90::WgmmaTile::kRows,
                     cuda::sm90::WgmmaTile::kTokens);
}

std::string KernelChoice::name() const {
  switch (family) {
    case KernelFamily::kCpuReference:
      return "cpu-reference/fp64";
    case KernelFamily::kCpu:
      return "cpu/fp32-blas";
    case KernelFamily::kMma:
    case KernelFamily::kWgmma:
      break;
    case KernelFamily::kNone:
      return "none";
  }
  const bool e4m3 = kv_format == KvFormat::kE4M3;
  const std::string data = fmt::format("{}{}{}", dtype_name(dtype), e4m3 ? "-e4m3kv" : "",
                                       precision == Precision::kFast ? "-fast" : "");
  if (family == KernelFamily::kWgmma)
    return fmt::format("wgmma/{}/r{}-t{}{}/sm90a", data, cuda::sm90::WgmmaTile::kRows,
                       cuda::sm90::WgmmaTile::kTokens, tma ? "+tma" : "");
  return fmt::format("mma/{}/{}/sm{}-table", data, variant_name(variant), config_arch);
}

std::string KernelChoice::explain_kernel() const {
  if (family != KernelFamily::kMma && family != KernelFamily::kWgmma) return where;
  return fmt::format("{} runs sm_{} code; {} rows a CTA ({}){}{}, {}-token KV tiles{}{}", where,
                     code_arch, rows_per_cta, why_rows, why_family,
                     halves  ? " in two halves, one's softmax beside the other's products"
                     : pair ? ", a pair of CTAs (one cluster) a row block, each over half of "
                              "every KV row"
                            : "",
                     tile_tokens, why_copies, why_precision);
}

std::string KernelChoice::explain() const {
  if (family != KernelFamily::kMma && family != KernelFamily::kWgmma) return where;
  const SplitSchedule& s = schedule;
  const std::string split = s.partial_rows > 0
                                ? fmt::format(", {} partial rows to combine", s.partial_rows)
                                : ", no request split";
  return fmt::format("{}; {} row block(s) x {} chunk(s) of {} tokens = {} CTAs, {} per SM{}; "
                     "modelled {:.1f} us",
                     explain_kernel(), s.max_row_blocks, s.num_chunks, s.chunk_tokens, s.num_ctas,
                     ctas_per_sm, split, s.est_ns * 1e-3);
}

}  // namespace treeverify::detail
