#!/usr/bin/env python3
"""The SASS instructions of an `ncu --page source --print-source sass --csv` export with the
most warp-stall samples, with the stall reasons that make up each.
Usage: sass_hotspots.py SASS_CSV [N]"""
import csv
import sys


def main() -> None:
    path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 40
    with open(path, newline="") as f:
        lines = f.readlines()
    # ncu prints a few lines before the csv header; the header names the "Source" column.
    start = next(i for i, line in enumerate(lines) if '"Source"' in line or line.startswith("Address"))
    rows = list(csv.DictReader(lines[start:]))
    if not rows:
        sys.exit("no rows")
    cols = rows[0].keys()
    total_col = next(c for c in cols if c.startswith("Warp Stall Sampling (All"))
    reason_cols = [c for c in cols if c.startswith("stall_") or "Stall Reasons" in c]

    def num(v: str) -> float:
        try:
            return float(v.replace(",", ""))
        except ValueError:
            return 0.0

    total = sum(num(r[total_col]) for r in rows) or 1.0
    print(f"{len(rows)} instructions, {total:.0f} stall samples; top {n}:")
    for r in sorted(rows, key=lambda r: -num(r[total_col]))[:n]:
        reasons = sorted(((num(r[c]), c) for c in reason_cols), reverse=True)[:3]
        why = ", ".join(f"{c.replace('stall_', '')} {v:.0f}" for v, c in reasons if v > 0)
        addr = r.get("Address", "")
        print(f"{100 * num(r[total_col]) / total:5.1f}%  {addr:>6}  {r.get('Source', '')[:60]:60}  {why}")


if __name__ == "__main__":
    main()
