#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, clang with ASan and UBSan, CPU only) into ./build-fuzz
# (or $FUZZ_BUILD_DIR) and runs each for SECONDS seconds on a writable copy of its seed corpus
# (fuzz/corpus/<target>, never modified; inputs that found new coverage stay in
# build-fuzz/corpus/<target> for the next run). Exits non-zero on any finding and prints the
# input that triggered it; the last lines are a table: target, runs, seconds, result.
#   scripts/fuzz.sh 20                      # every target, 20 s each (what scripts/test.sh runs)
#   scripts/fuzz.sh 600 fuzz_plan           # one target
#   FUZZ_RUNS=1000000 scripts/fuzz.sh 0     # 10^6 inputs a target, no time limit
#   scripts/fuzz.sh --check                 # exit 0 iff clang++ can link a libFuzzer target
# Targets: fuzz_plan fuzz_tree fuzz_ddtree fuzz_kv_commit fuzz_kv_commit_long (fuzz/README.md
# says what each checks).
set -euo pipefail
cd "$(dirname "$0")/.."

cxx=${FUZZ_CXX:-clang++}
check_toolchain() {
  command -v "$cxx" >/dev/null 2>&1 || return 1
  local dir
  dir=$(mktemp -d)
  printf 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }\n' \
    >"$dir/probe.cpp"
  local ok=0
  "$cxx" -fsanitize=fuzzer,address,undefined "$dir/probe.cpp" -o "$dir/probe" >/dev/null 2>&1 || ok=1
  rm -rf "$dir"
  return $ok
}
if [ "${1:-}" = "--check" ]; then
  check_toolchain
  exit $?
fi
if [ $# -lt 1 ] || ! [[ "$1" =~ ^[0-9]+$ ]]; then
  echo "usage: scripts/fuzz.sh SECONDS [TARGET...]   (or --check)" >&2
  exit 2
fi
seconds=$1
shift
all_targets=(fuzz_plan fuzz_tree fuzz_ddtree fuzz_kv_commit fuzz_kv_commit_long)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all_targets[@]}")
for t in "${targets[@]}"; do
  [[ " ${all_targets[*]} " == *" $t "* ]] || { echo "fuzz: unknown target $t" >&2; exit 2; }
done
if ! check_toolchain; then
  echo "fuzz: $cxx cannot link a libFuzzer target (scripts/setup.sh installs clang and" \
       "libclang-rt-dev)" >&2
  exit 1
fi

build_dir=${FUZZ_BUILD_DIR:-build-fuzz}
jobs=${JOBS:-$(nproc)}
cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
  -DTREEVERIFY_CUDA=OFF -DTREEVERIFY_BUILD_TESTS=OFF -DTREEVERIFY_BUILD_TOOLS=OFF \
  -DTREEVERIFY_BUILD_FUZZ=ON >/dev/null
cmake --build "$build_dir" -j "$jobs" --target "${targets[@]}"

# libFuzzer options: a single input taking over 10 s is a finding (a hang); the UBSan and ASan
# reports abort (the targets are built that way) and leave the input in findings/.
runs_opt=()
[ -z "${FUZZ_RUNS:-}" ] || runs_opt=(-runs="$FUZZ_RUNS")
table=()
failed=0
for t in "${targets[@]}"; do
  corpus="$build_dir/corpus/$t"
  findings="$build_dir/findings/$t"
  log="$build_dir/logs/$t.log"
  mkdir -p "$corpus" "$findings" "$(dirname "$log")"
  cp -n fuzz/corpus/"$t"/* "$corpus"/ 2>/dev/null || true
  extra=()
  # Inputs of fixed bugs (fuzz/regressions/): replayed first, read only.
  [ -d "fuzz/regressions/$t" ] && extra=("fuzz/regressions/$t")
  limit="${seconds}s"
  [ "$seconds" -ne 0 ] || limit="no time limit"
  echo "fuzz: $t, $limit${FUZZ_RUNS:+, $FUZZ_RUNS runs} (log: $log)"
  start=$(date +%s)
  rc=0
  UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
    "$build_dir/fuzz/$t" -max_total_time="$seconds" "${runs_opt[@]}" -timeout=10 \
      -print_final_stats=1 -artifact_prefix="$findings/" "$corpus" "${extra[@]}" >"$log" 2>&1 ||
    rc=$?
  elapsed=$(($(date +%s) - start))
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  result=ok
  if [ $rc -ne 0 ]; then
    failed=1
    result="FINDING (exit $rc)"
    echo "fuzz: $t found a problem; the end of its log:" >&2
    grep -v '^INFO:\|^#[0-9]' "$log" | tail -40 >&2 || true
    input=$(sed -n "s/.*Test unit written to \(.*\)/\1/p" "$log" | tail -1)
    if [ -n "$input" ]; then
      echo "fuzz: crash input: $input" >&2
      echo "fuzz: reproduce: $build_dir/fuzz/$t $input" >&2
    fi
  fi
  table+=("$(printf '%-16s %12s %8s   %s' "$t" "${runs:-?}" "$elapsed" "$result")")
done

printf '%-16s %12s %8s   %s\n' target runs seconds result
printf '%s\n' "${table[@]}"
exit $failed
