#!/usr/bin/env bash
# Installs what a build needs from Debian/Ubuntu packages. Safe to re-run: it installs only
# what is missing. The CUDA toolkit is optional and not installed here: with nvcc on PATH (or
# in /usr/local/cuda) the CUDA backend is built too.
set -euo pipefail

packages=(cmake ninja-build g++ git libgtest-dev libcli11-dev libfmt-dev nlohmann-json3-dev
          libopenblas-dev)
# Fuzzing (scripts/fuzz.sh, which scripts/test.sh runs briefly): clang and its libFuzzer runtime
# (libclang_rt.fuzzer, in libclang-rt-<version>-dev). Best effort: where they cannot be
# installed, the tests skip fuzzing and say so.
fuzz_packages=(clang libclang-rt-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
fuzz_missing=()
for p in "${fuzz_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || fuzz_missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ] && [ ${#fuzz_missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
all_missing=("${missing[@]}" "${fuzz_missing[@]}")
echo "setup: installing ${all_missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
if [ ${#fuzz_missing[@]} -gt 0 ]; then
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${fuzz_missing[@]}" ||
    echo "setup: could not install ${fuzz_missing[*]}: scripts/test.sh will skip fuzzing"
fi
