// fuzz_plan: plan(), supports(), run() and verify_cpu() (include/treeverify/verify.h).
//
// Feeds: a VerifyProblem with every field from the input: batch_size, num_heads, page_size,
// num_pages, dtype and kv_format (raw values too), softmax_scale (NaN, +-inf, 0, huge, denormal,
// raw bits) and
// the five index arrays qo_indptr, kv_len, kv_page_indptr, kv_page_indices, parents. The
// arrays start as a valid batch (tree sizes, parents, prefix lengths, a page table with fresh or
// input-chosen page ids) and are then damaged by input-chosen mutations (+-1, edge values, raw
// int32), appended or truncated entries, and null pointers; or one request is given a kv_len
// near 2^31 (2^31 - 1, within a page of it, 2^30) over a sparse page table at page size 64 or
// 128 (one page for all entries, a few others or out of the pool, at times one entry short). Each
// array is then allocated at exactly the length the contract makes a caller provide (the input's
// length, grown to that when shorter), so ASan reports any read past it. PlanOptions:
// cpu-reference, cpu, auto, cuda, an unknown value; num_threads 0..3, past the hardware's
// (1000, 2^20, 2^31 - 1: capped) or negative (refused); round_p. For run(): q and the KV cache
// (16-bit or e4m3 bytes) from the input, kv_scale (finite, NaN, inf, either side of
// kMaxKvScale, or missing/extra).
//
// Asserts:
//  - plan() succeeds exactly when the problem meets verify.h's contract (checked independently
//    below) and num_threads >= 0, with the expected code otherwise (kInvalidArgument;
//    kUnsupported for cuda in this CPU-only build); supports() returns the same code and
//    message; errors are never kInternal and carry a message; a failed plan() leaves the Plan
//    passed in unchanged; a successful one records the problem's shape and a CPU backend (auto
//    means cpu here).
//  - when plan() succeeds and the problem is small (<= 2048 row x KV token pairs, <= 512 pool
//    tokens), run() or verify_cpu() on q and kv from the input (values, layout strides of q
//    and out: both given, the head stride only (token stride 0), the token stride only, or
//    none; injected NaN/inf): returns ok (a kv_scale past kMaxKvScale, NaN or inf:
//    kInvalidArgument naming it, nothing written), writes every value of out and lse (filled
//    with a sentinel bit pattern no result can have), nothing in the gaps of a strided out,
//    and reads no KV row that is not
//    one of a request's tokens and no padding of a strided q (both poisoned for ASan); a row
//    that sees a NaN or inf is NaN in all of out and lse, and on cpu-reference a row that sees
//    none has no NaN.
//  - an invalid tensors variant chosen by the input (null out, q, kv_cache or parents,
//    misaligned q, out or lse, bad strides, a qo_indptr that disagrees with the plan, a default
//    Plan, kv_scale missing for e4m3 or given for a 16-bit cache) returns kInvalidArgument naming
//    that argument and leaves out and lse untouched.
//
// Files: this one plans and checks plan()/supports(); fuzz_plan_problem.cpp decodes the problem
// and writes out the contract; fuzz_plan_run.cpp runs a planned problem and checks the call.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "fuzz_plan_problem.h"
#include "fuzz_plan_run.h"
#include "treeverify/treeverify.h"

