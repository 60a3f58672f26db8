// cuda against the float64 oracle on fresh random inputs with poisoned outputs:
// tree shapes and sizes, page sizes, prefix lengths, heads, ragged batches, dtypes, strides,
// and three tile tables (the device's own, and sm_80's and sm_120's, forced).
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "cuda/common/combine_shape.h"
#include "cuda/sm90/kv_tensor_map.h"
#include "fast_check.h"

namespace treeverify::testing {
namespace {

// The configurations every case runs under: the device's own, sm_80's (3 stages) and sm_120's
// (the 99 KB pipelines: 16-token tiles for 64 rows, 2 stages for 32), so the code shipped for
// those executes here too; then the case again with an e4m3 cache, exact under the device's
// table and fast under sm_120's and under the device's own choice where that runs fast (on an
// H200 the wgmma kernel's e4m3 products; fast_check.h). A table this build or device cannot run is
// left out and named in `missing`; the tests then end skipped (gpu_check.h, tile_configs).
// The default tier runs each case under one table and one of the e4m3 runs, the `pick`th of
// each (a test counts its cases), so a test's cases take the tables and the runs in turn; every
// table runs every variant in EveryVariant and the GpuE4M3 and GpuFast tests.

CaseSpec spec(std::string name, int heads, std::vector<int32_t> trees,
              std::vector<int64_t> prefixes, int page, TreeShape shape = TreeShape::kRandom,
              DType dtype = DType::kBF16) {
  return CaseSpec{.name = std::move(name),
                  .num_heads = heads,
                  .tree_sizes = std::move(trees),
                  .prefix_lens = std::move(prefixes),
                  .page_size = page,
                  .shape = shape,
                  .dtype = dtype,
                  .seed = fresh_seed()};
}

enum class E4m3Run { kExact, kFastTable, kFastOwnChoice };

void run_all_configs(const CaseSpec& s, size_t pick, int chunk_tokens = 0) {
  for (int arch : rotated(tile_configs().archs, pick)) {
    GpuOptions o;
    o.tuning.config_arch = arch;
    o.tuning.chunk_tokens = chunk_tokens;
    SCOPED_TRACE(fmt::format("{} config {}", s.name, arch));
    CaseSpec fresh = s;
    fresh.seed = fresh_seed();
    expect_matches_oracle(fresh, o);
  }
  // The same case with an e4m3 cache: exact mode under the device's table, fast mode under
  // sm_120's and the device's own (issue 12: every case in both).
  for (E4m3Run run :
       rotated<E4m3Run>({E4m3Run::kExact, E4m3Run::kFastTable, E4m3Run::kFastOwnChoice}, pick)) {
    if (run == E4m3Run::kExact) {
      const CaseSpec e4m3 = with_e4m3_cache(s, s.name + " e4m3 exact");
      GpuOptions o;
      o.tuning.chunk_tokens = chunk_tokens;
      SCOPED_TRACE(e4m3.name);
      expect_matches_oracle(e4m3, o);
    } else if (run == E4m3Run::kFastTable) {
      run_fast_table(s, chunk_tokens);
    } else {
      run_fast_own_choice(s, chunk_tokens);
    }
  }
}

TEST(GpuVerify, TreeShapesAndSizes) {
  TV_SKIP_WITHOUT_GPU();
  size_t pick = 0;
  for (TreeShape shape : {TreeShape::kChain, TreeShape::kStar, TreeShape::kDeep, TreeShape::kBushy,
                          TreeShape::kRandom}) {
    for (int t : tiered<int>({1, 2, 17, 64, 257, 1024}, {1, 17, 257})) {
      const int heads = t >= 257 ? 1 : 8;
      run_all_configs(
          spec(fmt::format("{} T={}", tree_shape_name(shape), t), heads, {t}, {777}, 16, shape),
          pick++);
    }
  }
  // The largest tree: of each shape above in the full tier, of a random one in the default.
  if (!full_tier()) run_all_configs(spec("random T=1024", 1, {1024}, {777}, 16), pick++);
  TV_SKIP_IF_TABLES_MISSING();
}

TEST(GpuVerify, PageSizes) {
  TV_SKIP_WITHOUT_GPU();
  size_t pick = 0;
  for (int page = 1; page <= 128; page *= 2)
    run_all_configs(spec(fmt::format("page {}", page), 8, {17}, {3001}, page), pick++);
  TV_SKIP_IF_TABLES_MISSING();
}

TEST(GpuVerify, PrefixLengths) {
  TV_SKIP_WITHOUT_GPU();
  // 15 rows run the 16-row variant, 25 rows the 32-row ones (whose configurations differ).
  size_t pick = 0;
  for (int heads : {3, 5})
    for (int64_t l : tiered<int64_t>({0, 1, 31, 32, 33, 1000, 4097, 65537, 200000},
                                     {0, 1, 31, 32, 33, 1000, 4097, 65537}))
      run_all_configs(spec(fmt::format("H {} L {}", heads, l), heads, {5}, {l}, l % 2 ? 1 : 64),
                      pick++);
  TV_SKIP_IF_TABLES_MISSING();
}

TEST(GpuVerify, Heads) {
  TV_SKIP_WITHOUT_GPU();
  size_t pick = 0;
  for (int h : {1, 3, 16, 33, 64, 128})
    run_all_configs(spec(fmt::format("H {}", h), h, {4}, {2000}, 32), pick++);
  TV_SKIP_IF_TABLES_MISSING();
}

// The split schedule's boundaries, forced: thousands of chunks (each combine warp merges
// several batches of them), a few, exactly one tile a chunk, and one pass with no partials;
// for the 16, 32 and 64-row variants and a ragged batch where some requests split and some
// do not. The default tier runs one case a chunk length, in turn: 32 tokens on the 32-row
// variant, 96 on the 64-row one, 2048 on the ragged batch, one pass on the 16-row variant.
TEST(GpuVerify, ChunkLengths) {
  TV_SKIP_WITHOUT_GPU();
  const int chunks[] = {32, 96, 2048, 1 << 20};
  for (size_t c = 0; c < 4; ++c) {
    const int chunk = chunks[c];
    std::vector<CaseSpec> cases;
    for (int heads : {3, 5, 8})
      cases.push_back(spec(fmt::format("chunk {} H {}", chunk, heads), heads, {heads == 8 ? 16 : 5},
                           {heads == 8 ? 6000 : 20000}, heads == 5 ? 1 : 64));
    cases.push_back(
        spec(fmt::format("chunk {} ragged", chunk), 8, {1, 7, 16, 2}, {40, 3000, 9000, 0}, 16));
    for (const CaseSpec& s : rotated(cases, c + 1)) run_all_configs(s, c, chunk);
  }
  TV_SKIP_IF_TABLES_MISSING();
}

// Every launch shape of the split combine (cuda/common/combine_shape.h: columns a lane, lanes
// a slice), each on a request whose rows and forced chunk count choose it on this device.
TEST(GpuVerify, CombineShapes) {
  TV_SKIP_WITHOUT_GPU();
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  constexpr int kChunk = 64;
  for (const cuda::CombineSlice& target : cuda::kCombineSlices) {
    bool found = false;
    for (int heads : {8, 1})
      for (int tree : {1, 2, 4, 5, 8, 16, 32, 64})
        for (int chunks : {3, 10, 40, 70, 130, 260, 520, 600}) {
          if (found) break;
          // The KV of a request is its prefix and its tree; a chunk count one or two above
          // the aimed one (rounding) must choose the same shape.
          const int64_t rows = static_cast<int64_t>(heads) * tree;
          const int64_t prefix = static_cast<int64_t>(chunks) * kChunk - tree;
          if (prefix < 1 || rows * prefix > 2'000'000) continue;
          bool same = true;
          for (int n = chunks; n <= chunks + 2; ++n) {
            const cuda::CombineShape c = cuda::choose_combine_shape(rows, n, sms);
            same &= c.cols == target.cols && c.lanes == target.lanes;
          }
          if (!same) continue;
          found = true;
          GpuOptions o;
          o.tuning.chunk_tokens = kChunk;
          const CaseSpec s = spec(fmt::format("combine {} columns {} lanes: H {} T {} L {}",
                                              target.cols, target.lanes, heads, tree, prefix),
                                  heads, {tree}, {prefix}, 16);
          SCOPED_TRACE(s.name);
          expect_matches_oracle(s, o);
        }
    EXPECT_TRUE(found) << "no candidate request chooses " << target.cols << " columns, "
                       << target.lanes << " lanes on " << sms << " SMs";
  }
}

// Every variant a table ships, in both dtypes, on a request of more rows than the smallest
// CTA holds; and a short prefix where the schedule itself may take fewer rows a CTA than the
// table's choice.
TEST(GpuVerify, EveryVariant) {
  TV_SKIP_WITHOUT_GPU();
  for (DType dtype : {DType::kBF16, DType::kFP16}) {
    for (int rows : {16, 32, 64}) {
      for (int arch : tile_configs().archs) {
        GpuOptions o;
        o.tuning.config_arch = arch;
        o.tuning.rows_per_cta = rows;
        const CaseSpec s = spec(fmt::format("{} rows {} config {}", dtype_name(dtype), rows, arch),
                                8, {9}, {3000}, 16, TreeShape::kRandom, dtype);
        SCOPED_TRACE(s.name);
        expect_matches_oracle(s, o);
      }
    }
  }
  run_all_configs(spec("short prefix, 128 rows", 8, {16}, {4096}, 64), 0);
  TV_SKIP_IF_TABLES_MISSING();
}

// A 64-row variant no table selects, run by `base` (PlanTuning::pair_ctas or ::variant) and
// named `name` in the plan's kernel: page sizes 1 to 128, head counts, ragged requests of 1 to
// 37 nodes (rows in a block's last CTA past the request), partial last tiles, split and
// one-pass schedules, both dtypes; under the device's own table and sm_120's.
void check_untabled_variant(const std::string& name, const PlanTuning& base) {
  const int pages[] = {1, 16, 64, 128};
  const int heads[] = {8, 5, 16, 128};
  const int chunks[] = {0, 32, 96, 0};
  for (int i = 0; i < 4; ++i) {
    for (int arch : {0, 120}) {
      const int h = heads[i];
      GpuOptions o;
      o.tuning = base;
      o.tuning.config_arch = arch;
      o.tuning.chunk_tokens = chunks[i];
      const CaseSpec s{.name = fmt::format("{}, page {} H {} chunk {} config {}", name, pages[i],
                                           h, chunks[i], arch),
                       .num_heads = h,
                       .tree_sizes = {h >= 33 ? 3 : 37, 1, 70 / h + 1},
                       .prefix_lens = {5000, 700, 0},
                       .page_size = pages[i],
                       .dtype = i % 2 ? DType::kFP16 : DType::kBF16,
                       .seed = fresh_seed()};
      SCOPED_TRACE(s.name);
      const HostCase host = make_case(s);
      const GpuResult gpu = run_on_gpu(host, o);
      EXPECT_NE(gpu.plan.kernel.find(name), std::string::npos) << gpu.plan.kernel;
      expect_close_to_oracle(host, fmt::format("{} seed {}", s.name, s.seed), gpu);
    }
  }
}

// The pair variant: two CTAs of a cluster a 64-row block, each over half of every KV row.
TEST(GpuVerify, PairCtas) {
  TV_SKIP_WITHOUT_GPU();
  TV_SKIP_WITHOUT_PAIR_CTAS();
  check_untabled_variant("r64-s3-c2", {.pair_ctas = true});
}

// r64-s2-k2: 64 rows, two k-groups of 288, two stages of 32 tokens.
TEST(GpuVerify, TwoKGroups) {
  TV_SKIP_WITHOUT_GPU();
  TV_SKIP_WITHOUT_ALL_VARIANTS();
  check_untabled_variant("r64-s2-k2", {.variant = "r64-s2-k2"});
}

// r64-s3-t16-w16: r64-s3-t16 on 16 warps.
TEST(GpuVerify, SixteenWarps) {
  TV_SKIP_WITHOUT_GPU();
  TV_SKIP_WITHOUT_ALL_VARIANTS();
  check_untabled_variant("r64-s3-t16-w16", {.variant = "r64-s3-t16-w16"});
}

// The wgmma kernel's shapes on a 16-bit cache (gpu_check.h).
TEST(GpuVerify, WgmmaPagesHeadsAndChunks) {
  TV_SKIP_WITHOUT_GPU();
  check_64_row_pages_heads_and_chunks(/*e4m3=*/false);
}

// The wgmma kernel's producer copies whole tiles inside one page of 64 rows or more by TMA
// tensor copies (core/select.cpp: state.tma), and every other tile, or every tile with
// PlanTuning::disable_tma, by cp.async. A 16-bit tile lands the same bytes in the same
// swizzle either way; an e4m3 tile's codes land in one staging layout either way and are
// widened by the same code; in fast mode the codes land where wgmma reads them either way. So
// the two runs agree bit for bit, and the TMA run matches the oracle (fast mode: both of
// fast_check.h's). Pages of 64 and 128 rows, partial last tiles, tiles straddling two pages
// (chunks of 96 and 160 tokens; with pages of 128 and chunks of 160, a chunk starting 32
// tokens into a page has a straddling tile by cp.async, then a whole one by TMA), a request of
// 127 keys (a whole tile and a partial one), both dtypes. The default tier runs one of the
// three caches (16-bit, e4m3 exact, e4m3 fast) a page and chunk, in turn, and all of the
// 128-row cases.
TEST(GpuVerify, WgmmaTmaCopiesMatchCpAsync) {
  TV_SKIP_WITHOUT_GPU();
  const int pages[] = {64, 128, 128, 64, 128};
  const int chunks[] = {0, 96, 2048, 160, 160};
  auto compare = [](const CaseSpec& s, const GpuOptions& o) {
    SCOPED_TRACE(fmt::format("{} seed {}", s.name, s.seed));
    const HostCase host = make_case(s);
    GpuOptions off = o;
    off.tuning.disable_tma = true;
    off.tuning.force_tma = false;
    const GpuResult tma = run_on_gpu(host, o), copies = run_on_gpu(host, off);
    EXPECT_FALSE(copies.plan.state.tma);
    // No sm_90a code on this device, or a runtime without tensor maps (CUDA < 12.5): nothing
    // copies by TMA.
    if (!tma.plan.state.wgmma || !cuda::sm90::kv_tensor_maps_available()) {
      EXPECT_FALSE(tma.plan.state.tma) << tma.plan.kernel;
      return;
    }
    EXPECT_TRUE(tma.plan.state.tma) << tma.plan.kernel << ": " << tma.plan.reason;
    ASSERT_EQ(tma.out.size(), host.out_elems());
    EXPECT_TRUE(tma.out == copies.out) << "out differs between TMA and cp.async copies";
    EXPECT_TRUE(tma.lse.size() == copies.lse.size() &&
                std::memcmp(tma.lse.data(), copies.lse.data(), tma.lse.size() * sizeof(float)) == 0)
        << "lse differs between TMA and cp.async copies";
    if (o.precision == Precision::kFast)
      expect_fast_matches(host, o);
    else
      expect_close_to_oracle(host, s.name, tma);
  };
  auto fast = [](GpuOptions o) {
    o.precision = Precision::kFast;
    return o;
  };
  for (int i = 0; i < 5; ++i) {
    GpuOptions o;
    o.tuning.rows_per_cta = 64;  // the wgmma kernel on sm_90a code, whatever the cost model says
    o.tuning.chunk_tokens = chunks[i];
    const CaseSpec s =
        spec(fmt::format("TMA, page {} chunk {}", pages[i], chunks[i]), 8, {37, 5, 64},
             {5000, 700, 63}, pages[i], TreeShape::kRandom, i % 2 ? DType::kFP16 : DType::kBF16);
    const std::vector<std::pair<CaseSpec, GpuOptions>> runs = {
        {s, o},
        {with_e4m3_cache(s, s.name + " e4m3"), o},
        {with_e4m3_cache(s, s.name + " e4m3 fast"), fast(o)}};
    for (const auto& [cs, co] : rotated(runs, i)) compare(cs, co);
  }
  // 128 rows (two row blocks) of a 16-bit cache: cp.async, where TMA copies measured slower,
  // unless forced; of an e4m3 cache: TMA.
  GpuOptions o;
  o.tuning.rows_per_cta = 64;
  const CaseSpec few = spec("128 rows", 8, {16}, {3000}, 64);
  const GpuResult plain = run_on_gpu(make_case(few), o);
  EXPECT_FALSE(plain.plan.state.tma) << plain.plan.kernel << ": " << plain.plan.reason;
  compare(with_e4m3_cache(few, "128 rows e4m3"), o);
  compare(with_e4m3_cache(few, "128 rows e4m3 fast"), fast(o));
  o.tuning.force_tma = true;
  compare(few, o);
}

TEST(GpuVerify, RaggedBatch) {
  TV_SKIP_WITHOUT_GPU();
  const int64_t longest = full_tier() ? 100000 : 20000;
  run_all_configs(spec("ragged", 8, {1, 0, 17, 64, 3, 9}, {0, 50, 12345, 700, longest, 1}, 16), 0);
  run_all_configs(
      spec("decode batch", 16, std::vector<int32_t>(64, 1), std::vector<int64_t>(64, 1500), 64), 1);
  TV_SKIP_IF_TABLES_MISSING();
}

TEST(GpuVerify, Fp16) {
  TV_SKIP_WITHOUT_GPU();
  run_all_configs(spec("fp16 tree", 8, {33}, {5000}, 64, TreeShape::kRandom, DType::kFP16), 0);
  run_all_configs(spec("fp16 ragged", 4, {3, 70}, {10, full_tier() ? 20000 : 5000}, 1,
                       TreeShape::kBushy, DType::kFP16),
                  1);
  TV_SKIP_IF_TABLES_MISSING();
}

// Plain N(0, 1) data, and 8 latent channels 20x larger in q and the cache (gpu_check.h), as real
// latent caches have; the error against exact attention (P unrounded) is printed as an
// "accuracy" line (gpu_check.h). The default tier's prefix is shorter.
TEST(GpuVerify, OutlierChannels) {
  TV_SKIP_WITHOUT_GPU();
  check_plain_and_outliers(spec("", 16, {16}, {full_tier() ? 20000 : 4096}, 64));
  TV_SKIP_IF_TABLES_MISSING();
}

// Scores in steps along the keys, over and under the kernels' lag on the running max
// (set_score_steps), under each tile table, both dtypes and an e4m3 cache in exact mode (the
// device's table), split as the schedule chooses and in one chunk a request: a 256-row tree at
// page 64 (the wgmma kernel by TMA on sm_90a code), decode at page 1 (cp.async; the decode
// variants). The default tier gives the tree a shorter prefix and each run one of the two
// chunk lengths, in turn.
TEST(GpuVerify, ScoreSteps) {
  TV_SKIP_WITHOUT_GPU();
  const CaseSpec specs[] = {spec("tree", 16, {16}, {full_tier() ? 20000 : 4096}, 64),
                            spec("decode", 8, {1}, {30000}, 1, TreeShape::kRandom, DType::kFP16)};
  size_t pick = 0;
  for (const CaseSpec& base : specs) {
    for (bool e4m3 : {false, true}) {
      for (int arch : tile_configs().archs) {
        if (e4m3 && arch != tile_configs().archs.front()) continue;  // the device's own table
        for (int chunk : rotated<int>({0, 1 << 20}, pick++)) {
          CaseSpec s = e4m3 ? with_e4m3_cache(base, base.name + " e4m3") : base;
          s.seed = fresh_seed();
          HostCase host = make_case(s);
          set_score_steps(host);
          GpuOptions o;
          o.tuning.config_arch = arch;
          o.tuning.chunk_tokens = chunk;
          const std::string what =
              fmt::format("steps {} config {} chunk {} seed {}", s.name, arch, chunk, s.seed);
          SCOPED_TRACE(what);
          expect_close_to_oracle(host, what, run_on_gpu(host, o));
        }
      }
    }
  }
  TV_SKIP_IF_TABLES_MISSING();
}

// The ancestor mask is step data: built by a plan's first run on a workspace and reused by
// its later runs, rebuilt after another plan (another tree) ran on that workspace.
TEST(GpuVerify, StepDataFollowsThePlan) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase a = make_case(spec("step A", 4, {40}, {900}, 16, TreeShape::kRandom));
  const HostCase b = make_case(spec("step B", 4, {40}, {900}, 16, TreeShape::kBushy));
  GpuOptions o;
  o.backend = Backend::kCuda;
  o.tuning.chunk_tokens = 256;  // split, so partials share the workspace with the mask
  Plan pa, pb;
  ASSERT_TRUE(plan(a.problem(), o, o.tuning, &pa).ok());
  ASSERT_TRUE(plan(b.problem(), o, o.tuning, &pb).ok());
  ASSERT_NE(pa.state.id, pb.state.id);
  DeviceCase da(a), db(b);
  const size_t bytes = std::max(pa.workspace_bytes, pb.workspace_bytes);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, bytes), cudaSuccess);
  auto run_case = [&](const Plan& p, DeviceCase& d) {
    GpuResult r{.plan = p};
    d.poison_outputs();
    const Status s = run(p, d.tensors(), ws, bytes, nullptr);
    EXPECT_TRUE(s.ok()) << s.to_string();
    d.download(&r.out, &r.lse);
    return r;
  };
  const GpuResult first = run_case(pa, da);
  expect_close_to_oracle(a, "A, first run", first);
  const GpuResult again = run_case(pa, da);  // the mask is not rebuilt: the same result
  EXPECT_EQ(first.out, again.out);
  expect_close_to_oracle(b, "B on A's workspace", run_case(pb, db));
  expect_close_to_oracle(a, "A after B", run_case(pa, da));
  cudaFree(ws);
}

