// The kernel variants this build compiled, as the host decides with them (cuda/sm80/build.h):
// a forced tile table or row count whose variant the code lacks is a named error from the
// selection function (core/select.h),
// never a launch of the trap stub in its place. Planned against a described device, so no
// GPU is needed.
#include <gtest/gtest.h>

#include <string>

#include "core/select.h"
#include "core/validate.h"
#include "cuda/sm80/config.h"
#include "testing/cases.h"
#include "treeverify/system.h"

namespace treeverify {
namespace {

using cuda::sm80::VariantBuild;
using cuda::sm80::VariantId;

// A device of SM version `sm` whose code is this build's for `code_arch`, with room for every
// variant (227 KB a block, one CTA an SM of each kernel).
detail::DeviceDescription described_device(int sm, int code_arch) {
  detail::DeviceDescription d;
  d.info.name = "described";
  d.info.cc_major = sm / 10;
  d.info.cc_minor = sm % 10;
  d.info.sm_count = 132;
  d.info.smem_per_block_optin = 227 * 1024;
  d.info.has_kernel_code = true;
  d.info.kernel_arch = code_arch;
  d.ctas_per_sm = [](const detail::KernelKey&) { return 1; };
  return d;
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// The described device answers as this build's predicate does for every table and built
// architecture, and the answer for a missing table says what to do.
TEST(VariantBuild, ForcedTablesFollowTheBuildsPredicate) {
  const BuildInfo build = build_info();
  if (!build.cuda_compiled) GTEST_SKIP() << "no CUDA backend in this build";
  const VariantBuild vb{build.cuda_archs.data(), static_cast<int>(build.cuda_archs.size()),
                        build.cuda_all_variants, build.cuda_e4m3_mma};
  int missing = 0;
  for (int code : build.cuda_archs) {
    for (const cuda::sm80::TileConfig& c : cuda::sm80::kTileConfigs) {
      bool in_build = true;
      for (VariantId v : {c.up_to_16_rows, c.up_to_32_rows, c.more_rows, c.up_to_16_rows_e4m3})
        in_build = in_build && cuda::sm80::variant_in_build(v, code, vb);
      const Status s = detail::config_runnable(c.arch, described_device(code, code), detail::this_build());
      SCOPED_TRACE("code sm_" + std::to_string(code) + ", table sm_" + std::to_string(c.arch));
      if (in_build) {
        EXPECT_TRUE(s.ok()) << s.to_string();
        continue;
      }
      ++missing;
      EXPECT_EQ(s.code(), StatusCode::kUnsupported);
      EXPECT_TRUE(contains(s.message(), "tuning.config_arch")) << s.message();
      EXPECT_TRUE(contains(s.message(), "is not in the code")) << s.message();
      // Missing because of the build's choice, not the architecture: say how to get it.
      bool fits = true;
      for (VariantId v : {c.up_to_16_rows, c.up_to_32_rows, c.more_rows, c.up_to_16_rows_e4m3})
        fits = fits && cuda::sm80::variant_fits(v, code);
      if (fits) EXPECT_TRUE(contains(s.message(), "TREEVERIFY_ALL_VARIANTS=ON")) << s.message();
    }
  }
  // Each architecture's own table is always there; the others only with every variant.
  for (int code : build.cuda_archs)
    EXPECT_TRUE(detail::config_runnable(code, described_device(code, code), detail::this_build()).ok()) << code;
  if (build.cuda_all_variants) {
    // sm_90/100 code (227 KB a block) holds every table.
    for (int code : build.cuda_archs)
      if (code >= 90 && code < 120)
        for (const cuda::sm80::TileConfig& c : cuda::sm80::kTileConfigs)
          EXPECT_TRUE(detail::config_runnable(c.arch, described_device(code, code), detail::this_build()).ok());
  }
  if (!build.cuda_all_variants && build.cuda_archs.size() == 6) EXPECT_GT(missing, 0);
}

// plan() refuses a forced table this build lacks before anything reads the (trap stub's)
// kernel attributes; the device's own table with any forced row count is never refused so.
TEST(VariantBuild, PlanNamesAForcedTableTheBuildLacks) {
  const BuildInfo build = build_info();
  if (!build.cuda_compiled) GTEST_SKIP() << "no CUDA backend in this build";
  const testing::HostCase host = testing::make_case(testing::CaseSpec{
      .name = "small", .num_heads = 8, .tree_sizes = {9}, .prefix_lens = {300}, .page_size = 16});
  const VariantBuild vb{build.cuda_archs.data(), static_cast<int>(build.cuda_archs.size()),
                        build.cuda_all_variants, build.cuda_e4m3_mma};
  detail::ProblemSummary summary;
  ASSERT_TRUE(detail::validate_problem(host.problem(), &summary).ok());
  int refused = 0;
  for (int code : build.cuda_archs) {
    const detail::DeviceDescription device = described_device(code, code);
    const detail::Machine machine{.build = detail::this_build(), .device = &device};
    for (const cuda::sm80::TileConfig& c : cuda::sm80::kTileConfigs) {
      for (int rows : {0, 16, 32, 64}) {
        const PlanOptions o{.backend = Backend::kCuda};
        const PlanTuning t{.config_arch = c.arch == code ? 0 : c.arch, .rows_per_cta = rows};
        detail::KernelChoice choice;
        const Status s = detail::select_kernel(host.problem(), summary, o, t, machine, &choice);
        SCOPED_TRACE("code sm_" + std::to_string(code) + ", table sm_" + std::to_string(c.arch) +
                     ", rows " + std::to_string(rows));
        // 9 nodes x 8 heads = 72 rows: the table's 64-row variant unless rows are forced.
        const VariantId v = cuda::sm80::choose_variant(c.arch, rows > 0 ? rows : 72);
        if (t.config_arch == 0 || cuda::sm80::variant_in_build(v, code, vb)) {
          EXPECT_FALSE(contains(s.message(), "is not in the code")) << s.message();
        } else {
          ++refused;
          EXPECT_EQ(s.code(), StatusCode::kUnsupported);
          EXPECT_TRUE(contains(s.message(), "argument 'tuning.config_arch'")) << s.message();
          EXPECT_TRUE(contains(s.message(), "is not in the code")) << s.message();
        }
      }
    }
  }
  if (!build.cuda_all_variants && build.cuda_archs.size() == 6) EXPECT_GT(refused, 0);
}

}  // namespace
}  // namespace treeverify
