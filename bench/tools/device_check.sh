#!/usr/bin/env bash
# On the device machine, from the sm_90a package bench/tools/device_package.sh 90a built (carry
# .devpkg; delete .devpkg/bin/treeverify_cpu_tests.gz to save room): the GPU tests in 8 shards,
# memcheck and racecheck on the GPU tests that $SANITIZE names (a gtest filter; none if empty),
# the GPU tests' lines that $SHOW matches (an extended regex), then `treeverify bench $BENCH`
# twice (if set). Logs under $OUT; a short table last.
# Usage: OUT=$OUT SANITIZE='GpuFast.*' SHOW='accuracy.*outliers' BENCH='--config-arch 120 V1 V3' \
#          bench/tools/device_check.sh
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:?set OUT}
bench/tools/device_unpack.sh
export LD_LIBRARY_PATH=$PWD/.devpkg/lib
tv=.devpkg/bin/treeverify gt=.devpkg/bin/treeverify_gpu_tests
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 420 $gt > $OUT/gt_$i.log 2>&1 &
done
if [ -n "${SANITIZE:-}" ]; then
  for tool in memcheck racecheck; do
    (timeout 400 compute-sanitizer --tool $tool --error-exitcode 9 $gt --gtest_filter="$SANITIZE" \
      > $OUT/$tool.log 2>&1; echo "$tool rc $?" >> $OUT/$tool.log) &
  done
fi
wait
cat $OUT/gt_*.log > $OUT/gpu_tests.log; rm $OUT/gt_*.log
echo "gpu tests: $(grep -cE '^\[ +OK +\]' $OUT/gpu_tests.log) ok, $(grep -cE '^\[ +FAILED +\] [^ ]+ \(' $OUT/gpu_tests.log) failed, $(grep -cE '^\[ +SKIPPED +\]' $OUT/gpu_tests.log) skipped"
grep -E '^\[ +FAILED +\] [^ ]+ \(' $OUT/gpu_tests.log | head
for tool in memcheck racecheck; do [ -f $OUT/$tool.log ] && grep -E "SUMMARY|rc [0-9]" $OUT/$tool.log; done
[ -n "${SHOW:-}" ] && grep -E "$SHOW" $OUT/gpu_tests.log | cut -c1-200 | head -40
if [ -n "${BENCH:-}" ]; then
  : > $OUT/bench.txt
  for r in 1 2; do
    echo "== run $r: $BENCH" >> $OUT/bench.txt
    # shellcheck disable=SC2086
    timeout 200 $tv bench --backend cuda $BENCH >> $OUT/bench.txt 2>&1
  done
  awk '/^== run/{h=$0} /^[A-Z][0-9] /{print h": "$1, $7, $8, $9}' $OUT/bench.txt
fi
