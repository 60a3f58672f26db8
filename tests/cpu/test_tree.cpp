// Tree helpers: depths, positions, the packed ancestor mask, validation, custom_mask.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "random_trees.h"
#include "treeverify/tree.h"
#include "treeverify/types.h"

namespace treeverify {
namespace {

using test::Shape;

// Expects an invalid-argument error whose message contains every fragment.
void expect_error(const Status& s, std::initializer_list<std::string> fragments) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.to_string();
  for (const auto& f : fragments)
    EXPECT_NE(s.message().find(f), std::string::npos)
        << "missing '" << f << "' in: " << s.message();
}

TEST(Tree, DepthsAndPositionsOfHandMadeTrees) {
  // Request 0:  0 -> {1, 2}, 1 -> {3, 4}, 3 -> 5.  Request 1: empty.  Request 2: chain of 3.
  const std::vector<int32_t> qo_indptr = {0, 6, 6, 9};
  const std::vector<int32_t> parents = {-1, 0, 0, 1, 1, 3, -1, 0, 1};
  const std::vector<int32_t> kv_len = {6 + 100, 7, 3};
  std::vector<int32_t> depths, positions;
  ASSERT_TRUE(tree_depths(qo_indptr, parents, &depths).ok());
  EXPECT_EQ(depths, (std::vector<int32_t>{0, 1, 1, 2, 2, 3, 0, 1, 2}));
  ASSERT_TRUE(tree_positions(qo_indptr, kv_len, parents, &positions).ok());
  EXPECT_EQ(positions, (std::vector<int32_t>{100, 101, 101, 102, 102, 103, 0, 1, 2}));
}

TEST(Tree, EmptyBatchAndEmptyRequests) {
  const std::vector<int32_t> none;
  std::vector<int32_t> depths = {7}, positions = {7};
  AncestorMask mask{.words_per_row = 5, .words = {1, 2}};
  ASSERT_TRUE(validate_trees(std::vector<int32_t>{0}, none).ok());
  ASSERT_TRUE(tree_depths(std::vector<int32_t>{0}, none, &depths).ok());
  EXPECT_TRUE(depths.empty());
  ASSERT_TRUE(tree_positions(std::vector<int32_t>{0}, none, none, &positions).ok());
  EXPECT_TRUE(positions.empty());
  ASSERT_TRUE(build_ancestor_mask(std::vector<int32_t>{0, 0, 0}, none, &mask).ok());
  EXPECT_EQ(mask.words_per_row, 0);
  EXPECT_TRUE(mask.words.empty());
  std::vector<int32_t> mask_indptr;
  std::vector<uint8_t> custom;
  ASSERT_TRUE(custom_mask_from_parents(std::vector<int32_t>{0, 0}, std::vector<int32_t>{5}, none,
                                       &mask_indptr, &custom)
                  .ok());
  EXPECT_EQ(mask_indptr, (std::vector<int32_t>{0, 0}));
  EXPECT_TRUE(custom.empty());
  std::vector<int32_t> back = {9};
  ASSERT_TRUE(parents_from_custom_mask(std::vector<int32_t>{0, 0}, std::vector<int32_t>{5},
                                       mask_indptr, custom, &back)
                  .ok());
  EXPECT_TRUE(back.empty());
}

TEST(Tree, AncestorMaskMatchesAncestorWalk) {
  std::mt19937_64 rng(11);
  const std::vector<std::vector<int32_t>> batches = {
      {1}, {31}, {32}, {33}, {1024}, {0, 5, 64, 0, 200, 1}, {1024, 3, 1000}};
  for (Shape shape : test::kAllShapes) {
    for (const auto& sizes : batches) {
      std::vector<int32_t> qo_indptr, parents;
      test::random_batch(sizes, shape, rng, &qo_indptr, &parents);
      AncestorMask mask;
      ASSERT_TRUE(build_ancestor_mask(qo_indptr, parents, &mask).ok());
      int32_t max_tree = 0;
      for (int32_t n : sizes) max_tree = std::max(max_tree, n);
      ASSERT_EQ(mask.words_per_row, (max_tree + 31) / 32);
      ASSERT_EQ(mask.words.size(), parents.size() * mask.words_per_row);
      std::vector<int32_t> depths;
      ASSERT_TRUE(tree_depths(qo_indptr, parents, &depths).ok());
      for (size_t b = 0; b < sizes.size(); ++b) {
        const int32_t begin = qo_indptr[b], n = sizes[b];
        for (int32_t i = 0; i < n; ++i) {
          int32_t seen = 0;
          for (int32_t j = 0; j < mask.words_per_row * 32; ++j) {
            const bool expected = j < n && test::is_ancestor_or_self(&parents[begin], j, i);
            ASSERT_EQ(mask.visible(begin + i, j), expected)
                << "shape " << static_cast<int>(shape) << " request " << b << " i " << i << " j "
                << j;
            seen += expected;
          }
          // A node sees exactly depth + 1 tree nodes: itself and its ancestors.
          ASSERT_EQ(seen, depths[begin + i] + 1);
        }
      }
    }
  }
}

TEST(Tree, ValidationErrors) {
  const std::vector<int32_t> ok_parents = {-1, 0};
  expect_error(validate_trees(std::vector<int32_t>{}, {}), {"qo_indptr"});
  expect_error(validate_trees(std::vector<int32_t>{1, 2}, ok_parents), {"qo_indptr[0] = 1"});
  expect_error(validate_trees(std::vector<int32_t>{0, 2, 1}, ok_parents),
               {"request 1", "qo_indptr[2] = 1"});
  std::vector<int32_t> big(kMaxTreeSize + 1, 0);
  big[0] = -1;
  expect_error(validate_trees(std::vector<int32_t>{0, kMaxTreeSize + 1}, big),
               {"request 0", "T_b = 1025", "kMaxTreeSize"});
  expect_error(validate_trees(std::vector<int32_t>{0, 3}, ok_parents), {"qo_indptr[B] = 3"});
  expect_error(validate_trees(std::vector<int32_t>{0, 1, 3}, std::vector<int32_t>{-1, 0, 0}),
               {"request 1 node 0", "parent = 0"});
  expect_error(validate_trees(std::vector<int32_t>{0, 3}, std::vector<int32_t>{-1, 0, 2}),
               {"request 0 node 2", "parent = 2", "parent < i"});
  expect_error(validate_trees(std::vector<int32_t>{0, 3}, std::vector<int32_t>{-1, 5, 0}),
               {"node 1", "parent = 5"});
  expect_error(validate_trees(std::vector<int32_t>{0, 3}, std::vector<int32_t>{-1, 0, -1}),
               {"node 2", "parent = -1", "parent >= 0"});
  expect_error(validate_trees(std::vector<int32_t>{0, 3}, std::vector<int32_t>{-1, -2, 0}),
               {"node 1", "parent = -2"});

  std::vector<int32_t> positions = {42};
  expect_error(tree_positions(std::vector<int32_t>{0, 2}, std::vector<int32_t>{2, 2}, ok_parents,
                              &positions),
               {"kv_len", "has 2 entries for 1 requests"});
  expect_error(
      tree_positions(std::vector<int32_t>{0, 2}, std::vector<int32_t>{1}, ok_parents, &positions),
      {"kv_len", "request 0", "kv_len = 1, T_b = 2"});
  EXPECT_EQ(positions, std::vector<int32_t>{42}) << "a failed call must not write its output";
  AncestorMask mask{.words_per_row = 3, .words = {7}};
  expect_error(build_ancestor_mask(std::vector<int32_t>{0, 2}, std::vector<int32_t>{0, 0}, &mask),
               {"parents"});
  EXPECT_EQ(mask.words_per_row, 3);
}

// Round trip parents -> custom_mask -> parents, and the flat mask against the packed one.
TEST(Tree, CustomMaskRoundTrip) {
  std::mt19937_64 rng(12);
  for (Shape shape : test::kAllShapes) {
    for (int rep = 0; rep < 4; ++rep) {
      std::vector<int32_t> sizes = {static_cast<int32_t>(rng() % 65), 0,
                                    static_cast<int32_t>(1 + rng() % 300)};
      if (rep == 0) sizes.push_back(1024);
      std::vector<int32_t> qo_indptr, parents, kv_len;
      test::random_batch(sizes, shape, rng, &qo_indptr, &parents);
      for (int32_t n : sizes) kv_len.push_back(n + static_cast<int32_t>(rng() % 40));
      std::vector<int32_t> mask_indptr, back;
      std::vector<uint8_t> custom;
      ASSERT_TRUE(custom_mask_from_parents(qo_indptr, kv_len, parents, &mask_indptr, &custom).ok());
      AncestorMask packed;
      ASSERT_TRUE(build_ancestor_mask(qo_indptr, parents, &packed).ok());
      for (size_t b = 0; b < sizes.size(); ++b) {
        const int32_t n = sizes[b], prefix_len = kv_len[b] - n;
        ASSERT_EQ(mask_indptr[b + 1] - mask_indptr[b], n * kv_len[b]);
        for (int32_t i = 0; i < n; ++i) {
          const uint8_t* row = &custom[mask_indptr[b] + static_cast<size_t>(i) * kv_len[b]];
          for (int32_t c = 0; c < kv_len[b]; ++c) {
            const bool expected =
                c < prefix_len || packed.visible(qo_indptr[b] + i, c - prefix_len);
            ASSERT_EQ(row[c] != 0, expected) << "request " << b << " row " << i << " col " << c;
          }
        }
      }
      ASSERT_TRUE(parents_from_custom_mask(qo_indptr, kv_len, mask_indptr, custom, &back).ok());
      EXPECT_EQ(back, parents);
    }
  }
}

// Request 0 is a valid 2-node tree; request 1 (prefix 3, tree 0 -> 1 -> 2, 0 -> 3 -> 4) is
// corrupted by each case, so every message must name request 1.
class CorruptedMask : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(custom_mask_from_parents(qo_indptr, kv_len, parents, &mask_indptr, &mask).ok());
  }
  void set(int32_t row, int32_t col, uint8_t v) { mask[mask_indptr[1] + row * 8 + col] = v; }
  Status convert() { return parents_from_custom_mask(qo_indptr, kv_len, mask_indptr, mask, &out); }

  const std::vector<int32_t> qo_indptr = {0, 2, 7};
  const std::vector<int32_t> kv_len = {2, 8};
  const std::vector<int32_t> parents = {-1, 0, -1, 0, 1, 0, 3};
  std::vector<int32_t> mask_indptr, out = {-7};
  std::vector<uint8_t> mask;
};

