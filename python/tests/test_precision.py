"""precision='exact'|'fast' on the CPU: the binding passes it into the plan options and reports
what the plan computes (Plan.precision); fast with a 16-bit cache and unknown values raise."""
import numpy as np
import pytest

import treeverify as tv
from reference import make_case, to_float, with_e4m3_cache

ARGS = ("kv_page_indptr", "kv_page_indices", "kv_len", "qo_indptr", "parents")


def case(e4m3=True):
    c = make_case(np.random.default_rng(3), prefix_lens=[40, 7], tree_sizes=[6, 3], num_heads=2,
                  page_size=4, dtype="bf16")
    return with_e4m3_cache(c, 0.0625) if e4m3 else c


def make_plan(c, **kw):
    return tv.plan(*(c[a] for a in ARGS), num_heads=2, page_size=4,
                   num_pages=c["kv_cache"].shape[0], dtype="bf16",
                   softmax_scale=c["softmax_scale"], **kw)


def test_fast_with_a_16bit_cache_is_an_argument_error():
    c = case(e4m3=False)
    with pytest.raises(ValueError, match=r"argument 'options.precision': fast needs an e4m3 KV "
                                         r"cache .* this cache is bf16"):
        make_plan(c, precision="fast")
    assert make_plan(c).precision == "exact"


def test_unknown_precision_raises():
    c = case()
    with pytest.raises(ValueError, match=r"argument 'precision': 'fp8' \(expected 'exact' or "
                                         r"'fast'\)"):
        make_plan(c, kv_dtype="e4m3", precision="fp8")
    with pytest.raises(TypeError, match=r"argument 'precision': 1 \(int\), expected a string"):
        make_plan(c, kv_dtype="e4m3", precision=1)


def test_cpu_fast_runs_fast_requests_exact():
    c = case()
    exact = make_plan(c, kv_dtype="e4m3", kv_scale=0.0625)
    fast = make_plan(c, kv_dtype="e4m3", kv_scale=0.0625, precision="fast")
    assert exact.backend == fast.backend == "cpu"
    assert exact.precision == fast.precision == "exact"
    assert "computes exact" in fast.reason and "computes exact" not in exact.reason
    assert "precision=exact" in repr(fast)
    for a, b in zip(exact.run(c["q"], c["kv_cache"]), fast.run(c["q"], c["kv_cache"])):
        np.testing.assert_array_equal(a, b)


def test_the_oracle_rounds_by_the_precision_passed():
    # cpu-reference with round_p rounds Q and P to e4m3 when fast is asked: out moves by the
    # e4m3 step (about 5e-2 relative, tests/cpu/test_precision.cpp), so the option got through.
    c = case()
    kw = dict(backend="cpu-reference", round_p=True, kv_dtype="e4m3", kv_scale=0.0625)
    fast = make_plan(c, precision="fast", **kw)
    assert fast.precision == "fast"
    out_fast, _ = fast.run(c["q"], c["kv_cache"])
    out_exact, _ = make_plan(c, **kw).run(c["q"], c["kv_cache"])
    a, b = to_float(out_fast, "bf16"), to_float(out_exact, "bf16")
    rel = np.linalg.norm(a - b) / np.linalg.norm(b)
    assert 1e-3 < rel < 0.1
    out_mla, _ = tv.mla_verify(c["q"], c["kv_cache"], *(c[a] for a in ARGS), c["softmax_scale"],
                               dtype="bf16", precision="fast", **kw)
    np.testing.assert_array_equal(out_mla, out_fast)
