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

// How the device runner empties L2 between timed calls. kRead (the default) reads a buffer of
// 4x L2, which leaves L2 holding clean lines of that buffer: nothing the call reads is cached
// and nothing the call evicts has to be written back. kWrite writes the buffer (the protocol of
// tables before 2026-12): L2 is then full of dirty lines, and a memory-bound call also pays
// their write-back (about 60 MB on the H200), which belongs to whoever wrote them.
enum class Flush { kRead, kWrite };

// Per-step costs of `layers` runs of one plan, as an engine calls it (one a layer, one stream):
// host enqueue time per run() and GPU time of the whole loop, L2 flushed once before it.
struct LayerTimes {
  int layers = 0;
  double enqueue_us = 0, gpu_ms = 0;                  // step data kept between runs (the plan)
  double rebuild_enqueue_us = 0, rebuild_gpu_ms = 0;  // step data rebuilt by every run
  double graph_launch_us = 0, graph_gpu_ms = 0;       // the loop captured once, then replayed
};

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
  // LayerTimes, medians of `reps` repetitions; kUnsupported where there is no stream.
  virtual Status time_layers(int layers, int reps, LayerTimes* times) {
    (void)layers, (void)reps, (void)times;
    return Status(StatusCode::kUnsupported, "per-layer timing needs a CUDA backend");
  }
};

// The runner for plan.backend. `c` must outlive the runner (the host one reads it in place).
Status make_runner(const Plan& plan, const testing::HostCase& c, Flush flush,
                   std::unique_ptr<Runner>* runner);

// The device runner: copies the case to plan.device, allocates the workspace, times with
// cudaEvents. kUnsupported in a build without CUDA.
Status make_cuda_runner(const Plan& plan, const testing::HostCase& c, Flush flush,
                        std::unique_ptr<Runner>* runner);

double median(std::vector<double> samples);

}  // namespace treeverify::cli
