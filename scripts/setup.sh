#!/usr/bin/env bash
# Installs what a build needs from Debian/Ubuntu packages. Safe to re-run: it installs only
# what is missing. The CUDA toolkit is optional and not installed here: with nvcc on PATH (or
# in /usr/local/cuda) the CUDA backend is built too.
set -euo pipefail

packages=(cmake ninja-build g++ git libgtest-dev libcli11-dev libfmt-dev nlohmann-json3-dev
          libopenblas-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all packages present"
  exit 0
fi
echo "setup: installing ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
