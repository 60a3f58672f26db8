#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/<target>/ (committed; scripts/fuzz.sh fuzzes a copy).

Each seed is the byte stream the target's decoder reads front to back (the comments in
fuzz/fuzz_<target>.cpp give the meaning of each byte; reads past the end give 0). The seeds are
small valid inputs, plus a few invalid ones, so that fuzzing starts on the deep paths (run(),
successful commits, full trees) instead of the first error. Re-run after changing a decoder:
    python3 fuzz/make_seeds.py
"""
import os
import struct
import sys


class Bytes:
    def __init__(self):
        self.b = bytearray()

    def u8(self, *vs):
        for v in vs:
            self.b += struct.pack("<B", v)
        return self

    def u16(self, v):
        self.b += struct.pack("<H", v)
        return self

    def u32(self, v):
        self.b += struct.pack("<I", v & 0xFFFFFFFF)
        return self

    def i32(self, v):
        self.b += struct.pack("<i", v)
        return self

    def u64(self, v):
        self.b += struct.pack("<Q", v)
        return self


NO_MUTATION = 0  # mutate_arrays: a count byte of 0


def set_entry(b, array, index, kind, raw=None):
    """One mutate_arrays "set" mutation: array index byte, op byte (< 224), u16 index, kind."""
    b.u8(array, 0).u16(index).u8(kind)
    if kind >= 192:
        b.i32(raw)
    elif kind >= 128:
        b.u8(raw)  # index into edge_i32's table
    return b


# ---- fuzz_plan --------------------------------------------------------------------------------

def plan_seed(batch, heads, page, dtype, kvfmt, scale, backend, threads, flags, bad, requests,
              pool=(0,), np_override=0, mutations=None, nulls=0, dmode=0, kv_scale=0,
              strides=(), specials=(), huge=()):
    """scale and pool are byte lists: a selector byte and what it makes the decoder read next;
    page a byte or such a list (200, 4 for 128); huge: what a nulls byte of 64..127 reads."""
    page = page if isinstance(page, tuple) else (page,)
    b = Bytes().u8(batch, heads, *page, dtype, kvfmt, *scale).u8(backend, threads, flags, bad)
    for t, l, extra, parents in requests:
        b.u8(t, l, extra, *parents)
    b.u8(*pool).u8(np_override)
    if mutations is None:
        b.u8(NO_MUTATION)
    else:
        b.u8(len(mutations))
        for m in mutations:
            set_entry(b, *m)
    b.u8(nulls, *huge)
    b.u64(0x243F6A8885A308D3).u8(dmode, kv_scale, *strides)
    b.u8(len(specials))
    for in_q, where, which in specials:
        b.u8(in_q).u32(where).u8(which)
    return b.b


def plan_seeds():
    two = [(3, 5, 0, [0, 1]), (2, 2, 1, [0])]  # trees of 3 (a chain) and 2 nodes
    s45 = (45,)  # softmax_scale 46/4096
    return {
        # cpu-reference, bf16, page 4, two requests
        "ref-bf16": plan_seed(2, 1, 2, 0, 0, s45, 0, 1, 0, 0, two),
        # cpu, fp16, padded q and out, round_p, 2 threads
        "fast-fp16-strided": plan_seed(2, 2, 2, 1, 0, s45, 1, 2, 1 | 8 | 16, 0, two,
                                       strides=(1, 2, 2, 1)),
        # 3 heads, q and out given their head strides only (token strides 0: H head strides),
        # then a head stride for q and a token stride alone for out (head stride 0)
        "fast-head-strides-only": plan_seed(2, 2, 2, 1, 0, s45, 1, 2, 8 | 16 | 32 | 64, 0, two,
                                            strides=(1, 2)),
        "ref-head-stride-q-token-stride-out": plan_seed(2, 2, 2, 0, 0, s45, 0, 1, 8 | 32 | 64, 0,
                                                        two, strides=(2, 1)),
        # auto through verify_cpu, e4m3 KV cache, page 1, no lse
        "auto-e4m3-verify-cpu": plan_seed(2, 0, 0, 0, 200, (30,), 2, 0, 2 | 4, 0, two,
                                          kv_scale=10),
        # NaN / inf injected into q and KV: rows that see them must be NaN
        "nonfinite": plan_seed(2, 1, 3, 0, 0, s45, 4, 1, 0, 0, two,
                               specials=((1, 600, 0), (0, 5000, 2), (0, 70000, 7))),
        # shared page ids from a pool of 3 pages, page 16, a wide star tree
        "shared-pages": plan_seed(1, 3, 4, 1, 0, (60,), 3, 1, 0, 0,
                                  [(6, 12, 2, [0, 0, 0, 0, 0])], pool=(200, 2, 0, 2, 1, 2)),
        # invalid tensors: null out; and kv_scale given for a 16-bit cache
        "bad-null-out": plan_seed(2, 1, 2, 0, 0, s45, 0, 1, 0, 160, two),
        "bad-kv-scale": plan_seed(2, 1, 2, 0, 0, s45, 1, 1, 0, 172, two),
        # an empty batch, and requests with no tree / no prefix
        "empty-batch": plan_seed(0, 0, 0, 0, 0, (10,), 0, 0, 0, 0, []),
        "no-tree": plan_seed(2, 0, 1, 0, 0, (10,), 1, 1, 0, 0, [(0, 4, 0, []), (1, 0, 0, [])]),
        # invalid problems: a parent after its child; NaN softmax_scale; cuda (unsupported)
        "bad-parent": plan_seed(2, 1, 2, 0, 0, s45, 0, 1, 0, 0, two,
                                mutations=[(4, 1, 192, 7)]),
        "nan-scale": plan_seed(2, 1, 2, 0, 0, (230, 0), 0, 1, 0, 0, two),
        "cuda": plan_seed(2, 1, 2, 0, 0, s45, 6, 1, 0, 0, two),
        # page 128, kv_len 2^31 - 1 over 2^24 entries of a one-page pool (valid: planned, not
        # run); then one entry short of it. Bytes after nulls 64: request, length pick, entry
        # count pick (exact, +1, -1), the page of every entry, overrides.
        "huge-kv-len": plan_seed(1, 1, (200, 4), 0, 0, s45, 1, 1, 0, 0, [(2, 3, 0, [0])],
                                 nulls=64, huge=(0, 0, 0, 0, 0)),
        "huge-one-entry-short": plan_seed(1, 1, (200, 4), 0, 0, s45, 1, 1, 0, 0,
                                          [(2, 3, 0, [0])], nulls=64, huge=(0, 3, 2, 0, 0)),
    }


# ---- fuzz_tree --------------------------------------------------------------------------------

def tree_seed(trees, prefixes, mask_mode=0, flips=(), raw_mask=b""):
    b = Bytes().u8(len(trees))
    for t, parents in trees:
        b.u8(t, *parents)
    b.u8(*prefixes)
    b.u8(NO_MUTATION)
    b.u8(mask_mode)
    if mask_mode < 128:
        b.u8(len(flips))
        for pos, which in flips:
            b.u16(pos).u8(which)
    else:
        b.u16(len(raw_mask))
        b.b += raw_mask
    b.u8(NO_MUTATION)
    return b.b


def tree_seeds():
    trees = [(5, [0, 0, 1, 1]), (3, [0, 1]), (1, [])]
    return {
        "three-trees": tree_seed(trees, [1, 0, 4]),
        # request 0 row 1 (mask positions 6..11) no longer sees itself
        "self-hidden": tree_seed(trees, [1, 0, 4], flips=((8, 0),)),
        # a visible entry stored as 2 (nonzero = true)
        "value-two": tree_seed(trees, [1, 0, 4], flips=((1, 2),)),
        "wide": tree_seed([(9, [0, 0, 0, 1, 1, 2, 2, 3])], [3]),
        "raw-mask": tree_seed([(2, [0])], [1], mask_mode=200, raw_mask=bytes([1, 1, 0, 1, 1, 1])),
        "no-requests": tree_seed([], []),
    }


# ---- fuzz_ddtree ------------------------------------------------------------------------------

def draft_bytes(depth, topk, root, steps, id_bytes=(0, 1), budget=8):
    """depth, top_k = 1 + topk; steps: one byte per candidate (log-prob decrement x/32, 240+:
    absent from there on in the row); id_bytes: base, stride-1 (distinct ids); budget - 1."""
    assert len(steps) == depth * (1 + topk)
    return bytes(Bytes().u8(depth, topk, root, 0, *steps).u8(0, *id_bytes).u8(0, budget).b)


def draft_nodes(depth, topk, steps, budget_byte):
    k = 1 + topk
    present = []
    for r in range(depth):
        n = 0
        for s in steps[r * k:(r + 1) * k]:
            if s >= 240:
                break
            n += 1
        present.append(n)
    prefixes, prod = 0, 1
    for n in present:
        prod *= n
        prefixes += prod
    return 1 + min(prefixes, budget_byte)  # budget = 1 + budget_byte


def ddtree_seed(drafts, vocab_byte=2, argmax_fn=lambda i: i % 4, prob_fn=None, scheme=0,
                raw_drafts=()):
    """drafts: (depth, topk, root, steps, budget_byte); the acceptance runs on the built trees."""
    b = Bytes().u8(len(drafts) + len(raw_drafts))
    nodes = 0
    for depth, topk, root, steps, budget in drafts:
        b.b += draft_bytes(depth, topk, root, steps, budget=budget)
        nodes += draft_nodes(depth, topk, steps, budget)
    for raw in raw_drafts:
        b.b += raw
    b.u8(0)  # budgets match the drafts
    b.u8(0)  # accept on the built batch
    V = 1 + vocab_byte % 8
    b.u8(vocab_byte, 1)  # remap tokens into [0, V)
    b.u8(*[argmax_fn(i) for i in range(nodes)])
    b.u8(0)  # argmax size matches
    cells = nodes * V
    if prob_fn is None:
        prob_fn = lambda i: (i * 7 + 3) % 16
    b.u8(*[prob_fn(i) for i in range(cells)])  # target
    b.u8(*[prob_fn(i + 5) for i in range(cells)])  # draft
    b.u8(0, scheme)
    b.u64(0x13198A2E03707344).u8(0)
    return b.b


def ddtree_seeds():
    d1 = (3, 2, 1, [4, 8, 12, 2, 30, 31, 0, 0, 1], 8)  # depth 3, top-3, budget 9
    d2 = (2, 1, 4, [16, 3, 250, 0], 3)  # depth 2, top-2, second row absent, budget 4
    d3 = (4, 0, 0, [1, 2, 3, 4], 4)  # a chain of 4, budget 5
    ties = (3, 2, 0, [0] * 9, 29)  # every log-prob 0: order by candidate indices alone
    # raw log-probs: -1/16, -3/16, NaN, -20/16 (invalid); raw token ids
    raw = bytes(Bytes().u8(2, 1, 0, 200, 0, 1, 0, 3, 130, 0, 0, 20).u8(200, 1, 1, 2, 3)
                .u8(0, 4).b)
    return {
        "greedy": ddtree_seed([d1, d2, d3], argmax_fn=lambda i: (i * 5) % 4),
        "sampling-deterministic": ddtree_seed([d1, d2], scheme=0),
        "sampling-with-replacement": ddtree_seed([d1, d3], scheme=1),
        "sampling-without-replacement": ddtree_seed([d2, d3], scheme=2),
        "ties": ddtree_seed([ties]),
        "raw-logprobs": ddtree_seed([], raw_drafts=[raw]),
        "no-drafts": ddtree_seed([]),
    }


# ---- fuzz_kv_commit ---------------------------------------------------------------------------

def commit_seed(page_byte, requests, shared_pages=None, slot_mode=0, cache_fix=(), fmt=(),
                huge=()):
    """requests: (T, parents, L, extra pages, walk bytes); shared_pages: None for fresh pages
    (shuffled), else (pool byte, id bytes...); fmt: the format byte and what it reads next
    (none: 16-bit rows, as a byte past the end reads 0); huge: the large-length byte (200+,
    page size 128 only) and what it reads next. page_byte 128 stands for page size 128 (byte
    200, then the pick of 128)."""
    ps = 128 if page_byte == 128 else 1 << (page_byte % 4)
    b = Bytes().u8(len(requests))
    b.u8(200, 4) if page_byte == 128 else b.u8(page_byte)
    pages = 0
    for t, parents, l, extra, walk in requests:
        b.u8(t, *parents).u8(l, extra)
        if t > 0:
            b.u8(*walk)
        pages += (l + t + ps - 1) // ps + extra
    if shared_pages is None:
        b.u8(0, 1)  # fresh pages, pool = pages + 1
        b.u8(*[(k * 5 + 3) % 256 for k in range(pages)])  # shuffle: pool - 1 bytes
    else:
        pool_byte, ids = shared_pages
        assert len(ids) == pages
        b.u8(200, pool_byte, *ids)
    b.u8(slot_mode)
    if slot_mode >= 160:
        b.u8(*[k % 5 for k in range(sum(r[0] + r[2] for r in requests))])
    b.u8(NO_MUTATION, NO_MUTATION)
    b.u8(*(cache_fix or (0,))).u64(0xA4093822299F31D0).u8(0)
    b.u8(*(fmt or ((0,) if huge else ())))
    b.u8(*huge)
    return b.b


def commit_seeds():
    # walk bytes: continue while byte % 4 != 0, then a child choice byte
    reqs = [(5, [0, 0, 1, 3], 3, 1, [1, 0, 1, 0, 1, 0, 0]),  # path 0-1-3-4
            (3, [0, 1], 6, 0, [1, 0, 0]),  # path 0-1
            (0, [], 4, 0, [])]  # no tree
    return {
        "page-4": commit_seed(2, reqs),
        "page-1": commit_seed(0, reqs),
        "page-8": commit_seed(3, reqs[:2]),
        # page 2, a pool of 8 pages with ids from the input: request 1 shares request 0's first
        # (prefix) page and its unused extra page; then also a page holding request 0's tree rows
        "shared-pages": commit_seed(1, reqs[:2], shared_pages=(7, [0, 1, 2, 3, 4, 0, 5, 6, 7, 4])),
        "shared-tree-row": commit_seed(1, reqs[:2],
                                       shared_pages=(7, [0, 1, 2, 3, 4, 0, 5, 6, 7, 3])),
        "shared-slots": commit_seed(0, reqs[:2], slot_mode=200),
        "cache-not-whole-pages": commit_seed(2, reqs[:1], cache_fix=(250, 0)),
        "empty": commit_seed(1, []),
        # e4m3 rows (format byte 96..223): 576-byte rows in kv_cache_e4m3
        "e4m3-page-4": commit_seed(2, reqs, fmt=(100,)),
        "e4m3-shared-pages": commit_seed(1, reqs[:2], fmt=(100,),
                                         shared_pages=(7, [0, 1, 2, 3, 4, 0, 5, 6, 7, 4])),
        # damaged pairings (224+): e4m3 with the pool in kv_cache; an unknown kv_format (2)
        "e4m3-pool-in-16-bit-span": commit_seed(2, reqs[:2], fmt=(224,)),
        "unknown-kv-format": commit_seed(2, reqs[:2], fmt=(227, 0, 1)),
    }


def commit_long_seeds():
    """fuzz_kv_commit_long: the large-length decoding (fuzz_kv_commit reads these bytes too,
    and ignores them), plus two of fuzz_kv_commit's seeds."""
    reqs = [(5, [0, 0, 1, 3], 3, 1, [1, 0, 1, 0, 1, 0, 0]), (3, [0, 1], 6, 0, [1, 0, 0])]
    huge_req = (3, [0, 0], 6, 0, [1, 1, 0])  # path 0-2
    return {
        "page-4": commit_seed(2, reqs),
        "shared-pages": commit_seed(1, reqs, shared_pages=(7, [0, 1, 2, 3, 4, 0, 5, 6, 7, 4])),
        # page 128, kv_len 2^31 - 1 over 2^24 entries of a pool of 2 pages: request 0's prefix
        # on page 0, its tree (T = 3, path 0-2: one row moves) on page 1; then the entry before
        # it on page 1 too, whose prefix rows are the tree's rows (invalid); then kv_len
        # 2^31 - 128 with a spare entry, in e4m3. Bytes: 200, request, length pick, spare,
        # default page, the entries holding the tree (ceil(T / 128) + 2), extra overrides.
        "huge-kv-len": commit_seed(128, [huge_req], huge=(200, 0, 0, 0, 0, 0, 0, 1, 0)),
        "huge-shared-tree-row": commit_seed(128, [huge_req], huge=(200, 0, 0, 0, 0, 0, 1, 1, 0)),
        "huge-e4m3-spare-entry": commit_seed(128, [huge_req], fmt=(100,),
                                             huge=(200, 0, 3, 1, 0, 0, 1, 0, 0)),
    }


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
    for target, seeds in (("fuzz_plan", plan_seeds()), ("fuzz_tree", tree_seeds()),
                          ("fuzz_ddtree", ddtree_seeds()), ("fuzz_kv_commit", commit_seeds()),
                          ("fuzz_kv_commit_long", commit_long_seeds())):
        d = os.path.join(root, target)
        os.makedirs(d, exist_ok=True)
        for name in os.listdir(d):
            os.remove(os.path.join(d, name))
        for name, data in seeds.items():
            with open(os.path.join(d, "seed-" + name), "wb") as f:
                f.write(data)
        print(f"{target}: {len(seeds)} seeds, {sum(len(v) for v in seeds.values())} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
