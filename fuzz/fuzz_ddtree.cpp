// fuzz_ddtree: DDTree building and acceptance (include/treeverify/ddtree.h): build_tree,
// build_trees, verify_greedy, verify_sampling.
//
// Feeds: up to 3 drafts (DraftTopK) with input-chosen depth, top_k and root token (negative and
// huge values included), log-prob rows either valid (sorted, <= 0, ties, -inf tails) or raw
// floats (NaN, +-inf, positive, unsorted), then a few cells set to positive values at and past
// the rounding of 0 (kLogProbRounding), token ids distinct or raw (duplicates, negatives),
// spans one entry short or long, and budgets in [1, 1024] or outside. Then the acceptance of a
// tree, the one just built or an arbitrary (possibly invalid) one: tokens, target argmax per node,
// and for sampling a vocabulary size, target and draft distributions (zeros, NaN, inf,
// negative values, wrong sizes), a scheme (the three and unknown values), a seed or a null rng.
// Every span is an exact-size heap copy, so ASan sees a read one past its end.
//
// Asserts:
//  - build_tree succeeds exactly when the draft meets ddtree.h's contract (checked
//    independently, a log-prob in (0, kLogProbRounding] read as 0); its tree is exactly the first
//    budget - 1 prefixes of the documented order (score descending, accumulated in double from the
//    shallowest depth, ties by candidate-index sequence) when that order is small enough to
//    enumerate here, and otherwise still a valid tree of at most budget nodes with consistent
//    depths and scores non-increasing in node order.
//  - build_trees succeeds exactly when every draft does and the budgets match, and then equals
//    the build_tree results concatenated.
//  - verify_greedy succeeds exactly on valid trees with matching sizes and returns the greedy walk
//    (first child in node order whose token is the target's argmax) and its bonus token.
//  - verify_sampling fails on every contract violation; on valid input it succeeds or (sampled
//    schemes only) names draft_probs for a child the draft could not have drawn; its paths go root
//    down parent -> child, its bonus tokens have positive target probability at the last node,
//    and the same seed gives the same result.
//  - errors carry a message, never kInternal; failed calls leave their outputs unchanged.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "fuzz_common.h"
#include "treeverify/ddtree.h"
#include "treeverify/tree.h"

