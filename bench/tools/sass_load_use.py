#!/usr/bin/env python3
"""How soon each load's result is used, in a kernel's SASS (`cuobjdump -sass` text), read
statically: for every shared-memory load (LDS, LDSM) and global load (LDG), the number of
instructions between it and the first instruction that reads one of its destination registers
in the straight-line code after it (a branch or the function's end stops the search: "past
branch"). A load used within a few instructions waits out its whole latency unless other warps
hide it; where the loads of a loop all write the same registers (each load after the previous
one's use), their latencies add up. That is what held fast mode's V transposition: each
ldmatrix came after the previous piece's stmatrix, because shared-memory asm statements keep
their order (docs/kernels/sm90-wgmma.md, "Fast mode"). Pair it with ncu's samples
(bench/tools/sass_hotspots.py): a short distance matters where the samples are.

The register reading is approximate: a data operand Rn of HMMA, QMMA or IMMA counts as
Rn..Rn+3; a wgmma's accumulator as many registers as its shape gives a thread (N / 2 in
fp32), its A operand from registers 4; of a .64, .WIDE or double instruction 2, of a .128
one 4; an address in brackets Rn (Rn..Rn+1 with .64). Where that guesses wide a use is
reported early; a form it does not know may hide a use.

Usage: sass_load_use.py SASS_TEXT [--function SUBSTRING] [--near N] [--top K]
  SASS_TEXT: cuobjdump -sass output (several functions: each is read on its own; --function
  keeps those whose name contains SUBSTRING). --near: the distance under which a load counts
  as used at once (default 4). --top: how many such loads to list (default 30).
Example:
  cuobjdump -sass build-dev/src/CMakeFiles/treeverify.dir/cuda/sm90/verify_wgmma.cu.o > /tmp/k.sass
  bench/tools/sass_load_use.py /tmp/k.sass --function Lb1ELb1ELb0E"""
import argparse
import re
import signal
import sys
from collections import Counter

INSN = re.compile(r"^\s+/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;")
FUNC = re.compile(r"^\s+Function : (\S+)")
REG = re.compile(r"(?<![A-Z_])R(\d+)\b")
ADDR = re.compile(r"(?<![A-Z_])R(\d+)(\.64)?")
GMMA_SHAPE = re.compile(r"GMMA\.64x(\d+)x\d+\.(F32|F16|S32)")
LOADS = ("LDS", "LDSM", "LDG")
# Opcodes whose first operand is read, not written.
NO_DEST = ("ST", "STS", "STSM", "STG", "STL", "RED", "BAR", "BRA", "BRX", "JMP", "JMX", "EXIT",
           "WARPSYNC", "MEMBAR", "FENCE", "DEPBAR", "NOP", "SYNCS", "WARPGROUP", "BSYNC", "BSSY",
           "CALL", "RET", "LDGDEPBAR", "ERRBAR", "CCTL", "UTMALDG", "UTMASTG", "UBLKCP", "LDGSTS")
STOPS = ("BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "CALL")
MMA = ("HMMA", "QMMA", "IMMA", "HGMMA", "QGMMA", "IGMMA")
DOUBLE = ("DADD", "DMUL", "DFMA", "DSETP", "DMNMX")


def spans(opcode: str, n_ops: int) -> list[int]:
    """Registers each data operand of this opcode spans (approximately; an address in
    brackets is handled by regs())."""
    base = opcode.split(".")[0]
    if base in ("HGMMA", "QGMMA", "IGMMA"):  # D (and C) from the shape, A from registers 4
        m = GMMA_SHAPE.search(opcode)
        acc = int(m.group(1)) // (4 if m and m.group(2) == "F16" else 2) if m else 128
        return [acc] + [4] * (n_ops - 2) + [acc]
    if base in MMA or ".128" in opcode or re.search(r"\.(M88|MT88)\.4", opcode):
        return [4] * n_ops
    if ".64" in opcode or ".WIDE" in opcode or base in DOUBLE or re.search(r"\.(M88|MT88)\.2", opcode):
        return [2] * n_ops
    return [1] * n_ops


def parse(text: str) -> dict[str, list[tuple[int, str, str, list[str]]]]:
    """Each function's instructions: (address, opcode, text, operands)."""
    funcs: dict[str, list] = {}
    current = None
    for line in text.splitlines():
        m = FUNC.match(line)
        if m:
            current = m.group(1)
            funcs[current] = []
            continue
        m = INSN.match(line)
        if not m or current is None:
            continue
        body = re.sub(r"^@!?U?P\w+\s+", "", m.group(2))
        opcode, _, rest = body.partition(" ")
        funcs[current].append((int(m.group(1), 16), opcode, m.group(2), [o.strip() for o in rest.split(",")]))
    return funcs


def regs(operand: str, span: int) -> set[int]:
    """The registers an operand names: an address in brackets is one register (two with .64),
    a data operand `span` of them."""
    out = set()
    if "[" in operand:
        for r, wide in ADDR.findall(operand):
            out.update(range(int(r), int(r) + (2 if wide else 1)))
        return out
    for r in REG.findall(operand):
        out.update(range(int(r), int(r) + span))
    return out


def distances(insns):
    """(address, load text, distance or None, what ended the search) for each load: the first
    read of any of its registers, or a branch, or every register overwritten unread."""
    out = []
    for i, (addr, opcode, text, ops) in enumerate(insns):
        if opcode.split(".")[0] not in LOADS or not ops or not REG.match(ops[0]):
            continue
        pending = regs(ops[0], spans(opcode, 1)[0])
        dist, user = None, "past branch"
        for j in range(i + 1, len(insns)):
            _, op2, text2, ops2 = insns[j]
            base2 = op2.split(".")[0]
            widths = spans(op2, len(ops2))
            written = base2 not in NO_DEST
            reads = list(zip(ops2, widths))
            if written and base2 not in MMA:
                reads = reads[1:]  # an MMA's accumulator is read too
            if any(regs(o, w) & pending for o, w in reads):
                dist, user = j - i - 1, text2
                break
            if base2 in STOPS:
                break
            if written and ops2:
                pending -= regs(ops2[0], widths[0])
                if not pending:
                    user = "overwritten unread"
                    break
        out.append((addr, text, dist, user))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("sass")
    ap.add_argument("--function", default="")
    ap.add_argument("--near", type=int, default=4)
    ap.add_argument("--top", type=int, default=30)
    a = ap.parse_args()
    funcs = {k: v for k, v in parse(open(a.sass).read()).items() if a.function in k}
    if not funcs:
        sys.exit("no function matches")
    for name, insns in funcs.items():
        d = distances(insns)
        buckets = Counter()
        for _, text, dist, user in d:
            kind = text.split()[1] if text.startswith("@") else text.split()[0]
            kind = kind.split(".")[0]
            b = user if dist is None else ("near" if dist < a.near else "far")
            buckets[kind, b] += 1
        print(f"{name}: {len(insns)} instructions, {len(d)} loads")
        for kind in LOADS:
            row = [f"{b} {buckets[kind, b]}" for b in ("near", "far", "past branch", "overwritten unread")
                   if buckets[kind, b]]
            if row:
                print(f"  {kind:5s} " + ", ".join(row) + f"   (near: used within {a.near} instructions)")
        shown = [x for x in d if x[2] is not None and x[2] < a.near][: a.top]
        for addr, text, dist, user in shown:
            print(f"  {addr:#07x} +{dist}  {text[:60]:60s} -> {user[:60]}")


if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # quiet under head
    main()
