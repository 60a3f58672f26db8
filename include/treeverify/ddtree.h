// DDTree utilities (docs/DESIGN.md section 6): the host work of one speculative step around the
// verify call. build_tree turns the drafter's per-depth top-K into a draft tree, verify_greedy
// or verify_sampling picks the accepted path from the target's outputs at every node, and the
// KV commit moves the accepted nodes' KV rows so the next step sees a plain sequence.
//
// Conventions shared by every function here:
//  - Trees follow tree.h: request b owns nodes [qo_indptr[b], qo_indptr[b+1]) of the
//    concatenated arrays; indices inside a request are local (0 = the root, parent -1, and
//    parent[i] < i).
//  - The root is the token already known before the step (the bonus token of the previous
//    step, or the last prompt token): it is never drafted and never rejected. Tree node i sits
//    at sequence position L_b + depth(i), its KV row at L_b + i (node order), as in verify.h.
//  - The target's output "at node i" (its argmax or its distribution) is the prediction of the
//    token that follows node i, i.e. of the tokens of i's children.
//  - An accepted path is a list of local node indices from the root down: path[0] = 0 and
//    path[k] = parent of path[k+1]. It emits the tokens of path[1..] followed by the bonus
//    token, so a step emits path.size() tokens (at least 1). A request with T_b = 0 has an
//    empty path and bonus token -1 and is left alone by the commit.
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "treeverify/status.h"
#include "treeverify/types.h"