namespace {

using namespace treeverify;
using tvfuzz::Buf;
using tvfuzz::Input;

constexpr size_t kMaxEnumerated = 3000;  // prefixes enumerated for the exact build_tree oracle
constexpr int64_t kMaxProbCells = 16384;

struct Draft {
  int32_t depth = 0, top_k = 0, root = 0;
  std::vector<float> lp;
  std::vector<int32_t> ids;
  Buf<float> lp_buf;
  Buf<int32_t> ids_buf;
  DraftTopK view() const {
    return {.depth = depth,
            .top_k = top_k,
            .log_probs = lp_buf.cspan(),
            .token_ids = ids_buf.cspan(),
            .root_token = root};
  }
};

// ddtree.h: a log-prob in (0, kLogProbRounding] is read as 0.
float as_read(float v) { return v > 0.f && v <= kLogProbRounding ? 0.f : v; }

bool draft_valid(const Draft& d, int32_t budget) {
  if (budget < 1 || budget > kMaxDraftBudget || d.depth < 0 || d.top_k < 1 || d.root < 0)
    return false;
  const int64_t cells = int64_t{d.depth} * d.top_k;
  if (static_cast<int64_t>(d.lp.size()) != cells || static_cast<int64_t>(d.ids.size()) != cells)
    return false;
  for (int32_t r = 0; r < d.depth; ++r) {
    std::vector<int32_t> present;
    for (int32_t c = 0; c < d.top_k; ++c) {
      const float v = as_read(d.lp[size_t(r) * d.top_k + c]);
      if (!(v <= 0.f)) return false;
      if (c > 0 && !(v <= as_read(d.lp[size_t(r) * d.top_k + c - 1]))) return false;
      if (v == -INFINITY) continue;
      const int32_t id = d.ids[size_t(r) * d.top_k + c];
      if (id < 0) return false;
      present.push_back(id);
    }
    std::sort(present.begin(), present.end());
    if (std::adjacent_find(present.begin(), present.end()) != present.end()) return false;
  }
  return true;
}

struct Prefix {
  double score;
  std::vector<int32_t> idx;  // candidate index per depth
  int32_t node = -1;         // tree node, once placed
};

// All prefixes with a finite score, or false when there are more than kMaxEnumerated.
bool enumerate(const Draft& d, std::vector<Prefix>* out) {
  std::vector<int32_t> present(d.depth);
  for (int32_t r = 0; r < d.depth; ++r) {
    int32_t n = 0;
    while (n < d.top_k && d.lp[size_t(r) * d.top_k + n] != -INFINITY) ++n;
    present[r] = n;
  }
  out->clear();
  std::vector<Prefix> frontier = {Prefix{0.0, {}}};
  for (int32_t r = 0; r < d.depth && !frontier.empty(); ++r) {
    std::vector<Prefix> next;
    for (const Prefix& p : frontier) {
      for (int32_t c = 0; c < present[r]; ++c) {
        Prefix q{p.score + as_read(d.lp[size_t(r) * d.top_k + c]), p.idx};
        q.idx.push_back(c);
        next.push_back(std::move(q));
        if (out->size() + next.size() > kMaxEnumerated) return false;
      }
    }
    out->insert(out->end(), next.begin(), next.end());
    frontier = std::move(next);
  }
  return true;
}

void check_tree(const Draft& d, int32_t budget, const DraftTree& t) {
  const size_t T = t.parents.size();
  FUZZ_CHECK(T >= 1 && T <= size_t(budget), "tree of %zu nodes, budget %d", T, budget);
  FUZZ_CHECK(t.tokens.size() == T && t.depths.size() == T && t.scores.size() == T,
             "tree arrays of different sizes");
  FUZZ_CHECK(t.parents[0] == -1 && t.tokens[0] == d.root && t.depths[0] == 0 && t.scores[0] == 0,
             "bad root");
  const int32_t indptr[2] = {0, static_cast<int32_t>(T)};
  FUZZ_CHECK(validate_trees(indptr, t.parents).ok(), "build_tree made an invalid tree");
  for (size_t i = 1; i < T; ++i) {
    FUZZ_CHECK(t.depths[i] == t.depths[t.parents[i]] + 1 && t.depths[i] <= d.depth,
               "node %zu: depth %d", i, t.depths[i]);
    FUZZ_CHECK(t.scores[i] <= t.scores[i - 1], "node %zu: score %g after %g", i, t.scores[i],
               t.scores[i - 1]);
  }
  std::vector<Prefix> all;
  if (!enumerate(d, &all)) return;
  tvfuzz::Stats::count(2);
  std::stable_sort(all.begin(), all.end(), [](const Prefix& a, const Prefix& b) {
    if (a.score != b.score) return a.score > b.score;
    return std::lexicographical_compare(a.idx.begin(), a.idx.end(), b.idx.begin(), b.idx.end());
  });
  const size_t want = 1 + std::min(all.size(), size_t(budget) - 1);
  FUZZ_CHECK(T == want, "tree of %zu nodes, want %zu", T, want);
  for (size_t i = 1; i < T; ++i) {
    Prefix& p = all[i - 1];
    p.node = static_cast<int32_t>(i);
    const int32_t depth = static_cast<int32_t>(p.idx.size());
    int32_t parent = 0;
    if (depth > 1) {  // the prefix one shorter, placed earlier
      for (size_t j = 0; j + 1 < i; ++j) {
        if (all[j].idx.size() + 1 == p.idx.size() &&
            std::equal(all[j].idx.begin(), all[j].idx.end(), p.idx.begin())) {
          parent = all[j].node;
          break;
        }
      }
      FUZZ_CHECK(parent > 0, "node %zu: its prefix is not in the tree", i);
    }
    const int32_t token = d.ids[size_t(depth - 1) * d.top_k + p.idx.back()];
    FUZZ_CHECK(t.parents[i] == parent && t.depths[i] == depth && t.tokens[i] == token &&
                   t.scores[i] == p.score,
               "node %zu: (parent %d, depth %d, token %d, score %.17g), want (%d, %d, %d, %.17g)",
               i, t.parents[i], t.depths[i], t.tokens[i], t.scores[i], parent, depth, token,
               p.score);
  }
}

void decode_draft(Input& in, Draft* d, int32_t* budget) {
  uint8_t v = in.u8();
  d->depth = v < 230 ? v % 6 : in.pick<int32_t>({-1, 0, 30, 200});
  v = in.u8();
  d->top_k = v < 230 ? 1 + v % 5 : in.pick<int32_t>({0, -1, 16, 64});
  v = in.u8();
  d->root = v < 240 ? v % 8 : in.pick<int32_t>({-1, tvfuzz::kI32Min, tvfuzz::kI32Max});
  const int64_t cells = d->depth > 0 && d->top_k > 0 ? int64_t{d->depth} * d->top_k : 0;
  v = in.u8();
  if (v < 200) {  // valid rows: non-increasing, ties, then an absent (-inf) tail
    for (int32_t r = 0; r < (cells ? d->depth : 0); ++r) {
      float x = 0.f;
      bool absent = false;
      for (int32_t c = 0; c < d->top_k; ++c) {
        const uint8_t step = in.u8();
        absent = absent || step >= 240;
        x -= step / 32.f;
        d->lp.push_back(absent ? -INFINITY : x);
      }
    }
  } else {
    for (int64_t c = 0; c < cells; ++c) {
      const uint8_t k = in.u8();
      d->lp.push_back(k < 128 ? -(in.u8() / 16.f) : k < 192 ? tvfuzz::special_float(in) : in.f32());
    }
  }
  v = in.u8();
  if (v < 200) {
    const int32_t base = in.u8(), stride = 1 + in.u8() % 3;
    for (int64_t c = 0; c < cells; ++c)
      d->ids.push_back(base + static_cast<int32_t>(c % d->top_k) * stride);
  } else {
    for (int64_t c = 0; c < cells; ++c) d->ids.push_back(static_cast<int8_t>(in.u8()));
  }
  v = in.u8();
  if (v >= 240) {
    switch (v % 4) {
      case 0:
        if (!d->lp.empty()) d->lp.pop_back();
        break;
      case 1:
        if (!d->ids.empty()) d->ids.pop_back();
        break;
      case 2:
        d->lp.push_back(-1.f);
        break;
      default:
        d->ids.push_back(1000);
        break;
    }
  }
  v = in.u8();
  *budget = v < 200   ? 1 + v % 40
            : v < 230 ? 1 + in.u16() % 1024
                      : in.pick<int32_t>({0, -1, 1024, 1025, tvfuzz::kI32Max, tvfuzz::kI32Min});
  // Read last, so inputs written before it decode as they did: from 192, a few log-probs set to
  // small positive values, the rounding of log(1) = 0 (read as 0) or just past it (an error).
  v = in.u8();
  for (int k = v < 192 ? 0 : 1 + v % 3; k > 0 && !d->lp.empty(); --k) {
    const size_t cell = in.u8() % d->lp.size();
    d->lp[cell] =
        in.pick<float>({1.1e-16f, 1e-7f, kLogProbRounding, std::nextafter(kLogProbRounding, 1.f),
                        1e-3f, std::numeric_limits<float>::denorm_min()});
  }
  d->lp_buf = Buf<float>(d->lp);
  d->ids_buf = Buf<int32_t>(d->ids);
}

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

bool dist_ok(const std::vector<float>& probs, size_t rows, int32_t V) {
  if (static_cast<int64_t>(probs.size()) != static_cast<int64_t>(rows) * V) return false;
  for (size_t r = 0; r < rows; ++r) {
    double total = 0;
    for (int32_t t = 0; t < V; ++t) {
      const float v = probs[r * V + t];
      if (!std::isfinite(v) || v < 0.f) return false;
      total += v;
    }
    if (!(total > 0)) return false;
  }
  return true;
}

bool same(const AcceptedPaths& a, const AcceptedPaths& b) {
  return a.indptr == b.indptr && a.nodes == b.nodes && a.bonus_tokens == b.bonus_tokens;
}

const AcceptedPaths kMarker{.indptr = {-3}, .nodes = {-4}, .bonus_tokens = {-5}};

// Paths of valid shape for these trees: root first, each node a child of the one before.
void check_paths(const std::vector<int32_t>& qo, const std::vector<int32_t>& parents,
                 const AcceptedPaths& a) {
  const size_t B = qo.size() - 1;
  FUZZ_CHECK(a.indptr.size() == B + 1 && a.indptr[0] == 0 && a.bonus_tokens.size() == B &&
                 a.indptr[B] == static_cast<int64_t>(a.nodes.size()),
             "malformed AcceptedPaths");
  for (size_t b = 0; b < B; ++b) {
    const int32_t T = qo[b + 1] - qo[b];
    const int64_t n = int64_t{a.indptr[b + 1]} - a.indptr[b];
    FUZZ_CHECK(T == 0 ? n == 0 && a.bonus_tokens[b] == -1 : n >= 1 && n <= T,
               "request %zu: path of %lld nodes in a tree of %d", b, (long long)n, T);
    for (int32_t k = 0; k < n; ++k) {
      const int32_t node = a.nodes[a.indptr[b] + k];
      FUZZ_CHECK(node >= 0 && node < T, "request %zu step %d: node %d", b, k, node);
      FUZZ_CHECK(parents[qo[b] + node] == (k == 0 ? -1 : a.nodes[a.indptr[b] + k - 1]),
                 "request %zu step %d: node %d is not a child of the previous one", b, k, node);
    }
  }
}

// Stats slots (TREEVERIFY_FUZZ_STATS=1): 0 inputs, 1 build_tree ok, 2 checked against the
// enumerated order, 3 build_trees ok, 4 verify_greedy ok, 5 verify_sampling ok, 6 verify_sampling
// refused a child of draft probability 0.
int body(const uint8_t* data, size_t size) {
  Input in(data, size);
  tvfuzz::Stats::count(0);

  // ---- build_tree / build_trees -------------------------------------------------------------
  const int nreq = in.u8() % 4;
  std::vector<std::unique_ptr<Draft>> drafts;
  std::vector<int32_t> budgets;
  for (int r = 0; r < nreq; ++r) {
    drafts.push_back(std::make_unique<Draft>());
    int32_t budget;
    decode_draft(in, drafts.back().get(), &budget);
    budgets.push_back(budget);
  }
  bool all_valid = true;
  std::vector<DraftTree> trees;
  for (int r = 0; r < nreq; ++r) {
    const Draft& d = *drafts[r];
    const bool want = draft_valid(d, budgets[r]);
    all_valid = all_valid && want;
    DraftTree t{.parents = {-9}, .tokens = {}, .depths = {}, .scores = {}};
    const Status s = build_tree(d.view(), budgets[r], &t);
    FUZZ_CHECK(s.ok() == want, "build_tree: %s, but the draft is %s", s.to_string().c_str(),
               want ? "valid" : "invalid");
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(t.parents == std::vector<int32_t>({-9}) && t.tokens.empty(),
                 "failed build_tree wrote the tree");
    } else {
      tvfuzz::Stats::count(1);
      check_tree(d, budgets[r], t);
      trees.push_back(std::move(t));
    }
  }
  {
    const uint8_t v = in.u8();
    if (v >= 240) {
      if (v & 1)
        budgets.push_back(1);
      else if (!budgets.empty())
        budgets.pop_back();
    }
  }
  std::vector<DraftTopK> views;
  for (const auto& d : drafts) views.push_back(d->view());
  const Buf<int32_t> budgets_buf(budgets);
  DraftTreeBatch batch{.qo_indptr = {-2}};
  const Status sb = build_trees(views, budgets_buf.cspan(), &batch);
  const bool batch_want = all_valid && budgets.size() == drafts.size();
  FUZZ_CHECK(sb.ok() == batch_want, "build_trees: %s", sb.to_string().c_str());
  if (!sb.ok()) {
    FUZZ_CHECK_NAMED_ERROR(sb);
    FUZZ_CHECK(batch.qo_indptr == std::vector<int32_t>({-2}) && batch.parents.empty(),
               "failed build_trees wrote the batch");
  } else {
    tvfuzz::Stats::count(3);
    DraftTreeBatch want{.qo_indptr = {0}};
    for (const DraftTree& t : trees) {
      want.parents.insert(want.parents.end(), t.parents.begin(), t.parents.end());
      want.tokens.insert(want.tokens.end(), t.tokens.begin(), t.tokens.end());
      want.depths.insert(want.depths.end(), t.depths.begin(), t.depths.end());
      want.scores.insert(want.scores.end(), t.scores.begin(), t.scores.end());
      want.qo_indptr.push_back(static_cast<int32_t>(want.parents.size()));
    }
    FUZZ_CHECK(batch.qo_indptr == want.qo_indptr && batch.parents == want.parents &&
                   batch.tokens == want.tokens && batch.depths == want.depths &&
                   batch.scores == want.scores,
               "build_trees differs from build_tree");
  }

