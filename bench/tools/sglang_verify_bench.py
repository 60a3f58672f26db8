"""treeverify's SGLang backend where a user sees it: one TARGET_VERIFY step of an MLA model
through SGLang's own classes (its mock model runner, request pool, MLA KV pool, ForwardBatch,
EagleVerifyInput, RadixAttention layers), on a GPU.

Prints, for the shape given (default V1: H=8 heads, T=16 draft tokens, L=185000, page 1):
  - treeverify, eager: init_forward_metadata + forward_extend per layer (median per layer)
  - treeverify, graph: init_forward_metadata_out_graph, then a CUDA graph of in_graph and
    `layers` forward_extend calls replayed (median per step, and per layer)
  - the bare kernel: treeverify's host plan (tv.plan) run `layers` times in a graph
  - SGLang's triton backend, eager, per layer
  - replays with changing lengths checked against eager runs of the same step
  - host syncs (torch's sync debug mode set to "error" around out_graph + replay) and torch
    allocations across replays
Each layer reads its own KV cache (no L2 reuse across layers). Needs sglang >= 0.5.17 and
treeverify with CUDA. Usage: python3 bench/tools/sglang_verify_bench.py [--heads 8 --tree 16
--prefix 185000 --page 1 --layers 61 --dtype bf16]
"""
import argparse
import copy
import statistics
import sys
import time

import torch
import transformers

_register = transformers.AutoConfig.register  # sglang 0.5.17 re-registers 'qwen3_asr'
transformers.AutoConfig.register = lambda t, c, exist_ok=False: _register(t, c, exist_ok=True)

from sglang.srt.layers.attention.attention_registry import ATTENTION_BACKENDS  # noqa: E402
from sglang.srt.layers.radix_attention import RadixAttention  # noqa: E402
from sglang.srt.mem_cache.memory_pool import MLATokenToKVPool  # noqa: E402
from sglang.srt.model_executor.forward_batch_info import (  # noqa: E402
    CaptureHiddenMode, ForwardBatch, ForwardMode)
from sglang.srt.speculative.eagle_info import EagleVerifyInput  # noqa: E402
from sglang.test.kits.attention_unittest.attention_methods.mla_attention import (  # noqa: E402
    MLAAttentionCase, MockMLAModelRunner, TinyMLAModelConfig)

import treeverify as tv  # noqa: E402
import treeverify.sglang  # noqa: E402

SCALE = 0.1447


def events_ms(fn, iters):
    times = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def random_tree(T, gen):
    parents = [-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, T)]
    anc = torch.zeros(T, T, dtype=torch.bool)
    for i in range(T):
        a = i
        while a >= 0:
            anc[i, a] = True
            a = parents[a]
    return parents, anc


def setup(backend_name, args, dtype, prefix):
    H, T, P, L = args.heads, args.tree, args.page, prefix
    max_ctx = args.prefix + T + P
    case = MLAAttentionCase("bench", backend_name, ForwardMode.TARGET_VERIFY, H, P, (L,), (T,))
    cfg = TinyMLAModelConfig(num_heads=H, kv_lora_rank=512, qk_rope_head_dim=64,
                             hidden_size=1024, context_len=max_ctx)
    runner = MockMLAModelRunner(case=case, model_config=cfg, dtype=dtype, device="cuda",
                                max_context_len=max_ctx, kv_lora_rank=512, qk_rope_head_dim=64)
    pool = MLATokenToKVPool(size=P + max_ctx + P, page_size=P, dtype=dtype, kv_lora_rank=512,
                            qk_rope_head_dim=64, layer_num=args.layers, device="cuda",
                            enable_memory_saver=False)
    for layer in range(args.layers):
        pool.kv_buffer[layer].normal_()
    runner.token_to_kv_pool = pool
    backend = ATTENTION_BACKENDS[backend_name](runner)
    return runner, pool, backend


