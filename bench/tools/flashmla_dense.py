#!/usr/bin/env python3
"""FlashMLA's dense decode kernel on the suite's cases: the peer issue 13 measures against.

FlashMLA (github.com/deepseek-ai/FlashMLA) takes no tree mask and only 64-token pages, so it is
timed on the dense prefix of each case (cache_seqlens = L, causal=False, page size 64); a tree
would need a second kernel for the tail and an LSE merge on top. Its source is never part of
this repository: pass the path of a checkout with its cutlass submodule (`git clone
--recursive`), and --build to compile its dense decode path (sm_90a, four sources; its
setup.py would also build the sparse and sm_100 kernels) before the run.

Protocol (docs/BENCH.md): CUDA events around the call, median of --iters after 5 warm-ups, L2
emptied between calls by reading a buffer of 4x its size, as `treeverify bench --flush read`.
Before timing, each case's call is checked on a copy with a shorter prefix against a float32
PyTorch reference (relative Frobenius error of out under 1e-2), so a misused API cannot
produce a time. With --treeverify BIN, `BIN bench --backend cuda` runs the same cases after
it, in the same session, for the side-by-side table.

Usage: python3 bench/tools/flashmla_dense.py --flashmla PATH [--build] [--cases V1,V2,V3,V4,D1,D2]
           [--iters 30] [--page-order random|sequential] [--treeverify .devpkg/bin/treeverify]
           [--json FILE]
Written against FlashMLA 9241ae3 (whose get_mla_metadata takes no arguments; older
checkouts take cache_seqlens and return num_splits). Its current figures on the H200:
bench/results/h200.md.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys

import torch

from torch_reference import SCALE, SUITE

PAGE = 64  # the only page size FlashMLA's dense kernel takes
CHECK_L = 4096  # the prefix of the checked copy


# The sources of FlashMLA's dense decode path (FlashMLA 9241ae3's setup.py lists them with its
# sparse and sm_100 kernels, which this benchmark never calls and which take most of its build).
DENSE_SOURCES = [
    "csrc/smxx/decode/get_decoding_sched_meta/get_decoding_sched_meta.cu",
    "csrc/smxx/decode/combine/combine.cu",
    "csrc/sm90/decode/dense/instantiations/bf16.cu",
    "csrc/sm90/decode/dense/instantiations/fp16.cu",
]
# The binding of the one function flash_mla_with_kvcache calls for a dense 16-bit cache.
DENSE_API = """#include <pybind11/pybind11.h>
#include "dense_decode.h"
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("dense_decode_fwd", &dense_attn_decode_interface);
}
"""
# setup.py's nvcc flags for sm_90a (its ptxas warning flags left out).
NVCC_FLAGS = [
    "-O3", "-std=c++20", "-DNDEBUG", "-D_USE_MATH_DEFINES", "-Wno-deprecated-declarations",
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_HALF2_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
    "-gencode", "arch=compute_90a,code=sm_90a", "--threads", "4",
]


def build(checkout):
    """Builds the dense decode path of the checkout as `flash_mla.cuda` and registers it, so
    that the checkout's own Python interface (flash_mla_with_kvcache) calls it."""
    from torch.utils import cpp_extension

    build_dir = os.path.join(checkout, "build-dense")
    os.makedirs(build_dir, exist_ok=True)
    api = os.path.join(build_dir, "api_dense.cpp")
    with open(api, "w") as f:
        f.write(DENSE_API)
    csrc = os.path.join(checkout, "csrc")
    includes = [csrc, os.path.join(csrc, "api"), os.path.join(csrc, "kerutils", "include"),
                os.path.join(csrc, "sm90"), os.path.join(csrc, "cutlass", "include"),
                os.path.join(csrc, "cutlass", "tools", "util", "include")]
    # CUDA 13 keeps CCCL (cuda/std/..., which cutlass includes) under include/cccl, where nvcc
    # looks by itself and the host compiler of api_dense.cpp does not.
    cccl = os.path.join(cpp_extension.CUDA_HOME or "/usr/local/cuda", "include", "cccl")
    if os.path.isdir(cccl):
        includes.append(cccl)
    os.environ.setdefault("MAX_JOBS", str(os.cpu_count() or 4))
    module = cpp_extension.load(
        name="flash_mla_dense", sources=[api] + [os.path.join(checkout, s) for s in DENSE_SOURCES],
        extra_cflags=["-O3", "-std=c++20", "-DNDEBUG", "-Wno-deprecated-declarations"],
        extra_cuda_cflags=NVCC_FLAGS, extra_include_paths=includes, build_directory=build_dir,
        verbose=True)
    sys.modules["flash_mla.cuda"] = module


