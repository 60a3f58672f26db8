// What the binary says about itself without a GPU: the kernel each compiled architecture runs
// (cuda_kernels_by_arch, shown by `treeverify doctor`).
#include <gtest/gtest.h>

#include <string>

#include "treeverify/system.h"

namespace treeverify {
namespace {

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

TEST(System, KernelsByArchCoverEveryCompiledArchitecture) {
  const BuildInfo build = build_info();
  const std::vector<ArchKernels> kernels = cuda_kernels_by_arch();
  if (!build.cuda_compiled) {
    EXPECT_TRUE(kernels.empty());
    return;
  }
  ASSERT_EQ(kernels.size(), build.cuda_archs.size());
  for (size_t i = 0; i < kernels.size(); ++i) {
    const ArchKernels& k = kernels[i];
    EXPECT_EQ(k.arch, build.cuda_archs[i]);
    // Each request size gets the fewest rows a CTA that cover it.
    EXPECT_TRUE(starts_with(k.up_to_16_rows, "r16-")) << k.arch << ": " << k.up_to_16_rows;
    EXPECT_TRUE(starts_with(k.up_to_16_rows_e4m3, "r16-"))
        << k.arch << ": " << k.up_to_16_rows_e4m3;
    EXPECT_TRUE(starts_with(k.up_to_32_rows, "r32-")) << k.arch << ": " << k.up_to_32_rows;
    // sm_90a code runs more rows on the wgmma kernel (src/cuda/sm90), other code on r64.
    EXPECT_TRUE(starts_with(k.more_rows, k.arch == 90 && build.cuda_sm90a ? "wgmma-r64-" : "r64-"))
        << k.arch << ": " << k.more_rows;
    // Bulk copies exist from sm_90 on.
    if (k.arch < 90) {
      for (const std::string& name : {k.up_to_16_rows, k.up_to_32_rows, k.more_rows})
        EXPECT_EQ(name.find("-bulk"), std::string::npos) << k.arch << ": " << name;
    }
  }
}

TEST(System, KernelsByArchNameTheTileTablesVariants) {
  for (const ArchKernels& k : cuda_kernels_by_arch()) {
    if (k.arch == 90) {
      EXPECT_EQ(k.up_to_16_rows, "r16-s2-bulk");
      EXPECT_EQ(k.up_to_16_rows_e4m3, "r16-s2");  // bulk copies lost with 576-byte rows
      EXPECT_EQ(k.up_to_32_rows, "r32-s4");
      EXPECT_EQ(k.more_rows, build_info().cuda_sm90a ? "wgmma-r64-t64" : "r64-s4");
    }
    if (k.arch == 120) {  // 99 KB a block: 16-token tiles for 64 rows
      EXPECT_EQ(k.up_to_16_rows, "r16-s2");
      EXPECT_EQ(k.up_to_16_rows_e4m3, "r16-s2");
      EXPECT_EQ(k.up_to_32_rows, "r32-s2");
      EXPECT_EQ(k.more_rows, "r64-s3-t16");
    }
  }
}

}  // namespace
}  // namespace treeverify
