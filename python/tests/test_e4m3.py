"""An e4m3 KV cache on the CPU: mla_verify / plan / Plan.run against the float64 reference on
the dequantized cache, the scale's three forms (plan, run float, run array), the KV commit of
576-byte rows, and the errors of a wrong dtype or a missing scale (outputs untouched)."""
import numpy as np
import pytest

import treeverify as tv
from reference import (assert_close, e4m3_to_float, make_case, reference, to_e4m3,
                       with_e4m3_cache)

ARGS = ("kv_page_indptr", "kv_page_indices", "kv_len", "qo_indptr", "parents")


def e4m3_case(seed, dtype="bf16", page_size=4, kv_scale=0.0625, **kw):
    rng = np.random.default_rng(seed)
    c = make_case(rng, prefix_lens=kw.pop("prefix_lens", [0, 37, 130]),
                  tree_sizes=kw.pop("tree_sizes", [5, 1, 12]), num_heads=kw.pop("num_heads", 3),
                  page_size=page_size, dtype=dtype, **kw)
    return with_e4m3_cache(c, kv_scale)


def verify(case, **kw):
    return tv.mla_verify(case["q"], case["kv_cache"], *(case[a] for a in ARGS),
                         case["softmax_scale"], dtype=case["dtype"], **kw)


def test_encoding_round_trips():
    codes = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
    np.testing.assert_array_equal(to_e4m3(e4m3_to_float(codes))[codes != 0x80],
                                  codes[codes != 0x80])  # -0 encodes as +0
    assert e4m3_to_float(np.uint8(0x7E)) == 448 and e4m3_to_float(np.uint8(0x01)) == 2.0**-9


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("page_size", [1, 16])
@pytest.mark.parametrize("backend", ["cpu", "cpu-reference"])
def test_matches_reference_on_the_dequantized_cache(dtype, page_size, backend):
    c = e4m3_case(page_size, dtype=dtype, page_size=page_size)
    assert c["kv_cache"].dtype == np.uint8
    out, lse = verify(c, backend=backend, kv_dtype="e4m3", kv_scale=c["kv_scale"])
    assert out.shape == (18, 3, 512) and out.dtype == c["q"].dtype
    assert_close(out, lse, *reference(c), dtype)


def test_scale_forms_agree_and_the_scale_is_used():
    c = e4m3_case(5, page_size=8)
    p = tv.plan(*(c[a] for a in ARGS), num_heads=3, page_size=8,
                num_pages=c["kv_cache"].shape[0], dtype="bf16",
                softmax_scale=c["softmax_scale"], kv_dtype="e4m3", kv_scale=c["kv_scale"])
    assert p.kv_dtype == "e4m3" and p.dtype == "bf16" and "kv_dtype=e4m3" in repr(p)
    ref = reference(c)
    assert_close(*p.run(c["q"], c["kv_cache"]), *ref, "bf16")  # the plan's scale
    as_array = np.array([c["kv_scale"]], np.float32)
    assert_close(*p.run(c["q"], c["kv_cache"], kv_scale=as_array), *ref, "bf16")
    assert_close(*p.run(c["q"], c["kv_cache"], kv_scale=np.float32(c["kv_scale"])), *ref, "bf16")
    # A run's own scale overrides the plan's: twice the scale is another answer.
    doubled = dict(c, kv_scale=2 * c["kv_scale"])
    out, lse = p.run(c["q"], c["kv_cache"], kv_scale=np.array(2 * c["kv_scale"], np.float32))
    assert_close(out, lse, *reference(doubled), "bf16")
    assert not np.allclose(reference(doubled)[1], ref[1])
    # A plan without a scale takes one per run (a float on the CPU).
    p = tv.plan(*(c[a] for a in ARGS), num_heads=3, page_size=8,
                num_pages=c["kv_cache"].shape[0], dtype="bf16",
                softmax_scale=c["softmax_scale"], kv_dtype="e4m3")
    assert_close(*p.run(c["q"], c["kv_cache"], kv_scale=c["kv_scale"]), *ref, "bf16")


def test_e4m3_matches_the_16bit_cache_of_the_same_values():
    # The dequantized values are exact in bf16 (3 mantissa bits, scale a power of two), so the
    # bf16 cache of the same values gives the same attention: bit for bit on the oracle.
    c = e4m3_case(9, page_size=4, kv_scale=0.25)
    from reference import from_float
    same = dict(c, kv_cache=from_float(e4m3_to_float(c["kv_cache"]) * 0.25, "bf16"))
    del same["kv_scale"]
    a = verify(c, backend="cpu-reference", kv_dtype="e4m3", kv_scale=0.25)
    b = verify(same, backend="cpu-reference")
    np.testing.assert_array_equal(a[0], b[0])
    np.testing.assert_array_equal(a[1], b[1])


