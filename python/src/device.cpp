// device.h over the CUDA runtime when the library has its CUDA backend; refusals otherwise.
#include "device.h"

#include <fmt/format.h>

#include "common.h"

#if defined(TREEVERIFY_WITH_CUDA)
#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <map>
#include <mutex>
#include <utility>
#endif

namespace tvpy {

#if defined(TREEVERIFY_WITH_CUDA)
namespace {

void check_cuda(cudaError_t err, const char* what) {
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();
  throw StatusError(
      fmt::format("CUDA error: {}: {} ({})", what, cudaGetErrorString(err), cudaGetErrorName(err)));
}

cudaStream_t as_stream(uintptr_t s) { return reinterpret_cast<cudaStream_t>(s); }

// One lock for the pool, the cache and the counters. Recursive: dropping the last reference to
// a DeviceMemory while the cache is being changed re-enters through its destructor.
std::recursive_mutex& lock() {
  static auto* m = new std::recursive_mutex;  // never destroyed: plans may outlive statics
  return *m;
}
MemoryStats stats;

// Non-throwing device switch for destructors.
struct QuietGuard {
  int previous = -1;
  explicit QuietGuard(int device) {
    if (cudaGetDevice(&previous) != cudaSuccess ||
        (previous != device && cudaSetDevice(device) != cudaSuccess)) {
      (void)cudaGetLastError();
    }
  }
  ~QuietGuard() {
    int now = -1;
    if (previous >= 0 && cudaGetDevice(&now) == cudaSuccess && now != previous)
      (void)cudaSetDevice(previous);
    (void)cudaGetLastError();
  }
};

// Memory waiting to be freed: freeing synchronizes the device, so it happens only next to an
// allocation (a step that grows), never in a plan's destructor or while the caller's stream is
// captured.
struct Garbage {
  int device;
  void* device_ptr;
  void* host_ptr;
};
std::vector<Garbage>& graveyard() {
  static auto* g = new std::vector<Garbage>;
  return *g;
}

void collect(bool capturing) {
  if (capturing) return;
  for (const Garbage& g : graveyard()) {
    QuietGuard guard(g.device);
    if (g.device_ptr != nullptr) {
      (void)cudaFree(g.device_ptr);  // waits for kernels that may still read it
      ++stats.device_frees;
    }
    if (g.host_ptr != nullptr) {
      (void)cudaFreeHost(g.host_ptr);
      ++stats.host_frees;
    }
  }
  graveyard().clear();
}

// cudaMalloc inside a graph capture is allowed once the thread's capture mode is relaxed: the
// memory is ordinary device memory that the captured kernels then point into.
struct RelaxedCaptureMode {
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&mode); }
  ~RelaxedCaptureMode() { (void)cudaThreadExchangeStreamCaptureMode(&mode); }
};

char* device_alloc(size_t bytes, bool capturing) {
  collect(capturing);
  RelaxedCaptureMode relaxed;
  void* p = nullptr;
  check_cuda(cudaMalloc(&p, bytes), "cudaMalloc (treeverify plan memory)");
  ++stats.device_allocs;
  return static_cast<char*>(p);
}

bool event_done(cudaEvent_t e) {
  const cudaError_t err = cudaEventQuery(e);
  if (err == cudaSuccess) return true;
  (void)cudaGetLastError();  // cudaErrorNotReady is not an error; anything else: not reused
  return false;
}

}  // namespace

// A pooled block: device memory for a plan's index arrays and the pinned host memory they are
// uploaded from. Reusable when the upload and every stream that read it have passed `released`.
struct IndexBlock {
  int device = -1;
  size_t capacity = 0;
  char* dev = nullptr;
  char* host = nullptr;
  cudaEvent_t uploaded = nullptr;
  std::vector<cudaEvent_t> released;  // events[0, in_use) recorded at the last release
  size_t in_use = 0;
};

