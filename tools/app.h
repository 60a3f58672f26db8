// The CLI's entry point: parse the command line, run the command, and turn an allocation that
// fails anywhere inside a command (std::bad_alloc, std::length_error: a valid case too large
// for this machine) into an error message and kExitError, never an abort. This is the one
// place that does so; code that allocates for a case says what with an AllocationNote.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace treeverify::cli {

// Parses argv with `app` (whose subcommands store their exit code in *exit_code) and returns
// the process exit code: CLI11's for a bad command line, *exit_code after a command ran, and
// kExitError (with "treeverify <command>: out of host memory ..." and the innermost live
// AllocationNote on stderr) when an allocation failed.
int run_app(CLI::App* app, int argc, const char* const* argv, const int* exit_code);

// While alive, says what the command is allocating for ("checking case custom (q 15.10 GB,
// ...)"). When an exception leaves its scope, the innermost note it passes is kept for
// run_app's message (the notes themselves are gone by the time the exception is caught).
class AllocationNote {
 public:
  explicit AllocationNote(std::string what);
  ~AllocationNote();
  AllocationNote(const AllocationNote&) = delete;
  AllocationNote& operator=(const AllocationNote&) = delete;
  // The note of the innermost scope the last exception left, or empty; reset by every new
  // note and by forget().
  static const std::string& unwound();
  static void forget();

 private:
  std::string what_;
  int exceptions_ = 0;  // std::uncaught_exceptions() at construction
};

}  // namespace treeverify::cli
