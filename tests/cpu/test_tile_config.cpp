// The per-architecture tile table of the portable kernel (src/cuda/mma/config.h): which
// variant each device and request size gets. Host-only constexpr code, so it is checked here,
// on machines without a GPU, for the architectures the project cannot run on.
#include <gtest/gtest.h>

#include "cuda/mma/config.h"

namespace treeverify::cuda::mma {
namespace {

TEST(TileConfig, TooOldHasNone) {
  EXPECT_EQ(choose_variant(75, 128), VariantId::kNone);
  EXPECT_EQ(choose_variant(0, 1), VariantId::kNone);
}

TEST(TileConfig, DecodeUsesSixteenRowsAndBulkCopiesFromSm90) {
  for (int sm : {80, 86, 89, 120, 121}) EXPECT_EQ(choose_variant(sm, 16), VariantId::kSmall) << sm;
  for (int sm : {90, 100, 103}) EXPECT_EQ(choose_variant(sm, 1), VariantId::kSmallBulk) << sm;
}

TEST(TileConfig, SixtyFourRowsAboveThirtyTwo) {
  EXPECT_EQ(choose_variant(80, 128), VariantId::kWide3);
  EXPECT_EQ(choose_variant(90, 33), VariantId::kWide4);
  EXPECT_EQ(choose_variant(100, 4096), VariantId::kWide4);
  // 99 KB a block: 64 rows fit with 16-token tiles.
  for (int sm : {86, 89, 120}) EXPECT_EQ(choose_variant(sm, 4096), VariantId::kWide3T16) << sm;
}

TEST(TileConfig, ThirtyTwoRowsBetweenSixteenAndThirtyTwo) {
  EXPECT_EQ(choose_variant(80, 17), VariantId::kLarge3);
  EXPECT_EQ(choose_variant(90, 32), VariantId::kLarge4);
  EXPECT_EQ(choose_variant(120, 32), VariantId::kLarge2);
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

TEST(TileConfig, CompiledOnlyWhereTheArchitectureCanRunIt) {
  EXPECT_TRUE(variant_compiled_for(VariantId::kWide4, 90));
  EXPECT_TRUE(variant_compiled_for(VariantId::kWide3, 80));
  EXPECT_FALSE(variant_compiled_for(VariantId::kWide4, 86));
  EXPECT_FALSE(variant_compiled_for(VariantId::kWide3, 120));
  EXPECT_TRUE(variant_compiled_for(VariantId::kSmallBulk, 90));
  EXPECT_FALSE(variant_compiled_for(VariantId::kSmallBulk, 89));
  EXPECT_TRUE(variant_compiled_for(VariantId::kLarge2, 86));
  EXPECT_TRUE(variant_compiled_for(VariantId::kWide3T16, 120));
  EXPECT_FALSE(variant_compiled_for(VariantId::kNone, 90));
}

TEST(TileConfig, JitCompiledOlderCodeFallsBackToItsOwnTable) {
  // An H200 running PTX built for sm_86: the device's 64-row and bulk variants are not in it.
  EXPECT_EQ(choose_tiles(90, 86, 0, 128).config_arch, 86);
  EXPECT_EQ(choose_tiles(90, 86, 0, 128).variant, VariantId::kWide3T16);
  EXPECT_EQ(choose_tiles(90, 86, 0, 16).variant, VariantId::kSmall);
  // Code for sm_80 on an sm_86 part: the device's table, whose tiles fit its 99 KB.
  EXPECT_EQ(choose_tiles(86, 80, 0, 128).config_arch, 86);
  EXPECT_EQ(choose_tiles(86, 80, 0, 128).variant, VariantId::kWide3T16);
  // sm_90 PTX on sm_100 and sm_120 parts; native code everywhere is the device's table.
  EXPECT_EQ(choose_tiles(100, 90, 0, 4096).variant, VariantId::kWide4);
  EXPECT_EQ(choose_tiles(120, 90, 0, 16).variant, VariantId::kSmall);
  EXPECT_EQ(choose_tiles(90, 90, 0, 1).variant, VariantId::kSmallBulk);
  // A forced table is taken as asked; the plan then refuses it if the code lacks it.
  EXPECT_EQ(choose_tiles(90, 86, 80, 128).variant, VariantId::kWide3);
  EXPECT_FALSE(variant_compiled_for(choose_tiles(90, 86, 80, 128).variant, 86));
}

}  // namespace
}  // namespace treeverify::cuda::mma
