// fuzz_plan: plan(), supports(), run() and verify_cpu() (include/treeverify/verify.h).
//
// Feeds: a VerifyProblem with every field from the input: batch_size, num_heads, page_size,
// num_pages, dtype and kv_format (raw values too), softmax_scale (NaN, +-inf, 0, huge, denormal,
// raw bits) and
// the five index arrays qo_indptr, kv_len, kv_page_indptr, kv_page_indices, parents. The
// arrays start as a valid batch (tree sizes, parents, prefix lengths, a page table with fresh or
// input-chosen page ids) and are then damaged by input-chosen mutations (+-1, edge values, raw
// int32), appended or truncated entries, and null pointers. Each array is then allocated at
// exactly the length the contract makes a caller provide (the input's length, grown to that when
// shorter), so ASan reports any read past it. PlanOptions: cpu-reference, cpu-fast, auto,
// cuda-mma, an unknown value; num_threads 0..3 or -1; round_p. For run(): q and the KV cache
// (16-bit or e4m3 bytes) from the input, kv_scale (finite, NaN, inf, or missing/extra).
//
// Asserts:
//  - plan() succeeds exactly when the problem meets verify.h's contract (checked independently
//    below), with the expected code otherwise (kInvalidArgument; kUnsupported for cuda-mma in
//    this CPU-only build); supports() returns the same code and message; errors are never
//    kInternal and carry a message; a failed plan() leaves the Plan passed in unchanged; a
//    successful one records the problem's shape and a CPU backend (auto means cpu-fast here).
//  - when plan() succeeds and the problem is small (<= 2048 row x KV token pairs, <= 512 pool
//    tokens), run() or verify_cpu() on q and kv from the input (values, layout strides,
//    injected NaN/inf): returns ok (a non-finite kv_scale: kInvalidArgument naming it, nothing
//    written), writes every value of out and lse (filled with a sentinel
//    bit pattern no result can have), nothing in the gaps of a strided out, and reads no KV row
//    that is not one of a request's tokens and no padding of a strided q (both poisoned for
//    ASan); a row that sees a NaN or inf is NaN in all of out and lse, and on cpu-reference a
//    row that sees none has no NaN.
//  - an invalid tensors variant chosen by the input (null out, q, kv_cache or parents,
//    misaligned q, out or lse, bad strides, a qo_indptr that disagrees with the plan, a default
//    Plan, kv_scale missing for e4m3 or given for a 16-bit cache) returns kInvalidArgument naming
//    that argument and leaves out and lse untouched.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz_common.h"
#include "treeverify/half.h"
#include "treeverify/treeverify.h"

