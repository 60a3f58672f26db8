// run_app and AllocationNote (app.h).
#include "app.h"

#include <fmt/format.h>

#include <exception>
#include <new>
#include <stdexcept>
#include <utility>

#include "commands.h"

namespace treeverify::cli {
namespace {

thread_local std::string unwound_note;

int allocation_failure(const CLI::App& app, const char* what) {
  std::string command = "treeverify";
  for (const CLI::App* sub : app.get_subcommands()) command += " " + sub->get_name();
  const std::string& note = AllocationNote::unwound();
  fmt::print(stderr, "{}: out of host memory ({}){}\n", command, what,
             note.empty() ? "" : " while " + note);
  return kExitError;
}

}  // namespace

AllocationNote::AllocationNote(std::string what)
    : what_(std::move(what)), exceptions_(std::uncaught_exceptions()) {
  unwound_note.clear();
}
AllocationNote::~AllocationNote() {
  // Unwinding: the innermost note destroyed first is the one that describes the failure.
  if (std::uncaught_exceptions() > exceptions_ && unwound_note.empty()) unwound_note = what_;
}
const std::string& AllocationNote::unwound() { return unwound_note; }
void AllocationNote::forget() { unwound_note.clear(); }

int run_app(CLI::App* app, int argc, const char* const* argv, const int* exit_code) {
  AllocationNote::forget();
  try {
    app->parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app->exit(e);
  } catch (const std::bad_alloc& e) {
    return allocation_failure(*app, e.what());
  } catch (const std::length_error& e) {
    return allocation_failure(*app, e.what());
  }
  return *exit_code;
}

}  // namespace treeverify::cli
