// fuzz_kv_commit: the KV commit after acceptance (include/treeverify/ddtree.h):
// commit_kv_paged, commit_kv_paged_cuda (its host validation; this build has no CUDA) and
// commit_slots. fuzz_kv_commit_long is the same target built with TVFUZZ_LONG_KV=1: it also
// gives lengths near 2^31 (below), which take 2 s an input under the sanitizers, so that this
// one keeps its thousands of inputs a second. Both decode every input alike.
//
// Feeds: a batch of trees with accepted root-down paths, kv_len, and a paged KV pool whose page
// table uses fresh pages in an input-chosen order or input-chosen (shared) page ids, page sizes
// valid or not, a pool span whose length may not be a whole number of pages, rows of 16-bit
// values (kv_cache) or of e4m3 bytes (kv_format kE4M3, kv_cache_e4m3), or a damaged pairing of
// format and spans (the pool in the other span, a stray second span, an unknown format); for
// commit_slots a slot list per request with fresh or input-chosen (shared) slots. All arrays
// (qo_indptr, parents, kv_len, kv_page_indptr, kv_page_indices, accepted indptr/nodes,
// slot_indptr, slots) are then damaged by input-chosen mutations, appended and truncated
// entries. fuzz_kv_commit_long: at page size 128 one request may then get a kv_len near 2^31
// (2^31 - 1, within a page of it, 2^30, 2^24 + 3) over a sparse page table of 2^24 entries in a
// pool of a few pages: shared prefix pages, tree pages chosen by the input. Every span is an
// exact-size heap copy, so ASan sees an access one past its end; every KV row holds distinct
// contents.
//
// Asserts:
//  - each commit succeeds exactly when the input meets ddtree.h's contract (checked
//    independently here: valid trees and paths, kv_len >= T_b, page ranges within the page
//    list holding kv_len tokens, page ids in the pool, tree rows/slots used by nothing else);
//    errors carry a message, never kInternal.
//  - commit_kv_paged: succeeds exactly when also the format is known, the pool is in its
//    format's span, the other span is empty and the pool is whole pages; on success the pool
//    equals the expected one byte for byte (row L_b + k holds the old row L_b + path[k], rows
//    of 1152 bytes or, for e4m3, of 576: the encoded bytes the reference move gives; every
//    other byte unchanged) and new_kv_len = L_b + path size; on error both spans are
//    byte-identical to before and new_kv_len untouched.
//  - commit_kv_paged_cuda: validates exactly as the host commit against its num_pages (the
//    format too, never the host spans), then answers kUnsupported (no CUDA here), never
//    touching the host spans (poisoned during the call).
//  - commit_slots: on success prefix slots kept, then the accepted nodes' slots in path order,
//    the other tree slots freed in node order, new kv_len and slot_indptr; on error the result
//    is untouched.
#include <sanitizer/asan_interface.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

#include "fuzz_common.h"
#include "treeverify/ddtree.h"
#include "treeverify/tree.h"
#include "treeverify/types.h"

