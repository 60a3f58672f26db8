// build_tree: best-first selection of the most probable draft prefixes (DDTree, arXiv
// 2604.12989) into a tree, see include/treeverify/ddtree.h for the contract.
#include <algorithm>
#include <cmath>
#include <queue>
#include <utility>
#include <vector>

#include "core/check.h"
#include "treeverify/ddtree.h"

namespace treeverify {
namespace {

// A log-probability as build_tree reads it: the rounding of log(1) above 0 is 0 (ddtree.h).
float read_log_prob(float v) { return v > 0.f && v <= kLogProbRounding ? 0.f : v; }

Status validate_draft(const DraftTopK& draft, int32_t budget) {
  TV_REQUIRE(budget >= 1 && budget <= kMaxDraftBudget, "budget", "budget = {}", budget);
  TV_REQUIRE(draft.depth >= 0, "depth", "L = {}", draft.depth);
  TV_REQUIRE(draft.top_k >= 1, "top_k", "K = {}", draft.top_k);
  TV_REQUIRE(draft.root_token >= 0, "root_token", "root_token = {}", draft.root_token);
  const size_t cells = static_cast<size_t>(draft.depth) * draft.top_k;
  TV_REQUIRE(draft.log_probs.size() == cells, "log_probs", "has {} entries, L * K = {}",
             draft.log_probs.size(), cells);
  TV_REQUIRE(draft.token_ids.size() == cells, "token_ids", "has {} entries, L * K = {}",
             draft.token_ids.size(), cells);
  std::vector<int32_t> present;
  for (int32_t d = 0; d < draft.depth; ++d) {
    const float* lp = &draft.log_probs[static_cast<size_t>(d) * draft.top_k];
    const int32_t* ids = &draft.token_ids[static_cast<size_t>(d) * draft.top_k];
    present.clear();
    for (int32_t c = 0; c < draft.top_k; ++c) {
      const float given = lp[c], v = read_log_prob(given);
      // Scores may only fall along a path (log-probs <= 0); that is what makes a prefix at
      // least as probable as its extensions, so best-first pops parents before children.
      TV_REQUIRE(v <= 0.f, "log_probs",
                 "depth {} candidate {}: log-prob = {} (positive past the rounding of 0, {})",
                 d + 1, c, given, kLogProbRounding);
      TV_REQUIRE(c == 0 || v <= read_log_prob(lp[c - 1]), "log_probs",
                 "depth {} candidate {}: {} after {} (rows must be sorted descending)", d + 1, c,
                 given, lp[c - 1]);
      if (v == -INFINITY) continue;
      TV_REQUIRE(ids[c] >= 0, "token_ids", "depth {} candidate {}: token id = {}", d + 1, c,
                 ids[c]);
      present.push_back(ids[c]);
    }
    std::sort(present.begin(), present.end());
    const auto dup = std::adjacent_find(present.begin(), present.end());
    TV_REQUIRE(dup == present.end(), "token_ids", "depth {}: token id {} appears twice", d + 1,
               dup == present.end() ? -1 : *dup);
  }
  return Status::Ok();
}

// A prefix waiting in the heap: candidate `index` of depth `depth` appended to tree node
// `parent` (which holds the first depth - 1 tokens).
struct Candidate {
  double score;
  int32_t parent;
  int32_t depth;
  int32_t index;
};

class BestFirst {
 public:
  BestFirst(const DraftTopK& draft, DraftTree* tree) : draft_(draft), tree_(tree) {}

  void run(int32_t budget) {
    tree_->parents = {-1};
    tree_->tokens = {draft_.root_token};
    tree_->depths = {0};
    tree_->scores = {0.0};
    index_ = {-1};
    push(0, 1, 0);
    while (static_cast<int32_t>(tree_->parents.size()) < budget && !heap_.empty()) {
      const Candidate best = heap_.top();
      heap_.pop();
      const int32_t node = static_cast<int32_t>(tree_->parents.size());
      tree_->parents.push_back(best.parent);
      tree_->tokens.push_back(token(best.depth, best.index));
      tree_->depths.push_back(best.depth);
      tree_->scores.push_back(best.score);
      index_.push_back(best.index);
      // The next sibling and the first child are the best not-yet-seen prefixes that this
      // one dominates (rows are sorted); every other unseen prefix is reached through them.
      push(best.parent, best.depth, best.index + 1);
      push(node, best.depth + 1, 0);
    }
  }

