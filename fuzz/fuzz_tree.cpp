// fuzz_tree: the tree helpers of include/treeverify/tree.h: validate_trees, tree_depths,
// tree_positions, build_ancestor_mask, custom_mask_from_parents, parents_from_custom_mask.
//
// Feeds: a batch of trees (qo_indptr, parents) and kv_len built valid from the input (tree
// sizes up to 1025, random parents, prefix lengths up to 2^31 - 1 - T, negative kv_len), then
// damaged by input-chosen mutations, appended and truncated entries (the spans carry their
// lengths, so short spans are fair input); and a flat custom mask with its mask_indptr, either
// the tree's own mask with input-chosen bytes overwritten (0, 1, 2, 255) or raw input bytes.
// Every span is an exact-size heap copy, so ASan sees a read one past its end.
//
// Asserts:
//  - each helper succeeds exactly when its inputs meet tree.h's contract, as checked
//    independently here; errors carry a message and are never kInternal; a failed call leaves
//    its outputs as they were.
//  - results are right: depths (root 0, parent + 1), positions (L_b + depth), the ancestor mask
//    (words_per_row = ceil(max T_b / 32), bit j of row i set iff j is i or an ancestor, no bit
//    past T_b), the custom mask (prefix visible, tree part = ancestor mask) and its indptr.
//  - parents_from_custom_mask accepts exactly the tree masks (nonzero = visible, as for the
//    C++ bool it stands for) and returns their parents; the round trip
//    parents -> custom mask -> parents is the identity.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "treeverify/tree.h"
#include "treeverify/types.h"

