// treeverify.Plan (the Python package subclasses it only to add defaults): plan() once per
// step from host metadata, run() once per layer. A CUDA plan uploads its index arrays once
// (asynchronously, from pooled pinned memory, on the stream it is made on) and runs with the
// workspace cached for the run's stream (device.h), so neither plan() nor run() allocates,
// frees or synchronizes once warm, and run() can be captured in a CUDA graph.
#include "treeverify/tuning.h"
#include "treeverify/verify.h"

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "common.h"
#include "device.h"

namespace tvpy {
namespace {

using namespace treeverify;

class PyPlan {
 public:
  PyPlan(HostI32 kv_page_indptr, HostI32 kv_page_indices, HostI32 kv_len, HostI32 qo_indptr,
         HostI32 parents, int32_t num_heads, int32_t page_size, int64_t num_pages,
         const std::string& dtype, float softmax_scale, const std::string& device_type,
         int32_t device_id, const std::string& backend, int32_t num_threads, bool round_p,
         int32_t force_config_arch, uintptr_t stream, const std::string& kv_dtype,
         std::optional<float> kv_scale, const std::string& precision) {
    KvFormat kv_format = KvFormat::kSameAsQ;
    if (kv_dtype == "e4m3") {
      kv_format = KvFormat::kE4M3;
    } else if (kv_dtype != "same") {
      raise_value("kv_dtype", fmt::format("'{}' (expected 'e4m3', or None for the dtype of q)",
                                          kv_dtype));
    }
    if (kv_scale) {
      if (kv_format != KvFormat::kE4M3)
        raise_value("kv_scale", "given, but kv_dtype is not 'e4m3' (kv_scale is for an e4m3 cache)");
      require_finite_scale(*kv_scale);
    }
    if (qo_indptr.shape(0) < 1) raise_value("qo_indptr", "is empty, expected B + 1 entries");
    const int64_t batch = static_cast<int64_t>(qo_indptr.shape(0)) - 1;
    if (static_cast<int64_t>(kv_page_indptr.shape(0)) != batch + 1)
      raise_value("kv_page_indptr", fmt::format("has {} entries, expected B + 1 = {} (B from "
                                                "qo_indptr)",
                                                kv_page_indptr.shape(0), batch + 1));
    if (static_cast<int64_t>(kv_len.shape(0)) != batch)
      raise_value("kv_len", fmt::format("has {} entries, expected B = {}", kv_len.shape(0), batch));
    // Sizes the library cannot see through raw pointers: checked before it reads them.
    if (static_cast<int64_t>(parents.shape(0)) != qo_indptr.data()[batch])
      raise_value("parents", fmt::format("has {} entries, but qo_indptr[B] = {}", parents.shape(0),
                                         qo_indptr.data()[batch]));
    if (static_cast<int64_t>(kv_page_indices.shape(0)) < kv_page_indptr.data()[batch])
      raise_value("kv_page_indices",
                  fmt::format("has {} entries, but kv_page_indptr[B] = {}",
                              kv_page_indices.shape(0), kv_page_indptr.data()[batch]));
    auto copy = [](const HostI32& a) {
      return std::vector<int32_t>(a.data(), a.data() + a.shape(0));
    };
    host_ = {copy(qo_indptr), copy(kv_len), copy(kv_page_indptr), copy(kv_page_indices),
             copy(parents)};

    PlanOptions options{.num_threads = num_threads, .round_p = round_p};
    // Tuning (treeverify/tuning.h): another architecture's tile table, for tests and timing.
    const PlanTuning tuning{.config_arch = force_config_arch};
    check(parse_backend(backend, &options.backend));
    if (!parse_precision(precision, &options.precision).ok())
      raise_value("precision", fmt::format("'{}' (expected 'exact' or 'fast')", precision));
    if (device_type == "cuda") {
      where_ = {nb::device::cuda::value, device_id};
      if (options.backend == Backend::kAuto) options.backend = Backend::kCuda;
      if (options.backend != Backend::kCuda)
        raise_value("backend",
                    fmt::format("'{}' runs on the CPU, but device is cuda:{}", backend, device_id));
      options.device = device_id;
    } else if (device_type == "cpu") {
      if (options.backend == Backend::kAuto) options.backend = Backend::kCpu;
      if (options.backend == Backend::kCuda)
        raise_value("backend", "'cuda' needs device='cuda'");
    } else {
      raise_value("device", fmt::format("'{}' (expected 'cpu' or 'cuda')", device_type));
    }
    const VerifyProblem problem{
        .batch_size = static_cast<int32_t>(batch),
        .num_heads = num_heads,
        .page_size = page_size,
        .num_pages = num_pages,
        .dtype = parse_dtype(dtype),
        .kv_format = kv_format,
        .softmax_scale = softmax_scale,
        .qo_indptr = host_[0].data(),
        .kv_len = host_[1].data(),
        .kv_page_indptr = host_[2].data(),
        .kv_page_indices = host_[3].data(),
        .parents = host_[4].data(),
    };
    check(plan(problem, options, tuning, &plan_));
    plan_scale_ = kv_scale;
    if (where_.cuda()) {
      // A plan's scale travels with the index arrays: one more part of the same upload, so it
      // costs no transfer, allocation or sync of its own, and captured runs read it in place.
      std::array<std::span<const int32_t>, 6> parts;
      for (size_t i = 0; i < host_.size(); ++i) parts[i] = host_[i];
      if (kv_scale) scale_bits_ = std::bit_cast<int32_t>(*kv_scale);
      parts[5] = {&scale_bits_, kv_scale ? size_t{1} : size_t{0}};
      upload_ = std::make_unique<IndexUpload>(where_.device_id, stream,
                                              std::span(parts).first(kv_scale ? 6 : 5));
    }
  }