// A graph captured from runs of plan A, whose step data the workspace already held, builds
// A's mask inside the graph: replayed after plan B ran on the same workspace, it is still A.
TEST(GpuVerify, GraphBringsItsOwnStepData) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase a = make_case(spec("graph A", 4, {40}, {900}, 16, TreeShape::kRandom));
  const HostCase b = make_case(spec("eager B", 4, {40}, {900}, 16, TreeShape::kBushy));
  GpuOptions o;
  o.backend = Backend::kCuda;
  o.tuning.chunk_tokens = 256;
  Plan pa, pb;
  ASSERT_TRUE(plan(a.problem(), o, o.tuning, &pa).ok());
  ASSERT_TRUE(plan(b.problem(), o, o.tuning, &pb).ok());
  DeviceCase da(a), db(b);
  const size_t bytes = std::max(pa.workspace_bytes, pb.workspace_bytes);
  void* ws = nullptr;
  ASSERT_EQ(cudaMalloc(&ws, bytes), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_TRUE(run(pa, da.tensors(), ws, bytes, stream).ok());  // the workspace holds A's data
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const Status c1 = run(pa, da.tensors(), ws, bytes, stream);
  const Status c2 = run(pa, da.tensors(), ws, bytes, stream);  // a second layer
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  ASSERT_TRUE(c1.ok() && c2.ok()) << c1.to_string() << c2.to_string();
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_TRUE(run(pb, db.tensors(), ws, bytes, stream).ok());  // B's mask in the workspace
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  GpuResult rb{.plan = pb};
  db.download(&rb.out, &rb.lse);
  expect_close_to_oracle(b, "B, eager, between capture and replay", rb);
  da.poison_outputs();
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  GpuResult ra{.plan = pa};
  da.download(&ra.out, &ra.lse);
  expect_close_to_oracle(a, "A, graph replayed after B", ra);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  cudaFree(ws);
}

// The same inputs twice must give bit-identical outputs under every table: a moving result
// is a race.
TEST(GpuVerify, Deterministic) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase host = make_case(spec("determinism", 8, {64}, {150000}, 1));
  for (int arch : tile_configs().archs) {
    GpuOptions o;
    o.tuning.config_arch = arch;
    SCOPED_TRACE(fmt::format("config {}", arch));
    const GpuResult a = run_on_gpu(host, o);
    const GpuResult b = run_on_gpu(host, o);
    EXPECT_EQ(a.out, b.out);
    EXPECT_EQ(0, std::memcmp(a.lse.data(), b.lse.data(), a.lse.size() * 4));
  }
  TV_SKIP_IF_TABLES_MISSING();
}

}  // namespace
}  // namespace treeverify::testing
