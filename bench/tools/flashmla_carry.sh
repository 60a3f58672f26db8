#!/usr/bin/env bash
# Packs a FlashMLA checkout (github.com/deepseek-ai/FlashMLA, with its cutlass submodule's
# include/ and tools/util/include/) into .flashmla/flashmla.tgz, small enough to travel to the
# device machine, which has no internet, beside .devpkg/ (the device tool's `carry`, 64 MiB in
# all; FlashMLA 9241ae3 with cutlass 147f567 packs to about 3 MB). Nothing of it is committed:
# .flashmla/ is ignored. On the device (carry [".flashmla"], and ".devpkg" where treeverify is
# not built there): tar -xzf .flashmla/flashmla.tgz -C .flashmla, then python3
# bench/tools/flashmla_dense.py --flashmla .flashmla/FlashMLA --build --treeverify BIN; its
# build there compiles FlashMLA's dense decode for sm_90a (minutes: give it a call of its own).
# Usage: bench/tools/flashmla_carry.sh PATH_TO_FLASHMLA_CHECKOUT
set -euo pipefail
src=${1:?usage: bench/tools/flashmla_carry.sh PATH_TO_FLASHMLA_CHECKOUT}
[ -f "$src/setup.py" ] && [ -d "$src/csrc/sm90" ] || { echo "$src is not a FlashMLA checkout" >&2; exit 2; }
[ -d "$src/csrc/cutlass/include/cute" ] ||
  { echo "$src/csrc/cutlass has no include/cute: clone with --recursive (the cutlass submodule)" >&2; exit 2; }
cd "$(dirname "$0")/../.."
mkdir -p .flashmla
tar -czf .flashmla/flashmla.tgz -C "$(dirname "$(realpath "$src")")" --exclude=.git \
  --exclude='csrc/cutlass/[!it]*' --exclude=csrc/cutlass/test --exclude='csrc/cutlass/tools/[!u]*' \
  --transform "s|^$(basename "$(realpath "$src")")|FlashMLA|" "$(basename "$(realpath "$src")")"
grep -qx '/.flashmla/' .git/info/exclude 2>/dev/null || echo '/.flashmla/' >>.git/info/exclude
du -h .flashmla/flashmla.tgz