  void run(InArray q, InArray kv_cache, OutArray out_rw, std::optional<OutArray> lse_rw,
           uintptr_t stream, std::optional<InArray> kv_scale_array,
           std::optional<float> kv_scale_value) {
    const nb::ndarray<nb::ro> out(out_rw);
    const bool e4m3 = plan_.kv_format == KvFormat::kE4M3;
    using Arg = std::pair<const nb::ndarray<nb::ro>*, const char*>;
    for (auto [a, name] : {Arg{&q, "q"}, Arg{&kv_cache, "kv_cache"}, Arg{&out, "out"}}) {
      require_location(*a, name, where_);
      if (e4m3 && a == &kv_cache) {
        require_e4m3(*a, name);
      } else {
        require_half(*a, name, plan_.dtype);
      }
    }
    require_shape(q, "q", {plan_.total_q, plan_.num_heads, kQKDim});
    require_shape(out, "out", {plan_.total_q, plan_.num_heads, kVDim});
    require_shape(kv_cache, "kv_cache", {plan_.num_pages, plan_.page_size, kQKDim});
    require_contiguous(kv_cache, "kv_cache");
    float scale_value = 0.f;  // CPU: the scale given as a Python float
    VerifyTensors t{.q = q.data(),
                    .kv_cache = kv_cache.data(),
                    .kv_scale = kv_scale_of(kv_scale_array, kv_scale_value, &scale_value),
                    .out = out_rw.data()};
    half_strides(q, "q", &t.q_stride_token, &t.q_stride_head);
    half_strides(out, "out", &t.out_stride_token, &t.out_stride_head);
    // The backends read q and kv_cache while they write out and lse (the CPU one tile by
    // tile, the GPU one from many CTAs at once): an output overlapping anything else of the
    // call would mix written results into what is still to be read.
    require_disjoint(out, "out", q, "q");
    require_disjoint(out, "out", kv_cache, "kv_cache");
    if (kv_scale_array) require_disjoint(out, "out", *kv_scale_array, "kv_scale");
    if (lse_rw) {
      const nb::ndarray<nb::ro> lse(*lse_rw);
      require_location(lse, "lse", where_);
      require_float32(lse, "lse");
      require_shape(lse, "lse", {plan_.total_q, plan_.num_heads});
      require_contiguous(lse, "lse");
      require_disjoint(lse, "lse", out, "out");
      require_disjoint(lse, "lse", q, "q");
      require_disjoint(lse, "lse", kv_cache, "kv_cache");
      if (kv_scale_array) require_disjoint(lse, "lse", *kv_scale_array, "kv_scale");
      t.lse = static_cast<float*>(lse_rw->data());
    }
    if (!where_.cuda()) {
      set_index_arrays(&t, [&](size_t i) { return host_[i].data(); });
      Status status;
      {
        nb::gil_scoped_release release;  // CPU backends take long
        status = treeverify::run(plan_, t, nullptr, 0, nullptr);
      }
      check(status);
      return;
    }
    // CUDA. What follows changes the plan's upload and workspaces and is done under the GIL;
    // runs of one plan from several threads at once are not supported (they would share a
    // workspace unordered).
    DeviceGuard guard(where_.device_id);
    // In a capture, the plan's first run builds the ancestor mask inside the graph (run() keys
    // the step data on the capture), so no replay relies on a mask another run left there.
    const uint64_t capture = capture_id(stream);
    upload_->order_after(stream, capture);
    set_index_arrays(&t, [&](size_t i) { return upload_->part(i); });
    void* workspace = nullptr;
    if (plan_.workspace_bytes != 0) {
      std::shared_ptr<DeviceMemory> memory =
          run_workspace(where_.device_id, stream, plan_.workspace_bytes, capture);
      // Held while the plan lives: memory it ran on is never handed out again under it.
      if (std::find(workspaces_.begin(), workspaces_.end(), memory) == workspaces_.end())
        workspaces_.push_back(memory);
      workspace = memory->data();
    }
    Status status;
    {
      nb::gil_scoped_release release;
      status = treeverify::run(plan_, t, workspace, plan_.workspace_bytes,
                               reinterpret_cast<void*>(stream));
    }
    check(status);
  }

