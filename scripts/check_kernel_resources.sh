#!/usr/bin/env bash
# Compiles every kernel for every release architecture with ptxas' resource report, prints
# registers / spills / stack / static shared memory per kernel, and fails if any kernel
# spills, uses a stack frame (local memory), needs more than 255 registers, or has its wgmma
# serialized by ptxas (spills of fast-mode kernels where e4m3 mma.sync is emulated, which ship
# nowhere, are shown but pass).
# Which verify variants are real kernels on an architecture and which are trap stubs (no
# barriers; not listed, counted per architecture) follows BUILD_DIR's configuration
# (src/cuda/sm80/build.h): a release build (TREEVERIFY_ALL_VARIANTS=OFF) compiles each
# architecture's tile-table variants only, which is what ships; a developer build every
# variant that fits. Dynamic shared memory is checked at compile time by static_asserts in
# src/cuda/sm80/config.h (<= 101376 bytes for the sm_86/89/120 configuration).
# Usage: scripts/check_kernel_resources.sh [BUILD_DIR] [ARCHS...]   (default: build, release list)
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
shift || true
archs=("$@")
[ ${#archs[@]} -gt 0 ] || archs=(80 86 89 90a 100 120)
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || { echo "check_kernel_resources: no nvcc; nothing to check"; exit 0; }
gen="$build_dir/src/generated"
[ -f "$gen/build_config.h" ] || { echo "check_kernel_resources: configure $build_dir first"; exit 1; }

# The portable kernel's instances are generated at configure time (src/CMakeLists.txt).
sources=("$gen"/sm80/*.cu src/cuda/common/*.cu src/cuda/sm90/*.cu)
all_variants=$(awk '$2 == "TREEVERIFY_ALL_VARIANTS" { print $3 }' "$gen/build_config.h")
echo "check_kernel_resources: $build_dir: $([ "${all_variants:-0}" = 1 ] &&
  echo "every verify variant that fits each architecture (TREEVERIFY_ALL_VARIANTS)" ||
  echo "each architecture's tile-table verify variants (what ships)")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
counts=()
printf '%-6s %-58s %5s %7s %7s %6s %8s\n' arch kernel regs spill_st spill_ld stack st_smem
for arch in "${archs[@]}"; do
  for src in "${sources[@]}"; do
    log="$tmp/$(basename "$src").$arch.log"
    "$nvcc" -std=c++17 -O3 --expt-relaxed-constexpr -Iinclude -Isrc -I"$gen" \
      --generate-code=arch=compute_$arch,code=sm_$arch --resource-usage -c "$src" \
      -o "$tmp/out.o" >"$log" 2>&1 || { cat "$log"; echo "FAILED to compile $src for sm_$arch"; exit 1; }
    # ptxas prints: "Compiling entry function 'NAME'", then "N bytes stack frame, N bytes spill
    # stores, N bytes spill loads", then "Used N registers, ... N bytes smem".
    # Fast-mode instances on an architecture without native e4m3 mma.sync (sm_90, sm_100:
    # F2FP unpacks + HMMA; native on sm_89 and sm_120/121) are built by developer builds
    # only, to test their arithmetic there (src/CMakeLists.txt): their spills are shown, not
    # failed.
    emulated=0
    [[ "$src" == *_e4m3_fast.cu && ! "$arch" =~ ^(89|120|121) ]] && emulated=1
    awk -v arch="$arch" -v emulated="$emulated" '
      /Compiling entry function/ { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
      /bytes stack frame/ { stack = $1; st = $5; ld = $9 }
      /Used [0-9]+ registers/ {
        regs = $0; sub(/.*Used /, "", regs); sub(/ registers.*/, "", regs)
        # A verify variant not compiled for this architecture: the trap stub, no barriers.
        stub = name ~ /verify_(mma|wgmma)_kernel/ && $0 ~ /used 0 barriers/
        smem = 0; if (match($0, /[0-9]+ bytes smem/)) { smem = substr($0, RSTART, RLENGTH); sub(/ bytes smem/, "", smem) }
        cmd = "c++filt \"" name "\""; short = name; cmd | getline short; close(cmd)
        gsub(/treeverify::cuda::(sm80::|sm90::)?|\(anonymous namespace\)::|__nv_|VerifyKernelParams|\(\)/, "", short)
        sub(/^void /, "", short); gsub(/, /, ",", short); gsub(/> >/, ">>", short)
        if (length(short) > 58) short = substr(short, 1, 55) "..."
        if (!stub) printf "%-6s %-58s %5s %7s %7s %6s %8s%s\n", "sm_" arch, short, regs, st, ld, stack, smem,
          emulated ? " (emulated e4m3 mma: tests only)" : ""
        if ((st + 0 > 0 || ld + 0 > 0 || stack + 0 > 0) && !emulated || regs + 0 > 255) bad = 1
      }
      END { exit bad }' "$log" || fail=1
    # ptxas serializes every wgmma of a kernel (an "info" line, C7512/C7514/C7520...) when
    # registers run short or one stays in flight across a branch: correct code, 1.6x slower
    # (measured on the H200: docs/kernels/sm90-wgmma.md), so a failure here like a spill.
    serialized=$(grep "wgmma.mma_async instructions are serialized" "$log" || true)
    if [ -n "$serialized" ]; then
      sed 's/^/  /' <<<"$serialized"
      fail=1
    fi
  done
  verify_logs=("$tmp"/verify_*."$arch".log)
  stubs=$({ grep -l "used 0 barriers" "${verify_logs[@]}" || true; } | wc -l)  # none: grep fails
  counts+=("sm_$arch $((${#verify_logs[@]} - stubs)) kernels + $stubs stubs")
done
echo "check_kernel_resources: verify kernels compiled per architecture (stubs: variants not built there):"
printf '  %s\n' "${counts[@]}"
if [ $fail -ne 0 ]; then
  echo "check_kernel_resources: FAIL (a kernel spills, uses local memory or too many registers, or ptxas serialized its wgmma)"
  exit 1
fi
echo "check_kernel_resources: OK (${#archs[@]} architectures, no spills or local memory outside emulated fast-mode instances, no serialized wgmma)"
