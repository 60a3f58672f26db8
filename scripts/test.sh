#!/usr/bin/env bash
# README's test command: installs what is missing, builds, runs every test (C++ and Python). GPU tests skip
# themselves (and say so) on a machine without a GPU; with nvcc present the CUDA kernels are
# built (for the GPU here, or every release architecture without one; arguments pass to
# scripts/build.sh) and the resources of every release architecture are checked.
# Last, each libFuzzer target runs for 20 s (scripts/fuzz.sh) where clang can build them.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
build_dir=${BUILD_DIR:-build}
scripts/check_kernel_resources.sh "$build_dir"  # skips itself without nvcc
ctest --test-dir "$build_dir" --output-on-failure -j "${JOBS:-$(nproc)}"
scripts/python_test.sh  # the Python package: build, pytest (CPU; GPU where one is visible)
# Fuzzing, briefly (fuzz/README.md): each libFuzzer target for 20 s, where clang++ can link one.
if scripts/fuzz.sh --check; then
  scripts/fuzz.sh 20
else
  echo "test: fuzzing skipped: clang++ with the libFuzzer runtime not found (scripts/setup.sh installs them)"
fi