  const Plan& plan_info() const { return plan_; }
  std::string device() const { return location_name(where_); }

 private:
  // The library's bound (types.h), here also for the scale a CUDA plan uploads: a float that
  // is finite with 448 x |kv_scale| finite in float32.
  static void require_finite_scale(float scale) {
    if (!is_valid_kv_scale(scale))
      raise_value("kv_scale",
                  fmt::format("{}, expected a finite float with {} x |kv_scale| (the largest "
                              "value dequantized) a finite float32: |kv_scale| <= {}",
                              scale, kMaxE4M3, kMaxKvScale));
  }

  // The kv_scale pointer of a run: a 1-element float32 array on the plan's device (CUDA: read
  // by the kernel when it runs, never on the host), a Python float (CPU only), or else the
  // plan's own scale. Null for a 16-bit cache, where giving one is an error.
  const float* kv_scale_of(const std::optional<InArray>& array, std::optional<float> value,
                           float* value_slot) const {
    if (plan_.kv_format != KvFormat::kE4M3) {
      if (array || value)
        raise_value("kv_scale", fmt::format("given, but the plan's KV cache is {} (kv_scale is "
                                            "for kv_dtype='e4m3')",
                                            dtype_name(plan_.dtype)));
      return nullptr;
    }
    if (array) {
      require_location(*array, "kv_scale", where_);
      require_float32(*array, "kv_scale");
      if (array->size() != 1)
        raise_value("kv_scale", fmt::format("shape {}, expected one float32 element",
                                            shape_string(*array)));
      return static_cast<const float*>(array->data());
    }
    if (value) {
      if (where_.cuda())
        raise_type("kv_scale",
                   fmt::format("a Python float, but the plan runs on {}: pass a 1-element "
                               "float32 tensor there (the kernel reads it; no sync, CUDA-graph "
                               "safe), or give the float to plan(kv_scale=), which uploads it "
                               "once with the plan",
                               location_name(where_)));
      require_finite_scale(*value);
      *value_slot = *value;
      return value_slot;
    }
    if (plan_scale_)
      return where_.cuda() ? reinterpret_cast<const float*>(upload_->part(5)) : &*plan_scale_;
    raise_value("kv_scale", "missing: an e4m3 KV cache needs its scale (real value = stored x "
                            "kv_scale): pass kv_scale= to run() or to plan()");
  }

  template <typename Get>
  static void set_index_arrays(VerifyTensors* t, Get get) {
    t->qo_indptr = get(0);
    t->kv_len = get(1);
    t->kv_page_indptr = get(2);
    t->kv_page_indices = get(3);
    t->parents = get(4);
  }

