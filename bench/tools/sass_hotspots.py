#!/usr/bin/env python3
"""Where a kernel's warps wait, from an `ncu --page source --print-source sass --csv` export.
Default: the SASS instructions with the most warp-stall samples, with the stall reasons that
make up each. --waits: the samples summed by mbarrier wait (a try-wait and the retry branch
after it, keyed by the mbarrier's shared-memory offset as the SASS names it: the kernel's map,
e.g. src/cuda/sm90/tile.h, says which barrier that is) and, for every other instruction, by
opcode. --reasons: the samples summed by stall reason, then by 4 KB block of the kernel's code
(256 instructions, in address order: instruction-fetch stalls, stall_no_inst, and instructions
executed), which says where code run once and fetched cold costs. --phases: the code between CTA barriers
as phases (a loop's softmax against its products, say): each one's samples, instructions
executed, mma instructions and top stall reasons.
Usage: sass_hotspots.py [--waits | --reasons | --phases] SASS_CSV [N]
       (N: rows; default 40, --waits and --reasons 25)"""
import csv
import re
import sys

TRY_WAIT = re.compile(r"SYNCS\.PHASECHK\S*\s.*\[[^\]]*?(0x[0-9a-f]+)\]", re.IGNORECASE)


def num(v: str) -> float:
    try:
        return float(v.replace(",", ""))
    except ValueError:
        return 0.0


def load(path: str) -> tuple[list[dict], str]:
    """The export's rows, in address order, and the name of its all-samples column."""
    with open(path, newline="") as f:
        lines = f.readlines()
    # ncu prints a few lines before the csv header; the header names the "Source" column.
    start = next(i for i, line in enumerate(lines) if '"Source"' in line or line.startswith("Address"))
    rows = list(csv.DictReader(lines[start:]))
    if not rows:
        sys.exit("no rows")
    return rows, next(c for c in rows[0].keys() if c.startswith("Warp Stall Sampling (All"))


def hotspots(rows: list[dict], total_col: str, n: int) -> None:
    reason_cols = [c for c in rows[0].keys() if c.startswith("stall_") or "Stall Reasons" in c]
    total = sum(num(r[total_col]) for r in rows) or 1.0
    print(f"{len(rows)} instructions, {total:.0f} stall samples; top {n}:")
    for r in sorted(rows, key=lambda r: -num(r[total_col]))[:n]:
        reasons = sorted(((num(r[c]), c) for c in reason_cols), reverse=True)[:3]
        why = ", ".join(f"{c.replace('stall_', '')} {v:.0f}" for v, c in reasons if v > 0)
        addr = r.get("Address", "")
        print(f"{100 * num(r[total_col]) / total:5.1f}%  {addr:>6}  {r.get('Source', '')[:60]:60}  {why}")


def opcode(source: str) -> str:
    words = source.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0].split(".")[0] if words else "?"


def waits(rows: list[dict], total_col: str, n: int) -> None:
    sums: dict[str, float] = {}
    wait, after = None, 99  # the last try-wait's key, instructions since it
    for r in rows:
        source, samples = r.get("Source", ""), num(r[total_col])
        m = TRY_WAIT.search(source)
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


def reasons(rows: list[dict], total_col: str, n: int) -> None:
    cols = [c for c in rows[0].keys() if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(num(r[total_col]) for r in rows) or 1.0
    print(f"{total:.0f} stall samples; by reason (top {n}):")
    sums = {c: sum(num(r[c]) for r in rows) for c in cols}
    for c, v in sorted(sums.items(), key=lambda kv: -kv[1])[:n]:
        if v > 0:
            print(f"  {c:<26} {v:9.0f} {100 * v / total:5.1f}%")
    print("4 KB block: stall_no_inst, all samples, instructions executed")
    for b in range(0, len(rows), 256):
        part = rows[b:b + 256]
        no_inst = sum(num(r.get("stall_no_inst", "0")) for r in part)
        executed = sum(num(r.get("Instructions Executed", "0")) for r in part)
        print(f"  {b // 256:3d} {no_inst:8.0f} {sum(num(r[total_col]) for r in part):9.0f} {executed:11.0f}")


def phases(rows: list[dict], total_col: str, n: int) -> None:
    """The code between CTA barriers (BAR.SYNC / BAR.ARV) as phases, in address order: each
    phase's share of the samples, warp instructions executed, mma instructions (static and
    executed) and its top stall reasons; phases under 0.5% of the samples are left out."""
    cols = [c for c in rows[0].keys() if c.startswith("stall_") and "Not Issued" not in c]
    total = sum(num(r[total_col]) for r in rows) or 1.0
    parts: list[list[dict]] = [[]]
    for r in rows:
        if re.search(r"\bBAR\.(SYNC|ARV)", r.get("Source", "")):
            parts.append([])
        parts[-1].append(r)
    print(f"{total:.0f} stall samples; by phase between CTA barriers:")
    print("  first          instrs  samples  executed  mma static (executed)  top reasons")
    for part in parts:
        samples = sum(num(r[total_col]) for r in part)
        if not part or samples < 0.005 * total:
            continue
        mma = [r for r in part if re.search(r"\b[HQ]MMA", r.get("Source", ""))]
        executed = sum(num(r.get("Instructions Executed", "0")) for r in part)
        mma_executed = sum(num(r.get("Instructions Executed", "0")) for r in mma)
        sums = sorted(((sum(num(r[c]) for r in part), c) for c in cols), reverse=True)[:4]
        why = ", ".join(f"{c.replace('stall_', '')} {100 * v / samples:.0f}%" for v, c in sums if v)
        print(f"  {part[0].get('Address', ''):>14} {len(part):6d} {100 * samples / total:7.1f}% "
              f"{executed / 1e6:8.2f}M {len(mma):5d} ({mma_executed / 1e6:.2f}M)  {why}")


def main() -> None:
    args = sys.argv[1:]
    mode = args[0] if args and args[0] in ("--waits", "--reasons", "--phases") else ""
    if mode:
        args = args[1:]
    rows, total_col = load(args[0])
    n = int(args[1]) if len(args) > 1 else (25 if mode else 40)
    {"--waits": waits, "--reasons": reasons, "--phases": phases}.get(mode, hotspots)(
        rows, total_col, n)


if __name__ == "__main__":
    main()
