// treeverify.GraphPlan (treeverify/graph.h): a plan made once from bounds, whose prepare()
// (once per step) and run() (once per layer) read the step's metadata from the caller's arrays
// in place, on the device, so both can be captured in a CUDA graph and replayed as the arrays
// change. The plan owns its workspace and an error-flag word (allocated when it is made, never
// again), so prepare() and run() neither allocate nor synchronize.
#include "treeverify/graph.h"

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "common.h"
#include "device.h"

#if defined(TREEVERIFY_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace tvpy {
namespace {

using namespace treeverify;

PageTable parse_page_table(const std::string& s) {
  if (s == "csr") return PageTable::kCsr;
  if (s == "rows") return PageTable::kRows;
  if (s == "slot_rows") return PageTable::kSlotRows;
  raise_value("page_table", fmt::format("'{}' (expected 'csr', 'rows' or 'slot_rows')", s));
}

TreeInput parse_tree(const std::string& s) {
  if (s == "chain") return TreeInput::kChain;
  if (s == "parents") return TreeInput::kParents;
  if (s == "mask") return TreeInput::kMask;
  if (s == "full_mask") return TreeInput::kFullMask;
  raise_value("tree", fmt::format("'{}' (expected 'chain', 'parents', 'mask' or 'full_mask')", s));
}

// An int32 array of the plan's device, row-major.
void require_i32(const nb::ndarray<nb::ro>& a, const char* arg, const Location& where) {
  require_location(a, arg, where);
  if (a.dtype() != nb::dtype<int32_t>())
    raise_type(arg, "expected int32 elements");
  require_contiguous(a, arg);
}

class PyGraphPlan {
 public:
  PyGraphPlan(int32_t batch_size, int32_t tree_size, int32_t num_heads, int32_t page_size,
              int64_t num_pages, int32_t max_kv_len, const std::string& dtype,
              const std::string& kv_dtype, const std::string& page_table, int64_t page_capacity,
              int32_t table_stride, const std::string& tree, bool kv_len_excludes_tree,
              const std::string& device_type, int32_t device_id, const std::string& backend,
              int32_t num_threads, const std::string& precision, int32_t force_config_arch,
              int32_t force_chunk_tokens) {
    GraphBounds b;
    b.batch_size = batch_size;
    b.tree_size = tree_size;
    b.num_heads = num_heads;
    b.page_size = page_size;
    b.num_pages = num_pages;
    b.max_kv_len = max_kv_len;
    b.dtype = parse_dtype(dtype);
    if (kv_dtype == "e4m3")
      b.kv_format = KvFormat::kE4M3;
    else if (kv_dtype != "same")
      raise_value("kv_dtype", fmt::format("'{}' (expected 'e4m3', or None for q's dtype)", kv_dtype));
    b.page_table = parse_page_table(page_table);
    b.page_capacity = page_capacity;
    b.table_stride = table_stride;
    b.tree = parse_tree(tree);
    b.kv_len_excludes_tree = kv_len_excludes_tree;
    PlanOptions options{.num_threads = num_threads};
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
    const PlanTuning tuning{.config_arch = force_config_arch, .chunk_tokens = force_chunk_tokens};
    check(plan_graph(b, options, tuning, &plan_));
    // The workspace, then one aligned word of error flags.
    flags_offset_ = (plan_.workspace_bytes + 255) / 256 * 256;
    const size_t bytes = flags_offset_ + 256;
    if (where_.cuda()) {
      DeviceGuard guard(device_id);
      memory_ = std::make_shared<DeviceMemory>(device_id, bytes, /*capturing=*/false);
#if defined(TREEVERIFY_WITH_CUDA)
      if (cudaMemset(memory_->data() + flags_offset_, 0, 4) != cudaSuccess)
        throw StatusError("GraphPlan: cudaMemset of the error flags failed");
#endif
    } else {
      host_.assign(bytes, 0);
    }
  }

