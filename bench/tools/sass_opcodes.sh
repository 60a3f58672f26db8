#!/usr/bin/env bash
# Prints the SASS opcode stream (one mnemonic a line, no registers or addresses) of one kernel
# instantiation for one architecture, with ptxas's register and spill line first. Diff two runs
# (before and after a change to kernel.cuh or tile_ops.cuh) to see whether the change moved
# the compiled code: the 64-row variants sit at 255 registers, where any change can reschedule
# or spill. Needs a configured build dir for the generated build_config.h.
#   bench/tools/sass_opcodes.sh verify_bf16_r64_s4 90 > /tmp/after.txt
#   BUILD_DIR=build bench/tools/sass_opcodes.sh verify_bf16_r64_s3 80
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: bench/tools/sass_opcodes.sh INSTANTIATION ARCH" >&2; exit 2; }
name=$1 arch=$2 build=${BUILD_DIR:-build-dev}
cuobjdump=$(command -v cuobjdump || python3 -c 'import nvidia, os; print(os.path.join(nvidia.__path__[0], "cu13/bin/cuobjdump"))')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
nvcc -std=c++17 -O3 --expt-relaxed-constexpr -Iinclude -Isrc -I"$build/src/generated" \
  --generate-code=arch=compute_$arch,code=sm_$arch --resource-usage \
  -c "$build/src/generated/sm80/$name.cu" -o "$tmp/k.o" 2>&1 | grep -E "registers|spill" | grep -v "0 bytes spill stores" || true
"$cuobjdump" -sass "$tmp/k.o" | grep -E '^\s+/\*[0-9a-f]{4,}\*/' | sed -E 's@/\*[0-9a-f]+\*/@@; s@;.*@@' | awk '{print $1}'
