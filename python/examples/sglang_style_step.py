"""One speculative-decoding verify step the way an SGLang-style engine runs it.

  - a token-granular KV pool per layer (page_size 1) and a req_to_token table mapping each
    request's sequence positions to pool slots;
  - a DDTree draft tree per request, built from the drafter's per-depth top-K log-probs;
  - the tree tokens' KV written to fresh slots, then one plan and a verify run per layer;
  - greedy acceptance against the target's argmax (faked here: no model), and the commit,
    which rewrites the slot lists instead of moving KV (page_size 1).

  python sglang_style_step.py --device cpu     # numpy, CPU backend
  python sglang_style_step.py --device cuda    # torch tensors, CUDA backend
"""
import argparse
import time

import numpy as np

import treeverify as tv

QK = tv.QK_DIM


def bf16_bits(x):  # numpy has no bf16: the CPU path keeps bf16 as uint16 bits
    return (np.ascontiguousarray(x, np.float32).view(np.uint32) >> 16).astype(np.uint16)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--prefix", type=int, nargs="+", default=[1000, 257], help="L_b per request")
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--layers", type=int, default=3)
    ap.add_argument("--depth", type=int, default=6, help="draft depth L")
    ap.add_argument("--topk", type=int, default=4, help="candidates per depth K")
    ap.add_argument("--budget", type=int, default=32, help="tree nodes per request, root included")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    if args.device == "cuda":
        import torch
        assert torch.cuda.is_available(), "no CUDA device visible to torch"
    B, H, vocab = len(args.prefix), args.heads, 32000

    # ---- the engine's state before the step: KV pools, req_to_token, free slots ----------
    pool_size = sum(args.prefix) + B * args.budget + 64
    max_ctx = max(args.prefix) + args.budget
    free = list(rng.permutation(pool_size))  # slots are handed out in no particular order
    req_to_token = np.zeros((B, max_ctx), np.int32)
    seq_len = np.array(args.prefix, np.int32)
    for b in range(B):
        req_to_token[b, : seq_len[b]] = [free.pop() for _ in range(seq_len[b])]
    last_token = rng.integers(0, vocab, B)  # the previous step's bonus tokens: the tree roots

    def new_pool():  # [pool_size, page_size = 1, 576]; random = "already written" KV
        x = rng.standard_normal((pool_size, 1, QK), np.float32) * 0.5
        if args.device == "cuda":
            return torch.from_numpy(x).to("cuda", torch.bfloat16)
        return bf16_bits(x)
    kv_pools = [new_pool() for _ in range(args.layers)]

    # ---- draft: per-depth top-K log-probs -> DDTree ------------------------------------------
    drafts = []
    for b in range(B):
        logits = rng.standard_normal((args.depth, vocab), np.float32) * 3
        logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1, keepdims=True)) \
            - logits.max(1, keepdims=True)
        ids = np.argsort(-logp, axis=1)[:, : args.topk].astype(np.int32)
        drafts.append((np.take_along_axis(logp, ids, 1), ids, int(last_token[b])))
    trees = tv.build_trees(drafts, [args.budget] * B)
    qo_indptr, parents, tokens = trees.qo_indptr, trees.parents, trees.tokens
    T = np.diff(qo_indptr)

    # ---- allocate slots for the tree tokens, as the engine does before the forward pass ----
    for b in range(B):
        req_to_token[b, seq_len[b]: seq_len[b] + T[b]] = [free.pop() for _ in range(T[b])]
    kv_len = seq_len + T
    # page_size 1: the page table is the slot list itself (CSR over req_to_token rows).
    kv_page_indptr = np.concatenate([[0], np.cumsum(kv_len)]).astype(np.int32)
    kv_page_indices = np.concatenate([req_to_token[b, : kv_len[b]] for b in range(B)])
    positions = tv.tree_positions(qo_indptr, kv_len, parents)  # rope positions L_b + depth

    # ---- verify: plan once per step, run once per layer -----------------------------------
    t0 = time.perf_counter()
    plan = tv.plan(kv_page_indptr, kv_page_indices, kv_len, qo_indptr, parents, num_heads=H,
                   page_size=1, num_pages=pool_size, dtype="bf16", softmax_scale=QK ** -0.5,
                   device=args.device)
    total_q = int(qo_indptr[-1])
    for layer in range(args.layers):
        # the target model's layer computes q (absorbed, 576 wide) and writes the tree tokens'
        # KV at their slots; random stand-ins here
        x = rng.standard_normal((total_q, H, QK), np.float32) * 0.5
        q = torch.from_numpy(x).to("cuda", torch.bfloat16) if args.device == "cuda" else bf16_bits(x)
        out, lse = plan.run(q, kv_pools[layer])
    if args.device == "cuda":
        torch.cuda.synchronize()
    t_verify = time.perf_counter() - t0

    # check the last layer against the float64 oracle on the host
    to_np = (lambda t: t.view(torch.int16).cpu().numpy().view(np.uint16)) \
        if args.device == "cuda" else (lambda a: a)
    ref_out, _ = tv.mla_verify(to_np(q), to_np(kv_pools[-1]), kv_page_indptr, kv_page_indices,
                               kv_len, qo_indptr, parents, QK ** -0.5, dtype="bf16",
                               backend="cpu-reference")
    f32 = lambda bits: (bits.astype(np.uint32) << 16).view(np.float32)  # noqa: E731
    got, want = f32(to_np(out)), f32(ref_out)
    rel = np.linalg.norm(got - want) / np.linalg.norm(want)

    # ---- accept: the target's argmax at every node (fake: agrees with the drafter's best
    # child 80% of the time), greedy walk down the tree -------------------------------------
    target_argmax = rng.integers(0, vocab, total_q).astype(np.int32)
    for b in range(B):
        first = qo_indptr[b]
        for i in range(T[b]):
            children = [j for j in range(i + 1, T[b]) if parents[first + j] == i]
            if children and rng.random() < 0.8:
                target_argmax[first + i] = tokens[first + children[0]]
    accepted = tv.verify_greedy(qo_indptr, parents, tokens, target_argmax)

    # ---- commit: page_size 1 rewrites the slot lists; rejected slots go back to the pool ---
    slot_indptr = kv_page_indptr
    commit = tv.commit_slots(slot_indptr, kv_page_indices, kv_len, qo_indptr, parents, accepted)
    for b in range(B):
        s = commit.slots[commit.slot_indptr[b]: commit.slot_indptr[b + 1]]
        req_to_token[b, : len(s)] = s
    free.extend(commit.freed_slots.tolist())
    seq_len = commit.kv_len

    print(f"treeverify {tv.__version__}: {plan!r}")
    print(f"  kernel {plan.kernel}: {plan.reason}")
    print(f"  verify: {args.layers} layers in {t_verify * 1e3:.1f} ms (plan included); "
          f"last layer vs float64 oracle: relative Frobenius error {rel:.2e}")
    for b in range(B):
        path = accepted.nodes[accepted.indptr[b]: accepted.indptr[b + 1]]
        emitted = [int(t) for t in tokens[qo_indptr[b] + path[1:]]] + [int(accepted.bonus_tokens[b])]
        depth = positions[qo_indptr[b]: qo_indptr[b + 1]].max() - args.prefix[b]
        print(f"  request {b}: tree of {T[b]} nodes (max depth {depth}), accepted path "
              f"{path.tolist()} -> emits {len(emitted)} tokens {emitted}; "
              f"seq_len {args.prefix[b]} -> {seq_len[b]}")
    print(f"  slots freed: {len(commit.freed_slots)}, free pool now {len(free)} of {pool_size}")
    assert rel < 1e-2, "verify output disagrees with the oracle"


if __name__ == "__main__":
    main()
