#!/usr/bin/env python3
"""Summarises the wgmma kernel's timeline probe (an experiment build whose CTAs print
"tl bx by bz smid n_tiles t0 t1 t_tile0 t2 t3", %globaltimer ns): per launch (CTAs whose starts
lie within 50 us of the previous one), the CTA count, tiles a CTA, and over the CTAs the
median and max (us) of: start after the launch's first CTA, prologue (t1 - t0: metadata, Q,
its fp16 rescale), first tile (t_tile0 - t1: tile 0 waited for and scored), loop per later
tile, epilogue (t3 - t2: normalise, stores), and the launch's span (last t3 - first t0).
Usage: treeverify bench ... | scripts/wgmma_timeline.py"""
import statistics
import sys

rows = []
for line in sys.stdin:
    f = line.split()
    if len(f) == 11 and f[0] == "tl":
        rows.append([int(x) for x in f[1:]])
rows.sort(key=lambda r: r[5])
launches, cur = [], []
for r in rows:
    if cur and r[5] - cur[-1][5] > 50_000:
        launches.append(cur)
        cur = []
    cur.append(r)
if cur:
    launches.append(cur)


def stat(xs):
    return f"{statistics.median(xs) / 1e3:6.2f} {max(xs) / 1e3:6.2f}"


print("launch ctas tiles | start med max | prologue | first tile | per later tile | epilogue | span us")
for i, ls in enumerate(launches):
    t_first = min(r[5] for r in ls)
    tiles = [r[4] for r in ls]
    later = [(r[8] - r[7]) / (r[4] - 1) for r in ls if r[4] > 1]
    print(f"{i:3d} {len(ls):5d} {min(tiles)}-{max(tiles)} | {stat([r[5] - t_first for r in ls])} | "
          f"{stat([r[6] - r[5] for r in ls])} | {stat([r[7] - r[6] for r in ls])} | "
          f"{stat(later) if later else '-':>13} | {stat([r[9] - r[8] for r in ls])} | "
          f"{(max(r[9] for r in ls) - t_first) / 1e3:.2f}")
