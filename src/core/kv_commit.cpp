// KV commit after acceptance on the host: row moves in a paged cache, or a rewritten slot list
// for page_size = 1. See include/treeverify/ddtree.h for the contract.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <tuple>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/cuda_backend.h"
#include "core/paging.h"
#include "core/tree_checks.h"
#include "treeverify/ddtree.h"
#include "treeverify/tree.h"
#include "treeverify/types.h"

namespace treeverify {
namespace {

// The accepted paths against the trees: one path per request, empty exactly when T_b = 0,
// starting at the root and going down parent -> child (hence strictly increasing indices).
Status validate_paths(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                      const AcceptedPaths& accepted) {
  TV_RETURN_IF_ERROR(validate_trees(qo_indptr, parents));
  const size_t batch = qo_indptr.size() - 1;
  TV_REQUIRE(accepted.indptr.size() == batch + 1, "accepted.indptr",
             "has {} entries for {} requests", accepted.indptr.size(), batch);
  TV_REQUIRE(accepted.indptr[0] == 0, "accepted.indptr", "indptr[0] = {}", accepted.indptr[0]);
  TV_REQUIRE(static_cast<size_t>(accepted.indptr[batch]) == accepted.nodes.size(),
             "accepted.indptr", "indptr[B] = {} but {} nodes were given", accepted.indptr[batch],
             accepted.nodes.size());
  for (size_t b = 0; b < batch; ++b) {
    const int32_t tree_size = qo_indptr[b + 1] - qo_indptr[b];
    // In int64 and inside `nodes` before any node is read (fuzz/regressions/fuzz_kv_commit).
    const int64_t start = accepted.indptr[b], end = accepted.indptr[b + 1];
    TV_REQUIRE(start >= 0 && start <= end && end <= static_cast<int64_t>(accepted.nodes.size()),
               "accepted.indptr", "request {}: path [{}, {}) of {} nodes", b, start, end,
               accepted.nodes.size());
    const int64_t path_len = end - start;
    TV_REQUIRE(path_len <= tree_size, "accepted.indptr",
               "request {}: path of {} nodes in a tree of {}", b, path_len, tree_size);
    TV_REQUIRE((path_len == 0) == (tree_size == 0), "accepted.indptr",
               "request {}: path of {} nodes in a tree of {}", b, path_len, tree_size);
    for (int64_t k = 0; k < path_len; ++k) {
      const int32_t node = accepted.nodes[start + k];
      TV_REQUIRE(node >= 0 && node < tree_size, "accepted.nodes", "request {} step {}: node {}", b,
                 k, node);
      const int32_t expected_parent = k == 0 ? -1 : accepted.nodes[start + k - 1];
      TV_REQUIRE(parents[qo_indptr[b] + node] == expected_parent, "accepted.nodes",
                 "request {} step {}: node {} is not a child of {}", b, k, node, expected_parent);
    }
  }
  return Status::Ok();
}

// The rows a commit reads and writes, request b's tree rows (positions [L_b, kv_len_b)),
// must be b's alone: a tree row listed twice, or one that is also a prefix row of any request
// (b's own included), would be overwritten while the other use still needs it, and the
// commit would silently corrupt that request. Prefix rows may be shared (prefix caching), and
// rows past kv_len are not looked at. Rows, not pages: a page may hold the end of one
// request's prefix and nothing else of it. Called once the page table is known to be valid.
Status validate_tree_rows_unshared(const PagedKvCommit& args) {
  const int32_t page_size = args.page_size;
  const size_t batch = args.qo_indptr.size() - 1;
  auto pages_of = [&](size_t b) { return args.kv_page_indices.data() + args.kv_page_indptr[b]; };
  struct TreeRow {
    int64_t row;  // page * page_size + offset in the page
    int32_t request, position;
  };
  std::vector<TreeRow> tree_rows;
  tree_rows.reserve(args.parents.size());
  for (size_t b = 0; b < batch; ++b) {
    const int32_t prefix_len = args.kv_len[b] - (args.qo_indptr[b + 1] - args.qo_indptr[b]);
    for (int64_t pos = prefix_len; pos < args.kv_len[b]; ++pos) {
      tree_rows.push_back({detail::paged_row(pages_of(b), page_size, pos), static_cast<int32_t>(b),
                           static_cast<int32_t>(pos)});
    }
  }
  // Ties in request order, so a message names the two uses in a reproducible order.
  std::sort(tree_rows.begin(), tree_rows.end(), [](const TreeRow& x, const TreeRow& y) {
    return std::tie(x.row, x.request, x.position) < std::tie(y.row, y.request, y.position);
  });
  for (size_t i = 1; i < tree_rows.size(); ++i) {
    const TreeRow &x = tree_rows[i - 1], &y = tree_rows[i];
    TV_REQUIRE(x.row != y.row, "kv_page_indices",
               "request {} position {} and request {} position {} are both tree rows in page {} "
               "row {}",
               x.request, x.position, y.request, y.position, x.row / page_size, x.row % page_size);
  }
  // Prefix rows page by page: the rows a request's prefix uses in one page are a run
  // [row, row + count), so one search per page finds a tree row among them.
  for (size_t b = 0; b < batch; ++b) {
    const int32_t prefix_len = args.kv_len[b] - (args.qo_indptr[b + 1] - args.qo_indptr[b]);
    TV_RETURN_IF_ERROR(detail::for_each_page_run(
        pages_of(b), page_size, 0, prefix_len,
        [&](int64_t first, int64_t count, int64_t row) -> Status {
          const auto hit = std::lower_bound(tree_rows.begin(), tree_rows.end(), row,
                                            [](const TreeRow& x, int64_t r) { return x.row < r; });
          const bool shared = hit != tree_rows.end() && hit->row < row + count;
          TV_REQUIRE(!shared, "kv_page_indices",
                     "request {} position {} (a tree row) is also request {} position {} (a "
                     "prefix row): page {} row {}",
                     hit->request, hit->position, b, first + (hit->row - row), hit->row / page_size,
                     hit->row % page_size);
          return Status::Ok();
        }));
  }
  return Status::Ok();
}

// Every check of a paged commit, against a pool of num_pages pages; shared by the host and
// the device commit so both accept exactly the same inputs.
Status validate_paged_commit(const PagedKvCommit& args, const AcceptedPaths& accepted,
                             int64_t num_pages) {
  TV_REQUIRE(args.kv_format == KvFormat::kSameAsQ || args.kv_format == KvFormat::kE4M3,
             "kv_format", "kv_format = {}", static_cast<int32_t>(args.kv_format));
  TV_RETURN_IF_ERROR(validate_paths(args.qo_indptr, args.parents, accepted));
  TV_RETURN_IF_ERROR(detail::validate_kv_len(args.qo_indptr, args.kv_len));
  const int32_t page_size = args.page_size;
  TV_REQUIRE(is_valid_page_size(page_size), "page_size", "page_size = {}", page_size);
  const size_t batch = args.qo_indptr.size() - 1;
  TV_REQUIRE(args.kv_page_indptr.size() == batch + 1, "kv_page_indptr",
             "has {} entries for {} requests", args.kv_page_indptr.size(), batch);
  for (size_t b = 0; b < batch; ++b) {
    const int32_t page_begin = args.kv_page_indptr[b], page_end = args.kv_page_indptr[b + 1];
    TV_REQUIRE(page_begin >= 0 && page_begin <= page_end &&
                   static_cast<size_t>(page_end) <= args.kv_page_indices.size(),
               "kv_page_indptr", "request {}: pages [{}, {}) of {}", b, page_begin, page_end,
               args.kv_page_indices.size());
    const int64_t pages_needed = detail::pages_for(args.kv_len[b], page_size);
    TV_REQUIRE(page_end - page_begin >= pages_needed, "kv_page_indptr",
               "request {}: {} pages for kv_len {} at page_size {}", b, page_end - page_begin,
               args.kv_len[b], page_size);
    for (int32_t p = page_begin; p < page_end; ++p) {
      TV_REQUIRE(args.kv_page_indices[p] >= 0 && args.kv_page_indices[p] < num_pages,
                 "kv_page_indices", "request {} entry {}: page {}, num_pages = {}", b, p,
                 args.kv_page_indices[p], num_pages);
    }
  }
  return validate_tree_rows_unshared(args);
}

// new_kv_len from the paths (kv_len unchanged for T_b = 0).
std::vector<int32_t> committed_lengths(const PagedKvCommit& args, const AcceptedPaths& accepted) {
  std::vector<int32_t> result(args.kv_len.begin(), args.kv_len.end());
  for (size_t b = 0; b + 1 < args.qo_indptr.size(); ++b) {
    const int32_t tree_size = args.qo_indptr[b + 1] - args.qo_indptr[b];
    if (tree_size > 0)
      result[b] = args.kv_len[b] - tree_size + accepted.indptr[b + 1] - accepted.indptr[b];
  }
  return result;
}

// The tree slots of the whole batch: a slot listed twice (in one tree or in two requests'
// trees) would be freed twice, and a tree slot that is also a prefix slot of any request
// would be freed while that prefix still reads it. Prefix slots may be shared between
// requests (prefix caching). slot_indptr must already match kv_len.
Status validate_tree_slots(std::span<const int32_t> slot_indptr, std::span<const int32_t> slots,
                           std::span<const int32_t> qo_indptr) {
  const size_t batch = qo_indptr.size() - 1;
  struct TreeSlot {
    int32_t slot, request, node;
  };
  std::vector<TreeSlot> tree;
  for (size_t b = 0; b < batch; ++b) {
    const int32_t tree_size = qo_indptr[b + 1] - qo_indptr[b];
    const int32_t first = slot_indptr[b + 1] - tree_size;
    for (int32_t i = 0; i < tree_size; ++i)
      tree.push_back({slots[first + i], static_cast<int32_t>(b), i});
  }
  std::sort(tree.begin(), tree.end(), [](const TreeSlot& x, const TreeSlot& y) {
    return std::tie(x.slot, x.request, x.node) < std::tie(y.slot, y.request, y.node);
  });
  for (size_t i = 1; i < tree.size(); ++i) {
    const TreeSlot &x = tree[i - 1], &y = tree[i];
    TV_REQUIRE(x.slot != y.slot, "slots",
               "tree slot {} listed twice: request {} node {} and request {} node {}", x.slot,
               x.request, x.node, y.request, y.node);
  }
  for (size_t b = 0; b < batch; ++b) {
    const int32_t prefix_end = slot_indptr[b + 1] - (qo_indptr[b + 1] - qo_indptr[b]);
    for (int32_t k = slot_indptr[b]; k < prefix_end; ++k) {
      const auto hit =
          std::lower_bound(tree.begin(), tree.end(), slots[k],
                           [](const TreeSlot& x, int32_t slot) { return x.slot < slot; });
      const bool shared = hit != tree.end() && hit->slot == slots[k];
      TV_REQUIRE(!shared, "slots",
                 "tree slot {} (request {} node {}) is also a prefix slot of request {} "
                 "(position {})",
                 slots[k], hit->request, hit->node, b, k - slot_indptr[b]);
    }
  }
  return Status::Ok();
}

}  // namespace

Status commit_kv_paged(const PagedKvCommit& args, const AcceptedPaths& accepted,
                       std::vector<int32_t>* new_kv_len) {
  TV_REQUIRE(args.kv_format == KvFormat::kSameAsQ || args.kv_format == KvFormat::kE4M3,
             "kv_format", "kv_format = {}", static_cast<int32_t>(args.kv_format));
  // The pool size comes from the cache span, which needs a valid page size to divide by.
  const int32_t page_size = args.page_size;
  TV_REQUIRE(is_valid_page_size(page_size), "page_size", "page_size = {}", page_size);
  const size_t page_elems = static_cast<size_t>(page_size) * kQKDim;
  // The pool: 16-bit rows in kv_cache, or e4m3 rows in kv_cache_e4m3; the other span empty.
  const bool e4m3 = args.kv_format == KvFormat::kE4M3;
  TV_REQUIRE(!e4m3 || args.kv_cache.empty(), "kv_cache",
             "has {} 16-bit elements but kv_format is e4m3 (pass the e4m3 pool as "
             "kv_cache_e4m3)",
             args.kv_cache.size());
  TV_REQUIRE(e4m3 || args.kv_cache_e4m3.empty(), "kv_cache_e4m3",
             "has {} bytes but kv_format is {} (16-bit rows go in kv_cache)",
             args.kv_cache_e4m3.size(), kv_format_name(args.kv_format));
  const size_t pool_elems = e4m3 ? args.kv_cache_e4m3.size() : args.kv_cache.size();
  TV_REQUIRE(pool_elems % page_elems == 0, e4m3 ? "kv_cache_e4m3" : "kv_cache",
             "has {} {}, not a multiple of page_size * 576 = {}", pool_elems,
             e4m3 ? "bytes" : "elements", page_elems);
  const int64_t num_pages = static_cast<int64_t>(pool_elems / page_elems);
  TV_RETURN_IF_ERROR(validate_paged_commit(args, accepted, num_pages));
  const size_t batch = args.qo_indptr.size() - 1;
  // A row is 576 values of 2 bytes or of 1: copied as bytes.
  std::byte* const pool = e4m3 ? reinterpret_cast<std::byte*>(args.kv_cache_e4m3.data())
                               : reinterpret_cast<std::byte*>(args.kv_cache.data());
  const size_t row_bytes = static_cast<size_t>(kv_row_bytes(args.kv_format, DType::kBF16));

  // Everything is valid: move rows. Why increasing k is safe in place: the path is strictly
  // increasing with path[0] = 0, so path[k] >= k and every move goes down (dst_k = L + k <=
  // src_k = L + path[k]). Step k writes only row L + k. Any row a later step j > k reads is
  // L + path[j] with path[j] > path[k] >= k, so it differs from the row written at step k and
  // from every earlier destination L + k' (k' <= k): each source is read before anything
  // overwrites it. Destinations are distinct, so no row is written twice. No row a request
  // moves belongs to anything else (validate_tree_rows_unshared), so requests cannot
  // interfere.
  for (size_t b = 0; b < batch; ++b) {
    const int32_t tree_size = args.qo_indptr[b + 1] - args.qo_indptr[b];
    const int32_t prefix_len = args.kv_len[b] - tree_size;
    const int32_t start = accepted.indptr[b], path_len = accepted.indptr[b + 1] - start;
    const int32_t* pages = args.kv_page_indices.data() + args.kv_page_indptr[b];
    auto row = [&](int32_t pos) {
      return pool + static_cast<size_t>(detail::paged_row(pages, page_size, pos)) * row_bytes;
    };
    for (int32_t k = 0; k < path_len; ++k) {
      const int32_t src = prefix_len + accepted.nodes[start + k], dst = prefix_len + k;
      if (src != dst) std::memcpy(row(dst), row(src), row_bytes);
    }
  }
  *new_kv_len = committed_lengths(args, accepted);
  return Status::Ok();
}

Status commit_kv_paged_cuda(const PagedKvCommit& host, const AcceptedPaths& accepted,
                            const PagedKvCommitDevice& device, std::vector<int32_t>* new_kv_len,
                            void* stream) {
  TV_REQUIRE(device.num_pages >= 0, "device.num_pages", "num_pages = {}", device.num_pages);
  TV_RETURN_IF_ERROR(validate_paged_commit(host, accepted, device.num_pages));
  TV_RETURN_IF_ERROR(detail::cuda_commit_kv_paged(host, accepted, device, stream));
  *new_kv_len = committed_lengths(host, accepted);
  return Status::Ok();
}

Status commit_slots(std::span<const int32_t> slot_indptr, std::span<const int32_t> slots,
                    std::span<const int32_t> kv_len, std::span<const int32_t> qo_indptr,
                    std::span<const int32_t> parents, const AcceptedPaths& accepted,
                    SlotCommitResult* result) {
  TV_RETURN_IF_ERROR(validate_paths(qo_indptr, parents, accepted));
  TV_RETURN_IF_ERROR(detail::validate_kv_len(qo_indptr, kv_len));
  const size_t batch = qo_indptr.size() - 1;
  TV_REQUIRE(slot_indptr.size() == batch + 1, "slot_indptr", "has {} entries for {} requests",
             slot_indptr.size(), batch);
  TV_REQUIRE(slot_indptr[0] == 0, "slot_indptr", "slot_indptr[0] = {}", slot_indptr[0]);
  TV_REQUIRE(static_cast<size_t>(slot_indptr[batch]) == slots.size(), "slot_indptr",
             "slot_indptr[B] = {} but {} slots were given", slot_indptr[batch], slots.size());
  for (size_t b = 0; b < batch; ++b) {
    const int64_t count = int64_t{slot_indptr[b + 1]} - slot_indptr[b];  // int64: no overflow
    TV_REQUIRE(count == kv_len[b], "slot_indptr", "request {}: {} slots, kv_len = {}", b, count,
               kv_len[b]);
  }
  TV_RETURN_IF_ERROR(validate_tree_slots(slot_indptr, slots, qo_indptr));

  SlotCommitResult out{.slot_indptr = {0}, .slots = {}, .kv_len = {}, .freed_slots = {}};
  std::vector<uint8_t> kept;
  for (size_t b = 0; b < batch; ++b) {
    const int32_t tree_size = qo_indptr[b + 1] - qo_indptr[b];
    const int32_t prefix_len = kv_len[b] - tree_size;
    const int32_t* req = slots.data() + slot_indptr[b];
    const int32_t start = accepted.indptr[b], path_len = accepted.indptr[b + 1] - start;
    out.slots.insert(out.slots.end(), req, req + prefix_len);
    kept.assign(tree_size, 0);
    for (int32_t k = 0; k < path_len; ++k) {
      const int32_t node = accepted.nodes[start + k];
      out.slots.push_back(req[prefix_len + node]);
      kept[node] = 1;
    }
    for (int32_t i = 0; i < tree_size; ++i) {
      if (!kept[i]) out.freed_slots.push_back(req[prefix_len + i]);
    }
    out.kv_len.push_back(prefix_len + path_len);
    out.slot_indptr.push_back(static_cast<int32_t>(out.slots.size()));
  }
  *result = std::move(out);
  return Status::Ok();
}

}  // namespace treeverify
