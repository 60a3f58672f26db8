"""Tree helpers and the DDTree step on the host: build_tree, acceptance, KV commit.

Index arrays may come from any framework (lists too); results are numpy int32 arrays."""
from collections import namedtuple

import numpy as np

from . import _arrays, _ext

DraftTree = namedtuple("DraftTree", "parents tokens depths scores")
DraftTreeBatch = namedtuple("DraftTreeBatch", "qo_indptr parents tokens depths scores")
AcceptedPaths = namedtuple("AcceptedPaths", "indptr nodes bonus_tokens")
SlotCommit = namedtuple("SlotCommit", "slot_indptr slots kv_len freed_slots")

_SCHEMES = {"deterministic": 0, "with_replacement": 1, "without_replacement": 2}


def _i32(x, name):
    return _arrays.host_i32(x, name)


def _f32_2d(x, name):
    a = _arrays.host_array(x)
    if a.ndim != 2:
        raise ValueError(f"invalid argument: argument '{name}': shape {list(a.shape)}, expected "
                         "a 2-D array")
    return _arrays.host_f32(a, name)


def _paths(accepted):
    if not all(hasattr(accepted, field) for field in AcceptedPaths._fields):
        raise TypeError(f"invalid argument: argument 'accepted': {type(accepted).__name__}, "
                        "expected treeverify.AcceptedPaths(indptr, nodes, bonus_tokens), as "
                        "verify_greedy and verify_sampling return")
    return (_i32(accepted.indptr, "accepted.indptr"), _i32(accepted.nodes, "accepted.nodes"),
            _i32(accepted.bonus_tokens, "accepted.bonus_tokens"))


def validate_trees(qo_indptr, parents):
    """Raises ValueError naming the request and node when the parents break the tree rules."""
    _ext.validate_trees(_i32(qo_indptr, "qo_indptr"), _i32(parents, "parents"))


def tree_depths(qo_indptr, parents):
    return _ext.tree_depths(_i32(qo_indptr, "qo_indptr"), _i32(parents, "parents"))


def tree_positions(qo_indptr, kv_len, parents):
    """L_b + depth of every node: the rope positions of the tree tokens."""
    return _ext.tree_positions(_i32(qo_indptr, "qo_indptr"), _i32(kv_len, "kv_len"),
                               _i32(parents, "parents"))


def build_ancestor_mask(qo_indptr, parents):
    """uint32 [total_q, ceil(max T / 32)]: bit j of row qo_indptr[b] + i is set iff node j of
    request b is i or an ancestor of i (the form the kernels read)."""
    return _ext.build_ancestor_mask(_i32(qo_indptr, "qo_indptr"), _i32(parents, "parents"))


def parents_from_custom_mask(qo_indptr, kv_len, mask_indptr, custom_mask):
    """SGLang's flat bool custom_mask (request b: [T_b, kv_len[b]] row-major from
    mask_indptr[b]) -> parents; anything that is not exactly a tree mask is refused. The mask
    is bool or holds only 0 and 1 (any numeric dtype)."""
    m = _mask_u8(custom_mask)
    return _ext.parents_from_custom_mask(_i32(qo_indptr, "qo_indptr"), _i32(kv_len, "kv_len"),
                                         _i32(mask_indptr, "mask_indptr"), m)


def _mask_u8(custom_mask):
    """The flat mask as uint8 0/1. Values other than 0 and 1 are refused before the cast:
    uint8 would turn 256 and 0.5 into 0 and 2 into a value the tree check reads as 'visible',
    so the error would point at the wrong place or not come at all."""
    m = _arrays.host_array(custom_mask).reshape(-1)
    if m.dtype != np.bool_:
        if m.dtype.kind not in "iuf":
            raise TypeError(f"invalid argument: argument 'custom_mask': dtype {m.dtype}, expected "
                            "bool (or 0/1 numbers)")
        bad = np.flatnonzero((m != 0) & (m != 1))  # NaN is neither
        if bad.size:
            first = bad[0]
            raise ValueError(f"invalid argument: argument 'custom_mask': value {m[first].item()} "
                             f"at index {first}, expected 0 or 1 ({bad.size} such values)")
    return np.ascontiguousarray(m).astype(np.uint8, copy=False)


def custom_mask_from_parents(qo_indptr, kv_len, parents):
    """-> (mask_indptr [B+1] int32, custom_mask bool), the inverse of the above."""
    indptr, mask = _ext.custom_mask_from_parents(
        _i32(qo_indptr, "qo_indptr"), _i32(kv_len, "kv_len"), _i32(parents, "parents"))
    return indptr, mask.view(np.bool_)


def build_tree(log_probs, token_ids, budget, root_token=0):
    """DDTree: the budget - 1 most probable draft prefixes under the product of per-depth
    marginals, as a tree under the root. log_probs / token_ids [L, K], rows sorted best first.
    -> DraftTree(parents, tokens, depths, scores), node 0 the root."""
    return _build_tree(log_probs, token_ids, budget, root_token,
                       ("log_probs", "token_ids", "budget", "root_token"))


