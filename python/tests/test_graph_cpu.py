"""GraphPlan (the graph-safe plan) on numpy arrays: every page-table layout and tree input
gives the host plan's output on the CPU oracle; clamped values are reported by error_flags()."""
import numpy as np
import pytest

import treeverify as tv
from reference import make_case

ARGS = ("kv_page_indptr", "kv_page_indices", "kv_len", "qo_indptr", "parents")


def uniform_case(seed, prefixes, tree, heads=2, page_size=8):
    rng = np.random.default_rng(seed)
    return make_case(rng, prefix_lens=prefixes, tree_sizes=[tree] * len(prefixes),
                     num_heads=heads, page_size=page_size, dtype="bf16",
                     kinds=["random"] * len(prefixes))


def host_out(case):
    return tv.mla_verify(case["q"], case["kv_cache"], *(case[a] for a in ARGS),
                         case["softmax_scale"], dtype="bf16", backend="cpu-reference")


def ancestors_mask(case, T):
    """QLEN_ONLY [B, T, T]: node i sees j iff j is i or an ancestor."""
    B = len(case["kv_len"])
    mask = np.zeros((B, T, T), np.bool_)
    for b in range(B):
        parents = case["parents"][case["qo_indptr"][b]:case["qo_indptr"][b + 1]]
        for i in range(T):
            a = i
            while a >= 0:
                mask[b, i, a] = True
                a = parents[a]
    return mask


def slot_table(case, page_size, stride):
    """req_to_token-style rows of token slots: row 0 padding, lane b is row b + 1."""
    B = len(case["kv_len"])
    table = np.zeros((B + 1, stride), np.int32)
    for b in range(B):
        pages = case["kv_page_indices"][case["kv_page_indptr"][b]:case["kv_page_indptr"][b + 1]]
        slots = (pages[:, None] * page_size + np.arange(page_size)[None, :]).reshape(-1)
        table[b + 1, :min(len(slots), stride)] = slots[:stride]
    return table


@pytest.mark.parametrize("tree", ["parents", "mask", "full_mask"])
@pytest.mark.parametrize("page_table", ["csr", "slot_rows"])
def test_matches_the_host_plan(tree, page_table):
    T, P = 5, 8
    case = uniform_case(3, [0, 37, 130], T, page_size=P)
    kv_len = np.asarray(case["kv_len"], np.int32)
    B, stride = len(kv_len), 160
    extra = {}
    if tree == "parents":
        extra["parents"] = np.asarray(case["parents"], np.int32)
    elif tree == "mask":
        extra["tree_mask"] = ancestors_mask(case, T)
    else:
        full = []
        anc = ancestors_mask(case, T)
        for b in range(B):
            rows = np.ones((T, kv_len[b]), np.bool_)
            rows[:, kv_len[b] - T:] = anc[b]
            full.append(rows.reshape(-1))
        extra["tree_mask"] = np.concatenate(full)
    if page_table == "csr":
        pages = dict(kv_page_indptr=np.asarray(case["kv_page_indptr"], np.int32))
        indices = np.asarray(case["kv_page_indices"], np.int32)
        capacity, table_stride = len(indices), 0
    else:
        indices = slot_table(case, P, stride)
        pages = dict(table_rows=np.arange(1, B + 1, dtype=np.int32))
        capacity, table_stride = B + 1, stride
    plan = tv.GraphPlan(batch_size=B, tree_size=T, num_heads=2, page_size=P,
                        num_pages=case["kv_cache"].shape[0], max_kv_len=stride, dtype="bf16",
                        page_table=page_table, page_capacity=capacity,
                        table_stride=table_stride, tree=tree, backend="cpu-reference")
    assert plan.backend == "cpu-reference" and plan.tree_size == T
    plan.prepare(kv_len, indices, **pages, **extra)
    out, lse = plan.run(case["q"], case["kv_cache"], case["softmax_scale"])
    want_out, want_lse = host_out(case)
    np.testing.assert_array_equal(out.view(np.uint16), want_out.view(np.uint16))
    np.testing.assert_array_equal(lse, want_lse)
    assert plan.error_flags() == []


def test_clamped_values_are_flagged():
    T, P = 3, 4
    case = uniform_case(5, [10, 20], T, page_size=P)
    kv_len = np.asarray(case["kv_len"], np.int32)
    indices = np.asarray(case["kv_page_indices"], np.int32).copy()
    indices[0] = case["kv_cache"].shape[0] + 5  # outside the pool
    plan = tv.GraphPlan(batch_size=2, tree_size=T, num_heads=2, page_size=P,
                        num_pages=case["kv_cache"].shape[0], max_kv_len=64, dtype="bf16",
                        page_capacity=len(indices), tree="chain", backend="cpu-reference")
    plan.prepare(kv_len, indices, kv_page_indptr=np.asarray(case["kv_page_indptr"], np.int32))
    plan.run(case["q"], case["kv_cache"], case["softmax_scale"])
    assert plan.error_flags(reset=True) == ["page id clamped"]
    assert plan.error_flags() == []


def test_argument_errors_name_the_argument():
    with pytest.raises(ValueError, match="bounds.table_stride"):
        tv.GraphPlan(batch_size=1, tree_size=1, num_heads=1, page_size=1, num_pages=4,
                     max_kv_len=10, dtype="bf16", page_table="rows", page_capacity=1,
                     table_stride=9)
    with pytest.raises(ValueError, match="page_table"):
        tv.GraphPlan(batch_size=1, tree_size=1, num_heads=1, page_size=1, num_pages=4,
                     max_kv_len=10, dtype="bf16", page_table="pages")
    plan = tv.GraphPlan(batch_size=2, tree_size=2, num_heads=1, page_size=1, num_pages=4,
                        max_kv_len=10, dtype="bf16", page_capacity=8, tree="mask")
    with pytest.raises(ValueError, match="tree_mask"):
        plan.prepare(np.array([3, 3], np.int32), np.zeros(8, np.int32),
                     kv_page_indptr=np.array([0, 3, 6], np.int32))
    with pytest.raises(ValueError, match="kv_len"):
        plan.prepare(np.array([3, 3, 3], np.int32), np.zeros(8, np.int32),
                     kv_page_indptr=np.array([0, 3, 6], np.int32),
                     tree_mask=np.ones((2, 2, 2), np.bool_))
