// MLA tree-verify attention over a paged KV cache: plan once per step, run once per layer.
//
//   VerifyProblem  host-side metadata (lengths, page table, tree), read by plan() to validate
//                  every input and choose a kernel and its split-KV schedule.
//   VerifyTensors  the buffers of one run(): device pointers for CUDA backends, host pointers
//                  for CPU backends. The index arrays must hold the values plan() was given.
//
// Semantics (docs/DESIGN.md section 2): for request b, node i of its tree sees all L_b prefix
// tokens and tree token j iff j == i or j is an ancestor of i. scores = softmax_scale * q.k over
// 576 columns; out = softmax(scores) . v with v = the first 512 columns of the same KV rows;
// lse = natural-log log-sum-exp of the scaled scores. A row that sees nothing gets out = 0 and
// lse = -inf.
//
// Non-finite inputs, the same on every backend: a token a row cannot see never changes that
// row, whatever its K and V hold. A row that reads a NaN or an infinity, in its q or anywhere in
// the 576 values of a token it sees, gets NaN in all 512 values of out and NaN lse (a NaN
// spreads as in PyTorch's attention, but to the whole row: a consumer tests one value, lse).
// The float32 backends compute scores in float32: keep |softmax_scale * q.k| below 2^126; a
// score past float32's range there makes its row NaN, or weighs 0 if it falls to -inf.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "treeverify/status.h"
#include "treeverify/types.h"

namespace treeverify {

struct VerifyProblem {
  int32_t batch_size = 0;      // B >= 0
  int32_t num_heads = 0;       // H in [1, kMaxHeads]
  int32_t page_size = 0;       // a power of two in [1, kMaxPageSize]
  int64_t num_pages = 0;       // pages in the KV pool
  DType dtype = DType::kBF16;  // of q and out, and of kv_cache unless kv_format says otherwise
  KvFormat kv_format = KvFormat::kSameAsQ;  // see KvFormat (types.h)
  float softmax_scale = 0.f;                // finite

