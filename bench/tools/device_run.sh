#!/usr/bin/env bash
# Runs on the device machine (H200) over a .devpkg/ made by bench/tools/device_package.sh.
# Steps (default: all but profile, small and sweep): tests | sanitize | python | bench | torch |
#   profile | small | sweep
#   tests     the GPU GoogleTest suite (cuda-mma and the GPU commit against the CPU oracle)
#   sanitize  compute-sanitizer memcheck and racecheck over a subset of the GPU suite
#             (memcheck, racecheck: one tool; each takes minutes, so one a call)
#   python    scripts/python_test.sh (builds the package for this GPU, runs pytest with torch)
#   bench     `treeverify bench` of the suite twice (the spread is the noise), the sm_120 tile
#             configuration forced on V1/V3/D1, and V1 at page size 64 (page-size parity)
#   torch     bench/tools/torch_reference.py, the PyTorch naive reference, same cases
#   flashmla  bench/tools/flashmla_dense.py: FlashMLA built from the checkout at $FLASHMLA (carried
#             to the device; or the .tgz of bench/tools/flashmla_carry.sh), its dense prefix timed,
#             then `treeverify bench` on the same cases
#   small     the small-work cases (S1-S4) with V1 and D2, twice, and each kernel's duration
#             (ncu, bench/tools/kernel_times.sh) in those cases; with .devpkg/bin/treeverify-base
#             present (a baseline build), the same for it, as custom cases
#   sweep     S1-S4 at forced chunk lengths (--chunk-tokens): time and kernel durations, the
#             data behind the split schedule's cost model
#   e4m3      `treeverify bench --kv-format e4m3` of the suite (an e4m3 cache, exact mode)
#   tma       the wgmma kernel's TMA copies against cp.async in one binary, twice, 16-bit and
#             e4m3: V2-V4 with and without (--no-tma), D2 without and forced (--force-tma)
#   fast      V1, V3, D1 and S3 under the sm_120 table (forced), an e4m3 cache in exact and in
#             fast mode, and bf16: the same schedules; on an H200 fast mode's e4m3 products are
#             emulated, so its times are those of the emulation, not of sm_120
#   flush     S1-S4, V1 and D2 with L2 emptied by a read, then by a write, in one run
#             (bench --flush: a write leaves dirty lines the timed call writes back)
#   l2        ncu: the verify kernel's duration and L2/DRAM traffic on L2_CASE (default S1)
#             after the bench's flush by a read and by a write (caches left as the flush left
#             them; application replay reruns the call for each pass, so each sees that state)
#   layers    61 runs of one plan (a step's layers) on S1, S3, V1 and D2: enqueue cost per
#             run, GPU time, step data rebuilt by every run, and a CUDA graph replay
#   ab        a change against a baseline build in one call: `treeverify bench` of AB_CASES
#             (default S1-S4, V1, D1, D2) with AB_FLAGS (e.g. --kv-format e4m3) by
#             .devpkg/bin/treeverify and .devpkg/bin/treeverify-base, AB_RUNS (default 2) times
#             each, interleaved, into one log (ab.txt), and a line a run of case and ms;
#             AB_BASE_BIN=treeverify AB_BASE_FLAGS=... compares two sets of flags of one build;
#             AB_VARIANTS="tv-a tv-b": more packaged builds (bench/tools/build_variant.sh) in the
#             same rotation, after the two
#   sass      ncu: warp-stall samples per SASS instruction of the main kernel on V4 (L cut
#             to 65536), as csv (sass.csv), the 40 instructions with the most samples and the
#             samples summed by mbarrier wait and opcode, and by stall reason and 4 KB block of
#             code (KERNEL=verify_wgmma: the wgmma kernel's; SASS_CASE: other bench flags, e.g.
#             --kv-format e4m3 or S1; SASS_INTERVAL=0: the finest sampling, for short kernels)
#   wgsan     the wgmma kernel (the device's own choice only) under memcheck, over the GpuVerify
#             and GpuE4M3 tests that run it, and racecheck, over EveryVariant, GpuNonFinite's and
#             GpuE4M3's outlier channels (each tool
#             cut at TV_WGSAN_TIMEOUT seconds, default 280; TV_WGSAN_TOOLS=racecheck: one tool;
#             TV_WGSAN_FILTER: other tests, e.g. fast mode's small GpuFast ones)
#   fastsan   the wgmma kernel's e4m3 instances under racecheck, then memcheck (TV_WGSAN_TOOLS,
#             as wgsan): `treeverify check` on fast mode with short chunks and with 16 tiles a
#             CTA (a stage of codes reused), and on exact mode at page 1 (cp.async, its stages
#             widened by plain loads); racecheck prints each hazard's address, threads and kind.
#             A check takes 1-3 minutes under racecheck on the H200; the GpuFast tests of the
#             wgmma kernel go with it as `fastsan wgsan` and TV_WGSAN_FILTER='GpuFast.Device*:
#             GpuFast.Nan*:GpuFast.Outlier*' (not EveryVariantAndDtype: the portable variants
#             outran 230 s under racecheck)
#   wgmma     the sm_90a wgmma kernel: `treeverify check` on suite and custom cases (trees,
#             page 1, fp16, ragged, forced chunks; 16-bit and e4m3 caches) and the quick GPU
#             tests of both, then the suite's
#             cases it runs, twice, and on the portable kernel (sm_90 table forced), and ncu
#             profiles of V1 and V4 (TV_WG_PORTABLE=0, TV_WG_PROFILE=0 leave those two out);
#             with .devpkg/bin/treeverify-base (a baseline build), its times of the same cases
#   wgcheck   the checks and quick GPU tests of the wgmma step, without its benches and profiles
#   wgfast    the wgmma kernel's fast mode (an e4m3 cache, e4m3 products): `treeverify check`
#             on suite and custom cases, the GpuFast tests and the GpuVerify cases' own-choice
#             part, then the suite's cases it runs twice in fast mode beside exact mode and bf16
#             (TV_WGFAST_TESTS=0 leaves the tests out, TV_WGFAST_BENCH=0 the benches)
#   profile   ncu: stall reasons of the main kernel on V4 (L cut to 65536) and on V1 at page
#             size 1 and 64, every kernel's duration in one D1 call, and the sm_80 tile
#             configuration forced on V1/V4
# Logs go to $OUT (or ./device-out); each step prints its summary last.
# Usage (device tool): bench/tools/device_run.sh tests sanitize   with carry [".devpkg"]
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT:-device-out}
mkdir -p "$out"
bench/tools/device_unpack.sh
export LD_LIBRARY_PATH=$PWD/.devpkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=.devpkg/bin
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(tests sanitize python bench torch)
want() { for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem,temperature.gpu --format=csv,noheader | tee "$out/gpu.txt"
$bin/treeverify doctor >"$out/doctor.txt" 2>&1
if want tests; then
  # On sm_90a code the suite also forces the sm_90 table (the wgmma kernel is the device's own
  # choice), which takes it past one call: TV_GTEST_FILTER='GpuVerify.*' in one call and
  # TV_GTEST_FILTER='-GpuVerify.*' in another. TV_TESTS_TIMEOUT: seconds (default 560).
  timeout "${TV_TESTS_TIMEOUT:-560}" $bin/treeverify_gpu_tests --gtest_brief=1 --gtest_filter="${TV_GTEST_FILTER:-*}" \
    >"$out/gpu_tests.log" 2>&1
  echo "gpu tests: rc=$? $(grep -E '^\[  (PASSED|FAILED)' "$out/gpu_tests.log" | tr '\n' ' ')"
  # The error figures: the largest of each kernel kind against each oracle, plain data and
  # outlier channels (the "accuracy" lines of tests/cuda/gpu_check.h).
  grep '^accuracy ' "$out/gpu_tests.log" | awk -F' [|] ' '
    { split($1, f, " "); for (i = 2; i in f; i++) { split(f[i], e, "="); v[e[1]] = e[2] }
      kind = v["kernel"] ~ /fp16/ ? "fp16" : "bf16";
      if (v["kernel"] ~ /-e4m3kv/) kind = v["kernel"] ~ /-fast/ ? "e4m3-fast" : "e4m3-exact";
      key = sprintf("%-10s vs %-13s %-8s", kind, v["oracle"], $2 ~ /outliers/ ? "outliers" : "plain");
      n[key]++; for (m in v) if (m == "out" || m == "row" || m == "lse")
        if (v[m] + 0 > mx[key, m]) mx[key, m] = v[m] + 0 }
    END { for (key in n) printf "accuracy %s %4d cases: out %.2e row %.2e lse %.2e\n", key, n[key],
            mx[key, "out"], mx[key, "row"], mx[key, "lse"] }' | sort
fi
# sanitize runs both tools; memcheck or racecheck one (with e4m3 exact and fast runs in every
# GpuVerify case, racecheck over this subset took more than 300 s on the H200, 2026-12-01:
# give it a call of its own).
tools=()
want sanitize || want memcheck && tools+=(memcheck)
want sanitize || want racecheck && tools+=(racecheck)
if [ ${#tools[@]} -gt 0 ]; then
  # One log for both tools: the device tool returns at most 8 files.
  : >"$out/sanitize.log"
  for tool in "${tools[@]}"; do
    timeout 540 compute-sanitizer --tool $tool --error-exitcode 9 $bin/treeverify_gpu_tests \
      --gtest_brief=1 --gtest_filter='GpuVerify.Heads:GpuVerify.StepDataFollowsThePlan:GpuVerify.GraphBringsItsOwnStepData:GpuVerify.ChunkLengths:GpuNonFinite.EveryVariantOnce:GpuE4M3.EveryVariantAndDtype:GpuFast.EveryVariantAndDtype:GpuFast.NanCodeReachesOnlyTheRowsThatSeeIt:GpuErrors.StridedQueryMatchesContiguous:KvCommitGpu*' >"$out/sanitize_$tool.tmp" 2>&1
    echo "compute-sanitizer $tool: rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' "$out/sanitize_$tool.tmp" | tr '\n' ' ')"
    cat "$out/sanitize_$tool.tmp" >>"$out/sanitize.log" && rm "$out/sanitize_$tool.tmp"
  done
fi
# The wgmma kernel under both tools, the device's own choice only: memcheck over a broad set,
# racecheck over a small one (the broad set outran 280 s under racecheck on the H200).
if want wgsan; then
  small='GpuVerify.EveryVariant:GpuVerify.WgmmaTmaCopiesMatchCpAsync:GpuNonFinite.EveryVariantOnce:GpuE4M3.OutlierChannels'
  broad="$small:GpuVerify.TreeShapesAndSizes:GpuVerify.PageSizes:GpuVerify.Heads:GpuVerify.ChunkLengths:GpuVerify.RaggedBatch:GpuVerify.Fp16:GpuVerify.WgmmaPagesHeadsAndChunks:GpuE4M3.WgmmaPagesHeadsAndChunks:GpuE4M3.NanCodeReachesOnlyTheRowsThatSeeIt"
  for tool in ${TV_WGSAN_TOOLS:-memcheck racecheck}; do
    filter=$broad
    [ $tool = racecheck ] && filter=$small
    filter=${TV_WGSAN_FILTER:-$filter}
    TREEVERIFY_TEST_OWN_TABLE_ONLY=1 timeout "${TV_WGSAN_TIMEOUT:-280}" compute-sanitizer --tool $tool --error-exitcode 9 \
      $bin/treeverify_gpu_tests --gtest_brief=1 --gtest_filter="$filter" >"$out/wgsan_$tool.log" 2>&1
    echo "compute-sanitizer $tool (wgmma): rc=$? $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY|^\[  (PASSED|FAILED)' "$out/wgsan_$tool.log" | tr '\n' ' ')"
  done
fi
if want fastsan; then
  e4m3=(--backend cuda-mma --kv-format e4m3 --heads 64 --tree 2)
  for tool in ${TV_WGSAN_TOOLS:-racecheck memcheck}; do
    report=()
    [ $tool = racecheck ] && report=(--racecheck-report all --print-limit 8)
    for args in "--precision fast --page 64 --prefix 1000" \
      "--precision fast --page 64 --prefix 2048 --chunk-tokens 1024" \
      "--precision exact --page 1 --prefix 2048 --chunk-tokens 1024"; do
      log="$out/fastsan_${tool}_${args// /_}.log"
      # shellcheck disable=SC2086  # args is a word list
      timeout 170 compute-sanitizer --tool $tool "${report[@]}" \
        $bin/treeverify check "${e4m3[@]}" $args >"$log" 2>&1
      echo "fastsan $tool check $args: rc=$? $(grep -E '  (PASS|FAIL)|SUMMARY' "$log" | tr '\n' ' ')"
    done
  done
fi
if want python; then
  timeout 300 scripts/python_test.sh >"$out/python.log" 2>&1
  echo "python tests: rc=$? $(grep -E 'passed|failed' "$out/python.log" | tail -2 | tr '\n' ' ')"
fi
if want bench; then
  for run in 1 2; do
    timeout 150 $bin/treeverify bench --backend cuda-mma >"$out/bench$run.txt" 2>&1
  done
  timeout 100 $bin/treeverify bench --backend cuda-mma --config-arch 120 V1 V3 D1 >"$out/bench_cfg120.txt" 2>&1
  timeout 60 $bin/treeverify bench --backend cuda-mma --heads 8 --tree 16 --prefix 185000 --page 64 >"$out/bench_v1_page64.txt" 2>&1
  grep -h -E "^gpu|^(V|D|R|custom)" "$out"/bench1.txt "$out"/bench2.txt "$out"/bench_cfg120.txt "$out"/bench_v1_page64.txt
fi
if want flashmla; then
  # FLASHMLA: a FlashMLA checkout with its cutlass submodule, carried to the device machine,
  # or the archive bench/tools/flashmla_carry.sh packs (.flashmla/flashmla.tgz), unpacked here.
  fm=${FLASHMLA:?FLASHMLA=checkout or .tgz}
  if [ "${fm%.tgz}" != "$fm" ]; then
    mkdir -p .flashmla/src && { [ -d .flashmla/src/FlashMLA ] || tar -xzf "$fm" -C .flashmla/src; } &&
      fm=.flashmla/src/FlashMLA
  fi
  # Two runs (the second finds the build done: about 2 minutes for the first on the H200,
  # 4 minutes for both, 2026-12-01).
  for run in 1 2; do
    PYTHONUNBUFFERED=1 timeout 400 python3 bench/tools/flashmla_dense.py --flashmla "$fm" --build \
      --cases V1,V2,V3,V4,D1,D2,S1,S2,S3,S4 --treeverify $bin/treeverify \
      --json "$out/flashmla$run.json" >"$out/flashmla$run.txt" 2>&1
    echo "flashmla run $run: rc=$?"
    grep -E "^flashmla|^gpu|^(V|D|S)[0-9]|Error|error" "$out/flashmla$run.txt" | tail -24
  done
fi
if want torch; then
  PYTHONUNBUFFERED=1 timeout 200 python3 bench/tools/torch_reference.py --json "$out/torch.json" >"$out/torch.txt" 2>&1
  cat "$out/torch.txt"
fi
if want wgmma || want wgcheck; then
  # A kernel that hangs (a pipeline deadlock) would cost every check's timeout: one short
  # check first, and the step stops there if it fails.
  if ! { timeout 30 $bin/treeverify check --backend cuda-mma V1 &&
    timeout 30 $bin/treeverify check --backend cuda-mma --kv-format e4m3 V1; } >"$out/wgmma_first.txt" 2>&1; then
    echo "wgmma: the first check failed or hung (rc=$?); step stopped"; tail -5 "$out/wgmma_first.txt"
    steps=()
  fi
fi
if want wgmma || want wgcheck; then
  {
    for c in V1 V2 D2 S1 S2 R1; do timeout 60 $bin/treeverify check --backend cuda-mma $c; done
    for args in "--heads 8 --tree 64 --prefix 777 --page 16 --shape bushy" \
      "--heads 8 --tree 17 --prefix 3000 --page 1 --dtype fp16" \
      "--heads 3 --tree 50 --prefix 20000 --page 1 --chunk-tokens 96" \
      "--heads 128 --tree 1 --prefix 5000 --page 64 --batch 3" \
      "--heads 1 --tree 1024 --prefix 100 --page 16 --shape deep" \
      "--heads 64 --tree 1 --prefix 0 --page 16" "--heads 16 --tree 5 --prefix 70000 --page 128"; do
      timeout 60 $bin/treeverify check --backend cuda-mma $args
    done
    # e4m3 caches in exact mode (the producer widens the codes)
    for c in V1 D2 S2; do timeout 60 $bin/treeverify check --backend cuda-mma --kv-format e4m3 $c; done
    for args in "--heads 8 --tree 17 --prefix 3000 --page 1 --dtype fp16" \
      "--heads 16 --tree 5 --prefix 70000 --page 128" "--heads 1 --tree 1024 --prefix 100 --page 16 --shape deep"; do
      timeout 60 $bin/treeverify check --backend cuda-mma --kv-format e4m3 $args
    done
    TREEVERIFY_TEST_OWN_TABLE_ONLY=1 timeout 200 $bin/treeverify_gpu_tests --gtest_brief=1 \
      --gtest_filter='GpuVerify.EveryVariant:GpuVerify.Fp16:GpuVerify.Deterministic:GpuVerify.StepDataFollowsThePlan:GpuVerify.GraphBringsItsOwnStepData:GpuVerify.WgmmaPagesHeadsAndChunks:GpuVerify.WgmmaTmaCopiesMatchCpAsync:GpuE4M3.WgmmaPagesHeadsAndChunks:GpuE4M3.OutlierChannels:GpuE4M3.NanCodeReachesOnlyTheRowsThatSeeIt'
  } >"$out/wgmma_check.txt" 2>&1
  grep -E "^case|kernel|PASS|FAIL|ERROR|rror|^\[  (PASSED|FAILED)" "$out/wgmma_check.txt" | cut -c1-220
fi
if want wgfast; then
  fast=(--backend cuda-mma --kv-format e4m3 --precision fast)
  if ! timeout 30 $bin/treeverify check "${fast[@]}" V2 >"$out/wgfast_first.txt" 2>&1; then
    echo "wgfast: the first check failed or hung (rc=$?); step stopped"; tail -5 "$out/wgfast_first.txt"
  else
    {
      for c in V1 V2 D2 S1 S2 R1; do timeout 60 $bin/treeverify check "${fast[@]}" $c; done
      for args in "--heads 8 --tree 64 --prefix 777 --page 16 --shape bushy" \
        "--heads 8 --tree 17 --prefix 3000 --page 1 --dtype fp16" \
        "--heads 3 --tree 50 --prefix 20000 --page 1 --chunk-tokens 96" \
        "--heads 128 --tree 1 --prefix 5000 --page 64 --batch 3" \
        "--heads 1 --tree 1024 --prefix 100 --page 16 --shape deep" \
        "--heads 64 --tree 1 --prefix 0 --page 16" "--heads 16 --tree 5 --prefix 70000 --page 128" \
        "--heads 8 --tree 16 --prefix 6000 --page 64 --chunk-tokens 64"; do
        timeout 60 $bin/treeverify check "${fast[@]}" $args
      done
      [ "${TV_WGFAST_TESTS:-1}" = 1 ] && TREEVERIFY_TEST_OWN_TABLE_ONLY=1 timeout 300 \
        $bin/treeverify_gpu_tests --gtest_brief=1 --gtest_filter='GpuFast.*:GpuVerify.*'
    } >"$out/wgfast_check.txt" 2>&1
    grep -E "^case|kernel|PASS|FAIL|ERROR|rror|^\[  (PASSED|FAILED)" "$out/wgfast_check.txt" | cut -c1-220
    if [ "${TV_WGFAST_BENCH:-1}" = 1 ]; then
      cases=(V1 V2 V3 V4 D2 S1 S2)
      for run in 1 2; do
        timeout 150 $bin/treeverify bench "${fast[@]}" "${cases[@]}" >"$out/bench_wgfast$run.txt" 2>&1
      done
      timeout 150 $bin/treeverify bench --backend cuda-mma --kv-format e4m3 "${cases[@]}" \
        >"$out/bench_wgfast_exact.txt" 2>&1
      timeout 150 $bin/treeverify bench --backend cuda-mma "${cases[@]}" >"$out/bench_wgfast_bf16.txt" 2>&1
      grep -h -E "^gpu|^(V|D|S)[0-9]|rror" "$out"/bench_wgfast*.txt
    fi
  fi
fi
if want wgmma; then
  cases=(V1 V2 V3 V4 D2 S1 S2 R1)
  for run in 1 2; do
    timeout 150 $bin/treeverify bench --backend cuda-mma "${cases[@]}" >"$out/bench_wgmma$run.txt" 2>&1
    timeout 150 $bin/treeverify bench --backend cuda-mma --kv-format e4m3 V1 V2 V3 V4 D1 D2 \
      >"$out/bench_wgmma_e4m3_$run.txt" 2>&1
  done
  # TV_WG_PORTABLE=0 leaves out the portable kernel's run, TV_WG_PROFILE=0 the ncu profiles.
  [ "${TV_WG_PORTABLE:-1}" = 1 ] && {
    timeout 150 $bin/treeverify bench --backend cuda-mma --config-arch 90 "${cases[@]}"
    timeout 150 $bin/treeverify bench --backend cuda-mma --config-arch 90 --kv-format e4m3 V1 V2 V3 V4 D1 D2
  } >"$out/bench_portable.txt" 2>&1
  # With .devpkg/bin/treeverify-base present (a baseline build), the same cases on it.
  [ -x $bin/treeverify-base ] && {
    timeout 150 $bin/treeverify-base bench --backend cuda-mma "${cases[@]}"
    timeout 150 $bin/treeverify-base bench --backend cuda-mma --kv-format e4m3 V1 V2 V3 V4 D1 D2
  } >"$out/bench_base.txt" 2>&1
  grep -h -E "^gpu|^(V|D|R|S)[0-9]|rror" "$out"/bench_wgmma?.txt "$out"/bench_wgmma_e4m3_?.txt \
    "$out"/bench_portable.txt "$out"/bench_base.txt 2>/dev/null
  [ "${TV_WG_PROFILE:-1}" = 1 ] && {
    echo "== wgmma V1"; KERNEL=verify_wgmma timeout 120 bench/tools/ncu_stalls.sh V1
    echo "== wgmma V4 at L 65536"
    KERNEL=verify_wgmma timeout 120 bench/tools/ncu_stalls.sh --heads 64 --tree 64 --prefix 65536 --page 64
  } >"$out/wgmma_profile.txt" 2>&1
  grep -E "^==|gmma_cycles|issue_active|duration|dram__throughput|hit_rate|stalled_(barrier|long|short|mio|math|wait)" "$out/wgmma_profile.txt" 2>/dev/null
fi
if want profile; then
  {
    echo "== V4 at L 65536"; bench/tools/ncu_stalls.sh --heads 64 --tree 64 --prefix 65536 --page 64
    echo "== V1 page 1"; bench/tools/ncu_stalls.sh V1
    echo "== V1 page 64"; bench/tools/ncu_stalls.sh --heads 8 --tree 16 --prefix 185000 --page 64
    echo "== D1 kernels of one call"
    ncu --clock-control none --launch-skip 3 --metrics gpu__time_duration.sum \
      $bin/treeverify bench --backend cuda-mma --iters 1 --warmup 1 D1 2>&1 |
      grep -E "\)x\(|gpu__time_duration"
  } >"$out/profile.txt" 2>&1
  timeout 100 $bin/treeverify bench --backend cuda-mma --config-arch 80 V1 V4 >"$out/bench_cfg80.txt" 2>&1
  grep -E "^gpu|^(V|D)" "$out/bench_cfg80.txt"
  grep -E "^==|tensor_op_hmma_cycles|issue_active|duration|dram__throughput|hit_rate|wavefronts|stalled_(barrier|long|short|mio|math|wait)" "$out/profile.txt"
fi
if want small; then
  {
    for run in 1 2; do
      timeout 120 $bin/treeverify bench --backend cuda-mma S1 S2 S3 S4 V1 D2 2>/dev/null
    done
    echo "== kernel durations (us)"
    timeout 200 bench/tools/kernel_times.sh S1 S2 S3 S4 V1 D2
    if [ -x $bin/treeverify-base ]; then
      echo "== baseline binary: S1 S2 S3 S4 V1 D2 as custom cases, then kernel durations (us)"
      base=(
        "--heads 8 --tree 16 --prefix 4096 --page 64" "--heads 16 --tree 32 --prefix 8192 --page 64"
        "--heads 8 --tree 1 --prefix 65536 --page 64" "--heads 8 --tree 1 --prefix 185000 --page 1"
        "--heads 8 --tree 16 --prefix 185000 --page 1" "--heads 128 --tree 1 --prefix 185000 --page 64")
      for c in "${base[@]}"; do
        timeout 60 $bin/treeverify-base bench --backend cuda-mma $c 2>/dev/null | grep -E "^custom"
        TV_BIN=$bin/treeverify-base timeout 60 bench/tools/kernel_times.sh $c
      done
    fi
  } >"$out/small.txt" 2>&1
  grep -E "^(S|V|D)[0-9]|^custom|^==|^gpu" "$out/small.txt"
fi
if want sweep; then
  {
    timeout 150 $bin/treeverify bench --backend cuda-mma --chunk-tokens 64,128,256,512,1024,4128 S1 S2 2>/dev/null
    timeout 150 $bin/treeverify bench --backend cuda-mma --chunk-tokens 128,256,512,1024,2048,8192 S3 S4 2>/dev/null
    echo "== kernel durations (us)"
    timeout 200 bench/tools/kernel_times.sh --chunk-tokens 64,128,256,512,1024,4128 S1 S2
    timeout 200 bench/tools/kernel_times.sh --chunk-tokens 128,256,512,1024,2048,8192 S3 S4
  } >"$out/sweep.txt" 2>&1
  grep -E "^(S|V|D)[0-9]|^==|^gpu" "$out/sweep.txt"
fi
if want e4m3; then
  timeout 200 $bin/treeverify bench --backend cuda-mma --kv-format e4m3 >"$out/bench_e4m3.txt" 2>&1
  grep -E "^gpu|^(V|D|R|S)[0-9]" "$out/bench_e4m3.txt"
fi
if want tma; then
  # TMA against cp.async in one binary, twice: the cases where plan() takes TMA, with and
  # without (--no-tma), and the 128-row ones where it does not, without and forced
  # (--force-tma); 16-bit caches and e4m3 (exact mode).
  for run in 1 2; do
    for kv in "" "--kv-format e4m3"; do
      for flags in "" "--no-tma" "--force-tma"; do
        cases="V2 V3 V4"
        [ "$flags" = "" ] && cases="V1 V2 V3 V4 D2"
        [ "$flags" = "--force-tma" ] && cases="D2"
        echo "== run $run ${kv:---kv-format 16-bit} ${flags:-(the plan decides)}"
        timeout 150 $bin/treeverify bench --backend cuda-mma $kv $flags $cases 2>&1 |
          tee -a "$out/bench_tma.txt" | grep -E "^(V|D)[0-9]|error|fail"
      done
    done
  done
fi
if want fast; then
  for mode in "--kv-format e4m3 --precision fast" "--kv-format e4m3" ""; do
    echo "== sm_120 table ${mode:-bf16}"
    timeout 100 $bin/treeverify bench --backend cuda-mma --config-arch 120 $mode V1 V3 D1 S3 2>&1 |
      tee -a "$out/bench_fast.txt" | grep -E "^gpu|^(V|D|S)[0-9]|error|fail"
  done
fi
if want flush; then
  for f in read write read write; do
    echo "== --flush $f"
    timeout 100 $bin/treeverify bench --backend cuda-mma --flush $f S1 S2 S3 S4 V1 D2 2>/dev/null
  done >"$out/flush.txt" 2>&1
  grep -E "^==|^gpu|^(V|D|S)[0-9]" "$out/flush.txt"
fi
if want l2; then
  for f in read write; do
    echo "== --flush $f"
    # shellcheck disable=SC2086  # L2_CASE is a word list
    timeout 200 ncu --clock-control none --cache-control none --replay-mode application \
      --kernel-name regex:"${KERNEL:-verify}" --launch-skip 2 --launch-count 1 --csv --print-units base \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,lts__t_sectors_op_write.sum,lts__t_sector_op_read_hit_rate.pct,lts__t_sector_op_write_hit_rate.pct \
      $bin/treeverify bench --backend cuda-mma --iters 1 --warmup 1 --flush $f ${L2_CASE:-S1} 2>&1 |
      python3 -c '
import csv, sys
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith("\""))]
h = rows[0] if rows else []
for r in rows[1:]:
    print(r[h.index("Kernel Name")].split("(")[0][:40], r[h.index("Metric Name")], r[h.index("Metric Value")])
'
  done >"$out/l2.txt" 2>&1
  cat "$out/l2.txt"
fi
if want layers; then
  timeout 200 $bin/treeverify bench --backend cuda-mma --layers 61 S1 S3 V1 D2 >"$out/layers.txt" 2>&1
  grep -E "^gpu|^(V|D|S)[0-9]|layers, one stream" "$out/layers.txt"
fi
if want ab; then
  base=${AB_BASE_BIN:-treeverify-base}
  if [ -x $bin/$base ]; then
    for run in $(seq "${AB_RUNS:-2}"); do
      # shellcheck disable=SC2086  # AB_VARIANTS is a word list
      for side in new base ${AB_VARIANTS:-}; do
        t=$side extra=
        [ $side = new ] && t=treeverify
        [ $side = base ] && t=$base extra=${AB_BASE_FLAGS:-}
        echo "== $t${extra:+($extra)} run $run"
        # shellcheck disable=SC2086  # AB_FLAGS, AB_BASE_FLAGS and AB_CASES are word lists
        timeout 150 $bin/$t bench --backend "${AB_BACKEND:-cuda-mma}" ${AB_FLAGS:-} $extra \
          ${AB_CASES:-S1 S2 S3 S4 V1 D1 D2} 2>&1
      done
    done >"$out/ab.txt"
    awk '/^== / { if (line) print line; line = $2 " run " $4 ":" }
         /^((V|D|S|R)[0-9]|custom)/ { line = line " " $1 " " $(NF-4) }
         END { if (line) print line }' "$out/ab.txt"
  else
    echo "ab: no $bin/$base (a baseline build, packaged beside this one)"
  fi
fi
if want sass; then
  # SASS_CASE: the bench case's flags instead of V4's shape at L = 65536; SASS_TAG: a suffix
  # for the files, so that two cases can be profiled in one call; SASS_INTERVAL: ncu's warp
  # sampling interval (0, the finest, for short kernels such as S1's).
  tag=${SASS_TAG:-}
  # shellcheck disable=SC2046  # the interval option is one word or none
  ncu --clock-control none --kernel-name regex:"${KERNEL:-verify_mma}" --launch-skip 2 --launch-count 1 \
    $([ -n "${SASS_INTERVAL:-}" ] && echo "--warp-sampling-interval $SASS_INTERVAL") --section WarpStateStats --section SourceCounters --export "$out/sass$tag" --force-overwrite \
    $bin/treeverify bench --backend cuda-mma --iters 1 --warmup 2 \
    ${SASS_CASE:---heads 64 --tree 64 --prefix 65536 --page 64} >"$out/sass_run$tag.log" 2>&1
  ncu --import "$out/sass$tag.ncu-rep" --page source --print-source sass --csv >"$out/sass$tag.csv" 2>&1
  rm -f "$out/sass$tag.ncu-rep"
  python3 bench/tools/sass_hotspots.py "$out/sass$tag.csv" 40 | tee "$out/sass_top$tag.txt"
  # The same samples summed by mbarrier wait (offsets: the kernel's shared-memory map) and opcode.
  python3 bench/tools/sass_hotspots.py --waits "$out/sass$tag.csv" 25 | tee "$out/sass_waits$tag.txt"
  # And by stall reason and 4 KB block of code (stall_no_inst: code fetched cold).
  python3 bench/tools/sass_hotspots.py --reasons "$out/sass$tag.csv" 12 | tee "$out/sass_reasons$tag.txt"
fi
