// Shared by the libFuzzer targets (fuzz/README.md): a byte reader that decodes the fuzz input
// front to back, exact-size heap buffers (so AddressSanitizer sees any access one element past
// what a caller must provide), and the checks that turn a broken property into a crash that
// libFuzzer records.
#pragma once

#include <sanitizer/asan_interface.h>

#include <cmath>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "treeverify/status.h"

// Keeps a function (or lambda: `[&]() TVFUZZ_HOT { ... }`) out of libFuzzer's coverage and
// comparison tracing, for bulk loops over buffers whose comparisons the input does not steer.
#define TVFUZZ_HOT __attribute__((no_sanitize("coverage")))

namespace tvfuzz {

// ---- failures --------------------------------------------------------------------------------

[[noreturn]] inline void fail(const char* file, int line, const char* what, const char* fmt, ...) {
  std::fprintf(stderr, "\n==treeverify-fuzz== %s:%d: property violated: %s\n", file, line, what);
  if (fmt != nullptr && fmt[0] != '\0') {
    std::va_list args;
    va_start(args, fmt);
    std::fputs("==treeverify-fuzz== ", stderr);
    std::vfprintf(stderr, fmt, args);
    std::fputc('\n', stderr);
    va_end(args);
  }
  std::fflush(stderr);
  std::abort();  // libFuzzer reports a deadly signal and writes the crash input
}

}  // namespace tvfuzz

