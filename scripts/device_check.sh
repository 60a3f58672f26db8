#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: builds treeverify for that GPU (scripts/build.sh: every kernel
# variant, the tests), runs the C++ GPU tests and the Python package's tests, benchmarks the
# suite, and prints a short table last. The logs go to $OUT (or ./device-logs), six files: machine,
# build, gpu_tests, accuracy, python, bench. A stage that fails is recorded and the next one
# runs; the exit status is 1 when any stage failed.
#
#   scripts/device_check.sh [--skip-build] [--tier default|full] [--bench-cases "V1 V3"]
#                           [--variants "r64-s2-k2 ..."] [--no-tests] [--no-python] [--no-bench]
#
#   --skip-build     reuse $BUILD_DIR (default build/) as it is: a build tree, or binaries in
#                    bin/ and their libraries in lib/, gzipped or not (bench/tools/device_package.sh)
#   --tier full      the GPU tests' full sweep (--full for short); default: the default tier
#                    (tests/README.md)
#   --bench-cases    the suite cases to benchmark (default: all of bench/suite.json)
#   --variants       also benchmark them under the sm_120 table with each of these portable
#                    variants (--variant NAME, a column each, in this order; a name twice is a
#                    second run), beside the table's own
#   --sanitize F     also run compute-sanitizer memcheck and racecheck on the GPU tests that
#                    the gtest filter F names (logs memcheck.log, racecheck.log)
#   --no-tests, --no-python, --no-bench: leave out the C++ GPU tests, the Python tests, the bench
# The GPU tests run as $JOBS gtest shards at once (default: the cores, at most 8): most of their
# time is the float64 oracle, one CPU core a process. STAGE_TIMEOUT (default 900) bounds each run.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
build=${BUILD_DIR:-build} out=${OUT:-device-logs} tier=default cases="" sanitize="" variants=""
do_build=1 do_tests=1 do_python=1 do_bench=1
while [ $# -gt 0 ]; do
  case $1 in
    --skip-build) do_build=0 ;;
    --tier) tier=${2:?--tier default|full}; shift ;;
    --full) tier=full ;;
    --no-tests) do_tests=0 ;;
    --no-python) do_python=0 ;;
    --no-bench) do_bench=0 ;;
    --bench-cases) cases=${2:?--bench-cases "V1 V3"}; shift ;;
    --sanitize) sanitize=${2:?--sanitize GTEST_FILTER}; shift ;;
    --variants) variants=${2:?--variants "r64-s2-k2 r64-s3-t16-w16"}; shift ;;
    -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "device_check: unknown option $1 (--help)" >&2; exit 2 ;;
  esac
  shift
done
[[ $tier == default || $tier == full ]] || { echo "device_check: --tier default|full" >&2; exit 2; }
mkdir -p "$out"
limit=${STAGE_TIMEOUT:-900}
rows=() failed=0
record() {  # stage, exit status, what it counted
  local result=ok
  [ "$2" -eq 0 ] || { result="FAILED rc=$2"; failed=1; }
  rows+=("$(printf '%-24s %-14s %s' "$1" "$result" "$3")")
}
gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader 2>&1)

if ((do_build)); then
  start=$SECONDS
  BUILD_DIR=$build timeout "$limit" scripts/build.sh >"$out/build.log" 2>&1
  rc=$?
  record build $rc "$(grep -o 'architectures [^ ]*' "$out/build.log" | head -1), $((SECONDS - start)) s"
