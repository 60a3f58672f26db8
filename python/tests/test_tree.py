"""The host tree helpers and the DDTree step through the binding, on hand-made cases (the
C++ suites test the algorithms; these check argument conversion and result shapes)."""
import numpy as np
import pytest

import treeverify as tv

LOG_PROBS = np.array([[-0.1, -2.0], [-0.2, -1.5]], np.float32)
TOKEN_IDS = np.array([[10, 11], [20, 21]], np.int32)
# Prefixes by score: (10) -0.1, (10,20) -0.3, (10,21) -1.6, (11) -2.0, ...
PARENTS = [-1, 0, 1, 1]
TOKENS = [5, 10, 20, 21]


def test_build_tree():
    t = tv.build_tree(LOG_PROBS, TOKEN_IDS, budget=4, root_token=5)
    np.testing.assert_array_equal(t.parents, PARENTS)
    np.testing.assert_array_equal(t.tokens, TOKENS)
    np.testing.assert_array_equal(t.depths, [0, 1, 2, 2])
    np.testing.assert_allclose(t.scores, [0, -0.1, -0.3, -1.6], rtol=1e-6)
    assert t.parents.dtype == np.int32 and t.scores.dtype == np.float64
    batch = tv.build_trees([(LOG_PROBS, TOKEN_IDS, 5), (LOG_PROBS.tolist(), TOKEN_IDS, 7)], [4, 2])
    np.testing.assert_array_equal(batch.qo_indptr, [0, 4, 6])
    np.testing.assert_array_equal(batch.parents, PARENTS + [-1, 0])
    np.testing.assert_array_equal(batch.tokens, TOKENS + [7, 10])
    with pytest.raises(ValueError, match=r"argument 'budget'"):
        tv.build_tree(LOG_PROBS, TOKEN_IDS, budget=0)
    with pytest.raises(ValueError, match=r"argument 'token_ids': shape \[1, 2\]"):
        tv.build_tree(LOG_PROBS, TOKEN_IDS[:1], budget=3)


def test_verify_greedy_and_commit_slots():
    acc = tv.verify_greedy([0, 4], PARENTS, TOKENS, target_argmax=[10, 21, 7, 99])
    np.testing.assert_array_equal(acc.indptr, [0, 3])
    np.testing.assert_array_equal(acc.nodes, [0, 1, 3])
    np.testing.assert_array_equal(acc.bonus_tokens, [99])
    slots = [100, 101, 102, 200, 201, 202, 203]  # prefix of 3, then the 4 tree nodes
    r = tv.commit_slots([0, 7], slots, [7], [0, 4], PARENTS, acc)
    np.testing.assert_array_equal(r.slots, [100, 101, 102, 200, 201, 203])
    np.testing.assert_array_equal(r.slot_indptr, [0, 6])
    np.testing.assert_array_equal(r.kv_len, [6])
    np.testing.assert_array_equal(r.freed_slots, [202])
    with pytest.raises(ValueError, match=r"argument 'target_argmax'"):
        tv.verify_greedy([0, 4], PARENTS, TOKENS, target_argmax=[10, 21])


def test_verify_sampling_with_point_mass_targets_is_greedy():
    probs = np.zeros((4, 128), np.float32)
    probs[[0, 1, 2, 3], [10, 21, 7, 99]] = 1
    acc = tv.verify_sampling([0, 4], PARENTS, TOKENS, probs, seed=3)
    np.testing.assert_array_equal(acc.nodes, [0, 1, 3])
    np.testing.assert_array_equal(acc.bonus_tokens, [99])
    with pytest.raises(ValueError, match=r"argument 'scheme'"):
        tv.verify_sampling([0, 4], PARENTS, TOKENS, probs, scheme="nucleus")


