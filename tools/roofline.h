// docs/BENCH.md's roofline: the machine's ceilings, measured in the same run, and a call's floor.
#pragma once

#include <string>

#include "treeverify/status.h"

namespace treeverify::cli {

struct Ceilings {
  double bandwidth = 0;  // bytes/s, a large copy: bytes read + bytes written over time
  double mma_flops = 0;  // flop/s, a large matrix product
  // flop/s of a large product of e4m3 operands (fast mode's ceiling: its Q.K and P.V are e4m3
  // products); 0 where the device has none or it was not measured.
  double mma8_flops = 0;
  std::string bandwidth_how;  // what was measured, for the output
  std::string mma_how;
  std::string mma8_how;
};

// The ceilings a plan of `precision` fast is held to: fast mode's products against the e4m3
// ceiling where one was measured (else the 16-bit one, whose mma_how says what it is).
Ceilings ceilings_for_fast(const Ceilings& c);

struct RooflinePoint {
  double seconds = 0;          // the measured time of the call
  double gbps = 0;             // effective bandwidth: bytes / time, 1e9 bytes/s
  double tflops = 0;           // flops / time, 1e12 flop/s
  double floor_s = 0;          // max(bytes / bandwidth, flops / mma_flops)
  double fraction = 0;         // floor / time: 1 means at the roofline
  bool compute_bound = false;  // the flops term sets the floor
};

// Pure math; a zero ceiling makes its term of the floor zero (not measured).
RooflinePoint roofline(double bytes, double flops, double seconds, const Ceilings& ceilings);

// CPU ceilings: a multithreaded memcpy of `copy_bytes` per repetition (the best of a few) and
// cblas_sgemm on n x n x n matrices (best of a few). cpu computes in fp32 through the same
// BLAS, so sgemm is its MMA ceiling.
Ceilings measure_cpu_ceilings(int num_threads, size_t copy_bytes = size_t{256} << 20,
                              int gemm_n = 2048);

// GPU ceilings (docs/BENCH.md): a device-to-device copy and a bf16 GEMM through cuBLAS, and on
// devices with e4m3 products (sm_89 and later) an e4m3 GEMM through cuBLASLt.
// kUnsupported in a build without CUDA.
Status measure_cuda_ceilings(int device, Ceilings* ceilings);

}  // namespace treeverify::cli
