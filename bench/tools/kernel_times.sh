#!/usr/bin/env bash
# On the device machine: the duration of every treeverify kernel (mask, verify, combine) in a
# `treeverify bench` run, measured by ncu with the kernels serialized, one line a launch:
#   kernel  grid  block  microseconds
# NCU_ARGS adds ncu options (e.g. "--cache-control none": ncu then keeps the caches warm
# between kernels, where by default it flushes them before each).
# Args: treeverify bench arguments (cases, flags). ITERS (default 2) timed runs follow WARMUP
# (default 1) warm-ups, so each case shows its check run (often a shorter prefix), then the
# warm-up (which builds the step's mask), then runs that launch only what every layer does.
set -uo pipefail
cd "$(dirname "$0")/../.."
bench/tools/device_unpack.sh
export LD_LIBRARY_PATH=$PWD/.devpkg/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
bin=${TV_BIN:-.devpkg/bin/treeverify}
ncu --clock-control none ${NCU_ARGS:-} --csv --print-units base --metrics gpu__time_duration.sum \
  --kernel-name regex:'verify|combine|tree_mask' \
  "$bin" bench --backend cuda --iters "${ITERS:-2}" --warmup "${WARMUP:-1}" "$@" 2>/dev/null |
  python3 -c '
import csv, sys
rows = [r for r in csv.reader(l for l in sys.stdin if l.startswith("\""))]
if not rows:
    sys.exit("no ncu rows")
h = rows[0]
k, g, b, v = (h.index(x) for x in ("Kernel Name", "Grid Size", "Block Size", "Metric Value"))
for r in rows[1:]:
    name = r[k].split("(")[0].split("<")[0].split("::")[-1].strip()
    print(f"{name:<26} {r[g]:>16} {r[b]:>14} {float(r[v].replace(",", "")) / 1e3:10.2f}")
'