  // ---- acceptance ---------------------------------------------------------------------------
  std::vector<int32_t> qo, parents, tokens;
  if (in.u8() < 160 && sb.ok()) {
    qo = batch.qo_indptr, parents = batch.parents, tokens = batch.tokens;
  } else {
    qo = {0};
    const int B = in.u8() % 4;
    for (int b = 0; b < B; ++b) {
      const uint8_t v = in.u8();
      const int32_t T = v < 240 ? v % 8 : in.pick<int32_t>({0, 40});
      for (int32_t i = 0; i < T; ++i) {
        parents.push_back(i == 0 ? -1 : in.u8() % i);
        tokens.push_back(in.u8() % 8);
      }
      qo.push_back(qo.back() + T);
    }
    tvfuzz::mutate_arrays(in, {&qo, &parents, &tokens}, 4, /*may_resize=*/true);
  }
  uint8_t v = in.u8();
  const int32_t V = v < 230 ? 1 + v % 8 : in.pick<int32_t>({0, -1, 1000});
  if (in.flag() && V >= 1) {
    for (int32_t& t : tokens) t = ((t % V) + V) % V;
  }
  const size_t n = parents.size();
  std::vector<int32_t> argmax;
  for (size_t i = 0; i < tokens.size(); ++i) argmax.push_back(in.u8() % (V >= 1 ? V + 1 : 8));
  v = in.u8();
  if (v >= 240) {
    if (v & 1)
      argmax.push_back(0);
    else if (!argmax.empty())
      argmax.pop_back();
  }
  const bool valid_trees = trees_ok(qo, parents);
  const Buf<int32_t> qo_buf(qo), parents_buf(parents), tokens_buf(tokens), argmax_buf(argmax);

