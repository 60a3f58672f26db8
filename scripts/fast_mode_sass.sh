#!/usr/bin/env bash
# Shows from the binary what the e4m3 fast-mode kernels (KvMode::kE4M3Fast, src/cuda/mma/
# fp8_ops.cuh) are on the architectures that ship them: each instantiation compiled for sm_89
# and sm_120 as BUILD_DIR configures it (a release build: what ships), then per kernel its
# registers, spills and stack (ptxas), and from its SASS (cuobjdump) the tensor instructions
# and conversions: QMMA (native e4m3 mma), HMMA (16-bit mma: none expected), F2FP unpacks (the
# e4m3 -> f16 conversions of an emulated mma: none expected), the e4m3 packs of P and Q, and
# local memory accesses (LDL/STL: none expected). Fails if a kernel has no QMMA, any HMMA,
# any unpack, a spill or local memory. Dynamic shared memory is checked at compile time
# (config.h: the sm_86/89/120 variants fit 101376 bytes a block).
# cuobjdump: the CUDA toolkit's, or pip's nvidia-cuda-cuobjdump.
# Usage: scripts/fast_mode_sass.sh [BUILD_DIR] [ARCHS...]   (default: build-release, 89 120)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-release}
shift || true
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(89 120)
[ -f "$build/src/generated/build_config.h" ] || { echo "fast_mode_sass: configure $build first" >&2; exit 1; }
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuobjdump=$(command -v cuobjdump ||
  python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13/bin/cuobjdump"))')
[ -x "$cuobjdump" ] || { echo "fast_mode_sass: no cuobjdump (pip install nvidia-cuda-cuobjdump)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
printf '%-6s %-26s %5s %6s %6s %5s %6s %5s %6s %6s %5s\n' arch kernel regs spills stack \
  QMMA.32 QMMA.16 HMMA unpack e4m3pk local
for arch in "${archs[@]}"; do
  for src in src/cuda/mma/instantiations/*_e4m3_fast.cu; do
    name=$(basename "$src" .cu)
    "$nvcc" -std=c++17 -O3 --expt-relaxed-constexpr -Iinclude -Isrc -I"$build/src/generated" \
      --generate-code=arch=compute_$arch,code=sm_$arch --resource-usage -c "$src" \
      -o "$tmp/k.o" >"$tmp/ptxas.txt" 2>&1
    res=$(grep -E "Function properties|registers|spill" "$tmp/ptxas.txt" | grep -A3 "verify_mma" |
      tr '\n' ' ')
    regs=$(grep -oE "Used [0-9]+ registers" <<<"$res" | grep -oE "[0-9]+" | head -1)
    spills=$(grep -oE "[0-9]+ bytes spill stores" <<<"$res" | grep -oE "^[0-9]+" | head -1)
    stack=$(grep -oE "[0-9]+ bytes stack frame" <<<"$res" | grep -oE "^[0-9]+" | head -1)
    "$cuobjdump" -sass "$tmp/k.o" >"$tmp/k.sass"
    count() { grep -cE "$1" "$tmp/k.sass" || true; }
    q32=$(count 'QMMA\.16832') q16=$(count 'QMMA\.16816') hmma=$(count 'HMMA')
    unpack=$(count 'F2FP[^ ]*UNPACK') pack=$(count 'F2FP[^ ]*E4M3[^ ]*PACK')
    local_mem=$(count '\b(LDL|STL)\b')
    printf '%-6s %-26s %5s %6s %6s %5s %6s %5s %6s %6s %5s\n' "sm_$arch" \
      "${name#verify_}" "${regs:-?}" "${spills:-?}" "${stack:-?}" "$q32" "$q16" "$hmma" \
      "$unpack" "$pack" "$local_mem"
    if [ "${regs:-x}" = x ] || [ "$q32" -eq 0 ] || [ "$hmma" -ne 0 ] || [ "$unpack" -ne 0 ] ||
      [ "${spills:-1}" -ne 0 ] || [ "${stack:-1}" -ne 0 ] || [ "$local_mem" -ne 0 ]; then
      echo "fast_mode_sass: sm_$arch $name is not native e4m3 mma without local memory" >&2
      fail=1
    fi
  done
done
[ $fail -eq 0 ] && echo "fast_mode_sass: OK (${archs[*]})"
exit $fail
