// Running a planned case for the correctness check and timing it: one interface, a host
// implementation (CPU backends, std::chrono) and a device one (CUDA backends, cudaEvent).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "testing/cases.h"
#include "treeverify/verify.h"

namespace treeverify::cli {

class Runner {
 public:
  virtual ~Runner() = default;
  // One call with outputs poisoned first (NaN bits), copied back to the host.
  virtual Status run_once(std::vector<uint16_t>* out, std::vector<float>* lse) = 0;
  // `warmup` untimed calls, then `iters` timed ones; one sample (ms) per call. Caches are
  // flushed between calls so nothing is served from a previous call's reads (docs/BENCH.md).
  virtual Status time(int warmup, int iters, std::vector<double>* samples_ms) = 0;
  // How the samples were taken, for the output ("cudaEvent, L2 flushed ...").
  virtual std::string method() const = 0;
};

// The runner for plan.backend. `c` must outlive the runner (the host one reads it in place).
Status make_runner(const Plan& plan, const testing::HostCase& c, std::unique_ptr<Runner>* runner);

// The device runner: copies the case to plan.device, allocates the workspace, times with
// cudaEvents. kUnsupported in a build without CUDA.
Status make_cuda_runner(const Plan& plan, const testing::HostCase& c,
                        std::unique_ptr<Runner>* runner);

double median(std::vector<double> samples);

}  // namespace treeverify::cli
