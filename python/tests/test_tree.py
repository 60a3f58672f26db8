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
