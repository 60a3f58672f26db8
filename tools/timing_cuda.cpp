// The device runner and the GPU ceilings: CUDA backends timed with cudaEvents, cold L2.
#include "roofline.h"
#include "timing.h"

#ifdef TREEVERIFY_WITH_CUDA

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>

#include "core/check.h"

namespace treeverify::cli {
namespace {

#define TV_CUDA_TRY(expr)                                                         \
  do {                                                                            \
    cudaError_t _e = (expr);                                                      \
    if (_e != cudaSuccess)                                                        \
      return Status(StatusCode::kCudaError,                                       \
                    fmt::format("{} failed: {}", #expr, cudaGetErrorString(_e))); \
  } while (0)

// Reading or writing this many bytes between calls evicts the previous call's data from L2
// (H200: 60 MB, B200: 126 MB).
size_t flush_bytes(int device) {
  int l2 = 0;
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device);
  return std::max<size_t>(size_t{256} << 20, 4 * static_cast<size_t>(l2));
}

// Owns the device buffers of one case.
class DeviceRunner final : public Runner {
 public:
  DeviceRunner(const Plan& plan, const testing::HostCase& c, Flush flush)
      : plan_(plan), case_(c), flush_mode_(flush) {}
  ~DeviceRunner() override {
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    if (cublas_) cublasDestroy(cublas_);
    for (void* p : buffers_) cudaFree(p);
    if (start_) cudaEventDestroy(start_);
    if (stop_) cudaEventDestroy(stop_);
    if (stream_) cudaStreamDestroy(stream_);
  }

  Status init() {
    device_ = plan_.device;
    if (device_ < 0) TV_CUDA_TRY(cudaGetDevice(&device_));
    TV_CUDA_TRY(cudaSetDevice(device_));
    TV_CUDA_TRY(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    TV_CUDA_TRY(cudaEventCreate(&start_));
    TV_CUDA_TRY(cudaEventCreate(&stop_));
    TV_RETURN_IF_ERROR(upload(case_.q, &q_));
    if (case_.spec.kv_format == KvFormat::kE4M3) {
      TV_RETURN_IF_ERROR(upload(case_.kv8, &kv_));
      TV_RETURN_IF_ERROR(upload(std::vector<float>{case_.kv_scale}, &kv_scale_));
    } else {
      TV_RETURN_IF_ERROR(upload(case_.kv, &kv_));
    }
    TV_RETURN_IF_ERROR(upload(case_.qo_indptr, &qo_indptr_));
    TV_RETURN_IF_ERROR(upload(case_.kv_len, &kv_len_));
    TV_RETURN_IF_ERROR(upload(case_.kv_page_indptr, &page_indptr_));
    TV_RETURN_IF_ERROR(upload(case_.kv_page_indices, &page_indices_));
    TV_RETURN_IF_ERROR(upload(case_.parents, &parents_));
    TV_RETURN_IF_ERROR(alloc(case_.out_elems() * sizeof(uint16_t), &out_));
    TV_RETURN_IF_ERROR(alloc(case_.lse_elems() * sizeof(float), &lse_));
    TV_RETURN_IF_ERROR(alloc(plan_.workspace_bytes, &workspace_));
    flush_size_ = flush_bytes(device_);
    TV_RETURN_IF_ERROR(alloc(flush_size_, &flush_));
    // Never zeros (docs/BENCH.md): 0x3c3c3c3c is a normal float, so the read flush sums numbers.
    TV_CUDA_TRY(cudaMemset(flush_, 0x3c, flush_size_));
    TV_RETURN_IF_ERROR(alloc(sizeof(float), &flush_sum_));
    if (cublasCreate(&cublas_) != CUBLAS_STATUS_SUCCESS) {
      return Status(StatusCode::kCudaError, "cublasCreate failed");
    }
    if (cublasSetStream(cublas_, stream_) != CUBLAS_STATUS_SUCCESS ||
        cublasSetPointerMode(cublas_, CUBLAS_POINTER_MODE_DEVICE) != CUBLAS_STATUS_SUCCESS) {
      return Status(StatusCode::kCudaError, "cublasSetStream/cublasSetPointerMode failed");
    }
    return Status::Ok();
  }

  // Empties L2 (see Flush), enqueued on the runner's stream.
  Status flush(int i) {
    if (flush_mode_ == Flush::kWrite) {
      TV_CUDA_TRY(cudaMemsetAsync(flush_, i & 0xff, flush_size_, stream_));
      return Status::Ok();
    }
    // sasum reads every float and writes one (to device memory: no host sync).
    const auto n = static_cast<int64_t>(flush_size_ / sizeof(float));
    if (cublasSasum_64(cublas_, n, static_cast<const float*>(flush_), 1,
                       static_cast<float*>(flush_sum_)) != CUBLAS_STATUS_SUCCESS) {
      return Status(StatusCode::kCudaError, "cublasSasum (the L2 flush) failed");
    }
    return Status::Ok();
  }

  Status run_once(std::vector<uint16_t>* out, std::vector<float>* lse) override {
    // 0xff bytes: NaN in bf16, fp16 and fp32, so anything the kernel fails to write shows.
    TV_CUDA_TRY(cudaMemsetAsync(out_, 0xff, case_.out_elems() * sizeof(uint16_t), stream_));
    TV_CUDA_TRY(cudaMemsetAsync(lse_, 0xff, case_.lse_elems() * sizeof(float), stream_));
    TV_RETURN_IF_ERROR(call());
    out->resize(case_.out_elems());
    lse->resize(case_.lse_elems());
    TV_CUDA_TRY(cudaMemcpyAsync(out->data(), out_, out->size() * sizeof(uint16_t),
                                cudaMemcpyDeviceToHost, stream_));
    TV_CUDA_TRY(cudaMemcpyAsync(lse->data(), lse_, lse->size() * sizeof(float),
                                cudaMemcpyDeviceToHost, stream_));
    TV_CUDA_TRY(cudaStreamSynchronize(stream_));
    return Status::Ok();
  }

  Status time(int warmup, int iters, std::vector<double>* samples_ms) override {
    for (int i = 0; i < warmup; ++i) TV_RETURN_IF_ERROR(call());
    samples_ms->clear();
    for (int i = 0; i < iters; ++i) {
      TV_RETURN_IF_ERROR(flush(i));
      TV_CUDA_TRY(cudaEventRecord(start_, stream_));
      TV_RETURN_IF_ERROR(call());
      TV_CUDA_TRY(cudaEventRecord(stop_, stream_));
      TV_CUDA_TRY(cudaEventSynchronize(stop_));
      float ms = 0;
      TV_CUDA_TRY(cudaEventElapsedTime(&ms, start_, stop_));
      samples_ms->push_back(ms);
    }
    return Status::Ok();
  }

  std::string method() const override {
    return fmt::format("cudaEvent around run(), L2 flushed by a {} MiB {} between calls",
                       flush_size_ >> 20, flush_mode_ == Flush::kRead ? "read" : "write");
  }

  Status time_layers(int layers, int reps, LayerTimes* times) override {
    using Clock = std::chrono::steady_clock;
    // A copy of the plan with another id: its step data is never the workspace's, so each
    // run alternating between the two rebuilds it (the mask, the pointer checks): what a run
    // would pay if the step data were not kept per plan.
    Plan other = plan_;
    other.state.id = ~plan_.state.id;
    // One repetition: flush, then `enqueue`; host us spent in it and GPU ms of what it queued.
    auto timed = [&](auto&& enqueue, double* host_us, double* gpu_ms) -> Status {
      TV_RETURN_IF_ERROR(flush(0));
      TV_CUDA_TRY(cudaStreamSynchronize(stream_));
      TV_CUDA_TRY(cudaEventRecord(start_, stream_));
      const auto t0 = Clock::now();
      TV_RETURN_IF_ERROR(enqueue());
      const auto t1 = Clock::now();
      TV_CUDA_TRY(cudaEventRecord(stop_, stream_));
      TV_CUDA_TRY(cudaEventSynchronize(stop_));
      float ms = 0;
      TV_CUDA_TRY(cudaEventElapsedTime(&ms, start_, stop_));
      *host_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
      *gpu_ms = ms;
      return Status::Ok();
    };
    // The median of `reps` repetitions after a warm-up one.
    auto median_of = [&](auto&& enqueue, double* host_us, double* gpu_ms) -> Status {
      std::vector<double> hs, gs;
      for (int r = 0; r < reps + 1; ++r) {
        double h = 0, g = 0;
        TV_RETURN_IF_ERROR(timed(enqueue, &h, &g));
        if (r > 0) hs.push_back(h), gs.push_back(g);
      }
      *host_us = median(hs);
      *gpu_ms = median(gs);
      return Status::Ok();
    };
    auto layer_runs = [&](bool rebuild) {
      return [&, rebuild]() -> Status {
        for (int l = 0; l < layers; ++l)
          TV_RETURN_IF_ERROR(call(rebuild && (l % 2 == 1) ? other : plan_));
        return Status::Ok();
      };
    };
    times->layers = layers;
    TV_RETURN_IF_ERROR(median_of(layer_runs(false), &times->enqueue_us, &times->gpu_ms));
    TV_RETURN_IF_ERROR(
        median_of(layer_runs(true), &times->rebuild_enqueue_us, &times->rebuild_gpu_ms));
    times->enqueue_us /= layers;
    times->rebuild_enqueue_us /= layers;
    // The loop captured once, then replayed: host time of cudaGraphLaunch and GPU time of the
    // replay (the graph builds its plan's step data itself: its first run is a capture's).
    if (!graph_exec_) {
      cudaGraph_t graph = nullptr;
      TV_CUDA_TRY(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
      Status captured = Status::Ok();
      for (int l = 0; l < layers && captured.ok(); ++l) captured = call(plan_);
      const cudaError_t end = cudaStreamEndCapture(stream_, &graph);
      TV_RETURN_IF_ERROR(captured);
      TV_CUDA_TRY(end);
      const cudaError_t inst = cudaGraphInstantiate(&graph_exec_, graph, 0);
      cudaGraphDestroy(graph);
      TV_CUDA_TRY(inst);
    }
    return median_of(
        [&]() -> Status {
          TV_CUDA_TRY(cudaGraphLaunch(graph_exec_, stream_));
          return Status::Ok();
        },
        &times->graph_launch_us, &times->graph_gpu_ms);
  }

 private:
  Status alloc(size_t bytes, void** p) {
    if (bytes == 0) return Status::Ok();
    TV_CUDA_TRY(cudaMalloc(p, bytes));
    buffers_.push_back(*p);
    return Status::Ok();
  }
  template <typename T>
  Status upload(const std::vector<T>& host, void** p) {
    TV_RETURN_IF_ERROR(alloc(host.size() * sizeof(T), p));
    if (!host.empty()) {
      TV_CUDA_TRY(cudaMemcpy(*p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
    }
    return Status::Ok();
  }
  Status call() { return call(plan_); }
  Status call(const Plan& plan) {
    VerifyTensors t = case_.tensors(out_, static_cast<float*>(lse_));
    t.q = q_;
    t.kv_cache = kv_;
    t.kv_scale = static_cast<const float*>(kv_scale_);
    t.qo_indptr = static_cast<const int32_t*>(qo_indptr_);
    t.kv_len = static_cast<const int32_t*>(kv_len_);
    t.kv_page_indptr = static_cast<const int32_t*>(page_indptr_);
    t.kv_page_indices = static_cast<const int32_t*>(page_indices_);
    t.parents = static_cast<const int32_t*>(parents_);
    TV_RETURN_IF_ERROR(run(plan, t, workspace_, plan.workspace_bytes, stream_));
    TV_CUDA_TRY(cudaGetLastError());
    return Status::Ok();
  }

  Plan plan_;
  const testing::HostCase& case_;
  int device_ = 0;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
  std::vector<void*> buffers_;
  void *q_ = nullptr, *kv_ = nullptr, *kv_scale_ = nullptr, *qo_indptr_ = nullptr,
       *kv_len_ = nullptr;
  void *page_indptr_ = nullptr, *page_indices_ = nullptr, *parents_ = nullptr;
  void *out_ = nullptr, *lse_ = nullptr, *workspace_ = nullptr, *flush_ = nullptr;
  void* flush_sum_ = nullptr;
  size_t flush_size_ = 0;
  Flush flush_mode_;
  cublasHandle_t cublas_ = nullptr;
  cudaGraphExec_t graph_exec_ = nullptr;
};

// Frees on every exit path of measure_cuda_ceilings and e4m3_gemm_ms.
struct DeviceBuffers {
  std::vector<void*> p;
  ~DeviceBuffers() {
    for (void* x : p) cudaFree(x);
  }
};

// The best time of an e4m3 GEMM n x n x n (D = A^T B in bf16, fp32 accumulation; cuBLASLt's
// FP8 products take A transposed) on a and b (n x n bytes each) into d (n x n bf16), through
// cuBLASLt's first heuristic; `best_ms` times a callable. Fast accumulation on, as the fast
// kernels' own e4m3 products accumulate in the tensor cores' native way.
template <typename BestMs>
Status e4m3_gemm_ms(int n, void* a, void* b, void* d, BestMs&& best_ms, float* ms) {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, ld = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  void* workspace = nullptr;
  constexpr size_t kWorkspace = size_t{32} << 20;
  cublasStatus_t st = cublasLtCreate(&lt);
  const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
  const int8_t fast_accum = 1;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast_accum,
                                        sizeof fast_accum);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&la, CUDA_R_8F_E4M3, n, n, n);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&lb, CUDA_R_8F_E4M3, n, n, n);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n);
  if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmulPreferenceCreate(&pref);
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                              &kWorkspace, sizeof kWorkspace);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  if (st == CUBLAS_STATUS_SUCCESS)
    st = cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 1, &heuristic, &found);
  cudaError_t ce = cudaSuccess;
  DeviceBuffers buf;
  if (st == CUBLAS_STATUS_SUCCESS && found > 0) {
    ce = cudaMalloc(&workspace, kWorkspace);
    if (ce == cudaSuccess) buf.p.push_back(workspace);
  }
  cublasStatus_t run_status = CUBLAS_STATUS_SUCCESS;
  if (st == CUBLAS_STATUS_SUCCESS && found > 0 && ce == cudaSuccess) {
    const float alpha = 1.f, beta = 0.f;
    *ms = best_ms([&] {
      const cublasStatus_t r = cublasLtMatmul(lt, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld,
                                              &heuristic.algo, workspace, kWorkspace, nullptr);
      if (r != CUBLAS_STATUS_SUCCESS) run_status = r;
    });
  }
  if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
  for (cublasLtMatrixLayout_t l : {la, lb, ld})
    if (l != nullptr) cublasLtMatrixLayoutDestroy(l);
  if (op != nullptr) cublasLtMatmulDescDestroy(op);
  if (lt != nullptr) cublasLtDestroy(lt);
  if (ce != cudaSuccess)
    return Status(
        StatusCode::kCudaError,
        fmt::format("cudaMalloc of the e4m3 GEMM's workspace failed: {}", cudaGetErrorString(ce)));
  if (st != CUBLAS_STATUS_SUCCESS || run_status != CUBLAS_STATUS_SUCCESS || found == 0)
    return Status(StatusCode::kCudaError,
                  fmt::format("cuBLASLt e4m3 GEMM: status {}, run status {}, {} algorithms",
                              static_cast<int>(st), static_cast<int>(run_status), found));
  return Status::Ok();
}

}  // namespace