  const int32_t* qo_indptr = nullptr;        // [B+1] host: query rows of request b are
                                             //   [qo_indptr[b], qo_indptr[b+1]), T_b of them
  const int32_t* kv_len = nullptr;           // [B] host: L_b + T_b, KV tokens of request b
  const int32_t* kv_page_indptr = nullptr;   // [B+1] host: pages of request b are
                                             //   kv_page_indices[kv_page_indptr[b] ...]
  const int32_t* kv_page_indices = nullptr;  // [nnz] host: page ids in [0, num_pages)
  const int32_t* parents = nullptr;          // [total_q] host: per request, parents[0] = -1 and
                                             //   parents[i] in [0, i) for i > 0 (node order)
};

// Strides are in elements; the last dimension is always contiguous.
struct VerifyTensors {
  const void* q = nullptr;                   // [total_q, H, 576] dtype
  int64_t q_stride_token = 0;                // 0 means contiguous: H * 576
  int64_t q_stride_head = 0;                 // 0 means contiguous: 576
  const void* kv_cache = nullptr;            // [num_pages, page_size, 576] dtype (or e4m3 bytes,
                                             //   kv_format), contiguous
  const float* kv_scale = nullptr;           // e4m3 only, and then required: one float,
                                             //   real KV value = stored x *kv_scale (device
                                             //   memory for CUDA backends, host memory for CPU
                                             //   ones; read when the call runs, so a CUDA graph
                                             //   sees updates); null otherwise. It must pass
                                             //   is_valid_kv_scale (types.h); the CPU backends
                                             //   refuse one that does not (a device scale is
                                             //   read by the kernel only, never checked)
  const int32_t* qo_indptr = nullptr;        // [B+1] int32, same values as the problem's
  const int32_t* kv_len = nullptr;           // [B] int32, same values as the problem's
  const int32_t* kv_page_indptr = nullptr;   // [B+1] int32, same values as the problem's
  const int32_t* kv_page_indices = nullptr;  // [nnz] int32, same values as the problem's
  const int32_t* parents = nullptr;          // [total_q] int32, same values as the problem's
  void* out = nullptr;                       // [total_q, H, 512] dtype
  int64_t out_stride_token = 0;              // 0 means contiguous: H * 512
  int64_t out_stride_head = 0;               // 0 means contiguous: 512
  float* lse = nullptr;                      // [total_q, H] fp32, may be null
};

// Where a call runs: what a user chooses. Which kernel runs there is the plan's choice
// (Plan::kernel, Plan::reason).
enum class Backend : int32_t {
  kAuto = 0,      // the GPU when one is usable, else the CPU
  kCpuReference,  // exact oracle: float64 accumulation, plain loops, single thread
  kCpu,           // float32, multithreaded, BLAS tile products: the fallback without a GPU
  kCuda,          // the GPU: the portable mma.sync kernel (sm_80..sm_120) or, for requests of
                  // more than 32 rows on sm_90a code, the wgmma kernel
};

const char* backend_name(Backend backend);
// Parses "auto", "cpu-reference", "cpu", "cuda" (the older "cpu-fast" and "cuda-mma" are
// refused with their new names).
Status parse_backend(const std::string& name, Backend* backend);

// What the products of a call on an e4m3 KV cache take (docs/DESIGN.md, "e4m3").
enum class Precision : int32_t {
  // The cache is storage only: its values are widened exactly (every e4m3 value is an fp16
  // value) and Q.K and P.V are fp16 products with fp32 accumulation on cuda (Q brought to
  // fp16 by a power of two a row, exact down to 2^-38 of the row's largest value; P in fp16),
  // fp32/fp64 on the CPU backends; the only rounding beyond the 16-bit path's is the cache's
  // own. Every backend, every GPU.
  kExact = 0,
  // e4m3 KV caches only: Q rounded to e4m3 with one scale a row (a token's head: amax / 448)
  // and P to e4m3 (p x 448), then native FP8 products (mma.sync e4m3, fp32 accumulation) on
  // GPUs that have them (sm_89, sm_120). Elsewhere (sm_80-sm_90 and sm_100 emulate or lack
  // them; CPU backends) the call runs exact and Plan::reason says so. Against exact attention
  // on the same cache, out moves about 5e-2 relative and lse 0.1-0.3 nats on random data in
  // the oracle, mostly from Q's rounding (P's alone: 1e-2, lse unchanged; docs/DESIGN.md).
  // The non-finite policy holds as above, with one difference: a row that shares its CTA with
  // a row that sees a non-finite value may come out computed exact (unrounded Q and P), not
  // fast, so such a value moves it within fast mode's error though it cannot see it.
  kFast = 1,
};
const char* precision_name(Precision precision);
// Parses "exact", "fast".
Status parse_precision(const std::string& name, Precision* precision);

struct PlanOptions {
  Backend backend = Backend::kAuto;
  int device = -1;      // CUDA device ordinal; -1 means the current device
  // cpu's threads: 0 means every hardware thread this process may run on (its CPU
  // affinity), and so does any larger count (more threads than that would only cost memory and
  // time); negative is an error.
  int num_threads = 0;
  // Round softmax probabilities to the input dtype before P.V (fp16 with an e4m3 cache in
  // exact mode, whose products are fp16), as the GPU kernels do; the CPU backends use this to
  // compare like with like. Off means P stays in full precision.
  // The cpu-reference backend with precision kFast rounds as the fast kernels do instead: Q
  // to e4m3 with its row scale, and P to e4m3 (p x 448).
  bool round_p = false;
  // e4m3 caches: exact (the default) or fast products; see Precision. kFast with a 16-bit
  // cache is an error.
  Precision precision = Precision::kExact;
  // Tuning overrides for tests and benchmarks (tile table, variant, chunk length, copies) are
  // not options: PlanTuning, treeverify/tuning.h.
};

namespace detail {
// What plan() hands run() beyond Plan's public fields: backend state, not part of the API
// (it may change between versions; Plan::kernel and Plan::reason say what was chosen).
struct PlanState {
  // Split-KV schedule (CUDA backends): each request's KV sequence (prefix and tree) is cut
  // into chunks of chunk_tokens; num_chunks is the largest chunk count of any request.
  int32_t chunk_tokens = 0, num_chunks = 0, config_arch = 0;
  int32_t variant = 0;         // backend-specific kernel variant (CUDA: rows per CTA and stages)
  int32_t tile_tokens = 0;     // CUDA: KV tokens a tile of that variant (its online softmax's step)
  int32_t rows_per_cta = 0;    // CUDA: query rows a CTA of that variant (16, 32 or 64)
  bool fast_products = false;  // CUDA: run() launches the e4m3 fast kernel (precision kFast)
  bool wgmma = false;          // CUDA: run() launches the sm_90a wgmma kernel (src/cuda/sm90)
  // CUDA: ... and its producer copies whole tiles by TMA tensor copies (core/select.cpp says where).
  bool tma = false;
  uint64_t id = 0;  // CUDA: distinct for each plan() call; names the step data in a workspace
  bool programmatic_combine = false;  // CUDA: the split combine overlaps the main kernel's tail
  int32_t device_sms = 0;             // CUDA: SMs of Plan::device (the combine's block size)
};
}  // namespace detail

// The decision plan() took; pass it to run() for every layer of the step.
struct Plan {
  Backend backend = Backend::kAuto;  // the backend chosen (never kAuto after a successful plan)
  std::string kernel;                // what runs, e.g. "mma/bf16/r64-s4/sm90-table" (the portable
                                     //   kernel, variant r64-s4 of the sm_90 tile table) or
                                     //   "wgmma/bf16/r64-t64+tma/sm90a"
  std::string reason;                // one line: why this backend and kernel
  size_t workspace_bytes = 0;        // run() needs at least this much workspace