namespace {

using namespace treeverify;
using tvfuzz::Buf;
using tvfuzz::Input;

constexpr int64_t kMaxPoolRows = 512;

#ifndef TVFUZZ_LONG_KV
#define TVFUZZ_LONG_KV 0
#endif
constexpr bool kLongKv = TVFUZZ_LONG_KV != 0;  // this binary is fuzz_kv_commit_long

bool trees_ok(const std::vector<int32_t>& qo, const std::vector<int32_t>& parents) {
  if (qo.empty() || qo[0] != 0 || qo.back() != static_cast<int64_t>(parents.size())) return false;
  for (size_t b = 0; b + 1 < qo.size(); ++b) {
    const int64_t T = int64_t{qo[b + 1]} - qo[b];
    if (T < 0 || T > kMaxTreeSize) return false;
  }
  for (size_t b = 0; b + 1 < qo.size(); ++b) {
    for (int32_t i = 0; i < qo[b + 1] - qo[b]; ++i) {
      const int32_t p = parents[qo[b] + i];
      if (i == 0 ? p != -1 : (p < 0 || p >= i)) return false;
    }
  }
  return true;
}

// Trees, paths and kv_len: the part of the contract both commits share.
bool paths_ok(const std::vector<int32_t>& qo, const std::vector<int32_t>& parents,
              const std::vector<int32_t>& kv_len, const std::vector<int32_t>& ai,
              const std::vector<int32_t>& an) {
  if (!trees_ok(qo, parents)) return false;
  const size_t B = qo.size() - 1;
  if (ai.size() != B + 1 || ai[0] != 0 || ai[B] != static_cast<int64_t>(an.size())) return false;
  for (size_t b = 0; b < B; ++b) {  // every path's range first: then they lie inside nodes
    const int64_t T = qo[b + 1] - qo[b], n = int64_t{ai[b + 1]} - ai[b];
    if (n < 0 || n > T || (n == 0) != (T == 0)) return false;
  }
  for (size_t b = 0; b < B; ++b) {
    const int64_t T = qo[b + 1] - qo[b], n = int64_t{ai[b + 1]} - ai[b];
    for (int64_t k = 0; k < n; ++k) {
      const int32_t node = an[ai[b] + k];
      if (node < 0 || node >= T) return false;
      if (parents[qo[b] + node] != (k == 0 ? -1 : an[ai[b] + k - 1])) return false;
    }
  }
  if (kv_len.size() != B) return false;
  for (size_t b = 0; b < B; ++b) {
    if (kv_len[b] < qo[b + 1] - qo[b]) return false;
  }
  return true;
}

// pages_ok's tree-row rule where listing every row would take too long (kv_len near 2^31):
// the tree rows one by one, each prefix page as the run of rows its positions use.
constexpr int64_t kMaxRowsListed = 1 << 16;
bool tree_rows_ok_by_page(int32_t ps, const std::vector<int32_t>& qo,
                          const std::vector<int32_t>& kv_len, const std::vector<int32_t>& kpi,
                          const std::vector<int32_t>& kpidx) TVFUZZ_HOT {
  const size_t B = qo.size() - 1;
  std::vector<int64_t> tree_rows;  // sorted
  for (size_t b = 0; b < B; ++b) {
    for (int64_t pos = kv_len[b] - (qo[b + 1] - qo[b]); pos < kv_len[b]; ++pos)
      tree_rows.push_back(int64_t{kpidx[kpi[b] + pos / ps]} * ps + pos % ps);
  }
  std::sort(tree_rows.begin(), tree_rows.end());
  if (std::adjacent_find(tree_rows.begin(), tree_rows.end()) != tree_rows.end()) return false;
  for (size_t b = 0; b < B; ++b) {
    const int64_t L = kv_len[b] - (qo[b + 1] - qo[b]);
    for (int64_t k = 0; k * ps < L; ++k) {  // entry k: positions [k ps, min((k + 1) ps, L))
      const int64_t first_row = int64_t{kpidx[kpi[b] + k]} * ps;
      size_t lo = 0, hi = tree_rows.size();  // the first tree row >= first_row, by bisection
      while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        (tree_rows[mid] < first_row ? lo = mid + 1 : hi = mid);
      }
      if (lo < tree_rows.size() && tree_rows[lo] < first_row + std::min<int64_t>(ps, L - k * ps))
        return false;
    }
  }
  return true;
}

// The paged commit's page-table rules against a pool of num_pages pages (paths_ok first).
bool pages_ok(int32_t ps, const std::vector<int32_t>& qo, const std::vector<int32_t>& kv_len,
              const std::vector<int32_t>& kpi, const std::vector<int32_t>& kpidx,
              int64_t num_pages) TVFUZZ_HOT {
  if (!is_valid_page_size(ps)) return false;
  const size_t B = qo.size() - 1;
  if (kpi.size() != B + 1) return false;
  for (size_t b = 0; b < B; ++b) {
    const int64_t begin = kpi[b], end = kpi[b + 1];
    if (begin < 0 || begin > end || end > static_cast<int64_t>(kpidx.size())) return false;
    if (end - begin < (int64_t{kv_len[b]} + ps - 1) / ps) return false;
    for (int64_t k = begin; k < end; ++k) {
      if (kpidx[k] < 0 || kpidx[k] >= num_pages) return false;
    }
  }
  // Tree rows: distinct, and none of them a prefix row of any request.
  int64_t positions = 0;
  for (size_t b = 0; b < B; ++b) positions += kv_len[b];
  if (positions > kMaxRowsListed) return tree_rows_ok_by_page(ps, qo, kv_len, kpi, kpidx);
  std::set<int64_t> tree_rows, prefix_rows;
  for (size_t b = 0; b < B; ++b) {
    const int64_t L = kv_len[b] - (qo[b + 1] - qo[b]);
    for (int64_t pos = 0; pos < kv_len[b]; ++pos) {
      const int64_t row = int64_t{kpidx[kpi[b] + pos / ps]} * ps + pos % ps;
      if (pos < L) {
        prefix_rows.insert(row);
      } else if (!tree_rows.insert(row).second) {
        return false;
      }
    }
  }
  for (int64_t r : tree_rows) {
    if (prefix_rows.count(r)) return false;
  }
  return true;
}

