#!/usr/bin/env bash
# Builds the sm_90a binaries on this (GPU-less) machine and stages them, compressed, with the
# shared libraries they need into .devpkg/, small enough to travel to the device machine with
# the `carry` option (64 MiB limit), for a device machine that cannot build them itself. There
# `BUILD_DIR=.devpkg scripts/device_check.sh --skip-build` unpacks and runs them (and
# bench/tools/device_unpack.sh unpacks them for the other lab tools). The device machine's image
# had no OpenBLAS or libfmt when this was written, and a binary built here (glibc 2.36) runs
# there (glibc 2.39).
# Usage: bench/tools/device_package.sh [ARCHS]   (default 90a)
set -euo pipefail
cd "$(dirname "$0")/../.."
archs=${1:-90a}
BUILD_DIR=build-dev scripts/build.sh -DTREEVERIFY_CUDA=ON -DTREEVERIFY_CUDA_ARCHS="$archs" >/dev/null
rm -rf .devpkg && mkdir -p .devpkg/bin .devpkg/lib
for exe in build-dev/tools/treeverify build-dev/tests/treeverify_gpu_tests build-dev/tests/treeverify_cpu_tests; do
  [ -f "$exe" ] && cp "$exe" .devpkg/bin/ && strip .devpkg/bin/"$(basename "$exe")"
done
for lib in $(ldd .devpkg/bin/* | awk '/=>/ {print $3}' | sort -u | grep -E 'openblas|libfmt|gfortran|quadmath'); do
  cp -L "$lib" .devpkg/lib/
done
# Compressed, so the binaries, the libraries and the tree fit the 64 MiB a call carries;
# scripts/device_check.sh (or bench/tools/device_unpack.sh) unpacks them on the device machine.
gzip -9 .devpkg/bin/* .devpkg/lib/*
grep -qx '/.devpkg/' .git/info/exclude 2>/dev/null || echo '/.devpkg/' >>.git/info/exclude
du -sh .devpkg