namespace {

using namespace treeverify;
using tvfuzz::Buf;
using tvfuzz::Input;

constexpr int64_t kMaskCap = int64_t{1} << 16;  // custom masks built or passed, in bytes
constexpr size_t kMaxNodes = 4096;              // larger batches skip the quadratic checks

// The CSR contract of qo_indptr against `total` nodes.
bool indptr_ok(const std::vector<int32_t>& qo, int64_t total) {
  if (qo.empty() || qo[0] != 0) return false;
  for (size_t b = 0; b + 1 < qo.size(); ++b) {
    const int64_t t = int64_t{qo[b + 1]} - qo[b];
    if (t < 0 || t > kMaxTreeSize) return false;
  }
  return qo.back() == total;
}

bool trees_ok(const std::vector<int32_t>& qo, const std::vector<int32_t>& parents) {
  if (!indptr_ok(qo, static_cast<int64_t>(parents.size()))) return false;
  for (size_t b = 0; b + 1 < qo.size(); ++b) {
    for (int32_t i = 0; i < qo[b + 1] - qo[b]; ++i) {
      const int32_t p = parents[qo[b] + i];
      if (i == 0 ? p != -1 : (p < 0 || p >= i)) return false;
    }
  }
  return true;
}

bool kv_len_ok(const std::vector<int32_t>& qo, const std::vector<int32_t>& kv_len) {
  if (kv_len.size() + 1 != qo.size()) return false;
  for (size_t b = 0; b < kv_len.size(); ++b) {
    if (kv_len[b] < int64_t{qo[b + 1]} - qo[b]) return false;
  }
  return true;
}

// ancestors[r][j]: tree node j of r's request is r's node or one of its ancestors (valid trees).
std::vector<std::vector<uint8_t>> ancestor_sets(const std::vector<int32_t>& qo,
                                                const std::vector<int32_t>& parents) {
  std::vector<std::vector<uint8_t>> sets(parents.size());
  for (size_t b = 0; b + 1 < qo.size(); ++b) {
    const int32_t T = qo[b + 1] - qo[b];
    for (int32_t i = 0; i < T; ++i) {
      auto& s = sets[qo[b] + i];
      s = i == 0 ? std::vector<uint8_t>(T, 0) : sets[qo[b] + parents[qo[b] + i]];
      s[i] = 1;
    }
  }
  return sets;
}

// What parents_from_custom_mask must do, from the contract: the parents, or false (and in *why
// the first offending place).
bool parents_of_mask(const std::vector<int32_t>& qo, const std::vector<int32_t>& kv_len,
                     const std::vector<int32_t>& mi, const Buf<uint8_t>& mask,
                     std::vector<int32_t>* parents, std::string* why) {
  *why = "metadata";
  if (qo.empty() || !indptr_ok(qo, qo.back()) || !kv_len_ok(qo, kv_len)) return false;
  const size_t B = qo.size() - 1;
  if (mi.size() != B + 1 || mi[0] != 0) return false;
  for (size_t b = 0; b < B; ++b) {
    if (int64_t{mi[b + 1]} - mi[b] != int64_t{qo[b + 1] - qo[b]} * kv_len[b]) return false;
  }
  if (int64_t{mi[B]} > static_cast<int64_t>(mask.size())) return false;
  bool ok = true;
  parents->assign(qo.back(), 0);
  for (size_t b = 0; b < B && ok; ++b) {
    const int32_t T = qo[b + 1] - qo[b];
    const int64_t W = kv_len[b], L = W - T;
    const uint8_t* block = mask.data() + mi[b];
    for (int32_t i = 0; i < T && ok; ++i) {
      *why = "request " + std::to_string(b) + " row " + std::to_string(i);
      const uint8_t* row = block + i * W;
      const uint8_t* tree = row + L;
      for (int64_t c = 0; c < L && ok; ++c) ok = row[c] != 0;
      if (!ok) break;
      ok = tree[i] != 0;
      for (int32_t j = i + 1; j < T && ok; ++j) {
        ok = tree[j] == 0;
        if (!ok)
          *why +=
              " sees later node " + std::to_string(j) + " (value " + std::to_string(tree[j]) + ")";
      }
      int32_t parent = i - 1;
      while (parent >= 0 && tree[parent] == 0) --parent;
      if (!ok || (i > 0 && parent < 0)) {
        ok = false;
        break;
      }
      if (parent >= 0) {
        const uint8_t* ptree = block + parent * W + L;
        for (int32_t j = 0; j < parent && ok; ++j) ok = (tree[j] != 0) == (ptree[j] != 0);
      }
      (*parents)[qo[b] + i] = parent;
    }
  }
  return ok;
}

// Stats slots (TREEVERIFY_FUZZ_STATS=1): 0 inputs, 1 valid trees, 2 valid trees and kv_len,
// 3 parents_from_custom_mask ok, 4 round trip done.
int body(const uint8_t* data, size_t size) {
  Input in(data, size);
  tvfuzz::Stats::count(0);
  uint8_t v = in.u8();
  const int32_t B = v < 220 ? v % 6 : in.pick<int32_t>({30, 60});
  std::vector<int32_t> qo = {0}, parents, kv_len;
  for (int32_t b = 0; b < B; ++b) {
    v = in.u8();
    const int32_t T = v < 230 ? v % 10 : in.pick<int32_t>({0, 33, 64, 100, 1024, 1025});
    for (int32_t i = 0; i < T; ++i) parents.push_back(i == 0 ? -1 : in.u8() % i);
    qo.push_back(qo.back() + T);
  }
  for (int32_t b = 0; b < B; ++b) {
    const int32_t T = qo[b + 1] - qo[b];
    v = in.u8();
    const int64_t L =
        v < 230
            ? v % 6
            : in.pick<int64_t>({-1, int64_t{1} << 20, tvfuzz::kI32Max - T, int64_t{1} << 28, 5000});
    kv_len.push_back(static_cast<int32_t>(L + T));
  }
  tvfuzz::mutate_arrays(in, {&qo, &parents, &kv_len}, 6, /*may_resize=*/true);

  // The custom mask: its indptr from the (possibly damaged) trees, its bytes from the tree's
  // ancestors or the input.
  const bool valid_trees = trees_ok(qo, parents);
  const bool valid_kv = valid_trees && kv_len_ok(qo, kv_len);
  const size_t nreq = qo.empty() ? 0 : qo.size() - 1;
  std::vector<int32_t> mi = {0};
  int64_t mask_total = 0;
  for (size_t b = 0; b < nreq; ++b) {
    const int64_t block =
        b < kv_len.size() ? (int64_t{qo[b + 1]} - qo[b]) * kv_len[b] : 0;  // any value
    constexpr int64_t kBig = int64_t{1} << 42;  // valid blocks are below 2^41
    mask_total += std::clamp(block, -kBig, kBig);
    mi.push_back(static_cast<int32_t>(static_cast<uint32_t>(mask_total)));
  }
  std::vector<uint8_t> mask;
  const uint8_t mm = in.u8();
  if (mm < 128 && valid_kv && mask_total <= kMaskCap) {
    mask.assign(mask_total, 0);
    const auto sets = ancestor_sets(qo, parents);
    for (size_t b = 0; b < nreq; ++b) {
      const int32_t T = qo[b + 1] - qo[b];
      const int64_t W = kv_len[b], L = W - T;
      for (int32_t i = 0; i < T; ++i) {
        uint8_t* row = &mask[mi[b] + i * W];
        std::fill(row, row + L, 1);
        for (int32_t j = 0; j < T; ++j) row[L + j] = sets[qo[b] + i][j];
      }
    }
    for (int n = in.u8() % 4; n > 0 && !mask.empty(); --n) {
      const uint16_t pos = in.u16();
      mask[pos % mask.size()] = in.pick<uint8_t>({0, 1, 2, 255});
    }
  } else {
    mask.resize(in.u16() % 2048);
    for (uint8_t& m : mask) {
      const uint8_t x = in.u8();
      m = x < 250 ? x & 1 : x;
    }
  }
  tvfuzz::mutate_arrays(in, {&mi}, 2, /*may_resize=*/true);

  const Buf<int32_t> qo_buf(qo), parents_buf(parents), kv_buf(kv_len), mi_buf(mi);
  const Buf<uint8_t> mask_buf(mask);
  const bool small = parents.size() <= kMaxNodes;
  if (valid_trees) tvfuzz::Stats::count(1);
  if (valid_kv) tvfuzz::Stats::count(2);

  // validate_trees
  {
    const Status s = validate_trees(qo_buf.cspan(), parents_buf.cspan());
    FUZZ_CHECK(s.ok() == valid_trees, "validate_trees: %s", s.to_string().c_str());
    if (!s.ok()) FUZZ_CHECK_NAMED_ERROR(s);
  }
  // tree_depths
  std::vector<int32_t> depths = {-7, -7, -7};
  {
    const Status s = tree_depths(qo_buf.cspan(), parents_buf.cspan(), &depths);
    FUZZ_CHECK(s.ok() == valid_trees, "tree_depths: %s", s.to_string().c_str());
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(depths == std::vector<int32_t>({-7, -7, -7}), "failed tree_depths wrote depths");
    } else {
      FUZZ_CHECK(depths.size() == parents.size(), "depths has %zu entries", depths.size());
      for (size_t b = 0; b < nreq; ++b) {
        for (int32_t i = 0; i < qo[b + 1] - qo[b]; ++i) {
          const int32_t r = qo[b] + i;
          FUZZ_CHECK(depths[r] == (i == 0 ? 0 : depths[qo[b] + parents[r]] + 1),
                     "request %zu node %d: depth %d", b, i, depths[r]);
        }
      }
    }
  }
  // tree_positions
  {
    std::vector<int32_t> positions = {-9};
    const Status s =
        tree_positions(qo_buf.cspan(), kv_buf.cspan(), parents_buf.cspan(), &positions);
    FUZZ_CHECK(s.ok() == valid_kv, "tree_positions: %s", s.to_string().c_str());
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(positions == std::vector<int32_t>({-9}), "failed tree_positions wrote positions");
    } else {
      FUZZ_CHECK(positions.size() == parents.size(), "positions has %zu entries", positions.size());
      for (size_t b = 0; b < nreq; ++b) {
        const int32_t T = qo[b + 1] - qo[b];
        for (int32_t i = 0; i < T; ++i) {
          const int64_t want = int64_t{kv_len[b]} - T + depths[qo[b] + i];
          FUZZ_CHECK(positions[qo[b] + i] == want, "request %zu node %d: position %d, want %lld", b,
                     i, positions[qo[b] + i], (long long)want);
        }
      }
    }
  }
  // build_ancestor_mask
  {
    AncestorMask m{.words_per_row = -3, .words = {0xdeadu}};
    const Status s = build_ancestor_mask(qo_buf.cspan(), parents_buf.cspan(), &m);
    FUZZ_CHECK(s.ok() == valid_trees, "build_ancestor_mask: %s", s.to_string().c_str());
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(m.words_per_row == -3 && m.words == std::vector<uint32_t>({0xdeadu}),
                 "failed build_ancestor_mask wrote the mask");
    } else if (small) {
      int32_t max_t = 0;
      for (size_t b = 0; b < nreq; ++b) max_t = std::max(max_t, qo[b + 1] - qo[b]);
      FUZZ_CHECK(m.words_per_row == (max_t + 31) / 32, "words_per_row %d for max T %d",
                 m.words_per_row, max_t);
      FUZZ_CHECK(m.words.size() == parents.size() * m.words_per_row, "%zu words", m.words.size());
      const auto sets = ancestor_sets(qo, parents);
      for (size_t b = 0; b < nreq; ++b) {
        const int32_t T = qo[b + 1] - qo[b];
        for (int32_t i = 0; i < T; ++i) {
          const int64_t r = qo[b] + i;
          for (int32_t j = 0; j < m.words_per_row * 32; ++j) {
            const bool want = j < T && sets[r][j];
            FUZZ_CHECK(m.visible(r, j) == want, "request %zu row %d bit %d", b, i, j);
          }
        }
      }
    }
  }
  // custom_mask_from_parents: called when its result is small, or when it must fail before
  // allocating (invalid input, or more than INT32_MAX entries).
  std::vector<int32_t> built_mi = {-1};
  std::vector<uint8_t> built_mask = {7};
  bool built = false;
  if (!valid_kv || mask_total <= kMaskCap || mask_total > tvfuzz::kI32Max) {
    const Status s = custom_mask_from_parents(qo_buf.cspan(), kv_buf.cspan(), parents_buf.cspan(),
                                              &built_mi, &built_mask);
    const bool want = valid_kv && mask_total <= tvfuzz::kI32Max;
    FUZZ_CHECK(s.ok() == want, "custom_mask_from_parents: %s", s.to_string().c_str());
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(built_mi == std::vector<int32_t>({-1}) && built_mask == std::vector<uint8_t>({7}),
                 "failed custom_mask_from_parents wrote its outputs");
    } else {
      built = true;
      FUZZ_CHECK(built_mi.size() == nreq + 1 && built_mi[0] == 0, "mask_indptr size %zu",
                 built_mi.size());
      FUZZ_CHECK(static_cast<int64_t>(built_mask.size()) == mask_total, "mask has %zu entries",
                 built_mask.size());
      const auto sets = ancestor_sets(qo, parents);
      int64_t at = 0;
      for (size_t b = 0; b < nreq; ++b) {
        FUZZ_CHECK(built_mi[b] == at, "mask_indptr[%zu] = %d, want %lld", b, built_mi[b],
                   (long long)at);
        const int32_t T = qo[b + 1] - qo[b];
        const int64_t W = kv_len[b], L = W - T;
        for (int32_t i = 0; i < T; ++i) {
          for (int64_t c = 0; c < W; ++c) {
            const uint8_t want_bit = c < L ? 1 : sets[qo[b] + i][c - L];
            FUZZ_CHECK(built_mask[at + i * W + c] == want_bit, "request %zu row %d column %lld", b,
                       i, (long long)c);
          }
        }
        at += int64_t{T} * W;
      }
      FUZZ_CHECK(built_mi[nreq] == at, "mask_indptr[B] = %d", built_mi[nreq]);
    }
  }
  // parents_from_custom_mask on the input's mask
  {
    std::vector<int32_t> want_parents;
    std::string why;
    const bool want = parents_of_mask(qo, kv_len, mi, mask_buf, &want_parents, &why);
    std::vector<int32_t> got = {-5, -5};
    const Status s = parents_from_custom_mask(qo_buf.cspan(), kv_buf.cspan(), mi_buf.cspan(),
                                              mask_buf.cspan(), &got);
    FUZZ_CHECK(s.ok() == want, "parents_from_custom_mask: %s, but the mask %s a tree mask (%s)",
               s.to_string().c_str(), want ? "is" : "is not", want ? "" : why.c_str());
    if (s.ok()) FUZZ_CHECK(got == want_parents, "parents_from_custom_mask: wrong parents");
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(got == std::vector<int32_t>({-5, -5}),
                 "failed parents_from_custom_mask wrote parents");
    } else {
      FUZZ_CHECK(trees_ok(qo, got), "parents_from_custom_mask returned an invalid tree");
      tvfuzz::Stats::count(3);
    }
  }
  // Round trip.
  if (built) {
    const Buf<int32_t> bmi(built_mi);
    const Buf<uint8_t> bmask(built_mask);
    std::vector<int32_t> got;
    const Status s =
        parents_from_custom_mask(qo_buf.cspan(), kv_buf.cspan(), bmi.cspan(), bmask.cspan(), &got);
    FUZZ_CHECK(s.ok(), "round trip: %s", s.to_string().c_str());
    FUZZ_CHECK(got == parents, "round trip: parents differ");
    tvfuzz::Stats::count(4);
  }
  return 0;
}

}  // namespace

FUZZ_ENTRY(body)
