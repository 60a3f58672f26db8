// The graph-safe plan: for engines that run each decoding step inside a CUDA graph (SGLang).
//
// plan_graph() is made once per captured batch size from bounds only (lanes, tree size, heads,
// page size, pool size, the longest KV sequence, dtypes, precision); each layer brings its own
// softmax scale. Every value that changes
// from step to step stays on the device, at fixed addresses the graph was captured with:
//
//   prepare_step()  once per step, before the layers: reads each lane's KV length, page table
//                   and tree (GraphStep), clamps what is out of range and ORs a bit into the
//                   caller's error flags (GraphError), and writes the step's metadata into the
//                   workspace: lengths, a copy of the page table, the ancestor mask, and the
//                   split-KV schedule for these lengths (the host plan's cost model, evaluated
//                   on the device).
//   run_layer()     once per layer: the verify kernel and the combine on that metadata.
//
// Both allocate nothing, read nothing on the host and never synchronize, so they can be
// captured in a graph and replayed with new lengths, tables and trees; both can also run
// eagerly. Nothing out of range is ever read: a lane's kv_len is clamped into
// [T, max_kv_len], a page id outside the pool reads page 0, a table row or CSR range outside
// the table reads row 0 / nothing, a parent that is not an earlier node is taken as the
// previous node, a mask that is not a tree's is read as the tree of its nearest ancestors
// (below); the flags say which happened. Padded lanes (an engine pads a captured batch with
// page-table row 0 and a short length) compute a few tokens and write their own rows only.
//
// Semantics are the host plan's (verify.h) for the metadata after clamping: the same kernels
// run; only the split schedule may differ, which changes no result beyond float rounding.
// CPU backends run it too, with host pointers (tests and the CPU fallback).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "treeverify/status.h"
#include "treeverify/tuning.h"
#include "treeverify/types.h"
#include "treeverify/verify.h"