fi
for f in "$build"/bin/*.gz "$build"/lib/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
if [ -d "$build/lib" ]; then
  LD_LIBRARY_PATH=$(cd "$build/lib" && pwd)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export LD_LIBRARY_PATH
fi
find_bin() {  # in a build tree's tests/ or tools/, or a package's bin/
  local d
  for d in tests tools bin; do
    [ -f "$build/$d/$1" ] && { chmod +x "$build/$d/$1"; echo "$build/$d/$1"; return; }
  done
  echo "$build/$1-not-found"
}
tests_bin=$(find_bin treeverify_gpu_tests) tv=$(find_bin treeverify)
{ echo "$gpu"; "$tv" doctor; } >"$out/machine.txt" 2>&1

# The C++ GPU tests, in shards; counted by their result lines ("[  FAILED  ] Suite.Test (5 ms)").
count() { grep -cE "^\[ +$1 +\] [^ ]+ \([0-9]+ ms\)\$" "$out/gpu_tests.log"; }
if ((do_tests)); then
  start=$SECONDS shards=${JOBS:-$(nproc)} pids=() rc=0
  ((shards > 8)) && shards=8
  for ((i = 0; i < shards; i++)); do
    TREEVERIFY_GPU_TIER=$tier GTEST_TOTAL_SHARDS=$shards GTEST_SHARD_INDEX=$i timeout "$limit" \
      "$tests_bin" >"$out/gpu_tests_shard$i.log" 2>&1 &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p" || rc=$?; done
  cat "$out"/gpu_tests_shard*.log >"$out/gpu_tests.log" && rm -f "$out"/gpu_tests_shard*.log
  ((rc != 0 || $(count OK) > 0)) || rc=1  # nothing passed: no GPU seen, or every test skipped
  record "gpu tests ($tier)" $rc "$(count OK) passed, $(count FAILED) failed, $(count SKIPPED)\
 skipped in $((SECONDS - start)) s, $shards shards"
  # The error figures: the largest of each kernel kind against each oracle, plain data and
  # outlier channels (the "accuracy" lines of tests/cuda/gpu_check.h).
  grep '^accuracy ' "$out/gpu_tests.log" | awk -F' [|] ' '
    { split($1, f, " "); for (i = 2; i in f; i++) { split(f[i], e, "="); v[e[1]] = e[2] }
      kind = v["kernel"] ~ /fp16/ ? "fp16" : "bf16"
      if (v["kernel"] ~ /-e4m3kv/) kind = v["kernel"] ~ /-fast/ ? "e4m3-fast" : "e4m3-exact"
      key = sprintf("%-10s vs %-13s %-8s", kind, v["oracle"], $2 ~ /outliers/ ? "outliers" : "plain")
      n[key]++
      for (m in v) if ((m == "out" || m == "row" || m == "lse") && v[m] + 0 > mx[key, m]) mx[key, m] = v[m] + 0 }
    END { for (key in n) printf "accuracy %s %4d cases: out %.2e row %.2e lse %.2e\n", key, n[key],
            mx[key, "out"], mx[key, "row"], mx[key, "lse"] }' | sort >"$out/accuracy.txt"
fi

# compute-sanitizer on the tests --sanitize names, both tools at once.
if [ -n "$sanitize" ]; then
  for tool in memcheck racecheck; do
    (start=$SECONDS
     timeout "$limit" compute-sanitizer --tool $tool --error-exitcode 9 "$tests_bin" \
       --gtest_filter="$sanitize" >"$out/$tool.log" 2>&1
     echo "rc $? $((SECONDS - start))" >"$out/$tool.rc") &
  done
  wait
  for tool in memcheck racecheck; do
    read -r _ rc secs <"$out/$tool.rc" && rm -f "$out/$tool.rc"
    record "$tool" "$rc" "$(grep -oE '(ERROR|RACECHECK) SUMMARY: .*' "$out/$tool.log" | head -1), $secs s"
  done
fi

# The Python package, built for this GPU (scripts/python_test.sh), its GPU tests included.
if ((do_python)); then
  start=$SECONDS
  timeout "$limit" scripts/python_test.sh >"$out/python.log" 2>&1
  rc=$?
  counts=$(grep -oE '[0-9]+ (passed|failed|skipped|errors?)' "$out/python.log" | tail -4 | paste -sd,)
  record "python tests" $rc "${counts//,/, } in $((SECONDS - start)) s"
fi

# The suite's benchmarks, each section of bench.txt headed "== bench NAME: flags".
if ((do_bench)); then
  : >"$out/bench.txt"
  columns=("bf16:" "sm120-table:--config-arch 120")
  for v in $variants; do columns+=("$v:--config-arch 120 --variant $v"); done
  columns+=("e4m3-exact:--kv-format e4m3" "e4m3-fast:--kv-format e4m3 --precision fast")
  for c in "${columns[@]}"; do
    echo "== bench ${c%%:*}: ${c#*:}" >>"$out/bench.txt"
    # shellcheck disable=SC2086  # the flags and the cases are word lists
    log=$(timeout "$limit" "$tv" bench --backend cuda ${c#*:} $cases 2>&1)
    rc=$?
    echo "$log" >>"$out/bench.txt"
    record "bench ${c%%:*}" $rc "$(grep -cE '^[A-Z][0-9]' <<<"$log") cases, $(grep -cE ' FAIL | ERROR ' <<<"$log") failed"
  done
fi

echo "== device check: ${gpu%%,*}, tier $tier, logs in $out/"
printf '%s\n' "${rows[@]}"
if ((do_bench)); then
  echo "== bench, ms (FAIL: the oracle check failed; ERR: the case did not run)"
  awk '/^== bench / { name[++ncol] = $3; sub(/:$/, "", name[ncol]) }
       /^[A-Z][0-9]/ { if (!($1 in seen)) { seen[$1] = 1; order[++n] = $1 }
         ms[$1, ncol] = / FAIL / ? "FAIL" : / ERROR / ? "ERR" : $(NF - 4) }
       END { printf "%-8s", "case"; for (c = 1; c <= ncol; c++) printf " %14s", name[c]; print ""
             for (i = 1; i <= n; i++) { printf "%-8s", order[i]
               for (c = 1; c <= ncol; c++) printf " %14s", ((order[i], c) in ms) ? ms[order[i], c] : "-"
               print "" } }' "$out/bench.txt"
fi
exit $failed
