"""Bad input raises a Python exception carrying the library's message, naming the argument;
nothing is written to the outputs of a failed call."""
import numpy as np
import pytest

import treeverify as tv
from reference import make_case

ARGS = ("kv_page_indptr", "kv_page_indices", "kv_len", "qo_indptr", "parents")


@pytest.fixture
def case():
    return make_case(np.random.default_rng(1), prefix_lens=[10, 4], tree_sizes=[4, 3],
                     num_heads=2, page_size=4)


def call(case, **override):
    c = dict(case, **override)
    return tv.mla_verify(c["q"], c["kv_cache"], *(c[a] for a in ARGS), c["softmax_scale"],
                         out=c.get("out"), lse=c.get("lse"), dtype=c.get("dtype_arg", "bf16"))


def test_wrong_dtype(case):
    with pytest.raises(TypeError, match=r"argument 'q': dtype float32, expected bf16"):
        call(case, q=case["q"].astype(np.float32))
    with pytest.raises(TypeError, match=r"argument 'kv_cache': dtype float16, expected bf16"):
        call(case, kv_cache=case["kv_cache"].astype(np.float16))
    with pytest.raises(TypeError, match=r"argument 'lse': dtype float64, expected float32"):
        call(case, lse=np.zeros((7, 2), np.float64))
    with pytest.raises(TypeError, match=r"uint16 arrays hold bf16 or fp16 bits"):
        call(case, dtype_arg=None)
    with pytest.raises(TypeError, match=r"argument 'parents'.*integer"):
        call(case, parents=case["parents"].astype(np.float32))


def test_non_contiguous(case):
    kv = np.asfortranarray(case["kv_cache"])
    with pytest.raises(ValueError, match=r"invalid argument: argument 'kv_cache': is not contiguous"):
        call(case, kv_cache=kv)
    q = np.ascontiguousarray(case["q"][:, :, ::-1])[:, :, ::-1]  # reversed last dimension
    with pytest.raises(ValueError, match=r"argument 'q': last dimension has stride -1"):
        call(case, q=q)
    q = np.broadcast_to(case["q"][:1], case["q"].shape)
    with pytest.raises(ValueError, match=r"argument 'q': stride 0 in dimension 0"):
        call(case, q=q)


def test_shape_mismatch(case):
    with pytest.raises(ValueError, match=r"argument 'out': shape \[7, 2, 576\], expected \[7, 2, 512\]"):
        call(case, out=np.zeros((7, 2, 576), np.uint16))
    with pytest.raises(ValueError, match=r"argument 'q': shape \[6, 2, 576\], expected \[7, 2, 576\]"):
        call(case, q=case["q"][:6])
    with pytest.raises(ValueError, match=r"argument 'parents': has 6 entries, but qo_indptr\[B\] = 7"):
        call(case, parents=case["parents"][:6])
    with pytest.raises(ValueError, match=r"argument 'kv_len': has 1 entries, expected B = 2"):
        call(case, kv_len=case["kv_len"][:1])


def test_bad_tree_and_metadata(case):
    parents = case["parents"].copy()
    parents[2] = 2  # a node that is its own parent
    with pytest.raises(ValueError, match=r"invalid argument: argument 'parents': request 0 node 2: "
                                         r"parent = 2"):
        call(case, parents=parents)
    indices = case["kv_page_indices"].copy()
    indices[-1] = case["kv_cache"].shape[0]
    with pytest.raises(ValueError, match=r"argument 'kv_page_indices': request 1"):
        call(case, kv_page_indices=indices)
    with pytest.raises(ValueError, match=r"argument 'kv_len': request 1: kv_len = 2 with tree size"):
        call(case, kv_len=[14, 2])
    with pytest.raises(ValueError, match=r"argument 'softmax_scale'"):
        call(case, softmax_scale=float("nan"))


def test_failed_call_writes_nothing(case):
    out = np.full((7, 2, 512), 0x7FC1, np.uint16)
    lse = np.full((7, 2), 5.0, np.float32)
    with pytest.raises(ValueError):
        call(case, out=out, lse=lse, kv_cache=case["kv_cache"][:, :2])
    assert (out == 0x7FC1).all() and (lse == 5.0).all()


def test_plan_errors(case):
    kw = dict(num_heads=2, page_size=4, num_pages=case["kv_cache"].shape[0], dtype="bf16",
              softmax_scale=0.1)
    meta = [case[a] for a in ARGS]
    with pytest.raises(ValueError, match=r"argument 'num_heads'"):
        tv.plan(*meta, **dict(kw, num_heads=0))
    with pytest.raises(ValueError, match=r"argument 'page_size'"):
        tv.plan(*meta, **dict(kw, page_size=3))
    with pytest.raises(ValueError, match=r"argument 'dtype': 'fp8'"):
        tv.plan(*meta, **dict(kw, dtype="fp8"))
    with pytest.raises(ValueError, match=r"unknown backend 'fast'"):
        tv.plan(*meta, **kw, backend="fast")
    with pytest.raises(ValueError, match=r"argument 'backend': 'cpu-fast' runs on the CPU"):
        tv.plan(*meta, **kw, device="cuda:0", backend="cpu-fast")
    p = tv.plan(*meta, **kw)
    with pytest.raises(ValueError, match=r"argument 'kv_cache': shape"):
        p.run(case["q"], case["kv_cache"][:1])


@pytest.mark.skipif(tv.build_info()["cuda_compiled"], reason="this build has CUDA")
def test_cuda_request_without_cuda_build(case):
    meta = [case[a] for a in ARGS]
    with pytest.raises(tv.Error, match=r"^unsupported: .*no CUDA backend"):
        tv.plan(*meta, num_heads=2, page_size=4, num_pages=case["kv_cache"].shape[0],
                dtype="bf16", softmax_scale=0.1, device="cuda")


def test_merge_state_errors():
    v = np.zeros((3, 2, 8), np.float16)
    s = np.zeros((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"argument 's_b': shape \[3\]"):
        tv.merge_state(v, s, v, s[:, 0])
    with pytest.raises(TypeError, match=r"argument 'v_b': dtype float32"):
        tv.merge_state(v, s, v.astype(np.float32), s)
    with pytest.raises(TypeError, match=r"argument 's_a': dtype float64"):
        tv.merge_state(v, s.astype(np.float64), v, s)
