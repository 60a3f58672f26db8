// Tile configurations of the portable mma.sync verify kernel. These constants change speed,
// never results: every configuration computes the same function (the GPU tests force each).
//
// The budget (docs/DESIGN.md section 5): a CTA holds kRows query rows (heads x tree nodes of one
// request) against a stream of KV tiles. Per query row the fp32 output is 512 floats and the
// 16-bit query 576 values; with 8 warps and kRows = 32 that is 64 + 72 registers per thread
// (O split by columns, Q split along the 576-deep dot product), which leaves shared memory
// to the KV pipeline. Measured figures and what limits each variant:
// docs/kernels/portable-mma.md.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <type_traits>

#include "cuda/common/constants.h"
#include "cuda/common/params.h"

namespace treeverify::cuda::sm80 {

// kQKDim (576) and kVDim (512): treeverify/types.h, through cuda/common/constants.h.
// Warps a CTA: 8 (two a scheduler), or 16 (four, at 128 registers a thread).
inline constexpr int kWarpsDefault = 8;
// Q.K^T: warp w = (kgroup, sub). The 576-deep product is split over kKGroups k-groups (4 of
// 144, 9 k-steps of 16, or 2 of 288), so each warp keeps its Q slice in registers for the
// whole chunk: at most 32 rows x 144 or 16 rows x 288 (72 registers). The warps of a k-group
// split the rows or the tokens of the tile (Variant::kQKRowGroups, kQKTokenGroups), and the
// k-group partial score tiles are summed in shared memory by the softmax.
inline constexpr int kKGroupsDefault = 4;
// KV rows are padded by 16 bytes so the 8 rows one ldmatrix phase reads fall in 8 different
// 16-byte bank groups (1152 is a multiple of 128: unpadded, all 8 would share one group).
inline constexpr int kKVRowBytes = kQKDim * 2 + 16;  // 1168

// One kernel variant: kMTiles m16 tiles of rows per CTA and a kStages-deep pipeline of
// kTokens-token KV tiles, copied 16 bytes a thread by cp.async, or (kBulk, sm_90+) a row per
// bulk copy completing on one mbarrier per stage.
template <int kMTiles_, int kStages_, bool kBulk_ = false, int kTokens_ = 32,
          int kKGroups_ = kKGroupsDefault, int kWarps_ = kWarpsDefault>
struct Variant {
  static constexpr int kMTiles = kMTiles_;
  static constexpr int kWarps = kWarps_;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kKGroups = kKGroups_;
  static constexpr int kKSteps = kQKDim / 16 / kKGroups;  // 9 or 18: a warp's k16 steps
  static constexpr int kQKSubs = kWarps / kKGroups;       // 2 or 4: warps a k-group
  static constexpr bool kBulk = kBulk_;
  static constexpr int kRows = 16 * kMTiles;
  static constexpr int kStages = kStages_;
  static constexpr int kTokens = kTokens_;                   // KV tokens a tile (a pipeline stage)
  static constexpr int kClusterCtas = 1;                     // CTAs a row block
  static constexpr int kRowBytes = kKVRowBytes;              // a KV row in a stage
  static constexpr int kStageBytes = kTokens * kKVRowBytes;  // 37376 at 32 tokens
  // Partial scores [kKGroups][rows][kRedStride] fp32: a stride of 8 floats more than the tile
  // (40 or 24) puts the 4 rows of a half-warp's float2 stores of mma fragments in 4 different
  // 8-bank groups, so the stores take the minimum 2 wavefronts.
  static constexpr int kRedStride = kTokens + 8;
  // The epilogue's 16-bit stores (tile_ops.cuh): a quad's 16 adjacent columns at a time
  // (store_quad_columns: whole sectors, one shuffle), or 2 columns a lane in the 64-row
  // variants, which have no register to spare: at 255 registers the exchange spills 4 bytes
  // of r64-s3-t16 on sm_120 and 8 of r64-s4 on sm_100 (nvcc 13.0).
  static constexpr bool kQuadStores = kRows < 64;
  // P [rows][kPStride] 16-bit: 80 or 48-byte rows are conflict-free for ldmatrix.
  static constexpr int kPStride = kTokens + 8;
  // With three or more stages the loop overlaps the score product of tile i+1 with the P.V
  // product of tile i (the one-loop schedule: two barriers per tile instead of three; the
  // halves below have their own); with two stages that would leave no stage free to prefetch
  // into, so the loop runs the phases in order.
  static constexpr bool kOverlap = kStages >= 3;
  // Where a thread copies tile i+kStages-1: after its products of tile i (kLateCopies), or at
  // the start of tile i. Late copies keep the burst from queueing ahead of the softmax's loads
  // but land one tile closer to their use: 4 stages afford that, 3 do not (V1 10% slower). In
  // the 4-stage halves, half B's copies also go after its products (H200:
  // docs/kernels/portable-mma.md, "The three main loops").
  static constexpr bool kLateCopies = kStages >= 4;
  // Two halves (kHalves, 64-row CTAs of 32-token tiles): warps 0-3 hold rows 0-31 and warps
  // 4-7 rows 32-63 through every step, so the halves meet only at one CTA barrier a tile, and
  // one runs its softmax while the other runs its products (the loop in kernel.cuh). With
  // 16-token tiles (sm_86/89/120) the halves gain only 2-3% (H200) and spill 8 bytes on
  // sm_120, so those keep the loop of the smaller CTAs.
  static constexpr bool kHalves = kMTiles == 4 && kStages >= 3 && !kBulk && kTokens == 32;
  // P.V: the O tile a warp owns. Halves: 32 rows x 128 columns; otherwise all rows x 64 columns.
  static constexpr int kOMTiles = kHalves ? kMTiles / 2 : kMTiles;
  static constexpr int kOCols = kHalves ? kVDim / (kWarps / 2) : kVDim / kWarps;
  static constexpr int kONTiles = kOCols / 8;  // 16 or 8: 8-column mma tiles
  static constexpr int kWarpsPerHalf = kWarps / 2;
  static constexpr int half_of(int warp) { return warp / kWarpsPerHalf; }  // 0: A, 1: B
  static constexpr int o_row0(int warp) { return kHalves ? half_of(warp) * 32 : 0; }
  static constexpr int o_col0(int warp) {
    return kHalves ? (warp % kWarpsPerHalf) * kOCols : warp * kOCols;
  }
  // Exact mode on an e4m3 cache: the 16 and 32-row variants widen K and V to fp16 in registers
  // after each ldmatrix (fp8_ops.cuh); the 64-row ones, at 255 registers, spill 8-48 bytes
  // that way on sm_90, sm_100 or sm_120 (nvcc 13.0), so they widen each tile to fp16 in
  // shared memory first (dequantize_tile). Same products, same results.
  static constexpr bool kE4M3InRegisters = kMTiles < 4;
  // 16-row CTAs fit in 128 registers a thread: ask for two CTAs per SM to hide latency.
  static constexpr int kMinBlocks = kMTiles == 1 ? 2 : 1;
  // Score product: m16 tiles of Q a warp holds (at most 32 rows x 144 deep, 16 x 288), how
  // the warps of a k-group split the CTA (kQKRowGroups x kQKTokenGroups = kQKSubs), and the
  // 16-token passes a warp makes a tile.
  // A warp's Q slice is kQKMTiles x 144 / kKGroups x 4 registers: 72 with 8 warps, 36 with 16.
  static constexpr int kQKMTiles = kMTiles < 2 ? kMTiles : kKGroups * 4 / kWarps;
  static constexpr int kQKRowGroups = kMTiles / kQKMTiles;
  static constexpr int kQKTokenGroups = kQKSubs / kQKRowGroups;
  static constexpr int kQKPasses = kTokens / 16 / kQKTokenGroups;
  // Softmax: warp w owns rows [kRowsPerWarp w, ...), kLanesPerRow lanes a row.
  static constexpr int kRowsPerWarp = kRows / kWarps;
  static constexpr int kLanesPerRow = 32 / kRowsPerWarp;
  static constexpr int kTokensPerLane = kTokens / kLanesPerRow;
  // Shared memory, in this order: the KV stages; the k-group partial scores s_red; P; a
  // per-row alpha and lse (fp32); the page-id ring (page-table entries of kStages tiles,
  // copied kStages - 1 tiles ahead of the KV rows they locate, so the copy loop never waits
  // on a global load); with kBulk, one mbarrier a stage.
  static constexpr int kRedOffset = kStages * kStageBytes;
  static constexpr int kPOffset = kRedOffset + kKGroups * kRows * kRedStride * 4;
  static constexpr int kAlphaOffset = kPOffset + kRows * kPStride * 2;
  static constexpr int kLseOffset = kAlphaOffset + kRows * 4;
  static constexpr int kIdxOffset = kLseOffset + kRows * 4;
  static constexpr int kBarOffset = kIdxOffset + kStages * kTokens * 4;
  static constexpr int kSmemBytes = kBarOffset + (kBulk ? kStages * 8 : 0);
  static_assert(kRowsPerWarp >= 1 && kTokensPerLane >= 2 && kTokensPerLane % 2 == 0);
  static_assert(kStages >= 2);
  static_assert(kKGroups == 4 || kKGroups == 2);
  static_assert(kWarps == 8 || (kWarps == 16 && kMTiles == 4 && kKGroups == 4 && kTokens == 16),
                "16 warps: the 64-row variant of 16-token tiles");
  static_assert(kQKMTiles >= 1 && kMTiles % kQKMTiles == 0);
  // Halves: a half's QK rows (the two warps of a k-group, w and w + kKGroups, split the rows
  // by w / kKGroups, which is half_of(w)) and softmax rows (kRowsPerWarp a warp) are the rows
  // of its O tiles.
  static_assert(!kHalves || (kQKRowGroups == 2 && kKGroups == kWarpsPerHalf &&
                             kRowsPerWarp * kWarpsPerHalf == 32));
  static_assert(kQKRowGroups * kQKTokenGroups == kQKSubs && kQKPasses >= 1);
  static_assert(kTokens == 16 || kTokens == 32, "a lane a token's page id, 8 threads its copy");
  static_assert(kTokens == 32 || kMTiles == 4, "16-token tiles: only 64-row CTAs split rows");
  // Q is staged through shared memory before the loop (copy_q, q_fragments). Where it fits
  // in the stage the prologue leaves empty and s_red after it (kQBesideCopies: all but the
  // 64-row variant of 16-token tiles), the first tiles' copies go out before Q has landed;
  // otherwise Q is staged from the first stage and the copies wait for it.
  static constexpr bool kQBesideCopies =
      (kStages - 1) * kStageBytes + kRows * kKVRowBytes <= kPOffset;
  static constexpr int kQOffset = kQBesideCopies ? (kStages - 1) * kStageBytes : 0;
  static_assert(kQOffset + kRows * kKVRowBytes <= kPOffset);
};

// The pair variant (sm_90+, which has clusters): a 64-row block computed by a cluster of two
// CTAs (pair_kernel.cuh). CTA r of the pair owns V's columns [256 r, 256 r + 256) and, of K's
// 576, those columns plus the rope columns [512 + 32 r, 512 + 32 r + 32): 288 of each KV row,
// which only it copies, so the pair reads each byte once. Each CTA computes its 64 x 32 fp32
// score partial over its 288 columns, keeps it and pushes it into its partner's shared memory
// (st.async completing on the partner's mbarrier); both sum the two, which gives the same bits
// in both (addition commutes), run the same softmax, and P.V over their own 256 columns.
// Threads (8 warps, two groups of 4: rows 0-31 and 32-63): warp w computes the scores of 16
// rows against 16 tokens over all 288 columns (Q: 72 registers), and O's rows 32 (w / 4) .. +
// 32 x columns 64 (w % 4) .. + 64 (64 registers). The softmax is the other variants' (8 rows a
// warp, 4 lanes a row). Loop: halves_loop's, a group's scores of tile i + 1 pushed before its
// P.V(i). No table selects it yet (PlanTuning::pair_ctas runs it).
struct PairVariant {
  static constexpr int kClusterCtas = 2;
  static constexpr int kWarps = kWarpsDefault;
  static constexpr int kThreads = kWarps * 32;
  static constexpr int kMTiles = 4;
  static constexpr int kRows = 64;
  static constexpr int kStages = 3;
  static constexpr int kTokens = 32;
  static constexpr bool kBulk = false;
  static constexpr bool kHalves = false;
  static constexpr int kVCols = kVDim / 2;                 // 256: O's columns a CTA
  static constexpr int kRopeCols = (kQKDim - kVDim) / 2;   // 32
  static constexpr int kDepth = kVCols + kRopeCols;        // 288: the Q.K depth a CTA
  static constexpr int kQKSteps = kDepth / 16;             // 18
  // 592 bytes: 37 x 16, odd, so an ldmatrix phase's 8 rows fall in 8 different bank groups.
  static constexpr int kRowBytes = kDepth * 2 + 16;
  static constexpr int kStageBytes = kTokens * kRowBytes;  // 18944
  // A score partial [rows][kRedStride] fp32 (conflict-free float2 fragment stores, as s_red).
  static constexpr int kRedStride = kTokens + 8;
  static constexpr int kScoreBytes = kRows * kRedStride * 4;  // 10240
  static constexpr int kScoreTxBytes = kRows * kTokens * 4;   // 8192: the bytes pushed a tile
  static constexpr int kPStride = kTokens + 8;
  static constexpr bool kQuadStores = false;
  static constexpr int kOMTiles = 2, kOCols = 64, kONTiles = kOCols / 8;
  static constexpr int o_row0(int warp) { return warp / 4 * 32; }
  static constexpr int o_col0(int warp) { return warp % 4 * kOCols; }
  static constexpr int kRowsPerWarp = kRows / kWarps;  // the softmax's, as in Variant
  static constexpr int kLanesPerRow = 32 / kRowsPerWarp;
  static constexpr int kTokensPerLane = kTokens / kLanesPerRow;
  static constexpr int kMinBlocks = 1;
  // Two groups: warps 4 g .. 4 g + 3 hold rows 32 g .. + 32 in every step (scores, softmax,
  // P.V), so the groups run half a tile apart (halves_loop's schedule, one's softmax beside the
  // other's products; faster than both groups in step: docs/kernels/portable-mma.md) and
  // exchange their partials with barriers of their own. Warp w's scores: rows score_row0 ..
  // + 16, tokens score_tok0 .. + 16 of the tile.
  static constexpr int kGroups = 2;
  static constexpr int score_row0(int warp) {
    return warp / 4 * 32 + warp % 2 * 16;
  }
  static constexpr int score_tok0(int warp) {
    return warp / 2 % 2 * 16;
  }
  // Shared memory, in this order: the KV stages (Q staged in stages 1-2 by the prologue); this
  // CTA's score partial; two receive buffers for the partner's (it pushes tile i + 1's while
  // this CTA may still read tile i's); P; a row's alpha and lse; the page-id ring; mbarriers
  // full[2] (the partner's bytes landed in receive buffer b) and empty[2] (the partner has read
  // what this CTA pushed into its buffer b).
  static constexpr int kOwnOffset = kStages * kStageBytes;
  static constexpr int kRecvOffset = kOwnOffset + kScoreBytes;
  static constexpr int kPOffset = kRecvOffset + 2 * kScoreBytes;
  static constexpr int kAlphaOffset = kPOffset + kRows * kPStride * 2;
  static constexpr int kLseOffset = kAlphaOffset + kRows * 4;
  static constexpr int kIdxOffset = kLseOffset + kRows * 4;
  static constexpr int kBarOffset = kIdxOffset + kStages * kTokens * 4;
  static constexpr int kSmemBytes = kBarOffset + 8 * 8;  // full[group][2], empty[group][2]
  static constexpr int kQOffset = kStageBytes;
  static_assert(kQOffset + kRows * kRowBytes <= kOwnOffset && kBarOffset % 8 == 0);
  static_assert(kTokens * 8 == kThreads, "8 threads copy a token");
};

// The variants, with the main loop (kernel.cuh) each runs: in_order_loop with 2 stages,
// halves_loop for 64 rows of 32-token tiles, overlap_loop otherwise.
using VariantR32S2 = Variant<2, 2>;  // 32 rows, 2 stages: fits 99 KB (sm_86/89/120); in_order
using VariantR32S3 = Variant<2, 3>;  // 32 rows, 3 stages: sm_80 (163 KB per block); overlap
using VariantR32S4 = Variant<2, 4>;  // 32 rows, 4 stages: sm_90/100 (227 KB per block); overlap
using VariantR16S2 = Variant<1, 2>;   // 16 rows (decode, H <= 16): half the mma work; in_order
using VariantR64S3 = Variant<4, 3>;   // 64 rows, 3 stages: sm_80 (163 KB per block); halves
using VariantR64S4 = Variant<4, 4>;   // 64 rows, 4 stages: sm_90/100 (227 KB per block); halves
using VariantR16S2Bulk = Variant<1, 2, true>;      // 16 rows, bulk copies (sm_90+); in_order
using VariantR64S3T16 = Variant<4, 3, false, 16>;  // 64 rows, 3 x 16 tokens: 99 KB; overlap
using VariantR64C2 = PairVariant;  // 64 rows, 3 x 32 tokens, a pair of CTAs: 99 KB, sm_90+
// 64 rows, 2 x 32 tokens, 2 k-groups (warps of 16 rows x 288 deep): half the partials a token
// to sum and 3 barriers a 32 tokens, in 99 KB; in_order. No table selects it yet
// (PlanTuning::variant runs it).
using VariantR64S2K2 = Variant<4, 2, false, 32, 2>;
// r64-s3-t16 on 16 warps (four a scheduler, 128 registers a thread): a warp's Q 16 rows x 144
// (36 registers), its O 64 rows x 32 columns (64); the same shared memory. No table selects
// it yet (PlanTuning::variant runs it).
using VariantR64S3T16W16 = Variant<4, 3, false, 16, 4, 16>;

// Whether code for SM version `sm` runs mma.sync e4m3 natively (one QMMA in the SASS: sm_89,
// sm_120 and sm_121): where Precision::kFast runs its FP8 products.
// sm_90 emulates them (fp16 HMMA after conversion); sm_100 is not verified.
constexpr bool native_fp8_mma(int sm) { return sm == 89 || sm == 120 || sm == 121; }

inline constexpr int kSmemLimitConsumer = 101376;  // per block on sm_86, sm_89, sm_120
static_assert(VariantR32S2::kSmemBytes <= kSmemLimitConsumer, "must fit sm_86/89/120");
static_assert(VariantR16S2::kSmemBytes <= kSmemLimitConsumer, "must fit sm_86/89/120");
static_assert(VariantR64S3T16::kSmemBytes <= kSmemLimitConsumer, "must fit sm_86/89/120");
static_assert(VariantR64C2::kSmemBytes <= kSmemLimitConsumer, "must fit sm_120");
static_assert(VariantR64S2K2::kSmemBytes <= kSmemLimitConsumer, "must fit sm_86/89/120");
static_assert(VariantR64S3T16W16::kSmemBytes <= kSmemLimitConsumer, "must fit sm_86/89/120");
static_assert(VariantR32S3::kSmemBytes <= 163 * 1024, "must fit sm_80");
static_assert(VariantR32S4::kSmemBytes <= 227 * 1024, "must fit sm_90/sm_100");
static_assert(VariantR64S3::kSmemBytes <= 163 * 1024, "must fit sm_80");
static_assert(VariantR64S4::kSmemBytes <= 227 * 1024, "must fit sm_90/sm_100");

// Which variant a plan runs, as recorded in Plan::variant.
enum class VariantId : int {
  kNone = -1,
  kR32S2 = 0,
  kR32S3 = 1,
  kR32S4 = 2,
  kR16S2 = 3,
  kR64S3 = 4,
  kR64S4 = 5,
  kR16S2Bulk = 6,
  kR64S3T16 = 7,
  kR64C2 = 8,
  kR64S2K2 = 9,
  kR64S3T16W16 = 10,
  kLast = kR64S3T16W16,
};

// Per-architecture table: the variant a device runs for requests of at most 16 rows, at most
// 32, and more. The 64-row variants read each KV tile into shared memory once for twice the
// rows of the 32-row ones; on the 99 KB a block of sm_86/89/120 they fit with 16-token tiles
// and 3 stages (4 stages of 16 tokens, squeezed into 99 KB, are 3-4% slower). With 4 stages
// the copies go out after the products (kLateCopies, 2.5-3% faster). Bulk copies (one
// instruction a KV row) make memory-bound decode 2.5% faster and the 64-row variant 17-20%
// slower, so only the 16-row variant uses them (sm_120 keeps cp.async: its bulk-copy speed is
// unmeasured). With an e4m3 cache (576-byte rows) they are slower (D1 0.158 ms against 0.132
// on r16-s2), so e4m3 decode takes `up_to_16_rows_e4m3`. Figures, H200:
// docs/kernels/portable-mma.md. What each architecture's code holds: variant_in_build below.
// The pair variant is in no table (it measured slower than r64-s3-t16 under the sm_120 table:
// docs/kernels/portable-mma.md, "The pair variant"); PlanTuning::pair_ctas runs it.
struct TileConfig {
  int arch;  // SM version the entry is for
  VariantId up_to_16_rows, up_to_32_rows, more_rows;
  VariantId up_to_16_rows_e4m3;  // `up_to_16_rows` for an e4m3 cache
};
inline constexpr TileConfig kTileConfigs[] = {
    {80, VariantId::kR16S2, VariantId::kR32S3, VariantId::kR64S3, VariantId::kR16S2},
    {86, VariantId::kR16S2, VariantId::kR32S2, VariantId::kR64S3T16, VariantId::kR16S2},
    {89, VariantId::kR16S2, VariantId::kR32S2, VariantId::kR64S3T16, VariantId::kR16S2},
    {90, VariantId::kR16S2Bulk, VariantId::kR32S4, VariantId::kR64S4, VariantId::kR16S2},
    {100, VariantId::kR16S2Bulk, VariantId::kR32S4, VariantId::kR64S4, VariantId::kR16S2},
    {120, VariantId::kR16S2, VariantId::kR32S2, VariantId::kR64S3T16, VariantId::kR16S2},
};

// The variant for SM version `sm` (the newest table entry not above it) and requests of at
// most `max_rows` query rows, on a 16-bit or an e4m3 cache: the fewest rows per CTA that cover
// a request, up to 64.
constexpr VariantId choose_variant(int sm, int64_t max_rows, bool e4m3 = false) {
  const TileConfig* cfg = nullptr;
  for (const TileConfig& c : kTileConfigs)
    if (c.arch <= sm) cfg = &c;
  if (cfg == nullptr) return VariantId::kNone;
  if (max_rows <= 16) return e4m3 ? cfg->up_to_16_rows_e4m3 : cfg->up_to_16_rows;
  return max_rows <= 32 ? cfg->up_to_32_rows : cfg->more_rows;
}

// Whether the table of SM version `sm` can select `id`: for some request size and cache, a
// forced row count (PlanTuning::rows_per_cta: 16, 32, 64) or the schedule's choice of
// fewer rows a CTA (16 or 32 rows, core/select.cpp) -- every one of them is
// choose_variant(sm, rows, e4m3).
constexpr bool table_selects(int sm, VariantId id) {
  return id != VariantId::kNone &&
         (choose_variant(sm, 16) == id || choose_variant(sm, 16, true) == id ||
          choose_variant(sm, 32) == id || choose_variant(sm, 33) == id);
}

// Calls f(V{}) with the variant type behind `id` (VariantR16S2 for kNone; callers check first).
template <typename F>
constexpr decltype(auto) with_variant(VariantId id, F&& f) {
  switch (id) {
    case VariantId::kR32S2:
      return f(VariantR32S2{});
    case VariantId::kR32S3:
      return f(VariantR32S3{});
    case VariantId::kR32S4:
      return f(VariantR32S4{});
    case VariantId::kR64S3:
      return f(VariantR64S3{});
    case VariantId::kR64S4:
      return f(VariantR64S4{});
    case VariantId::kR16S2Bulk:
      return f(VariantR16S2Bulk{});
    case VariantId::kR64S3T16:
      return f(VariantR64S3T16{});
    case VariantId::kR64C2:
      return f(VariantR64C2{});
    case VariantId::kR64S2K2:
      return f(VariantR64S2K2{});
    case VariantId::kR64S3T16W16:
      return f(VariantR64S3T16W16{});
    case VariantId::kR16S2:
    case VariantId::kNone:
      break;
  }
  return f(VariantR16S2{});
}

// The VariantId of variant type V (kNone for a type no id names).
template <typename V>
constexpr VariantId variant_id() {
  for (int i = 0; i <= static_cast<int>(VariantId::kLast); ++i) {
    const auto id = static_cast<VariantId>(i);
    if (with_variant(id, [](auto v) { return std::is_same_v<decltype(v), V>; })) return id;
  }
  return VariantId::kNone;
}

// Whether an e4m3 cache in exact mode (KvMode::kE4M3) has variant `id`: those some table
// selects for an e4m3 cache (choose_variant with e4m3: `up_to_16_rows_e4m3`, `up_to_32_rows`, `more_rows`; a forced
// row count picks among the same). Only these have an exact-mode kernel instance; r16-s2-bulk
// (decode on 16-bit caches, sm_90/100) has none.
constexpr bool e4m3_variant(VariantId id) {
  for (const TileConfig& c : kTileConfigs)
    for (int rows : {16, 32, 33})
      if (choose_variant(c.arch, rows, true) == id) return true;
  return false;
}

// Whether fast mode (KvMode::kE4M3Fast) has variant `id`: those of the tables of the
// architectures with native e4m3 products (16 and 32 rows of 32-token tiles, 64 rows of
// 16-token tiles; fp8_ops.cuh handles neither halves nor bulk copies).
constexpr bool fast_mode_variant(VariantId id) {
  for (int sm : {89, 120})
    if (native_fp8_mma(sm) && table_selects(sm, id)) return true;
  return false;
}

// Whether some tile table can select the instance of variant V for KV mode `mode`: the
// instances src/CMakeLists.txt generates (TV_SM80_INSTANCES), each of which asserts this. One
// the tables need and the list lacks fails the link instead.
template <typename V>
constexpr bool instance_selectable(KvMode mode) {
  constexpr VariantId id = variant_id<V>();
  constexpr bool kTabled = [] {
    for (const TileConfig& c : kTileConfigs)
      if (table_selects(c.arch, id)) return true;
    return false;
  }();
  // The variants no table selects (PlanTuning::pair_ctas, PlanTuning::variant): 16-bit caches
  // only. The pair reads no e4m3; e4m3 exact mode spills r64-s2-k2 on sm_120 (12 bytes, nvcc
  // 13.0) and r64-s3-t16-w16 on sm_89 and sm_90 (8), and fast mode's products are laid out for
  // 8 warps of 4 k-groups.
  if (!kTabled) return mode == KvMode::k16;
  if (mode == KvMode::kE4M3) return e4m3_variant(id);
  if (mode == KvMode::kE4M3Fast) return fast_mode_variant(id);
  return true;
}

// The most shared memory a block may have on SM version `arch`: 163 KB on sm_80/87, 227 KB
// on sm_90 up to sm_110, 99 KB on sm_86/89/120.
constexpr int smem_per_block(int arch) {
  if (arch == 80 || arch == 87) return 163 * 1024;
  if (arch >= 90 && arch < 120) return 227 * 1024;
  return kSmemLimitConsumer;
}

// Whether variant V can exist in code compiled for SM version `arch`: its shared memory fits
// a block there, and bulk copies and clusters need sm_90 or newer.
template <typename V>
constexpr bool variant_fits(int arch) {
  return V::kSmemBytes <= smem_per_block(arch) && (!V::kBulk || arch >= 90) &&
         (V::kClusterCtas == 1 || arch >= 90);
}
constexpr bool variant_fits(VariantId id, int arch) {
  return id != VariantId::kNone &&
         with_variant(id, [&](auto v) { return variant_fits<decltype(v)>(arch); });
}

// What a build compiles (src/cuda/sm80/build.h has this build's): its SM architectures, and
// whether each one's code holds every variant that fits it (TREEVERIFY_ALL_VARIANTS, developer
// builds: the GPU tests and --config-arch force other architectures' tables) or only the
// variants of the tables its devices use.
struct VariantBuild {
  const int* archs;
  int num_archs;
  bool all_variants;
  bool e4m3_mma;  // the compiler has every e4m3 mma.sync fast mode uses (CUDA 12.8+)
};

// Whether the code a build compiles for SM version `arch` holds variant `id` (the kernel is a
// trap stub otherwise, kernel.cuh). It must fit `arch` (variant_fits), and unless the build
// holds every variant, a table that code serves must select it: a device of SM version D runs
// the code of the newest built architecture not above D (its binary, or its PTX compiled by
// the driver), so the code for `arch` serves every D from `arch` up to the next built
// architecture, and forever above the newest. With the six release architectures each serves
// its own table only; a build for sm_80 alone also holds sm_86/89's variants, which an RTX
// 3090 would run from it.
constexpr bool variant_in_build(VariantId id, int arch, const VariantBuild& build) {
  if (!variant_fits(id, arch)) return false;
  if (build.all_variants) return true;
  int next = 1 << 30;  // the next built architecture above `arch`
  for (int i = 0; i < build.num_archs; ++i)
    if (build.archs[i] > arch && build.archs[i] < next) next = build.archs[i];
  if (table_selects(arch, id)) return true;
  for (const TileConfig& c : kTileConfigs)
    if (c.arch > arch && c.arch < next && table_selects(c.arch, id)) return true;
  return false;
}

// Whether the code a build compiles for SM version `arch` holds the fast-mode kernel of variant
// `id`: a fast-mode variant in that code (variant_in_build), with e4m3 mma (sm_89 and newer,
// from a compiler that has it), and unless the build holds every variant (the GPU tests force
// sm_120's table on an H200, whose e4m3 products are emulated), only where those products are
// native.
constexpr bool fast_in_build(VariantId id, int arch, const VariantBuild& build) {
  return build.e4m3_mma && fast_mode_variant(id) && variant_in_build(id, arch, build) &&
         arch >= 89 && (build.all_variants || native_fp8_mma(arch));
}

// The table a plan uses and its variant. `device_sm` is the GPU's SM version, `code_arch` the
// architecture its device code was compiled for (lower when the driver JIT-compiles PTX built
// for an older one), `forced` a table asked for by PlanTuning::config_arch (0: none).
// Unforced, the device's table decides, unless its variant is not in that code; then the
// code's table does. A forced table is taken as given (the caller checks it can run).
struct TileChoice {
  int config_arch;
  VariantId variant;
};
constexpr TileChoice choose_tiles(int device_sm, int code_arch, int forced, int64_t max_rows,
                                  const VariantBuild& build, bool e4m3 = false) {
  if (forced > 0) return {forced, choose_variant(forced, max_rows, e4m3)};
  const VariantId v = choose_variant(device_sm, max_rows, e4m3);
  if (v == VariantId::kNone || variant_in_build(v, code_arch, build)) return {device_sm, v};
  return {code_arch, choose_variant(code_arch, max_rows, e4m3)};
}

}  // namespace treeverify::cuda::sm80
