"""torch with an e4m3 KV cache: float8_e4m3fn and uint8 caches against the PyTorch float64
reference on the dequantized cache, the scale as a per-layer device tensor (read by the
kernel, also inside a CUDA graph), the scale given to plan(), the errors, and the host KV
commit of a torch float8 cache. Skipped without torch; the GPU tests without a GPU or a CUDA
build."""
import numpy as np
import pytest

import treeverify as tv

torch = pytest.importorskip("torch")
from test_gpu_torch import META, check, make_case, torch_reference  # noqa: E402

needs_gpu = pytest.mark.skipif(
    not (torch.cuda.is_available() and tv.build_info()["cuda_compiled"]),
    reason="needs a CUDA device and a treeverify build with the CUDA backend")

SCALE = 0.0625  # a power of two: dequantized values are exact in bf16 and fp16


def e4m3_case(seed, prefix_lens, tree_sizes, num_heads, page_size, dtype=torch.bfloat16,
              scale=SCALE):
    """make_case with its cache as float8_e4m3fn (values / scale), and the reference case over
    the dequantized cache."""
    c = make_case(seed, prefix_lens, tree_sizes, num_heads, page_size, dtype)
    kv8 = (c["kv_cache"].float() / scale).to(torch.float8_e4m3fn)
    ref_case = dict(c, kv_cache=kv8.float() * scale)
    return dict(c, kv_cache=kv8), ref_case


def scale_tensor(value):
    return torch.tensor([value], dtype=torch.float32, device="cuda")


@needs_gpu
@pytest.mark.parametrize("page_size", [1, 64])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_e4m3_matches_torch_reference(page_size, dtype):
    c, ref_case = e4m3_case(page_size, [0, 300, 2049], [7, 1, 33], num_heads=16,
                            page_size=page_size, dtype=dtype)
    ref = torch_reference(ref_case)
    # float8_e4m3fn: kv_dtype inferred; the scale a device tensor.
    out, lse = tv.mla_verify(c["q"], c["kv_cache"], *(c[k] for k in META), c["softmax_scale"],
                             kv_scale=scale_tensor(SCALE))
    assert out.dtype == dtype
    check(out, lse, *ref)
    # uint8 bits with kv_dtype='e4m3', the scale a float (uploaded with mla_verify's plan).
    out, lse = tv.mla_verify(c["q"], c["kv_cache"].view(torch.uint8), *(c[k] for k in META),
                             c["softmax_scale"], kv_dtype="e4m3", kv_scale=SCALE)
    check(out, lse, *ref)


@needs_gpu
def test_e4m3_scale_tensors_in_a_cuda_graph():
    # An engine's loop: one plan, a scale tensor per layer; the graph reads the scales when it
    # replays, so new values need no recapture, and nothing reads them on the host.
    layers = 3
    c, _ = e4m3_case(3, [500, 70], [12, 5], num_heads=16, page_size=1)
    p = tv.plan(*(c[k] for k in META), num_heads=16, page_size=1,
                num_pages=c["kv_cache"].shape[0], dtype="bf16", softmax_scale=c["softmax_scale"],
                device="cuda:0", kv_dtype="e4m3")
    assert p.kv_dtype == "e4m3"
    kvs = [torch.zeros_like(c["kv_cache"]) for _ in range(layers)]
    scales = [scale_tensor(1.0) for _ in range(layers)]
    outs = [torch.empty(17, 16, 512, dtype=torch.bfloat16, device="cuda") for _ in range(layers)]
    lses = [torch.empty(17, 16, device="cuda") for _ in range(layers)]
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm-up outside capture
        for i in range(layers):
            p.run(c["q"], kvs[i], out=outs[i], lse=lses[i], kv_scale=scales[i])
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(layers):
            p.run(c["q"], kvs[i], out=outs[i], lse=lses[i], kv_scale=scales[i])
    for step in range(2):
        refs = []
        for i in range(layers):
            scale = 2.0 ** -(3 + i + step)  # a different scale per layer and per replay
            layer, ref_case = e4m3_case(10 * step + i, [500, 70], [12, 5], num_heads=16,
                                        page_size=1, scale=scale)
            kvs[i].copy_(layer["kv_cache"])
            scales[i].fill_(scale)
            # The plan's metadata and q, this layer's dequantized cache.
            refs.append(torch_reference(dict(c, kv_cache=ref_case["kv_cache"])))
        graph.replay()
        torch.cuda.synchronize()
        for i in range(layers):
            check(outs[i], lses[i], *refs[i])


