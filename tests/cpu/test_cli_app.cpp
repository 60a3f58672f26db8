// The CLI end to end through run_app (tools/app.h), as main() runs it, on hostile command
// lines (issue 52): an allocation that fails is an error with its cost and exit 2, never an
// abort; a case that cannot exist (L + T >= 2^31) is refused, never PASSed on a scaled-down
// copy; a seed outside [0, 2^64 - 1] is refused, never wrapped.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <new>
#include <stdexcept>
#include <string>
#include <vector>

#include "app.h"
#include "commands.h"

namespace treeverify::cli {
namespace {

struct CliRun {
  int code = -1;
  std::string out, err;
};

// The treeverify command line `args` (without the program name), as main() runs it.
CliRun run_cli(std::vector<std::string> args) {
  CLI::App app{"treeverify"};
  app.require_subcommand(1);
  int exit_code = kExitOk;
  add_doctor_command(&app, &exit_code);
  add_bench_command(&app, &exit_code);
  add_check_command(&app, &exit_code);
  add_demo_command(&app, &exit_code);
  args.insert(args.begin(), "treeverify");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  CliRun r;
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  r.code = run_app(&app, static_cast<int>(argv.size()), argv.data(), &exit_code);
  r.out = ::testing::internal::GetCapturedStdout();
  r.err = ::testing::internal::GetCapturedStderr();
  return r;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The mechanism: whatever a command allocates, a failure comes back as exit 2 and a message
// naming the command and the innermost note the exception left, not as std::terminate.
TEST(CliApp, AllocationFailureIsAnErrorWithItsNote) {
  for (bool length_error : {false, true}) {
    CLI::App app{"treeverify"};
    int exit_code = kExitOk;
    app.add_subcommand("grow", "")->callback([&] {
      const AllocationNote outer("the outer step");
      const AllocationNote inner("building case X (q 15.10 GB)");
      if (length_error) throw std::length_error("vector::reserve");
      throw std::bad_alloc();
    });
    const char* argv[] = {"treeverify", "grow"};
    ::testing::internal::CaptureStderr();
    const int code = run_app(&app, 2, argv, &exit_code);
    const std::string err = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(code, kExitError);
    EXPECT_TRUE(has(err, "treeverify grow: out of host memory (")) << err;
    EXPECT_TRUE(has(err, length_error ? "vector::reserve" : "bad_alloc")) << err;
    EXPECT_TRUE(has(err, "while building case X (q 15.10 GB)")) << err;
    EXPECT_FALSE(has(err, "outer")) << err;
  }
}

// A valid case this machine cannot hold: `check` and `bench` with 1024-node trees of 128 heads
// for 1000 requests (q alone is 151 GB). Under an address-space limit the allocation fails
// for certain; the command must say so, with what the case costs, and exit 2.
TEST(CliApp, CaseTooLargeForMemoryIsAnErrorWithItsCost) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer reserves more address space than the limit below";
#else
  rlimit saved{};
  ASSERT_EQ(getrlimit(RLIMIT_AS, &saved), 0);
  rlimit limited = saved;
  limited.rlim_cur = std::min<rlim_t>(saved.rlim_max, rlim_t{64} << 30);
  ASSERT_EQ(setrlimit(RLIMIT_AS, &limited), 0);
  const std::vector<std::string> huge = {"--batch", "1000",     "--tree", "1024",      "--heads",
                                         "128",     "--prefix", "1",      "--backend", "cpu"};
  std::vector<std::string> check = {"check"}, bench = {"bench", "--iters", "1"};
  check.insert(check.end(), huge.begin(), huge.end());
  bench.insert(bench.end(), huge.begin(), huge.end());
  const CliRun c = run_cli(check);
  const CliRun b = run_cli(bench);
  setrlimit(RLIMIT_AS, &saved);
  for (const CliRun* r : {&c, &b}) {
    EXPECT_EQ(r->code, kExitError) << r->out << r->err;
    EXPECT_TRUE(has(r->err, ": out of host memory (")) << r->err;
    EXPECT_TRUE(has(r->err, "case custom")) << r->err;
    EXPECT_TRUE(has(r->err, "q 150.99 GB")) << r->err;
    EXPECT_FALSE(has(r->out, "PASS")) << r->out;
  }
#endif
}

// L + T >= 2^31 cannot be a case (kv_len is an int32): refused as the suite parser and
// --scale-l 1 refuse it, before a scaled-down copy could PASS in its place.
TEST(CliApp, ImpossibleCaseIsRefusedNotPassedOnACopy) {
  for (const char* prefix : {"2147483647", "2147483644", "10000000000000"}) {
    for (std::vector<std::string> args :
         {std::vector<std::string>{"check"}, std::vector<std::string>{"bench", "--iters", "1"}}) {
      args.insert(args.end(), {"--tree", "4", "--prefix", prefix, "--backend", "cpu"});
      const CliRun r = run_cli(args);
      EXPECT_EQ(r.code, kExitError) << args[0] << " " << prefix << "\n" << r.out << r.err;
      EXPECT_TRUE(has(r.err, "--tree/--prefix: request 0: prefix + tree = " + std::string(prefix) +
                                 " + 4 is past 2^31 - 1"))
          << r.err;
      EXPECT_FALSE(has(r.out, "PASS")) << r.out;
    }
  }
  // Ragged: one request of two, and the batch's sum of them.
  CliRun r = run_cli({"check", "--batch", "2", "--tree", "4", "--prefix", "5", "2147483644"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_TRUE(has(r.err, "request 1: prefix + tree = 2147483644 + 4")) << r.err;
  r = run_cli({"check", "--batch", "2", "--tree", "4", "--prefix", "1073741824", "1073741824"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_TRUE(has(r.err, "the batch holds 2147483656 KV tokens, past 2^31 - 1")) << r.err;
  r = run_cli({"check", "--tree", "4", "--prefix", "-3"});
  EXPECT_EQ(r.code, kExitError);
  EXPECT_TRUE(has(r.err, "request 0: prefix = -3, tree = 4: lengths are >= 0")) << r.err;
}

// CLI11 alone reads --seed -1 as 2^64 - 1 and 2^64 as 2^64 - 1: both silently another seed.
TEST(CliApp, SeedOutsideUint64IsRefused) {
  for (const char* seed : {"-1", "18446744073709551616", "1e3", "0x10", "+5"}) {
    for (const char* command : {"demo", "check", "bench"}) {
      std::vector<std::string> args = {command, "--seed", seed};
      if (command != std::string("demo")) args.insert(args.end(), {"--tree", "4", "--prefix", "8"});
      const CliRun r = run_cli(args);
      EXPECT_NE(r.code, kExitOk) << command << " --seed " << seed;
      const std::string refusal = std::string("--seed: '") + seed + "' is not an integer in";
      EXPECT_TRUE(has(r.err, refusal + " [0, 2^64 - 1]")) << command << " " << r.err;
      EXPECT_FALSE(has(r.out, "seed")) << r.out;  // nothing ran
    }
  }
}

}  // namespace
}  // namespace treeverify::cli
