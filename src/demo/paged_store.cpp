// PagedKvStore: the demo's KV through treeverify (see kv_store.h).
#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>

#include "core/check.h"
#include "core/paging.h"
#include "demo/device_buffer.h"
#include "demo/kv_store.h"
#include "treeverify/types.h"

namespace treeverify::demo {
namespace {

// Pool pages no request ever owns, so page ids are not simply 0 .. n-1 of the request.
constexpr int32_t kSparePages = 3;

template <typename T>
Status upload(DeviceBuffer* buf, const std::vector<T>& v) {
  TV_RETURN_IF_ERROR(buf->reserve(std::max<size_t>(v.size(), 1) * sizeof(T)));
  return buf->upload(v.data(), v.size() * sizeof(T));
}

class PagedKvStore final : public KvStore {
 public:
  Status init(const StoreOptions& o) {
    o_ = o;
    device_ = o.plan.backend == Backend::kCuda;
    e4m3_ = o.kv_format == KvFormat::kE4M3;
    row_bytes_ = kv_row_bytes(o.kv_format, o.dtype);
    if (e4m3_) {
      TV_REQUIRE(o.kv_scale.size() == static_cast<size_t>(o.layers), "kv_scale",
                 "{} scales for {} layers", o.kv_scale.size(), o.layers);
      // Device: one float a layer, and run() reads the layer's (VerifyTensors::kv_scale).
      if (device_) TV_RETURN_IF_ERROR(upload(&d_kv_scale_, o.kv_scale));
    }
    const int32_t ps = o.page_size;
    num_pages_ = detail::pages_for(o.capacity, ps) + kSparePages;
    free_pages_.resize(num_pages_);
    std::iota(free_pages_.begin(), free_pages_.end(), 0);
    std::mt19937_64 rng(o.seed);
    std::shuffle(free_pages_.begin(), free_pages_.end(), rng);
    const size_t pool_rows = static_cast<size_t>(num_pages_) * ps;
    for (int32_t l = 0; l < o.layers; ++l) {
      if (device_) {
        device_pools_.push_back(std::make_unique<DeviceBuffer>());
        TV_RETURN_IF_ERROR(device_pools_.back()->reserve(pool_rows * row_bytes_));
      } else if (e4m3_) {
        host_pools8_.emplace_back(pool_rows * kQKDim);
      } else {
        host_pools_.emplace_back(pool_rows * kQKDim);
      }
    }
    return Status::Ok();
  }

  int32_t length() const override { return length_; }

  Status begin(std::span<const int32_t> parents) override {
    parents_.assign(parents.begin(), parents.end());
    const int32_t t = static_cast<int32_t>(parents.size()), need = length_ + t;
    TV_REQUIRE(need <= o_.capacity, "demo capacity", "{} rows needed, capacity {}", need,
               o_.capacity);
    TV_RETURN_IF_ERROR(resize_pages(need));
    qo_ = {0, t};
    kv_len_ = {need};
    page_indptr_ = {0, static_cast<int32_t>(pages_.size())};
    const VerifyProblem problem{.batch_size = 1,
                                .num_heads = o_.heads,
                                .page_size = o_.page_size,
                                .num_pages = num_pages_,
                                .dtype = o_.dtype,
                                .kv_format = o_.kv_format,
                                .softmax_scale = o_.softmax_scale,
                                .qo_indptr = qo_.data(),
                                .kv_len = kv_len_.data(),
                                .kv_page_indptr = page_indptr_.data(),
                                .kv_page_indices = pages_.data(),
                                .parents = parents_.data()};
    TV_RETURN_IF_ERROR(plan(problem, o_.plan, &plan_));
    if (device_) {
      TV_RETURN_IF_ERROR(upload(&d_qo_, qo_));
      TV_RETURN_IF_ERROR(upload(&d_kv_len_, kv_len_));
      TV_RETURN_IF_ERROR(upload(&d_page_indptr_, page_indptr_));
      TV_RETURN_IF_ERROR(upload(&d_pages_, pages_));
      TV_RETURN_IF_ERROR(upload(&d_parents_, parents_));
      TV_RETURN_IF_ERROR(d_workspace_.reserve(std::max<size_t>(plan_.workspace_bytes, 1)));
    }
    return Status::Ok();
  }