def make_batch(runner, args, prefix, anc, full_mask, slots, custom_mask):
    T = args.tree
    seq = torch.tensor([prefix], dtype=torch.int32, device="cuda")
    runner.req_to_token_pool.req_to_token[0, :prefix + T] = slots[:prefix + T]
    spec = EagleVerifyInput(
        draft_token=torch.zeros(T, dtype=torch.long, device="cuda"), custom_mask=custom_mask,
        positions=torch.arange(prefix, prefix + T, device="cuda"), retrieve_index=None,
        retrieve_next_token=None, retrieve_next_sibling=None, retrieve_cum_len=None,
        spec_steps=T - 1, topk=2, draft_token_num=T, capture_hidden_mode=CaptureHiddenMode.FULL,
        seq_lens_sum=prefix, seq_lens_cpu=seq.cpu())
    return ForwardBatch(
        forward_mode=ForwardMode.TARGET_VERIFY, batch_size=1, input_ids=spec.draft_token,
        req_pool_indices=torch.zeros(1, dtype=torch.int32, device="cuda"), seq_lens=seq,
        seq_lens_cpu=seq.cpu(), out_cache_loc=slots[prefix:prefix + T].to(torch.int64),
        seq_lens_sum=prefix, positions=spec.positions, spec_info=spec)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--heads", type=int, default=8)
    ap.add_argument("--tree", type=int, default=16)
    ap.add_argument("--prefix", type=int, default=185000)
    ap.add_argument("--page", type=int, default=1)
    ap.add_argument("--layers", type=int, default=61)
    ap.add_argument("--dtype", default="bf16")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    treeverify.sglang.register()
    gen = torch.Generator().manual_seed(7)
    H, T, L, P = args.heads, args.tree, args.prefix, args.page
    parents, anc = random_tree(T, gen)
    print(f"shape H={H} T={T} L={L} page={P} layers={args.layers} {args.dtype}; "
          f"device {torch.cuda.get_device_name()}")

    runner, pool, be = setup("treeverify", args, dtype, L)
    n_slots = (L + T + P - 1) // P * P
    slots = (torch.randperm(n_slots, device="cuda") + P).to(torch.int32)  # slot 0..P-1: padding
    if P > 1:  # whole pages: a permutation of pages
        pages = torch.randperm(n_slots // P, device="cuda") + 1
        slots = (pages[:, None] * P + torch.arange(P, device="cuda")).reshape(-1).to(torch.int32)
    mask = be.verify_mask.buffer
    mask[:T * T].copy_(anc.reshape(-1))
    fb = make_batch(runner, args, L, anc, None, slots, mask[:T * T])
    layers = [RadixAttention(H, 576, SCALE, 1, i, v_head_dim=512) for i in range(args.layers)]
    q = torch.randn(T, H, 576, dtype=dtype, device="cuda")

    # Eager: metadata once, every layer.
    def eager_step():
        be.init_forward_metadata(fb)
        return [be.forward_extend(q, None, None, layer, fb, save_kv_cache=False)
                for layer in layers]
    eager_step()
    eager = events_ms(eager_step, args.iters)
    print(f"treeverify eager: {eager:.3f} ms a step, {eager / args.layers:.4f} ms a layer")

    # Graph: out_graph before capture, in_graph + every layer captured.
    be.init_forward_metadata_out_graph(fb, in_capture=True)
    outs = [torch.empty(T, H * 512, dtype=dtype, device="cuda") for _ in layers]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):  # warm-up, as SGLang's runner does
            be.init_forward_metadata_in_graph(fb)
            for layer, o in zip(layers, outs):
                o.copy_(be.forward_extend(q, None, None, layer, fb, save_kv_cache=False))
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        be.init_forward_metadata_in_graph(fb)
        for layer, o in zip(layers, outs):
            o.copy_(be.forward_extend(q, None, None, layer, fb, save_kv_cache=False))

    def replay():
        be.init_forward_metadata_out_graph(fb)
        graph.replay()
    replay()
    step = events_ms(replay, args.iters)
    print(f"treeverify graph: {step:.3f} ms a step, {step / args.layers:.4f} ms a layer "
          f"(out_graph + replay)")

    # Zero host syncs across out_graph + replay; zero torch allocations across replays.
    torch.cuda.synchronize()
    allocs = torch.cuda.memory_stats()["allocation.all.allocated"]
    torch.cuda.set_sync_debug_mode("error")
    try:
        for _ in range(3):
            replay()
        syncs = "none (torch sync debug mode 'error')"
    except RuntimeError as e:
        syncs = f"SYNC: {e}"
    finally:
        torch.cuda.set_sync_debug_mode("default")
    torch.cuda.synchronize()
    new_allocs = torch.cuda.memory_stats()["allocation.all.allocated"] - allocs
    print(f"host syncs in 3 steps: {syncs}; torch allocations: {new_allocs}")

    # Replays with changing lengths and trees against eager runs of the same step.
    worst = 0.0
    for prefix in (L // 3, 17, L):
        _, anc2 = random_tree(T, gen)
        fb.seq_lens.fill_(prefix)
        runner.req_to_token_pool.req_to_token[0, :prefix + T] = slots[:prefix + T]
        mask[:T * T].copy_(anc2.reshape(-1))
        replay()
        torch.cuda.synchronize()
        got = [o.clone() for o in outs[:3]]
        be.init_forward_metadata(fb)
        want = [be.forward_extend(q, None, None, layer, fb, save_kv_cache=False)
                for layer in layers[:3]]
        for g, w in zip(got, want):
            worst = max(worst, float((g.float() - w.float()).norm() / w.float().norm()))
    fb.seq_lens.fill_(L)
    mask[:T * T].copy_(anc.reshape(-1))
    print(f"replays with new lengths and trees vs eager: worst relative difference {worst:.2e}")

    # The bare kernel: the host plan, `layers` runs in a graph.
    kv_len = [L + T]
    pages = runner.req_to_token_pool.req_to_token[0, :L + T:P].cpu() // P
    p = tv.plan([0, len(pages)], pages.numpy(), kv_len, [0, T], parents, H, P,
                pool.kv_buffer[0].shape[0] // P, args.dtype, SCALE, device="cuda")
    kvs = [pool.kv_buffer[i].view(-1, P, 576) for i in range(args.layers)]
    q3 = q.contiguous()
    bare_out = torch.empty(T, H, 512, dtype=dtype, device="cuda")
    lse = torch.empty(T, H, dtype=torch.float32, device="cuda")
    p.run(q3, kvs[0], out=bare_out, lse=lse)
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        for kv in kvs:
            p.run(q3, kv, out=bare_out, lse=lse)
    g2.replay()
    replay()  # the backend's graph at the same step: its last layer read the same KV cache
    torch.cuda.synchronize()
    diff = float((outs[-1].float().reshape(T, H, 512) - bare_out.float()).norm() /
                 bare_out.float().norm())
    print(f"backend graph vs bare kernel, last layer: relative difference {diff:.2e}")
    bare = events_ms(g2.replay, args.iters)
    print(f"bare kernel ({p.kernel}): {bare:.3f} ms for {args.layers} layers, "
          f"{bare / args.layers:.4f} ms a layer; the backend in its graph: "
          f"{step / bare:.3f}x the bare kernel")
    del graph, g2, be, pool, runner
    torch.cuda.empty_cache()

    # SGLang's triton backend, eager, one layer (it reads a FULL_MASK).
    try:
        runner_t, pool_t, tb = setup("triton", argparse.Namespace(**{**vars(args), "layers": 1}),
                                     dtype, L)
        full = torch.ones(T, L + T, dtype=torch.bool, device="cuda")
        full[:, L:] = anc.cuda()
        fbt = make_batch(runner_t, args, L, anc, full, slots, full.reshape(-1))
        tb.init_forward_metadata(fbt)
        layer0 = RadixAttention(H, 576, SCALE, 1, 0, v_head_dim=512)
        tb.forward_extend(q.reshape(T, H * 576), None, None, layer0, fbt, save_kv_cache=False)
        tri = events_ms(lambda: tb.forward_extend(q.reshape(T, H * 576), None, None, layer0, fbt,
                                                  save_kv_cache=False), 5)
        print(f"triton backend, eager: {tri:.3f} ms a layer; treeverify in its graph is "
              f"{tri / (step / args.layers):.1f}x faster")
    except Exception as e:  # noqa: BLE001
        print(f"triton backend: not run ({type(e).__name__}: {e})")


if __name__ == "__main__":
    sys.exit(main())