namespace {

constexpr size_t kMinBlock = size_t{64} << 10;
constexpr size_t kMaxFreeBlocks = 8;  // per device; a few steps of GPU lag, and their sizes

std::vector<IndexBlock*>& free_blocks() {
  static auto* v = new std::vector<IndexBlock*>;
  return *v;
}

bool block_ready(IndexBlock* b) {
  if (!event_done(b->uploaded)) return false;
  for (size_t i = 0; i < b->in_use; ++i)
    if (!event_done(b->released[i])) return false;
  return true;
}

void bury(IndexBlock* b) {
  for (cudaEvent_t e : b->released) (void)cudaEventDestroy(e);
  if (b->uploaded != nullptr) (void)cudaEventDestroy(b->uploaded);
  graveyard().push_back({b->device, b->dev, b->host});
  delete b;
}

// With the lock held and `device` current.
IndexBlock* acquire_block(int device, size_t bytes) {
  auto& blocks = free_blocks();
  auto best = blocks.end();
  for (auto it = blocks.begin(); it != blocks.end(); ++it) {
    IndexBlock* b = *it;
    if (b->device != device || b->capacity < bytes) continue;
    if (best != blocks.end() && (*best)->capacity <= b->capacity) continue;
    if (block_ready(b)) best = it;
  }
  if (best == blocks.end()) {
    // None is free yet. With as many blocks as the pool keeps, the host is that many plans
    // ahead of the device: wait for the oldest that fits rather than allocate (and free).
    size_t held = 0;
    for (IndexBlock* b : blocks) held += b->device == device;
    if (held >= kMaxFreeBlocks) {
      for (auto it = blocks.begin(); it != blocks.end() && best == blocks.end(); ++it) {
        if ((*it)->device == device && (*it)->capacity >= bytes) best = it;
      }
      if (best != blocks.end()) {
        IndexBlock* b = *best;
        check_cuda(cudaEventSynchronize(b->uploaded), "cudaEventSynchronize");
        for (size_t i = 0; i < b->in_use; ++i)
          check_cuda(cudaEventSynchronize(b->released[i]), "cudaEventSynchronize");
        ++stats.host_waits;
      }
    }
  }
  if (best != blocks.end()) {
    IndexBlock* b = *best;
    blocks.erase(best);
    return b;
  }
  auto* b = new IndexBlock;
  b->device = device;
  b->capacity = std::max(std::bit_ceil(bytes), kMinBlock);
  try {
    b->dev = device_alloc(b->capacity, false);
    void* host = nullptr;
    check_cuda(cudaHostAlloc(&host, b->capacity, cudaHostAllocDefault),
               "cudaHostAlloc (treeverify index staging)");
    ++stats.host_allocs;
    b->host = static_cast<char*>(host);
    check_cuda(cudaEventCreateWithFlags(&b->uploaded, cudaEventDisableTiming), "cudaEventCreate");
  } catch (...) {
    bury(b);
    throw;
  }
  return b;
}

// With the lock held and the block's device current. `streams` read the block; `bury_it`:
// it may still be read where no event can follow (a graph), so only cudaFree may reuse it.
void release_block(IndexBlock* b, const std::vector<uintptr_t>& streams, bool bury_it) {
  if (!bury_it) {
    for (uintptr_t s : streams) {
      if (capture_id(s) != 0) bury_it = true;  // an event recorded there cannot be queried
    }
  }
  if (!bury_it) {
    b->in_use = 0;
    for (uintptr_t s : streams) {
      if (b->released.size() == b->in_use) {
        cudaEvent_t e = nullptr;
        if (cudaEventCreateWithFlags(&e, cudaEventDisableTiming) != cudaSuccess) {
          bury_it = true;
          break;
        }
        b->released.push_back(e);
      }
      if (cudaEventRecord(b->released[b->in_use], as_stream(s)) != cudaSuccess) {
        bury_it = true;
        break;
      }
      ++b->in_use;
    }
  }
  if (bury_it) {
    (void)cudaGetLastError();
    bury(b);
    return;
  }
  auto& blocks = free_blocks();
  blocks.push_back(b);
  size_t same = 0;
  for (IndexBlock* x : blocks) same += x->device == b->device;
  if (same > kMaxFreeBlocks) {  // keep the larger blocks: steps grow
    auto smallest = blocks.end();
    for (auto it = blocks.begin(); it != blocks.end(); ++it) {
      if ((*it)->device == b->device &&
          (smallest == blocks.end() || (*it)->capacity < (*smallest)->capacity))
        smallest = it;
    }
    IndexBlock* victim = *smallest;
    blocks.erase(smallest);
    bury(victim);
  }
}

struct Slot {
  std::shared_ptr<DeviceMemory> memory;
  uint64_t capture = 0;  // the last capture sequence that used `memory`; 0: eager runs only
};
std::map<std::pair<int, uintptr_t>, Slot>& slots() {
  static auto* m = new std::map<std::pair<int, uintptr_t>, Slot>;
  return *m;
}

}  // namespace

DeviceGuard::DeviceGuard(int device) {
  check_cuda(cudaGetDevice(&previous_), "cudaGetDevice");
  if (previous_ != device) check_cuda(cudaSetDevice(device), "cudaSetDevice");
}
DeviceGuard::~DeviceGuard() {
  int now = -1;
  if (cudaGetDevice(&now) == cudaSuccess && now != previous_) (void)cudaSetDevice(previous_);
}

uint64_t capture_id(uintptr_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long id = 0;
  if (cudaStreamGetCaptureInfo(as_stream(stream), &status, &id) != cudaSuccess) {
    // e.g. the legacy stream while another stream is captured: the launch will say so
    (void)cudaGetLastError();
    return 0;
  }
  return status == cudaStreamCaptureStatusNone ? 0 : std::max<uint64_t>(id, 1);
}