  // The problem's shape, kept so that run() can check it is given matching tensors.
  int32_t batch_size = 0, num_heads = 0, page_size = 0, total_q = 0, max_tree = 0;
  int64_t num_pages = 0, nnz_pages = 0, max_kv_len = 0;
  DType dtype = DType::kBF16;
  KvFormat kv_format = KvFormat::kSameAsQ;
  float softmax_scale = 0.f;
  // What the chosen kernel computes: options.precision, or kExact where fast products do not
  // run (Plan::reason says why). Tests and `treeverify check` round their oracle by this.
  Precision precision = Precision::kExact;
  PlanOptions options;
  int32_t device = -1;  // CUDA backends: the device ordinal the plan is for

  detail::PlanState state;  // the backend's internals: not part of the API
};

// Validates every input of the problem (docs/DESIGN.md section 3) and chooses a backend, a kernel
// and its schedule. Reads only host memory. On failure *plan is left unchanged.
Status plan(const VerifyProblem& problem, const PlanOptions& options, Plan* plan);

// Runs the planned call. CUDA backends launch on `stream` (a cudaStream_t, null for the
// legacy default stream), allocate nothing and can be captured in a CUDA graph; CPU backends
// ignore the stream and the workspace. The workspace holds the step's ancestor mask and the
// call's split partials, so runs that share one workspace must be ordered (one stream, or
// events). The mask is built by the first run of a plan on a workspace (and again after any
// other plan ran there); the later runs of that plan, one per layer, reuse it. So between
// runs of one plan, keep its workspace allocated and let nothing else write it (a persistent
// workspace, as engines keep, does this); a workspace whose memory was reused in between
// needs a new plan(). CUDA graphs: the first run of a plan in each stream capture builds the
// mask inside the graph, so every replay brings its own whatever ran on the workspace before;
// but a replay changes the workspace behind the host's back, so once a graph has been
// replayed, runs of other plans outside it need another workspace.
// Argument errors are found before anything is launched, and then nothing is written to out
// or lse; a CUDA launch failure part-way is reported as kCudaError.
Status run(const Plan& plan, const VerifyTensors& tensors, void* workspace, size_t workspace_bytes,
           void* stream = nullptr);

// Whether plan() would succeed, with the reason when not (the same selection code answers).
Status supports(const VerifyProblem& problem, const PlanOptions& options);

// Plan + run with a workspace of its own, for CPU backends and tests. Host pointers only.
Status verify_cpu(const VerifyProblem& problem, const VerifyTensors& tensors,
                  const PlanOptions& options = {});

}  // namespace treeverify