// FUZZ_CHECK(cond, "printf format", args...): abort with a message unless cond holds.
#define FUZZ_CHECK(cond, ...)                                               \
  do {                                                                      \
    if (!(cond)) ::tvfuzz::fail(__FILE__, __LINE__, #cond, "" __VA_ARGS__); \
  } while (0)

// The status must be an error that names an argument (TV_REQUIRE's "argument '<name>': ...")
// or otherwise carries a message, with a code other than kOk and kInternal.
#define FUZZ_CHECK_NAMED_ERROR(status)                                       \
  do {                                                                       \
    const ::treeverify::Status& _fz_s = (status);                            \
    FUZZ_CHECK(!_fz_s.ok(), "expected an error");                            \
    FUZZ_CHECK(_fz_s.code() != ::treeverify::StatusCode::kInternal, "%s",    \
               _fz_s.to_string().c_str());                                   \
    FUZZ_CHECK(!_fz_s.message().empty(), "error without a message, code %s", \
               ::treeverify::status_code_name(_fz_s.code()));                \
  } while (0)

namespace tvfuzz {

// How often each path was taken, printed at exit when TREEVERIFY_FUZZ_STATS=1: shows whether
// the inputs reach the deep paths (run(), successful commits) and not only the early errors.
class Stats {
 public:
  static void count(int slot) {
    static Stats s;
    if (slot >= 0 && slot < kSlots) ++s.n_[slot];
  }
  ~Stats() {
    if (const char* v = std::getenv("TREEVERIFY_FUZZ_STATS"); v && std::strcmp(v, "1") == 0) {
      std::fprintf(stderr, "==treeverify-fuzz== stats:");
      for (int i = 0; i < kSlots; ++i) {
        if (n_[i]) std::fprintf(stderr, " [%d]=%llu", i, static_cast<unsigned long long>(n_[i]));
      }
      std::fputc('\n', stderr);
    }
  }

 private:
  static constexpr int kSlots = 16;
  uint64_t n_[kSlots] = {};
};

// ---- input -----------------------------------------------------------------------------------

// Reads the fuzz input front to back; past its end every read returns 0, so any prefix of a
// valid input still decodes (to smaller, default-heavy structures).
class Input {
 public:
  Input(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  size_t remaining() const { return size_ - pos_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16); }
  uint64_t u64() { return static_cast<uint64_t>(u32()) | (static_cast<uint64_t>(u32()) << 32); }
  int32_t i32() { return static_cast<int32_t>(u32()); }
  int64_t i64() { return static_cast<int64_t>(u64()); }
  float f32() {
    const uint32_t bits = u32();
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  }
  bool flag() { return (u8() & 1) != 0; }
  // One of the listed values, chosen by one byte.
  template <class T>
  T pick(std::initializer_list<T> values) {
    return values.begin()[u8() % values.size()];
  }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

// int32 values that break contracts at their edges.
inline constexpr int32_t kI32Min = std::numeric_limits<int32_t>::min();
inline constexpr int32_t kI32Max = std::numeric_limits<int32_t>::max();
inline int32_t edge_i32(Input& in) {
  return in.pick<int32_t>({0, -1, 1, 2, kI32Min, kI32Max, kI32Max - 1, kI32Min + 1, 1024, 1025,
                           -1024, 1 << 30, -(1 << 30), 4096, 65536, 128});
}

// A mutation of one entry of an int32 array: +1, -1, an edge value, or 4 raw bytes.
inline int32_t mutate_i32(Input& in, int32_t v) {
  const uint8_t kind = in.u8();
  if (kind < 64) return static_cast<int32_t>(static_cast<uint32_t>(v) + 1u);
  if (kind < 128) return static_cast<int32_t>(static_cast<uint32_t>(v) - 1u);
  if (kind < 192) return edge_i32(in);
  return in.i32();
}

// Applies up to `max` input-chosen mutations to the arrays: set one entry, append entries
// (when `may_resize`), or truncate (when `may_resize`). Arrays are picked by index.
inline void mutate_arrays(Input& in, std::initializer_list<std::vector<int32_t>*> arrays, int max,
                          bool may_resize) {
  const int count = in.u8() % (max + 1);
  for (int m = 0; m < count; ++m) {
    std::vector<int32_t>& a = *arrays.begin()[in.u8() % arrays.size()];
    const uint8_t op = in.u8();
    if (may_resize && op >= 240) {  // truncate to a shorter length
      a.resize(a.empty() ? 0 : in.u16() % a.size());
    } else if (may_resize && op >= 224) {  // append 1..4 entries
      const int n = 1 + in.u8() % 4;
      for (int k = 0; k < n; ++k) a.push_back(mutate_i32(in, a.empty() ? 0 : a.back()));
    } else if (!a.empty()) {
      int32_t& v = a[in.u16() % a.size()];
      v = mutate_i32(in, v);
    }
  }
}

// ---- buffers ---------------------------------------------------------------------------------

// An exact-size heap copy, 64-byte aligned: an access past element n - 1 is a heap overflow for
// ASan (std::vector's capacity slack would hide it). Empty buffers still get a unique pointer
// (any access to it is reported), unless made with null_if_empty.
template <class T>
class Buf {
 public:
  Buf() = default;
  explicit Buf(size_t n) TVFUZZ_HOT : n_(n) {  // T: a trivial type
    p_ = static_cast<T*>(::operator new (n * sizeof(T), std::align_val_t{64}));
    if (n > 0) std::memset(static_cast<void*>(p_), 0, n * sizeof(T));
  }
  explicit Buf(const std::vector<T>& v) : Buf(v.size()) {
    if (!v.empty()) std::memcpy(p_, v.data(), v.size() * sizeof(T));
  }
  Buf(const Buf&) = delete;
  Buf& operator=(const Buf&) = delete;
  Buf(Buf&& o) noexcept : p_(o.p_), n_(o.n_) { o.p_ = nullptr, o.n_ = 0; }
  Buf& operator=(Buf&& o) noexcept {
    if (this != &o) {
      release();
      p_ = o.p_, n_ = o.n_;
      o.p_ = nullptr, o.n_ = 0;
    }
    return *this;
  }
  ~Buf() { release(); }

  T* data() const { return p_; }
  size_t size() const { return n_; }
  T& operator[](size_t i) const { return p_[i]; }
  std::span<T> span() const { return {p_, n_}; }
  std::span<const T> cspan() const { return {p_, n_}; }

 private:
  void release() {
    if (p_ != nullptr) {
      ASAN_UNPOISON_MEMORY_REGION(p_, n_ * sizeof(T));
      ::operator delete (p_, std::align_val_t{64});
    }
    p_ = nullptr;
    n_ = 0;
  }
  T* p_ = nullptr;
  size_t n_ = 0;
};

// ---- values ----------------------------------------------------------------------------------

// splitmix64: cheap reproducible filler for the large float buffers.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [-1, 1).
  float sym() {
    return static_cast<float>(static_cast<int64_t>(next() >> 40) - (1 << 23)) * 0x1p-23f;
  }
};

inline bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }
// memcmp that accepts the null pointers of empty vectors.
inline bool same_bytes(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

inline float special_float(Input& in) {
  return in.pick<float>(
      {std::numeric_limits<float>::quiet_NaN(), -std::numeric_limits<float>::quiet_NaN(),
       std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(), 0.f, -0.f,
       -1.f, std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
       std::numeric_limits<float>::min(), std::numeric_limits<float>::denorm_min(), 1e30f, 1e-30f,
       65504.f, 3e38f, 1.f});
}

}  // namespace tvfuzz

// Every target: an exception escaping the library is a finding.
#define FUZZ_ENTRY(body_fn)                                                            \
  extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {            \
    try {                                                                              \
      return body_fn(data, size);                                                      \
    } catch (const std::exception& e) {                                                \
      ::tvfuzz::fail(__FILE__, __LINE__, "no exception escapes", "%s", e.what());      \
    } catch (...) {                                                                    \
      ::tvfuzz::fail(__FILE__, __LINE__, "no exception escapes", "non-std exception"); \
    }                                                                                  \
  }
