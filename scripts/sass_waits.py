#!/usr/bin/env python3
"""Where the warps of a kernel wait, from an `ncu --page source --print-source sass --csv` export:
the warp-stall samples summed by mbarrier wait (a try-wait and the retry branch after it, keyed
by the mbarrier's shared-memory offset as the SASS names it: the kernel's map, e.g.
src/cuda/sm90/tile.h, says which barrier that is) and, for every other instruction, by opcode.
Usage: sass_waits.py SASS_CSV [N]   (N: rows to print, default 25)"""
import csv
import re
import sys

WAIT = re.compile(r"SYNCS\.PHASECHK\S*\s.*\[[^\]]*?(0x[0-9a-f]+)\]", re.IGNORECASE)


def num(v: str) -> float:
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return 0.0


def opcode(source: str) -> str:
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def main() -> None:
    path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    with open(path, newline="") as f:
        lines = f.readlines()
    start = next(i for i, line in enumerate(lines) if '"Source"' in line or line.startswith("Address"))
    rows = list(csv.DictReader(lines[start:]))
    if not rows:
        sys.exit("no rows")
    total_col = next(c for c in rows[0].keys() if c.startswith("Warp Stall Sampling (All"))
    sums: dict[str, float] = {}
    wait, after = None, 99  # the last try-wait's key, instructions since it
    for r in rows:  # address order
        source, samples = r.get("Source", ""), num(r[total_col])
        m = WAIT.search(source)
        if m:
            wait, after = f"mbarrier wait +{m.group(1)}", 0
            key = wait
        elif wait and after < 2 and opcode(source) == "BRA":
            key = wait  # the branch that retries the wait
        else:
            key = opcode(source)
        after += 1
        sums[key] = sums.get(key, 0.0) + samples
    total = sum(sums.values()) or 1.0
    print(f"{total:.0f} stall samples; by mbarrier wait and by opcode (top {n}):")
    for key, v in sorted(sums.items(), key=lambda kv: -kv[1])[:n]:
        print(f"  {key:<26} {v:9.0f} {100 * v / total:5.1f}%")


if __name__ == "__main__":
    main()
