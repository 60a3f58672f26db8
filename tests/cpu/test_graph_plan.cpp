// The graph-safe plan (treeverify/graph.h) on the CPU backends: the step's metadata read from
// every page-table layout and tree input gives what the host plan gives for the same call;
// values out of range are clamped as documented and flagged; padded lanes leave the real
// lanes' rows alone; the step schedule stays inside the plan's grid.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "core/graph_step.h"
#include "testing/cases.h"
#include "testing/graph_case.h"
#include "treeverify/graph.h"
#include "treeverify/verify.h"

namespace treeverify {
namespace {

using testing::CaseSpec;
using testing::GraphCase;
using testing::GraphLayout;
using testing::HostCase;
using testing::TreeShape;

struct Output {
  std::vector<uint16_t> out;
  std::vector<float> lse;
};

// The host plan of `host` on cpu-reference.
Output host_run(const HostCase& host) {
  Output r{std::vector<uint16_t>(host.out_elems()), std::vector<float>(host.lse_elems())};
  const PlanOptions o{.backend = Backend::kCpuReference};
  Plan p;
  EXPECT_TRUE(plan(host.problem(), o, &p).ok());
  EXPECT_TRUE(run(p, host.tensors(r.out.data(), r.lse.data()), nullptr, 0).ok());
  return r;
}

// The graph plan of `g` on cpu-reference: prepare_step, then one layer; *flags gets the step's.
Output graph_run(const HostCase& host, const GraphCase& g, uint32_t* flags) {
  const PlanOptions o{.backend = Backend::kCpuReference};
  GraphPlan gp;
  const Status ps = plan_graph(g.bounds, o, &gp);
  EXPECT_TRUE(ps.ok()) << ps.to_string();
  std::vector<char> ws(gp.workspace_bytes);
  const int64_t rows = int64_t{g.bounds.batch_size} * g.bounds.tree_size * g.bounds.num_heads;
  Output r{std::vector<uint16_t>(rows * kVDim, 0x7fff), std::vector<float>(rows, NAN)};
  *flags = 0;
  EXPECT_TRUE(prepare_step(gp, g.step(flags), ws.data(), ws.size()).ok());
  const GraphLayer layer{.q = g.q.data(),
                         .kv_cache = host.kv8.empty() ? static_cast<const void*>(host.kv.data())
                                                      : host.kv8.data(),
                         .kv_scale = host.kv8.empty() ? nullptr : &host.kv_scale,
                         .out = r.out.data(),
                         .lse = r.lse.data(),
                         .softmax_scale = host.spec.softmax_scale};
  const Status rs = run_layer(gp, layer, ws.data(), ws.size());
  EXPECT_TRUE(rs.ok()) << rs.to_string();
  return r;
}

// The real lanes' rows of a graph run equal the host plan's, bit for bit.
void expect_same_rows(const Output& host, const Output& graph) {
  ASSERT_LE(host.out.size(), graph.out.size());
  EXPECT_EQ(0, std::memcmp(host.out.data(), graph.out.data(), host.out.size() * 2));
  for (size_t i = 0; i < host.lse.size(); ++i)
    ASSERT_TRUE(host.lse[i] == graph.lse[i] || (std::isnan(host.lse[i]) && std::isnan(graph.lse[i])))
        << "row " << i << ": " << host.lse[i] << " vs " << graph.lse[i];
}

HostCase uniform_case(int heads, int tree, std::vector<int64_t> prefixes, int page,
                      TreeShape shape, uint64_t seed, KvFormat kv = KvFormat::kSameAsQ) {
  CaseSpec spec{.name = "graph", .num_heads = heads, .page_size = page, .shape = shape,
                .seed = seed};
  spec.tree_sizes.assign(prefixes.size(), tree);
  spec.prefix_lens = std::move(prefixes);
  spec.kv_format = kv;
  return testing::make_case(spec);
}

// Every page-table layout and tree input, page sizes 1 to 128, padded lanes: the real lanes'
// output is the host plan's.
TEST(GraphPlan, EveryLayoutMatchesTheHostPlan) {
  uint64_t seed = 1;
  for (int page : {1, 4, 64, 128}) {
    for (PageTable pt : {PageTable::kCsr, PageTable::kRows, PageTable::kSlotRows}) {
      for (TreeInput tree :
           {TreeInput::kParents, TreeInput::kMask, TreeInput::kFullMask, TreeInput::kChain}) {
        const TreeShape shape = tree == TreeInput::kChain ? TreeShape::kChain : TreeShape::kRandom;
        const HostCase host = uniform_case(2, 5, {0, 37, 300}, page, shape, ++seed);
        for (int padded : {0, 2}) {
          SCOPED_TRACE("page " + std::to_string(page) + " table " +
                       std::to_string(static_cast<int>(pt)) + " tree " +
                       std::to_string(static_cast<int>(tree)) + " padded " +
                       std::to_string(padded));
          const GraphCase g = testing::make_graph_case(
              host, GraphLayout{.page_table = pt, .tree = tree, .padded_lanes = padded,
                                .kv_len_excludes_tree = padded > 0, .max_kv_len = 400});
          uint32_t flags = 0;
          expect_same_rows(host_run(host), graph_run(host, g, &flags));
          EXPECT_EQ(flags, 0u) << graph_error_names(flags);
        }
      }
    }
  }
}

// Decode (T = 1) and e4m3 caches through the same path.
TEST(GraphPlan, DecodeAndE4M3) {
  for (KvFormat kv : {KvFormat::kSameAsQ, KvFormat::kE4M3}) {
    const HostCase host = uniform_case(8, 1, {1, 64, 129, 500}, 16, TreeShape::kChain, 7, kv);
    const GraphCase g = testing::make_graph_case(
        host, GraphLayout{.page_table = PageTable::kSlotRows, .tree = TreeInput::kChain});
    uint32_t flags = 0;
    expect_same_rows(host_run(host), graph_run(host, g, &flags));
    EXPECT_EQ(flags, 0u);
  }
}

// A kv_len outside [T, max_kv_len] is clamped and flagged: below T the lane has no prefix (the
// host plan of kv_len = T), above the bound its missing pages read page 0.
TEST(GraphPlan, KvLenIsClamped) {
  const HostCase host = uniform_case(2, 4, {20, 50}, 8, TreeShape::kRandom, 3);
  GraphCase g = testing::make_graph_case(
      host, GraphLayout{.page_table = PageTable::kCsr, .max_kv_len = 200});
  g.kv_len[0] = 2;  // < T
  uint32_t flags = 0;
  const Output graph = graph_run(host, g, &flags);
  EXPECT_EQ(flags, kGraphKvLenClamped) << graph_error_names(flags);
  HostCase expected = host;
  expected.kv_len[0] = 4;
  expect_same_rows(host_run(expected), graph);

  g.kv_len[0] = host.kv_len[0];
  g.kv_len[1] = 1 << 30;  // > max_kv_len: clamped to it, and its pages past the CSR range
  graph_run(host, g, &flags);
  EXPECT_EQ(flags, kGraphKvLenClamped | kGraphTableClamped) << graph_error_names(flags);
}

// A page id outside the pool, a table row outside the table and a slot inside a page read page
// 0 (or row 0) and are flagged; the result is the host plan's with those pages replaced.
TEST(GraphPlan, PagesAndRowsAreClamped) {
  const HostCase host = uniform_case(2, 3, {40, 70}, 16, TreeShape::kRandom, 5);
  {
    GraphCase g = testing::make_graph_case(host, GraphLayout{.page_table = PageTable::kRows});
    g.indices[g.table_rows[1] * g.bounds.table_stride + 2] = static_cast<int32_t>(host.num_pages);
    uint32_t flags = 0;
    const Output graph = graph_run(host, g, &flags);
    EXPECT_EQ(flags, kGraphPageClamped) << graph_error_names(flags);
    HostCase expected = host;
    expected.kv_page_indices[expected.kv_page_indptr[1] + 2] = 0;
    expect_same_rows(host_run(expected), graph);
  }
  {
    GraphCase g = testing::make_graph_case(host, GraphLayout{.page_table = PageTable::kSlotRows});
    g.indices[g.table_rows[0] * g.bounds.table_stride + 16] += 1;  // not a page's first slot
    g.table_rows[1] = -3;                                        // outside the table: row 0
    uint32_t flags = 0;
    const Output graph = graph_run(host, g, &flags);
    EXPECT_EQ(flags, kGraphPageClamped | kGraphTableClamped) << graph_error_names(flags);
    HostCase expected = host;
    expected.kv_page_indices[expected.kv_page_indptr[0] + 1] = 0;
    for (int32_t k = expected.kv_page_indptr[1]; k < expected.kv_page_indptr[2]; ++k)
      expected.kv_page_indices[k] = 0;
    expect_same_rows(host_run(expected), graph);
  }
}

// An invalid parent is taken as the previous node; a mask that is not a tree is read as the
// tree of its nearest ancestors; both are flagged.
TEST(GraphPlan, TreesAreClamped) {
  const HostCase host = uniform_case(2, 6, {30, 10}, 4, TreeShape::kRandom, 9);
  {
    GraphCase g = testing::make_graph_case(host, GraphLayout{.tree = TreeInput::kParents});
    g.parents[6 + 4] = 4;  // lane 1, node 4: its own index
    uint32_t flags = 0;
    const Output graph = graph_run(host, g, &flags);
    EXPECT_EQ(flags, kGraphParentClamped) << graph_error_names(flags);
    HostCase expected = host;
    expected.parents[expected.qo_indptr[1] + 4] = 3;
    expect_same_rows(host_run(expected), graph);
  }
  {
    GraphCase g = testing::make_graph_case(host, GraphLayout{.tree = TreeInput::kMask});
    // Lane 0, node 5 sees only itself and node 2 (not 2's ancestors): its parent is 2.
    uint8_t* row = g.mask.data() + 5 * 6;
    std::memset(row, 0, 6);
    row[5] = row[2] = 1;
    // Node 2 has a parent, so the row misses an ancestor of its new parent: flagged.
    uint32_t flags = 0;
    const Output graph = graph_run(host, g, &flags);
    EXPECT_EQ(flags, kGraphMaskNotTree) << graph_error_names(flags);
    HostCase expected = host;
    expected.parents[5] = 2;
    expect_same_rows(host_run(expected), graph);
  }
  {
    GraphCase g = testing::make_graph_case(host, GraphLayout{.tree = TreeInput::kFullMask});
    g.mask.resize(g.mask.size() - 1);  // lane 1's rows run past the mask: a chain
    uint32_t flags = 0;
    const Output graph = graph_run(host, g, &flags);
    EXPECT_EQ(flags, kGraphMaskNotTree) << graph_error_names(flags);
    HostCase expected = host;
    for (int i = 0; i < 6; ++i) expected.parents[6 + i] = i - 1;
    expect_same_rows(host_run(expected), graph);
  }
}

// Errors before anything runs: bounds, a missing array, a short workspace.
TEST(GraphPlan, ArgumentErrors) {
  GraphBounds b{.batch_size = 2, .tree_size = 4, .num_heads = 8, .page_size = 64,
                .num_pages = 10, .max_kv_len = 3};
  GraphPlan gp;
  Status s = plan_graph(b, {.backend = Backend::kCpu}, &gp);
  EXPECT_NE(s.message().find("bounds.max_kv_len"), std::string::npos) << s.message();
  b.max_kv_len = 600;
  b.page_table = PageTable::kRows;
  b.page_capacity = 4;
  b.table_stride = 9;  // 600 tokens need 10 pages
  s = plan_graph(b, {.backend = Backend::kCpu}, &gp);
  EXPECT_NE(s.message().find("bounds.table_stride"), std::string::npos) << s.message();
  b.table_stride = 10;
  b.tree = TreeInput::kMask;
  ASSERT_TRUE(plan_graph(b, {.backend = Backend::kCpu}, &gp).ok());
  std::vector<char> ws(gp.workspace_bytes);
  std::vector<int32_t> kv_len = {5, 5}, table(40, 0);
  GraphStep step{.kv_len = kv_len.data(), .kv_page_indices = table.data()};
  s = prepare_step(gp, step, ws.data(), ws.size());
  EXPECT_NE(s.message().find("step.tree_mask"), std::string::npos) << s.message();
  std::vector<uint8_t> mask(2 * 4 * 4, 1);
  step.tree_mask = mask.data();
  s = prepare_step(gp, step, ws.data(), ws.size() - 1);
  EXPECT_NE(s.message().find("workspace_bytes"), std::string::npos) << s.message();
  EXPECT_TRUE(prepare_step(gp, step, ws.data(), ws.size()).ok());
  s = run_layer(GraphPlan{}, GraphLayer{}, ws.data(), ws.size());
  EXPECT_NE(s.message().find("plan_graph"), std::string::npos) << s.message();
}

// The step's schedule (the device's ranking, here on the CPU) never needs more chunks than the
// plan's grid holds, takes whole tiles, and follows the lengths: a 100-token step is one
// chunk, a 185016-token one many.
TEST(GraphPlan, StepScheduleStaysInTheGrid) {
  detail::GraphPlanState st;
  st.rows_per_cta = 64;
  st.tile_tokens = 64;
  st.row_blocks = 2;
  st.concurrent_ctas = 132;
  st.chunk_cap = 264;
  st.token_ns = 37;
  st.cta_ns = 9500;
  st.combine_ns = 3000;
  st.partial_row_ns = 1;
  st.token_bytes = 1152;
  st.bytes_per_ns = 4000;
  struct Lanes {
    std::vector<int32_t> lens;
    int64_t count() const { return static_cast<int64_t>(lens.size()); }
    int64_t rows(int64_t) const { return 128; }
    int64_t kv(int64_t b) const { return lens[static_cast<size_t>(b)]; }
  };
  for (int32_t len : {100, 4000, 65536, 185016}) {
    const detail::StepSchedule s = detail::host_step_schedule(st, Lanes{{len}});
    ASSERT_GT(s.chunk_tokens, 0);
    EXPECT_EQ(s.chunk_tokens % st.tile_tokens, 0);
    const int32_t chunks = (len + s.chunk_tokens - 1) / s.chunk_tokens;
    EXPECT_LE(chunks, st.chunk_cap) << len;
    if (len == 100) EXPECT_EQ(chunks, 1);
    if (len == 185016) EXPECT_GT(chunks, 30);
  }
  st.chunk_cap = 3;
  const detail::StepSchedule capped = detail::host_step_schedule(st, Lanes{{185016}});
  EXPECT_LE((185016 + capped.chunk_tokens - 1) / capped.chunk_tokens, 3);
}

}  // namespace
}  // namespace treeverify
