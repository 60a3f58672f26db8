// fuzz_plan's problem decoder and the contract it is checked against (fuzz_plan_problem.h).
#include "fuzz_plan_problem.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace tvfuzz::plan {

using namespace treeverify;

namespace {

constexpr int64_t kMaxPageEntries = int64_t{1} << 20;

bool well_formed_indptr(const std::vector<int32_t>& a, int32_t B, int64_t max_step) {
  if (static_cast<int64_t>(a.size()) < int64_t{B} + 1 || a[0] != 0) return false;
  for (int32_t b = 0; b < B; ++b) {
    const int64_t d = int64_t{a[b + 1]} - a[b];
    if (d < 0 || d > max_step) return false;
  }
  return true;
}

// Request b's page table replaced by a sparse one for a kv_len near 2^31 (page sizes 64 and
// 128: at most 2^25 entries): one input-chosen page for every entry, a few entries set to
// other pages or to ids outside the pool, and at times one entry too few. False, the arrays
// left alone, when they are not a well-formed batch of this size.
bool make_huge(Input& in, const VerifyProblem& prob, std::vector<int32_t>* qo,
               std::vector<int32_t>* kv_len, std::vector<int32_t>* kpi,
               std::vector<int32_t>* kpidx) {
  const int32_t B = prob.batch_size, ps = prob.page_size;
  if (B < 1 || (ps != 64 && ps != 128) || prob.num_pages < 1 ||
      !well_formed_indptr(*qo, B, kMaxTreeSize) || !well_formed_indptr(*kpi, B, INT64_MAX) ||
      static_cast<int64_t>(kv_len->size()) < B || kpidx->size() < size_t((*kpi)[B]))
    return false;
  const int32_t b = in.u8() % B;
  const int32_t len = in.pick<int32_t>(
      {kI32Max, kI32Max - 1, kI32Max - (ps - 1), kI32Max - ps, 1 << 30, (*qo)[b + 1] - (*qo)[b]});
  const int64_t n = (int64_t{len} + ps - 1) / ps + in.pick<int64_t>({0, 1, -1});
  const int64_t pool = std::min<int64_t>(prob.num_pages, 256);
  std::vector<int32_t> table(std::max<int64_t>(n, 0), in.u8() % pool);
  for (int k = in.u8() % 4; k > 0 && !table.empty(); --k) {
    table[in.u32() % table.size()] = in.pick<int32_t>(
        {int32_t(in.u8() % pool), -1, int32_t(std::min<int64_t>(prob.num_pages, kI32Max))});
  }
  const int64_t begin = (*kpi)[b], end = (*kpi)[b + 1];
  kpidx->erase(kpidx->begin() + begin, kpidx->begin() + end);
  kpidx->insert(kpidx->begin() + begin, table.begin(), table.end());
  for (int32_t j = b + 1; j <= B; ++j)
    (*kpi)[j] =
        static_cast<int32_t>((*kpi)[j] + static_cast<int64_t>(table.size()) - (end - begin));
  (*kv_len)[b] = len;
  return true;
}

}  // namespace

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
                    int64_t(p.state.chunk_tokens),
                    int64_t(p.state.num_chunks),
                    int64_t(p.state.config_arch),
                    int64_t(p.device),
                    int64_t(p.state.variant),
                    int64_t(p.state.id),
                    int64_t(p.state.programmatic_combine)}) {
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
  p.state.chunk_tokens = 5, p.state.num_chunks = 6, p.state.config_arch = 7, p.device = 8;
  p.state.variant = 9;
  p.state.id = 0xdeadbeef;
  p.state.programmatic_combine = true;
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

bool decode_problem(Input& in, PlanInput* d) {
  VerifyProblem& prob = d->prob;
  PlanOptions& opt = d->opt;

  // ---- scalars ---------------------------------------------------------------------------
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
  {
    const uint8_t v = in.u8();
    switch (v % 8) {
      case 0:
      case 3:
        opt.backend = Backend::kCpuReference;
        break;
      case 1:
      case 4:
        opt.backend = Backend::kCpu;
        break;
      case 2:
      case 5:
        opt.backend = Backend::kAuto;
        break;
      case 6:
        opt.backend = Backend::kCuda;
        break;
      default:
        opt.backend = static_cast<Backend>(in.i32());
        break;
    }
    // Past the hardware's threads too (capped), and negative (refused).
    opt.num_threads =
        in.pick<int>({0, 1, 2, 3, -1, 1000, tvfuzz::kI32Max, tvfuzz::kI32Min, 1 << 20});
  }
  const uint8_t flags = in.u8();
  opt.round_p = flags & 1;
  d->use_verify_cpu = flags & 2;
  d->lse_null = flags & 4;
  // q and out: a stride bit (8, 16) and a one-stride bit (32, 64). Both strides given (padded
  // heads and tokens); with the one-stride bit only the head stride (token stride 0, which
  // means H head strides: core/strides.h, which every backend must resolve alike); the
  // one-stride bit alone, only the token stride (head stride 0: the row width); neither, both
  // 0 (contiguous).
  auto layout = [&](uint8_t strided, uint8_t one_stride) {
    if (flags & strided)
      return flags & one_stride ? PlanInput::kHeadStrideOnly : PlanInput::kBothStrides;
    return flags & one_stride ? PlanInput::kTokenStrideOnly : PlanInput::kContiguous;
  };
  d->q_layout = layout(8, 32);
  d->out_layout = layout(16, 64);
  const uint8_t bad_byte = in.u8();
  d->bad_variant = bad_byte < 160 ? 0 : 1 + (bad_byte - 160) % 13;

  // ---- a valid batch, from the input -------------------------------------------------------
  const int32_t B = prob.batch_size;
  const int32_t nreq = std::max(B, 0);
  const int32_t ps_for_layout = is_valid_page_size(prob.page_size) ? prob.page_size : 4;
  std::vector<int32_t>& qo = d->qo;
  std::vector<int32_t>& kv_len = d->kv_len;
  std::vector<int32_t>& kpi = d->kpi;
  std::vector<int32_t>& kpidx = d->kpidx;
  std::vector<int32_t>& parents = d->parents;
  qo = {0}, kpi = {0};
  kv_len.clear(), kpidx.clear(), parents.clear();
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
      if (kpi[B] > kMaxPageEntries) return false;  // a valid page table too large to allocate
      grow(kpidx, size_t(kpi[B]));
    }
  }
  // The nulls byte, read before the arrays are copied (nothing is read in between): from 128
  // it nulls arrays, from 64 to 127 it gives one request a kv_len near 2^31 over a sparse page
  // table instead (issue 52: valid lengths at the int32 edge over few pages).
  const uint8_t v = in.u8();
  d->huge = v >= 64 && v < 128 && make_huge(in, prob, &qo, &kv_len, &kpi, &kpidx);
  d->qo_buf = Buf<int32_t>(qo);
  d->kv_len_buf = Buf<int32_t>(kv_len);
  d->kpi_buf = Buf<int32_t>(kpi);
  d->kpidx_buf = Buf<int32_t>(kpidx);
  d->parents_buf = Buf<int32_t>(parents);
  {
    const uint8_t nulls = (v & 0x80) ? v : 0;
    prob.qo_indptr = (nulls & 1) ? nullptr : d->qo_buf.data();
    prob.kv_len = (nulls & 2) ? nullptr : d->kv_len_buf.data();
    prob.kv_page_indptr = (nulls & 4) ? nullptr : d->kpi_buf.data();
    prob.kv_page_indices = (nulls & 8) ? nullptr : d->kpidx_buf.data();
    prob.parents = (nulls & 16) ? nullptr : d->parents_buf.data();
  }

  return true;
}

}  // namespace tvfuzz::plan
