// The nanobind module treeverify._ext: exception types, build and device information. The
// Python package (treeverify/__init__.py) wraps it with allocation and stream defaults.
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "common.h"
#include "treeverify/system.h"
#include "treeverify/types.h"

namespace tvpy {

void bind_system(nb::module_& m) {
  m.def("build_info", [] {
    const treeverify::BuildInfo info = treeverify::build_info();
    nb::dict d;
    d["version"] = info.version;
    d["git_commit"] = info.git_commit;
    d["cuda_compiled"] = info.cuda_compiled;
    d["cuda_compiler_version"] = info.cuda_compiler_version;
    d["cuda_archs"] = info.cuda_archs;
    d["cuda_all_variants"] = info.cuda_all_variants;
    d["cuda_e4m3_mma"] = info.cuda_e4m3_mma;
    d["cuda_sm90a"] = info.cuda_sm90a;
    d["blas"] = info.blas;
    return d;
  });
  // What a GPU of each compiled architecture runs (the selection function's answer, no GPU
  // needed), as `treeverify doctor` prints it; empty without the CUDA backend.
  m.def("cuda_kernels_by_arch", [] {
    nb::list out;
    for (const treeverify::ArchKernels& k : treeverify::cuda_kernels_by_arch()) {
      nb::dict d;
      d["arch"] = k.arch;
      d["up_to_16_rows"] = k.up_to_16_rows;
      d["up_to_32_rows"] = k.up_to_32_rows;
      d["more_rows"] = k.more_rows;
      d["up_to_16_rows_e4m3"] = k.up_to_16_rows_e4m3;
      out.append(d);
    }
    return out;
  });
  m.def("devices", [] {
    std::string note;
    nb::list out;
    for (const treeverify::DeviceInfo& dev : treeverify::list_devices(&note)) {
      nb::dict d;
      d["ordinal"] = dev.ordinal;
      d["name"] = dev.name;
      d["compute_capability"] = nb::make_tuple(dev.cc_major, dev.cc_minor);
      d["sm_count"] = dev.sm_count;
      d["global_mem_bytes"] = dev.global_mem_bytes;
      d["has_kernel_code"] = dev.has_kernel_code;
      d["kernel_arch"] = dev.kernel_arch;
      out.append(d);
    }
    return nb::make_tuple(out, note);
  });
  m.attr("LATENT_DIM") = treeverify::kLatentDim;
  m.attr("ROPE_DIM") = treeverify::kRopeDim;
  m.attr("QK_DIM") = treeverify::kQKDim;
  m.attr("MAX_TREE_SIZE") = treeverify::kMaxTreeSize;
  m.attr("MAX_HEADS") = treeverify::kMaxHeads;
  m.attr("MAX_PAGE_SIZE") = treeverify::kMaxPageSize;
}

}  // namespace tvpy

NB_MODULE(_ext, m) {
  m.doc() = "treeverify C++ library binding (use the treeverify package, not this module)";
  nanobind::exception<tvpy::StatusError>(m, "Error", PyExc_RuntimeError);
  tvpy::bind_system(m);
  tvpy::bind_verify(m);
  tvpy::bind_merge(m);
  tvpy::bind_tree(m);
  tvpy::bind_graph(m);
}
