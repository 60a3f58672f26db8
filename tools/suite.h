// The benchmark suite (bench/suite.json, embedded at build time) and the cases it names:
// parsing, selection by name, L scaling, and host metadata without the KV data.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "testing/cases.h"
#include "treeverify/status.h"
#include "treeverify/verify.h"

namespace treeverify::cli {

// One runnable case: a suite entry with a single H (list-valued heads expand to one case each).
struct SuiteCase {
  std::string name;    // "V1", or "R1.h8" for an expanded heads list
  std::string family;  // the suite entry's name: "R1" selects every "R1.hH"
  std::string why;
  int32_t num_heads = 0;
  int32_t page_size = 0;
  std::vector<int32_t> tree_sizes;   // T_b per request
  std::vector<int64_t> prefix_lens;  // L_b per request
  testing::TreeShape shape = testing::TreeShape::kRandom;
  DType dtype = DType::kBF16;
  KvFormat kv_format = KvFormat::kSameAsQ;  // set by --kv-format, not by suite files
  float softmax_scale = 0.1447f;
  uint64_t seed = 1;
};

// The lengths a case must have to exist at all, whether it comes from a suite file or the
// command line: L_b, T_b >= 0, each kv_len = L_b + T_b and the batch's sum of them below 2^31
// (kv_len and the page table are int32). A scaled-down copy of a case that fails this is no
// check of it.
Status check_case_lengths(const SuiteCase& c);

// The suite file built into this binary (bench/suite.json at build time).
const char* embedded_suite_json();

// Parses suite JSON text; errors name the case and the field. `origin` names the text in them.
Status parse_suite(const std::string& json_text, const std::string& origin,
                   std::vector<SuiteCase>* cases);
// The embedded suite, or the file at `path` when it is not empty.
Status load_suite(const std::string& path, std::vector<SuiteCase>* cases);

// The cases named (a name matches a case or a whole family); all of them when `names` is
// empty. An unknown name is an error that lists the known ones.
Status select_cases(const std::vector<SuiteCase>& suite, const std::vector<std::string>& names,
                    std::vector<SuiteCase>* selected);

// Multiplies every prefix length by `scale` (rounded, and a non-empty prefix stays >= 1 so
// that a scaled case never loses its prefix altogether).
SuiteCase scale_prefix(const SuiteCase& c, double scale);

// The generator's spec for this case.
testing::CaseSpec to_spec(const SuiteCase& c);

// docs/BENCH.md's roofline counts from the case's lengths alone (same formula as
// testing::verify_bytes / verify_flops, which need a built case).
double case_bytes(const SuiteCase& c);
double case_flops(const SuiteCase& c);

// Host bytes of the buffers a case is built and run with (testing::make_case and the runners):
// q, the KV pool (with the generator's slack), out and lse, each held at least once; for the
// message of an allocation that fails (valid cases may not fit this machine).
struct CaseMemory {
  double q = 0, kv = 0, out = 0, lse = 0;
  double total() const { return q + kv + out + lse; }
  std::string to_string() const;  // "q 15.10 GB, KV pool 0.00 GB, out 13.42 GB, lse 0.05 GB ..."
};
CaseMemory case_memory(const SuiteCase& c);

// Host metadata of the case without q and KV: what plan() reads. The page table is the
// identity over an exactly-sized pool (plan() depends on lengths and counts, not on which
// pages), so `treeverify doctor` can plan V1 .. D2 without allocating gigabytes.
struct CaseMetadata {
  int64_t num_pages = 0;
  std::vector<int32_t> qo_indptr, kv_len, kv_page_indptr, kv_page_indices, parents;
  VerifyProblem problem(const SuiteCase& c) const;  // points into these vectors
};
CaseMetadata make_metadata(const SuiteCase& c);

// "185000" when every request has the same value, else the whole list "[1,100000,...]".
std::string format_lengths(const std::vector<int64_t>& v);
std::string format_lengths(const std::vector<int32_t>& v);
// For tables: "185000", or "1..100000" for a ragged batch.
std::string format_range(const std::vector<int64_t>& v);
std::string format_range(const std::vector<int32_t>& v);

}  // namespace treeverify::cli