def _build_tree(log_probs, token_ids, budget, root_token, names):
    """build_tree with its errors naming `names` (build_trees names drafts[b] and budgets[b])."""
    lp = _f32_2d(log_probs, names[0])
    ids = _arrays.host_i32(token_ids, names[1], ndim=2)  # 2**32 + 5 is an error, not token 5
    return DraftTree(*_ext.build_tree(lp, ids, _arrays.check_int(budget, names[2]),
                                      _arrays.check_int(root_token, names[3])))


def build_trees(drafts, budgets):
    """build_tree for every request; drafts is a list of (log_probs, token_ids, root_token).
    -> DraftTreeBatch with the trees concatenated by qo_indptr (local parent indices)."""
    if len(drafts) != len(budgets):
        raise ValueError(f"invalid argument: argument 'budgets': {len(budgets)} budgets for "
                         f"{len(drafts)} drafts")
    trees = [_build_tree(lp, ids, budget, root, (f"drafts[{b}].log_probs",
                                                 f"drafts[{b}].token_ids", f"budgets[{b}]",
                                                 f"drafts[{b}].root_token"))
             for b, ((lp, ids, root), budget) in enumerate(zip(drafts, budgets))]
    sizes = [len(t.parents) for t in trees]
    qo_indptr = np.zeros(len(trees) + 1, dtype=np.int32)
    qo_indptr[1:] = np.cumsum(sizes)

    def cat(field, dtype):
        parts = [getattr(t, field) for t in trees]
        return np.concatenate(parts).astype(dtype) if parts else np.zeros(0, dtype)
    return DraftTreeBatch(qo_indptr, cat("parents", np.int32), cat("tokens", np.int32),
                          cat("depths", np.int32), cat("scores", np.float64))


def verify_greedy(qo_indptr, parents, tokens, target_argmax):
    """From each root follow the child whose token is the target's argmax at the current node.
    -> AcceptedPaths(indptr [B+1], nodes (local, root first), bonus_tokens [B])."""
    return AcceptedPaths(*_ext.verify_greedy(
        _i32(qo_indptr, "qo_indptr"), _i32(parents, "parents"), _i32(tokens, "tokens"),
        _i32(target_argmax, "target_argmax")))


def verify_sampling(qo_indptr, parents, tokens, target_probs, draft_probs=None,
                    scheme="deterministic", seed=0):
    """Rejection sampling down the tree, exact for the drafting scheme: 'deterministic',
    'with_replacement' or 'without_replacement' (see ddtree.h). probs [total_q, V]."""
    if not isinstance(scheme, str) or scheme not in _SCHEMES:
        raise ValueError(f"invalid argument: argument 'scheme': {scheme!r} (expected one of "
                         f"{', '.join(_SCHEMES)})")
    draft = None if draft_probs is None else _f32_2d(draft_probs, "draft_probs")
    return AcceptedPaths(*_ext.verify_sampling(
        _i32(qo_indptr, "qo_indptr"), _i32(parents, "parents"), _i32(tokens, "tokens"),
        _f32_2d(target_probs, "target_probs"), draft, _SCHEMES[scheme],
        _arrays.check_int(seed, "seed", _arrays.UINT64)))


def commit_kv_paged(kv_cache, kv_page_indptr, kv_page_indices, kv_len, qo_indptr, parents,
                    accepted, *, kv_dtype=None):
    """Moves the accepted nodes' KV rows to the front of each tree region, in place, in a host
    KV cache [num_pages, page_size, 576]: any 16-bit dtype, or e4m3 (float8_e4m3fn, or uint8
    bits with kv_dtype='e4m3'; rows of 576 bytes, copied bit for bit: the scale is not
    needed). -> new kv_len [B]."""
    _arrays.check_array(kv_cache, "kv_cache", writable=True)
    kv_format = _arrays.kv_dtype_of(kv_cache, kv_dtype)
    return _ext.commit_kv_paged(
        _arrays.raw(kv_cache), _i32(kv_page_indptr, "kv_page_indptr"),
        _i32(kv_page_indices, "kv_page_indices"), _i32(kv_len, "kv_len"),
        _i32(qo_indptr, "qo_indptr"), _i32(parents, "parents"), *_paths(accepted), kv_format)


def commit_slots(slot_indptr, slots, kv_len, qo_indptr, parents, accepted):
    """page_size 1 (SGLang's req_to_token): rewrites each request's slot list to prefix +
    accepted nodes; no KV moves. -> SlotCommit(slot_indptr, slots, kv_len, freed_slots)."""
    return SlotCommit(*_ext.commit_slots(
        _i32(slot_indptr, "slot_indptr"), _i32(slots, "slots"), _i32(kv_len, "kv_len"),
        _i32(qo_indptr, "qo_indptr"), _i32(parents, "parents"), *_paths(accepted)))
