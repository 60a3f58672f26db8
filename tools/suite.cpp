// The benchmark suite: parsing bench/suite.json, selecting and scaling cases, metadata.
#include "suite.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "core/check.h"

namespace treeverify::cli {
namespace {

using nlohmann::json;

Status bad(const std::string& origin, const std::string& where, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, fmt::format("{}: {}: {}", origin, where, what));
}

// A field that is a number (the same for every request) or a list of one value per request.
template <typename T>
Status per_request(const json& entry, const char* key, int32_t batch, const std::string& origin,
                   const std::string& where, std::vector<T>* values) {
  if (!entry.contains(key)) return bad(origin, where, fmt::format("missing field '{}'", key));
  const json& v = entry.at(key);
  // An integer in [0, the largest T], read without wrapping (json keeps big ones unsigned).
  auto value_of = [&](const json& x, T* out) -> Status {
    const bool too_big =
        x.is_number_unsigned()
            ? x.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<T>::max())
            : x.get<int64_t>() > static_cast<int64_t>(std::numeric_limits<T>::max());
    if (too_big)
      return bad(
          origin, where,
          fmt::format("'{}' has a value {} past {}", key, x.dump(), std::numeric_limits<T>::max()));
    if (!x.is_number_unsigned() && x.get<int64_t>() < 0)
      return bad(origin, where, fmt::format("'{}' has a negative value {}", key, x.dump()));
    *out = static_cast<T>(x.get<int64_t>());
    return Status::Ok();
  };
  values->clear();
  if (v.is_number_integer()) {
    T x{};
    TV_RETURN_IF_ERROR(value_of(v, &x));
    values->assign(batch, x);
  } else if (v.is_array() &&
             std::all_of(v.begin(), v.end(), [](const json& x) { return x.is_number_integer(); })) {
    if (static_cast<int32_t>(v.size()) != batch) {
      return bad(origin, where,
                 fmt::format("'{}' has {} values, batch is {}", key, v.size(), batch));
    }
    for (const json& x : v) {
      T value{};
      TV_RETURN_IF_ERROR(value_of(x, &value));
      values->push_back(value);
    }
  } else {
    return bad(origin, where, fmt::format("'{}' must be an integer or a list of integers", key));
  }
  return Status::Ok();
}

// An integer in [lo, hi] (hi >= 0), read without wrapping: json keeps integers past 2^63 - 1
// unsigned, where get<int64_t>() would read 2^63 as -2^63. The message quotes the file's text.
Status int_in(const json& x, const char* key, int64_t lo, int64_t hi, const std::string& origin,
              const std::string& where, int64_t* value) {
  if (!x.is_number_integer())
    return bad(origin, where, fmt::format("field '{}' must be an integer", key));
  const bool in_range = x.is_number_unsigned() ? x.get<uint64_t>() <= static_cast<uint64_t>(hi) &&
                                                     static_cast<int64_t>(x.get<uint64_t>()) >= lo
                                               : x.get<int64_t>() >= lo && x.get<int64_t>() <= hi;
  if (!in_range)
    return bad(origin, where, fmt::format("{} = {} is not in [{}, {}]", key, x.dump(), lo, hi));
  *value = x.get<int64_t>();
  return Status::Ok();
}

Status get_int(const json& entry, const char* key, int64_t lo, int64_t hi,
               const std::string& origin, const std::string& where, int64_t* value) {
  if (!entry.contains(key))
    return bad(origin, where, fmt::format("field '{}' must be an integer", key));
  return int_in(entry.at(key), key, lo, hi, origin, where, value);
}

// A seed: any integer in [0, 2^64 - 1] (json holds the non-negative ones unsigned).
Status get_seed(const json& x, const std::string& origin, const std::string& where,
                uint64_t* seed) {
  if (!x.is_number_integer() || !x.is_number_unsigned())
    return bad(origin, where,
               fmt::format("seed = {} is not an integer in [0, 2^64 - 1]", x.dump()));
  *seed = x.get<uint64_t>();
  return Status::Ok();
}

}  // namespace