namespace treeverify {

// How a lane's pages are found.
enum class PageTable : int32_t {
  // kv_page_indptr [B+1] and kv_page_indices [page_capacity]: lane b's pages are
  // kv_page_indices[kv_page_indptr[b] ...], as in VerifyTensors.
  kCsr = 0,
  // A table of rows [page_capacity, table_stride] int32 (kv_page_indices): lane b's pages are
  // row table_rows[b] (or row b when table_rows is null). A padded block table, or SGLang's
  // req_to_token with req_pool_indices at page size 1 (a page is a token slot).
  kRows = 1,
  // The same table of token slots, SGLang's req_to_token at any page size: lane b's page k is
  // row[k * page_size] / page_size, a slot that must start a page.
  kSlotRows = 2,
};

// How a lane's tree is given. Every lane has tree_size nodes, in node order.
enum class TreeInput : int32_t {
  kChain = 0,    // node i's parent is i - 1: decode (T = 1), MTP and DFlash block verify
  kParents = 1,  // parents [B * T] int32: per lane, parents[0] = -1 and parents[i] in [0, i)
  // mask [B, T, T] bytes: node i sees tree token j iff mask[i][j] != 0 (its ancestors and
  // itself: SGLang's QLEN_ONLY verify mask). It must be a tree's: node i's parent is taken as
  // the largest j < i it sees, and a row that differs from that tree's is flagged. A row whose
  // own entry is 0 was never written (a padded lane): it is read as a child of node 0, unflagged.
  kMask = 2,
  // SGLang's FULL_MASK: per lane, T rows of its kv_len (L_b + T) bytes, lanes one after
  // another (lane b at T x the kv_len of the lanes before it, as kv_len gives them); a row's
  // last T bytes are the tree's columns, read as kMask's. Reads stay inside the step's
  // mask_bytes: a lane beyond them is read as a chain and flagged.
  kFullMask = 3,
};

struct GraphBounds {
  int32_t batch_size = 0;  // B: lanes of the captured batch, padding included (>= 1)
  int32_t tree_size = 0;   // T: nodes of every lane, in [1, kMaxTreeSize]
  int32_t num_heads = 0;   // H
  int32_t page_size = 0;   // a power of two in [1, kMaxPageSize]
  int64_t num_pages = 0;   // pages in the KV pool: page ids in [0, num_pages)
  int32_t max_kv_len = 0;  // the most KV tokens (L_b + T) of any lane at any step, >= T
  DType dtype = DType::kBF16;
  KvFormat kv_format = KvFormat::kSameAsQ;
  PageTable page_table = PageTable::kCsr;
  // kCsr: entries of kv_page_indices; kRows: rows of the table. Reads stay inside it.
  int64_t page_capacity = 0;
  // kRows: entries a row, at least the pages of max_kv_len; kSlotRows: at least max_kv_len.
  int32_t table_stride = 0;
  TreeInput tree = TreeInput::kChain;
  // kv_len holds L_b, the committed prefix (SGLang's seq_lens in target verify): the plan adds
  // T. Otherwise kv_len is L_b + T (decode: the new token included).
  bool kv_len_excludes_tree = false;
};

// Bits prepare_step ORs into GraphStep::error_flags. The caller reads (and clears) them when
// it chooses; a step whose flags are set computed the clamped metadata, not the given one.
enum GraphError : uint32_t {
  kGraphKvLenClamped = 1u << 0,   // a lane's kv_len (with T) was outside [T, max_kv_len]
  kGraphPageClamped = 1u << 1,    // a page id outside [0, num_pages), or a slot that does not
                                  // start a page (kSlotRows): page 0 was read
  kGraphTableClamped = 1u << 2,   // a table row, or a CSR range, outside page_capacity
  kGraphParentClamped = 1u << 3,  // a parent outside [0, i) (or parents[0] != -1)
  kGraphMaskNotTree = 1u << 4,    // a mask row that is not its node's ancestors and itself,
                                  // or (kFullMask) a lane past mask_bytes
};
// "kv_len clamped, page id clamped", for messages; "none" for 0.
std::string graph_error_names(uint32_t flags);

// The step's metadata: device pointers for a CUDA plan (fixed across the replays of a
// graph), host pointers for a CPU one.
struct GraphStep {
  const int32_t* kv_len = nullptr;           // [B]
  const int32_t* kv_page_indptr = nullptr;   // kCsr: [B+1]
  const int32_t* kv_page_indices = nullptr;  // kCsr: [page_capacity]; kRows/kSlotRows: the table
  const int32_t* table_rows = nullptr;       // kRows/kSlotRows: [B] row of each lane, may be null
  const int32_t* parents = nullptr;          // kParents: [B * T]
  const uint8_t* tree_mask = nullptr;        // kMask: [B, T, T]; kFullMask: [mask_bytes]
  int64_t mask_bytes = 0;                    // kFullMask: the bytes of tree_mask
  uint32_t* error_flags = nullptr;           // [1], ORed with GraphError bits; may be null
};

// One layer's tensors. Strides in elements, 0 meaning contiguous (as VerifyTensors).
struct GraphLayer {
  const void* q = nullptr;  // [B * T, H, 576] dtype
  int64_t q_stride_token = 0, q_stride_head = 0;
  const void* kv_cache = nullptr;  // [num_pages, page_size, 576] dtype or e4m3 bytes
  const float* kv_scale = nullptr;  // e4m3 only: [1] (device memory for CUDA plans)
  void* out = nullptr;              // [B * T, H, 512] dtype
  int64_t out_stride_token = 0, out_stride_head = 0;
  float* lse = nullptr;  // [B * T, H] fp32 natural log, may be null
  float softmax_scale = 0.f;  // this layer's, finite
};

namespace detail {
// What plan_graph hands prepare_step and run_layer: backend state, not part of the API.
struct GraphPlanState {
  int32_t variant = 0, config_arch = 0, rows_per_cta = 0, tile_tokens = 0;
  int32_t row_blocks = 0;          // grid.x: ceil(T * H / rows_per_cta)
  int32_t chunk_cap = 0;           // grid.y: the most chunks the step's schedule may take
  int32_t forced_chunk_tokens = 0;  // PlanTuning::chunk_tokens, else 0
  int32_t pages_per_lane = 0;      // ceil(max_kv_len / page_size): the table copy's row
  int32_t concurrent_ctas = 0;     // SMs x CTAs per SM of the kernel
  double token_ns = 0, cta_ns = 0, combine_ns = 0, partial_row_ns = 0, token_bytes = 0,
         bytes_per_ns = 0;          // the split schedule's cost model (split_schedule.h)
  bool fast_products = false, wgmma = false, tma = false, programmatic_combine = false;
  int32_t device_sms = 0;
  size_t chunk_offset = 0;  // the workspace's int32 slot of the step's chunk length
};
}  // namespace detail

struct GraphPlan {
  Backend backend = Backend::kAuto;
  std::string kernel;  // as Plan::kernel
  std::string reason;  // one line: why this kernel, and how the step is scheduled
  size_t workspace_bytes = 0;
  GraphBounds bounds;
  PlanOptions options;
  Precision precision = Precision::kExact;
  int32_t device = -1;
  detail::GraphPlanState state;
};

// Checks the bounds and options and chooses the kernel for every step they allow. Reads no
// step metadata. On failure *plan is unchanged.
Status plan_graph(const GraphBounds& bounds, const PlanOptions& options, GraphPlan* plan);
Status plan_graph(const GraphBounds& bounds, const PlanOptions& options, const PlanTuning& tuning,
                  GraphPlan* plan);

// Once per step: the step's metadata into the workspace (see above). CUDA: launches on
// `stream`, capturable; CPU: runs now. Pointer errors (null where required, host memory for a
// CUDA plan) are found before anything is launched.
Status prepare_step(const GraphPlan& plan, const GraphStep& step, void* workspace,
                    size_t workspace_bytes, void* stream = nullptr);

// Once per layer, after prepare_step on the same workspace (stream-ordered).
Status run_layer(const GraphPlan& plan, const GraphLayer& layer, void* workspace,
                 size_t workspace_bytes, void* stream = nullptr);

}  // namespace treeverify