bool slots_ok(const std::vector<int32_t>& qo, const std::vector<int32_t>& kv_len,
              const std::vector<int32_t>& si, const std::vector<int32_t>& slots) {
  const size_t B = qo.size() - 1;
  if (si.size() != B + 1 || si[0] != 0 || si[B] != static_cast<int64_t>(slots.size())) return false;
  for (size_t b = 0; b < B; ++b) {
    if (int64_t{si[b + 1]} - si[b] != kv_len[b]) return false;
  }
  std::set<int32_t> tree, prefix;
  for (size_t b = 0; b < B; ++b) {
    const int32_t T = qo[b + 1] - qo[b];
    for (int32_t k = si[b]; k < si[b + 1]; ++k) {
      if (k < si[b + 1] - T) {
        prefix.insert(slots[k]);
      } else if (!tree.insert(slots[k]).second) {
        return false;
      }
    }
  }
  for (int32_t s : tree) {
    if (prefix.count(s)) return false;
  }
  return true;
}

// The large-length transformation (see body): request b's page-table entries replaced by a
// sparse table for an input-chosen kv_len near 2^31. Leaves the arrays alone when request b's
// range is not inside kv_page_indices (a mutation broke it: the input stays as invalid).
void make_huge(Input& in, int32_t ps, int64_t pool, const std::vector<int32_t>& qo,
               std::vector<int32_t>* kv_len, std::vector<int32_t>* kpi,
               std::vector<int32_t>* kpidx) {
  const size_t b = in.u8() % kv_len->size();
  const int32_t len =
      in.pick<int32_t>({tvfuzz::kI32Max, tvfuzz::kI32Max - 1, tvfuzz::kI32Max - (ps - 1),
                        tvfuzz::kI32Max - ps, tvfuzz::kI32Max - ps - 1, 1 << 30, (1 << 24) + 3});
  const int64_t T = int64_t{qo[b + 1]} - qo[b], begin = (*kpi)[b], end = (*kpi)[b + 1];
  if (T < 0 || T > len || begin < 0 || begin > end || end > static_cast<int64_t>(kpidx->size()))
    return;
  const int64_t n = (int64_t{len} + ps - 1) / ps + in.u8() % 2;
  std::vector<int32_t> table(n, in.u8() % pool);
  const int64_t tree_entries = std::min<int64_t>(n, (T + ps - 1) / ps + 2);
  for (int64_t k = n - tree_entries; k < n; ++k) table[k] = in.u8() % pool;
  for (int k = in.u8() % 4; k > 0; --k) table[in.u32() % n] = in.u8() % pool;
  kpidx->erase(kpidx->begin() + begin, kpidx->begin() + end);
  kpidx->insert(kpidx->begin() + begin, table.begin(), table.end());
  const int64_t delta = n - (end - begin);
  for (size_t j = b + 1; j < kpi->size(); ++j)
    (*kpi)[j] = static_cast<int32_t>(
        std::clamp<int64_t>((*kpi)[j] + delta, tvfuzz::kI32Min, tvfuzz::kI32Max));
  (*kv_len)[b] = len;
  tvfuzz::Stats::count(6);
}