Status make_cuda_runner(const Plan& plan, const testing::HostCase& c, Flush flush,
                        std::unique_ptr<Runner>* runner) {
  auto r = std::make_unique<DeviceRunner>(plan, c, flush);
  TV_RETURN_IF_ERROR(r->init());
  *runner = std::move(r);
  return Status::Ok();
}

Status measure_cuda_ceilings(int device, Ceilings* ceilings) {
  if (device < 0) TV_CUDA_TRY(cudaGetDevice(&device));
  TV_CUDA_TRY(cudaSetDevice(device));
  constexpr int kReps = 10;  // best of: a ceiling is the most the device gave
  constexpr size_t kCopyBytes = size_t{1} << 30;
  constexpr int kGemmN = 8192;  // docs/BENCH.md's bf16 GEMM 8192^3
  DeviceBuffers buf;
  void *src = nullptr, *dst = nullptr, *a = nullptr, *b = nullptr, *c = nullptr;
  TV_CUDA_TRY(cudaMalloc(&src, kCopyBytes));
  buf.p.push_back(src);
  TV_CUDA_TRY(cudaMalloc(&dst, kCopyBytes));
  buf.p.push_back(dst);
  TV_CUDA_TRY(cudaMemset(src, 0x3c, kCopyBytes));  // never zeros (docs/BENCH.md)
  cudaEvent_t e0, e1;
  TV_CUDA_TRY(cudaEventCreate(&e0));
  TV_CUDA_TRY(cudaEventCreate(&e1));
  auto best_ms = [&](auto&& body) -> float {
    float best = 1e30f;
    for (int r = 0; r < kReps + 1; ++r) {  // the first is a warm-up
      cudaEventRecord(e0);
      body();
      cudaEventRecord(e1);
      cudaEventSynchronize(e1);
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      if (r > 0) best = std::min(best, ms);
    }
    return best;
  };
  const float copy_ms =
      best_ms([&] { cudaMemcpyAsync(dst, src, kCopyBytes, cudaMemcpyDeviceToDevice); });
  TV_CUDA_TRY(cudaGetLastError());
  ceilings->bandwidth = 2.0 * kCopyBytes / (copy_ms * 1e-3);
  ceilings->bandwidth_how = fmt::format(
      "cudaMemcpy device-to-device {} MiB, best of {}, read + write", kCopyBytes >> 20, kReps);

  const size_t mat = size_t{kGemmN} * kGemmN * 2;
  for (void** p : {&a, &b, &c}) {
    TV_CUDA_TRY(cudaMalloc(p, mat));
    buf.p.push_back(*p);
    TV_CUDA_TRY(cudaMemset(*p, 0x3c, mat));
  }
  cublasHandle_t handle;
  if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) {
    return Status(StatusCode::kCudaError, "cublasCreate failed");
  }
  const float alpha = 1.f, beta = 0.f;
  cublasStatus_t gemm_status = CUBLAS_STATUS_SUCCESS;
  const float gemm_ms = best_ms([&] {
    cublasStatus_t s =
        cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, kGemmN, kGemmN, kGemmN, &alpha, a,
                     CUDA_R_16BF, kGemmN, b, CUDA_R_16BF, kGemmN, &beta, c, CUDA_R_16BF, kGemmN,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    if (s != CUBLAS_STATUS_SUCCESS) gemm_status = s;
  });
  cublasDestroy(handle);
  // e4m3 products exist from sm_89 (Ada) on; a and b hold 0x3c bytes, e4m3 1.5 (no NaN).
  cudaDeviceProp prop{};
  TV_CUDA_TRY(cudaGetDeviceProperties(&prop, device));
  Status e4m3_status = Status::Ok();
  float e4m3_ms = 0.f;
  if (prop.major * 10 + prop.minor >= 89)
    e4m3_status = e4m3_gemm_ms(kGemmN, a, b, c, best_ms, &e4m3_ms);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  if (gemm_status != CUBLAS_STATUS_SUCCESS) {
    return Status(StatusCode::kCudaError, fmt::format("cublasGemmEx bf16 failed with status {}",
                                                      static_cast<int>(gemm_status)));
  }
  TV_CUDA_TRY(cudaGetLastError());
  auto gemm_flops = [](float ms) { return 2.0 * kGemmN * double{kGemmN} * kGemmN / (ms * 1e-3); };
  ceilings->mma_flops = gemm_flops(gemm_ms);
  ceilings->mma_how =
      fmt::format("cublasGemmEx bf16 {}^3, fp32 accumulate, best of {}", kGemmN, kReps);
  if (!e4m3_status.ok()) {  // fast mode's roof then falls back to the bf16 ceiling, and says so
    ceilings->mma8_how = "not measured: " + e4m3_status.to_string();
  } else if (e4m3_ms > 0) {
    ceilings->mma8_flops = gemm_flops(e4m3_ms);
    ceilings->mma8_how = fmt::format(
        "cublasLtMatmul e4m3 {}^3, fp32 accumulate (fast), bf16 out, best of {}", kGemmN, kReps);
  } else {
    ceilings->mma8_how = fmt::format("none: sm_{}{} has no e4m3 products", prop.major, prop.minor);
  }
  return Status::Ok();
}

}  // namespace treeverify::cli

#else  // no CUDA in this build: say so instead of pretending

namespace treeverify::cli {

Status make_cuda_runner(const Plan&, const testing::HostCase&, Flush, std::unique_ptr<Runner>*) {
  return Status(StatusCode::kUnsupported,
                "this treeverify was built without CUDA (TREEVERIFY_CUDA=OFF or no nvcc): cannot "
                "run a CUDA backend");
}

Status measure_cuda_ceilings(int, Ceilings*) {
  return Status(StatusCode::kUnsupported,
                "this treeverify was built without CUDA: no GPU ceilings to measure");
}

}  // namespace treeverify::cli

#endif