  // verify_greedy
  {
    AcceptedPaths got = kMarker;
    const Status s = verify_greedy(qo_buf.cspan(), parents_buf.cspan(), tokens_buf.cspan(),
                                   argmax_buf.cspan(), &got);
    const bool want = valid_trees && tokens.size() == n && argmax.size() == n;
    FUZZ_CHECK(s.ok() == want, "verify_greedy: %s", s.to_string().c_str());
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(same(got, kMarker), "failed verify_greedy wrote its output");
    } else {
      tvfuzz::Stats::count(4);
      check_paths(qo, parents, got);
      for (size_t b = 0; b + 1 < qo.size(); ++b) {
        const int32_t begin = qo[b], T = qo[b + 1] - begin;
        if (T == 0) continue;
        std::vector<int32_t> path = {0};
        for (;;) {
          int32_t next = -1;
          for (int32_t c = path.back() + 1; c < T && next < 0; ++c) {
            if (parents[begin + c] == path.back() &&
                tokens[begin + c] == argmax[begin + path.back()])
              next = c;
          }
          if (next < 0) break;
          path.push_back(next);
        }
        FUZZ_CHECK(std::equal(path.begin(), path.end(), got.nodes.begin() + got.indptr[b],
                              got.nodes.begin() + got.indptr[b + 1]) &&
                       int64_t(path.size()) == got.indptr[b + 1] - got.indptr[b],
                   "request %zu: not the greedy path", b);
        FUZZ_CHECK(got.bonus_tokens[b] == argmax[begin + path.back()], "request %zu: bonus %d", b,
                   got.bonus_tokens[b]);
      }
    }
  }

  // verify_sampling
  if (V < 1 || static_cast<int64_t>(n) * V <= kMaxProbCells) {
    const int32_t cells = V >= 1 ? static_cast<int32_t>(n) * V : 0;
    std::vector<float> target, draft;
    for (int32_t c = 0; c < cells; ++c) {
      const uint8_t x = in.u8();
      target.push_back(x < 240 ? (x % 16) * 0.125f : tvfuzz::special_float(in));
    }
    for (int32_t c = 0; c < cells; ++c) {
      const uint8_t x = in.u8();
      draft.push_back(x < 240 ? (x % 16) * 0.125f : tvfuzz::special_float(in));
    }
    v = in.u8();
    if (v >= 240) {
      switch (v % 4) {
        case 0:
          if (!target.empty()) target.pop_back();
          break;
        case 1:
          if (!draft.empty()) draft.pop_back();
          break;
        case 2:
          target.push_back(0.5f);
          break;
        default:
          draft.clear();
          break;
      }
    }
    v = in.u8();
    const auto scheme = static_cast<DraftScheme>(v % 4 < 3 ? v % 4 : in.i32());
    const uint64_t seed = in.u64();
    const bool null_rng = in.u8() >= 250;
    const Buf<float> target_buf(target), draft_buf(draft);
    const SamplingInputs inputs{.vocab_size = V,
                                .target_probs = target_buf.cspan(),
                                .draft_probs = draft_buf.cspan(),
                                .scheme = scheme};
    const bool det = scheme == DraftScheme::kDeterministic;
    const bool known_scheme = det || scheme == DraftScheme::kSampledWithReplacement ||
                              scheme == DraftScheme::kSampledWithoutReplacement;
    bool tokens_in_range = true;
    for (int32_t t : tokens) tokens_in_range = tokens_in_range && t >= 0 && t < V;
    const bool pre = valid_trees && tokens.size() == n && !null_rng && V >= 1 && known_scheme &&
                     tokens_in_range && dist_ok(target, n, V) && (det || dist_ok(draft, n, V));

    std::mt19937_64 rng(seed);
    AcceptedPaths got = kMarker;
    const Status s = verify_sampling(qo_buf.cspan(), parents_buf.cspan(), tokens_buf.cspan(),
                                     inputs, null_rng ? nullptr : &rng, &got);
    if (!pre) {
      FUZZ_CHECK(!s.ok(), "verify_sampling accepted invalid input");
    } else if (!s.ok()) {
      tvfuzz::Stats::count(6);
      FUZZ_CHECK(!det && s.code() == StatusCode::kInvalidArgument &&
                     s.message().find("argument 'draft_probs'") != std::string::npos,
                 "verify_sampling on valid input: %s", s.to_string().c_str());
    }
    if (!s.ok()) {
      FUZZ_CHECK_NAMED_ERROR(s);
      FUZZ_CHECK(same(got, kMarker), "failed verify_sampling wrote its output");
    } else {
      tvfuzz::Stats::count(5);
      check_paths(qo, parents, got);
      for (size_t b = 0; b + 1 < qo.size(); ++b) {
        if (qo[b + 1] == qo[b]) continue;
        const int32_t last = got.nodes[got.indptr[b + 1] - 1], bonus = got.bonus_tokens[b];
        FUZZ_CHECK(bonus >= 0 && bonus < V, "request %zu: bonus %d, V = %d", b, bonus, V);
        FUZZ_CHECK(target[size_t(qo[b] + last) * V + bonus] > 0.f,
                   "request %zu: bonus %d has target probability 0 at node %d", b, bonus, last);
      }
      std::mt19937_64 rng2(seed);
      AcceptedPaths again;
      const Status s2 = verify_sampling(qo_buf.cspan(), parents_buf.cspan(), tokens_buf.cspan(),
                                        inputs, &rng2, &again);
      FUZZ_CHECK(s2.ok() && same(got, again), "verify_sampling is not reproducible for a seed");
    }
  }
  return 0;
}

}  // namespace

FUZZ_ENTRY(body)
