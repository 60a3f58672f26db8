// commit_kv_paged_cuda against the host commit on random trees and paths (overlapping moves
// included), for 16-bit and e4m3 caches, and its validation: a failed call launches nothing.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "../cpu/kv_commit_cases.h"
#include "gpu_check.h"
#include "treeverify/ddtree.h"

namespace treeverify {
namespace {

// Device copies of a PagedBatch's pool and metadata.
struct DeviceBatch {
  std::vector<void*> owned;
  PagedKvCommitDevice dev;

  template <typename T>
  T* upload(const std::vector<T>& v) {
    void* p = nullptr;
    EXPECT_EQ(cudaMalloc(&p, std::max<size_t>(v.size(), 1) * sizeof(T)), cudaSuccess);
    if (!v.empty()) {
      EXPECT_EQ(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
    owned.push_back(p);
    return static_cast<T*>(p);
  }
  // The pool on the device: pb.cache, or an e4m3 pool of the same pages when one is given.
  explicit DeviceBatch(const test::PagedBatch& pb, const std::vector<uint8_t>* e4m3 = nullptr) {
    dev = {.kv_cache = e4m3 != nullptr ? static_cast<void*>(upload(*e4m3))
                                       : static_cast<void*>(upload(pb.cache)),
           .num_pages = static_cast<int64_t>(pb.cache.size() / (pb.page_size * kQKDim)),
           .kv_page_indptr = upload(pb.page_indptr),
           .kv_page_indices = upload(pb.page_indices),
           .kv_len = upload(pb.kv_len),
           .qo_indptr = upload(pb.qo_indptr),
           .accepted_indptr = upload(pb.accepted.indptr),
           .accepted_nodes = upload(pb.accepted.nodes)};
  }
  ~DeviceBatch() {
    for (void* p : owned) cudaFree(p);
  }
  std::vector<uint16_t> cache(size_t elems) const {
    std::vector<uint16_t> out(elems);
    EXPECT_EQ(cudaMemcpy(out.data(), dev.kv_cache, elems * 2, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
  std::vector<uint8_t> bytes(size_t n) const {
    std::vector<uint8_t> out(n);
    EXPECT_EQ(cudaMemcpy(out.data(), dev.kv_cache, n, cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }
};

TEST(KvCommitGpu, MatchesHostCommit) {
  TV_SKIP_WITHOUT_GPU();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  int64_t overlaps = 0;
  for (int32_t page_size : {1, 2, 16, 64, 128}) {
    for (test::Shape shape : test::kAllShapes) {
      for (bool full : {false, true}) {
        // A 1024-node tree: 32 chunks of the kernel; 33 and 31 straddle a chunk edge.
        test::PagedBatch pb =
            test::make_batch(page_size, {1024, 0, 33, 1, 31, 200}, shape, full, rng);
        overlaps += test::overlapping_moves(pb);
        DeviceBatch db(pb);
        std::vector<int32_t> host_len, dev_len;
        test::PagedBatch host = pb;
        ASSERT_TRUE(commit_kv_paged(host.args(), host.accepted, &host_len).ok());
        PagedKvCommit meta = pb.args();
        meta.kv_cache = {};  // the device call must not need the host cache
        const Status s = commit_kv_paged_cuda(meta, pb.accepted, db.dev, &dev_len);
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(dev_len, host_len);
        EXPECT_TRUE(db.cache(pb.cache.size()) == host.cache)
            << "page_size " << page_size << " shape " << static_cast<int>(shape);
        EXPECT_TRUE(host.cache == test::reference_commit(pb));
      }
    }
  }
  EXPECT_GT(overlaps, 0);  // the ordering hazard is really exercised
}

// An e4m3 pool: rows of 576 bytes, so a kernel moving 1152-byte rows (or the wrong slices of
// a row) would move the wrong bytes. The same pages, trees and paths as the 16-bit test.
TEST(KvCommitGpu, E4m3MatchesHostCommit) {
  TV_SKIP_WITHOUT_GPU();
  const uint64_t seed = testing::fresh_seed();
  SCOPED_TRACE(::testing::Message() << "seed " << seed);
  std::mt19937_64 rng(seed);
  int64_t overlaps = 0;
  for (int32_t page_size : {1, 2, 16, 64, 128}) {
    for (test::Shape shape : test::kAllShapes) {
      for (bool full : {false, true}) {
        test::PagedBatch pb =
            test::make_batch(page_size, {1024, 0, 33, 1, 31, 200}, shape, full, rng);
        overlaps += test::overlapping_moves(pb);
        std::vector<uint8_t> pool = test::distinct_e4m3_rows(pb);
        DeviceBatch db(pb, &pool);
        db.dev.num_pages = static_cast<int64_t>(pool.size() / (pb.page_size * kQKDim));
        std::vector<int32_t> host_len, dev_len;
        std::vector<uint8_t> host_pool = pool;
        ASSERT_TRUE(commit_kv_paged(test::e4m3_args(pb, host_pool), pb.accepted, &host_len).ok());
        PagedKvCommit meta = test::e4m3_args(pb, pool);
        meta.kv_cache_e4m3 = {};  // the device call must not need the host cache
        const Status s = commit_kv_paged_cuda(meta, pb.accepted, db.dev, &dev_len);
        ASSERT_TRUE(s.ok()) << s.to_string();
        ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
        EXPECT_EQ(dev_len, host_len);
        EXPECT_TRUE(db.bytes(pool.size()) == host_pool)
            << "page_size " << page_size << " shape " << static_cast<int>(shape);
        EXPECT_TRUE(host_pool == test::reference_commit(pb, pool));
      }
    }
  }
  EXPECT_GT(overlaps, 0);
}

TEST(KvCommitGpu, InvalidInputLaunchesNothing) {
  TV_SKIP_WITHOUT_GPU();
  std::mt19937_64 rng(61);
  // Star trees with full paths: every path is 0 -> the last child, a real move.
  test::PagedBatch pb = test::make_batch(8, {6, 3}, test::Shape::kStar, true, rng);
  DeviceBatch db(pb);
  std::vector<int32_t> len = {-5};
  AcceptedPaths acc = pb.accepted;
  acc.nodes[1] = 0;  // request 0: 0, 0 is not a path
  Status s = commit_kv_paged_cuda(pb.args(), acc, db.dev, &len);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("request 0 step 1: node 0 is not a child of 0"), std::string::npos)
      << s.message();
  PagedKvCommitDevice small = db.dev;
  small.num_pages = 1;
  s = commit_kv_paged_cuda(pb.args(), pb.accepted, small, &len);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("num_pages = 1"), std::string::npos) << s.message();
  PagedKvCommitDevice host_ptr = db.dev;
  host_ptr.kv_cache = pb.cache.data();
  s = commit_kv_paged_cuda(pb.args(), pb.accepted, host_ptr, &len);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("host memory"), std::string::npos) << s.message();
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(len, std::vector<int32_t>{-5});
  EXPECT_TRUE(db.cache(pb.cache.size()) == pb.cache);
}

}  // namespace
}  // namespace treeverify
