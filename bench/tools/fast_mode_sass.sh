#!/usr/bin/env bash
# Shows from the binary what the e4m3 fast-mode kernels (KvMode::kE4M3Fast, src/cuda/sm80/
# fp8_ops.cuh) are on the architectures that ship them: each instantiation compiled for sm_89
# and sm_120 as BUILD_DIR configures it (a release build: what ships), then per kernel its
# registers, spills and stack (ptxas), and from its SASS (cuobjdump) the tensor instructions
# and conversions: QMMA (native e4m3 mma), HMMA (16-bit mma: none expected), F2FP unpacks (the
# e4m3 -> f16 conversions of an emulated mma: none expected), the e4m3 packs of P and Q, and
# local memory accesses (LDL/STL: none expected). Fails if a kernel has no QMMA, any HMMA,
# any unpack, a spill or local memory. Dynamic shared memory is checked at compile time
# (config.h: the sm_86/89/120 variants fit 101376 bytes a block).
# cuobjdump: the CUDA toolkit's, or pip's nvidia-cuda-cuobjdump.
# Arch 90a: the sm_90a wgmma kernel's fast instances (src/cuda/sm90/verify_wgmma.cu, bf16 and
# fp16 queries, copies by cp.async and by TMA; found by name prefix, since their parameter's
# type is part of the mangled name): e4m3 wgmma (QGMMA) only, the score products (both operands in shared memory) a
# whole number of tiles' worth (a positive multiple of kQKDim / 32 = 18 QGMMA.64x64x32: ptxas
# 13.0 once dropped a group of them whose results it took for dead, putting a dummy 16-bit
# HGMMA in their place, which gave wrong scores; docs/kernels/sm90-wgmma.md), P V's (A, V, from
# registers) a positive multiple of 8, no spill, no local memory.
# Usage: bench/tools/fast_mode_sass.sh [BUILD_DIR] [ARCHS...]   (default: build-release, 89 120 90a)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-release}
shift || true
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(89 120 90a)
[ -f "$build/src/generated/build_config.h" ] || { echo "fast_mode_sass: configure $build first" >&2; exit 1; }
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
cuobjdump=$(command -v cuobjdump ||
  python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13/bin/cuobjdump"))')
[ -x "$cuobjdump" ] || { echo "fast_mode_sass: no cuobjdump (pip install nvidia-cuda-cuobjdump)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
# Lines of SASS file $2 matching $1.
count() { grep -cE "$1" "$2" || true; }
# The wgmma kernel's fast instances (arch 90a): one compile, every instance's SASS from it.
check_wgmma_fast() {
  "$nvcc" -std=c++17 -O3 --expt-relaxed-constexpr -Iinclude -Isrc -I"$build/src/generated" \
    --generate-code=arch=compute_90a,code=sm_90a --resource-usage -c src/cuda/sm90/verify_wgmma.cu \
    -o "$tmp/w.o" >"$tmp/wptxas.txt" 2>&1
  local dtype tma fn label res regs spills stack q64 qrs hgmma local_mem
  for dtype in 13__nv_bfloat16 6__half; do
    for tma in 0 1; do  # copies by cp.async, or whole tiles by TMA (its parameter: both maps)
      fn=$(grep -oE "Function properties for _ZN10treeverify4cuda4sm9019verify_wgmma_kernelI${dtype}Lb1ELb1ELb${tma}E[A-Za-z0-9_]*" \
        "$tmp/wptxas.txt" | head -1 | awk '{print $4}')
      res=$(grep -A3 "Function properties for $fn" "$tmp/wptxas.txt" | tr '\n' ' ')
      regs=$(grep -oE "Used [0-9]+ registers" <<<"$res" | grep -oE "[0-9]+" | head -1)
      spills=$(grep -oE "[0-9]+ bytes spill stores" <<<"$res" | grep -oE "^[0-9]+" | head -1)
      stack=$(grep -oE "[0-9]+ bytes stack frame" <<<"$res" | grep -oE "^[0-9]+" | head -1)
      "$cuobjdump" -sass -fun "$fn" "$tmp/w.o" >"$tmp/w.sass" 2>/dev/null
      q64=$(count 'QGMMA\.64x64x32[^,]*, gdesc' "$tmp/w.sass")
      qrs=$(count 'QGMMA\.64x64x32[^,]*, R[0-9]+, gdesc' "$tmp/w.sass")
      hgmma=$(count 'HGMMA' "$tmp/w.sass") local_mem=$(count '\b(LDL|STL)\b' "$tmp/w.sass")
      label=wgmma_fast_bf16
      [ "$dtype" = 6__half ] && label=wgmma_fast_fp16
      [ "$tma" = 1 ] && label+=_tma
      printf '%-6s %-26s %5s %6s %6s %9s %10s %5s %5s\n' sm_90a "$label" \
        "${regs:-?}" "${spills:-?}" "${stack:-?}" "$q64" "$qrs" "$hgmma" "$local_mem"
      if [ -z "$fn" ] || [ "${regs:-x}" = x ] || [ "$q64" -eq 0 ] || [ $((q64 % 18)) -ne 0 ] || [ "$qrs" -eq 0 ] ||
        [ $((qrs % 8)) -ne 0 ] ||
        [ "$hgmma" -ne 0 ] || [ "${spills:-1}" -ne 0 ] || [ "${stack:-1}" -ne 0 ] ||
        [ "$local_mem" -ne 0 ]; then
        echo "fast_mode_sass: the sm_90a wgmma fast instance ($dtype, TMA $tma) lost score" \
          "products, has 16-bit wgmma or uses local memory" >&2
        fail=1
      fi
    done
  done
}
for arch in "${archs[@]}"; do
  if [ "$arch" = 90a ]; then
    printf '%-6s %-26s %5s %6s %6s %9s %10s %5s %5s\n' arch kernel regs spills stack \
      QGMMA.ss QGMMA.rs HGMMA local
    check_wgmma_fast
    continue
  fi
  printf '%-6s %-26s %5s %6s %6s %5s %6s %5s %6s %6s %5s\n' arch kernel regs spills stack \
    QMMA.32 QMMA.16 HMMA unpack e4m3pk local
  for src in "$build"/src/generated/sm80/*_e4m3_fast.cu; do
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
    q32=$(count 'QMMA\.16832' "$tmp/k.sass") q16=$(count 'QMMA\.16816' "$tmp/k.sass")
    hmma=$(count 'HMMA' "$tmp/k.sass") unpack=$(count 'F2FP[^ ]*UNPACK' "$tmp/k.sass")
    pack=$(count 'F2FP[^ ]*E4M3[^ ]*PACK' "$tmp/k.sass") local_mem=$(count '\b(LDL|STL)\b' "$tmp/k.sass")
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
