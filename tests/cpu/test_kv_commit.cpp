// KV commit on the host: in-place row moves in the paged cache against an out-of-place
// reference, and the slot-list rewrite for page_size = 1. No row may be lost or duplicated.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <climits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "kv_commit_cases.h"
#include "random_trees.h"
#include "treeverify/ddtree.h"
#include "treeverify/types.h"

namespace treeverify {
namespace {

using test::make_batch;
using test::overlapping_moves;
using test::PagedBatch;
using test::random_path;
using test::reference_commit;

TEST(KvCommitPaged, MatchesOutOfPlaceReference) {
  std::mt19937_64 rng(51);
  int64_t overlaps = 0, identity = 0;
  for (int32_t page_size : {1, 2, 16, 64, 128}) {
    for (test::Shape shape : test::kAllShapes) {
      for (bool full : {false, true}) {
        PagedBatch pb = make_batch(page_size, {1, 0, 37, 1024, 200, 5}, shape, full, rng);
        const auto expected = reference_commit(pb);
        overlaps += overlapping_moves(pb);
        std::vector<int32_t> new_kv_len;
        ASSERT_TRUE(commit_kv_paged(pb.args(), pb.accepted, &new_kv_len).ok());
        ASSERT_TRUE(pb.cache == expected) << "page_size " << page_size;
        for (size_t b = 0; b + 1 < pb.qo_indptr.size(); ++b) {
          const int32_t n = pb.qo_indptr[b + 1] - pb.qo_indptr[b];
          const int32_t path = pb.accepted.indptr[b + 1] - pb.accepted.indptr[b];
          EXPECT_EQ(new_kv_len[b], pb.kv_len[b] - n + path);
          for (int32_t k = 0; k < path; ++k) {
            const int32_t node = pb.accepted.nodes[pb.accepted.indptr[b] + k];
            identity += node == k;
          }
        }
      }
    }
  }
  EXPECT_GT(overlaps, 20) << "the cases must include overlapping moves";
  EXPECT_GT(identity, 0);
}

TEST(KvCommitPaged, IdentityPathMovesNothing) {
  // A chain accepted to the end: path[k] = k for all k, so the cache stays bit-identical.
  std::mt19937_64 rng(52);
  PagedBatch pb = make_batch(16, {1024, 1}, test::Shape::kChain, true, rng);
  const auto before = pb.cache;
  std::vector<int32_t> new_kv_len;
  ASSERT_TRUE(commit_kv_paged(pb.args(), pb.accepted, &new_kv_len).ok());
  EXPECT_TRUE(pb.cache == before);
  EXPECT_EQ(new_kv_len, pb.kv_len);
}

// The test above would catch an implementation that moves in the other order: show that
// order really gives a different (wrong) result on overlapping cases.
TEST(KvCommitPaged, ReverseOrderWouldBeWrong) {
  std::mt19937_64 rng(55);
  PagedBatch pb = make_batch(4, {300}, test::Shape::kDeep, true, rng);
  ASSERT_GT(overlapping_moves(pb), 0);
  const auto expected = reference_commit(pb);
  std::vector<uint16_t> reversed = pb.cache;
  const int32_t prefix_len = pb.kv_len[0] - 300;
  for (int32_t k = pb.accepted.indptr[1] - 1; k >= 0; --k) {
    const size_t src = pb.row_offset(0, prefix_len + pb.accepted.nodes[k]);
    const size_t dst = pb.row_offset(0, prefix_len + k);
    std::copy_n(reversed.begin() + src, kQKDim, reversed.begin() + dst);
  }
  EXPECT_FALSE(reversed == expected);
}

TEST(KvCommitPaged, FailedCallsChangeNothing) {
  std::mt19937_64 rng(54);
  PagedBatch pb = make_batch(8, {6, 3}, test::Shape::kChain, true, rng);
  const auto before = pb.cache;
  std::vector<int32_t> new_kv_len = {-5};
  auto expect_error = [&](PagedBatch bad, const AcceptedPaths& acc, const std::string& fragment) {
    const Status s = commit_kv_paged(bad.args(), acc, &new_kv_len);
    ASSERT_FALSE(s.ok()) << fragment;
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
    EXPECT_TRUE(std::equal(bad.cache.begin(), bad.cache.end(), before.begin()));
    EXPECT_EQ(new_kv_len, std::vector<int32_t>{-5});
  };
  AcceptedPaths acc = pb.accepted;
  acc.nodes[pb.accepted.indptr[1] + 2] = 1;  // request 1: 0, 1, 1 is not a path
  expect_error(pb, acc, "request 1 step 2: node 1 is not a child of 1");
  acc = pb.accepted;
  acc.nodes[1] = 2;  // request 0: skips node 1
  expect_error(pb, acc, "request 0 step 1: node 2 is not a child of 0");
  acc = pb.accepted;
  acc.indptr = {0, 0, 3};
  acc.nodes.resize(3);
  expect_error(pb, acc, "request 0: path of 0 nodes in a tree of 6");
  PagedBatch bad = pb;
  bad.page_indices[bad.page_indptr[1]] = 1000;
  expect_error(bad, pb.accepted, "request 1 entry");
  bad = pb;
  bad.page_indices[0] = -1;
  expect_error(bad, pb.accepted, "page -1");
  bad = pb;
  bad.page_indptr = {0, 0, bad.page_indptr[2]};
  expect_error(bad, pb.accepted, "request 0: 0 pages");
  bad = pb;
  bad.kv_len[1] = 2;
  expect_error(bad, pb.accepted, "kv_len = 2, T_b = 3");
  bad = pb;
  bad.page_size = 3;
  expect_error(bad, pb.accepted, "page_size = 3");
  bad = pb;
  bad.cache.pop_back();
  expect_error(bad, pb.accepted, "not a multiple");
}

// Two requests at page_size 4, each kv_len 8: a prefix of 5, then a root with two children.
// Request 0 owns pages {0, 1}, request 1 the pages given.
PagedBatch two_requests(std::vector<int32_t> pages_of_request_1) {
  PagedBatch pb{.page_size = 4,
                .qo_indptr = {0, 3, 6},
                .parents = {-1, 0, 0, -1, 0, 0},
                .kv_len = {8, 8},
                .page_indptr = {0, 2, 4},
                .page_indices = {0, 1}};
  pb.page_indices.insert(pb.page_indices.end(), pages_of_request_1.begin(),
                         pages_of_request_1.end());
  // Both accept node 2, whose row moves from position 7 to 6.
  pb.accepted = {.indptr = {0, 2, 4}, .nodes = {0, 2, 0, 2}, .bonus_tokens = {7, 7}};
  test::fill_distinct_rows(pb, 5);
  return pb;
}

// A row a commit moves must belong to its request alone, or the commit corrupts whoever else
// uses it: refused, naming kv_page_indices and both uses, before anything moves; by the host
// commit and, with the same validation, by the device one (which then launches nothing).
TEST(KvCommitPaged, SharedTreeRowsAreRefused) {
  const struct {
    std::vector<int32_t> pages;
    const char* fragment;
  } cases[] = {
      // Request 1's positions 4..7 land on request 0's: both trees in page 1 rows 1..3.
      {{2, 1}, "request 0 position 5 and request 1 position 5 are both tree rows in page 1 row 1"},
      // Request 1's tree rows (positions 5..7) are request 0's prefix rows 1..3 of page 0.
      {{2, 0}, "request 1 position 5 (a tree row) is also request 0 position 1 (a prefix row)"},
      // Request 1 lists page 3 twice: its tree rows are its own prefix rows 1..3.
      {{3, 3}, "request 1 position 5 (a tree row) is also request 1 position 1 (a prefix row)"},
  };
  for (const auto& c : cases) {
    PagedBatch pb = two_requests(c.pages);
    const auto before = pb.cache;
    std::vector<int32_t> new_kv_len = {-5};
    Status s = commit_kv_paged(pb.args(), pb.accepted, &new_kv_len);
    ASSERT_FALSE(s.ok()) << c.fragment;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("argument 'kv_page_indices'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.fragment), std::string::npos) << s.message();
    EXPECT_TRUE(pb.cache == before);
    EXPECT_EQ(new_kv_len, std::vector<int32_t>{-5});
    s = commit_kv_paged_cuda(pb.args(), pb.accepted, PagedKvCommitDevice{.num_pages = 5},
                             &new_kv_len);
    EXPECT_NE(s.message().find(c.fragment), std::string::npos) << s.message();
    EXPECT_EQ(new_kv_len, std::vector<int32_t>{-5});
  }
}

TEST(KvCommitPaged, SharedPrefixPagesAreAllowed) {
  // Request 1 shares request 0's first page, which holds prefix rows only (prefix caching).
  PagedBatch pb = two_requests({0, 3});
  const auto expected = reference_commit(pb);
  ASSERT_FALSE(pb.cache == expected);
  std::vector<int32_t> new_kv_len;
  ASSERT_TRUE(commit_kv_paged(pb.args(), pb.accepted, &new_kv_len).ok());
  EXPECT_TRUE(pb.cache == expected);
  EXPECT_EQ(new_kv_len, (std::vector<int32_t>{7, 7}));
}

// Lengths near 2^31 over a few pages (issue 52, defect 1): kv_len = 2^31 - 1 at page_size 128
// needs 2^24 page-table entries but only two pool pages when the prefix shares page 0 and the
// last entry, holding the tree rows, is page 1. The prefix-row walk of the tree-row check once
// stepped `first += page_size` in int32 past the last page and read a page table entry at a
// negative index (SIGSEGV). Valid input: the commit must succeed, and a shared row right at
// the end must still be found, with positions near 2^31 in its message.
struct NearInt32MaxBatch {
  static constexpr int32_t kKvLen = INT32_MAX;
  int32_t page_size;
  std::vector<int32_t> qo_indptr{0, 3}, parents{-1, 0, 0}, kv_len{kKvLen}, indptr, indices;
  std::vector<uint16_t> cache;
  AcceptedPaths accepted{.indptr = {0, 2}, .nodes = {0, 2}, .bonus_tokens = {7}};

  explicit NearInt32MaxBatch(int32_t ps) : page_size(ps) {
    const int32_t pages = static_cast<int32_t>((int64_t{kKvLen} + ps - 1) / ps);
    indptr = {0, pages};
    indices.assign(pages, 0);
    indices.back() = 1;
    cache.resize(size_t{2} * ps * kQKDim);
    std::iota(cache.begin(), cache.end(), uint16_t{0});
  }
  PagedKvCommit args() {
    return {.page_size = page_size,
            .kv_cache = cache,
            .kv_page_indptr = indptr,
            .kv_page_indices = indices,
            .kv_len = kv_len,
            .qo_indptr = qo_indptr,
            .parents = parents};
  }
  // Offset in `cache` of the row holding position pos, which lies in the last page (page 1).
  size_t last_page_row(int64_t pos) const {
    return (size_t{1} * page_size + static_cast<size_t>(pos % page_size)) * kQKDim;
  }
};

TEST(KvCommitPaged, LengthsNearInt32MaxOverFewPages) {
  for (int32_t page_size : {128, 64}) {
    SCOPED_TRACE(page_size);
    NearInt32MaxBatch nb(page_size);
    // Tree positions L .. L + 2 with L = 2^31 - 4; node 2 (position L + 2) moves to L + 1.
    const int64_t L = int64_t{INT32_MAX} - 3;
    std::vector<uint16_t> expected = nb.cache;
    std::copy_n(nb.cache.begin() + nb.last_page_row(L + 2), kQKDim,
                expected.begin() + nb.last_page_row(L + 1));
    ASSERT_FALSE(expected == nb.cache);
    std::vector<int32_t> new_kv_len;
    const Status s = commit_kv_paged(nb.args(), nb.accepted, &new_kv_len);
    ASSERT_TRUE(s.ok()) << s.to_string();
    EXPECT_EQ(new_kv_len, std::vector<int32_t>{static_cast<int32_t>(L + 2)});
    EXPECT_TRUE(nb.cache == expected);
    // The device commit's host validation walks the same pages and accepts them too (it then
    // answers kUnsupported without CUDA, or names the null device pointers with it).
    const Status d = commit_kv_paged_cuda(nb.args(), nb.accepted,
                                          PagedKvCommitDevice{.num_pages = 2}, &new_kv_len);
    EXPECT_EQ(d.message().find("argument 'kv_"), std::string::npos) << d.to_string();
  }
}

TEST(KvCommitPaged, SharedRowNearInt32MaxIsFound) {
  for (int32_t page_size : {128, 64}) {
    SCOPED_TRACE(page_size);
    NearInt32MaxBatch nb(page_size);
    // The entry before the last is page 1 too: its prefix rows include the tree rows.
    const int64_t entries = static_cast<int64_t>(nb.indices.size());
    nb.indices[entries - 2] = 1;
    const int64_t L = int64_t{INT32_MAX} - 3;
    const int64_t prefix_pos = (entries - 2) * page_size + L % page_size;
    const std::string fragment = fmt::format(
        "request 0 position {} (a tree row) is also request 0 position {} (a prefix row): page 1 "
        "row {}",
        L, prefix_pos, L % page_size);
    const auto before = nb.cache;
    std::vector<int32_t> new_kv_len = {-5};
    const Status s = commit_kv_paged(nb.args(), nb.accepted, &new_kv_len);
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
    EXPECT_TRUE(nb.cache == before);
    EXPECT_EQ(new_kv_len, std::vector<int32_t>{-5});
  }
}

// ---- e4m3 caches: rows of 576 bytes ---------------------------------------------------------

TEST(KvCommitPagedE4m3, MatchesOutOfPlaceReference) {
  std::mt19937_64 rng(56);
  int64_t overlaps = 0;
  for (int32_t page_size : {1, 2, 16, 64, 128}) {
    for (test::Shape shape : test::kAllShapes) {
      for (bool full : {false, true}) {
        PagedBatch pb = make_batch(page_size, {1, 0, 37, 1024, 200, 5}, shape, full, rng);
        std::vector<uint8_t> pool = test::distinct_e4m3_rows(pb);
        const auto expected = test::reference_commit(pb, pool);
        overlaps += overlapping_moves(pb);
        const auto cache16 = pb.cache;
        std::vector<int32_t> new_kv_len;
        const Status s = commit_kv_paged(test::e4m3_args(pb, pool), pb.accepted, &new_kv_len);
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_TRUE(pool == expected) << "page_size " << page_size;
        EXPECT_TRUE(pb.cache == cache16);  // not passed, not touched
        std::vector<int32_t> len16;
        ASSERT_TRUE(commit_kv_paged(pb.args(), pb.accepted, &len16).ok());
        EXPECT_EQ(new_kv_len, len16);
      }
    }
  }
  EXPECT_GT(overlaps, 20) << "the cases must include overlapping moves";
}

TEST(KvCommitPagedE4m3, FormatErrorsChangeNothing) {
  std::mt19937_64 rng(57);
  // Star trees with full paths: every path is 0 -> the last child, a real move.
  PagedBatch pb = make_batch(8, {6, 3}, test::Shape::kStar, true, rng);
  std::vector<uint8_t> pool = test::distinct_e4m3_rows(pb);
  const auto pool_before = pool;
  const auto cache_before = pb.cache;
  std::vector<int32_t> new_kv_len = {-5};
  auto expect_error = [&](const PagedKvCommit& args, const std::string& argument,
                          const std::string& fragment) {
    const Status s = commit_kv_paged(args, pb.accepted, &new_kv_len);
    ASSERT_FALSE(s.ok()) << fragment;
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(s.message().find("argument '" + argument + "'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
    EXPECT_TRUE(pool == pool_before);
    EXPECT_TRUE(pb.cache == cache_before);
    EXPECT_EQ(new_kv_len, std::vector<int32_t>{-5});
  };
  // A byte count that is not whole pages of 576-byte rows.
  PagedKvCommit args = test::e4m3_args(pb, pool);
  args.kv_cache_e4m3 = args.kv_cache_e4m3.first(pool.size() - 1);
  expect_error(args, "kv_cache_e4m3", "not a multiple of page_size * 576 = 4608");
  // A pool of half the pages (the byte count of a 16-bit pool read as e4m3 would be twice the
  // rows; half is too few): page ids past the pool are refused.
  args = test::e4m3_args(pb, pool);
  args.kv_cache_e4m3 = args.kv_cache_e4m3.first(pool.size() / 2 / (8 * kQKDim) * (8 * kQKDim));
  expect_error(args, "kv_page_indices", "num_pages = ");
  // The 16-bit span with kv_format e4m3, and the e4m3 span without it.
  args = test::e4m3_args(pb, pool);
  args.kv_cache = pb.cache;
  expect_error(args, "kv_cache", "kv_format is e4m3");
  args = pb.args();
  args.kv_cache_e4m3 = pool;
  expect_error(args, "kv_cache_e4m3", "kv_format is same as q");
  args = test::e4m3_args(pb, pool);
  args.kv_format = static_cast<KvFormat>(7);
  expect_error(args, "kv_format", "kv_format = 7");
  // The device commit validates the format the same way, before anything reaches a device.
  const Status s = commit_kv_paged_cuda(args, pb.accepted,
                                        PagedKvCommitDevice{.num_pages = 4}, &new_kv_len);
  EXPECT_NE(s.message().find("kv_format = 7"), std::string::npos) << s.message();
  EXPECT_EQ(new_kv_len, std::vector<int32_t>{-5});
  // And then the same arguments succeed.
  ASSERT_TRUE(commit_kv_paged(test::e4m3_args(pb, pool), pb.accepted, &new_kv_len).ok());
  EXPECT_FALSE(pool == pool_before);
}

// ---- page_size = 1: slot lists --------------------------------------------------------------

TEST(CommitSlots, NoSlotLostOrDuplicated) {
  std::mt19937_64 rng(55);
  for (test::Shape shape : test::kAllShapes) {
    for (bool full : {false, true}) {
      // Page size 1 makes each page a slot: the batch's page lists are the slot lists.
      PagedBatch pb = make_batch(1, {1, 0, 1024, 77, 2}, shape, full, rng);
      std::vector<int32_t> slot_indptr = {0}, slots;
      for (size_t b = 0; b + 1 < pb.qo_indptr.size(); ++b) {
        slots.insert(slots.end(), pb.page_indices.begin() + pb.page_indptr[b],
                     pb.page_indices.begin() + pb.page_indptr[b] + pb.kv_len[b]);
        slot_indptr.push_back(static_cast<int32_t>(slots.size()));
      }
      SlotCommitResult res;
      ASSERT_TRUE(
          commit_slots(slot_indptr, slots, pb.kv_len, pb.qo_indptr, pb.parents, pb.accepted, &res)
              .ok());
      // Old slots = new slots + freed slots, as multisets.
      std::vector<int32_t> before = slots, after = res.slots;
      after.insert(after.end(), res.freed_slots.begin(), res.freed_slots.end());
      std::sort(before.begin(), before.end());
      std::sort(after.begin(), after.end());
      ASSERT_EQ(before, after);
      // Reading the cache through the new slot list gives what the paged commit (which moves
      // data instead) leaves at the same positions.
      const auto moved = reference_commit(pb);
      for (size_t b = 0; b + 1 < pb.qo_indptr.size(); ++b) {
        ASSERT_EQ(res.slot_indptr[b + 1] - res.slot_indptr[b], res.kv_len[b]);
        const int32_t path = pb.accepted.indptr[b + 1] - pb.accepted.indptr[b];
        const int32_t n = pb.qo_indptr[b + 1] - pb.qo_indptr[b];
        ASSERT_EQ(res.kv_len[b], pb.kv_len[b] - n + path);
        for (int32_t pos = 0; pos < res.kv_len[b]; ++pos) {
          const size_t via_slots =
              static_cast<size_t>(res.slots[res.slot_indptr[b] + pos]) * kQKDim;
          ASSERT_TRUE(std::equal(pb.cache.begin() + via_slots,
                                 pb.cache.begin() + via_slots + kQKDim,
                                 moved.begin() + pb.row_offset(b, pos)))
              << "request " << b << " position " << pos;
        }
      }
    }
  }
}

TEST(CommitSlots, Errors) {
  const std::vector<int32_t> qo = {0, 3}, parents = {-1, 0, 1}, kv_len = {5};
  const std::vector<int32_t> slot_indptr = {0, 5};
  const AcceptedPaths acc{.indptr = {0, 2}, .nodes = {0, 1}, .bonus_tokens = {0}};
  SlotCommitResult res{.slot_indptr = {42}};
  Status s = commit_slots(slot_indptr, std::vector<int32_t>{9, 8, 7, 6, 7}, kv_len, qo, parents,
                          acc, &res);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("tree slot 7 listed twice: request 0 node 0 and request 0 node 2"),
            std::string::npos)
      << s.message();
  s = commit_slots(std::vector<int32_t>{0, 4}, std::vector<int32_t>{9, 8, 7, 6}, kv_len, qo,
                   parents, acc, &res);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("4 slots, kv_len = 5"), std::string::npos) << s.message();
  EXPECT_EQ(res.slot_indptr, std::vector<int32_t>{42});
  ASSERT_TRUE(
      commit_slots(slot_indptr, std::vector<int32_t>{9, 8, 7, 6, 5}, kv_len, qo, parents, acc, &res)
          .ok());
  EXPECT_EQ(res.slots, (std::vector<int32_t>{9, 8, 7, 6}));
  EXPECT_EQ(res.freed_slots, std::vector<int32_t>{5});
  EXPECT_EQ(res.kv_len, std::vector<int32_t>{4});
}

// fuzz_kv_commit's findings: an accepted.indptr that leaves `nodes` and comes back, and
// indptr differences past int32, are named errors (they read out of bounds and overflowed).
TEST(CommitSlots, IndptrsOutsideTheirArraysAreNamedErrors) {
  const std::vector<int32_t> qo = {0, 1, 2}, parents = {-1, -1}, kv_len = {3, 3};
  const std::vector<int32_t> slot_indptr = {0, 3, 6}, slots = {1, 2, 3, 4, 5, 6};
  SlotCommitResult res{.slot_indptr = {42}};
  const AcceptedPaths out_and_back{.indptr = {0, 2, 1}, .nodes = {0}, .bonus_tokens = {0, 0}};
  Status s = commit_slots(slot_indptr, slots, kv_len, qo, parents, out_and_back, &res);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("accepted.indptr"), std::string::npos) << s.message();
  const AcceptedPaths overflowing{
      .indptr = {0, 1, INT32_MIN}, .nodes = {0, 0}, .bonus_tokens = {0, 0}};
  s = commit_slots(slot_indptr, slots, kv_len, qo, parents, overflowing, &res);
  ASSERT_FALSE(s.ok());
  const std::vector<int32_t> qo3 = {0, 1, 2, 3}, parents3 = {-1, -1, -1}, kv_len3 = {1, 1, 1};
  s = commit_slots(std::vector<int32_t>{0, 1, INT32_MIN, 3}, std::vector<int32_t>{1, 2, 3}, kv_len3,
                   qo3, parents3, AcceptedPaths{.indptr = {0, 1, 2, 3}, .nodes = {0, 0, 0}}, &res);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("slot_indptr"), std::string::npos) << s.message();
  EXPECT_EQ(res.slot_indptr, std::vector<int32_t>{42});
}

// Slots are checked across the batch: a tree slot in two requests' trees would be freed twice,
// and one that is another request's prefix slot would be freed while that request reads it.
TEST(CommitSlots, TreeSlotsSharedBetweenRequestsAreRefused) {
  const std::vector<int32_t> qo = {0, 3, 5}, parents = {-1, 0, 1, -1, 0}, kv_len = {5, 4};
  const std::vector<int32_t> slot_indptr = {0, 5, 9};
  const AcceptedPaths acc{.indptr = {0, 2, 3}, .nodes = {0, 1, 0}, .bonus_tokens = {0, 0}};
  const struct {
    std::vector<int32_t> slots;
    const char* fragment;
  } cases[] = {
      // Request 0: prefix 10 11, tree 20 21 22; request 1: prefix 12 13, tree 30 and 22.
      {{10, 11, 20, 21, 22, 12, 13, 30, 22},
       "tree slot 22 listed twice: request 0 node 2 and request 1 node 1"},
      // Request 1's tree slot 11 is request 0's prefix slot at position 1.
      {{10, 11, 20, 21, 22, 12, 13, 30, 11},
       "tree slot 11 (request 1 node 1) is also a prefix slot of request 0 (position 1)"},
  };
  for (const auto& c : cases) {
    SlotCommitResult res{.slot_indptr = {42}};
    const Status s = commit_slots(slot_indptr, c.slots, kv_len, qo, parents, acc, &res);
    ASSERT_FALSE(s.ok()) << c.fragment;
    EXPECT_NE(s.message().find("argument 'slots'"), std::string::npos) << s.message();
    EXPECT_NE(s.message().find(c.fragment), std::string::npos) << s.message();
    EXPECT_EQ(res.slot_indptr, std::vector<int32_t>{42});
    EXPECT_TRUE(res.slots.empty() && res.freed_slots.empty());
  }
  // Prefix slots may be shared (a cached prefix): request 1 starts with request 0's 10 11.
  SlotCommitResult res;
  ASSERT_TRUE(commit_slots(slot_indptr, std::vector<int32_t>{10, 11, 20, 21, 22, 10, 11, 30, 31},
                           kv_len, qo, parents, acc, &res)
                  .ok());
  EXPECT_EQ(res.slots, (std::vector<int32_t>{10, 11, 20, 21, 10, 11, 30}));
  EXPECT_EQ(res.freed_slots, (std::vector<int32_t>{22, 31}));
}

}  // namespace
}  // namespace treeverify
