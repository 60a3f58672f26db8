// The split-KV combine's launch shape (src/cuda/common/combine_shape.h): host-only constexpr
// code, checked here on machines without a GPU.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>

#include "cuda/common/combine_shape.h"

namespace treeverify::cuda {
namespace {

constexpr int kH200Sms = 132;

TEST(CombineShape, SlicesCoverTheRowAndBlocksFitWhereTheyCan) {
  for (int sms : {28, 46, 84, 132, 188})
    for (int64_t rows : {1, 8, 16, 64, 128, 512, 1024, 8192})
      for (int chunks : {2, 3, 8, 17, 33, 66, 129, 257, 1000}) {
        const CombineShape s = choose_combine_shape(rows, chunks, sms);
        SCOPED_TRACE(testing::Message()
                     << "sms " << sms << " rows " << rows << " chunks " << chunks);
        bool compiled = false;  // combine.cu has an instance of each slice, and only those
        for (const CombineSlice& c : kCombineSlices)
          compiled |= c.cols == s.cols && c.lanes == s.lanes;
        EXPECT_TRUE(compiled) << s.cols << " columns, " << s.lanes << " lanes";
        EXPECT_EQ(kVDim % (s.cols * s.lanes), 0);
        EXPECT_EQ(s.blocks, rows * (kVDim / (s.cols * s.lanes)));
        EXPECT_GE(s.warps, 1);
        EXPECT_LE(s.warps, kCombineMaxWarps);
        EXPECT_GE(s.rounds, 1);
        // Every chunk is read: streams x batch x rounds cover them.
        EXPECT_GE(static_cast<int64_t>(s.warps) * (32 / s.lanes) * kCombineBatch * s.rounds,
                  chunks);
        // A block of more than one warp only where the grid still fits the device at once.
        if (s.warps > 1)
          EXPECT_LE(s.blocks * s.warps, static_cast<int64_t>(kCombineWarpsPerSm) * sms);
      }
}

TEST(CombineShape, OneRoundOfLoadsWhereSomeShapeHasIt) {
  // The rows and chunks of the suite's split cases on the H200 (128 rows: V1, D2, S1; 512: S2,
  // V2; 8: S3, S4; 1024: D1): one round of loads, the blocks all resident.
  for (auto [rows, chunks] :
       {std::pair<int64_t, int>{128, 66}, {128, 33}, {512, 17}, {8, 257}, {1024, 4}}) {
    const CombineShape s = choose_combine_shape(rows, chunks, kH200Sms);
    EXPECT_EQ(s.rounds, 1) << rows << " rows, " << chunks << " chunks";
    EXPECT_EQ(s.waves, 1) << rows << " rows, " << chunks << " chunks";
  }
}

TEST(CombineShape, MeasuredChoicesOnTheH200) {
  // Measured on the H200 (docs/kernels/combine.md): with 8-byte loads V1/D2's 66 chunks take
  // two rounds; 16-byte loads at 16 lanes read them in one with 512 blocks.
  CombineShape s = choose_combine_shape(128, 66, kH200Sms);
  EXPECT_EQ(s.cols, 8);
  EXPECT_EQ(s.lanes, 16);
  EXPECT_EQ(s.blocks, 512);
  // S2's 17 chunks: 1024 blocks of 4 warps (6.9 us) rather than 2048 of 2 (7.8 us).
  s = choose_combine_shape(512, 17, kH200Sms);
  EXPECT_EQ(s.cols, 8);
  EXPECT_EQ(s.lanes, 32);
  EXPECT_EQ(s.warps, 4);
  // S1 and S3: already one round with 8-byte loads; half the blocks are 2-3% slower.
  s = choose_combine_shape(128, 33, kH200Sms);
  EXPECT_EQ(s.cols, 4);
  EXPECT_EQ(s.blocks, 512);
  s = choose_combine_shape(8, 257, kH200Sms);
  EXPECT_EQ(s.cols, 4);
  EXPECT_EQ(s.blocks, 128);
}

}  // namespace
}  // namespace treeverify::cuda
