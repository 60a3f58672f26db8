#!/usr/bin/env bash
# Configures and builds treeverify into ./build (or $BUILD_DIR). The CUDA backend is built
# when nvcc is found (PATH or /usr/local/cuda); extra CMake arguments pass through, e.g.
#   scripts/build.sh -DTREEVERIFY_CUDA=OFF
#   scripts/build.sh -DTREEVERIFY_CUDA_ARCHS=90a       (default: the GPU here, else all six)
#   scripts/build.sh -DTREEVERIFY_CUDA_ARCHS=release   (all six, for packaging)
#   scripts/build.sh -DTREEVERIFY_ALL_VARIANTS=ON      (every kernel variant that fits each
#                                   architecture; the default, AUTO, does so for one with tests)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${BUILD_DIR:-build}
if ! command -v nvcc >/dev/null 2>&1 && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build "$build_dir" -j "$jobs"
