"""torch tensors on a GPU: agreement with a PyTorch float64 reference, streams, and a CUDA
graph of one plan run for many layers. Skipped without torch, a GPU, or a CUDA build."""
import numpy as np
import pytest

import treeverify as tv

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(
    not (torch.cuda.is_available() and tv.build_info()["cuda_compiled"]),
    reason="needs a CUDA device and a treeverify build with the CUDA backend")


def make_case(seed, prefix_lens, tree_sizes, num_heads, page_size, dtype=torch.bfloat16):
    g = np.random.default_rng(seed)
    B = len(prefix_lens)
    kv_len = [p + t for p, t in zip(prefix_lens, tree_sizes)]
    pages_per = [(n + page_size - 1) // page_size for n in kv_len]
    num_pages = sum(pages_per) + 5
    indices = g.permutation(num_pages)[: sum(pages_per)]
    parents = []
    for t in tree_sizes:
        parents += [-1] + [int(g.integers(0, i)) for i in range(1, t)] if t else []
    i32 = dict(dtype=torch.int32, device="cuda")
    total_q = sum(tree_sizes)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    return dict(
        q=torch.randn(total_q, num_heads, 576, generator=gen, device="cuda").to(dtype),
        kv_cache=torch.randn(num_pages, page_size, 576, generator=gen, device="cuda").to(dtype),
        kv_page_indptr=torch.tensor(np.concatenate([[0], np.cumsum(pages_per)]), **i32),
        kv_page_indices=torch.tensor(indices, **i32),
        kv_len=torch.tensor(kv_len, **i32),
        qo_indptr=torch.tensor(np.concatenate([[0], np.cumsum(tree_sizes)]), **i32),
        parents=torch.tensor(parents, **i32),
        softmax_scale=576 ** -0.5)


META = ("kv_page_indptr", "kv_page_indices", "kv_len", "qo_indptr", "parents")


def torch_reference(c):
    q, kv = c["q"].double(), c["kv_cache"].double()
    ps = kv.shape[1]
    meta = {k: c[k].cpu().tolist() for k in META}
    total_q, H = q.shape[:2]
    out = torch.zeros(total_q, H, 512, dtype=torch.float64, device=q.device)
    lse = torch.full((total_q, H), float("-inf"), dtype=torch.float64, device=q.device)
    for b, n in enumerate(meta["kv_len"]):
        first, last = meta["qo_indptr"][b], meta["qo_indptr"][b + 1]
        T, L = last - first, n - (last - first)
        pages = torch.tensor(meta["kv_page_indices"][meta["kv_page_indptr"][b]:], device=q.device)
        t = torch.arange(n, device=q.device)
        rows = kv[pages[t // ps].long(), t % ps]
        mask = torch.zeros(T, n, dtype=torch.bool, device=q.device)
        mask[:, :L] = True
        for i in range(T):
            j = i
            while j >= 0:
                mask[i, L + j] = True
                j = meta["parents"][first + j]
        s = c["softmax_scale"] * torch.einsum("thd,nd->thn", q[first:last], rows)
        s = s.masked_fill(~mask[:, None, :], float("-inf"))
        lse[first:last] = torch.logsumexp(s, -1)
        out[first:last] = torch.softmax(s, -1) @ rows[:, :512]
    return out, lse


def check(out, lse, ref_out, ref_lse):
    # docs/BENCH.md's bounds: relative Frobenius error of out < 1e-2 (bf16), lse absolute.
    rel = (out.double() - ref_out).norm() / ref_out.norm()
    assert rel < 1e-2, f"relative Frobenius error {rel:.3g}"
    assert not torch.isnan(out).any()
    assert (lse.double() - ref_lse).abs().max() < 1e-4


@pytest.mark.parametrize("page_size", [1, 16, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_matches_torch_reference(page_size, dtype):
    c = make_case(page_size, [0, 300, 2049], [7, 1, 33], num_heads=16, page_size=page_size,
                  dtype=dtype)
    out, lse = tv.mla_verify(c["q"], c["kv_cache"], *(c[k] for k in META), c["softmax_scale"])
    assert out.dtype == dtype and out.device == c["q"].device and lse.dtype == torch.float32
    check(out, lse, *torch_reference(c))


def test_explicit_stream_and_preallocated_outputs():
    c = make_case(1, [1000], [16], num_heads=8, page_size=1)
    p = tv.plan(*(c[k] for k in META), num_heads=8, page_size=1,
                num_pages=c["kv_cache"].shape[0], dtype=torch.bfloat16,
                softmax_scale=c["softmax_scale"], device="cuda")
    assert p.backend == "cuda" and p.device == "cuda:0"
    out = torch.full((16, 8, 512), float("nan"), dtype=torch.bfloat16, device="cuda")
    lse = torch.empty(16, 8, device="cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # default stream = torch's current one, i.e. `side`
        p.run(c["q"], c["kv_cache"], out=out, lse=lse)
    p.run(c["q"], c["kv_cache"], out=out, lse=lse, stream=side)  # explicit handle
    side.synchronize()
    check(out, lse, *torch_reference(c))


def test_cuda_graph_plan_once_run_many():
    layers = 4
    c = make_case(2, [500, 70], [12, 5], num_heads=16, page_size=1)
    p = tv.plan(*(c[k] for k in META), num_heads=16, page_size=1,
                num_pages=c["kv_cache"].shape[0], dtype="bf16", softmax_scale=c["softmax_scale"],
                device="cuda:0")
    qs = [torch.zeros_like(c["q"]) for _ in range(layers)]
    kvs = [torch.zeros_like(c["kv_cache"]) for _ in range(layers)]
    outs = [torch.empty(17, 16, 512, dtype=torch.bfloat16, device="cuda") for _ in range(layers)]
    lses = [torch.empty(17, 16, device="cuda") for _ in range(layers)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside capture (first launch sets kernel attributes)
        for i in range(layers):
            p.run(qs[i], kvs[i], out=outs[i], lse=lses[i])
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(layers):
            p.run(qs[i], kvs[i], out=outs[i], lse=lses[i])
    for step in range(2):  # new q and KV each replay, as a decode loop writes them
        refs = []
        for i in range(layers):
            layer = make_case(10 * step + i, [500, 70], [12, 5], num_heads=16, page_size=1)
            qs[i].copy_(layer["q"])
            kvs[i].copy_(layer["kv_cache"])
            refs.append(torch_reference(dict(c, q=qs[i].clone(), kv_cache=kvs[i].clone())))
        graph.replay()
        torch.cuda.synchronize()
        for i in range(layers):
            check(outs[i], lses[i], *refs[i])


def test_merge_state_cuda():
    g = torch.Generator(device="cuda").manual_seed(0)
    va, vb = (torch.randn(9, 16, 512, generator=g, device="cuda").bfloat16() for _ in range(2))
    sa, sb = (torch.randn(9, 16, generator=g, device="cuda") for _ in range(2))
    v, s = tv.merge_state(va, sa, vb, sb)
    ref_s = torch.logaddexp(sa, sb)
    ref_v = va.float() * (sa - ref_s).exp()[..., None] + vb.float() * (sb - ref_s).exp()[..., None]
    torch.testing.assert_close(s, ref_s)
    torch.testing.assert_close(v.float(), ref_v, atol=2e-2, rtol=2e-2)


def test_device_mismatch_is_an_error():
    c = make_case(3, [10], [3], num_heads=2, page_size=4)
    cpu_plan = tv.plan(*(c[k] for k in META), num_heads=2, page_size=4,
                       num_pages=c["kv_cache"].shape[0], dtype="bf16", softmax_scale=0.1)
    with pytest.raises(ValueError, match=r"argument 'q': is on cuda:0, expected cpu"):
        cpu_plan.run(c["q"], c["kv_cache"])
    gpu_plan = tv.plan(*(c[k] for k in META), num_heads=2, page_size=4,
                       num_pages=c["kv_cache"].shape[0], dtype="bf16", softmax_scale=0.1,
                       device="cuda")
    with pytest.raises(ValueError, match=r"argument 'q': is on cpu, expected cuda:0"):
        gpu_plan.run(c["q"].cpu(), c["kv_cache"])


def test_cpu_torch_tensors_use_the_cpu_backend():
    c = make_case(4, [40], [6], num_heads=2, page_size=8)
    cpu = {k: (v.cpu() if torch.is_tensor(v) else v) for k, v in c.items()}
    out, lse = tv.mla_verify(cpu["q"], cpu["kv_cache"], *(cpu[k] for k in META),
                             c["softmax_scale"])
    assert out.device.type == "cpu"
    ref_out, ref_lse = torch_reference(c)
    check(out, lse, ref_out.cpu(), ref_lse.cpu())


def test_dtype_mismatch_and_overlapping_outputs_are_refused():
    # Overlap is decided from the tensors' data pointers and strides: nothing is synchronized,
    # and nothing is written when the call is refused.
    c = make_case(5, [40], [6], num_heads=2, page_size=8, dtype=torch.float16)
    meta = [c[k] for k in META]
    kv, scale = c["kv_cache"], c["softmax_scale"]
    kv_before = kv.clone()
    out = torch.full((6, 2, 512), 7.0, dtype=torch.float16, device="cuda")
    lse = torch.full((6, 2), 5.0, device="cuda")
    with pytest.raises(TypeError, match=r"argument 'kv_cache': dtype bfloat16, expected fp16"):
        tv.mla_verify(c["q"], kv.bfloat16(), *meta, scale, out=out, lse=lse)
    with pytest.raises(ValueError, match=r"argument 'out': shares memory with kv_cache"):
        tv.mla_verify(c["q"], kv, *meta, scale, out=kv.view(-1)[: 6 * 2 * 512].view(6, 2, 512),
                      lse=lse)
    with pytest.raises(ValueError, match=r"argument 'lse': shares memory with out"):
        tv.mla_verify(c["q"], kv, *meta, scale, out=out,
                      lse=out.view(-1).view(torch.float32)[:12].view(6, 2))
    torch.cuda.synchronize()
    assert torch.equal(kv, kv_before) and (out == 7).all() and (lse == 5).all()
    va = torch.randn(5, 8, device="cuda").bfloat16()
    s = torch.zeros(5, device="cuda")
    va_before = va.clone()
    with pytest.raises(ValueError, match=r"argument 'v_merged': partly overlaps v_a"):
        tv.merge_state(va[:4], s[:4], va[1:], s[1:], v_merged=va[1:])
    torch.cuda.synchronize()
    assert torch.equal(va, va_before)


def host_copies(c):
    """The step's index arrays as an engine keeps them on the host (numpy, a list, a CPU
    tensor), made outside any measurement."""
    host = {k: c[k].cpu() for k in META}
    host["kv_len"] = host["kv_len"].numpy()
    host["qo_indptr"] = host["qo_indptr"].tolist()
    return host


def synchronizing_ops(fn):
    """(fn(), the number of synchronizing torch operations it made), by torch's sync debug
    mode (a device-to-host copy is one)."""
    import warnings
    previous = torch.cuda.get_sync_debug_mode()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = fn()
    finally:
        torch.cuda.set_sync_debug_mode(previous)
    return result, sum("synchronizing" in str(w.message) for w in caught)


def plan_for(c, arrays, **kw):
    return tv.plan(*(arrays[k] for k in META), num_heads=c["q"].shape[1],
                   page_size=c["kv_cache"].shape[1], num_pages=c["kv_cache"].shape[0],
                   dtype=c["q"].dtype, softmax_scale=c["softmax_scale"], device="cuda", **kw)


def outputs_for(c):
    total_q, H = c["q"].shape[:2]
    return (torch.empty(total_q, H, 512, dtype=c["q"].dtype, device="cuda"),
            torch.empty(total_q, H, device="cuda"))


def test_plan_copies_device_metadata_to_the_host_once():
    c = make_case(6, [300, 20, 0], [9, 4, 1], num_heads=4, page_size=16)
    _, n = synchronizing_ops(lambda: c["kv_len"].cpu())
    assert n == 1  # the count sees a device-to-host copy
    out, lse = outputs_for(c)
    _, n = synchronizing_ops(lambda: plan_for(c, c))  # all five on the GPU
    assert n == 1
    host = host_copies(c)
    p, n = synchronizing_ops(lambda: plan_for(c, host))
    assert n == 0
    _, n = synchronizing_ops(lambda: p.run(c["q"], c["kv_cache"], out=out, lse=lse))
    assert n == 0
    torch.cuda.synchronize()
    ref = torch_reference(c)
    check(out, lse, *ref)
    mixed = dict(host, kv_page_indices=c["kv_page_indices"], parents=c["parents"])
    out.zero_()
    _, n = synchronizing_ops(lambda: tv.mla_verify(c["q"], c["kv_cache"], *(mixed[k] for k in META),
                                                   c["softmax_scale"], out=out, lse=lse))
    assert n == 1
    torch.cuda.synchronize()
    check(out, lse, *ref)


def test_steps_reuse_memory_without_allocating_freeing_or_waiting():
    # An engine's loop: per step one plan from host metadata and a run per layer; the plan is
    # dropped when the step ends. Once warm, nothing is allocated, freed or waited for, and
    # every step runs on the one cached workspace of the stream.
    layers = 6
    steps = [make_case(40 + s, [700 + 150 * s, 90], [13, 6], num_heads=16, page_size=1)
             for s in range(3)]
    hosts = [host_copies(c) for c in steps]
    refs = [torch_reference(c) for c in steps]

    def step(i):
        p = plan_for(steps[i], hosts[i])
        out, lse = outputs_for(steps[i])
        for _ in range(layers):
            p.run(steps[i]["q"], steps[i]["kv_cache"], out=out, lse=lse)
        return p.workspace_bytes, out, lse

    for i in range(len(steps)):  # warm-up: the pool and the cache reach this loop's sizes
        step(i)
    torch.cuda.synchronize()
    before = tv._ext._memory_stats()
    stream = torch.cuda.current_stream().cuda_stream
    cached = [w for w in tv._ext._cached_workspaces() if w["stream"] == stream]
    assert len(cached) == 1
    for _ in range(2):
        for i in range(len(steps)):
            needed, out, lse = step(i)
            assert needed <= cached[0]["bytes"]
            torch.cuda.synchronize()  # as an engine reads the accepted tokens back
            check(out, lse, *refs[i])
        out, lse = tv.mla_verify(steps[0]["q"], steps[0]["kv_cache"],
                                 *(hosts[0][k] for k in META), steps[0]["softmax_scale"])
        torch.cuda.synchronize()
        check(out, lse, *refs[0])
    after = tv._ext._memory_stats()
    for key in ("device_allocs", "device_frees", "host_allocs", "host_frees", "host_waits",
                "stream_waits"):
        assert after[key] == before[key], key
    assert after["uploads"] - before["uploads"] == 2 * (len(steps) + 1)
    assert [w for w in tv._ext._cached_workspaces() if w["stream"] == stream] == cached


def test_run_on_another_stream_waits_for_the_upload():
    c = make_case(9, [800], [10], num_heads=8, page_size=1)
    torch.cuda.synchronize()
    before = tv._ext._memory_stats()["stream_waits"]
    p = plan_for(c, host_copies(c))  # uploads on the current stream
    out, lse = outputs_for(c)
    side = torch.cuda.Stream()
    for _ in range(3):
        p.run(c["q"], c["kv_cache"], out=out, lse=lse, stream=side)
    assert tv._ext._memory_stats()["stream_waits"] - before == 1  # the first run on `side`
    side.synchronize()
    check(out, lse, *torch_reference(c))


def test_graph_replay_and_eager_runs_on_one_stream_keep_their_masks():
    # A graph of plan p captured on stream s, eager runs of plan q on s before and after its
    # replay: each must see its own tree's ancestor mask.
    cp = make_case(11, [500, 70], [12, 5], num_heads=16, page_size=1)
    cq = make_case(12, [260], [15], num_heads=16, page_size=1)
    p, q = plan_for(cp, host_copies(cp)), plan_for(cq, host_copies(cq))
    out_p, lse_p = outputs_for(cp)
    out_q, lse_q = outputs_for(cq)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        p.run(cp["q"], cp["kv_cache"], out=out_p, lse=lse_p)  # warm-up, eager, on s
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=s):
        p.run(cp["q"], cp["kv_cache"], out=out_p, lse=lse_p)
    ref_p, ref_q = torch_reference(cp), torch_reference(cq)
    with torch.cuda.stream(s):
        q.run(cq["q"], cq["kv_cache"], out=out_q, lse=lse_q)
        out_p.zero_()
        graph.replay()
        out_q.zero_()
        q.run(cq["q"], cq["kv_cache"], out=out_q, lse=lse_q)
    torch.cuda.synchronize()
    check(out_p, lse_p, *ref_p)
    check(out_q, lse_q, *ref_q)


def test_graphs_captured_on_one_stream_each_rebuild_their_mask():
    # Graphs captured on one stream share its workspace: each must rebuild its own plan's
    # mask when replayed, even where the plan ran on that workspace before the capture. p is
    # captured with the plan (id and arrays) of its eager run on that workspace: only the
    # library's capture key (run() keys the step data on the capture) makes graph_p build it.
    cp = make_case(14, [300, 40], [12, 5], num_heads=16, page_size=1)
    cq = make_case(15, [180], [15], num_heads=16, page_size=1)
    p, q = plan_for(cp, host_copies(cp)), plan_for(cq, host_copies(cq))
    out_p, lse_p = outputs_for(cp)
    out_q, lse_q = outputs_for(cq)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        p.run(cp["q"], cp["kv_cache"], out=out_p, lse=lse_p)  # p's mask now in the workspace
    torch.cuda.current_stream().wait_stream(s)

    def workspace_of_s():
        return [w for w in tv._ext._cached_workspaces() if w["stream"] == s.cuda_stream]

    eager = workspace_of_s()
    graph_p, graph_q = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph_p, stream=s):
        p.run(cp["q"], cp["kv_cache"], out=out_p, lse=lse_p)
    shared = workspace_of_s()
    assert shared == eager  # the capture ran on the workspace that holds p's mask
    with torch.cuda.graph(graph_q, stream=s):
        q.run(cq["q"], cq["kv_cache"], out=out_q, lse=lse_q)
    assert workspace_of_s() == shared  # both graphs use the one workspace
    ref_p, ref_q = torch_reference(cp), torch_reference(cq)
    with torch.cuda.stream(s):
        out_p.zero_()
        out_q.zero_()
        graph_q.replay()  # leaves q's mask in the workspace
        graph_p.replay()
    torch.cuda.synchronize()
    check(out_p, lse_p, *ref_p)
    check(out_q, lse_q, *ref_q)


def test_plan_inside_a_graph_capture_is_refused():
    c = make_case(13, [40], [4], num_heads=2, page_size=4)
    host = host_copies(c)
    graph = torch.cuda.CUDAGraph()
    with pytest.raises(tv.Error, match=r"stream is being captured"):
        with torch.cuda.graph(graph):
            plan_for(c, host)