 private:
  float log_prob(int32_t depth, int32_t index) const {
    return read_log_prob(draft_.log_probs[static_cast<size_t>(depth - 1) * draft_.top_k + index]);
  }
  int32_t token(int32_t depth, int32_t index) const {
    return draft_.token_ids[static_cast<size_t>(depth - 1) * draft_.top_k + index];
  }

  void push(int32_t parent, int32_t depth, int32_t index) {
    if (depth > draft_.depth || index >= draft_.top_k) return;
    const float lp = log_prob(depth, index);
    if (lp == -INFINITY) return;  // absent candidate, and so is every later one in the row
    heap_.push(
        {.score = tree_->scores[parent] + lp, .parent = parent, .depth = depth, .index = index});
  }

  // Candidate-index sequence of a pending prefix, root side first.
  void path_of(const Candidate& c, std::vector<int32_t>* path) const {
    path->assign(c.depth, 0);
    (*path)[c.depth - 1] = c.index;
    for (int32_t n = c.parent, d = c.depth - 2; n > 0; n = tree_->parents[n], --d) {
      (*path)[d] = index_[n];
    }
  }

  // Heap order: "a below b" when a has a lower score, or an equal score and a
  // lexicographically larger index sequence (a proper prefix counts as smaller).
  bool below(const Candidate& a, const Candidate& b) const {
    if (a.score != b.score) return a.score < b.score;
    path_of(a, &scratch_a_);
    path_of(b, &scratch_b_);
    return std::lexicographical_compare(scratch_b_.begin(), scratch_b_.end(), scratch_a_.begin(),
                                        scratch_a_.end());
  }

  struct Below {
    const BestFirst* self;
    bool operator()(const Candidate& a, const Candidate& b) const { return self->below(a, b); }
  };

  const DraftTopK& draft_;
  DraftTree* tree_;
  std::vector<int32_t> index_;  // per tree node: its candidate index at its depth
  mutable std::vector<int32_t> scratch_a_, scratch_b_;
  std::priority_queue<Candidate, std::vector<Candidate>, Below> heap_{Below{this}};
};

}  // namespace

Status build_tree(const DraftTopK& draft, int32_t budget, DraftTree* tree) {
  TV_RETURN_IF_ERROR(validate_draft(draft, budget));
  DraftTree result;
  BestFirst(draft, &result).run(budget);
  *tree = std::move(result);
  return Status::Ok();
}

Status build_trees(std::span<const DraftTopK> drafts, std::span<const int32_t> budgets,
                   DraftTreeBatch* batch) {
  TV_REQUIRE(budgets.size() == drafts.size(), "budgets", "has {} entries for {} requests",
             budgets.size(), drafts.size());
  DraftTreeBatch result;
  result.qo_indptr.reserve(drafts.size() + 1);
  result.qo_indptr.push_back(0);
  DraftTree tree;
  for (size_t b = 0; b < drafts.size(); ++b) {
    Status s = build_tree(drafts[b], budgets[b], &tree);
    if (!s.ok()) return Status(s.code(), fmt::format("request {}: {}", b, s.message()));
    result.parents.insert(result.parents.end(), tree.parents.begin(), tree.parents.end());
    result.tokens.insert(result.tokens.end(), tree.tokens.begin(), tree.tokens.end());
    result.depths.insert(result.depths.end(), tree.depths.begin(), tree.depths.end());
    result.scores.insert(result.scores.end(), tree.scores.begin(), tree.scores.end());
    result.qo_indptr.push_back(static_cast<int32_t>(result.parents.size()));
  }
  *batch = std::move(result);
  return Status::Ok();
}

}  // namespace treeverify