namespace treeverify {

// ---- build_tree ------------------------------------------------------------------------------

// The drafter's candidates for one request: for depth d = 1..L (row d - 1) the top-K
// log-probabilities of the d-th draft token and their token ids. Each row must be sorted in
// non-increasing order, every value is <= 0 (a log-probability) or -inf, and -inf marks an
// absent candidate (a vocabulary slice smaller than K), so -inf entries sit at the end of
// their row. A value in (0, kLogProbRounding] is the rounding of a certain token's log(1) = 0
// (log_softmax in float32 a few ulps above 0, or a float64 1.1e-16 handed over) and is read as
// 0, also for the order of its row; a larger one is an error, and so is NaN. Present
// candidates of one row have distinct, non-negative token ids; the ids of absent ones are
// ignored.
inline constexpr float kLogProbRounding = 0x1p-20f;  // 8 float32 ulps of 1: about 9.5e-7
struct DraftTopK {
  int32_t depth = 0;                   // L >= 0 (0: only the root)
  int32_t top_k = 0;                   // K >= 1
  std::span<const float> log_probs;    // [L, K] row-major
  std::span<const int32_t> token_ids;  // [L, K] row-major
  int32_t root_token = 0;              // the root's token, >= 0
};

// One request's tree. Node 0 is the root; nodes 1..T-1 are draft prefixes in the order they
// were selected (best first), which is a topological order (parent < child).
struct DraftTree {
  std::vector<int32_t> parents;  // [T], parents[0] = -1
  std::vector<int32_t> tokens;   // [T], tokens[0] = root_token
  std::vector<int32_t> depths;   // [T], depths[0] = 0
  std::vector<double> scores;    // [T], sum of the log-probs along the prefix (root: 0)
};

// Node budget: T counts the root, so budget 1 is plain decode (the root alone) and a budget
// of kMaxTreeSize fills the largest tree verify accepts.
inline constexpr int32_t kMaxDraftBudget = kMaxTreeSize;

// Selects the budget - 1 most probable draft prefixes under the product of the per-depth
// marginals, score(c_1..c_d) = sum_t log_probs[t-1][c_t] accumulated in double from the
// shallowest depth, and returns them as a tree under the root. Ties in score go to the prefix
// whose candidate-index sequence (c_1, c_2, ...) is lexicographically smaller, a prefix
// before its extensions; the result is therefore exactly the first budget - 1 prefixes of
// that total order, and node i + 1 is the i-th of them. Best-first search over the prefix
// tree (pop the best prefix, push its next sibling and its first child) with a max-heap,
// O(B log B). Fewer nodes come out when fewer than budget - 1 prefixes have a finite score.
// budget in [1, kMaxDraftBudget].
Status build_tree(const DraftTopK& draft, int32_t budget, DraftTree* tree);

// build_tree for every request (budgets[b] for drafts[b]), concatenated by qo_indptr.
struct DraftTreeBatch {
  std::vector<int32_t> qo_indptr;  // [B+1]
  std::vector<int32_t> parents;    // [total] local indices, as tree.h expects
  std::vector<int32_t> tokens;     // [total]
  std::vector<int32_t> depths;     // [total]
  std::vector<double> scores;      // [total]
};
Status build_trees(std::span<const DraftTopK> drafts, std::span<const int32_t> budgets,
                   DraftTreeBatch* batch);

// ---- acceptance --------------------------------------------------------------------------

struct AcceptedPaths {
  std::vector<int32_t> indptr;        // [B+1]: request b's path is nodes[indptr[b], indptr[b+1])
  std::vector<int32_t> nodes;         // local node indices, root first
  std::vector<int32_t> bonus_tokens;  // [B]: the token emitted after the path (-1 if T_b = 0)
};

// Greedy verification: from the root, follow the child whose token equals the target's
// argmax at the current node (the first such child in node order if several match); stop at
// a node with no matching child, whose target argmax is the bonus token. Emits exactly what
// greedy decoding with the target would.
//   target_argmax  [total_q]: the target's argmax token at every node
Status verify_greedy(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                     std::span<const int32_t> tokens, std::span<const int32_t> target_argmax,
                     AcceptedPaths* accepted);

// How the drafter chose the children of each node; verify_sampling is exact (the emitted
// tokens are distributed exactly as sampling from the target one token at a time) for the
// scheme it is told, provided the draft distributions it is given are the ones used.
enum class DraftScheme : int32_t {
  // Children chosen without looking at the target and without randomness, e.g. DDTree's or
  // EAGLE-2's top-K expansion. No draft distribution is needed: each child is a point mass.
  // Child c is accepted with probability p(c); on rejection p <- normalize(p with c zeroed).
  kDeterministic = 0,
  // The children of node u are independent draws (with replacement, duplicates allowed) from
  // q_u = draft_probs[u] (SpecInfer's multi-step speculative sampling). Child c is accepted
  // with probability min(1, p(c) / q(c)); on rejection p <- normalize(max(p - q, 0)).
  kSampledWithReplacement = 1,
  // The children of u, in node order, are drawn one after another from q_u without
  // replacement (recursive rejection sampling, Jeon et al. 2024; EAGLE-style multi-draft
  // sampling). As with replacement, and after each rejection q <- normalize(q with c zeroed).
  kSampledWithoutReplacement = 2,
};

struct SamplingInputs {
  int32_t vocab_size = 0;               // V >= 1
  std::span<const float> target_probs;  // [total_q, V]: the target's distribution at every
                                        //   node; non-negative, finite, positive sum (it is
                                        //   normalized here, so unnormalized is fine)
  std::span<const float> draft_probs;   // [total_q, V]: the distribution the children of
                                        //   each node were drawn from, same rules; may be
                                        //   empty for kDeterministic (ignored there)
  DraftScheme scheme = DraftScheme::kDeterministic;
};

// Rejection sampling down the tree. At node u, starting from p = target_probs[u], the
// children are tried in node order with the scheme's rule; the first accepted child becomes
// the next node; when every child is rejected (or u is a leaf) the bonus token is drawn from
// the current residual p. If a residual vanishes numerically (p and q equal up to rounding),
// p is kept as it was. Tokens must be in [0, V); a sampled child whose token has zero draft
// probability is an error (it cannot have been drawn from q). Uniform variates are taken as
// (rng() >> 11) * 2^-53, so results are reproducible on every platform for a given seed.
Status verify_sampling(std::span<const int32_t> qo_indptr, std::span<const int32_t> parents,
                       std::span<const int32_t> tokens, const SamplingInputs& inputs,
                       std::mt19937_64* rng, AcceptedPaths* accepted);

// ---- KV commit -------------------------------------------------------------------------------

// page_size > 1: moves the KV row of accepted node path[k] (position L_b + path[k]) to position
// L_b + k, for every request, in the cache itself; rows outside [L_b, L_b + path size) are
// untouched. The page table is unchanged; pages past the new kv_len can be released by the
// caller. The rows of request b's tree (positions [L_b, kv_len_b)) must be b's alone: a
// tree row listed twice, or one that is also a prefix row of any request, is an error
// (kv_page_indices); prefix rows may be shared. Everything is validated before the first row
// moves, so a failed call changes nothing. Works for page_size = 1 as well, though there
// commit_slots moves no data.
//
// The cache's row format (types.h KvFormat): kSameAsQ (the default) means 16-bit rows of 576
// values (bf16/fp16: 1152 bytes) in `kv_cache`; kE4M3 means rows of 576 e4m3 bytes in
// `kv_cache_e4m3`, and then `kv_cache` must be empty (and for kSameAsQ `kv_cache_e4m3`). A
// commit copies rows bit for bit and never reads kv_scale, which is per layer, not per row.
struct PagedKvCommit {
  int32_t page_size = 0;                     // a power of two in [1, kMaxPageSize]
  std::span<uint16_t> kv_cache = {};         // [num_pages, page_size, 576] bf16/fp16 bits
                                             //   (kv_format kSameAsQ)
  std::span<const int32_t> kv_page_indptr;   // [B+1]
  std::span<const int32_t> kv_page_indices;  // [nnz] page ids in [0, num_pages)
  std::span<const int32_t> kv_len;           // [B] L_b + T_b before the commit
  std::span<const int32_t> qo_indptr;        // [B+1] the verified trees
  std::span<const int32_t> parents;          // [total_q]
  KvFormat kv_format = KvFormat::kSameAsQ;   // the rows' format, host and device commit alike
  std::span<uint8_t> kv_cache_e4m3 = {};     // [num_pages, page_size, 576] e4m3 bytes
                                             //   (kv_format kE4M3)
};
// new_kv_len [B] = L_b + accepted path size (kv_len unchanged for T_b = 0).
Status commit_kv_paged(const PagedKvCommit& args, const AcceptedPaths& accepted,
                       std::vector<int32_t>* new_kv_len);

// The same commit on a device KV pool (page_size >= 1). The metadata comes twice: host copies
// in `host`, validated exactly as commit_kv_paged validates them (its kv_cache spans are not
// read and may be empty; the pool size is device.num_pages), and device copies holding the
// same values, which the kernel reads; host.kv_format gives the rows' format (device.kv_cache
// holds 16-bit rows of 1152 bytes or e4m3 rows of 576). Rows of one request may overlap (a
// source that is a later destination); the kernel orders reads before writes so the result
// equals the host commit. Launches on `stream` (a cudaStream_t, null for the legacy default stream),
// allocates nothing and can be captured in a CUDA graph; new_kv_len is computed on the host.
// A failed call launches nothing.
struct PagedKvCommitDevice {
  void* kv_cache = nullptr;                  // device [num_pages, page_size, 576] 16-bit
                                             //   or e4m3 (host.kv_format), 16-byte aligned
  int64_t num_pages = 0;                     // pages in the pool
  const int32_t* kv_page_indptr = nullptr;   // device [B+1], = host.kv_page_indptr
  const int32_t* kv_page_indices = nullptr;  // device [nnz], = host.kv_page_indices
  const int32_t* kv_len = nullptr;           // device [B], = host.kv_len (before the commit)
  const int32_t* qo_indptr = nullptr;        // device [B+1], = host.qo_indptr
  const int32_t* accepted_indptr = nullptr;  // device [B+1], = accepted.indptr
  const int32_t* accepted_nodes = nullptr;   // device [indptr[B]], = accepted.nodes; may be
                                             //   null when no request has a path
};
Status commit_kv_paged_cuda(const PagedKvCommit& host, const AcceptedPaths& accepted,
                            const PagedKvCommitDevice& device, std::vector<int32_t>* new_kv_len,
                            void* stream = nullptr);

// page_size = 1 (SGLang's token-granular pool): each request's token -> slot list is
// rewritten instead, so no KV data moves. slot_indptr/slots hold request b's kv_len[b] slots
// (prefix then tree nodes in node order); the result keeps the prefix slots, then the slots
// of the accepted nodes in path order, and lists the other tree slots as freed. Tree slots
// must be distinct across the whole batch and none may be a prefix slot of any request (it
// would be freed twice, or freed while still in use); prefix slots may be shared.
struct SlotCommitResult {
  std::vector<int32_t> slot_indptr;  // [B+1]
  std::vector<int32_t> slots;        // request b: new_kv_len[b] slots
  std::vector<int32_t> kv_len;       // [B] new kv_len
  std::vector<int32_t> freed_slots;  // tree slots not accepted, request by request, node order
};
Status commit_slots(std::span<const int32_t> slot_indptr, std::span<const int32_t> slots,
                    std::span<const int32_t> kv_len, std::span<const int32_t> qo_indptr,
                    std::span<const int32_t> parents, const AcceptedPaths& accepted,
                    SlotCommitResult* result);

}  // namespace treeverify