def test_ml_dtypes_float8_cache():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    c = e4m3_case(11)
    typed = c["kv_cache"].view(ml_dtypes.float8_e4m3fn)
    out, lse = verify(dict(c, kv_cache=typed), kv_scale=c["kv_scale"])  # kv_dtype inferred
    assert_close(out, lse, *reference(c), "bf16")


# ---- errors: named, and the outputs untouched ---------------------------------------------

@pytest.fixture
def small():
    return e4m3_case(1, prefix_lens=[10, 4], tree_sizes=[4, 3], num_heads=2, page_size=4)


def sentinel_outputs():
    return np.full((7, 2, 512), 0x1234, np.uint16), np.full((7, 2), 7.5, np.float32)


def expect(small, exc, pattern, **kw):
    out, lse = sentinel_outputs()
    args = dict(dict(kv_dtype="e4m3", kv_scale=small["kv_scale"]), **kw)
    kv = args.pop("kv_cache", small["kv_cache"])
    with pytest.raises(exc, match=pattern):
        tv.mla_verify(small["q"], kv, *(small[a] for a in ARGS), small["softmax_scale"],
                      out=out, lse=lse, dtype="bf16", **args)
    assert (out == 0x1234).all() and (lse == 7.5).all()


def test_missing_or_bad_scale(small):
    expect(small, ValueError, r"argument 'kv_scale': missing: an e4m3 KV cache needs its scale",
           kv_scale=None)
    expect(small, ValueError, r"argument 'kv_scale': nan, expected a finite float",
           kv_scale=float("nan"))
    expect(small, ValueError, r"argument 'kv_scale': inf, expected a finite float",
           kv_scale=np.array([np.inf], np.float32)[0])
    expect(small, TypeError, r"argument 'kv_scale': dtype float64, expected float32",
           kv_scale=np.array([0.5]))
    expect(small, ValueError, r"argument 'kv_scale': shape \[2\], expected one float32 element",
           kv_scale=np.array([0.5, 0.5], np.float32))
    expect(small, TypeError, r"argument 'kv_scale': str", kv_scale="0.5")
    expect(small, TypeError, r"argument 'kv_scale': True", kv_scale=True)


@pytest.mark.parametrize("backend", ["cpu", "cpu-reference"])
def test_scale_whose_products_overflow_float32_is_refused(small, backend):
    # Issue 52: kv_scale = 1e37 ran, cpu giving NaN and cpu-reference inf. A scale is
    # refused once 448 x |kv_scale| (the largest value dequantized) is no finite float32, as a
    # float (checked by the binding, for plans on any device) and as an array (by the backend).
    for scale in (1e37, -1e37, 7.6e35):
        expect(small, ValueError, r"argument 'kv_scale': .*448 x \|kv_scale\|", kv_scale=scale,
               backend=backend)
        expect(small, ValueError, r"argument 'kv_scale': \*kv_scale = .*448 x \|kv_scale\|",
               kv_scale=np.array([scale], np.float32), backend=backend)
    expect(small, TypeError, r"argument 'kv_scale': dtype >f4 is not in this machine's byte "
                             r"order", kv_scale=np.ones(1, ">f4"), backend=backend)
    for scale in (7.5e35, np.array([7.5e35], np.float32)):  # inside the bound: runs
        out, lse = tv.mla_verify(small["q"], small["kv_cache"], *(small[a] for a in ARGS),
                                 small["softmax_scale"], dtype="bf16", kv_dtype="e4m3",
                                 kv_scale=scale, backend=backend)
        assert out.shape == (7, 2, 512)


def test_wrong_cache_dtype(small):
    expect(small, TypeError, r"argument 'kv_dtype': kv_cache is uint8; .*kv_dtype='e4m3'",
           kv_dtype=None)
    expect(small, ValueError, r"argument 'kv_dtype': 'e5m2'", kv_dtype="e5m2")
    expect(small, TypeError, r"argument 'kv_cache': dtype int8",
           kv_cache=small["kv_cache"].view(np.int8))
    bf16_kv = np.zeros(small["kv_cache"].shape, np.uint16)
    expect(small, TypeError, r"argument 'kv_cache': dtype uint16, but kv_dtype='e4m3'",
           kv_cache=bf16_kv)
    # A 16-bit cache takes no scale.
    expect(small, ValueError, r"argument 'kv_scale': given, but the KV cache is not e4m3",
           kv_cache=bf16_kv, kv_dtype=None)