Status check_case_lengths(const SuiteCase& c) {
  constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
  if (c.tree_sizes.size() != c.prefix_lens.size())
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("{} tree sizes for {} prefix lengths", c.tree_sizes.size(),
                              c.prefix_lens.size()));
  // kv_len = L + T is an int32, and the whole batch's KV must be addressable by the int32
  // page table of one call.
  int64_t total_kv = 0;
  for (size_t i = 0; i < c.tree_sizes.size(); ++i) {
    const int64_t tree = c.tree_sizes[i], prefix = c.prefix_lens[i];
    if (tree < 0 || prefix < 0)
      return Status(
          StatusCode::kInvalidArgument,
          fmt::format("request {}: prefix = {}, tree = {}: lengths are >= 0", i, prefix, tree));
    if (prefix > kInt32Max - tree)
      return Status(
          StatusCode::kInvalidArgument,
          fmt::format("request {}: prefix + tree = {} + {} is past 2^31 - 1", i, prefix, tree));
    total_kv += prefix + tree;
  }
  if (total_kv > kInt32Max)
    return Status(StatusCode::kInvalidArgument,
                  fmt::format("the batch holds {} KV tokens, past 2^31 - 1", total_kv));
  return Status::Ok();
}

Status parse_suite(const std::string& json_text, const std::string& origin,
                   std::vector<SuiteCase>* cases) {
  json doc = json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad(origin, "file", "not valid JSON");
  if (!doc.is_object() || !doc.contains("cases") || !doc["cases"].is_array()) {
    return bad(origin, "file", "expected an object with a 'cases' list");
  }
  float scale = 0.1447f;
  if (doc.contains("softmax_scale")) {
    if (!doc["softmax_scale"].is_number()) return bad(origin, "softmax_scale", "not a number");
    scale = doc["softmax_scale"].get<float>();
  }
  DType dtype = DType::kBF16;
  if (doc.contains("dtype")) {
    const std::string d = doc["dtype"].is_string() ? doc["dtype"].get<std::string>() : "";
    if (d == "fp16") {
      dtype = DType::kFP16;
    } else if (d != "bf16") {
      return bad(origin, "dtype", "expected \"bf16\" or \"fp16\"");
    }
  }

  std::vector<SuiteCase> out;
  for (size_t i = 0; i < doc["cases"].size(); ++i) {
    const json& e = doc["cases"][i];
    std::string where = fmt::format("cases[{}]", i);
    if (!e.is_object() || !e.contains("name") || !e["name"].is_string() ||
        e["name"].get<std::string>().empty()) {
      return bad(origin, where, "each case needs a non-empty string 'name'");
    }
    SuiteCase base;
    base.family = e["name"].get<std::string>();
    where = fmt::format("case {}", base.family);
    for (const SuiteCase& prev : out) {
      if (prev.family == base.family) return bad(origin, where, "duplicate case name");
    }
    for (const char* key : {"why", "shape"}) {
      if (e.contains(key) && !e[key].is_string())
        return bad(origin, where, fmt::format("field '{}' must be a string", key));
    }
    base.why = e.value("why", "");
    base.softmax_scale = scale;
    base.dtype = dtype;
    int64_t batch = 0, page = 0;
    TV_RETURN_IF_ERROR(get_int(e, "batch", 1, int64_t{1} << 20, origin, where, &batch));
    TV_RETURN_IF_ERROR(get_int(e, "page", 1, kMaxPageSize, origin, where, &page));
    if (e.contains("seed")) TV_RETURN_IF_ERROR(get_seed(e["seed"], origin, where, &base.seed));
    if (!is_valid_page_size(static_cast<int32_t>(page))) {
      return bad(origin, where,
                 fmt::format("page = {} is not a power of two in [1, {}]", page, kMaxPageSize));
    }
    base.page_size = static_cast<int32_t>(page);
    const auto b = static_cast<int32_t>(batch);
    TV_RETURN_IF_ERROR(per_request(e, "tree", b, origin, where, &base.tree_sizes));
    TV_RETURN_IF_ERROR(per_request(e, "prefix", b, origin, where, &base.prefix_lens));
    if (Status s = check_case_lengths(base); !s.ok()) return bad(origin, where, s.message());
    const std::string shape = e.value("shape", "random");
    if (!testing::parse_tree_shape(shape, &base.shape)) {
      return bad(origin, where, fmt::format("unknown shape '{}'", shape));
    }

    // heads: one H per call, so a list makes one case per value.
    std::vector<int64_t> heads;
    if (e.contains("heads") && e["heads"].is_number_integer()) {
      TV_RETURN_IF_ERROR(
          int_in(e["heads"], "heads", 1, kMaxHeads, origin, where, &heads.emplace_back()));
    } else if (e.contains("heads") && e["heads"].is_array() && !e["heads"].empty()) {
      for (const json& h : e["heads"]) {
        if (!h.is_number_integer()) return bad(origin, where, "'heads' must hold integers");
        TV_RETURN_IF_ERROR(int_in(h, "heads", 1, kMaxHeads, origin, where, &heads.emplace_back()));
      }
    } else {
      return bad(origin, where, "field 'heads' must be an integer or a non-empty list");
    }
    for (int64_t h : heads) {
      SuiteCase c = base;
      c.num_heads = static_cast<int32_t>(h);
      c.name = heads.size() == 1 ? base.family : fmt::format("{}.h{}", base.family, h);
      out.push_back(std::move(c));
    }
  }
  *cases = std::move(out);
  return Status::Ok();
}