@needs_gpu
def test_e4m3_plan_scale_travels_with_the_upload():
    c, ref_case = e4m3_case(4, [200, 9], [6, 4], num_heads=8, page_size=16)
    ref = torch_reference(ref_case)
    host = {k: c[k].cpu().numpy() for k in META}
    kw = dict(num_heads=8, page_size=16, num_pages=c["kv_cache"].shape[0], dtype="bf16",
              softmax_scale=c["softmax_scale"], device="cuda:0", kv_dtype="e4m3")
    tv.plan(*(host[k] for k in META), kv_scale=SCALE, **kw)  # warm the pools
    torch.cuda.synchronize()
    before = tv._ext._memory_stats()
    p = tv.plan(*(host[k] for k in META), kv_scale=SCALE, **kw)
    out, lse = p.run(c["q"], c["kv_cache"])
    check(out, lse, *ref)
    after = tv._ext._memory_stats()
    assert after["uploads"] - before["uploads"] == 1  # the index arrays and the scale together
    # A run's tensor overrides the plan's float.
    out, lse = p.run(c["q"], c["kv_cache"], kv_scale=scale_tensor(2 * SCALE))
    doubled = dict(ref_case, kv_cache=ref_case["kv_cache"] * 2)
    check(out, lse, *torch_reference(doubled))


@needs_gpu
def test_e4m3_errors_on_cuda_leave_outputs_untouched():
    c, _ = e4m3_case(5, [40, 3], [4, 3], num_heads=2, page_size=4)
    p = tv.plan(*(c[k] for k in META), num_heads=2, page_size=4,
                num_pages=c["kv_cache"].shape[0], dtype="bf16", softmax_scale=c["softmax_scale"],
                device="cuda:0", kv_dtype="e4m3")
    out = torch.full((7, 2, 512), 3.0, dtype=torch.bfloat16, device="cuda")
    lse = torch.full((7, 2), 5.0, device="cuda")

    def expect(exc, pattern, kv_cache=c["kv_cache"], **kw):
        with pytest.raises(exc, match=pattern):
            p.run(c["q"], kv_cache, out=out, lse=lse, **kw)
        torch.cuda.synchronize()
        assert (out == 3.0).all() and (lse == 5.0).all()

    expect(ValueError, r"argument 'kv_scale': missing")
    expect(TypeError, r"argument 'kv_scale': a Python float, but the plan runs on cuda:0",
           kv_scale=0.5)
    expect(ValueError, r"argument 'kv_scale': is on cpu", kv_scale=torch.tensor([0.5]))
    expect(TypeError, r"argument 'kv_scale': dtype float64, expected float32",
           kv_scale=torch.tensor([0.5], dtype=torch.float64, device="cuda"))
    expect(ValueError, r"argument 'kv_scale': shape \[2\]",
           kv_scale=torch.ones(2, device="cuda"))
    expect(ValueError, r"argument 'lse'.*kv_scale", kv_scale=lse.view(-1)[:1])
    expect(TypeError, r"argument 'kv_cache': dtype bfloat16, expected float8_e4m3fn",
           kv_cache=torch.zeros(c["kv_cache"].shape, dtype=torch.bfloat16, device="cuda"),
           kv_scale=scale_tensor(0.5))
    expect(TypeError, r"argument 'kv_cache': dtype float8_e5m2",
           kv_cache=c["kv_cache"].view(torch.uint8).view(torch.float8_e5m2),
           kv_scale=scale_tensor(0.5))


def test_commit_torch_float8_cache():
    # The host KV commit of a CPU float8_e4m3fn tensor: 576-byte rows, bit for bit.
    g = torch.Generator().manual_seed(0)
    kv = torch.randint(0, 256, (6, 4, 576), dtype=torch.uint8, generator=g)
    kv8 = kv.clone().view(torch.float8_e4m3fn)
    # One request: prefix 3, a root with children 1 and 2; accept 0 -> 2 (row 5 -> row 4).
    accepted = tv.AcceptedPaths(np.array([0, 2], np.int32), np.array([0, 2], np.int32),
                                np.array([9], np.int32))
    new_len = tv.commit_kv_paged(kv8, [0, 2], [4, 1], [6], [0, 3], [-1, 0, 0], accepted)
    assert list(new_len) == [5]
    expected = kv.clone()
    expected[1, 0] = kv[1, 1]  # position 4 = page 1 row 0; position 5 = page 1 row 1
    assert torch.equal(kv8.view(torch.uint8), expected)
    with pytest.raises(TypeError, match=r"argument 'kv_cache': dtype float8_e5m2"):
        tv.commit_kv_paged(kv8.view(torch.uint8).view(torch.float8_e5m2), [0, 2], [4, 1], [6],
                           [0, 3], [-1, 0, 0], accepted)
