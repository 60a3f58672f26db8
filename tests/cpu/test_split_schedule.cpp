// The split-KV schedule (src/core/split_schedule.cpp): host logic that every CUDA plan uses.
#include <gtest/gtest.h>

#include <algorithm>
#include <utility>
#include <vector>

#include "core/split_schedule.h"

namespace treeverify::detail {
namespace {

struct Batch {
  std::vector<int32_t> qo_indptr{0};
  std::vector<int32_t> kv_len;
  void add(int32_t tree, int32_t kv) {
    qo_indptr.push_back(qo_indptr.back() + tree);
    kv_len.push_back(kv);
  }
};

// The schedule's input for a batch: 32-row CTAs of 32-token tiles unless changed.
SplitScheduleInput input(const Batch& b, int heads, int concurrent = 132) {
  SplitScheduleInput in;
  in.qo_indptr = b.qo_indptr;
  in.kv_len = b.kv_len;
  in.num_heads = heads;
  in.rows_per_cta = 32;
  in.tile_tokens = 32;
  in.concurrent_ctas = concurrent;
  return in;
}

SplitSchedule schedule(const Batch& b, int heads, int concurrent = 132, int tile_tokens = 32) {
  SplitScheduleInput in = input(b, heads, concurrent);
  in.tile_tokens = tile_tokens;
  return plan_split_schedule(in);
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The invariants every schedule keeps: whole tiles, enough chunks for the longest request,
// and a CTA count that matches the grid the kernel will run.
void expect_consistent(const Batch& b, int heads, const SplitSchedule& s) {
  ASSERT_GT(s.chunk_tokens, 0);
  EXPECT_EQ(s.chunk_tokens % 32, 0);
  int64_t ctas = 0, max_kv = 0;
  int32_t max_blocks = 0;
  for (size_t r = 0; r < b.kv_len.size(); ++r) {
    const int64_t rows = int64_t{b.qo_indptr[r + 1] - b.qo_indptr[r]} * heads;
    if (rows == 0) continue;
    max_kv = std::max<int64_t>(max_kv, b.kv_len[r]);
    max_blocks = std::max<int32_t>(max_blocks, static_cast<int32_t>(ceil_div(rows, 32)));
    ctas += ceil_div(rows, 32) * std::max<int64_t>(1, ceil_div(b.kv_len[r], s.chunk_tokens));
  }
  EXPECT_EQ(s.max_row_blocks, max_blocks);
  EXPECT_EQ(s.num_ctas, ctas);
  if (max_kv > 0) {
    EXPECT_EQ(s.num_chunks, ceil_div(max_kv, s.chunk_tokens));
  }
}

TEST(SplitSchedule, OneLongRequestFillsTheDevice) {
  Batch b;
  b.add(16, 185000 + 16);  // V1: 128 rows, 4 row blocks
  const SplitSchedule s = schedule(b, 8);
  expect_consistent(b, 8, s);
  EXPECT_GE(s.num_ctas, 132 * 9 / 10) << "a single request must spread over the SMs";
  EXPECT_LE(s.num_ctas, 132) << "one wave is enough: more CTAs only add partials";
}

TEST(SplitSchedule, ManyRowsNeedNoSplit) {
  Batch b;
  b.add(64, 4096 + 64);  // 64 heads x 64 nodes = 128 row blocks of a short sequence
  const SplitSchedule s = schedule(b, 64, 128);
  expect_consistent(b, 64, s);
  EXPECT_EQ(s.num_chunks, 1);
}

TEST(SplitSchedule, RaggedBatchAndEmptyRequests) {
  Batch b;
  for (auto [t, kv] : std::vector<std::pair<int, int>>{
           {1, 1}, {0, 0}, {64, 100064}, {7, 524}, {0, 5000}, {33, 8224}})
    b.add(t, kv);
  for (int heads : {1, 8, 64}) {
    for (int concurrent : {1, 8, 132, 264}) {
      const SplitSchedule s = schedule(b, heads, concurrent);
      SCOPED_TRACE(testing::Message() << "heads " << heads << " concurrent " << concurrent);
      expect_consistent(b, heads, s);
    }
  }
}

TEST(SplitSchedule, NothingToDo) {
  Batch empty;
  const SplitSchedule s = schedule(empty, 8);
  EXPECT_EQ(s.num_ctas, 0);
  EXPECT_EQ(s.chunk_tokens, 32);
  Batch no_rows;
  no_rows.add(0, 1000);
  const SplitSchedule t = schedule(no_rows, 8);
  EXPECT_EQ(t.num_ctas, 0);
  EXPECT_EQ(t.max_row_blocks, 0);
}

SplitSchedule forced(const Batch& b, int heads, int chunk, int concurrent = 132) {
  SplitScheduleInput in = input(b, heads, concurrent);
  in.forced_chunk_tokens = chunk;
  return plan_split_schedule(in);
}

// The chosen schedule is never modelled slower than not splitting at all, nor than any other
// chunk length among its candidates.
TEST(SplitSchedule, NeverWorseThanTheAlternatives) {
  Batch b;
  b.add(16, 65536 + 16);
  b.add(1, 300);
  const SplitSchedule s = schedule(b, 16);
  for (int chunk : {32, 256, 1024, 2048, 65536 + 32})  // all among the candidates
    EXPECT_LE(s.est_ns, forced(b, 16, chunk).est_ns) << chunk;
}

// A forced chunk is taken as given (capped at the longest sequence), and one that covers
// every sequence writes no partials.
TEST(SplitSchedule, ForcedChunk) {
  Batch b;
  b.add(4, 1000);
  b.add(2, 100);
  const SplitSchedule s = forced(b, 8, 256);
  expect_consistent(b, 8, s);
  EXPECT_EQ(s.chunk_tokens, 256);
  EXPECT_EQ(s.num_chunks, 4);
  EXPECT_EQ(s.partial_rows, 4 * 8 * 4);  // only the first request is split
  const SplitSchedule whole = forced(b, 8, 1 << 20);
  EXPECT_EQ(whole.num_chunks, 1);
  EXPECT_EQ(whole.partial_rows, 0);
}

// Time counts tokens, not padded tiles: on a device that runs one CTA at a time, a request
// is not split, and costs one CTA plus its 100 tokens at either tile length.
TEST(SplitSchedule, PaddingIsNotCharged) {
  Batch b;
  b.add(4, 100);  // 32 rows (one CTA), 100 tokens: 7 tiles of 16 or 4 of 32
  const SplitCosts k;
  const SplitSchedule s16 = schedule(b, 8, 1, 16);
  const SplitSchedule s32 = schedule(b, 8, 1, 32);
  EXPECT_EQ(s16.num_chunks, 1);
  EXPECT_EQ(s16.chunk_tokens % 16, 0);
  EXPECT_DOUBLE_EQ(s16.est_ns, k.cta_ns + 100 * k.token_ns);
  EXPECT_DOUBLE_EQ(s32.est_ns, k.cta_ns + 100 * k.token_ns);
}

// Memory-bound decode (one 16-row CTA of a long prefix) runs one wave of more CTAs than SMs:
// one CTA an SM cannot draw the bandwidth, and more than a wave only adds partials.
TEST(SplitSchedule, LongDecodeFillsTheDeviceOnce) {
  Batch b;
  b.add(1, 185001);
  SplitScheduleInput in = input(b, 8, 264);
  in.rows_per_cta = 16;
  const SplitSchedule s = plan_split_schedule(in);
  EXPECT_GT(s.num_ctas, 132);
  EXPECT_LE(s.num_ctas, 264);
}

// When partials are dear, a short sequence is split into fewer chunks than when they are
// cheap: the schedule prices what it creates.
TEST(SplitSchedule, DearPartialsMeanFewerChunks) {
  Batch b;
  b.add(16, 4096 + 16);  // 128 rows
  SplitScheduleInput in = input(b, 8);
  in.costs.partial_row_ns = 0;
  const SplitSchedule cheap = plan_split_schedule(in);
  in.costs.partial_row_ns = 20;
  const SplitSchedule dear = plan_split_schedule(in);
  EXPECT_LT(dear.num_chunks, cheap.num_chunks);
  in.costs.combine_ns = 1e9;  // a combine dearer than any kernel: never split
  EXPECT_EQ(plan_split_schedule(in).num_chunks, 1);
}

// Short CTAs fill the idle slots of the last wave of full ones instead of adding a wave.
TEST(SplitSchedule, ShortChunksFillTheLastWave) {
  Batch b;
  b.add(4, 16 * 512 + 32);  // 32 rows: 16 full chunks of 512 and one of 32 tokens
  const SplitCosts k;
  const SplitSchedule s = forced(b, 8, 512, 20);
  EXPECT_EQ(s.num_ctas, 17);
  const double full = k.cta_ns + 512 * std::max(k.token_ns, 17 * k.token_bytes / k.bytes_per_ns);
  EXPECT_DOUBLE_EQ(s.est_ns, full + k.combine_ns + k.partial_row_ns * 32 * 17);
  // On 16 slots the short chunk's CTA takes a wave of its own.
  const SplitSchedule t = forced(b, 8, 512, 16);
  EXPECT_GT(t.est_ns, full + k.cta_ns + k.combine_ns);
}

// The device starts CTAs in grid order, so a request's short last chunk takes a slot beside
// its full ones, not an idle one after them. D1's shape (64 requests of one 16-row node and
// 8193 tokens, 16-row CTAs, two a SM, e4m3 rows): chunks of 2048 leave each request a
// 1-token fifth chunk whose 64 CTAs push 56 full ones into a second wave; the wave model
// alone chose them (139.8 us against 140.8 for 4 chunks of 2080).
TEST(SplitSchedule, ShortLastChunksDoNotDelayFullOnes) {
  Batch b;
  for (int r = 0; r < 64; ++r) b.add(1, 8193);
  SplitScheduleInput in = input(b, 16, 264);
  in.rows_per_cta = 16;
  in.costs.token_ns = 60;
  in.costs.token_bytes = 576;
  in.costs.bytes_per_ns = 4800;
  const SplitSchedule s = plan_split_schedule(in);
  EXPECT_EQ(s.num_chunks, 4);
  EXPECT_EQ(s.num_ctas, 256);
  in.forced_chunk_tokens = 2048;
  const SplitSchedule five = plan_split_schedule(in);
  EXPECT_EQ(five.num_chunks, 5);
  EXPECT_LT(s.est_ns, five.est_ns);
  // Launch order: the 264 slots take requests 0-51 and 4 CTAs of request 52; the 56 CTAs
  // after them start in the 52 slots the short ones free, and the last 4 when the short ones
  // of that second round end.
  const double full = in.costs.cta_ns + 2048 * in.costs.token_ns;
  const double short_one = in.costs.cta_ns + 1 * in.costs.token_ns;
  EXPECT_DOUBLE_EQ(five.est_ns, 2 * short_one + full + in.costs.combine_ns +
                                    in.costs.partial_row_ns * 64 * 16 * 5);
}

}  // namespace
}  // namespace treeverify::detail
