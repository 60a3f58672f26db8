"""plan()'s index arrays: host copies in any form are read where they are, and arrays in CUDA
memory reach the host in one transfer per plan() however many there are. Here a stand-in CUDA
framework (installed as 'cupy' for one test at a time) counts the transfers; test_gpu_torch.py
counts them with real torch tensors on a GPU."""
import sys
import types

import numpy as np
import pytest

import treeverify as tv
from reference import assert_close, make_case, reference

ARGS = ("kv_page_indptr", "kv_page_indices", "kv_len", "qo_indptr", "parents")


class FakeCudaArray:
    """A cupy-like array that says it lives in CUDA memory; get() is its device-to-host copy."""

    copies = 0  # get() calls since the fixture reset it

    def __init__(self, values):
        self._a = np.asarray(values)

    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA, ordinal 0

    @property
    def shape(self):
        return self._a.shape

    @property
    def dtype(self):
        return self._a.dtype

    @property
    def device(self):
        return _NullContext()

    def ravel(self):
        return FakeCudaArray(self._a.ravel())

    def astype(self, dtype):
        return FakeCudaArray(self._a.astype(dtype))

    def get(self):
        FakeCudaArray.copies += 1
        return self._a.copy()


FakeCudaArray.__module__ = "cupy._fake"  # what treeverify recognizes a framework by


class _NullContext:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


@pytest.fixture
def fake_cupy(monkeypatch):
    module = types.ModuleType("cupy")
    module.concatenate = lambda parts: FakeCudaArray(np.concatenate([p._a for p in parts]))
    monkeypatch.setitem(sys.modules, "cupy", module)
    FakeCudaArray.copies = 0
    return module


@pytest.fixture
def case():
    return make_case(np.random.default_rng(21), prefix_lens=[30, 0, 9], tree_sizes=[5, 3, 1],
                     num_heads=2, page_size=4)


def plan_and_run(case, arrays):
    p = tv.plan(*(arrays[a] for a in ARGS), num_heads=2, page_size=4,
                num_pages=case["kv_cache"].shape[0], dtype="bf16",
                softmax_scale=case["softmax_scale"])
    return p.run(case["q"], case["kv_cache"])


def test_device_index_arrays_take_one_transfer(case, fake_cupy):
    arrays = {a: FakeCudaArray(case[a]) for a in ARGS}
    out, lse = plan_and_run(case, arrays)
    assert FakeCudaArray.copies == 1
    assert_close(out, lse, *reference(case), "bf16")


def test_mixed_host_and_device_arrays_take_one_transfer(case, fake_cupy):
    # An engine's mix: lengths kept on the host (SGLang's seq_lens_cpu), the rest on the GPU,
    # in several integer dtypes.
    arrays = {
        "kv_page_indptr": FakeCudaArray(case["kv_page_indptr"].astype(np.int64)),
        "kv_page_indices": FakeCudaArray(case["kv_page_indices"]),
        "kv_len": case["kv_len"].tolist(),
        "qo_indptr": case["qo_indptr"].astype(np.int64),
        "parents": FakeCudaArray(case["parents"].astype(np.int16)),
    }
    out, lse = plan_and_run(case, arrays)
    assert FakeCudaArray.copies == 1
    assert_close(out, lse, *reference(case), "bf16")


def test_host_arrays_need_no_transfer(case, fake_cupy):
    as_lists = {a: case[a].tolist() for a in ARGS}
    as_int64 = {a: case[a].astype(np.int64) for a in ARGS}
    strided = {a: np.repeat(case[a], 2)[::2] for a in ARGS}  # views that are not contiguous
    results = [plan_and_run(case, arrays) for arrays in (as_lists, as_int64, strided)]
    assert FakeCudaArray.copies == 0
    for out, lse in results[1:]:
        np.testing.assert_array_equal(out, results[0][0])
        np.testing.assert_array_equal(lse, results[0][1])
    assert_close(*results[0], *reference(case), "bf16")


def test_gathered_arrays_are_checked_one_by_one(case, fake_cupy):
    arrays = {a: FakeCudaArray(case[a]) for a in ARGS}
    bad = case["kv_page_indices"].astype(np.int64)
    bad[2] = 2**32 + 5  # would become 5 if wrapped
    arrays["kv_page_indices"] = FakeCudaArray(bad)
    with pytest.raises(ValueError, match=r"argument 'kv_page_indices': value 4294967301 at "
                                          r"index 2 is outside int32"):
        plan_and_run(case, arrays)
    assert FakeCudaArray.copies == 1
    arrays["kv_page_indices"] = FakeCudaArray(case["kv_page_indices"])
    arrays["kv_len"] = FakeCudaArray(case["kv_len"].astype(np.float32))
    with pytest.raises(TypeError, match=r"argument 'kv_len': dtype float32, expected an integer"):
        plan_and_run(case, arrays)
    arrays["kv_len"] = FakeCudaArray(case["kv_len"][None, :])
    with pytest.raises(ValueError, match=r"argument 'kv_len': shape \[1, 3\], expected a 1-D"):
        plan_and_run(case, arrays)


def test_plan_is_one_object():
    # The plan is the extension's object (no wrapper holding a second copy of its state):
    # attributes come from it, and it carries no per-instance dict.
    case = make_case(np.random.default_rng(2), prefix_lens=[7], tree_sizes=[3], num_heads=1,
                     page_size=2)
    p = tv.plan(*(case[a] for a in ARGS), num_heads=1, page_size=2,
                num_pages=case["kv_cache"].shape[0], dtype="bf16", softmax_scale=0.1)
    assert isinstance(p, tv.Plan) and isinstance(p, tv._ext.Plan)
    assert not hasattr(p, "__dict__") and not hasattr(p, "_plan")
    assert (p.backend, p.device, p.total_q, p.num_heads, p.batch_size) == ("cpu", "cpu", 3,
                                                                            1, 1)
    assert p.workspace_bytes >= 0 and p.kernel and p.reason
    assert repr(p).startswith("treeverify.Plan(device=cpu, backend=cpu")


def test_cpu_torch_tensors_are_read_in_place():
    torch = pytest.importorskip("torch")
    case = make_case(np.random.default_rng(4), prefix_lens=[12, 3], tree_sizes=[4, 2],
                     num_heads=2, page_size=4)
    arrays = {a: torch.from_numpy(case[a]) for a in ARGS}
    arrays["kv_len"] = arrays["kv_len"].to(torch.int64)
    out, lse = plan_and_run(case, arrays)
    assert_close(out, lse, *reference(case), "bf16")
