"""mla_verify / Plan on numpy arrays (CPU backends) against the float64 numpy reference and
against the C++ oracle (backend='cpu-reference')."""
import numpy as np
import pytest

import treeverify as tv
from reference import assert_close, make_case, reference, to_float

ARGS = ("kv_page_indptr", "kv_page_indices", "kv_len", "qo_indptr", "parents")


def verify(case, **kw):
    return tv.mla_verify(case["q"], case["kv_cache"], *(case[a] for a in ARGS),
                         case["softmax_scale"], dtype=case["dtype"], **kw)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("page_size", [1, 4, 64])
@pytest.mark.parametrize("backend", ["cpu", "cpu-reference"])
def test_matches_numpy_reference(dtype, page_size, backend):
    rng = np.random.default_rng(page_size)
    case = make_case(rng, prefix_lens=[0, 37, 130], tree_sizes=[5, 1, 12], num_heads=3,
                     page_size=page_size, dtype=dtype, kinds=["random", "chain", "random"])
    out, lse = verify(case, backend=backend)
    assert out.shape == (18, 3, 512) and out.dtype == case["q"].dtype
    assert lse.shape == (18, 3) and lse.dtype == np.float32
    assert_close(out, lse, *reference(case), dtype)


def test_fast_matches_cpp_oracle():
    rng = np.random.default_rng(7)
    case = make_case(rng, prefix_lens=[200, 3], tree_sizes=[16, 9], num_heads=8, page_size=16)
    fast = verify(case, backend="cpu")
    oracle = verify(case, backend="cpu-reference")
    assert_close(fast[0], fast[1], to_float(oracle[0], "bf16").astype(np.float64),
                 oracle[1].astype(np.float64), "bf16")


def test_plan_once_run_per_layer():
    rng = np.random.default_rng(3)
    case = make_case(rng, prefix_lens=[50, 9], tree_sizes=[6, 4], num_heads=2, page_size=8)
    p = tv.plan(*(case[a] for a in ARGS), num_heads=2, page_size=8,
                num_pages=case["kv_cache"].shape[0], dtype="bf16",
                softmax_scale=case["softmax_scale"], device="cpu")
    assert p.backend == "cpu" and p.device == "cpu" and p.total_q == 10
    out = np.empty((10, 2, 512), np.uint16)
    lse = np.empty((10, 2), np.float32)
    for layer in range(3):  # fresh q and KV per layer, the same metadata
        layer_case = make_case(np.random.default_rng(100 + layer), prefix_lens=[50, 9],
                               tree_sizes=[6, 4], num_heads=2, page_size=8)
        layer_case.update({a: case[a] for a in ARGS})
        layer_case["kv_cache"] = layer_case["kv_cache"][: case["kv_cache"].shape[0]]
        got_out, got_lse = p.run(layer_case["q"], layer_case["kv_cache"], out=out, lse=lse)
        assert got_out is out and got_lse is lse
        assert_close(out, lse, *reference(layer_case), "bf16")


def test_strided_q_and_out_views_are_used_in_place():
    rng = np.random.default_rng(5)
    case = make_case(rng, prefix_lens=[20], tree_sizes=[7], num_heads=2, page_size=2)
    wide_q = np.zeros((7, 2, 640), np.uint16)  # an engine's q slice of a wider buffer
    wide_q[:, :, :576] = case["q"]
    wide_out = np.zeros((7, 3, 512), np.uint16)
    out_view = wide_out[:, 1:, :]  # heads 1..2 of a wider output
    case["q"] = wide_q[:, :, :576]
    out, lse = verify(case, out=out_view)
    assert out is out_view and not wide_out[:, 0].any()
    assert_close(wide_out[:, 1:], lse, *reference(case), "bf16")


def test_ml_dtypes_bfloat16_if_present():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(11)
    case = make_case(rng, prefix_lens=[10], tree_sizes=[3], num_heads=1, page_size=4)
    ref = reference(case)
    case["q"] = case["q"].view(ml_dtypes.bfloat16)
    case["kv_cache"] = case["kv_cache"].view(ml_dtypes.bfloat16)
    out, lse = tv.mla_verify(case["q"], case["kv_cache"], *(case[a] for a in ARGS),
                             case["softmax_scale"])
    assert out.dtype == ml_dtypes.bfloat16
    assert_close(out.view(np.uint16), lse, *ref, "bf16")


def test_empty_requests_and_empty_batch():
    rng = np.random.default_rng(2)
    case = make_case(rng, prefix_lens=[5, 8], tree_sizes=[0, 3], num_heads=2, page_size=4)
    out, lse = verify(case)
    assert_close(out, lse, *reference(case), "bf16")
    empty = dict(case, q=np.zeros((0, 2, 576), np.uint16), kv_page_indptr=[0], kv_page_indices=[],
                 kv_len=[], qo_indptr=[0], parents=[])
    out, lse = verify(empty)
    assert out.shape == (0, 2, 512) and lse.shape == (0, 2)


def test_merge_state_matches_formula():
    rng = np.random.default_rng(9)
    n, h, d = 5, 3, 512
    va = rng.standard_normal((n, h, d)).astype(np.float16)
    vb = rng.standard_normal((n, h, d)).astype(np.float16)
    sa = rng.standard_normal((n, h)).astype(np.float32)
    sb = rng.standard_normal((n, h)).astype(np.float32)
    sa[0, 0] = -np.inf  # side a saw nothing
    sa[1, 1] = sb[1, 1] = -np.inf  # neither did
    v, s = tv.merge_state(va, sa, vb, sb)
    m = np.maximum(sa, sb).astype(np.float64)
    m[np.isinf(m)] = 0
    wa, wb = np.exp(sa - m), np.exp(sb - m)
    with np.errstate(invalid="ignore", divide="ignore"):
        ref_s = m + np.log(wa + wb)
        ref_v = (va * (wa / (wa + wb))[..., None] + vb * (wb / (wa + wb))[..., None])
    ref_v[1, 1] = 0
    np.testing.assert_allclose(s, ref_s, rtol=1e-6)
    np.testing.assert_allclose(v.astype(np.float64), ref_v, atol=4e-3, rtol=2e-3)
    # bf16 bits need the dtype said; in-place into side a is allowed
    ba, bb = va.astype(np.float32).view(np.uint32) >> 16, vb.astype(np.float32).view(np.uint32) >> 16
    ba, bb = ba.astype(np.uint16), bb.astype(np.uint16)
    v2, s2 = tv.merge_state(ba, sa, bb, sb, v_merged=ba, s_merged=sa.copy(), dtype="bf16")
    assert v2 is ba
    np.testing.assert_allclose(to_float(v2, "bf16"), ref_v, atol=3e-2, rtol=1e-2)
