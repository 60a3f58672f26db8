// DenseKvStore: attention written from the definition (docs/DESIGN.md section 2) over a contiguous
// sequence, in float64: the independent path the treeverify paths are checked against. It keeps
// each KV value as the double the attention sees: the 16-bit value, or with an e4m3 cache the
// code's value times kv_scale (quantized by the same quantize_e4m3 as the paged store).
// It never rounds Q or P: against precision fast (which does) it is exact attention on the same
// cache, not the same computation, and demo.cpp does not require equal tokens then.
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
      : o_(o), rows_(o.layers, std::vector<double>(static_cast<size_t>(o.capacity) * kQKDim)) {}

  int32_t length() const override { return length_; }

  Status begin(std::span<const int32_t> parents) override {
    parents_.assign(parents.begin(), parents.end());
    const int32_t need = length_ + static_cast<int32_t>(parents.size());
    TV_REQUIRE(need <= o_.capacity, "demo capacity", "{} rows needed, capacity {}", need,
               o_.capacity);
    return Status::Ok();
  }

  Status write_rows(int32_t layer, std::span<const uint16_t> rows) override {
    double* dst = &rows_[layer][static_cast<size_t>(length_) * kQKDim];
    if (o_.kv_format != KvFormat::kE4M3) {
      for (size_t i = 0; i < rows.size(); ++i) dst[i] = half_to_float(o_.dtype, rows[i]);
      return Status::Ok();
    }
    TV_REQUIRE(o_.kv_scale.size() == static_cast<size_t>(o_.layers), "kv_scale",
               "{} scales for {} layers", o_.kv_scale.size(), o_.layers);
    codes_.resize(rows.size());
    TV_RETURN_IF_ERROR(quantize_e4m3(o_.dtype, rows, o_.kv_scale[layer], codes_, &kv_peak_));
    // Dequantized in float64 as the oracle does (src/cpu/cpu_util.h), so the two agree bit for
    // bit on the same cache.
    const double scale = o_.kv_scale[layer];
    for (size_t i = 0; i < rows.size(); ++i) dst[i] = e4m3_to_float(codes_[i]) * scale;
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
          const double* k = row(layer, seen[s]);
          double dot = 0.0;
          for (int32_t c = 0; c < kQKDim; ++c) dot += static_cast<double>(qf[c]) * k[c];
          p[s] = dot * o_.softmax_scale;
          m = std::max(m, p[s]);
        }
        double sum = 0.0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (size_t s = 0; s < seen.size(); ++s) {
          p[s] = std::exp(p[s] - m);
          sum += p[s];
          const double* v = row(layer, seen[s]);
          for (int32_t c = 0; c < kLatentDim; ++c) acc[c] += p[s] * v[c];
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
                    kQKDim * sizeof(double));
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
  float kv_peak() const override { return kv_peak_; }

 private:
  const double* row(int32_t layer, int32_t pos) const {
    return &rows_[layer][static_cast<size_t>(pos) * kQKDim];
  }

  StoreOptions o_;
  std::vector<std::vector<double>> rows_;  // [layers][capacity * 576], the values attended to
  std::vector<uint8_t> codes_;             // e4m3: one layer's rows, quantized
  float kv_peak_ = 0.f;
  std::vector<int32_t> parents_;
  int32_t length_ = 0;
};

}  // namespace

std::unique_ptr<KvStore> make_dense_store(const StoreOptions& options) {
  return std::make_unique<DenseKvStore>(options);
}

}  // namespace treeverify::demo
