// Random verify cases shared by the tests, `treeverify check` and `treeverify bench`:
// trees of chosen shapes, ragged batches, a shuffled page pool, random q and KV.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "treeverify/verify.h"

namespace treeverify::testing {

enum class TreeShape {
  kRandom,  // parent[i] uniform in [0, i)  (docs/BENCH.md's suite trees)
  kChain,   // parent[i] = i - 1            (chain MTP / DFlash block verify)
  kStar,    // parent[i] = 0                (one level of siblings)
  kDeep,    // mostly chain, occasional branch to a random earlier node
  kBushy,   // parent[i] = (i - 1) / 4      (complete 4-ary tree)
};
const char* tree_shape_name(TreeShape shape);
bool parse_tree_shape(const std::string& name, TreeShape* shape);

std::vector<int32_t> make_tree(TreeShape shape, int32_t num_nodes, std::mt19937_64& rng);

struct CaseSpec {
  std::string name;  // for messages
  int32_t num_heads = 8;
  std::vector<int32_t> tree_sizes;   // T_b per request (>= 0); its size is the batch size
  std::vector<int64_t> prefix_lens;  // L_b per request, same size as tree_sizes
  int32_t page_size = 64;
  TreeShape shape = TreeShape::kRandom;
  DType dtype = DType::kBF16;
  float softmax_scale = 0.1447f;  // Kimi K2.5/K2.6
  uint64_t seed = 1;
  // Extra unused pages in the pool, as a fraction of the pages used; the used pages are a
  // random permutation of the pool, so nothing is contiguous by accident.
  double pool_slack = 0.25;
  // e4m3: the KV values are stored as e4m3(value / kv_scale). 1/64 puts N(0, 1) values well
  // inside e4m3's range (|value| < 448 / 64 = 7), as a per-layer amax / 448 scale would.
  KvFormat kv_format = KvFormat::kSameAsQ;
  float kv_scale = 1.f / 64;
};

// All host data of one verify call.
struct HostCase {
  CaseSpec spec;
  int64_t num_pages = 0;
  std::vector<int32_t> qo_indptr, kv_len, kv_page_indptr, kv_page_indices, parents;
  std::vector<uint16_t> q;   // [total_q, H, 576] dtype bits, values ~ N(0, 1) (approximately)
  std::vector<uint16_t> kv;  // [num_pages, page_size, 576] dtype bits, values ~ N(0, 1),
                             //   idle pages and slots past kv_len included; empty for e4m3
  std::vector<uint8_t> kv8;  // the same for an e4m3 cache (spec.kv_format), else empty
  float kv_scale = 0.f;      // e4m3: spec.kv_scale (tensors() points at it)

  int32_t total_q() const { return qo_indptr.empty() ? 0 : qo_indptr.back(); }
  VerifyProblem problem() const;  // points into this case's vectors
  // Host tensors pointing into this case's vectors, with the given outputs.
  VerifyTensors tensors(void* out, float* lse) const;
  size_t out_elems() const { return static_cast<size_t>(total_q()) * spec.num_heads * kVDim; }
  size_t lse_elems() const { return static_cast<size_t>(total_q()) * spec.num_heads; }
};

// Deterministic in spec (the same spec gives the same case on every machine). Throws
// std::invalid_argument for specs that cannot be represented (sizes of tree_sizes and
// prefix_lens differ, negative lengths, lengths or page counts past int32); specs that break
// the verify contract in other ways (T_b > kMaxTreeSize, ...) are built as given.
HostCase make_case(const CaseSpec& spec);

// Makes 8 of the 512 latent channels of q and of the cache 20x larger, as real latent caches
// have outlier channels (an e4m3 cache's codes re-encoded, saturating at 448: with the GPU
// tests' kv_scale 0.0137 the outlier channels of K sit mostly at +-6.1).
void add_outlier_channels(HostCase& host);

// Bytes and flops of a verify call (docs/BENCH.md's roofline): KV read once, Q.K^T and P.V over
// every (node, head, visible-or-not KV token) pair of each request.
double verify_bytes(const HostCase& c);
double verify_flops(const HostCase& c);

}  // namespace treeverify::testing