// Stats slots (TREEVERIFY_FUZZ_STATS=1): 0 inputs, 1 trees and paths valid, 2 commit_kv_paged
// ok (16-bit), 3 commit_kv_paged_cuda reached kUnsupported, 4 commit_slots ok, 5
// commit_kv_paged ok (e4m3), 6 a kv_len near 2^31 over a sparse table, 7 commit_kv_paged ok on
// one.
int body(const uint8_t* data, size_t size) {
  Input in(data, size);
  tvfuzz::Stats::count(0);
  uint8_t v = in.u8();
  const int32_t B = v < 220 ? v % 5 : in.pick<int32_t>({8, 0});
  v = in.u8();
  const int32_t ps = v < 200 ? 1 << (v % 4) : in.pick<int32_t>({0, -1, 3, 256, 128});
  const int32_t lps = is_valid_page_size(ps) ? ps : 2;  // layout page size
  std::vector<int32_t> qo = {0}, parents, kv_len, kpi = {0}, kpidx, ai = {0}, an;
  for (int32_t b = 0; b < B; ++b) {
    v = in.u8();
    const int32_t T = v < 240 ? v % 6 : in.pick<int32_t>({0, 20});
    for (int32_t i = 0; i < T; ++i) parents.push_back(i == 0 ? -1 : in.u8() % i);
    v = in.u8();
    const int32_t L = v < 240 ? v % 9 : in.pick<int32_t>({0, 40});
    const int32_t extra = in.u8() % 2;
    if (T > 0) {  // a random root-down path
      std::vector<int32_t> path = {0};
      while (in.u8() % 4 != 0) {
        std::vector<int32_t> kids;
        for (int32_t c = path.back() + 1; c < T; ++c) {
          if (parents[qo.back() + c] == path.back()) kids.push_back(c);
        }
        if (kids.empty()) break;
        path.push_back(kids[in.u8() % kids.size()]);
      }
      an.insert(an.end(), path.begin(), path.end());
    }
    ai.push_back(static_cast<int32_t>(an.size()));
    qo.push_back(qo.back() + T);
    kv_len.push_back(L + T);
    kpi.push_back(kpi.back() + (L + T + lps - 1) / lps + extra);
  }
  int64_t pool;
  v = in.u8();
  if (v < 160) {  // fresh pages in an input-chosen order
    pool = kpi.back() + in.u8() % 3;
    if (pool * lps > kMaxPoolRows) return 0;
    std::vector<int32_t> perm(pool);
    for (int32_t k = 0; k < pool; ++k) perm[k] = k;
    for (int64_t k = pool - 1; k > 0; --k) std::swap(perm[k], perm[in.u8() % (k + 1)]);
    kpidx.assign(perm.begin(), perm.begin() + kpi.back());
  } else {  // input-chosen ids: pages shared within and across requests
    pool = 1 + in.u8() % 32;
    for (int32_t k = 0; k < kpi.back(); ++k) kpidx.push_back(in.u8() % pool);
  }
  if (pool * lps > kMaxPoolRows) return 0;
  // Slots for commit_slots: fresh (distinct) or input-chosen.
  std::vector<int32_t> si = {0}, slots;
  v = in.u8();
  for (int32_t b = 0; b < B; ++b) {
    for (int32_t k = 0; k < kv_len[b]; ++k) {
      slots.push_back(v < 160 ? static_cast<int32_t>(slots.size()) * 3 + 1 : in.u8() % 48);
    }
    si.push_back(static_cast<int32_t>(slots.size()));
  }
  tvfuzz::mutate_arrays(in, {&qo, &parents, &kv_len, &kpi, &kpidx, &ai, &an}, 6, true);
  tvfuzz::mutate_arrays(in, {&si, &slots}, 2, true);

  const int64_t page_elems = int64_t{lps} * kQKDim;
  int64_t cache_elems = pool * page_elems;  // in the span the pool is passed in
  v = in.u8();
  if (v >= 245) cache_elems += in.pick<int64_t>({1, -1, page_elems, -page_elems, kQKDim});
  cache_elems = std::max<int64_t>(cache_elems, 0);
  const uint64_t fill_seed = in.u64();
  const int64_t device_pages =
      in.u8() < 240 ? pool : in.pick<int64_t>({-1, 0, pool - 1, INT64_MAX});
  // The rows' format (ddtree.h PagedKvCommit): 16-bit rows in kv_cache, e4m3 rows in
  // kv_cache_e4m3, or from 224 a damaged pairing: e4m3 with the pool in the 16-bit span, a
  // stray span beside the pool (empty: still valid), an unknown kv_format. Read last, so an
  // input that ends before it (the seeds and regressions written before this byte) decodes
  // as it did, 16-bit.
  KvFormat format = KvFormat::kSameAsQ;
  bool pool_e4m3 = false;  // the pool is passed in kv_cache_e4m3 (else in kv_cache)
  int64_t stray = 0;       // elements of the other span
  v = in.u8();
  if (v >= 96 && v < 224) {
    format = KvFormat::kE4M3;
    pool_e4m3 = true;
  } else if (v >= 224) {
    switch (v % 4) {
      case 0:
        format = KvFormat::kE4M3;
        break;
      case 1:
        format = KvFormat::kE4M3;
        pool_e4m3 = true;
        stray = in.pick<int64_t>({1, kQKDim, 0});
        break;
      case 2:
        stray = in.pick<int64_t>({1, kQKDim, 0});
        break;
      default:
        format = static_cast<KvFormat>(in.pick<int32_t>({2, -1, tvfuzz::kI32Max, tvfuzz::kI32Min}));
        pool_e4m3 = in.flag();
    }
  }
  // Large lengths over few pages, read last too: from 200, one request's kv_len becomes one
  // near 2^31 (or 2^30, 2^24 + 3) at page size 128, over a sparse page table of
  // ceil(kv_len / 128) entries (a spare one at times): one input-chosen page for all of them,
  // input-chosen pages for the entries that hold the tree, and a few more anywhere. The pool
  // stays a few pages, so the prefix shares pages (valid) and the tree rows may collide with
  // them (invalid). Issue 52: the tree-row check's page walk overflowed int32 there.
  // fuzz_kv_commit_long only (fuzz_kv_commit reads the byte and goes on).
  v = in.u8();
  const bool huge = kLongKv && v >= 200 && lps == kMaxPageSize && pool > 0 && !kv_len.empty() &&
                    kpi.size() == kv_len.size() + 1 && qo.size() == kv_len.size() + 1;
  if (huge) make_huge(in, lps, pool, qo, &kv_len, &kpi, &kpidx);
  const bool format_ok = format == KvFormat::kSameAsQ || format == KvFormat::kE4M3;
  const bool e4m3 = format == KvFormat::kE4M3;

  // Every row distinct through its first elements (16-bit) or bytes (e4m3), the rest random.
  Buf<uint16_t> cache16(pool_e4m3 ? stray : cache_elems);
  Buf<uint8_t> cache8(pool_e4m3 ? cache_elems : stray);
  {
    tvfuzz::Rng rng{fill_seed};
    for (size_t e = 0; e < cache16.size(); ++e) {
      const size_t r = e / kQKDim, c = e % kQKDim;
      cache16[e] = c == 0   ? static_cast<uint16_t>(r)
                   : c == 1 ? static_cast<uint16_t>(r >> 16)
                            : static_cast<uint16_t>(rng.next());
    }
    for (size_t e = 0; e < cache8.size(); ++e) {
      const size_t r = e / kQKDim, c = e % kQKDim;
      cache8[e] = c < 3 ? static_cast<uint8_t>(r >> (8 * c)) : static_cast<uint8_t>(rng.next());
    }
  }
  const std::vector<uint16_t> before16(cache16.data(), cache16.data() + cache16.size());
  const std::vector<uint8_t> before8(cache8.data(), cache8.data() + cache8.size());
  auto caches_unchanged = [&] {
    return tvfuzz::same_bytes(before16.data(), cache16.data(), cache16.size() * 2) &&
           tvfuzz::same_bytes(before8.data(), cache8.data(), cache8.size());
  };

  const Buf<int32_t> qo_b(qo), parents_b(parents), kv_b(kv_len), kpi_b(kpi), kpidx_b(kpidx),
      si_b(si), slots_b(slots);
  AcceptedPaths accepted{.indptr = ai, .nodes = an, .bonus_tokens = std::vector<int32_t>(B, 0)};
  const PagedKvCommit args{.page_size = ps,
                           .kv_cache = cache16.span(),
                           .kv_page_indptr = kpi_b.cspan(),
                           .kv_page_indices = kpidx_b.cspan(),
                           .kv_len = kv_b.cspan(),
                           .qo_indptr = qo_b.cspan(),
                           .parents = parents_b.cspan(),
                           .kv_format = format,
                           .kv_cache_e4m3 = cache8.span()};

  const bool common = paths_ok(qo, parents, kv_len, ai, an);
  // pages_ok once per pool size: both commits usually ask for the same one, and it walks 2^24
  // entries for a large kv_len.
  int64_t checked_pages = -1;
  bool checked_ok = false;
  auto pages_ok_for = [&](int64_t num_pages) {
    if (num_pages != checked_pages) {
      checked_ok = pages_ok(ps, qo, kv_len, kpi, kpidx, num_pages);
      checked_pages = num_pages;
    }
    return checked_ok;
  };
  const int32_t nb = common ? static_cast<int32_t>(qo.size()) - 1 : 0;  // requests after mutation
  if (common) tvfuzz::Stats::count(1);

  // commit_kv_paged: the pool in the format's span, the other span empty, whole pages.
  {
    const bool spans_ok = e4m3 ? cache16.size() == 0 : cache8.size() == 0;
    const int64_t pool_elems = static_cast<int64_t>(e4m3 ? cache8.size() : cache16.size());
    const bool whole_pages = is_valid_page_size(ps) && pool_elems % (int64_t{ps} * kQKDim) == 0;
    const int64_t num_pages = whole_pages ? pool_elems / (int64_t{ps} * kQKDim) : 0;
    const bool want = format_ok && spans_ok && whole_pages && common && pages_ok_for(num_pages);
    std::vector<int32_t> new_kv_len = {-8};
    const Status s = commit_kv_paged(args, accepted, &new_kv_len);
    FUZZ_CHECK(s.ok() == want, "commit_kv_paged (kv_format %d): %s, but the input is %s",
               static_cast<int32_t>(format), s.to_string().c_str(), want ? "valid" : "invalid");
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(caches_unchanged(), "failed commit_kv_paged changed the KV cache");
      FUZZ_CHECK(new_kv_len == std::vector<int32_t>({-8}),
                 "failed commit_kv_paged wrote new_kv_len");
    } else {
      tvfuzz::Stats::count(e4m3 ? 5 : 2);
      if (huge) tvfuzz::Stats::count(7);
      // The expected pool, as bytes: rows of 1152 (16-bit) or 576 (e4m3) bytes moved whole, so
      // an e4m3 commit leaves the same encoded bytes the reference move of those rows does.
      const size_t row_bytes = static_cast<size_t>(kv_row_bytes(format, DType::kBF16));
      const uint8_t* const got = e4m3 ? cache8.data() : reinterpret_cast<uint8_t*>(cache16.data());
      const uint8_t* const old =
          e4m3 ? before8.data() : reinterpret_cast<const uint8_t*>(before16.data());
      const size_t pool_bytes = static_cast<size_t>(pool_elems) * (e4m3 ? 1 : 2);
      std::vector<uint8_t> expected(old, old + pool_bytes);
      for (int32_t b = 0; b < nb; ++b) {
        const int32_t T = qo[b + 1] - qo[b], L = kv_len[b] - T;
        auto row = [&](int32_t pos) {
          return (int64_t{kpidx[kpi[b] + pos / ps]} * ps + pos % ps) * row_bytes;
        };
        for (int32_t k = 0; k < ai[b + 1] - ai[b]; ++k) {
          std::memcpy(&expected[row(L + k)], &old[row(L + an[ai[b] + k])], row_bytes);
        }
        const int32_t want_len = T == 0 ? kv_len[b] : L + ai[b + 1] - ai[b];
        FUZZ_CHECK(new_kv_len.size() == size_t(nb) && new_kv_len[b] == want_len,
                   "request %d: new kv_len %d, want %d", b,
                   b < int32_t(new_kv_len.size()) ? new_kv_len[b] : -1, want_len);
      }
      if (!tvfuzz::same_bytes(expected.data(), got, pool_bytes)) {
        size_t i = 0;
        while (got[i] == expected[i]) ++i;
        FUZZ_CHECK(false, "%s pool byte %zu (row %zu): %u, want %u", e4m3 ? "e4m3" : "16-bit", i,
                   i / row_bytes, got[i], expected[i]);
      }
    }
  }

  // commit_kv_paged_cuda: the same validation against device.num_pages (the host spans are not
  // read, whatever the format), then kUnsupported. Skipped for a large kv_len against the
  // host's own pool size, where it would only repeat the host commit's 2^24-entry walk.
  if (!huge || device_pages != pool) {
    const std::vector<uint16_t> now16(cache16.data(), cache16.data() + cache16.size());
    const std::vector<uint8_t> now8(cache8.data(), cache8.data() + cache8.size());
    PagedKvCommitDevice dev;
    dev.num_pages = device_pages;
    const bool want = dev.num_pages >= 0 && format_ok && common && pages_ok_for(dev.num_pages);
    std::vector<int32_t> new_kv_len = {-8};
    ASAN_POISON_MEMORY_REGION(cache16.data(), cache16.size() * 2);
    ASAN_POISON_MEMORY_REGION(cache8.data(), cache8.size());
    const Status s = commit_kv_paged_cuda(args, accepted, dev, &new_kv_len);
    ASAN_UNPOISON_MEMORY_REGION(cache16.data(), cache16.size() * 2);
    ASAN_UNPOISON_MEMORY_REGION(cache8.data(), cache8.size());
    FUZZ_CHECK(s.code() == (want ? StatusCode::kUnsupported : StatusCode::kInvalidArgument),
               "commit_kv_paged_cuda (kv_format %d): %s, but the input is %s",
               static_cast<int32_t>(format), s.to_string().c_str(), want ? "valid" : "invalid");
    FUZZ_CHECK_NAMED_ERROR(s);
    if (want) tvfuzz::Stats::count(3);
    FUZZ_CHECK(new_kv_len == std::vector<int32_t>({-8}),
               "failed commit_kv_paged_cuda wrote new_kv_len");
    FUZZ_CHECK(tvfuzz::same_bytes(now16.data(), cache16.data(), cache16.size() * 2) &&
                   tvfuzz::same_bytes(now8.data(), cache8.data(), cache8.size()),
               "commit_kv_paged_cuda changed the host cache");
  }

  // commit_slots
  {
    const bool want = common && slots_ok(qo, kv_len, si, slots);
    SlotCommitResult got{.slot_indptr = {-6}, .slots = {}, .kv_len = {}, .freed_slots = {}};
    const Status s = commit_slots(si_b.cspan(), slots_b.cspan(), kv_b.cspan(), qo_b.cspan(),
                                  parents_b.cspan(), accepted, &got);
    FUZZ_CHECK(s.ok() == want, "commit_slots: %s, but the input is %s", s.to_string().c_str(),
               want ? "valid" : "invalid");
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(got.slot_indptr == std::vector<int32_t>({-6}) && got.slots.empty() &&
                     got.kv_len.empty() && got.freed_slots.empty(),
                 "failed commit_slots wrote its result");
    } else {
      tvfuzz::Stats::count(4);
      SlotCommitResult want_r{.slot_indptr = {0}, .slots = {}, .kv_len = {}, .freed_slots = {}};
      for (int32_t b = 0; b < nb; ++b) {
        const int32_t T = qo[b + 1] - qo[b], L = kv_len[b] - T;
        std::vector<uint8_t> kept(T, 0);
        for (int32_t k = 0; k < L; ++k) want_r.slots.push_back(slots[si[b] + k]);
        for (int32_t k = ai[b]; k < ai[b + 1]; ++k) {
          want_r.slots.push_back(slots[si[b] + L + an[k]]);
          kept[an[k]] = 1;
        }
        for (int32_t i = 0; i < T; ++i) {
          if (!kept[i]) want_r.freed_slots.push_back(slots[si[b] + L + i]);
        }
        want_r.kv_len.push_back(L + ai[b + 1] - ai[b]);
        want_r.slot_indptr.push_back(static_cast<int32_t>(want_r.slots.size()));
      }
      FUZZ_CHECK(got.slot_indptr == want_r.slot_indptr && got.slots == want_r.slots &&
                     got.kv_len == want_r.kv_len && got.freed_slots == want_r.freed_slots,
                 "commit_slots: wrong result");
    }
  }
  return 0;
}

}  // namespace

FUZZ_ENTRY(body)