namespace {

using namespace treeverify;
using tvfuzz::Buf;
using tvfuzz::Input;

constexpr int64_t kMaxWork = 2048;       // sum over requests of T_b * H * kv_len_b, for run()
constexpr int64_t kMaxPoolTokens = 512;  // num_pages * page_size, for run()
constexpr int64_t kMaxPageEntries = int64_t{1} << 20;
constexpr uint16_t kOutSentinel = 0xffff;  // a NaN payload neither conversion ever produces
constexpr uint32_t kLseSentinel = 0xffffffffu;

// Every field of a Plan, so that "unchanged" can be checked whole.
std::string fingerprint(const Plan& p) {
  uint32_t scale_bits;
  std::memcpy(&scale_bits, &p.softmax_scale, 4);
  std::string s = std::to_string(static_cast<int>(p.backend)) + "|" + p.kernel + "|" + p.reason;
  for (int64_t v : {int64_t(p.workspace_bytes),
                    int64_t(p.batch_size),
                    int64_t(p.num_heads),
                    int64_t(p.page_size),
                    int64_t(p.total_q),
                    int64_t(p.max_tree),
                    p.num_pages,
                    p.nnz_pages,
                    p.max_kv_len,
                    int64_t(p.dtype),
                    int64_t(p.kv_format),
                    int64_t(scale_bits),
                    int64_t(p.options.backend),
                    int64_t(p.options.device),
                    int64_t(p.options.num_threads),
                    int64_t(p.options.round_p),
                    int64_t(p.options.force_config_arch),
                    int64_t(p.options.force_chunk_tokens),
                    int64_t(p.options.force_rows_per_cta),
                    int64_t(p.chunk_tokens),
                    int64_t(p.num_chunks),
                    int64_t(p.config_arch),
                    int64_t(p.device),
                    int64_t(p.variant),
                    int64_t(p.id),
                    int64_t(p.programmatic_combine)}) {
    s += "|" + std::to_string(v);
  }
  return s;
}

Plan sentinel_plan() {
  Plan p;
  p.backend = static_cast<Backend>(77);
  p.kernel = "sentinel-kernel";
  p.reason = "sentinel-reason";
  p.workspace_bytes = 12345;
  p.batch_size = -5, p.num_heads = 999, p.page_size = 3, p.total_q = -7, p.max_tree = 4242;
  p.num_pages = -11, p.nnz_pages = 1234567, p.max_kv_len = -99;
  p.dtype = static_cast<DType>(9);
  p.kv_format = static_cast<KvFormat>(8);
  p.softmax_scale = -3.5f;
  p.options.backend = static_cast<Backend>(55);
  p.options.num_threads = 17;
  p.chunk_tokens = 5, p.num_chunks = 6, p.config_arch = 7, p.device = 8, p.variant = 9;
  p.id = 0xdeadbeef;
  p.programmatic_combine = true;
  return p;
}

// verify.h's contract, written out independently of src/core/validate.cpp.
bool problem_is_valid(const VerifyProblem& p) {
  if (p.batch_size < 0 || p.num_heads < 1 || p.num_heads > kMaxHeads) return false;
  if (!is_valid_page_size(p.page_size) || p.num_pages < 0) return false;
  if (p.dtype != DType::kBF16 && p.dtype != DType::kFP16) return false;
  if (p.kv_format != KvFormat::kSameAsQ && p.kv_format != KvFormat::kE4M3) return false;
  if (!std::isfinite(p.softmax_scale) || !(p.softmax_scale > 0.f)) return false;
  const int32_t B = p.batch_size;
  if (B == 0) {
    return (p.qo_indptr == nullptr || p.qo_indptr[0] == 0) &&
           (p.kv_page_indptr == nullptr || p.kv_page_indptr[0] == 0);
  }
  if (!p.qo_indptr || !p.kv_len || !p.kv_page_indptr) return false;
  if (p.qo_indptr[0] != 0 || p.kv_page_indptr[0] != 0) return false;
  for (int32_t b = 0; b < B; ++b) {
    const int64_t t = int64_t{p.qo_indptr[b + 1]} - p.qo_indptr[b];
    if (t < 0 || t > kMaxTreeSize) return false;
    if (int64_t{p.kv_page_indptr[b + 1]} < p.kv_page_indptr[b]) return false;
  }
  if (p.qo_indptr[B] > 0 && !p.parents) return false;
  if (p.kv_page_indptr[B] > 0 && !p.kv_page_indices) return false;
  for (int32_t b = 0; b < B; ++b) {
    const int64_t t = int64_t{p.qo_indptr[b + 1]} - p.qo_indptr[b];
    const int64_t pages = int64_t{p.kv_page_indptr[b + 1]} - p.kv_page_indptr[b];
    if (p.kv_len[b] < t || p.kv_len[b] > pages * p.page_size) return false;
    for (int64_t k = p.kv_page_indptr[b]; k < p.kv_page_indptr[b + 1]; ++k) {
      if (p.kv_page_indices[k] < 0 || p.kv_page_indices[k] >= p.num_pages) return false;
    }
    for (int64_t i = 0; i < t; ++i) {
      const int32_t parent = p.parents[p.qo_indptr[b] + i];
      if (i == 0 ? parent != -1 : (parent < 0 || parent >= i)) return false;
    }
  }
  return true;
}

bool well_formed_indptr(const std::vector<int32_t>& a, int32_t B, int64_t max_step) {
  if (static_cast<int64_t>(a.size()) < int64_t{B} + 1 || a[0] != 0) return false;
  for (int32_t b = 0; b < B; ++b) {
    const int64_t d = int64_t{a[b + 1]} - a[b];
    if (d < 0 || d > max_step) return false;
  }
  return true;
}

float decode_half(DType dtype, uint16_t h) { return half_to_float(dtype, h); }

// Stats slots (TREEVERIFY_FUZZ_STATS=1): 0 inputs, 1 plan ok, 2 run() reached, 3 of them
// e4m3, 4 invalid-tensors variants, 5 run() ok with non-finite rows checked.
int body(const uint8_t* data, size_t size) {
  Input in(data, size);
  tvfuzz::Stats::count(0);

  // ---- scalars ---------------------------------------------------------------------------
  VerifyProblem prob;
  {
    const uint8_t v = in.u8();
    prob.batch_size = v < 200   ? v % 5
                      : v < 240 ? 5 + (v - 200)
                                : in.pick<int32_t>({-1, -2, -100, tvfuzz::kI32Min});
  }
  {
    const uint8_t v = in.u8();
    prob.num_heads = v < 200 ? 1 + v % 4
                             : in.pick<int32_t>({0, -1, kMaxHeads, kMaxHeads + 1, tvfuzz::kI32Max,
                                                 tvfuzz::kI32Min, 8, 16});
  }
  {
    const uint8_t v = in.u8();
    prob.page_size =
        v < 200 ? 1 << (v % 5) : in.pick<int32_t>({0, -1, 3, 6, 128, 256, tvfuzz::kI32Min, 64, 12});
  }
  {
    const uint8_t v = in.u8();
    prob.dtype = static_cast<DType>(v < 250 ? v & 1 : in.i32());
  }
  {
    const uint8_t v = in.u8();
    prob.kv_format = static_cast<KvFormat>(v < 128 ? 0 : v < 250 ? 1 : in.i32());
  }
  {
    const uint8_t v = in.u8();
    prob.softmax_scale = v < 200   ? (1 + v) / 4096.f
                         : v < 224 ? in.f32()
                                   : tvfuzz::special_float(in);
  }
  PlanOptions opt;
  {
    const uint8_t v = in.u8();
    switch (v % 8) {
      case 0:
      case 3:
        opt.backend = Backend::kCpuReference;
        break;
      case 1:
      case 4:
        opt.backend = Backend::kCpuFast;
        break;
      case 2:
      case 5:
        opt.backend = Backend::kAuto;
        break;
      case 6:
        opt.backend = Backend::kCudaMma;
        break;
      default:
        opt.backend = static_cast<Backend>(in.i32());
        break;
    }
    opt.num_threads = in.pick<int>({0, 1, 2, 3, -1});
  }
  const uint8_t flags = in.u8();
  opt.round_p = flags & 1;
  const bool use_verify_cpu = flags & 2, lse_null = flags & 4, strided_q = flags & 8,
             strided_out = flags & 16;
  const uint8_t bad_byte = in.u8();
  const int bad_variant = bad_byte < 160 ? 0 : 1 + (bad_byte - 160) % 13;

  // ---- a valid batch, from the input -------------------------------------------------------
  const int32_t B = prob.batch_size;
  const int32_t nreq = std::max(B, 0);
  const int32_t ps_for_layout = is_valid_page_size(prob.page_size) ? prob.page_size : 4;
  std::vector<int32_t> qo = {0}, kv_len, kpi = {0}, kpidx, parents;
  for (int32_t b = 0; b < nreq; ++b) {
    uint8_t v = in.u8();
    const int32_t T = v < 240 ? v % 7 : in.pick<int32_t>({0, 1024, 1025, 40, 100});
    v = in.u8();
    const int32_t L = v < 240 ? v % 13 : in.pick<int32_t>({200, 3000, 0});
    const int32_t extra = in.u8() % 3;
    for (int32_t i = 0; i < T; ++i) parents.push_back(i == 0 ? -1 : in.u8() % i);
    qo.push_back(qo.back() + T);
    kv_len.push_back(L + T);
    const int32_t np = (L + T + ps_for_layout - 1) / ps_for_layout + extra;
    kpi.push_back(kpi.back() + np);
  }
  {
    const uint8_t v = in.u8();
    if (v < 192) {  // fresh page ids, in order
      for (int32_t k = 0; k < kpi.back(); ++k) kpidx.push_back(k);
      prob.num_pages = kpi.back() + v % 3;
    } else {  // ids from the input: pages shared within and across requests
      const int32_t pool = 1 + in.u8();
      for (int32_t k = 0; k < kpi.back(); ++k) kpidx.push_back(in.u8() % pool);
      prob.num_pages = pool;
    }
    const uint8_t w = in.u8();
    if (w >= 224) {
      prob.num_pages = in.pick<int64_t>({0, -1, INT64_MAX, INT64_MIN, int64_t{1} << 40,
                                         prob.num_pages - 1, prob.num_pages + 1, int64_t{1} << 31});
    }
  }
  tvfuzz::mutate_arrays(in, {&qo, &kv_len, &kpi, &kpidx, &parents}, 6, /*may_resize=*/true);

  // Grow each array to the length the contract makes a caller provide.
  if (B >= 0) {
    auto grow = [](std::vector<int32_t>& a, size_t n) {
      if (a.size() < n) a.resize(n, a.empty() ? 0 : a.back());
    };
    grow(qo, size_t(B) + 1);
    grow(kv_len, size_t(B));
    grow(kpi, size_t(B) + 1);
    if (B > 0 && well_formed_indptr(qo, B, kMaxTreeSize)) grow(parents, size_t(qo[B]));
    if (B > 0 && well_formed_indptr(kpi, B, INT64_MAX)) {
      if (kpi[B] > kMaxPageEntries) return 0;  // a valid page table too large to allocate
      grow(kpidx, size_t(kpi[B]));
    }
  }
  const Buf<int32_t> qo_buf(qo), kv_len_buf(kv_len), kpi_buf(kpi), kpidx_buf(kpidx),
      parents_buf(parents);
  {
    const uint8_t v = in.u8();
    const uint8_t nulls = (v & 0x80) ? v : 0;
    prob.qo_indptr = (nulls & 1) ? nullptr : qo_buf.data();
    prob.kv_len = (nulls & 2) ? nullptr : kv_len_buf.data();
    prob.kv_page_indptr = (nulls & 4) ? nullptr : kpi_buf.data();
    prob.kv_page_indices = (nulls & 8) ? nullptr : kpidx_buf.data();
    prob.parents = (nulls & 16) ? nullptr : parents_buf.data();
  }

  // ---- plan and supports -------------------------------------------------------------------
  const bool valid = problem_is_valid(prob);
  Plan p = sentinel_plan();
  const std::string before = fingerprint(p);
  const Status sp = plan(prob, opt, &p);
  const Status ss = supports(prob, opt);
  FUZZ_CHECK(sp.code() == ss.code() && sp.message() == ss.message(), "plan: %s / supports: %s",
             sp.to_string().c_str(), ss.to_string().c_str());
  const bool cpu_backend = opt.backend == Backend::kCpuReference ||
                           opt.backend == Backend::kCpuFast || opt.backend == Backend::kAuto;
  StatusCode expected = StatusCode::kOk;
  if (!valid) {
    expected = StatusCode::kInvalidArgument;
  } else if (opt.backend == Backend::kCudaMma) {
    expected = StatusCode::kUnsupported;
  } else if (!cpu_backend) {
    expected = StatusCode::kInvalidArgument;
  }
  FUZZ_CHECK(sp.code() == expected, "plan returned %s, expected code %s (problem %s)",
             sp.to_string().c_str(), status_code_name(expected), valid ? "valid" : "invalid");
  if (!sp.ok()) {
    FUZZ_CHECK_NAMED_ERROR(sp);
    FUZZ_CHECK(fingerprint(p) == before, "failed plan() changed the Plan: %s",
               fingerprint(p).c_str());
    return 0;
  }
  tvfuzz::Stats::count(1);
  const Backend want = opt.backend == Backend::kAuto ? Backend::kCpuFast : opt.backend;
  const int32_t total_q = B > 0 ? qo[B] : 0;
  FUZZ_CHECK(p.backend == want && p.batch_size == B && p.num_heads == prob.num_heads &&
                 p.page_size == prob.page_size && p.num_pages == prob.num_pages &&
                 p.total_q == total_q && p.nnz_pages == (B > 0 ? kpi[B] : 0) &&
                 p.dtype == prob.dtype && p.kv_format == prob.kv_format &&
                 tvfuzz::same_bits(p.softmax_scale, prob.softmax_scale),
             "plan does not describe the problem: %s", fingerprint(p).c_str());
  int32_t max_tree = 0;
  int64_t max_kv = 0, work = 0;
  for (int32_t b = 0; b < B; ++b) {
    max_tree = std::max(max_tree, qo[b + 1] - qo[b]);
    max_kv = std::max<int64_t>(max_kv, kv_len[b]);
    work += int64_t{qo[b + 1] - qo[b]} * prob.num_heads * kv_len[b];
  }
  FUZZ_CHECK(p.max_tree == max_tree && p.max_kv_len == max_kv,
             "max_tree %d/%d max_kv_len %lld/%lld", p.max_tree, max_tree, (long long)p.max_kv_len,
             (long long)max_kv);

  // ---- run, when small ---------------------------------------------------------------------
  const int64_t ps = prob.page_size;
  if (prob.num_pages > kMaxPoolTokens / ps || work > kMaxWork) return 0;
  tvfuzz::Stats::count(2);
  const int32_t H = prob.num_heads;
  const DType dt = prob.dtype;
  const bool e4m3 = prob.kv_format == KvFormat::kE4M3;
  const int64_t pool_rows = prob.num_pages * ps;
  const int64_t row_bytes = kv_row_bytes(prob.kv_format, dt);

  const uint64_t seed = in.u64();
  const uint8_t dmode = in.u8() % 4;
  float kv_scale_value;
  {
    const uint8_t v = in.u8();
    kv_scale_value = v < 224 ? (1 + v) / 64.f : tvfuzz::special_float(in);
  }
  const Buf<float> kv_scale(1);
  kv_scale[0] = kv_scale_value;
  const int64_t q_head = strided_q ? kQKDim + 8 * (in.u8() % 3) : kQKDim;
  const int64_t q_tok = strided_q ? H * q_head + 8 * (in.u8() % 3) : int64_t{H} * kQKDim;
  const int64_t o_head = strided_out ? kVDim + 8 * (in.u8() % 3) : kVDim;
  const int64_t o_tok = strided_out ? H * o_head + 8 * (in.u8() % 3) : int64_t{H} * kVDim;
  auto extent = [&](int64_t tok, int64_t head, int64_t width) {
    return total_q == 0 ? 0 : (total_q - 1) * tok + (H - 1) * head + width;
  };
  Buf<uint16_t> q(extent(q_tok, q_head, kQKDim)), out(extent(o_tok, o_head, kVDim));
  Buf<uint8_t> kv(pool_rows * row_bytes);  // 16-bit values or e4m3 bytes
  Buf<float> lse(lse_null ? 0 : size_t(total_q) * H);

  tvfuzz::Rng rng{seed};
  // The bulk loops over q, KV and out are kept out of libFuzzer's comparison tracing (TVFUZZ_HOT):
  // they compare nothing the input steers, and would otherwise take most of the time.
  auto value = [&]() TVFUZZ_HOT -> uint16_t {
    switch (dmode) {
      case 0:
        return float_to_half(dt, rng.sym());
      case 1:
        return static_cast<uint16_t>(rng.next());
      case 2:
        return 0;
      default:
        return float_to_half(dt, rng.sym() * 1e4f);
    }
  };
  auto value8 = [&]() TVFUZZ_HOT -> uint8_t {
    switch (dmode) {
      case 0:
        return float_to_e4m3(rng.sym());
      case 1:
        return static_cast<uint8_t>(rng.next());
      case 2:
        return 0;
      default:
        return float_to_e4m3(rng.sym() * 1e4f);
    }
  };
  // KV value c of pool row r: set, and read back as a float (e4m3: the stored value, unscaled).
  auto set_kv = [&](int64_t r, int c, float f, bool raw, uint16_t bits) TVFUZZ_HOT {
    if (e4m3) {
      kv[r * row_bytes + c] = raw ? static_cast<uint8_t>(bits) : float_to_e4m3(f);
    } else {
      const uint16_t h = raw ? bits : float_to_half(dt, f);
      std::memcpy(&kv[r * row_bytes + 2 * c], &h, 2);
    }
  };
  auto kv_value = [&](int64_t r, int c) TVFUZZ_HOT {
    if (e4m3) return e4m3_to_float(kv[r * row_bytes + c]);
    uint16_t h;
    std::memcpy(&h, &kv[r * row_bytes + 2 * c], 2);
    return half_to_float(dt, h);
  };
  // KV rows that are some request's token; every other row stays poisoned.
  std::vector<uint8_t> used(pool_rows, 0);
  [&]() TVFUZZ_HOT {
    for (int32_t b = 0; b < B; ++b) {
      for (int64_t tok = 0; tok < kv_len[b]; ++tok) {
        used[int64_t{kpidx[kpi[b] + tok / ps]} * ps + tok % ps] = 1;
      }
    }
  }();
  std::vector<int64_t> used_rows;
  [&]() TVFUZZ_HOT {
    for (int64_t r = 0; r < pool_rows; ++r) {
      if (used[r]) {
        used_rows.push_back(r);
        for (int c = 0; c < kQKDim; ++c) {
          if (e4m3)
            set_kv(r, c, 0.f, true, value8());
          else
            set_kv(r, c, 0.f, true, value());
        }
      }
    }
    for (int32_t row = 0; row < total_q; ++row) {
      for (int32_t h = 0; h < H; ++h) {
        for (int c = 0; c < kQKDim; ++c) q[row * q_tok + h * q_head + c] = value();
      }
    }
  }();
  for (int n = in.u8() % 8; n > 0; --n) {  // NaN, inf and huge values at chosen places
    const bool in_q = in.flag();
    const uint32_t where = in.u32();
    const float f = tvfuzz::special_float(in);
    const int c = where % kQKDim;
    if (in_q && total_q > 0) {
      const int64_t r = (where / kQKDim) % (int64_t{total_q} * H);
      q[(r / H) * q_tok + (r % H) * q_head + c] = float_to_half(dt, f);
    } else if (!in_q && !used_rows.empty()) {
      set_kv(used_rows[(where / kQKDim) % used_rows.size()], c, f, false, 0);
    }
  }
  std::fill(out.data(), out.data() + out.size(), kOutSentinel);
  for (size_t i = 0; i < lse.size(); ++i) std::memcpy(&lse[i], &kLseSentinel, 4);

  // Poison what must not be touched: KV rows no request uses, the padding of q and out.
  for (int64_t r = 0; r < pool_rows; ++r) {
    if (!used[r]) ASAN_POISON_MEMORY_REGION(&kv[r * row_bytes], row_bytes);
  }
  auto poison_gaps = [&](const Buf<uint16_t>& buf, int64_t tok, int64_t head, int64_t width,
                         bool poison) TVFUZZ_HOT {
    // Walk the buffer's elements in order; those outside every row [start, start + width) are
    // padding.
    int64_t pos = 0;
    for (int32_t row = 0; row < total_q; ++row) {
      for (int32_t h = 0; h < H; ++h) {
        const int64_t start = row * tok + h * head;
        if (start > pos) {
          if (poison)
            ASAN_POISON_MEMORY_REGION(&buf[pos], (start - pos) * 2);
          else
            ASAN_UNPOISON_MEMORY_REGION(&buf[pos], (start - pos) * 2);
        }
        pos = start + width;
      }
    }
  };
  poison_gaps(q, q_tok, q_head, kQKDim, true);
  poison_gaps(out, o_tok, o_head, kVDim, true);

  VerifyTensors t;
  t.q = q.data();
  t.q_stride_token = strided_q ? q_tok : 0;
  t.q_stride_head = strided_q ? q_head : 0;
  t.kv_cache = kv.data();
  t.kv_scale = e4m3 ? kv_scale.data() : nullptr;
  if (e4m3) tvfuzz::Stats::count(3);
  if (bad_variant != 0) tvfuzz::Stats::count(4);
  t.qo_indptr = prob.qo_indptr;
  t.kv_len = prob.kv_len;
  t.kv_page_indptr = prob.kv_page_indptr;
  t.kv_page_indices = prob.kv_page_indices;
  t.parents = prob.parents;
  t.out = out.data();
  t.out_stride_token = strided_out ? o_tok : 0;
  t.out_stride_head = strided_out ? o_head : 0;
  t.lse = lse_null ? nullptr : lse.data();

  auto call = [&](const Plan& plan_used, const VerifyTensors& tt) {
    return use_verify_cpu ? verify_cpu(prob, tt, opt) : run(plan_used, tt, nullptr, 0);
  };
  auto out_untouched = [&]() TVFUZZ_HOT {
    poison_gaps(out, o_tok, o_head, kVDim, false);
    for (size_t i = 0; i < out.size(); ++i) {
      FUZZ_CHECK(out[i] == kOutSentinel, "out[%zu] written by a failed call", i);
    }
    for (size_t i = 0; i < lse.size(); ++i) {
      FUZZ_CHECK(std::memcmp(&lse[i], &kLseSentinel, 4) == 0, "lse[%zu] written by a failed call",
                 i);
    }
    poison_gaps(out, o_tok, o_head, kVDim, true);
  };

  // Invalid tensors: a named error, nothing written.
  if (bad_variant == 13) {  // kv_scale missing for e4m3, or given for a 16-bit cache
    VerifyTensors bt = t;
    bt.kv_scale = e4m3 ? nullptr : kv_scale.data();
    const Status s = call(p, bt);
    if (total_q > 0) {
      FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument &&
                     s.message().find("argument 'kv_scale'") != std::string::npos,
                 "kv_scale %s: %s", e4m3 ? "missing" : "given", s.to_string().c_str());
    }
    out_untouched();
  } else if (bad_variant != 0 && total_q > 0) {
    VerifyTensors bt = t;
    Plan bp = p;
    const char* arg = nullptr;
    Buf<int32_t> qo_changed;
    switch (bad_variant) {
      case 1:
        bt.out = nullptr, arg = "out";
        break;
      case 2:
        bt.q = nullptr, arg = "q";
        break;
      case 3:
        bt.kv_cache = nullptr, arg = "kv_cache";
        break;
      case 4:
        bt.q = reinterpret_cast<const char*>(t.q) + 2, arg = "q";
        break;
      case 5:
        bt.out = reinterpret_cast<char*>(t.out) + 2, arg = "out";
        break;
      case 6:
        bt.out_stride_head = kVDim - 1, arg = "out_stride_head";
        break;
      case 7:
        bt.q_stride_head = kQKDim + 4, arg = "q_stride_head";
        break;
      case 8:
        bt.out_stride_token = int64_t{H} * o_head - 8, bt.out_stride_head = o_head,
        arg = "out_stride_token";
        break;
      case 9:
        qo_changed = Buf<int32_t>(qo);
        qo_changed[B] += 1;
        bt.qo_indptr = qo_changed.data(), arg = "qo_indptr";
        break;
      case 10:
        bt.parents = nullptr, arg = "parents";
        break;
      case 11:
        if (lse_null) {
          bt.kv_page_indices = nullptr, arg = "kv_page_indices";
        } else {
          bt.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(t.lse) + 1), arg = "lse";
        }
        break;
      default:
        if (use_verify_cpu) {
          bt.kv_page_indices = nullptr, arg = "kv_page_indices";
        } else {
          bp = Plan{}, arg = "plan";
        }
        break;
    }
    const Status s = call(bp, bt);
    FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument, "invalid tensors (variant %d) gave %s",
               bad_variant, s.to_string().c_str());
    const std::string named = std::string("argument '") + arg + "'";
    FUZZ_CHECK(s.message().find(named) != std::string::npos, "variant %d: %s does not name %s",
               bad_variant, s.to_string().c_str(), named.c_str());
    out_untouched();
  }

  const Status s = call(p, t);
  if (e4m3 && !std::isfinite(kv_scale_value) && total_q > 0) {
    FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument &&
                   s.message().find("argument 'kv_scale'") != std::string::npos,
               "kv_scale = %g: %s", kv_scale_value, s.to_string().c_str());
    out_untouched();
    poison_gaps(out, o_tok, o_head, kVDim, false);
    for (int64_t r = 0; r < pool_rows; ++r) {
      if (!used[r]) ASAN_UNPOISON_MEMORY_REGION(&kv[r * row_bytes], row_bytes);
    }
    poison_gaps(q, q_tok, q_head, kQKDim, false);
    return 0;
  }
  FUZZ_CHECK(s.ok(), "%s on a planned problem: %s", use_verify_cpu ? "verify_cpu" : "run",
             s.to_string().c_str());
  tvfuzz::Stats::count(5);
  poison_gaps(out, o_tok, o_head, kVDim, false);
  for (int64_t r = 0; r < pool_rows; ++r) {
    if (!used[r]) ASAN_UNPOISON_MEMORY_REGION(&kv[r * row_bytes], row_bytes);
  }
  poison_gaps(q, q_tok, q_head, kQKDim, false);

  // Every value written, no padding touched.
  [&]() TVFUZZ_HOT {
    std::vector<uint8_t> in_row(out.size(), 0);
    for (int32_t row = 0; row < total_q; ++row) {
      for (int32_t h = 0; h < H; ++h) {
        std::fill_n(&in_row[row * o_tok + h * o_head], kVDim, 1);
      }
    }
    for (size_t i = 0; i < out.size(); ++i) {
      FUZZ_CHECK((out[i] == kOutSentinel) != (in_row[i] == 1), "out element %zu: %s", i,
                 in_row[i] ? "not written" : "padding written");
    }
    for (size_t i = 0; i < lse.size(); ++i) {
      FUZZ_CHECK(std::memcmp(&lse[i], &kLseSentinel, 4) != 0, "lse[%zu] not written", i);
    }
  }();

  // The non-finite policy (verify.h).
  const bool reference = p.backend == Backend::kCpuReference;
  [&]() TVFUZZ_HOT {
    for (int32_t b = 0; b < B; ++b) {
      const int32_t T = qo[b + 1] - qo[b];
      const int64_t L = kv_len[b] - T;
      // A stored NaN or infinity (e4m3 has only NaN); an e4m3 value whose product with kv_scale
      // overflows float is left out (the float64 oracle does not overflow there).
      auto token_bad = [&](int64_t tok) TVFUZZ_HOT {
        const int64_t r = int64_t{kpidx[kpi[b] + tok / ps]} * ps + tok % ps;
        for (int c = 0; c < kQKDim; ++c) {
          if (!std::isfinite(kv_value(r, c))) return true;
        }
        return false;
      };
      bool prefix_bad = false;
      for (int64_t tok = 0; tok < L && !prefix_bad; ++tok) prefix_bad = token_bad(tok);
      for (int32_t i = 0; i < T; ++i) {
        bool sees_bad = prefix_bad;
        for (int32_t j = i; j >= 0 && !sees_bad; j = parents[qo[b] + j])
          sees_bad = token_bad(L + j);
        for (int32_t h = 0; h < H; ++h) {
          const int64_t row = qo[b] + i;
          bool bad = sees_bad;
          for (int c = 0; c < kQKDim && !bad; ++c) {
            bad = !std::isfinite(decode_half(dt, q[row * q_tok + h * q_head + c]));
          }
          const uint16_t* o = &out[row * o_tok + h * o_head];
          int nan_count = 0;
          for (int c = 0; c < kVDim; ++c) nan_count += std::isnan(decode_half(dt, o[c]));
          const bool lse_nan = lse_null || std::isnan(lse[row * H + h]);
          if (bad) {
            FUZZ_CHECK(nan_count == kVDim && lse_nan,
                       "request %d node %d head %d sees a non-finite value: %d NaN outputs, lse %g",
                       b, i, h, nan_count, lse_null ? 0.0 : double(lse[row * H + h]));
          } else if (reference) {
            FUZZ_CHECK(nan_count == 0 && (lse_null || !std::isnan(lse[row * H + h])),
                       "cpu-reference: request %d node %d head %d sees only finite values: %d NaN "
                       "outputs",
                       b, i, h, nan_count);
          }
        }
      }
    }
  }();
  return 0;
}

}  // namespace

FUZZ_ENTRY(body)