IndexUpload::IndexUpload(int device, uintptr_t stream,
                         std::span<const std::span<const int32_t>> parts)
    : device_(device) {
  DeviceGuard guard(device);
  if (capture_id(stream) != 0) {
    throw StatusError(
        "unsupported: plan() was called while its stream is being captured into a CUDA graph; "
        "make the plan before the capture (only run() can be captured)");
  }
  size_t total = 0;
  for (const auto& p : parts) {
    offsets_.push_back(total);
    total += (p.size_bytes() + 255) / 256 * 256;
  }
  std::lock_guard<std::recursive_mutex> hold(lock());
  block_ = acquire_block(device, std::max<size_t>(total, 1));
  try {
    for (size_t i = 0; i < parts.size(); ++i)
      if (!parts[i].empty())
        std::memcpy(block_->host + offsets_[i], parts[i].data(), parts[i].size_bytes());
    check_cuda(cudaMemcpyAsync(block_->dev, block_->host, total, cudaMemcpyHostToDevice,
                               as_stream(stream)),
               "cudaMemcpyAsync (plan index arrays)");
    check_cuda(cudaEventRecord(block_->uploaded, as_stream(stream)), "cudaEventRecord");
  } catch (...) {
    release_block(block_, {}, true);
    block_ = nullptr;
    throw;
  }
  ++stats.uploads;
  streams_.push_back(stream);
}

IndexUpload::~IndexUpload() {
  if (block_ == nullptr) return;
  QuietGuard guard(device_);
  std::lock_guard<std::recursive_mutex> hold(lock());
  release_block(block_, streams_, captured_);
}

const int32_t* IndexUpload::part(size_t i) const {
  return reinterpret_cast<const int32_t*>(block_->dev + offsets_[i]);
}

void IndexUpload::order_after(uintptr_t stream, uint64_t capture) {
  if (capture != 0) {
    captured_ = true;  // a graph may read the block after this plan is gone
    return;
  }
  if (std::find(streams_.begin(), streams_.end(), stream) != streams_.end()) return;
  check_cuda(cudaStreamWaitEvent(as_stream(stream), block_->uploaded, 0), "cudaStreamWaitEvent");
  std::lock_guard<std::recursive_mutex> hold(lock());
  ++stats.stream_waits;
  streams_.push_back(stream);
}

DeviceMemory::DeviceMemory(int device, size_t bytes, bool capturing)
    : device_(device), bytes_(bytes) {
  std::lock_guard<std::recursive_mutex> hold(lock());
  data_ = device_alloc(bytes, capturing);
}

DeviceMemory::~DeviceMemory() {
  std::lock_guard<std::recursive_mutex> hold(lock());
  graveyard().push_back({device_, data_, nullptr});
}

std::shared_ptr<DeviceMemory> run_workspace(int device, uintptr_t stream, size_t bytes,
                                            uint64_t capture) {
  std::lock_guard<std::recursive_mutex> hold(lock());
  Slot& slot = slots()[{device, stream}];
  const bool fits = slot.memory && slot.memory->bytes() >= bytes;
  if (fits && (capture != 0 || slot.capture == 0)) {
    if (capture != 0) slot.capture = capture;
    return slot.memory;
  }
  // Grow by a quarter at least, so that slowly growing steps allocate rarely; a buffer
  // retired to graphs is replaced at the size the run needs.
  size_t size = bytes;
  if (slot.memory && slot.capture == 0) size = std::max(size, slot.memory->bytes() / 4 * 5);
  size = (size + (size_t{1} << 20) - 1) >> 20 << 20;
  slot.memory = std::make_shared<DeviceMemory>(device, size, capture != 0);
  slot.capture = capture;
  return slot.memory;
}

MemoryStats memory_stats() {
  std::lock_guard<std::recursive_mutex> hold(lock());
  return stats;
}

std::vector<CachedWorkspace> cached_workspaces() {
  std::lock_guard<std::recursive_mutex> hold(lock());
  std::vector<CachedWorkspace> out;
  for (const auto& [key, slot] : slots()) {
    if (slot.memory)
      out.push_back({key.first, key.second, slot.memory->bytes(),
                     reinterpret_cast<uintptr_t>(slot.memory->data())});
  }
  return out;
}

#else  // no CUDA backend in this build

namespace {
[[noreturn]] void no_cuda() {
  throw StatusError(
      "unsupported: this build of treeverify has no CUDA backend (nvcc was not found when the "
      "package was built, or TREEVERIFY_CUDA=OFF); reinstall on a machine with the CUDA toolkit");
}
}  // namespace

struct IndexBlock {};

DeviceGuard::DeviceGuard(int) { no_cuda(); }
DeviceGuard::~DeviceGuard() = default;
uint64_t capture_id(uintptr_t) { return 0; }
IndexUpload::IndexUpload(int, uintptr_t, std::span<const std::span<const int32_t>>) { no_cuda(); }
IndexUpload::~IndexUpload() = default;
const int32_t* IndexUpload::part(size_t) const { return nullptr; }
void IndexUpload::order_after(uintptr_t, uint64_t) {}
DeviceMemory::DeviceMemory(int, size_t, bool) { no_cuda(); }
DeviceMemory::~DeviceMemory() = default;
std::shared_ptr<DeviceMemory> run_workspace(int, uintptr_t, size_t, uint64_t) { no_cuda(); }
MemoryStats memory_stats() { return {}; }
std::vector<CachedWorkspace> cached_workspaces() { return {}; }

#endif

}  // namespace tvpy
