// Where the demo model's KV rows live and how attention over them runs. One request; every
// layer has its own rows and shares the token -> row mapping.
//
//   PagedKvStore  treeverify: paged cache (any page size, pages drawn from a shuffled pool so
//                 the page table is not the identity), plan() once per forward pass and run()
//                 per layer, commit_kv_paged / commit_kv_paged_cuda (page_size > 1) or
//                 commit_slots (page_size 1). CPU backends use host memory; cuda keeps
//                 the pools on the device and uploads q / downloads out per layer.
//   DenseKvStore  a contiguous sequence per layer and a float64 attention loop written from
//                 the definition: the independent path the treeverify paths are checked
//                 against.
// With an e4m3 cache both quantize the 16-bit rows they are given (quantize_e4m3, as an
// engine's KV write does), so the dense loop attends to the same dequantized values.
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
  // The open pass's rows of `layer`: [T, 576] 16-bit values (an e4m3 store quantizes them).
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
  // What the attention computed: kFast when it rounds Q and P to e4m3 as the fast kernels do
  // (Plan::precision, except on cpu-reference without round_p, which rounds nothing).
  virtual Precision precision() const { return Precision::kExact; }
  // e4m3: the largest |value| / kv_scale written so far, at most 448 (more is an error); 0
  // for a 16-bit cache.
  virtual float kv_peak() const = 0;
};

struct StoreOptions {
  int32_t layers = 0;
  int32_t heads = 0;
  float softmax_scale = 0.f;
  DType dtype = DType::kBF16;  // of q and out, and of the KV rows unless kv_format says e4m3
  KvFormat kv_format = KvFormat::kSameAsQ;
  std::vector<float> kv_scale;  // e4m3: [layers], real value = stored x kv_scale[layer]
  int32_t page_size = 16;
  int32_t capacity = 0;  // the most rows a request ever holds (committed + one open pass)
  uint64_t seed = 0;     // shuffles the page pool
  PlanOptions plan;      // backend, round_p and precision of the PagedKvStore
};

// One layer's rows as an engine writes them to an e4m3 cache: codes = e4m3(value / kv_scale),
// value the 16-bit row's. A value past 448 x kv_scale would saturate silently in an engine;
// here it is an error with the value and the scale. *peak keeps the largest |value| / kv_scale.
Status quantize_e4m3(DType dtype, std::span<const uint16_t> rows, float kv_scale,
                     std::span<uint8_t> codes, float* peak);

Status make_paged_store(const StoreOptions& options, std::unique_ptr<KvStore>* store);
std::unique_ptr<KvStore> make_dense_store(const StoreOptions& options);

}  // namespace treeverify::demo