  void prepare(InArray kv_len, InArray indices, std::optional<InArray> indptr,
               std::optional<InArray> table_rows, std::optional<InArray> parents,
               std::optional<InArray> tree_mask, uintptr_t stream) {
    const GraphBounds& g = plan_.bounds;
    GraphStep step;
    require_i32(kv_len, "kv_len", where_);
    require_shape(kv_len, "kv_len", {g.batch_size});
    step.kv_len = static_cast<const int32_t*>(kv_len.data());
    require_i32(indices, "kv_page_indices", where_);
    if (g.page_table == PageTable::kCsr) {
      if (indices.ndim() != 1 || static_cast<int64_t>(indices.shape(0)) < g.page_capacity)
        raise_value("kv_page_indices", fmt::format("shape {}, expected at least the plan's {} "
                                                   "entries", shape_string(indices), g.page_capacity));
      if (!indptr) raise_value("kv_page_indptr", "missing with page_table='csr'");
      require_i32(*indptr, "kv_page_indptr", where_);
      require_shape(*indptr, "kv_page_indptr", {g.batch_size + 1});
      step.kv_page_indptr = static_cast<const int32_t*>(indptr->data());
    } else {
      if (indices.ndim() != 2 || static_cast<int64_t>(indices.shape(0)) < g.page_capacity ||
          static_cast<int64_t>(indices.shape(1)) != g.table_stride)
        raise_value("kv_page_indices",
                    fmt::format("shape {}, expected [rows >= {}, {}] (the plan's table)",
                                shape_string(indices), g.page_capacity, g.table_stride));
      if (table_rows) {
        require_i32(*table_rows, "table_rows", where_);
        require_shape(*table_rows, "table_rows", {g.batch_size});
        step.table_rows = static_cast<const int32_t*>(table_rows->data());
      }
    }
    step.kv_page_indices = static_cast<const int32_t*>(indices.data());
    if (g.tree == TreeInput::kParents) {
      if (!parents) raise_value("parents", "missing with tree='parents'");
      require_i32(*parents, "parents", where_);
      require_shape(*parents, "parents", {int64_t{g.batch_size} * g.tree_size});
      step.parents = static_cast<const int32_t*>(parents->data());
    }
    if (g.tree == TreeInput::kMask || g.tree == TreeInput::kFullMask) {
      if (!tree_mask) raise_value("tree_mask", "missing with a mask tree input");
      require_location(*tree_mask, "tree_mask", where_);
      if (tree_mask->dtype() != nb::dtype<bool>() && tree_mask->dtype() != nb::dtype<uint8_t>())
        raise_type("tree_mask", "expected bool or uint8 elements");
      require_contiguous(*tree_mask, "tree_mask");
      const int64_t T = g.tree_size;
      if (g.tree == TreeInput::kMask && static_cast<int64_t>(tree_mask->size()) != g.batch_size * T * T)
        raise_value("tree_mask", fmt::format("shape {}, expected [{}, {}, {}] elements",
                                             shape_string(*tree_mask), g.batch_size, T, T));
      step.tree_mask = static_cast<const uint8_t*>(tree_mask->data());
      step.mask_bytes = static_cast<int64_t>(tree_mask->size());
    }
    step.error_flags = reinterpret_cast<uint32_t*>(workspace() + flags_offset_);
    Status status;
    {
      std::optional<DeviceGuard> guard;
      if (where_.cuda()) guard.emplace(where_.device_id);
      nb::gil_scoped_release release;
      status = prepare_step(plan_, step, workspace(), plan_.workspace_bytes,
                            reinterpret_cast<void*>(stream));
    }
    check(status);
  }

