// The registry behind step_data.h: a small table under a mutex, a few tens of nanoseconds a
// lookup.
#include "cuda/step_data.h"

#include <array>
#include <atomic>
#include <mutex>

namespace treeverify::detail {
namespace {

struct Entry {
  const void* workspace = nullptr;
  uint64_t plan_id = 0;
  StepArrays arrays{};
};

// Engines keep one workspace a stream (or a few); 64 covers them, and a workspace pushed out
// of the table costs one mask build.
constexpr size_t kEntries = 64;

std::mutex mutex;
std::array<Entry, kEntries> entries;
size_t next_victim = 0;

Entry* find(const void* workspace) {
  for (Entry& e : entries)
    if (e.workspace == workspace) return &e;
  return nullptr;
}

}  // namespace

uint64_t new_plan_id() {
  static std::atomic<uint64_t> next{1};
  return next.fetch_add(1, std::memory_order_relaxed);
}

bool holds_step_data(const void* workspace, uint64_t plan_id, const StepArrays& arrays) {
  std::lock_guard<std::mutex> lock(mutex);
  const Entry* e = find(workspace);
  return e != nullptr && e->plan_id == plan_id && e->arrays == arrays;
}

void record_step_data(const void* workspace, uint64_t plan_id, const StepArrays& arrays) {
  std::lock_guard<std::mutex> lock(mutex);
  Entry* e = find(workspace);
  if (e == nullptr) {
    e = &entries[next_victim];
    next_victim = (next_victim + 1) % kEntries;
  }
  *e = Entry{workspace, plan_id, arrays};
}

}  // namespace treeverify::detail
