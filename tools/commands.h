// The CLI's subcommands. Each adds itself to the app; its callback runs the command and stores
// the process exit code in *exit_code (0 success, 1 a failed check, 2 an error).
#pragma once

#include <CLI/CLI.hpp>

namespace treeverify::cli {

void add_doctor_command(CLI::App* app, int* exit_code);
void add_bench_command(CLI::App* app, int* exit_code);
void add_check_command(CLI::App* app, int* exit_code);
void add_demo_command(CLI::App* app, int* exit_code);

inline constexpr int kExitOk = 0;
inline constexpr int kExitFail = 1;   // a check did not pass
inline constexpr int kExitError = 2;  // bad arguments, or a call that failed

}  // namespace treeverify::cli