  void run(InArray q, InArray kv_cache, OutArray out_rw, std::optional<OutArray> lse_rw,
           float softmax_scale, uintptr_t stream, std::optional<InArray> kv_scale_array,
           std::optional<float> kv_scale_value) {
    const GraphBounds& g = plan_.bounds;
    const nb::ndarray<nb::ro> out(out_rw);
    const bool e4m3 = g.kv_format == KvFormat::kE4M3;
    const int64_t rows = int64_t{g.batch_size} * g.tree_size;
    using Arg = std::pair<const nb::ndarray<nb::ro>*, const char*>;
    for (auto [a, name] : {Arg{&q, "q"}, Arg{&kv_cache, "kv_cache"}, Arg{&out, "out"}}) {
      require_location(*a, name, where_);
      if (e4m3 && a == &kv_cache)
        require_e4m3(*a, name);
      else
        require_half(*a, name, g.dtype);
    }
    require_shape(q, "q", {rows, g.num_heads, kQKDim});
    require_shape(out, "out", {rows, g.num_heads, kVDim});
    require_shape(kv_cache, "kv_cache", {g.num_pages, g.page_size, kQKDim});
    require_contiguous(kv_cache, "kv_cache");
    require_disjoint(out, "out", q, "q");
    require_disjoint(out, "out", kv_cache, "kv_cache");
    GraphLayer layer{.q = q.data(), .kv_cache = kv_cache.data(), .out = out_rw.data(),
                     .softmax_scale = softmax_scale};
    half_strides(q, "q", &layer.q_stride_token, &layer.q_stride_head);
    half_strides(out, "out", &layer.out_stride_token, &layer.out_stride_head);
    float scale_slot = 0.f;
    if (e4m3) {
      if (kv_scale_array) {
        require_location(*kv_scale_array, "kv_scale", where_);
        require_float32(*kv_scale_array, "kv_scale");
        if (kv_scale_array->size() != 1)
          raise_value("kv_scale", fmt::format("shape {}, expected one float32 element",
                                              shape_string(*kv_scale_array)));
        layer.kv_scale = static_cast<const float*>(kv_scale_array->data());
      } else if (kv_scale_value && !where_.cuda()) {
        scale_slot = *kv_scale_value;
        layer.kv_scale = &scale_slot;
      } else {
        raise_value("kv_scale", where_.cuda() ? "missing: a 1-element float32 tensor on the "
                                                "plan's device (read by the kernel: graph-safe)"
                                              : "missing: an e4m3 KV cache needs its scale");
      }
    } else if (kv_scale_array || kv_scale_value) {
      raise_value("kv_scale", "given, but the plan's KV cache is 16-bit");
    }
    if (lse_rw) {
      const nb::ndarray<nb::ro> lse(*lse_rw);
      require_location(lse, "lse", where_);
      require_float32(lse, "lse");
      require_shape(lse, "lse", {rows, g.num_heads});
      require_contiguous(lse, "lse");
      require_disjoint(lse, "lse", out, "out");
      layer.lse = static_cast<float*>(lse_rw->data());
    }
    Status status;
    {
      std::optional<DeviceGuard> guard;
      if (where_.cuda()) guard.emplace(where_.device_id);
      nb::gil_scoped_release release;
      status = run_layer(plan_, layer, workspace(), plan_.workspace_bytes,
                         reinterpret_cast<void*>(stream));
    }
    check(status);
  }

  // The flags the steps so far set (GraphError bits), read from the plan's flag word: on CUDA
  // a synchronous copy after the device finished (for checks and tests, not for every step).
  uint32_t error_flags(bool reset) {
    uint32_t flags = 0;
    char* word = workspace() + flags_offset_;
    if (where_.cuda()) {
#if defined(TREEVERIFY_WITH_CUDA)
      DeviceGuard guard(where_.device_id);
      if (cudaDeviceSynchronize() != cudaSuccess ||
          cudaMemcpy(&flags, word, 4, cudaMemcpyDeviceToHost) != cudaSuccess ||
          (reset && cudaMemset(word, 0, 4) != cudaSuccess))
        throw StatusError("GraphPlan.error_flags: reading the device's flags failed");
#endif
    } else {
      std::memcpy(&flags, word, 4);
      if (reset) std::memset(word, 0, 4);
    }
    return flags;
  }

  // The step's chunk length prepare() chose (tests: the oracle rounds fast mode's P against it).
  int32_t step_chunk_tokens() {
    int32_t chunk = 0;
    const char* at = workspace() + plan_.state.chunk_offset;
    if (where_.cuda()) {
#if defined(TREEVERIFY_WITH_CUDA)
      DeviceGuard guard(where_.device_id);
      if (cudaDeviceSynchronize() != cudaSuccess ||
          cudaMemcpy(&chunk, at, 4, cudaMemcpyDeviceToHost) != cudaSuccess)
        throw StatusError("GraphPlan.step_chunk_tokens: reading the workspace failed");
#endif
    } else {
      std::memcpy(&chunk, at, 4);
    }
    return chunk;
  }