def test_commit_kv_paged_moves_rows_in_place():
    page_size, L = 2, 3
    kv = np.zeros((5, page_size, 576), np.uint16)
    pages = np.array([4, 0, 2, 1], np.int32)  # request's pages, shuffled in the pool
    for pos in range(L + 4):
        kv[pages[pos // page_size], pos % page_size, :] = pos  # row value = its position
    acc = tv.AcceptedPaths(np.array([0, 3]), np.array([0, 1, 3]), np.array([99]))
    new_len = tv.commit_kv_paged(kv, [0, 4], pages, [L + 4], [0, 4], PARENTS, acc)
    np.testing.assert_array_equal(new_len, [L + 3])
    got = [int(kv[pages[p // page_size], p % page_size, 0]) for p in range(L + 3)]
    assert got == [0, 1, 2, 3, 4, 6]
    with pytest.raises(ValueError, match=r"argument 'kv_cache': shape"):
        tv.commit_kv_paged(kv[:, :, :512], [0, 4], pages, [L + 4], [0, 4], PARENTS, acc)


def test_tree_structure_helpers():
    np.testing.assert_array_equal(tv.tree_depths([0, 4], PARENTS), [0, 1, 2, 2])
    np.testing.assert_array_equal(tv.tree_positions([0, 4], [10], PARENTS), [6, 7, 8, 8])
    mask = tv.build_ancestor_mask([0, 4], PARENTS)
    assert mask.dtype == np.uint32 and mask.shape == (4, 1)
    np.testing.assert_array_equal(mask[:, 0], [0b1, 0b11, 0b111, 0b1011])
    with pytest.raises(ValueError, match=r"argument 'parents': .*request 0 node 1"):
        tv.validate_trees([0, 2], [-1, 1])


def test_custom_mask_round_trip():
    rng = np.random.default_rng(4)
    qo_indptr = np.array([0, 5, 5, 8], np.int32)
    parents = np.array([-1, 0, 0, 1, 3, -1, 0, 1], np.int32)
    kv_len = np.array([9, 2, 3], np.int32)
    indptr, mask = tv.custom_mask_from_parents(qo_indptr, kv_len, parents)
    assert mask.dtype == np.bool_ and indptr[-1] == mask.size == 5 * 9 + 3 * 3
    np.testing.assert_array_equal(
        tv.parents_from_custom_mask(qo_indptr, kv_len, indptr, mask), parents)
    bad = mask.copy()
    bad[rng.integers(0, 4)] = False  # request 0 loses a prefix token
    with pytest.raises(ValueError, match=r"argument 'custom_mask'"):
        tv.parents_from_custom_mask(qo_indptr, kv_len, indptr, bad)


@pytest.mark.parametrize("value, shown", [(2, "2"), (256, "256"), (0.5, "0.5"), (-1, "-1"),
                                          (np.nan, "nan")])
def test_custom_mask_values_other_than_0_and_1_are_refused(value, shown):
    # One request, kv_len 3 (a prefix of 1, a chain of 2): the exact tree mask is 1 0 / 1 1 ...
    qo_indptr, kv_len, indptr = [0, 2], [3], [0, 6]
    good = np.array([1, 1, 0, 1, 1, 1], np.float64 if isinstance(value, float) else np.int64)
    np.testing.assert_array_equal(tv.parents_from_custom_mask(qo_indptr, kv_len, indptr, good),
                                  [-1, 0])
    bad = good.copy()
    bad[4] = value  # before: 2 read as 'visible', 256 and 0.5 as 'hidden' (cast to uint8)
    with pytest.raises(ValueError, match=rf"argument 'custom_mask': value {shown} at index 4, "
                                         r"expected 0 or 1"):
        tv.parents_from_custom_mask(qo_indptr, kv_len, indptr, bad)
    with pytest.raises(TypeError, match=r"argument 'custom_mask': dtype <U1"):
        tv.parents_from_custom_mask(qo_indptr, kv_len, indptr, np.array(list("110111")))


def test_build_tree_scalars_and_token_ids_are_checked():
    with pytest.raises(TypeError, match=r"argument 'budget': 7.9 \(float\), expected an integer"):
        tv.build_tree(LOG_PROBS, TOKEN_IDS, budget=7.9)
    with pytest.raises(ValueError, match=r"argument 'root_token': 4294967296 is out of range"):
        tv.build_tree(LOG_PROBS, TOKEN_IDS, budget=4, root_token=2**32)
    ids = TOKEN_IDS.astype(np.int64)
    ids[1, 0] = 2**32 + 5  # token 5 if truncated to 32 bits
    with pytest.raises(ValueError, match=r"argument 'token_ids': value 4294967301 at index "
                                         r"\[1, 0\] is outside int32"):
        tv.build_tree(LOG_PROBS, ids, budget=4)
    with pytest.raises(TypeError, match=r"argument 'token_ids': dtype float64"):
        tv.build_tree(LOG_PROBS, TOKEN_IDS + 0.5, budget=4)
    with pytest.raises(TypeError, match=r"argument 'budgets\[1\]': 2.5 \(float\)"):
        tv.build_trees([(LOG_PROBS, TOKEN_IDS, 5), (LOG_PROBS, TOKEN_IDS, 7)], [4, 2.5])
    with pytest.raises(ValueError, match=r"argument 'drafts\[0\].token_ids': value"):
        tv.build_trees([(LOG_PROBS, ids, 5)], [4])
    t = tv.build_tree(LOG_PROBS, TOKEN_IDS.astype(np.uint64), budget=np.int64(4),
                      root_token=np.int32(5))  # numpy integers are integers
    np.testing.assert_array_equal(t.tokens, TOKENS)


def test_verify_sampling_seed_is_checked():
    probs = np.full((4, 128), 1 / 128, np.float32)
    with pytest.raises(ValueError, match=r"argument 'seed': -1 is out of range \(uint64"):
        tv.verify_sampling([0, 4], PARENTS, TOKENS, probs, seed=-1)
    with pytest.raises(TypeError, match=r"argument 'seed': 1.5 \(float\)"):
        tv.verify_sampling([0, 4], PARENTS, TOKENS, probs, seed=1.5)
    with pytest.raises(ValueError, match=r"argument 'scheme': \['deterministic'\]"):
        tv.verify_sampling([0, 4], PARENTS, TOKENS, probs, scheme=["deterministic"])


def test_commit_slots_tree_slots_are_checked_across_the_batch():
    # Two requests with PARENTS' tree, each a prefix of 2 slots; request 1's node 2 reuses
    # request 0's tree slot 202, which both would otherwise free.
    acc = tv.AcceptedPaths(np.array([0, 3, 6]), np.array([0, 1, 3, 0, 1, 3]), np.array([9, 9]))
    slots = np.array([100, 101, 200, 201, 202, 203, 110, 111, 300, 301, 202, 303], np.int32)
    before = slots.copy()
    args = ([0, 6, 12], slots, [6, 6], [0, 4, 8], PARENTS + PARENTS, acc)
    with pytest.raises(ValueError, match=r"argument 'slots': tree slot 202 listed twice: "
                                         r"request 0 node 2 and request 1 node 2"):
        tv.commit_slots(*args)
    slots[10] = 101  # request 0's prefix slot, freed while request 0 still reads it
    with pytest.raises(ValueError, match=r"argument 'slots': tree slot 101 \(request 1 node 2\) "
                                         r"is also a prefix slot of request 0"):
        tv.commit_slots(*args)
    slots[10] = 302
    r = tv.commit_slots(*args)
    np.testing.assert_array_equal(r.freed_slots, [202, 302])
    np.testing.assert_array_equal(slots[:10], before[:10])


def test_commit_kv_paged_refuses_tree_pages_shared_between_requests():
    # Two requests with PARENTS' tree at page_size 2, each a prefix of 2 (page A) then the tree
    # (pages B, C). Request 1 lists request 0's last page as its own: its commit would
    # overwrite request 0's tree rows.
    kv = np.arange(6 * 2 * 576, dtype=np.uint16).reshape(6, 2, 576)
    before = kv.copy()
    acc = tv.AcceptedPaths(np.array([0, 3, 6]), np.array([0, 1, 3, 0, 1, 3]), np.array([9, 9]))
    args = ([0, 3, 6], [0, 1, 2, 3, 4, 2], [6, 6], [0, 4, 8], PARENTS + PARENTS, acc)
    with pytest.raises(ValueError, match=r"argument 'kv_page_indices': request 0 position 4 and "
                                         r"request 1 position 4 are both tree rows in page 2"):
        tv.commit_kv_paged(kv, *args)
    np.testing.assert_array_equal(kv, before)
    shared_prefix = ([0, 3, 6], [0, 1, 2, 0, 4, 5], [6, 6], [0, 4, 8], PARENTS + PARENTS, acc)
    np.testing.assert_array_equal(tv.commit_kv_paged(kv, *shared_prefix), [5, 5])


def test_commit_kv_paged_lengths_near_int32_max():
    # Issue 52, defect 1: kv_len = 2^31 - 1 over two pool pages of 128 (the prefix shares page
    # 0, the last entry is page 1). The tree-row check's page walk once overflowed int32 there
    # and the process died (SIGSEGV); the commit is valid and moves nothing (path = the root).
    n = (2**31 - 1 + 127) // 128
    idx = np.zeros(n, np.int32)
    idx[-1] = 1
    kv = np.arange(2 * 128 * 576, dtype=np.uint16).reshape(2, 128, 576)
    before = kv.copy()
    new_len = tv.commit_kv_paged(kv, [0, n], idx, [2**31 - 1], [0, 1], [-1],
                                 tv.AcceptedPaths([0, 1], [0], [3]))
    np.testing.assert_array_equal(new_len, [2**31 - 1])
    np.testing.assert_array_equal(kv, before)


def test_build_tree_log_probs_are_real_float32_values():
    # Issue 52: float64 log-probs were cast to float32 silently (-1e39 became -inf, read as an
    # absent candidate), complex ones lost their imaginary part, and +1.1e-16 (a certain
    # token's 0 rounded up) was refused.
    lp = LOG_PROBS.astype(np.float64)
    lp[1, 1] = -1e39
    with pytest.raises(ValueError, match=r"argument 'log_probs': value -1e\+39 at index \[1, 1\] "
                                         r"is outside float32's range \(it would become -inf"):
        tv.build_tree(lp, TOKEN_IDS, budget=4)
    with pytest.raises(ValueError, match=r"argument 'drafts\[0\].log_probs': value -1e\+39"):
        tv.build_trees([(lp, TOKEN_IDS, 5)], [4])
    with pytest.raises(TypeError, match=r"argument 'log_probs': dtype complex64, expected real"):
        tv.build_tree(LOG_PROBS + 1j, TOKEN_IDS, budget=4)
    with pytest.raises(TypeError, match=r"argument 'target_probs': dtype complex"):
        tv.verify_sampling([0, 4], PARENTS, TOKENS, np.full((4, 128), 1 / 128 + 0j))
    with pytest.raises(TypeError, match=r"argument 'log_probs': dtype <U"):
        tv.build_tree([["0", "-1"], ["-1", "-2"]], TOKEN_IDS, budget=4)
    certain = np.array([[0.0, -2.0], [0.0, -1.5]])
    want = tv.build_tree(certain, TOKEN_IDS, budget=4)
    for tiny in (1.1e-16, 1e-7):
        got = tv.build_tree(certain + [[tiny, 0], [tiny, 0]], TOKEN_IDS, budget=4)
        np.testing.assert_array_equal(got.parents, want.parents)
        np.testing.assert_array_equal(got.scores, want.scores)
    with pytest.raises(ValueError, match=r"argument 'log_probs': depth 1 candidate 0: log-prob "
                                         r"= 0.001 \(positive past the rounding of 0"):
        tv.build_tree(certain + [[1e-3, 0], [0, 0]], TOKEN_IDS, budget=4)
