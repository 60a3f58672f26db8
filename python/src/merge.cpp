// merge_state(v_a, s_a, v_b, s_b) -> (v, s), the semantics of sgl_kernel.merge_state_v2:
// v [..., D] bf16/fp16 and s [...] fp32 (for SGLang [tokens, heads, D] and [tokens, heads]).
#include "treeverify/merge.h"

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>

#include <initializer_list>
#include <optional>
#include <utility>

#include "common.h"
#include "device.h"

namespace tvpy {
namespace {

using namespace treeverify;
using Named = std::pair<const nb::ndarray<nb::ro>*, const char*>;

// merge.h lets an output alias an input exactly: every element (and lse) is read before the
// same element is written. Any other overlap would read values already overwritten. The
// arrays are contiguous with one shape by now, so one byte range means one layout.
void require_alias_or_disjoint(const nb::ndarray<nb::ro>& out, const char* arg,
                               const nb::ndarray<nb::ro>& in, const char* in_name) {
  const ByteRange x = byte_range(out), y = byte_range(in);
  if (x == y || x.empty() || y.empty() || x.end <= y.begin || y.end <= x.begin) return;
  raise_value(arg, fmt::format("partly overlaps {} in memory; an output may alias an input "
                               "exactly (in place), but not in part",
                               in_name));
}

// Outputs against every other argument: exact aliasing of the matching input, nothing else.
void check_overlaps(const nb::ndarray<nb::ro>& v_out, const nb::ndarray<nb::ro>* s_out,
                    std::initializer_list<Named> values, std::initializer_list<Named> lses) {
  for (auto [a, name] : values) require_alias_or_disjoint(v_out, "v_merged", *a, name);
  for (auto [a, name] : lses) require_disjoint(v_out, "v_merged", *a, name);
  if (s_out == nullptr) return;
  require_disjoint(*s_out, "s_merged", v_out, "v_merged");
  for (auto [a, name] : lses) require_alias_or_disjoint(*s_out, "s_merged", *a, name);
  for (auto [a, name] : values) require_disjoint(*s_out, "s_merged", *a, name);
}

void merge_state(InArray v_a, InArray s_a, InArray v_b, InArray s_b, OutArray v_out_rw,
                 std::optional<OutArray> s_out_rw, const std::string& dtype, uintptr_t stream) {
  const nb::ndarray<nb::ro> v_out(v_out_rw);
  const Location where = location_of(v_a, "v_a");
  const DType type = half_dtype_of(v_a, "v_a", dtype);
  if (v_a.ndim() < 1 || v_a.shape(v_a.ndim() - 1) == 0)
    raise_value("v_a", fmt::format("shape {}: expected [..., D] with D >= 1", shape_string(v_a)));
  const size_t lead = v_a.ndim() - 1;
  for (auto [a, name] : {Named{&v_b, "v_b"}, Named{&v_out, "v_merged"}}) {
    require_location(*a, name, where);
    require_half(*a, name, type);
    bool same = a->ndim() == v_a.ndim();
    for (size_t i = 0; same && i < v_a.ndim(); ++i) same = a->shape(i) == v_a.shape(i);
    if (!same)
      raise_value(name,
                  fmt::format("shape {}, expected v_a's {}", shape_string(*a), shape_string(v_a)));
  }
  std::vector<Named> lses = {{&s_a, "s_a"}, {&s_b, "s_b"}};
  std::optional<nb::ndarray<nb::ro>> s_out;
  if (s_out_rw) lses.emplace_back(&s_out.emplace(*s_out_rw), "s_merged");
  for (auto [a, name] : lses) {
    require_location(*a, name, where);
    require_float32(*a, name);
    bool same = a->ndim() == lead;
    for (size_t i = 0; same && i < lead; ++i) same = a->shape(i) == v_a.shape(i);
    if (!same)
      raise_value(name, fmt::format("shape {}, expected v_a's shape without its last dimension",
                                    shape_string(*a)));
    require_contiguous(*a, name);
  }
  require_contiguous(v_a, "v_a");
  require_contiguous(v_b, "v_b");
  require_contiguous(v_out, "v_merged");
  check_overlaps(v_out, s_out ? &*s_out : nullptr, {{&v_a, "v_a"}, {&v_b, "v_b"}},
                 {{&s_a, "s_a"}, {&s_b, "s_b"}});

  const MergeStateArgs args{
      .num_rows = static_cast<int64_t>(s_a.size()),
      .head_dim = static_cast<int32_t>(v_a.shape(lead)),
      .dtype = type,
      .v_a = v_a.data(),
      .s_a = static_cast<const float*>(s_a.data()),
      .v_b = v_b.data(),
      .s_b = static_cast<const float*>(s_b.data()),
      .v_out = v_out_rw.data(),
      .s_out = s_out_rw ? static_cast<float*>(s_out_rw->data()) : nullptr,
  };
  Status status;
  {
    nb::gil_scoped_release release;
    if (where.cuda()) {
      DeviceGuard guard(where.device_id);
      status = merge_state_cuda(args, reinterpret_cast<void*>(stream));
    } else {
      status = merge_state_cpu(args);
    }
  }
  check(status);
}

}  // namespace

void bind_merge(nb::module_& m) {
  m.def("merge_state", &merge_state, nb::arg("v_a").noconvert(), nb::arg("s_a").noconvert(),
        nb::arg("v_b").noconvert(), nb::arg("s_b").noconvert(), nb::arg("v_out").noconvert(),
        nb::arg("s_out").noconvert().none(), nb::arg("dtype"), nb::arg("stream"));
}

}  // namespace tvpy
