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

TEST(TileConfig, SixtyFourRowsOnlyWhereSharedMemoryAllows) {
  EXPECT_EQ(choose_variant(80, 128), VariantId::kWide3);
  EXPECT_EQ(choose_variant(90, 33), VariantId::kWide4);
  EXPECT_EQ(choose_variant(100, 4096), VariantId::kWide4);
  // 99 KB a block: the 32-row, 2-stage tiles, whatever the rows.
  for (int sm : {86, 89, 120}) EXPECT_EQ(choose_variant(sm, 4096), VariantId::kLarge2) << sm;
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
      });
    }
  }
}

}  // namespace
}  // namespace treeverify::cuda::mma