TEST_F(CorruptedMask, MissingPrefixBit) {
  set(2, 1, 0);
  expect_error(convert(), {"request 1 row 2 column 1", "prefix"});
  EXPECT_EQ(out, std::vector<int32_t>{-7});
}
TEST_F(CorruptedMask, MissingSelfBit) {
  set(3, 3 + 3, 0);
  expect_error(convert(), {"request 1 row 3 column 6", "itself"});
}
TEST_F(CorruptedMask, SeesALaterNode) {
  set(1, 3 + 2, 1);
  expect_error(convert(), {"request 1 row 1 column 5", "later"});
}
TEST_F(CorruptedMask, SeesALaterNodeThroughAValueOtherThanOne) {  // fuzz_tree's finding
  set(1, 3 + 2, 255);
  expect_error(convert(), {"request 1 row 1 column 5", "later"});
}
TEST_F(CorruptedMask, ExtraNonAncestorBit) {
  set(4, 3 + 1, 1);  // node 4 also sees node 1, which is on another branch
  expect_error(convert(), {"request 1 row 4 column 4", "parent node 3"});
}
TEST_F(CorruptedMask, MissingAncestorBit) {
  set(2, 3 + 0, 0);  // node 2 sees its parent 1 but not the root
  expect_error(convert(), {"request 1 row 2 column 3", "parent node 1"});
}
TEST_F(CorruptedMask, SecondRoot) {
  set(3, 3 + 0, 0);  // node 3 sees only itself
  expect_error(convert(), {"request 1 row 3", "second root"});
}
TEST_F(CorruptedMask, ChildOfAMovedNode) {
  set(4, 3 + 3, 0);  // node 4 drops its parent 3 but keeps the root: it now claims parent 0
  ASSERT_TRUE(convert().ok()) << "a leaf re-hung under its grandparent is still a tree";
  EXPECT_EQ(out, (std::vector<int32_t>{-1, 0, -1, 0, 1, 0, 0}));
}
TEST_F(CorruptedMask, BadIndptrAndSizes) {
  std::vector<int32_t> bad = mask_indptr;
  bad[2] += 1;
  expect_error(parents_from_custom_mask(qo_indptr, kv_len, bad, mask, &out), {"request 1"});
  expect_error(parents_from_custom_mask(qo_indptr, kv_len, std::vector<int32_t>{0, 4}, mask, &out),
               {"mask_indptr", "has 2 entries for 2 requests"});
  mask.pop_back();
  expect_error(convert(), {"custom_mask", "mask_indptr[B] = 44"});
}

