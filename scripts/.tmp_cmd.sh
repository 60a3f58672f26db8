#!/usr/bin/env bash
bash scripts/device_run.sh none >/dev/null 2>&1; export LD_LIBRARY_PATH=$PWD/.devpkg/lib
T=/tmp/devout; rm -rf $T; mkdir -p $T
AB_FLAGS='--kv-format e4m3 --precision fast' AB_CASES='S1 S2 V1 D2 V2 V4' OUT=$T/ab bash scripts/device_run.sh ab 2>&1 | tail -4
cp $T/ab/ab.txt $OUT/ab_fast.txt; cp $T/ab/gpu.txt $OUT/gpu.txt
TV_WGSAN_TOOLS=memcheck OUT=$T/san bash scripts/device_run.sh fastsan 2>&1 | tail -3
cat $T/san/fastsan_memcheck_*.log > $OUT/fastsan_memcheck.log
TV_WGFAST_TESTS=0 OUT=$T/wf bash scripts/device_run.sh wgfast 2>&1 | grep -E "^(V|D|S)[0-9]|^gpu|FAIL|rror" | head -40
cat $T/wf/bench_wgfast1.txt $T/wf/bench_wgfast2.txt > $OUT/bench_fast_suite.txt
cp $T/wf/bench_wgfast_exact.txt $T/wf/bench_wgfast_bf16.txt $OUT/
