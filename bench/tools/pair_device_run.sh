#!/usr/bin/env bash
# On the device machine: the pair variant's checks and A/B (issue 53), from the sm_90a package
# bench/tools/device_package.sh 90a built (carry .devpkg; delete .devpkg/bin/treeverify_cpu_tests.gz
# to save room): the GPU tests in 8 shards, memcheck and racecheck on the pair's tests,
# `bench --config-arch 120` with and without --pair-ctas (V1-V4, twice), ncu stall reasons of the
# pair on V3. Logs under $OUT. Usage: OUT=$OUT bench/tools/pair_device_run.sh
cd "$(dirname "$0")/../.." || exit 2
OUT=${OUT:?set OUT}
bench/tools/device_unpack.sh
export LD_LIBRARY_PATH=$PWD/.devpkg/lib
tv=.devpkg/bin/treeverify gt=.devpkg/bin/treeverify_gpu_tests
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee $OUT/machine.txt
for i in 0 1 2 3 4 5 6 7; do
  GTEST_TOTAL_SHARDS=8 GTEST_SHARD_INDEX=$i timeout 400 $gt > $OUT/gt_$i.log 2>&1 &
done
(timeout 330 compute-sanitizer --tool memcheck --error-exitcode 9 $gt --gtest_filter='GpuVerify.PairCtas:GpuNonFinite.PairCtas' > $OUT/memcheck.log 2>&1; echo "memcheck rc $?" >> $OUT/memcheck.log) &
(timeout 330 compute-sanitizer --tool racecheck --error-exitcode 9 $gt --gtest_filter='GpuVerify.PairCtas:GpuNonFinite.PairCtas' > $OUT/racecheck.log 2>&1; echo "racecheck rc $?" >> $OUT/racecheck.log) &
wait
cat $OUT/gt_*.log > $OUT/gpu_tests.log; rm $OUT/gt_*.log
echo "gpu tests: $(grep -cE '^\[ +OK +\]' $OUT/gpu_tests.log) ok, $(grep -cE '^\[ +FAILED +\] [^ ]+ \(' $OUT/gpu_tests.log) failed, $(grep -cE '^\[ +SKIPPED +\]' $OUT/gpu_tests.log) skipped"
grep -E '^\[ +FAILED +\] [^ ]+ \(' $OUT/gpu_tests.log | head; grep -E "Pair" $OUT/gpu_tests.log | grep -E "OK|FAILED|SKIPPED"
tail -3 $OUT/memcheck.log; tail -3 $OUT/racecheck.log
: > $OUT/bench.txt
for r in 1 2; do
  for f in "" "--pair-ctas"; do
    echo "== run $r --config-arch 120 $f" >> $OUT/bench.txt
    timeout 200 $tv bench --backend cuda --config-arch 120 $f V1 V2 V3 V4 >> $OUT/bench.txt 2>&1
  done
done
awk '/^== run/{h=$0} /^V[0-9] /{print h": "$1, $7, $8, $9}' $OUT/bench.txt
timeout 200 ncu --kernel-name regex:verify_mma --launch-count 1 --section WarpStateStats --section SchedulerStats --print-details all $tv bench --backend cuda --config-arch 120 --pair-ctas --iters 1 --warmup 0 V3 > $OUT/ncu_pair.txt 2>&1
grep -iE "stall|Issue Slots|Eligible|Warp Cycles" $OUT/ncu_pair.txt | head -40
