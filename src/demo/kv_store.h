// Where the demo model's KV rows live and how attention over them runs. One request; every
// layer has its own rows and shares the token -> row mapping.
//
//   PagedKvStore  treeverify: paged cache (any page size, pages drawn from a shuffled pool so
//                 the page table is not the identity), plan() once per forward pass and run()
//                 per layer, commit_kv_paged / commit_kv_paged_cuda (page_size > 1) or
//                 commit_slots (page_size 1). CPU backends use host memory; cuda-mma keeps
//                 the pools on the device and uploads q / downloads out per layer.
//   DenseKvStore  a contiguous sequence per layer and a float64 attention loop written from
//                 the definition: the independent path the treeverify paths are checked
//                 against.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "treeverify/ddtree.h"
#include "treeverify/status.h"
#include "treeverify/verify.h"

namespace treeverify::demo {

class KvStore {
 public:
  virtual ~KvStore() = default;
  // L: committed tokens whose rows are stored.
  virtual int32_t length() const = 0;
  // Opens a pass of T = parents.size() nodes at rows L .. L+T-1 (node order).
  virtual Status begin(std::span<const int32_t> parents) = 0;
  // The open pass's rows of `layer`: [T, 576] 16-bit values.
  virtual Status write_rows(int32_t layer, std::span<const uint16_t> rows) = 0;
  // Attention of the open pass's nodes in `layer`: q [T, H, 576] -> out [T, H, 512], 16-bit.
  virtual Status attend(int32_t layer, std::span<const uint16_t> q, std::span<uint16_t> out) = 0;
  // Closes the pass keeping the nodes of `path` (root first, a root-down path of the open
  // tree) as committed rows L .. L + path.size() - 1; the other nodes' rows are dropped.
  virtual Status commit(std::span<const int32_t> path) = 0;
  // Drops committed rows past `length` (the drafter rolls back its draft chain).
  virtual Status truncate(int32_t length) = 0;
  // The backend and kernel that ran, for the report.
  virtual std::string describe() const = 0;
};

struct StoreOptions {
  int32_t layers = 0;
  int32_t heads = 0;
  float softmax_scale = 0.f;
  DType dtype = DType::kBF16;  // of q, KV rows and out
  int32_t page_size = 16;
  int32_t capacity = 0;  // the most rows a request ever holds (committed + one open pass)
  uint64_t seed = 0;     // shuffles the page pool
  PlanOptions plan;      // backend of the PagedKvStore
};

Status make_paged_store(const StoreOptions& options, std::unique_ptr<KvStore>* store);
std::unique_ptr<KvStore> make_dense_store(const StoreOptions& options);

}  // namespace treeverify::demo