  const GraphPlan& info() const { return plan_; }
  std::string device() const { return location_name(where_); }

 private:
  char* workspace() { return where_.cuda() ? memory_->data() : host_.data(); }

  GraphPlan plan_;
  Location where_;
  std::shared_ptr<DeviceMemory> memory_;  // CUDA: workspace + flags
  std::vector<char> host_;                // CPU: the same
  size_t flags_offset_ = 0;
};

}  // namespace

void bind_graph(nb::module_& m) {
  nb::class_<PyGraphPlan>(m, "GraphPlan")
      .def(nb::init<int32_t, int32_t, int32_t, int32_t, int64_t, int32_t, const std::string&,
                    const std::string&, const std::string&, int64_t, int32_t, const std::string&,
                    bool, const std::string&, int32_t, const std::string&, int32_t,
                    const std::string&, int32_t, int32_t>(),
           nb::arg("batch_size"), nb::arg("tree_size"), nb::arg("num_heads"), nb::arg("page_size"),
           nb::arg("num_pages"), nb::arg("max_kv_len"), nb::arg("dtype"),
           nb::arg("kv_dtype"), nb::arg("page_table"), nb::arg("page_capacity"),
           nb::arg("table_stride"), nb::arg("tree"), nb::arg("kv_len_excludes_tree"),
           nb::arg("device_type"), nb::arg("device_id"), nb::arg("backend"),
           nb::arg("num_threads"), nb::arg("precision"), nb::arg("force_config_arch"),
           nb::arg("force_chunk_tokens"))
      .def("_prepare", &PyGraphPlan::prepare, nb::arg("kv_len").noconvert(),
           nb::arg("kv_page_indices").noconvert(), nb::arg("kv_page_indptr").noconvert().none(),
           nb::arg("table_rows").noconvert().none(), nb::arg("parents").noconvert().none(),
           nb::arg("tree_mask").noconvert().none(), nb::arg("stream"))
      .def("_run", &PyGraphPlan::run, nb::arg("q").noconvert(), nb::arg("kv_cache").noconvert(),
           nb::arg("out").noconvert(), nb::arg("lse").noconvert().none(),
           nb::arg("softmax_scale"), nb::arg("stream"),
           nb::arg("kv_scale_array").noconvert().none(), nb::arg("kv_scale_value").none())
      .def("_error_flags", &PyGraphPlan::error_flags, nb::arg("reset"))
      .def("_step_chunk_tokens", &PyGraphPlan::step_chunk_tokens)
      .def_prop_ro("device", &PyGraphPlan::device)
      .def_prop_ro("backend", [](const PyGraphPlan& p) { return backend_name(p.info().backend); })
      .def_prop_ro("kernel", [](const PyGraphPlan& p) { return p.info().kernel; })
      .def_prop_ro("reason", [](const PyGraphPlan& p) { return p.info().reason; })
      .def_prop_ro("precision",
                   [](const PyGraphPlan& p) { return precision_name(p.info().precision); })
      .def_prop_ro("workspace_bytes", [](const PyGraphPlan& p) { return p.info().workspace_bytes; })
      .def_prop_ro("batch_size", [](const PyGraphPlan& p) { return p.info().bounds.batch_size; })
      .def_prop_ro("tree_size", [](const PyGraphPlan& p) { return p.info().bounds.tree_size; })
      .def_prop_ro("num_heads", [](const PyGraphPlan& p) { return p.info().bounds.num_heads; })
      .def_prop_ro("chunk_cap", [](const PyGraphPlan& p) { return p.info().state.chunk_cap; })
      .def_prop_ro("dtype", [](const PyGraphPlan& p) { return dtype_name(p.info().bounds.dtype); })
      .def_prop_ro("kv_dtype", [](const PyGraphPlan& p) {
        const GraphBounds& b = p.info().bounds;
        return std::string(b.kv_format == KvFormat::kE4M3 ? "e4m3" : dtype_name(b.dtype));
      });
  m.def("graph_error_names", [](uint32_t flags) { return treeverify::graph_error_names(flags); });
}

}  // namespace tvpy
