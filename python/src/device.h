// The CUDA memory the binding keeps between calls, so that plan() and run() neither allocate
// nor free once warm (cudaMalloc may synchronize the device, cudaFree does) and do not wait
// for the device (unless plan() gets more than a pool's worth of blocks ahead of it):
//
//   IndexUpload     a CUDA plan's copy of its index arrays, from a per-device pool of blocks
//                   (device memory and the pinned host memory it is uploaded from); a block
//                   is reused once the streams that read it have passed the plan's end.
//   run_workspace   the workspace of runs on one (device, stream), cached, grown when a plan
//                   needs more, shared by the plans that run on that stream. Runs on one
//                   stream are ordered, which is what a shared workspace needs (the ancestor
//                   mask a plan builds there is named by its plan id: another plan's run
//                   rebuilds its own). Two streams never share one.
//
// Memory is only freed when it was outgrown (or could not be recycled safely) and nothing
// holds it any more, and then at the next allocation, which calls cudaFree outside any graph
// capture of the calling stream. Streams a plan used must outlive it (its end is recorded on
// them). In a build without the CUDA backend every call raises treeverify.Error, and nothing
// here is reached for CPU arrays.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace tvpy {

// Makes `device` current for the lifetime of the guard (the library runs on the current
// device; a plan made for cuda:1 must not run while torch has cuda:0 current).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

// The capture sequence `stream` belongs to: 0 when it is not being captured.
uint64_t capture_id(uintptr_t stream);

struct IndexBlock;  // device.cpp

// The index arrays of one CUDA plan on the device. The constructor copies `parts` into the
// pinned half of a pooled block and enqueues one asynchronous upload on `stream`; part(i) is
// then the device copy of parts[i] (256-byte aligned). Runs on other streams call
// order_after(stream) before their first launch. The block goes back to the pool when this
// object is destroyed.
class IndexUpload {
 public:
  IndexUpload(int device, uintptr_t stream, std::span<const std::span<const int32_t>> parts);
  ~IndexUpload();
  IndexUpload(const IndexUpload&) = delete;
  IndexUpload& operator=(const IndexUpload&) = delete;

  const int32_t* part(size_t i) const;
  // Makes `stream` wait for the upload, once per stream: a no-op on the upload's stream, and
  // while `stream` is being captured (`capture` != 0), where a wait on an event from outside
  // the capture is not allowed: graphs are captured after the plan was made and its upload
  // ordered (torch.cuda.graph synchronizes the device before it captures). A captured run
  // also makes the block unsafe to recycle: a graph may read it later.
  void order_after(uintptr_t stream, uint64_t capture);

 private:
  IndexBlock* block_ = nullptr;
  int device_ = -1;
  std::vector<size_t> offsets_;
  std::vector<uintptr_t> streams_;  // the upload's stream first, then each stream ordered after it
  bool captured_ = false;           // a run was captured: a graph may read the block later
};

// Device memory of the workspace cache; freed (deferred, see above) when the last holder goes.
class DeviceMemory {
 public:
  // `capturing`: the caller's stream is being captured (nothing is freed then).
  DeviceMemory(int device, size_t bytes, bool capturing);
  ~DeviceMemory();
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;
  char* data() const { return data_; }
  size_t bytes() const { return bytes_; }

 private:
  int device_ = -1;
  size_t bytes_ = 0;
  char* data_ = nullptr;
};

// The workspace for a run of `bytes` on (device, stream): the cached buffer of that stream,
// replaced by a larger one when it is too small. `capture` is the stream's capture sequence
// (capture_id()): a buffer a capture used belongs to that capture's graphs from then on, and
// later runs outside it get a new one, so a graph's replays never share memory with eager
// runs. The caller keeps the returned reference for as long as its plan lives, so memory a
// plan ran on is never handed out again under it (the library names step data by workspace
// address).
std::shared_ptr<DeviceMemory> run_workspace(int device, uintptr_t stream, size_t bytes,
                                            uint64_t capture);

// What the binding did so far, for tests: device and pinned allocations (cudaMalloc,
// cudaHostAlloc) and their frees, uploads enqueued, waits inserted between streams, and times
// the host waited for the device (a plan() more than the pool's blocks ahead of it).
struct MemoryStats {
  int64_t device_allocs = 0, device_frees = 0, host_allocs = 0, host_frees = 0, uploads = 0,
          stream_waits = 0, host_waits = 0;
};
MemoryStats memory_stats();
// (device, stream, bytes, address) of each cached workspace.
struct CachedWorkspace {
  int device;
  uintptr_t stream;
  size_t bytes;
  uintptr_t address;
};
std::vector<CachedWorkspace> cached_workspaces();

}  // namespace tvpy