namespace {

using namespace treeverify;
using namespace tvfuzz::plan;
using tvfuzz::Input;

constexpr int64_t kMaxWork = 2048;       // sum over requests of T_b * H * kv_len_b, for run()
constexpr int64_t kMaxPoolTokens = 512;  // num_pages * page_size, for run()
// Sum over requests of kv_len_b, for run(): check_run walks every request's tokens, and a request
// with an empty tree adds no work but may still claim 2^31 tokens over a few reused pages.
constexpr int64_t kMaxKvTokens = 4096;

// Stats slots (TREEVERIFY_FUZZ_STATS=1): 0 inputs, 1 plan ok, 2 run() reached, 3 of them
// e4m3, 4 invalid-tensors variants, 5 run() ok with non-finite rows checked, 6 run() reached
// with a head stride and token stride 0 for q or out, 7 a kv_len near 2^31 refused by plan(),
// 8 one planned.
int body(const uint8_t* data, size_t size) {
  Input in(data, size);
  tvfuzz::Stats::count(0);

  PlanInput d;
  if (!decode_problem(in, &d)) return 0;
  const VerifyProblem& prob = d.prob;
  const PlanOptions& opt = d.opt;
  const std::vector<int32_t>& qo = d.qo;
  const std::vector<int32_t>& kv_len = d.kv_len;
  const std::vector<int32_t>& kpi = d.kpi;
  const int32_t B = prob.batch_size;

  // ---- plan and supports -------------------------------------------------------------------
  const bool valid = problem_is_valid(prob);
  Plan p = sentinel_plan();
  const std::string before = fingerprint(p);
  const Status sp = plan(prob, opt, &p);
  const Status ss = supports(prob, opt);
  FUZZ_CHECK(sp.code() == ss.code() && sp.message() == ss.message(), "plan: %s / supports: %s",
             sp.to_string().c_str(), ss.to_string().c_str());
  const bool cpu_backend = opt.backend == Backend::kCpuReference || opt.backend == Backend::kCpu ||
                           opt.backend == Backend::kAuto;
  StatusCode expected = StatusCode::kOk;
  if (!valid || opt.num_threads < 0) {
    expected = StatusCode::kInvalidArgument;
  } else if (opt.backend == Backend::kCuda) {
    expected = StatusCode::kUnsupported;
  } else if (!cpu_backend) {
    expected = StatusCode::kInvalidArgument;
  }
  FUZZ_CHECK(sp.code() == expected, "plan returned %s, expected code %s (problem %s)",
             sp.to_string().c_str(), status_code_name(expected), valid ? "valid" : "invalid");
  if (d.huge) tvfuzz::Stats::count(sp.ok() ? 8 : 7);
  if (!sp.ok()) {
    FUZZ_CHECK_NAMED_ERROR(sp);
    FUZZ_CHECK(fingerprint(p) == before, "failed plan() changed the Plan: %s",
               fingerprint(p).c_str());
    return 0;
  }
  tvfuzz::Stats::count(1);
  const Backend want = opt.backend == Backend::kAuto ? Backend::kCpu : opt.backend;
  const int32_t total_q = B > 0 ? qo[B] : 0;
  FUZZ_CHECK(p.backend == want && p.batch_size == B && p.num_heads == prob.num_heads &&
                 p.page_size == prob.page_size && p.num_pages == prob.num_pages &&
                 p.total_q == total_q && p.nnz_pages == (B > 0 ? kpi[B] : 0) &&
                 p.dtype == prob.dtype && p.kv_format == prob.kv_format &&
                 tvfuzz::same_bits(p.softmax_scale, prob.softmax_scale),
             "plan does not describe the problem: %s", fingerprint(p).c_str());
  int32_t max_tree = 0;
  int64_t max_kv = 0, work = 0, kv_tokens = 0;
  for (int32_t b = 0; b < B; ++b) {
    max_tree = std::max(max_tree, qo[b + 1] - qo[b]);
    max_kv = std::max<int64_t>(max_kv, kv_len[b]);
    kv_tokens += kv_len[b];
    work += int64_t{qo[b + 1] - qo[b]} * prob.num_heads * kv_len[b];
  }
  FUZZ_CHECK(p.max_tree == max_tree && p.max_kv_len == max_kv,
             "max_tree %d/%d max_kv_len %lld/%lld", p.max_tree, max_tree, (long long)p.max_kv_len,
             (long long)max_kv);

  // ---- run, when small ---------------------------------------------------------------------
  const int64_t ps = prob.page_size;
  if (prob.num_pages > kMaxPoolTokens / ps || work > kMaxWork || kv_tokens > kMaxKvTokens) return 0;
  tvfuzz::Stats::count(2);
  check_run(in, d, p);
  return 0;
}

}  // namespace

FUZZ_ENTRY(body)
