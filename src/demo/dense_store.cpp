// DenseKvStore: attention written from the definition (docs/DESIGN.md section 2) over a contiguous
// sequence, in float64: the independent path the treeverify paths are checked against.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "core/check.h"
#include "demo/kv_store.h"
#include "treeverify/half.h"
#include "treeverify/types.h"

namespace treeverify::demo {
namespace {

class DenseKvStore final : public KvStore {
 public:
  explicit DenseKvStore(const StoreOptions& o)
      : o_(o), rows_(o.layers, std::vector<uint16_t>(static_cast<size_t>(o.capacity) * kQKDim)) {}

  int32_t length() const override { return length_; }

  Status begin(std::span<const int32_t> parents) override {
    parents_.assign(parents.begin(), parents.end());
    const int32_t need = length_ + static_cast<int32_t>(parents.size());
    TV_REQUIRE(need <= o_.capacity, "demo capacity", "{} rows needed, capacity {}", need,
               o_.capacity);
    return Status::Ok();
  }

  Status write_rows(int32_t layer, std::span<const uint16_t> rows) override {
    std::copy(rows.begin(), rows.end(),
              rows_[layer].begin() + static_cast<size_t>(length_) * kQKDim);
    return Status::Ok();
  }

  Status attend(int32_t layer, std::span<const uint16_t> q, std::span<uint16_t> out) override {
    const int32_t t = static_cast<int32_t>(parents_.size());
    std::vector<int32_t> seen;
    std::vector<double> p, acc(kLatentDim);
    std::vector<float> qf(kQKDim);
    for (int32_t i = 0; i < t; ++i) {
      // The rows node i sees, in sequence order: the prefix, then its ancestors and itself.
      seen.resize(length_);
      for (int32_t j = 0; j < length_; ++j) seen[j] = j;
      const size_t first_tree = seen.size();
      for (int32_t u = i; u >= 0; u = parents_[u]) seen.push_back(length_ + u);
      std::reverse(seen.begin() + first_tree, seen.end());
      for (int32_t h = 0; h < o_.heads; ++h) {
        const uint16_t* qrow = &q[(static_cast<size_t>(i) * o_.heads + h) * kQKDim];
        for (int32_t c = 0; c < kQKDim; ++c) qf[c] = half_to_float(o_.dtype, qrow[c]);
        p.resize(seen.size());
        double m = -INFINITY;
        for (size_t s = 0; s < seen.size(); ++s) {
          const uint16_t* k = row(layer, seen[s]);
          double dot = 0.0;
          for (int32_t c = 0; c < kQKDim; ++c)
            dot += static_cast<double>(qf[c]) * half_to_float(o_.dtype, k[c]);
          p[s] = dot * o_.softmax_scale;
          m = std::max(m, p[s]);
        }
        double sum = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (size_t s = 0; s < seen.size(); ++s) {
          p[s] = std::exp(p[s] - m);
          sum += p[s];
          const uint16_t* v = row(layer, seen[s]);
          for (int32_t c = 0; c < kLatentDim; ++c) acc[c] += p[s] * half_to_float(o_.dtype, v[c]);
        }
        uint16_t* o = &out[(static_cast<size_t>(i) * o_.heads + h) * kLatentDim];
        for (int32_t c = 0; c < kLatentDim; ++c)
          o[c] = float_to_half(o_.dtype, static_cast<float>(acc[c] / sum));
      }
    }
    return Status::Ok();
  }

  Status commit(std::span<const int32_t> path) override {
    // Increasing order is safe in place: path[k] >= k (see kv_commit.cpp).
    for (auto& layer : rows_) {
      for (size_t k = 0; k < path.size(); ++k) {
        if (path[k] == static_cast<int32_t>(k)) continue;
        std::memcpy(&layer[(length_ + k) * kQKDim], &layer[(length_ + path[k]) * size_t{kQKDim}],
                    kQKDim * sizeof(uint16_t));
      }
    }
    length_ += static_cast<int32_t>(path.size());
    return Status::Ok();
  }

  Status truncate(int32_t length) override {
    TV_REQUIRE(length >= 0 && length <= length_, "length", "{} (stored {})", length, length_);
    length_ = length;
    return Status::Ok();
  }

  std::string describe() const override { return "dense float64 attention"; }

 private:
  const uint16_t* row(int32_t layer, int32_t pos) const {
    return &rows_[layer][static_cast<size_t>(pos) * kQKDim];
  }

  StoreOptions o_;
  std::vector<std::vector<uint16_t>> rows_;  // [layers][capacity * 576]
  std::vector<int32_t> parents_;
  int32_t length_ = 0;
};

}  // namespace

std::unique_ptr<KvStore> make_dense_store(const StoreOptions& options) {
  return std::make_unique<DenseKvStore>(options);
}

}  // namespace treeverify::demo