Status load_suite(const std::string& path, std::vector<SuiteCase>* cases) {
  if (path.empty()) return parse_suite(embedded_suite_json(), "built-in suite", cases);
  std::ifstream in(path);
  if (!in)
    return Status(StatusCode::kInvalidArgument, fmt::format("cannot read suite file '{}'", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_suite(ss.str(), path, cases);
}

Status select_cases(const std::vector<SuiteCase>& suite, const std::vector<std::string>& names,
                    std::vector<SuiteCase>* selected) {
  std::vector<SuiteCase> out;
  if (names.empty()) {
    out = suite;
  }
  for (const std::string& n : names) {
    bool found = false;
    for (const SuiteCase& c : suite) {
      if (c.name == n || c.family == n) {
        out.push_back(c);
        found = true;
      }
    }
    if (!found) {
      std::vector<std::string> known;
      for (const SuiteCase& c : suite) known.push_back(c.name);
      return Status(
          StatusCode::kInvalidArgument,
          fmt::format("unknown case '{}' (the suite has: {})", n, fmt::join(known, ", ")));
    }
  }
  *selected = std::move(out);
  return Status::Ok();
}

SuiteCase scale_prefix(const SuiteCase& c, double scale) {
  SuiteCase s = c;
  for (int64_t& l : s.prefix_lens) {
    if (l > 0) l = std::max<int64_t>(1, std::llround(static_cast<double>(l) * scale));
  }
  return s;
}

testing::CaseSpec to_spec(const SuiteCase& c) {
  testing::CaseSpec spec;
  spec.name = c.name;
  spec.num_heads = c.num_heads;
  spec.tree_sizes = c.tree_sizes;
  spec.prefix_lens = c.prefix_lens;
  spec.page_size = c.page_size;
  spec.shape = c.shape;
  spec.dtype = c.dtype;
  spec.kv_format = c.kv_format;
  spec.softmax_scale = c.softmax_scale;
  spec.seed = c.seed;
  return spec;
}

double case_bytes(const SuiteCase& c) {
  double tokens = 0;
  for (size_t b = 0; b < c.tree_sizes.size(); ++b) {
    tokens += static_cast<double>(c.prefix_lens[b]) + c.tree_sizes[b];
  }
  return tokens * kv_row_bytes(c.kv_format, c.dtype);
}

double case_flops(const SuiteCase& c) {
  double flops = 0;
  for (size_t b = 0; b < c.tree_sizes.size(); ++b) {
    const double t = c.tree_sizes[b];
    flops += 2.0 * t * c.num_heads * (static_cast<double>(c.prefix_lens[b]) + t) * (kQKDim + kVDim);
  }
  return flops;
}

CaseMemory case_memory(const SuiteCase& c) {
  double nodes = 0, pages = 0;
  for (size_t b = 0; b < c.tree_sizes.size(); ++b) {
    nodes += c.tree_sizes[b];
    pages += std::ceil((static_cast<double>(c.prefix_lens[b]) + c.tree_sizes[b]) /
                       std::max<int32_t>(c.page_size, 1));
  }
  const double rows = nodes * c.num_heads;
  const double pool_rows = std::ceil(pages * (1.0 + testing::CaseSpec{}.pool_slack)) * c.page_size;
  return {.q = rows * kQKDim * dtype_bytes(c.dtype),
          .kv = pool_rows * kv_row_bytes(c.kv_format, c.dtype),
          .out = rows * kVDim * dtype_bytes(c.dtype),
          .lse = rows * sizeof(float)};
}

std::string CaseMemory::to_string() const {
  constexpr double kGB = 1e9;
  return fmt::format("q {:.2f} GB, KV pool {:.2f} GB, out {:.2f} GB, lse {:.2f} GB: {:.2f} GB",
                     q / kGB, kv / kGB, out / kGB, lse / kGB, total() / kGB);
}

VerifyProblem CaseMetadata::problem(const SuiteCase& c) const {
  return VerifyProblem{.batch_size = static_cast<int32_t>(c.tree_sizes.size()),
                       .num_heads = c.num_heads,
                       .page_size = c.page_size,
                       .num_pages = num_pages,
                       .dtype = c.dtype,
                       .kv_format = c.kv_format,
                       .softmax_scale = c.softmax_scale,
                       .qo_indptr = qo_indptr.data(),
                       .kv_len = kv_len.data(),
                       .kv_page_indptr = kv_page_indptr.data(),
                       .kv_page_indices = kv_page_indices.data(),
                       .parents = parents.data()};
}

CaseMetadata make_metadata(const SuiteCase& c) {
  CaseMetadata m;
  std::mt19937_64 rng(c.seed);
  m.qo_indptr.push_back(0);
  m.kv_page_indptr.push_back(0);
  const int64_t page = std::max<int32_t>(c.page_size, 1);
  for (size_t b = 0; b < c.tree_sizes.size(); ++b) {
    const int32_t t = c.tree_sizes[b];
    const int64_t len = c.prefix_lens[b] + t;
    m.qo_indptr.push_back(m.qo_indptr.back() + t);
    m.kv_len.push_back(static_cast<int32_t>(len));
    const int64_t pages = (len + page - 1) / page;
    for (int64_t p = 0; p < pages; ++p)
      m.kv_page_indices.push_back(static_cast<int32_t>(m.num_pages++));
    m.kv_page_indptr.push_back(static_cast<int32_t>(m.kv_page_indices.size()));
    const std::vector<int32_t> tree = testing::make_tree(c.shape, t, rng);
    m.parents.insert(m.parents.end(), tree.begin(), tree.end());
  }
  return m;
}

template <typename T>
static std::string format_lengths_impl(const std::vector<T>& v) {
  if (!v.empty() && std::all_of(v.begin(), v.end(), [&](T x) { return x == v[0]; })) {
    return fmt::format("{}", v[0]);
  }
  return fmt::format("[{}]", fmt::join(v, ","));
}
template <typename T>
static std::string format_range_impl(const std::vector<T>& v) {
  if (v.empty()) return "-";
  const auto [lo, hi] = std::minmax_element(v.begin(), v.end());
  return *lo == *hi ? fmt::format("{}", *lo) : fmt::format("{}..{}", *lo, *hi);
}
std::string format_range(const std::vector<int64_t>& v) { return format_range_impl(v); }
std::string format_range(const std::vector<int32_t>& v) { return format_range_impl(v); }
std::string format_lengths(const std::vector<int64_t>& v) { return format_lengths_impl(v); }
std::string format_lengths(const std::vector<int32_t>& v) { return format_lengths_impl(v); }

}  // namespace treeverify::cli
