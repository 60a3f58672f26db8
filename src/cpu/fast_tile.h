// The inner loop of the CPU fast backend: a block of query rows of one request against a range
// of its KV tokens, tile by tile, with an online softmax. fast.cpp schedules these ranges.
#pragma once

#include <cstdint>
#include <vector>

#include "cpu/cpu_util.h"
#include "treeverify/verify.h"

namespace treeverify::detail::fast {

// Tuning constants: they change speed, never results.
// KV tokens per tile: 128 x 576 fp32 = 288 KB gathered once and read by both products while it
// is still in L2; the S tile (rows x 128) is wide enough for BLAS to run at full rate.
inline constexpr int kTileTokens = 128;
// Query rows per work item (row = node * H + head): the KV gather costs 576 conversions per
// token against 2 * 1088 flops per token and row, so 256 rows make it negligible, while the
// per-thread scratch stays about 1.3 MB.
inline constexpr int kRowBlock = 256;
static_assert(kTileTokens > 0 && kRowBlock > 0);

// Facts about one request shared by all its work items, built before the threads start.
struct FastRequest {
  RequestSpan span;
  int32_t words_per_row = 0;
  // [T * words_per_row]: bit j of node i's words is set iff tree node j is i or an ancestor.
  std::vector<uint32_t> ancestors;
};
// Request b's span and ancestor mask (inputs already validated by plan()).
Status make_fast_request(const VerifyTensors& tensors, int32_t b, FastRequest* req);

// Per-thread buffers, allocated up front so that workers never allocate (and so never fail
// half-way through writing the output).
struct Scratch {
  std::vector<float> q, kv, s, o, m;
  std::vector<double> l;
  Scratch();
};

// Softmax state of a block of rows: o [rows, 512] unnormalised, m the running max of the scaled
// scores (-inf while nothing was seen), l the sum of exp(s - m).
struct RowState {
  float* o;
  float* m;
  double* l;
};

// Attends rows [row0, row0 + rows) of `req` (rows <= kRowBlock) to its KV tokens [tok0, tok1),
// writing a fresh state to `state`.
void attend_range(const Plan& plan, const VerifyTensors& tensors, const FastRequest& req,
                  int64_t row0, int32_t rows, int64_t tok0, int64_t tok1, Scratch* scratch,
                  RowState state);

}  // namespace treeverify::detail::fast
