// Host tree utilities (tree.h) and the DDTree step (ddtree.h): build_tree, acceptance, KV
// commit. Inputs are host int32 arrays (the Python wrappers convert); results are new numpy
// arrays that own the library's vectors.
#include "treeverify/tree.h"

#include <fmt/format.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>

#include <optional>
#include <random>

#include "common.h"
#include "treeverify/ddtree.h"

namespace tvpy {
namespace {

using namespace treeverify;
using HostF32_2d = nb::ndarray<const float, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using HostI32_2d = nb::ndarray<const int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
using HostU8 = nb::ndarray<const uint8_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

AcceptedPaths make_paths(const HostI32& indptr, const HostI32& nodes, const HostI32& bonus) {
  auto vec = [](const HostI32& a) { return std::vector<int32_t>(a.data(), a.data() + a.shape(0)); };
  return {vec(indptr), vec(nodes), vec(bonus)};
}

auto paths_tuple(AcceptedPaths&& p) {
  return nb::make_tuple(to_numpy(std::move(p.indptr)), to_numpy(std::move(p.nodes)),
                        to_numpy(std::move(p.bonus_tokens)));
}

nb::tuple build_tree_py(HostF32_2d log_probs, HostI32_2d token_ids, int32_t budget,
                        int32_t root_token) {
  if (token_ids.shape(0) != log_probs.shape(0) || token_ids.shape(1) != log_probs.shape(1))
    raise_value("token_ids",
                fmt::format("shape [{}, {}], expected log_probs' [{}, {}]", token_ids.shape(0),
                            token_ids.shape(1), log_probs.shape(0), log_probs.shape(1)));
  const DraftTopK draft{
      .depth = static_cast<int32_t>(log_probs.shape(0)),
      .top_k = static_cast<int32_t>(log_probs.shape(1)),
      .log_probs = {log_probs.data(), log_probs.size()},
      .token_ids = {token_ids.data(), token_ids.size()},
      .root_token = root_token,
  };
  DraftTree tree;
  check(build_tree(draft, budget, &tree));
  return nb::make_tuple(to_numpy(std::move(tree.parents)), to_numpy(std::move(tree.tokens)),
                        to_numpy(std::move(tree.depths)), to_numpy(std::move(tree.scores)));
}

nb::tuple verify_greedy_py(HostI32 qo_indptr, HostI32 parents, HostI32 tokens,
                           HostI32 target_argmax) {
  AcceptedPaths paths;
  check(verify_greedy(span_of(qo_indptr), span_of(parents), span_of(tokens), span_of(target_argmax),
                      &paths));
  return paths_tuple(std::move(paths));
}

nb::tuple verify_sampling_py(HostI32 qo_indptr, HostI32 parents, HostI32 tokens,
                             HostF32_2d target_probs, std::optional<HostF32_2d> draft_probs,
                             int32_t scheme, uint64_t seed) {
  if (scheme < 0 || scheme > 2)
    raise_value("scheme", fmt::format("{} (expected 0, 1 or 2)", scheme));
  const SamplingInputs inputs{
      .vocab_size = static_cast<int32_t>(target_probs.shape(1)),
      .target_probs = {target_probs.data(), target_probs.size()},
      .draft_probs = draft_probs ? std::span<const float>(draft_probs->data(), draft_probs->size())
                                 : std::span<const float>(),
      .scheme = static_cast<DraftScheme>(scheme),
  };
  if (draft_probs && draft_probs->shape(1) != target_probs.shape(1))
    raise_value("draft_probs", fmt::format("has {} columns, target_probs {}", draft_probs->shape(1),
                                           target_probs.shape(1)));
  if (static_cast<int64_t>(target_probs.shape(0)) != static_cast<int64_t>(tokens.shape(0)))
    raise_value("target_probs", fmt::format("has {} rows for {} tree nodes", target_probs.shape(0),
                                            tokens.shape(0)));
  std::mt19937_64 rng(seed);
  AcceptedPaths paths;
  check(
      verify_sampling(span_of(qo_indptr), span_of(parents), span_of(tokens), inputs, &rng, &paths));
  return paths_tuple(std::move(paths));
}

nb::ndarray<nb::numpy, int32_t, nb::ndim<1>> commit_kv_paged_py(
    OutArray kv_rw, HostI32 kv_page_indptr, HostI32 kv_page_indices, HostI32 kv_len,
    HostI32 qo_indptr, HostI32 parents, HostI32 acc_indptr, HostI32 acc_nodes, HostI32 acc_bonus,
    const std::string& kv_dtype) {
  const nb::ndarray<nb::ro> kv(kv_rw);
  if (location_of(kv, "kv_cache").cuda())
    raise_value("kv_cache",
                "is on a CUDA device; the KV commit runs on the host (pass a CPU "
                "array, or use commit_slots for page_size 1)");
  if (kv.ndim() != 3 || kv.shape(2) != static_cast<size_t>(kQKDim))
    raise_value("kv_cache", fmt::format("shape {}, expected [num_pages, page_size, {}]",
                                        shape_string(kv), kQKDim));
  // Rows are copied bit for bit: any 16-bit element type, or for e4m3 float8_e4m3fn / uint8.
  const bool e4m3 = kv_dtype == "e4m3";
  if (e4m3) {
    require_e4m3(kv, "kv_cache");
  } else if (kv.dtype().bits != 16) {
    raise_type("kv_cache", "expected 16-bit elements (bf16/fp16/uint16), or an e4m3 cache "
                           "(float8_e4m3fn, or uint8 with kv_dtype='e4m3')");
  }
  require_contiguous(kv, "kv_cache");
  PagedKvCommit args{
      .page_size = static_cast<int32_t>(kv.shape(1)),
      .kv_page_indptr = span_of(kv_page_indptr),
      .kv_page_indices = span_of(kv_page_indices),
      .kv_len = span_of(kv_len),
      .qo_indptr = span_of(qo_indptr),
      .parents = span_of(parents),
  };
  if (e4m3) {
    args.kv_format = KvFormat::kE4M3;
    args.kv_cache_e4m3 = {static_cast<uint8_t*>(kv_rw.data()), kv.size()};
  } else {
    args.kv_cache = {static_cast<uint16_t*>(kv_rw.data()), kv.size()};
  }
  std::vector<int32_t> new_kv_len;
  check(commit_kv_paged(args, make_paths(acc_indptr, acc_nodes, acc_bonus), &new_kv_len));
  return to_numpy(std::move(new_kv_len));
}

nb::tuple commit_slots_py(HostI32 slot_indptr, HostI32 slots, HostI32 kv_len, HostI32 qo_indptr,
                          HostI32 parents, HostI32 acc_indptr, HostI32 acc_nodes,
                          HostI32 acc_bonus) {
  SlotCommitResult r;
  check(commit_slots(span_of(slot_indptr), span_of(slots), span_of(kv_len), span_of(qo_indptr),
                     span_of(parents), make_paths(acc_indptr, acc_nodes, acc_bonus), &r));
  return nb::make_tuple(to_numpy(std::move(r.slot_indptr)), to_numpy(std::move(r.slots)),
                        to_numpy(std::move(r.kv_len)), to_numpy(std::move(r.freed_slots)));
}

}  // namespace

void bind_tree(nb::module_& m) {
  m.def("validate_trees", [](HostI32 qo_indptr, HostI32 parents) {
    check(validate_trees(span_of(qo_indptr), span_of(parents)));
  });
  m.def("tree_depths", [](HostI32 qo_indptr, HostI32 parents) {
    std::vector<int32_t> depths;
    check(tree_depths(span_of(qo_indptr), span_of(parents), &depths));
    return to_numpy(std::move(depths));
  });
  m.def("tree_positions", [](HostI32 qo_indptr, HostI32 kv_len, HostI32 parents) {
    std::vector<int32_t> positions;
    check(tree_positions(span_of(qo_indptr), span_of(kv_len), span_of(parents), &positions));
    return to_numpy(std::move(positions));
  });
  m.def("build_ancestor_mask", [](HostI32 qo_indptr, HostI32 parents) {
    AncestorMask mask;
    check(build_ancestor_mask(span_of(qo_indptr), span_of(parents), &mask));
    const size_t rows = mask.words_per_row ? mask.words.size() / mask.words_per_row : 0;
    return to_numpy_2d(std::move(mask.words), rows, static_cast<size_t>(mask.words_per_row));
  });
  m.def("parents_from_custom_mask",
        [](HostI32 qo_indptr, HostI32 kv_len, HostI32 mask_indptr, HostU8 custom_mask) {
          std::vector<int32_t> parents;
          check(parents_from_custom_mask(span_of(qo_indptr), span_of(kv_len), span_of(mask_indptr),
                                         {custom_mask.data(), custom_mask.shape(0)}, &parents));
          return to_numpy(std::move(parents));
        });
  m.def("custom_mask_from_parents", [](HostI32 qo_indptr, HostI32 kv_len, HostI32 parents) {
    std::vector<int32_t> mask_indptr;
    std::vector<uint8_t> mask;
    check(custom_mask_from_parents(span_of(qo_indptr), span_of(kv_len), span_of(parents),
                                   &mask_indptr, &mask));
    return nb::make_tuple(to_numpy(std::move(mask_indptr)), to_numpy(std::move(mask)));
  });
  m.def("build_tree", &build_tree_py);
  m.def("verify_greedy", &verify_greedy_py);
  m.def("verify_sampling", &verify_sampling_py, nb::arg("qo_indptr"), nb::arg("parents"),
        nb::arg("tokens"), nb::arg("target_probs"), nb::arg("draft_probs").none(),
        nb::arg("scheme"), nb::arg("seed"));
  m.def("commit_kv_paged", &commit_kv_paged_py);
  m.def("commit_slots", &commit_slots_py);
}

}  // namespace tvpy