// Any mask either is rejected or is exactly the mask of the tree it converts to: flip single
// bits of valid masks at random and check that property.
TEST(Tree, RandomBitFlipsAreRejectedOrRoundTrip) {
  std::mt19937_64 rng(13);
  int rejected = 0, accepted = 0;
  for (int rep = 0; rep < 400; ++rep) {
    const Shape shape = test::kAllShapes[rep % 5];
    std::vector<int32_t> qo_indptr, parents, mask_indptr, back, mask_indptr2;
    test::random_batch({static_cast<int32_t>(2 + rng() % 40)}, shape, rng, &qo_indptr, &parents);
    const std::vector<int32_t> kv_len = {qo_indptr[1] + static_cast<int32_t>(rng() % 5)};
    std::vector<uint8_t> mask, mask2;
    ASSERT_TRUE(custom_mask_from_parents(qo_indptr, kv_len, parents, &mask_indptr, &mask).ok());
    mask[rng() % mask.size()] ^= 1;
    const Status s = parents_from_custom_mask(qo_indptr, kv_len, mask_indptr, mask, &back);
    if (!s.ok()) {
      ++rejected;
      continue;
    }
    ++accepted;
    ASSERT_NE(back, parents);
    ASSERT_TRUE(custom_mask_from_parents(qo_indptr, kv_len, back, &mask_indptr2, &mask2).ok());
    ASSERT_EQ(mask2, mask);
  }
  EXPECT_GT(rejected, 300);
  EXPECT_GT(accepted, 0);  // dropping a leaf's parent bit re-hangs it: a valid tree
}

}  // namespace
}  // namespace treeverify
