// Random verify cases: trees, ragged batches, a shuffled page pool, random q and KV.
//
// Determinism: every random choice goes through the engine's raw 64-bit output and our own
// mappings (no std::uniform_int_distribution, no std::shuffle, whose results differ between
// standard libraries), so a seed names the same case on every machine.
#include "testing/cases.h"

#include <cmath>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "core/paging.h"
#include "treeverify/half.h"

namespace treeverify::testing {
namespace {

// Uniform integer in [0, n) by Lemire's multiply-shift; the bias (n / 2^64) is irrelevant here.
uint64_t uniform_below(std::mt19937_64& rng, uint64_t n) {
  return static_cast<uint64_t>((static_cast<unsigned __int128>(rng()) * n) >> 64);
}

// In kDeep trees one node in kDeepBranchEvery branches off a random earlier node; the rest
// extend the chain, giving long paths with a few side branches (EAGLE-style deep drafts).
constexpr uint64_t kDeepBranchEvery = 8;
// Children per node of kBushy trees: a complete 4-ary tree, the widest shape of the suite.
constexpr int32_t kBushyFanout = 4;

// splitmix64: a fast counter-based generator, good enough for test data, ~1 ns per value.
struct SplitMix64 {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
};

// Approximately N(0, 1) from one 64-bit draw: the sum of four 16-bit uniforms (Irwin-Hall,
// variance 4/12) centred and scaled by sqrt(3). Tails end at +-2*sqrt(3), which is harmless
// for attention test data, and it is several times faster than Box-Muller, which matters for
// the 10^8-element caches of docs/BENCH.md's 185k-token cases.
float approx_normal(SplitMix64& g) {
  const uint64_t r = g.next();
  const uint64_t sum = (r & 0xffff) + ((r >> 16) & 0xffff) + ((r >> 32) & 0xffff) + (r >> 48);
  constexpr float kInv16 = 1.0f / 65536.0f;
  constexpr float kSqrt3 = 1.7320508075688772f;
  return (static_cast<float>(sum) * kInv16 - 2.0f) * kSqrt3;
}

void fill_normal(DType dtype, uint64_t seed, std::vector<uint16_t>* v) {
  SplitMix64 g{seed};
  for (uint16_t& x : *v) x = float_to_half(dtype, approx_normal(g));
}

}  // namespace

const char* tree_shape_name(TreeShape shape) {
  switch (shape) {
    case TreeShape::kRandom:
      return "random";
    case TreeShape::kChain:
      return "chain";
    case TreeShape::kStar:
      return "star";
    case TreeShape::kDeep:
      return "deep";
    case TreeShape::kBushy:
      return "bushy";
  }
  return "unknown";
}

bool parse_tree_shape(const std::string& name, TreeShape* shape) {
  for (TreeShape s : {TreeShape::kRandom, TreeShape::kChain, TreeShape::kStar, TreeShape::kDeep,
                      TreeShape::kBushy}) {
    if (name == tree_shape_name(s)) {
      *shape = s;
      return true;
    }
  }
  return false;
}

std::vector<int32_t> make_tree(TreeShape shape, int32_t num_nodes, std::mt19937_64& rng) {
  std::vector<int32_t> parents(static_cast<size_t>(std::max(num_nodes, 0)));
  for (int32_t i = 0; i < num_nodes; ++i) {
    if (i == 0) {
      parents[0] = -1;
      continue;
    }
    switch (shape) {
      case TreeShape::kRandom:
        parents[i] = static_cast<int32_t>(uniform_below(rng, i));
        break;
      case TreeShape::kChain:
        parents[i] = i - 1;
        break;
      case TreeShape::kStar:
        parents[i] = 0;
        break;
      case TreeShape::kDeep:
        parents[i] = (i >= 2 && uniform_below(rng, kDeepBranchEvery) == 0)
                         ? static_cast<int32_t>(uniform_below(rng, i - 1))
                         : i - 1;
        break;
      case TreeShape::kBushy:
        parents[i] = (i - 1) / kBushyFanout;
        break;
    }
  }
  return parents;
}

VerifyProblem HostCase::problem() const {
  return VerifyProblem{
      .batch_size = static_cast<int32_t>(kv_len.size()),
      .num_heads = spec.num_heads,
      .page_size = spec.page_size,
      .num_pages = num_pages,
      .dtype = spec.dtype,
      .kv_format = spec.kv_format,
      .softmax_scale = spec.softmax_scale,
      .qo_indptr = qo_indptr.data(),
      .kv_len = kv_len.data(),
      .kv_page_indptr = kv_page_indptr.data(),
      .kv_page_indices = kv_page_indices.data(),
      .parents = parents.data(),
  };
}

VerifyTensors HostCase::tensors(void* out, float* lse) const {
  return VerifyTensors{
      .q = q.data(),
      .kv_cache = spec.kv_format == KvFormat::kE4M3 ? static_cast<const void*>(kv8.data())
                                                    : static_cast<const void*>(kv.data()),
      .kv_scale = spec.kv_format == KvFormat::kE4M3 ? &kv_scale : nullptr,
      .qo_indptr = qo_indptr.data(),
      .kv_len = kv_len.data(),
      .kv_page_indptr = kv_page_indptr.data(),
      .kv_page_indices = kv_page_indices.data(),
      .parents = parents.data(),
      .out = out,
      .lse = lse,
  };
}

// Throws std::invalid_argument for a spec that cannot be represented at all (mismatched
// sizes, lengths past int32). Specs that are representable but break the verify contract
// (T_b over kMaxTreeSize, bad page sizes, ...) are built as asked, so tests can feed them to
// validation.
HostCase make_case(const CaseSpec& spec) {
  if (spec.tree_sizes.size() != spec.prefix_lens.size()) {
    throw std::invalid_argument(spec.name + ": tree_sizes and prefix_lens differ in size");
  }
  if (spec.page_size < 1 || spec.num_heads < 1 || spec.pool_slack < 0) {
    throw std::invalid_argument(spec.name + ": page_size and num_heads must be >= 1, " +
                                "pool_slack >= 0");
  }
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  const size_t B = spec.tree_sizes.size();
  HostCase c;
  c.spec = spec;
  c.qo_indptr.assign(B + 1, 0);
  c.kv_page_indptr.assign(B + 1, 0);
  c.kv_len.resize(B);
  int64_t total_q = 0, used_pages = 0;
  for (size_t b = 0; b < B; ++b) {
    const int64_t T = spec.tree_sizes[b], L = spec.prefix_lens[b];
    if (T < 0 || L < 0 || L + T > kInt32Max) {
      throw std::invalid_argument(spec.name + ": request " + std::to_string(b) +
                                  ": need T >= 0, L >= 0 and L + T < 2^31");
    }
    total_q += T;
    used_pages += detail::pages_for(L + T, spec.page_size);
    if (total_q > kInt32Max || used_pages > kInt32Max) {
      throw std::invalid_argument(spec.name + ": total tree nodes or pages past 2^31");
    }
    c.kv_len[b] = static_cast<int32_t>(L + T);
    c.qo_indptr[b + 1] = static_cast<int32_t>(total_q);
    c.kv_page_indptr[b + 1] = static_cast<int32_t>(used_pages);
  }
  c.num_pages =
      static_cast<int64_t>(std::ceil(static_cast<double>(used_pages) * (1.0 + spec.pool_slack)));
  if (c.num_pages > kInt32Max) throw std::invalid_argument(spec.name + ": pool past 2^31 pages");

  std::mt19937_64 rng(spec.seed);
  c.parents.reserve(static_cast<size_t>(total_q));
  for (size_t b = 0; b < B; ++b) {
    const std::vector<int32_t> tree = make_tree(spec.shape, spec.tree_sizes[b], rng);
    c.parents.insert(c.parents.end(), tree.begin(), tree.end());
  }

  // Pages: the first used_pages entries of a Fisher-Yates shuffle of the whole pool, handed
  // out in order, so requests get scattered, disjoint pages and the rest of the pool is idle.
  std::vector<int32_t> pool(static_cast<size_t>(c.num_pages));
  std::iota(pool.begin(), pool.end(), 0);
  for (size_t i = pool.size(); i > 1; --i) std::swap(pool[i - 1], pool[uniform_below(rng, i)]);
  c.kv_page_indices.assign(pool.begin(), pool.begin() + used_pages);

  // q and the whole pool (idle pages and slots past kv_len included) get random values, like
  // a real pool full of other requests' KV: a kernel that reads the wrong page gets wrong
  // numbers rather than zeros that might hide it. Separate streams per tensor, derived from
  // the seed, so q does not change when the pool size does.
  c.q.resize(static_cast<size_t>(total_q) * spec.num_heads * kQKDim);
  c.kv.resize(static_cast<size_t>(c.num_pages) * spec.page_size * kQKDim);
  SplitMix64 seeder{spec.seed};
  const uint64_t q_seed = seeder.next(), kv_seed = seeder.next();
  fill_normal(spec.dtype, q_seed, &c.q);
  fill_normal(spec.dtype, kv_seed, &c.kv);
  if (spec.kv_format == KvFormat::kE4M3) {  // the same values, quantized; kv is dropped
    c.kv_scale = spec.kv_scale;
    c.kv8.resize(c.kv.size());
    for (size_t i = 0; i < c.kv.size(); ++i)
      c.kv8[i] = float_to_e4m3(half_to_float(spec.dtype, c.kv[i]) / spec.kv_scale);
    c.kv = {};
  }
  return c;
}

void add_outlier_channels(HostCase& host) {
  constexpr int kChannels[] = {3, 77, 130, 200, 311, 402, 450, 509};
  // Each 576-wide row's outlier channels of `values`, through `scale`.
  auto scale_channels = [&](auto& values, auto scale) {
    for (size_t r = 0; r < values.size() / kQKDim; ++r)
      for (int c : kChannels) values[r * kQKDim + c] = scale(values[r * kQKDim + c]);
  };
  const DType dt = host.spec.dtype;
  auto scale16 = [dt](uint16_t v) { return float_to_half(dt, 20.f * half_to_float(dt, v)); };
  scale_channels(host.q, scale16);
  scale_channels(host.kv, scale16);
  scale_channels(host.kv8, [](uint8_t k) { return float_to_e4m3(20.f * e4m3_to_float(k)); });
}

// docs/BENCH.md's roofline bytes: the KV rows of each request read once, (L + T) * 576 * 2. q, out
// and lse are left out on purpose, as in docs/BENCH.md, so that GB/s and fractions of roofline
// are comparable with its anchor tables (they add under 3% for every suite case).
double verify_bytes(const HostCase& c) {
  double bytes = 0;
  for (int32_t len : c.kv_len)
    bytes += static_cast<double>(len) * kv_row_bytes(c.spec.kv_format, c.spec.dtype);
  return bytes;
}

// docs/BENCH.md's flops: 2 * T * H * (L + T) * (576 + 512) per request, masked pairs included.
double verify_flops(const HostCase& c) {
  double flops = 0;
  for (size_t b = 0; b + 1 < c.qo_indptr.size(); ++b) {
    const double T = c.qo_indptr[b + 1] - c.qo_indptr[b];
    flops += 2.0 * T * c.spec.num_heads * c.kv_len[b] * (kQKDim + kVDim);
  }
  return flops;
}

}  // namespace treeverify::testing