  Plan plan_;
  Location where_;                            // cpu unless a CUDA device was asked for
  std::array<std::vector<int32_t>, 5> host_;  // qo_indptr, kv_len, kv_page_indptr, indices, parents
  std::unique_ptr<IndexUpload> upload_;       // CUDA: the device copy of host_
  std::vector<std::shared_ptr<DeviceMemory>> workspaces_;  // CUDA: every workspace it ran on
  std::optional<float> plan_scale_;  // e4m3: the scale given to plan(), if any
  int32_t scale_bits_ = 0;           // CUDA: its bits, uploaded as part 5
};

}  // namespace

void bind_verify(nb::module_& m) {
  nb::class_<PyPlan>(m, "Plan")
      .def(nb::init<HostI32, HostI32, HostI32, HostI32, HostI32, int32_t, int32_t, int64_t,
                    const std::string&, float, const std::string&, int32_t, const std::string&,
                    int32_t, bool, int32_t, uintptr_t, const std::string&,
                    std::optional<float>, const std::string&>(),
           nb::arg("kv_page_indptr"), nb::arg("kv_page_indices"), nb::arg("kv_len"),
           nb::arg("qo_indptr"), nb::arg("parents"), nb::arg("num_heads"), nb::arg("page_size"),
           nb::arg("num_pages"), nb::arg("dtype"), nb::arg("softmax_scale"), nb::arg("device_type"),
           nb::arg("device_id"), nb::arg("backend"), nb::arg("num_threads"), nb::arg("round_p"),
           nb::arg("force_config_arch"), nb::arg("stream"), nb::arg("kv_dtype"),
           nb::arg("kv_scale").none(), nb::arg("precision"))
      .def("_run", &PyPlan::run, nb::arg("q").noconvert(), nb::arg("kv_cache").noconvert(),
           nb::arg("out").noconvert(), nb::arg("lse").noconvert().none(), nb::arg("stream"),
           nb::arg("kv_scale_array").noconvert().none(), nb::arg("kv_scale_value").none())
      .def_prop_ro("device", &PyPlan::device)
      .def_prop_ro("backend", [](const PyPlan& p) { return backend_name(p.plan_info().backend); })
      .def_prop_ro("kernel", [](const PyPlan& p) { return p.plan_info().kernel; })
      .def_prop_ro("reason", [](const PyPlan& p) { return p.plan_info().reason; })
      // What the chosen kernel computes, 'exact' or 'fast' (a fast request may run exact).
      .def_prop_ro("precision",
                   [](const PyPlan& p) { return precision_name(p.plan_info().precision); })
      .def_prop_ro("workspace_bytes", [](const PyPlan& p) { return p.plan_info().workspace_bytes; })
      .def_prop_ro("dtype", [](const PyPlan& p) { return dtype_name(p.plan_info().dtype); })
      .def_prop_ro("kv_dtype",
                   [](const PyPlan& p) {
                     const Plan& info = p.plan_info();
                     return std::string(info.kv_format == KvFormat::kE4M3
                                            ? "e4m3"
                                            : dtype_name(info.dtype));
                   })
      .def_prop_ro("batch_size", [](const PyPlan& p) { return p.plan_info().batch_size; })
      .def_prop_ro("num_heads", [](const PyPlan& p) { return p.plan_info().num_heads; })
      .def_prop_ro("page_size", [](const PyPlan& p) { return p.plan_info().page_size; })
      .def_prop_ro("num_pages", [](const PyPlan& p) { return p.plan_info().num_pages; })
      .def_prop_ro("total_q", [](const PyPlan& p) { return p.plan_info().total_q; })
      .def_prop_ro("num_chunks", [](const PyPlan& p) { return p.plan_info().state.num_chunks; });

  // For tests: what the binding allocated, freed and enqueued so far, and the workspace cache.
  m.def("_memory_stats", [] {
    const MemoryStats s = memory_stats();
    nb::dict d;
    d["device_allocs"] = s.device_allocs;
    d["device_frees"] = s.device_frees;
    d["host_allocs"] = s.host_allocs;
    d["host_frees"] = s.host_frees;
    d["uploads"] = s.uploads;
    d["stream_waits"] = s.stream_waits;
    d["host_waits"] = s.host_waits;
    return d;
  });
  m.def("_cached_workspaces", [] {
    nb::list out;
    for (const CachedWorkspace& w : cached_workspaces()) {
      nb::dict d;
      d["device"] = w.device;
      d["stream"] = w.stream;
      d["bytes"] = w.bytes;
      d["address"] = w.address;
      out.append(d);
    }
    return out;
  });
}

}  // namespace tvpy
