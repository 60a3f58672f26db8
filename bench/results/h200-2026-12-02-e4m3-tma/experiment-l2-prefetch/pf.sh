#!/usr/bin/env bash
# One-off: L2 prefetch of the next tile's rows in the wgmma producer, against the build before it.
set -uo pipefail
out=${OUT:-device-out}; mkdir -p "$out"
scripts/device_unpack.sh
export LD_LIBRARY_PATH=$PWD/.devpkg/lib
b=.devpkg/bin
TREEVERIFY_TEST_OWN_TABLE_ONLY=1 timeout 200 $b/treeverify_gpu_tests --gtest_brief=1 \
  --gtest_filter='GpuVerify.WgmmaTmaCopiesMatchCpAsync:GpuE4M3.WgmmaPagesHeadsAndChunks:GpuVerify.WgmmaPagesHeadsAndChunks' >"$out/gpu_tests.log" 2>&1
echo "gpu tests rc=$? $(grep -E '^\[  (PASSED|FAILED)' $out/gpu_tests.log | tr '\n' ' ')"
for run in 1 2; do
  for bin in treeverify-base treeverify; do
    echo "== run $run $bin 16-bit"
    timeout 120 $b/$bin bench --backend cuda-mma V1 V2 V4 D2 S2 2>&1 | tee -a "$out/bench_pf.txt" | grep -E '^(V|D|S)[0-9]' | awk '{print $1, $(NF-4), $(NF-1)}' | tr '\n' ' '; echo
    echo "== run $run $bin e4m3"
    timeout 120 $b/$bin bench --backend cuda-mma --kv-format e4m3 V1 V2 D2 2>&1 | tee -a "$out/bench_pf.txt" | grep -E '^(V|D|S)[0-9]' | awk '{print $1, $(NF-4), $(NF-1)}' | tr '\n' ' '; echo
  done
done
