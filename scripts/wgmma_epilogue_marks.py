#!/usr/bin/env python3
"""The wgmma epilogue's marks (probe build, with TV_TIMELINE=1): lines "tm cta n_tiles" + 5 globaltimer ns for
warpgroup 0, then 5 for warpgroup 1 (consume end, after sync 1, after sync 3, after the stores,
after the kernel's last consumer sync). Prints per launch the medians and maxima (us)."""
import statistics, sys
rows = []
for line in sys.stdin:
    f = line.split()
    if len(f) == 13 and f[0] == "tm":
        rows.append([int(x) for x in f[1:]])
rows.sort(key=lambda r: r[2])
launches, cur = [], []
for r in rows:
    if cur and r[2] - cur[-1][2] > 200_000:
        launches.append(cur); cur = []
    cur.append(r)
if cur: launches.append(cur)
def st(xs): return f"{statistics.median(xs)/1e3:6.2f} {max(xs)/1e3:6.2f}"
print("launch ctas | wg1 end - wg0 end | sync1 wg0 | sync1 wg1 | sync1->3 | stores wg0 | stores wg1 | last sync wg0 | wg1")
for i, ls in enumerate(launches):
    a = lambda g, k: [r[2 + 5 * g + k] for r in ls]
    d = lambda g1, k1, g0, k0: [x - y for x, y in zip(a(g1, k1), a(g0, k0))]
    print(f"{i:3d} {len(ls):4d} | {st(d(1,0,0,0))} | {st(d(0,1,0,0))} | {st(d(1,1,1,0))} | {st(d(0,2,0,1))} | "
          f"{st(d(0,3,0,2))} | {st(d(1,3,1,2))} | {st(d(0,4,0,3))} | {st(d(1,4,1,3))}")
