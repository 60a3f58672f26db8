"""treeverify: MLA tree-verify attention for speculative decoding.

Zero-copy over DLPack: numpy and torch/cupy/jax CPU arrays run on the CPU backends, CUDA
tensors on the CUDA backend on the caller's stream. The package does not build against any
framework; torch is only used (when the caller already imported it) to allocate outputs for
torch inputs and to find torch's current stream.
"""
from . import _ext
from ._ext import Error
from ._tree import (AcceptedPaths, DraftTree, DraftTreeBatch, SlotCommit, build_ancestor_mask,
                    build_tree, build_trees, commit_kv_paged, commit_slots,
                    custom_mask_from_parents, parents_from_custom_mask, tree_depths,
                    tree_positions, validate_trees, verify_greedy, verify_sampling)
from ._graph import GraphPlan
from ._verify import Plan, merge_state, mla_verify, plan
from ._doctor import doctor

LATENT_DIM = _ext.LATENT_DIM  # 512: width of V and out
QK_DIM = _ext.QK_DIM          # 576: width of q and KV rows
MAX_TREE_SIZE = _ext.MAX_TREE_SIZE


def build_info():
    """Version, commit, whether CUDA was compiled in and for which architectures, BLAS."""
    return _ext.build_info()


def devices():
    """The CUDA devices this build can see, each with whether it has kernel code here;
    an empty list when there is none (see build_info() and `treeverify doctor`)."""
    found, _note = _ext.devices()
    return found


__version__ = build_info()["version"]  # the C++ library's: CMakeLists.txt's project(VERSION)
__all__ = [
    "Error", "Plan", "plan", "GraphPlan", "mla_verify", "merge_state", "build_info", "devices",
    "doctor",
    "build_tree", "build_trees", "verify_greedy", "verify_sampling", "commit_kv_paged",
    "commit_slots", "validate_trees", "tree_depths", "tree_positions", "build_ancestor_mask",
    "parents_from_custom_mask", "custom_mask_from_parents", "DraftTree", "DraftTreeBatch",
    "AcceptedPaths", "SlotCommit", "LATENT_DIM", "QK_DIM", "MAX_TREE_SIZE",
]