def test_plan_and_run_disagree(small):
    def make(**kw):
        return tv.plan(*(small[a] for a in ARGS), num_heads=2, page_size=4,
                       num_pages=small["kv_cache"].shape[0], dtype="bf16",
                       softmax_scale=small["softmax_scale"], **kw)
    e4m3, same = make(kv_dtype="e4m3", kv_scale=0.5), make()
    assert same.kv_dtype == "bf16"
    bf16_kv = np.zeros(small["kv_cache"].shape, np.uint16)
    out, lse = sentinel_outputs()
    with pytest.raises(TypeError, match=r"argument 'kv_cache': dtype uint16, expected "
                                        r"float8_e4m3fn .*the plan's kv_dtype is e4m3"):
        e4m3.run(small["q"], bf16_kv, out=out, lse=lse)
    with pytest.raises(TypeError, match=r"argument 'kv_cache': dtype uint8, but the plan's KV "
                                        r"cache is bf16: make the plan with kv_dtype='e4m3'"):
        same.run(small["q"], small["kv_cache"], out=out, lse=lse)
    with pytest.raises(ValueError, match=r"argument 'kv_scale': given, but the plan's KV cache "
                                         r"is bf16"):
        same.run(small["q"], bf16_kv, out=out, lse=lse, kv_scale=0.5)
    # The scale must not share memory with an output.
    lse_and_scale = np.full(15, 7.5, np.float32)
    with pytest.raises(ValueError, match=r"argument 'lse'.*kv_scale"):
        e4m3.run(small["q"], small["kv_cache"], out=out, lse=lse_and_scale[:14].reshape(7, 2),
                 kv_scale=lse_and_scale[13:14])
    assert (out == 0x1234).all() and (lse == 7.5).all() and (lse_and_scale == 7.5).all()
    with pytest.raises(ValueError, match=r"argument 'kv_scale': given, but kv_dtype is not"):
        make(kv_scale=0.5)
    with pytest.raises(TypeError, match=r"argument 'kv_scale': plan\(\) takes a real number"):
        make(kv_dtype="e4m3", kv_scale=np.array([0.5], np.float32))
    with pytest.raises(ValueError, match=r"argument 'kv_scale': nan, expected a finite float"):
        make(kv_dtype="e4m3", kv_scale=float("nan"))


# ---- KV commit ---------------------------------------------------------------------------

def commit_case(seed, page_size=4):
    rng = np.random.default_rng(seed)
    c = make_case(rng, prefix_lens=[9, 0, 30], tree_sizes=[6, 3, 8], num_heads=1,
                  page_size=page_size, kinds=["chain", "random", "random"])
    paths, qo = [], c["qo_indptr"]
    for b in range(3):  # root, then a random child while there is one
        par, path = c["parents"][qo[b]:qo[b + 1]], [0]
        while kids := [i for i in range(len(par)) if par[i] == path[-1]]:
            path.append(int(rng.choice(kids)))
        paths.append(path)
    indptr = np.concatenate([[0], np.cumsum([len(p) for p in paths])]).astype(np.int32)
    accepted = tv.AcceptedPaths(indptr, np.concatenate(paths).astype(np.int32),
                                np.zeros(3, np.int32))
    return c, accepted


def reference_commit(c, accepted, cache):
    out, ps, qo = cache.copy(), cache.shape[1], c["qo_indptr"]
    for b in range(3):
        L = int(c["kv_len"][b] - (qo[b + 1] - qo[b]))
        pages = c["kv_page_indices"][c["kv_page_indptr"][b]:]
        nodes = accepted.nodes[accepted.indptr[b]:accepted.indptr[b + 1]]
        for k, node in enumerate(nodes):
            s, d = L + int(node), L + k
            out[pages[d // ps], d % ps] = cache[pages[s // ps], s % ps]
    return out


def test_commit_e4m3_rows():
    c, accepted = commit_case(21)
    pool = np.random.default_rng(0).integers(0, 256, c["kv_cache"].shape, dtype=np.uint8)
    expected = reference_commit(c, accepted, pool)
    assert not np.array_equal(expected, pool)
    new_len = tv.commit_kv_paged(pool, *(c[a] for a in ARGS), accepted, kv_dtype="e4m3")
    np.testing.assert_array_equal(pool, expected)
    np.testing.assert_array_equal(
        new_len, c["kv_len"] - np.diff(c["qo_indptr"]) + np.diff(accepted.indptr))


def test_commit_e4m3_errors_change_nothing():
    c, accepted = commit_case(22)
    pool = np.random.default_rng(1).integers(0, 256, c["kv_cache"].shape, dtype=np.uint8)
    before = pool.copy()
    with pytest.raises(TypeError, match=r"argument 'kv_dtype': kv_cache is uint8"):
        tv.commit_kv_paged(pool, *(c[a] for a in ARGS), accepted)
    with pytest.raises(TypeError, match=r"argument 'kv_cache': dtype uint16, but "
                                        r"kv_dtype='e4m3'"):
        tv.commit_kv_paged(c["kv_cache"], *(c[a] for a in ARGS), accepted, kv_dtype="e4m3")
    with pytest.raises(ValueError, match=r"argument 'kv_page_indices'.*num_pages = 3"):
        tv.commit_kv_paged(pool[:3], *(c[a] for a in ARGS), accepted, kv_dtype="e4m3")
    np.testing.assert_array_equal(pool, before)
