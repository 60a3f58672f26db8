// The per-architecture tile table of the portable kernel (src/cuda/sm80/config.h): which
// variant each device and request size gets. Host-only constexpr code, so it is checked here,
// on machines without a GPU, for the architectures the project cannot run on.
#include <gtest/gtest.h>

#include "cuda/sm80/config.h"
#include "cuda/sm90/choice.h"

namespace treeverify::cuda::sm80 {
namespace {

TEST(TileConfig, TooOldHasNone) {
  EXPECT_EQ(choose_variant(75, 128), VariantId::kNone);
  EXPECT_EQ(choose_variant(0, 1), VariantId::kNone);
}

TEST(TileConfig, DecodeUsesSixteenRowsAndBulkCopiesFromSm90) {
  for (int sm : {80, 86, 89, 120, 121}) EXPECT_EQ(choose_variant(sm, 16), VariantId::kR16S2) << sm;
  for (int sm : {90, 100, 103}) EXPECT_EQ(choose_variant(sm, 1), VariantId::kR16S2Bulk) << sm;
  // An e4m3 cache's 576-byte rows: cp.async everywhere (bulk copies measured slower).
  for (int sm : {80, 89, 90, 100, 120}) EXPECT_EQ(choose_variant(sm, 16, true), VariantId::kR16S2);
  EXPECT_EQ(choose_variant(90, 32, true), VariantId::kR32S4);
}

TEST(TileConfig, SixtyFourRowsAboveThirtyTwo) {
  EXPECT_EQ(choose_variant(80, 128), VariantId::kR64S3);
  EXPECT_EQ(choose_variant(90, 33), VariantId::kR64S4);
  EXPECT_EQ(choose_variant(100, 4096), VariantId::kR64S4);
  // 99 KB a block: 64 rows fit with 16-token tiles.
  for (int sm : {86, 89, 120}) EXPECT_EQ(choose_variant(sm, 4096), VariantId::kR64S3T16) << sm;
}

TEST(TileConfig, ThirtyTwoRowsBetweenSixteenAndThirtyTwo) {
  EXPECT_EQ(choose_variant(80, 17), VariantId::kR32S3);
  EXPECT_EQ(choose_variant(90, 32), VariantId::kR32S4);
  EXPECT_EQ(choose_variant(120, 32), VariantId::kR32S2);
}

TEST(TileConfig, EveryChosenVariantFitsItsArchitecture) {
  // Shared memory a block may have: sm_80 163 KB, sm_86/89/120 99 KB, sm_90/100 227 KB.
  const std::pair<int, int> limits[] = {{80, 163 * 1024},         {86, kSmemLimitConsumer},
                                        {89, kSmemLimitConsumer}, {90, 227 * 1024},
                                        {100, 227 * 1024},        {120, kSmemLimitConsumer}};
  for (auto [sm, limit] : limits) {
    for (int64_t rows : {1, 16, 17, 32, 33, 64, 4096}) {
      const VariantId id = choose_variant(sm, rows);
      ASSERT_NE(id, VariantId::kNone);
      with_variant(id, [&]<typename V>(V) {
        EXPECT_LE(V::kSmemBytes, limit) << "sm_" << sm << " rows " << rows;
        EXPECT_TRUE(!V::kBulk || sm >= 90) << "sm_" << sm << " rows " << rows;
        EXPECT_TRUE(V::kRows >= 32 || rows <= 16) << "sm_" << sm << " rows " << rows;
        EXPECT_TRUE(V::kRows == 64 || rows <= 32) << "sm_" << sm << " rows " << rows;
      });
    }
  }
}

// The six release architectures, as packages and CI build them, and builds of fewer.
constexpr int kRelease[] = {80, 86, 89, 90, 100, 120};
constexpr VariantBuild kReleaseBuild{kRelease, 6, false, true};
constexpr VariantBuild kReleaseAll{kRelease, 6, true, true};
constexpr int kOnly80[] = {80};
constexpr int kOnly90[] = {90};
constexpr int k80And90[] = {80, 90};
constexpr VariantBuild kOnly80Build{kOnly80, 1, false, true};
constexpr VariantBuild kOnly90Build{kOnly90, 1, false, true};
constexpr VariantBuild k80And90Build{k80And90, 2, false, true};
constexpr VariantId kAllIds[] = {VariantId::kR32S2,    VariantId::kR32S3,  VariantId::kR32S4,
                                 VariantId::kR16S2,     VariantId::kR64S3,   VariantId::kR64S4,
                                 VariantId::kR16S2Bulk, VariantId::kR64S3T16};

TEST(TileConfig, FitsOnlyWhereTheArchitectureCanRunIt) {
  EXPECT_TRUE(variant_fits(VariantId::kR64S4, 90));
  EXPECT_TRUE(variant_fits(VariantId::kR64S3, 80));
  EXPECT_FALSE(variant_fits(VariantId::kR64S4, 80));  // 197 KB: sm_80 gives 163 KB a block
  EXPECT_FALSE(variant_fits(VariantId::kR32S4, 80));
  EXPECT_FALSE(variant_fits(VariantId::kR64S4, 86));
  EXPECT_FALSE(variant_fits(VariantId::kR64S3, 120));
  EXPECT_TRUE(variant_fits(VariantId::kR16S2Bulk, 90));
  EXPECT_FALSE(variant_fits(VariantId::kR16S2Bulk, 89));
  EXPECT_TRUE(variant_fits(VariantId::kR32S2, 86));
  EXPECT_TRUE(variant_fits(VariantId::kR64S3T16, 120));
  EXPECT_FALSE(variant_fits(VariantId::kNone, 90));
}

TEST(TileConfig, VariantIdsNameTheirTypes) {
  for (VariantId id : kAllIds)
    with_variant(id, [&]<typename V>(V) { EXPECT_EQ(variant_id<V>(), id); });
}

TEST(TileConfig, TablesSelectTheirVariants) {
  EXPECT_TRUE(table_selects(80, VariantId::kR64S3));
  EXPECT_TRUE(table_selects(87, VariantId::kR32S2));  // sm_86's entry
  EXPECT_TRUE(table_selects(90, VariantId::kR16S2Bulk));
  EXPECT_TRUE(table_selects(90, VariantId::kR16S2));  // e4m3 decode
  EXPECT_FALSE(table_selects(80, VariantId::kR16S2Bulk));
  EXPECT_FALSE(table_selects(120, VariantId::kR16S2Bulk));
  EXPECT_FALSE(table_selects(75, VariantId::kR16S2));
}

// Exact mode on an e4m3 cache has a kernel instance for what the tables choose for it:
// everything but the bulk-copy decode variant of 16-bit caches.
TEST(TileConfig, E4M3VariantsAreWhatTheTablesChooseForE4M3) {
  for (VariantId id : kAllIds) {
    bool chosen = false;
    for (int arch : kRelease)
      for (int rows : {1, 16, 17, 32, 33, 64, 1000})
        chosen = chosen || choose_variant(arch, rows, true) == id;
    EXPECT_EQ(e4m3_variant(id), chosen) << "variant " << static_cast<int>(id);
  }
  EXPECT_FALSE(e4m3_variant(VariantId::kR16S2Bulk));
  EXPECT_TRUE(e4m3_variant(VariantId::kR16S2));
  EXPECT_TRUE(e4m3_variant(VariantId::kR64S3T16));
}

// A release build compiles for each architecture exactly its table's variants; with
// TREEVERIFY_ALL_VARIANTS every one that fits.
TEST(TileConfig, ReleaseBuildCompilesEachArchitecturesTable) {
  for (int arch : kRelease) {
    int built = 0, fitting = 0;
    for (VariantId id : kAllIds) {
      built += variant_in_build(id, arch, kReleaseBuild);
      fitting += variant_fits(id, arch);
      EXPECT_EQ(variant_in_build(id, arch, kReleaseBuild), table_selects(arch, id))
          << "sm_" << arch << " variant " << static_cast<int>(id);
      EXPECT_EQ(variant_in_build(id, arch, kReleaseAll), variant_fits(id, arch));
    }
    // Three, and sm_90/100's e4m3 decode variant beside their bulk one.
    EXPECT_EQ(built, arch == 90 || arch == 100 ? 4 : 3) << "sm_" << arch;
    EXPECT_GE(fitting, 3) << "sm_" << arch;
  }
  EXPECT_FALSE(variant_in_build(VariantId::kR16S2Bulk, 120, kReleaseBuild));
  EXPECT_TRUE(variant_in_build(VariantId::kR16S2Bulk, 120, kReleaseAll));
  EXPECT_FALSE(variant_in_build(VariantId::kR64S3, 90, kReleaseBuild));
  EXPECT_TRUE(variant_in_build(VariantId::kR64S3, 90, kReleaseAll));
  EXPECT_FALSE(variant_in_build(VariantId::kR64S4, 80, kReleaseAll));  // never: 197 KB
}

// The code of a built architecture also serves every device up to the next built one (its
// binary within a major version, its PTX above): sm_80 code alone runs an RTX 3090 (sm_86)
// with sm_86's tiles, sm_90 code alone an sm_120 part with sm_120's.
TEST(TileConfig, CodeHoldsTheTablesOfTheDevicesItServes) {
  for (VariantId id : {VariantId::kR32S2, VariantId::kR64S3T16, VariantId::kR32S3})
    EXPECT_TRUE(variant_in_build(id, 80, kOnly80Build)) << static_cast<int>(id);
  EXPECT_TRUE(variant_in_build(VariantId::kR32S2, 80, k80And90Build));
  EXPECT_FALSE(variant_in_build(VariantId::kR32S4, 80, k80And90Build));
  EXPECT_TRUE(variant_in_build(VariantId::kR64S3T16, 90, kOnly90Build));
  EXPECT_FALSE(variant_in_build(VariantId::kR64S3, 90, kOnly90Build));   // sm_80's table
  EXPECT_FALSE(variant_in_build(VariantId::kR32S4, 80, kOnly80Build));  // does not fit
}

// Whatever the unforced choice, forced row count or the schedule's fewer rows a CTA, on any
// device whose code a build holds: a variant that code has.
TEST(TileConfig, EveryUnforcedChoiceIsInTheBuild) {
  const VariantBuild builds[] = {kReleaseBuild, kOnly80Build, kOnly90Build, k80And90Build};
  for (const VariantBuild& b : builds) {
    for (int sm : {80, 86, 87, 89, 90, 100, 103, 110, 120, 121}) {
      int code = 0;  // the newest built architecture not above the device's
      for (int i = 0; i < b.num_archs; ++i)
        if (b.archs[i] <= sm && b.archs[i] > code) code = b.archs[i];
      if (code == 0) continue;
      for (int64_t rows : {1, 16, 17, 32, 33, 64, 4096}) {
        const TileChoice c = choose_tiles(sm, code, 0, rows, b);
        EXPECT_TRUE(variant_in_build(c.variant, code, b))
            << "device sm_" << sm << " code sm_" << code << " rows " << rows;
        // The device's own table, unless its variant cannot exist in that code at all.
        if (variant_fits(choose_variant(sm, rows), code))
          EXPECT_EQ(c.config_arch, sm) << "device sm_" << sm << " code sm_" << code;
      }
    }
  }
}

TEST(TileConfig, JitCompiledOlderCodeFallsBackToItsOwnTable) {
  // An H200 running PTX built for sm_86: the device's 64-row and bulk variants are not in it.
  EXPECT_EQ(choose_tiles(90, 86, 0, 128, kReleaseAll).config_arch, 86);
  EXPECT_EQ(choose_tiles(90, 86, 0, 128, kReleaseAll).variant, VariantId::kR64S3T16);
  EXPECT_EQ(choose_tiles(90, 86, 0, 16, kReleaseAll).variant, VariantId::kR16S2);
  // Code for sm_80 on an sm_86 part: the device's table, whose tiles fit its 99 KB.
  EXPECT_EQ(choose_tiles(86, 80, 0, 128, kReleaseAll).config_arch, 86);
  EXPECT_EQ(choose_tiles(86, 80, 0, 128, kOnly80Build).variant, VariantId::kR64S3T16);
  // sm_90 PTX on sm_100 and sm_120 parts; native code everywhere is the device's table.
  EXPECT_EQ(choose_tiles(100, 90, 0, 4096, kReleaseBuild).variant, VariantId::kR64S4);
  EXPECT_EQ(choose_tiles(120, 90, 0, 16, kOnly90Build).variant, VariantId::kR16S2);
  EXPECT_EQ(choose_tiles(90, 90, 0, 1, kReleaseBuild).variant, VariantId::kR16S2Bulk);
  // A forced table is taken as asked; the plan then refuses it if the code lacks it.
  EXPECT_EQ(choose_tiles(90, 86, 80, 128, kReleaseAll).variant, VariantId::kR64S3);
  EXPECT_FALSE(
      variant_in_build(choose_tiles(90, 86, 80, 128, kReleaseAll).variant, 86, kReleaseAll));
  EXPECT_EQ(choose_tiles(90, 90, 80, 128, kReleaseBuild).variant, VariantId::kR64S3);
  EXPECT_FALSE(variant_in_build(VariantId::kR64S3, 90, kReleaseBuild));
}

// The sm_90a wgmma kernel (cuda/sm90/choice.h): sm_90 devices running sm_90a code, any cache
// and mode, more than 32 rows, nothing forced but 64 rows.
TEST(TileConfig, WgmmaKernelOnlyWhereItApplies) {
  using sm90::wgmma_blocker;
  using sm90::WgmmaQuery;
  const WgmmaQuery v1{.device_sm = 90,
                      .code_arch = 90,
                      .built = true,
                      .forced_config_arch = 0,
                      .forced_rows = 0,
                      .max_rows = 128};
  EXPECT_EQ(wgmma_blocker(v1), nullptr);
  auto with = [&](auto change) {
    WgmmaQuery q = v1;
    change(q);
    return wgmma_blocker(q);
  };
  EXPECT_NE(with([](WgmmaQuery& q) { q.device_sm = 100, q.code_arch = 100; }), nullptr);
  EXPECT_NE(with([](WgmmaQuery& q) { q.device_sm = 120, q.code_arch = 120; }), nullptr);
  EXPECT_NE(with([](WgmmaQuery& q) { q.code_arch = 89; }), nullptr);  // sm_89 PTX JIT on an H200
  EXPECT_NE(with([](WgmmaQuery& q) { q.built = false; }), nullptr);   // "90" without the "a"
  EXPECT_NE(with([](WgmmaQuery& q) { q.forced_config_arch = 90; }), nullptr);
  EXPECT_NE(with([](WgmmaQuery& q) { q.forced_rows = 32; }), nullptr);
  EXPECT_EQ(with([](WgmmaQuery& q) { q.forced_rows = 64; }), nullptr);
  EXPECT_NE(with([](WgmmaQuery& q) { q.max_rows = 32; }), nullptr);  // the 32-row CTAs' case
  EXPECT_EQ(with([](WgmmaQuery& q) { q.max_rows = 33; }), nullptr);
  EXPECT_EQ(with([](WgmmaQuery& q) { q.max_rows = 16, q.forced_rows = 64; }), nullptr);
}

}  // namespace
}  // namespace treeverify::cuda::sm80
