// treeverify: doctor (what runs here and why), bench (the suite, against the roofline),
// check (one case against the float64 oracle), demo (lossless speculative decoding).
#include <CLI/CLI.hpp>

#include "app.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"treeverify: MLA tree-verify attention for speculative decoding"};
  app.require_subcommand(1);
  int exit_code = treeverify::cli::kExitOk;
  treeverify::cli::add_doctor_command(&app, &exit_code);
  treeverify::cli::add_bench_command(&app, &exit_code);
  treeverify::cli::add_check_command(&app, &exit_code);
  treeverify::cli::add_demo_command(&app, &exit_code);
  return treeverify::cli::run_app(&app, argc, argv, &exit_code);
}
