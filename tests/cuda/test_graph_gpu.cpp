// The graph-safe plan (treeverify/graph.h) on the GPU: every page-table layout and tree input
// against the float64 oracle, with padded lanes; e4m3 caches exact and fast; clamped inputs
// against the CPU backend's graph plan of the same step (the documented clamping), flagged;
// and one step captured in a CUDA graph (global capture mode: a sync or an allocation inside
// would fail the capture) and replayed while the lengths, page tables and trees change.
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <cstring>
#include <memory>

#include "fast_check.h"
#include "testing/graph_case.h"

namespace treeverify::testing {
namespace {

#define TV_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr

// Device memory for one graph step and layer, copied from a GraphCase.
struct DeviceGraph {
  struct Buf {
    void* p = nullptr;
    ~Buf() { cudaFree(p); }
    template <typename T>
    T* at() const { return static_cast<T*>(p); }
  };
  Buf kv_len, indptr, indices, rows, parents, mask, q, kv, scale, out, lse, flags, ws;
  size_t out_elems = 0, lse_elems = 0;

  static void upload(Buf& b, const void* src, size_t bytes) {
    if (bytes == 0) return;
    ASSERT_EQ(cudaMalloc(&b.p, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemcpy(b.p, src, bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }
  template <typename T>
  static void upload(Buf& b, const std::vector<T>& v) { upload(b, v.data(), v.size() * sizeof(T)); }

  // The step's arrays, copied again into the same addresses (for replays).
  void rewrite(const GraphCase& g) const {
    auto put = [](const Buf& b, const auto& v) {
      if (!v.empty())
        ASSERT_EQ(cudaMemcpy(b.p, v.data(), v.size() * sizeof(v[0]), cudaMemcpyHostToDevice),
                  cudaSuccess);
    };
    put(kv_len, g.kv_len);
    put(indptr, g.indptr);
    put(indices, g.indices);
    put(rows, g.table_rows);
    put(parents, g.parents);
    put(mask, g.mask);
  }

  GraphStep step(const GraphCase& g) const {
    GraphStep s;
    s.kv_len = kv_len.at<int32_t>();
    s.kv_page_indptr = indptr.at<int32_t>();
    s.kv_page_indices = indices.at<int32_t>();
    s.table_rows = rows.at<int32_t>();
    s.parents = parents.at<int32_t>();
    s.tree_mask = mask.at<uint8_t>();
    s.mask_bytes = static_cast<int64_t>(g.mask.size());
    s.error_flags = flags.at<uint32_t>();
    return s;
  }
  GraphLayer layer(const HostCase& host, const GraphPlan& plan) const {
    return GraphLayer{.q = q.p,
                      .kv_cache = kv.p,
                      .kv_scale = plan.bounds.kv_format == KvFormat::kE4M3 ? scale.at<float>()
                                                                           : nullptr,
                      .out = out.p,
                      .lse = lse.at<float>(),
                      .softmax_scale = host.spec.softmax_scale};
  }
};

void make_device(const HostCase& host, const GraphCase& g, const GraphPlan& plan, DeviceGraph* d) {
  DeviceGraph::upload(d->kv_len, g.kv_len);
  DeviceGraph::upload(d->indptr, g.indptr);
  DeviceGraph::upload(d->indices, g.indices);
  DeviceGraph::upload(d->rows, g.table_rows);
  DeviceGraph::upload(d->parents, g.parents);
  DeviceGraph::upload(d->mask, g.mask);
  DeviceGraph::upload(d->q, g.q);
  if (host.kv8.empty())
    DeviceGraph::upload(d->kv, host.kv);
  else
    DeviceGraph::upload(d->kv, host.kv8);
  DeviceGraph::upload(d->scale, &host.kv_scale, sizeof(float));
  const int64_t rows = int64_t{g.bounds.batch_size} * g.bounds.tree_size * g.bounds.num_heads;
  d->out_elems = rows * kVDim;
  d->lse_elems = rows;
  ASSERT_EQ(cudaMalloc(&d->out.p, d->out_elems * 2), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d->lse.p, d->lse_elems * 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d->flags.p, 4), cudaSuccess);
  ASSERT_EQ(cudaMemset(d->flags.p, 0, 4), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&d->ws.p, plan.workspace_bytes), cudaSuccess);
}

void poison(const DeviceGraph& d) {
  ASSERT_EQ(cudaMemset(d.out.p, 0xff, d.out_elems * 2), cudaSuccess);
  ASSERT_EQ(cudaMemset(d.lse.p, 0xff, d.lse_elems * 4), cudaSuccess);
}

// The real lanes' rows, the flags, and a Plan holding what the oracle helpers read (kernel,
// precision, the step's chunk length, the tile).
GpuResult download(const HostCase& host, const GraphPlan& plan, const DeviceGraph& d,
                   uint32_t* flags) {
  GpuResult r;
  r.out.resize(host.out_elems());
  r.lse.resize(host.lse_elems());
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(r.out.data(), d.out.p, r.out.size() * 2, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(r.lse.data(), d.lse.p, r.lse.size() * 4, cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(flags, d.flags.p, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  int32_t chunk = 0;
  EXPECT_EQ(cudaMemcpy(&chunk, d.ws.at<char>() + plan.state.chunk_offset, 4,
                       cudaMemcpyDeviceToHost),
            cudaSuccess);
  r.plan.backend = plan.backend;
  r.plan.kernel = plan.kernel;
  r.plan.reason = plan.reason;
  r.plan.precision = plan.precision;
  r.plan.dtype = plan.bounds.dtype;
  r.plan.kv_format = plan.bounds.kv_format;
  r.plan.state.chunk_tokens = chunk;
  r.plan.state.tile_tokens = plan.state.tile_tokens;
  r.plan.state.wgmma = plan.state.wgmma;
  r.plan.state.fast_products = plan.state.fast_products;
  return r;
}

// A graph plan of `g` on the GPU, one step and one layer, eagerly.
GpuResult run_graph(const HostCase& host, const GraphCase& g, const GpuOptions& o,
                    uint32_t* flags) {
  GraphPlan plan;
  GpuOptions go = o;
  go.backend = Backend::kCuda;
  const Status ps = plan_graph(g.bounds, go, go.tuning, &plan);
  EXPECT_TRUE(ps.ok()) << ps.to_string();
  if (!ps.ok()) return {};
  DeviceGraph d;
  make_device(host, g, plan, &d);
  poison(d);
  EXPECT_TRUE(prepare_step(plan, d.step(g), d.ws.p, plan.workspace_bytes).ok());
  const Status rs = run_layer(plan, d.layer(host, plan), d.ws.p, plan.workspace_bytes);
  EXPECT_TRUE(rs.ok()) << rs.to_string();
  return download(host, plan, d, flags);
}

HostCase lanes_case(const std::string& name, int heads, int tree, std::vector<int64_t> prefixes,
                    int page, DType dtype = DType::kBF16, TreeShape shape = TreeShape::kRandom) {
  CaseSpec s{.name = name, .num_heads = heads, .page_size = page, .shape = shape,
             .dtype = dtype, .seed = fresh_seed()};
  s.tree_sizes.assign(prefixes.size(), tree);
  s.prefix_lens = std::move(prefixes);
  return make_case(s);
}

// Every layout and tree input, page sizes 1 to 128, row counts that take every variant (and
// the wgmma kernel on sm_90a), padded lanes, both dtypes: the real lanes against the oracle.
TEST(GraphGpu, EveryLayoutMatchesTheOracle) {
  TV_SKIP_WITHOUT_GPU();
  const PageTable tables[] = {PageTable::kCsr, PageTable::kRows, PageTable::kSlotRows};
  const TreeInput trees[] = {TreeInput::kParents, TreeInput::kMask, TreeInput::kFullMask,
                             TreeInput::kChain};
  size_t pick = 0;
  for (int page : tiered<int>({1, 16, 64, 128}, {1, 64})) {
    for (auto [heads, tree] : {std::pair{8, 1}, {8, 4}, {8, 16}, {16, 9}}) {
      for (DType dtype : tiered<DType>({DType::kBF16, DType::kFP16}, {DType::kBF16})) {
        ++pick;
        const PageTable pt = tables[pick % 3];
        const TreeInput ti = tree == 1 ? TreeInput::kChain : trees[pick % 4];
        const HostCase host = lanes_case(
            fmt::format("page {} H {} T {}", page, heads, tree), heads, tree, {0, 700, 5000},
            page, dtype, ti == TreeInput::kChain ? TreeShape::kChain : TreeShape::kRandom);
        const GraphCase g = make_graph_case(
            host, GraphLayout{.page_table = pt, .tree = ti, .padded_lanes = int32_t(pick % 2) * 2,
                              .kv_len_excludes_tree = pick % 3 == 0, .max_kv_len = 9000});
        const std::string what =
            fmt::format("{} table {} tree {} seed {}", host.spec.name, static_cast<int>(pt),
                        static_cast<int>(ti), host.spec.seed);
        SCOPED_TRACE(what);
        uint32_t flags = 0;
        const GpuResult gpu = run_graph(host, g, {}, &flags);
        EXPECT_EQ(flags, 0u) << graph_error_names(flags);
        expect_close_to_oracle(host, what, gpu);
      }
    }
  }
}

// e4m3 caches: exact mode against the oracle; fast mode (where it runs fast) against the
// oracle that rounds Q and P as the kernel did, at the step's chunk length.
TEST(GraphGpu, E4M3ExactAndFast) {
  TV_SKIP_WITHOUT_GPU();
  for (auto [heads, tree] : {std::pair{16, 1}, {8, 16}}) {
    HostCase host = lanes_case(fmt::format("e4m3 H {} T {}", heads, tree), heads, tree,
                               {30, 4000}, 64);
    CaseSpec s = with_e4m3_cache(host.spec, host.spec.name);
    host = make_case(s);
    const GraphCase g = make_graph_case(
        host, GraphLayout{.page_table = PageTable::kSlotRows,
                          .tree = tree == 1 ? TreeInput::kChain : TreeInput::kMask,
                          .padded_lanes = 1});
    uint32_t flags = 0;
    const GpuResult exact = run_graph(host, g, {}, &flags);
    EXPECT_EQ(flags, 0u);
    expect_close_to_oracle(host, host.spec.name + " exact", exact);
    GpuOptions fast;
    fast.precision = Precision::kFast;
    const GpuResult f = run_graph(host, g, fast, &flags);
    if (f.plan.precision != Precision::kFast) continue;  // runs exact here; the reason says why
    const detail::ReferenceResult same = fast_oracle(host, Precision::kFast, f.plan);
    const Comparison c = compare_with_reference(host.spec.dtype, f.out, f.lse.data(), same.out,
                                                same.lse, same.out_slack);
    print_accuracy(f.plan.kernel, "fast-rounding", c, host.spec.name + " graph");
    const Tolerance tol = tolerance_for(f.plan);
    const double scale = f.plan.state.wgmma ? Bounds{}.wgmma_same_scale : 1;
    EXPECT_TRUE(c.ok(tol.out * scale, tol.lse * scale)) << f.plan.kernel << ": " << c.to_string();
  }
}

// Out-of-range metadata: flagged, never read out of bounds (compute-sanitizer memcheck runs
// this test on the device machine), and computed as the CPU backend's graph plan computes the
// same step: the documented clamping.
TEST(GraphGpu, ClampedStepsMatchTheCpuGraphPlan) {
  TV_SKIP_WITHOUT_GPU();
  const HostCase host = lanes_case("clamped", 8, 4, {40, 300, 900}, 16);
  GraphCase g = make_graph_case(host, GraphLayout{.page_table = PageTable::kSlotRows,
                                                  .tree = TreeInput::kParents,
                                                  .max_kv_len = 1200});
  g.kv_len[0] = 1 << 30;                                      // past max_kv_len
  g.table_rows[1] = 1000;                                     // outside the table
  g.indices[g.table_rows[2] * g.bounds.table_stride] = -16;   // outside the pool
  g.parents[2 * 4 + 3] = 7;                                   // not an earlier node
  uint32_t flags = 0;
  const GpuResult gpu = run_graph(host, g, {}, &flags);
  EXPECT_EQ(flags, kGraphKvLenClamped | kGraphTableClamped | kGraphPageClamped |
                       kGraphParentClamped)
      << graph_error_names(flags);
  // The CPU graph plan of the same step (its output is the oracle's on the clamped metadata).
  GraphPlan cpu;
  ASSERT_TRUE(plan_graph(g.bounds, {.backend = Backend::kCpuReference}, &cpu).ok());
  std::vector<char> ws(cpu.workspace_bytes);
  uint32_t cpu_flags = 0;
  ASSERT_TRUE(prepare_step(cpu, g.step(&cpu_flags), ws.data(), ws.size()).ok());
  EXPECT_EQ(cpu_flags, flags);
  const int64_t rows = int64_t{g.bounds.batch_size} * 4 * 8;
  std::vector<uint16_t> out(rows * kVDim);
  std::vector<float> lse(rows);
  ASSERT_TRUE(run_layer(cpu,
                        GraphLayer{.q = g.q.data(), .kv_cache = host.kv.data(), .out = out.data(),
                                   .lse = lse.data(), .softmax_scale = host.spec.softmax_scale},
                        ws.data(), ws.size())
                  .ok());
  // The float64 oracle's float rounding of its own output (bf16 out, fp32 lse) is within the
  // bounds of its exact values, so the bounds apply with it as the reference.
  std::vector<double> ref_out(out.size()), ref_lse(lse.begin(), lse.end());
  for (size_t i = 0; i < out.size(); ++i) ref_out[i] = half_to_float(DType::kBF16, out[i]);
  const Comparison c = compare_with_reference(DType::kBF16, gpu.out, gpu.lse.data(), ref_out,
                                              ref_lse);
  EXPECT_TRUE(c.ok(kOutRelTol, kLseAbsTol)) << c.to_string();
}

// One step captured in a CUDA graph (prepare_step and two layers), then replayed after the
// step's arrays were rewritten in place: lengths from 64 to 20000 tokens and back, new page
// tables and new trees, each replay against that step's oracle; the split follows the lengths.
TEST(GraphGpu, ReplaysFollowChangingSteps) {
  TV_SKIP_WITHOUT_GPU();
  const int T = 8, H = 8, P = 16, kMax = 20100;
  auto step_case = [&](int step, std::vector<int64_t> prefixes) {
    return lanes_case(fmt::format("step {}", step), H, T, std::move(prefixes), P);
  };
  // The bounds and device arrays of the longest step hold every step below: its pool is the
  // largest, and every step's table has max_kv_len's stride.
  const GraphLayout layout{.page_table = PageTable::kSlotRows, .tree = TreeInput::kMask,
                           .kv_len_excludes_tree = true, .max_kv_len = kMax};
  const HostCase longest = step_case(1, {20000, 20000});
  const GraphCase gl = make_graph_case(longest, layout);
  GraphPlan plan;
  ASSERT_TRUE(plan_graph(gl.bounds, {.backend = Backend::kCuda}, &plan).ok());
  DeviceGraph d;
  make_device(longest, gl, plan, &d);
  cudaStream_t stream;
  TV_CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  TV_CUDA_OK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  const Status ps = prepare_step(plan, d.step(gl), d.ws.p, plan.workspace_bytes, stream);
  const GraphLayer layer = d.layer(longest, plan);
  const Status r1 = run_layer(plan, layer, d.ws.p, plan.workspace_bytes, stream);
  const Status r2 = run_layer(plan, layer, d.ws.p, plan.workspace_bytes, stream);
  TV_CUDA_OK(cudaStreamEndCapture(stream, &graph));
  ASSERT_TRUE(ps.ok() && r1.ok() && r2.ok()) << ps.to_string() << r1.to_string() << r2.to_string();
  TV_CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  std::vector<int32_t> chunks;
  int step = 2;
  for (std::vector<int64_t> prefixes :
       {std::vector<int64_t>{64, 64}, {20000, 20000}, {300, 19000}, {1, 5}, {20000, 20000}}) {
    // A new step: its own random tree, pages, q and KV, written into the same device arrays
    // (the pool of the longest step is large enough for every step's pages).
    const HostCase host = step_case(step++, prefixes);
    ASSERT_LE(host.num_pages, longest.num_pages);
    GraphCase gs = make_graph_case(host, layout);
    // The same shapes as the captured step's: lanes, table rows and stride (max_kv_len), mask.
    ASSERT_EQ(gs.indices.size(), gl.indices.size());
    ASSERT_EQ(gs.mask.size(), gl.mask.size());
    d.rewrite(gs);
    TV_CUDA_OK(cudaMemcpy(d.q.p, gs.q.data(), gs.q.size() * 2, cudaMemcpyHostToDevice));
    TV_CUDA_OK(cudaMemcpy(d.kv.p, host.kv.data(), host.kv.size() * 2, cudaMemcpyHostToDevice));
    poison(d);
    TV_CUDA_OK(cudaGraphLaunch(exec, stream));
    TV_CUDA_OK(cudaStreamSynchronize(stream));
    uint32_t flags = 0;
    const GpuResult gpu = download(host, plan, d, &flags);
    EXPECT_EQ(flags, 0u) << graph_error_names(flags);
    chunks.push_back(gpu.plan.state.chunk_tokens);
    expect_close_to_oracle(host, fmt::format("replay {} seed {}", host.spec.name, host.spec.seed),
                           gpu);
  }
  EXPECT_NE(chunks[0], chunks[1]) << "the split did not follow the lengths";
  EXPECT_EQ(chunks[1], chunks[4]);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
}

}  // namespace
}  // namespace treeverify::testing
