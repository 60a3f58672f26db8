// The host runner: CPU backends timed with std::chrono.
#include "timing.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "core/check.h"

namespace treeverify::cli {
namespace {

// Larger than the last-level cache of the CPUs we run on (AMD EPYC: 32 MiB per CCD; Xeon:
// up to ~100 MiB), so that writing it evicts the previous call's KV and q.
constexpr size_t kCacheFlushBytes = size_t{128} << 20;

class HostRunner final : public Runner {
 public:
  HostRunner(const Plan& plan, const testing::HostCase& c)
      : plan_(plan),
        case_(c),
        out_(c.out_elems()),
        lse_(c.lse_elems()),
        workspace_(plan.workspace_bytes),
        flush_(kCacheFlushBytes) {}

  Status run_once(std::vector<uint16_t>* out, std::vector<float>* lse) override {
    std::fill(out_.begin(), out_.end(), uint16_t{0xffff});  // NaN in bf16 and fp16
    std::fill(lse_.begin(), lse_.end(), std::numeric_limits<float>::quiet_NaN());
    TV_RETURN_IF_ERROR(call());
    *out = out_;
    *lse = lse_;
    return Status::Ok();
  }

  Status time(int warmup, int iters, std::vector<double>* samples_ms) override {
    for (int i = 0; i < warmup; ++i) TV_RETURN_IF_ERROR(call());
    samples_ms->clear();
    for (int i = 0; i < iters; ++i) {
      std::memset(flush_.data(), i & 0xff, flush_.size());
      const auto t0 = std::chrono::steady_clock::now();
      TV_RETURN_IF_ERROR(call());
      const auto t1 = std::chrono::steady_clock::now();
      samples_ms->push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    }
    return Status::Ok();
  }

  std::string method() const override {
    return fmt::format("std::chrono around run(), caches flushed by a {} MiB write between calls",
                       kCacheFlushBytes >> 20);
  }

 private:
  Status call() {
    return run(plan_, case_.tensors(out_.data(), lse_.data()),
               workspace_.empty() ? nullptr : workspace_.data(), workspace_.size());
  }

  Plan plan_;
  const testing::HostCase& case_;
  std::vector<uint16_t> out_;
  std::vector<float> lse_;
  std::vector<char> workspace_;
  std::vector<char> flush_;
};

}  // namespace

Status make_runner(const Plan& plan, const testing::HostCase& c, Flush flush,
                   std::unique_ptr<Runner>* runner) {
  switch (plan.backend) {
    case Backend::kCpuReference:
    case Backend::kCpu:
      *runner = std::make_unique<HostRunner>(plan, c);
      return Status::Ok();
    case Backend::kCuda:
      return make_cuda_runner(plan, c, flush, runner);
    case Backend::kAuto:
      break;
  }
  return Status(StatusCode::kInternal, "make_runner: the plan names no backend");
}

double median(std::vector<double> samples) {
  if (samples.empty()) return 0;
  const size_t mid = samples.size() / 2;
  std::nth_element(samples.begin(), samples.begin() + mid, samples.end());
  if (samples.size() % 2 == 1) return samples[mid];
  const double hi = samples[mid];
  return (hi + *std::max_element(samples.begin(), samples.begin() + mid)) / 2;
}

}  // namespace treeverify::cli