  Status write_rows(int32_t layer, std::span<const uint16_t> rows) override {
    const void* src = rows.data();
    if (e4m3_) {
      codes_.resize(rows.size());
      TV_RETURN_IF_ERROR(quantize_e4m3(o_.dtype, rows, o_.kv_scale[layer], codes_, &kv_peak_));
      src = codes_.data();
    }
    for (size_t i = 0; i * kQKDim < rows.size(); ++i) {
      const size_t row = row_index(length_ + static_cast<int32_t>(i));
      const char* from = static_cast<const char*>(src) + i * row_bytes_;
      if (device_) {
        TV_RETURN_IF_ERROR(device_pools_[layer]->upload(from, row_bytes_, row * row_bytes_));
      } else if (e4m3_) {
        std::memcpy(&host_pools8_[layer][row * kQKDim], from, row_bytes_);
      } else {
        std::memcpy(&host_pools_[layer][row * kQKDim], from, row_bytes_);
      }
    }
    return Status::Ok();
  }

  Status attend(int32_t layer, std::span<const uint16_t> q, std::span<uint16_t> out) override {
    if (!device_) {
      const VerifyTensors t{.q = q.data(),
                            .kv_cache = e4m3_ ? static_cast<const void*>(host_pools8_[layer].data())
                                              : host_pools_[layer].data(),
                            .kv_scale = e4m3_ ? &o_.kv_scale[layer] : nullptr,
                            .qo_indptr = qo_.data(),
                            .kv_len = kv_len_.data(),
                            .kv_page_indptr = page_indptr_.data(),
                            .kv_page_indices = pages_.data(),
                            .parents = parents_.data(),
                            .out = out.data()};
      return run(plan_, t, nullptr, 0);
    }
    TV_RETURN_IF_ERROR(d_q_.reserve(q.size_bytes()));
    TV_RETURN_IF_ERROR(d_q_.upload(q.data(), q.size_bytes()));
    TV_RETURN_IF_ERROR(d_out_.reserve(out.size_bytes()));
    const VerifyTensors t{.q = d_q_.get(),
                          .kv_cache = device_pools_[layer]->get(),
                          .kv_scale = e4m3_ ? d_kv_scale_.as<float>() + layer : nullptr,
                          .qo_indptr = d_qo_.as<int32_t>(),
                          .kv_len = d_kv_len_.as<int32_t>(),
                          .kv_page_indptr = d_page_indptr_.as<int32_t>(),
                          .kv_page_indices = d_pages_.as<int32_t>(),
                          .parents = d_parents_.as<int32_t>(),
                          .out = d_out_.get()};
    TV_RETURN_IF_ERROR(run(plan_, t, d_workspace_.get(), d_workspace_.size(), nullptr));
    return d_out_.download(out.data(), out.size_bytes());  // synchronizes
  }

  Status commit(std::span<const int32_t> path) override {
    const AcceptedPaths acc{.indptr = {0, static_cast<int32_t>(path.size())},
                            .nodes = {path.begin(), path.end()},
                            .bonus_tokens = {-1}};
    if (o_.page_size == 1) {
      // Token-granular pool: rewrite the slot list, no KV moves (SGLang's req_to_token).
      SlotCommitResult res;
      TV_RETURN_IF_ERROR(commit_slots(page_indptr_, pages_, kv_len_, qo_, parents_, acc, &res));
      pages_ = std::move(res.slots);
      free_pages_.insert(free_pages_.end(), res.freed_slots.begin(), res.freed_slots.end());
      length_ = res.kv_len[0];
      return Status::Ok();
    }
    // e4m3 rows move as their 576 bytes; the commit never reads kv_scale (it is per layer).
    PagedKvCommit args{.page_size = o_.page_size,
                       .kv_cache = {},
                       .kv_page_indptr = page_indptr_,
                       .kv_page_indices = pages_,
                       .kv_len = kv_len_,
                       .qo_indptr = qo_,
                       .parents = parents_,
                       .kv_format = o_.kv_format};
    std::vector<int32_t> new_len;
    if (device_) {
      TV_RETURN_IF_ERROR(upload(&d_acc_indptr_, acc.indptr));
      TV_RETURN_IF_ERROR(upload(&d_acc_nodes_, acc.nodes));
    }
    for (int32_t l = 0; l < o_.layers; ++l) {
      if (device_) {
        const PagedKvCommitDevice dev{.kv_cache = device_pools_[l]->get(),
                                      .num_pages = num_pages_,
                                      .kv_page_indptr = d_page_indptr_.as<int32_t>(),
                                      .kv_page_indices = d_pages_.as<int32_t>(),
                                      .kv_len = d_kv_len_.as<int32_t>(),
                                      .qo_indptr = d_qo_.as<int32_t>(),
                                      .accepted_indptr = d_acc_indptr_.as<int32_t>(),
                                      .accepted_nodes = d_acc_nodes_.as<int32_t>()};
        TV_RETURN_IF_ERROR(commit_kv_paged_cuda(args, acc, dev, &new_len));
      } else {
        if (e4m3_) {
          args.kv_cache_e4m3 = host_pools8_[l];
        } else {
          args.kv_cache = host_pools_[l];
        }
        TV_RETURN_IF_ERROR(commit_kv_paged(args, acc, &new_len));
      }
    }
    if (device_) TV_RETURN_IF_ERROR(d_acc_nodes_.synchronize());
    length_ = new_len[0];
    return resize_pages(length_);  // pages past the new length go back to the pool
  }

