#!/usr/bin/env python3
"""The first-pair probe's records ("pr cta" + 3 groups x 12 slots, globaltimer ns; group 2 slot 9
= n_tiles): per launch, for the CTAs of each tile count, the median (us after the CTA's start) of
each mark."""
import statistics, sys
rows = []
for line in sys.stdin:
    f = line.split()
    if len(f) == 38 and f[0] == "pr":
        v = [int(x) for x in f[2:]]
        rows.append([v[0:12], v[12:24], v[24:36]])
rows.sort(key=lambda r: r[0][0])
launches, cur = [], []
for r in rows:
    if cur and r[0][0] - cur[-1][0][0] > 200_000:
        launches.append(cur); cur = []
    cur.append(r)
if cur: launches.append(cur)
names = {0: ["cta start", "Q ready", "tile 0 seen", "tile 1 seen", "other's P got", "own scored", "own P out", "loop end", "epilogue end", "softmax done", "P stored", "own P V done"],
         2: ["producer start", "tile 0 issued", "tile 1 issued", "all issued", "", "", "", "", "", "n_tiles", "", ""]}
for i, ls in enumerate(launches):
    t_first = min(r[0][0] for r in ls)
    print(f"== launch {i}: {len(ls)} CTAs, span {(max(r[0][8] for r in ls) - t_first)/1e3:.2f} us, start spread {statistics.median([r[0][0]-t_first for r in ls])/1e3:.2f} med")
    print(f"{'mark':<16} {'wg0':>7} {'wg1':>7} {'producer':>9}")
    for s in range(12):
        def med(g):
            if g == 2 and s >= 4: return "      -"
            xs = [r[g][s] - r[0][0] for r in ls if r[g][s] > 0]
            return f"{statistics.median(xs)/1e3:7.2f}" if xs else "      -"
        label = names[0][s] + (" / " + names[2][s] if names[2][s] else "")
        print(f"{label:<36} {med(0)} {med(1)} {med(2)}")