def make_inputs(h, t, l, batch, gen, page_order="random"):
    dev = torch.device("cuda")
    blocks = math.ceil(l / PAGE)
    q = (torch.randn(batch, t, h, 576, generator=gen) / 10).to(dev, torch.bfloat16)
    kv = (torch.randn(batch * blocks, PAGE, 1, 576, generator=gen) / 10).to(dev, torch.bfloat16)
    pages = (torch.randperm(batch * blocks, generator=gen) if page_order == "random"
             else torch.arange(batch * blocks))
    table = pages.to(torch.int32).view(batch, blocks)
    seqlens = torch.full((batch,), l, dtype=torch.int32)
    return q, kv, table.to(dev), seqlens.to(dev)


def reference(q, kv, table, l):
    """Dense attention in float32: out [batch, T, H, 512]."""
    outs = []
    for b in range(q.shape[0]):
        k = kv[table[b].long()].view(-1, 576)[:l].float()  # [L, 576]
        s = torch.einsum("thd,nd->thn", q[b].float(), k) * SCALE
        outs.append(torch.einsum("thn,nd->thd", torch.softmax(s, dim=-1), k[:, :512]))
    return torch.stack(outs)


def bench_case(flash_mla, name, iters, flush, page_order):
    h, t, l, batch = SUITE[name]
    gen = torch.Generator().manual_seed(1)

    def call(inputs, meta):
        q, kv, table, seqlens = inputs
        return flash_mla.flash_mla_with_kvcache(q, kv, table, seqlens, 512, meta, None,
                                                softmax_scale=SCALE, causal=False)

    small = make_inputs(h, t, min(l, CHECK_L), batch, gen)
    out, _ = call(small, flash_mla.get_mla_metadata()[0])
    ref = reference(small[0], small[1], small[2], min(l, CHECK_L))
    rel = float((out.float() - ref).norm() / ref.norm())
    if not rel < 1e-2:
        raise RuntimeError(f"{name}: FlashMLA's out is {rel:.2e} from the reference; not timed")
    del small

    inputs = make_inputs(h, t, l, batch, gen, page_order)
    meta = flash_mla.get_mla_metadata()[0]  # filled by the first call, reused (same shapes)
    for _ in range(5):
        flush.sum()
        call(inputs, meta)
    times = []
    for _ in range(iters):
        flush.sum()  # L2 holds clean lines of the buffer only
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        call(inputs, meta)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    ms = statistics.median(times)
    bytes_ = batch * l * 576 * 2
    flops = batch * 2.0 * t * h * l * (576 + 512)
    return {"case": name, "H": h, "T": t, "L": l, "batch": batch, "page": PAGE,
            "page_order": page_order, "ms": ms, "check_rel_fro": rel, "GBps": bytes_ / ms / 1e6,
            "TFLOPs": flops / ms / 1e9}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--flashmla", required=True, help="a FlashMLA checkout with its submodules")
    ap.add_argument("--build", action="store_true",
                    help="build its dense decode path first (sm_90a; without it, a checkout "
                         "built by its own setup.py)")
    ap.add_argument("--cases", default="V1,V2,V3,V4,D1,D2")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--treeverify", default=None, help="a treeverify binary to run beside it")
    ap.add_argument("--json", default=None)
    ap.add_argument("--page-order", choices=["random", "sequential"], default="random",
                    help="the block table: a random permutation of the pages (treeverify's "
                         "suite) or pages in order (to tell the page order's cost from other "
                         "causes of a difference)")
    args = ap.parse_args()
    checkout = os.path.abspath(args.flashmla)
    if args.build:
        build(checkout)
    sys.path.insert(0, checkout)
    import flash_mla  # noqa: E402 (from the checkout just built)

    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    flush = torch.empty(4 * l2 // 4, dtype=torch.float32, device="cuda").uniform_()
    print(f"FlashMLA ({checkout}) with torch {torch.__version__} on {torch.cuda.get_device_name()}; "
          f"dense prefix, page {PAGE} ({args.page_order} order), L2 emptied by reading "
          f"{4 * l2 >> 20} MiB between calls")
    rows = []
    for name in args.cases.split(","):
        r = bench_case(flash_mla, name, args.iters, flush, args.page_order)
        rows.append(r)
        print(f"flashmla {r['case']:3s} H={r['H']:<3d} T={r['T']:<4d} L={r['L']:<6d} "
              f"b={r['batch']:<2d} {r['ms']:9.4f} ms {r['GBps']:8.1f} GB/s "
              f"{r['TFLOPs']:7.1f} TFLOP/s (check {r['check_rel_fro']:.1e})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    if args.treeverify:
        subprocess.run([args.treeverify, "bench", "--backend", "cuda", *args.cases.split(",")],
                       check=True)


if __name__ == "__main__":
    main()