  Status truncate(int32_t length) override {
    TV_REQUIRE(length >= 0 && length <= length_, "length", "{} (stored {})", length, length_);
    length_ = length;
    return resize_pages(length);
  }

  std::string describe() const override {
    std::string s =
        fmt::format("{} ({}), {} KV cache, precision {}", backend_name(plan_.backend), plan_.kernel,
                    e4m3_ ? "e4m3" : dtype_name(o_.dtype), precision_name(precision()));
    // Fast asked and exact computed: the plan says why (cpu, GPUs without FP8 products).
    if (precision() != o_.plan.precision) s += fmt::format(" ({})", plan_.reason);
    return s;
  }

  Precision precision() const override {
    const bool rounds = plan_.backend != Backend::kCpuReference || plan_.options.round_p;
    return rounds ? plan_.precision : Precision::kExact;
  }

  float kv_peak() const override { return kv_peak_; }

 private:
  size_t row_index(int32_t pos) const {
    return static_cast<size_t>(detail::paged_row(pages_.data(), o_.page_size, pos));
  }
  // Holds exactly the pages that `rows` rows need, taking from or returning to the pool.
  Status resize_pages(int32_t rows) {
    const size_t want = static_cast<size_t>(detail::pages_for(rows, o_.page_size));
    while (pages_.size() > want) {
      free_pages_.push_back(pages_.back());
      pages_.pop_back();
    }
    while (pages_.size() < want) {
      TV_REQUIRE(!free_pages_.empty(), "demo page pool", "exhausted at {} pages", pages_.size());
      pages_.push_back(free_pages_.back());
      free_pages_.pop_back();
    }
    return Status::Ok();
  }

  StoreOptions o_;
  bool device_ = false, e4m3_ = false;
  size_t row_bytes_ = 0;  // 1152 (16-bit) or 576 (e4m3)
  int64_t num_pages_ = 0;
  float kv_peak_ = 0.f;
  std::vector<uint8_t> codes_;                               // e4m3: one layer's rows, quantized
  std::vector<std::vector<uint16_t>> host_pools_;            // per layer, CPU backends, 16-bit
  std::vector<std::vector<uint8_t>> host_pools8_;            // per layer, CPU backends, e4m3
  std::vector<std::unique_ptr<DeviceBuffer>> device_pools_;  // per layer, cuda
  std::vector<int32_t> free_pages_;  // the pool's free pages (slots for page_size 1)
  std::vector<int32_t> pages_;       // the request's pages in order
  int32_t length_ = 0;
  // The open pass's metadata, on the host and (cuda) on the device.
  std::vector<int32_t> parents_, qo_, kv_len_, page_indptr_;
  Plan plan_;
  DeviceBuffer d_qo_, d_kv_len_, d_page_indptr_, d_pages_, d_parents_, d_q_, d_out_, d_workspace_,
      d_acc_indptr_, d_acc_nodes_, d_kv_scale_;
};

}  // namespace

Status make_paged_store(const StoreOptions& options, std::unique_ptr<KvStore>* store) {
  auto s = std::make_unique<PagedKvStore>();
  TV_RETURN_IF_ERROR(s->init(options));
  *store = std::move(s);
  return Status::Ok();
}

}  // namespace treeverify::demo
