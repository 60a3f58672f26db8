#!/usr/bin/env bash
# README's test command: installs what is missing, builds, runs every test (C++ and Python). GPU tests skip
# themselves (and say so) on a machine without a GPU; with nvcc present the CUDA kernels are
# built (for the GPU here, or every release architecture without one; arguments pass to
# scripts/build.sh) and the resources of every release architecture are checked.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh "$@"
build_dir=${BUILD_DIR:-build}
scripts/check_kernel_resources.sh "$build_dir"  # skips itself without nvcc
ctest --test-dir "$build_dir" --output-on-failure -j "${JOBS:-$(nproc)}"
scripts/python_test.sh  # the Python package: build, pytest (CPU; GPU where one is visible)
