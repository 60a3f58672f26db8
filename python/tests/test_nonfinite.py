"""The non-finite policy through the Python API (verify.h): a tree token a row cannot see never
changes it, whatever its KV holds; a row that sees a NaN (in its q or in a token it attends
to) is NaN in all of out and in lse."""
import numpy as np
import pytest

import treeverify as tv
from reference import from_float, make_case, to_float

ARGS = ("kv_page_indptr", "kv_page_indices", "kv_len", "qo_indptr", "parents")
PREFIX, HEADS, PAGE = 20, 2, 4


def leaf_case():
    """Tree [-1, 0, 1, 1] after 20 prefix tokens: node 3 is a leaf nodes 0-2 cannot see."""
    case = make_case(np.random.default_rng(11), prefix_lens=[PREFIX], tree_sizes=[4],
                     num_heads=HEADS, page_size=PAGE)
    case["parents"] = np.array([-1, 0, 1, 1], np.int32)
    return case


def verify(case, backend):
    out, lse = tv.mla_verify(case["q"], case["kv_cache"], *(case[a] for a in ARGS),
                             case["softmax_scale"], dtype=case["dtype"], backend=backend)
    return to_float(out, case["dtype"]), lse


def set_kv(case, token, column, value):
    page = case["kv_page_indices"][case["kv_page_indptr"][0] + token // PAGE]
    case["kv_cache"][page, token % PAGE, column] = from_float(np.array([value], np.float32), case["dtype"])[0]


@pytest.mark.parametrize("backend", ["cpu", "cpu-reference"])
@pytest.mark.parametrize("value", [np.nan, np.inf])
def test_leaf_value_reaches_only_the_leaf(backend, value):
    clean = leaf_case()
    out0, lse0 = verify(clean, backend)
    bad = leaf_case()
    set_kv(bad, PREFIX + 3, 7, value)
    out, lse = verify(bad, backend)
    # Nodes 0-2 (rows 0-5) as without the value, node 3 (rows 6-7) NaN throughout.
    np.testing.assert_array_equal(out[:3], out0[:3])
    np.testing.assert_array_equal(lse[:3], lse0[:3])
    assert np.isnan(out[3]).all() and np.isnan(lse[3]).all()


@pytest.mark.parametrize("backend", ["cpu", "cpu-reference"])
def test_nan_in_q_reaches_only_its_row(backend):
    clean = leaf_case()
    out0, lse0 = verify(clean, backend)
    bad = leaf_case()
    bad["q"][0, 1, 100] = from_float(np.array([np.nan], np.float32), bad["dtype"])[0]
    out, lse = verify(bad, backend)
    assert np.isnan(out[0, 1]).all() and np.isnan(lse[0, 1])
    np.testing.assert_array_equal(out[0, 0], out0[0, 0])
    np.testing.assert_array_equal(out[1:], out0[1:])
    np.testing.assert_array_equal(lse[1:], lse0[1:])
