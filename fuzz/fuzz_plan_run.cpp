// fuzz_plan's run-and-check on the CPU backends (fuzz_plan_run.h).
#include "fuzz_plan_run.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "treeverify/half.h"

namespace tvfuzz::plan {

using namespace treeverify;

namespace {

constexpr uint16_t kOutSentinel = 0xffff;  // a NaN payload neither conversion ever produces
constexpr uint32_t kLseSentinel = 0xffffffffu;

float decode_half(DType dtype, uint16_t h) { return half_to_float(dtype, h); }

}  // namespace

void check_run(Input& in, const PlanInput& d, const Plan& p) {
  const VerifyProblem& prob = d.prob;
  const PlanOptions& opt = d.opt;
  const std::vector<int32_t>& qo = d.qo;
  const std::vector<int32_t>& kv_len = d.kv_len;
  const std::vector<int32_t>& kpi = d.kpi;
  const std::vector<int32_t>& kpidx = d.kpidx;
  const std::vector<int32_t>& parents = d.parents;
  const bool use_verify_cpu = d.use_verify_cpu, lse_null = d.lse_null;
  const int bad_variant = d.bad_variant;
  const int32_t B = prob.batch_size;
  const int32_t total_q = B > 0 ? qo[B] : 0;
  const int64_t ps = prob.page_size;
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
    // From 248, the edges of the dequantization bound (FLT_MAX / 448 and the next float).
    kv_scale_value = v < 224   ? (1 + v) / 64.f
                     : v < 248 ? tvfuzz::special_float(in)
                               : in.pick<float>({kMaxKvScale, -kMaxKvScale,
                                                 std::nextafter(kMaxKvScale, INFINITY), 1e37f});
  }
  const Buf<float> kv_scale(1);
  kv_scale[0] = kv_scale_value;
  // The buffer's element strides (a stride the layout passes gets 0, 8 or 16 elements of
  // padding from the input) and the strides run() is given: 0 for one the layout leaves out,
  // which verify.h resolves from the other (token: H head strides; head: the row width).
  struct Strides {
    int64_t head, tok, head_arg, tok_arg;
  };
  auto strides = [&](PlanInput::Layout layout, int64_t width) {
    const bool head_given =
        layout == PlanInput::kBothStrides || layout == PlanInput::kHeadStrideOnly;
    const bool tok_given =
        layout == PlanInput::kBothStrides || layout == PlanInput::kTokenStrideOnly;
    const int64_t head = head_given ? width + 8 * (in.u8() % 3) : width;
    const int64_t tok = H * head + (tok_given ? 8 * (in.u8() % 3) : 0);
    return Strides{head, tok, head_given ? head : 0, tok_given ? tok : 0};
  };
  const Strides qs = strides(d.q_layout, kQKDim);
  const Strides os = strides(d.out_layout, kVDim);
  const int64_t q_head = qs.head, q_tok = qs.tok, o_head = os.head, o_tok = os.tok;
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
  t.q_stride_token = qs.tok_arg;
  t.q_stride_head = qs.head_arg;
  t.kv_cache = kv.data();
  t.kv_scale = e4m3 ? kv_scale.data() : nullptr;
  if (e4m3) tvfuzz::Stats::count(3);
  if (d.q_layout == PlanInput::kHeadStrideOnly || d.out_layout == PlanInput::kHeadStrideOnly)
    tvfuzz::Stats::count(6);
  if (bad_variant != 0) tvfuzz::Stats::count(4);
  t.qo_indptr = prob.qo_indptr;
  t.kv_len = prob.kv_len;
  t.kv_page_indptr = prob.kv_page_indptr;
  t.kv_page_indices = prob.kv_page_indices;
  t.parents = prob.parents;
  t.out = out.data();
  t.out_stride_token = os.tok_arg;
  t.out_stride_head = os.head_arg;
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
  // types.h: |kv_scale| <= kMaxKvScale (false for NaN and inf) runs, anything else is
  // refused; and that bound keeps 448 x kv_scale, the largest value dequantized, finite.
  const bool scale_ok = std::fabs(kv_scale_value) <= kMaxKvScale;
  FUZZ_CHECK(!scale_ok || std::isfinite(448.f * kv_scale_value), "kv_scale %g", kv_scale_value);
  if (e4m3 && !scale_ok && total_q > 0) {
    FUZZ_CHECK(s.code() == StatusCode::kInvalidArgument &&
                   s.message().find("argument 'kv_scale'") != std::string::npos,
               "kv_scale = %g: %s", kv_scale_value, s.to_string().c_str());
    out_untouched();
    poison_gaps(out, o_tok, o_head, kVDim, false);
    for (int64_t r = 0; r < pool_rows; ++r) {
      if (!used[r]) ASAN_UNPOISON_MEMORY_REGION(&kv[r * row_bytes], row_bytes);
    }
    poison_gaps(q, q_tok, q_head, kQKDim, false);
    return;
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
      // A stored NaN or infinity (e4m3 has only NaN); an e4m3 value times a kv_scale that
      // passed is always finite (kMaxKvScale).
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
}

}  // namespace tvfuzz::plan
