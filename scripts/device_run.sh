#!/usr/bin/env bash
# Runs on the device machine (H200) over a .devpkg/ made by scripts/device_package.sh:
# GPU tests, compute-sanitizer, `treeverify bench` and the PyTorch naive reference. Logs go
# to $OUT (or ./device-out); a short table is printed last.
# Usage: scripts/device_run.sh [tests|sanitize|bench|all]...   (default: all)
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-device-out}
mkdir -p "$out"
export LD_LIBRARY_PATH=$PWD/.devpkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=.devpkg/bin
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(all)
want() { for s in "${steps[@]}"; do [ "$s" = all ] || [ "$s" = "$1" ] && return 0; done; return 1; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$out/gpu.txt"
git rev-parse --short=12 HEAD 2>/dev/null | tee "$out/commit.txt"
$bin/treeverify doctor | tee "$out/doctor.txt"

if want tests; then
  $bin/treeverify_gpu_tests --gtest_brief=1 2>&1 | tee "$out/gpu_tests.log" | tail -40
fi
if want sanitize; then
  for tool in memcheck racecheck; do
    compute-sanitizer --tool $tool --error-exitcode 9 $bin/treeverify_gpu_tests \
      --gtest_brief=1 --gtest_filter='GpuVerify.PageSizes:GpuVerify.RaggedBatch' \
      >"$out/sanitize_$tool.log" 2>&1
    echo "compute-sanitizer $tool: rc=$? ($(grep -c 'ERROR' "$out/sanitize_$tool.log") error lines)"
  done
fi
if want bench; then
  $bin/treeverify bench --backend cuda-mma --json "$out/bench.json" 2>&1 | tee "$out/bench.txt" | tail -30
  PYTHONUNBUFFERED=1 python3 bench/torch_reference.py --json "$out/torch.json" 2>&1 | tee "$out/torch.txt"
fi
