#!/usr/bin/env python3
"""PyTorch naive MLA tree verify, the side-by-side reference for `treeverify bench` on a GPU.

The same algorithm as docs/BENCH.md's "PyTorch naive" anchor: contiguous KV (no paging, so it is
given an advantage), scores = q . k^T in bf16 matmuls with fp32 softmax over the prefix plus
the tree with its ancestor mask, out = p . v. Times with CUDA events, median of N runs,
rotating through several KV copies so nothing is served from L2. Prints one line per case.

Usage: python3 bench/tools/torch_reference.py [--cases V1,V2] [--iters 20] [--json FILE]
"""
import argparse
import json
import math
import statistics

import torch

SUITE = {  # name: (H, T, L, batch)  -- docs/BENCH.md's verify suite (R1 is ragged: not here)
    "V1": (8, 16, 185000, 1),
    "V2": (8, 64, 185000, 1),
    "V3": (16, 256, 65536, 1),
    "V4": (64, 64, 185000, 1),
    "D1": (16, 1, 8192, 64),
    "D2": (128, 1, 185000, 1),
    "S1": (8, 16, 4096, 1),  # the small-work cases (issue 14)
    "S2": (16, 32, 8192, 1),
    "S3": (8, 1, 65536, 1),
    "S4": (8, 1, 185000, 1),
}
SCALE = 0.1447


def random_parents(t, gen):
    parents = [-1]
    for i in range(1, t):
        parents.append(int(torch.randint(0, i, (1,), generator=gen)))
    return parents


def ancestor_mask(parents, device):
    t = len(parents)
    m = torch.zeros(t, t, dtype=torch.bool)
    for i in range(t):
        j = i
        while j >= 0:
            m[i, j] = True
            j = parents[j]
    return m.to(device)


def naive_verify(q, kv, tree_mask, prefix):
    """q [T, H, 576], kv [L+T, 576] -> out [T, H, 512], lse [T, H] (natural log)."""
    t, h, _ = q.shape
    s = torch.einsum("thd,nd->thn", q, kv).float() * SCALE  # [T, H, L+T]
    visible = torch.ones(t, kv.shape[0], dtype=torch.bool, device=q.device)
    visible[:, prefix:] = tree_mask
    s = s.masked_fill(~visible[:, None, :], float("-inf"))
    lse = torch.logsumexp(s, dim=-1)
    p = torch.exp(s - lse[..., None]).to(q.dtype)
    out = torch.einsum("thn,nd->thd", p, kv[:, :512])
    return out, lse


def bench_case(name, iters, copies_bytes=1 << 30):
    h, t, l, batch = SUITE[name]
    dev = torch.device("cuda")
    gen = torch.Generator().manual_seed(1)
    parents = random_parents(t, gen)
    mask = ancestor_mask(parents, dev)
    kv_bytes = (l + t) * 576 * 2 * batch
    copies = max(2, min(8, math.ceil(copies_bytes / max(kv_bytes, 1))))
    sets = []
    for _ in range(copies):
        qs = [torch.randn(t, h, 576, device=dev, dtype=torch.bfloat16) for _ in range(batch)]
        kvs = [torch.randn(l + t, 576, device=dev, dtype=torch.bfloat16) for _ in range(batch)]
        sets.append((qs, kvs))

    def call(i):
        qs, kvs = sets[i % copies]
        for b in range(batch):
            naive_verify(qs[b], kvs[b], mask, l)

    for i in range(3):
        call(i)
    torch.cuda.synchronize()
    times = []
    for i in range(iters):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call(i)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    ms = statistics.median(times)
    bytes_ = batch * (l + t) * 576 * 2
    flops = batch * 2.0 * t * h * (l + t) * (576 + 512)
    del sets
    torch.cuda.empty_cache()
    return {"case": name, "H": h, "T": t, "L": l, "batch": batch, "ms": ms,
            "GBps": bytes_ / ms / 1e6, "TFLOPs": flops / ms / 1e9}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cases", default="V1,V2,V3,V4,D1,D2")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    rows = []
    for name in args.cases.split(","):
        r = bench_case(name, args.iters)
        rows.append(r)
        print(f"torch-naive {r['case']:3s} H={r['H']:<3d} T={r['T']:<4d} L={r['L']:<6d} "
              f"b={r['batch']:<2d} {r['ms']:9.4f} ms {r['GBps']:8.1f} GB/s {r['TFLOPs']:7.1f} TFLOP/s",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
