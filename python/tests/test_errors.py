"""Bad input raises a Python exception carrying the library's message, naming the argument;
nothing is written to the outputs of a failed call."""
import numpy as np
import pytest

import treeverify as tv
from reference import make_case

ARGS = ("kv_page_indptr", "kv_page_indices", "kv_len", "qo_indptr", "parents")


@pytest.fixture
def case():
    return make_case(np.random.default_rng(1), prefix_lens=[10, 4], tree_sizes=[4, 3],
                     num_heads=2, page_size=4)


def call(case, **override):
    c = dict(case, **override)
    return tv.mla_verify(c["q"], c["kv_cache"], *(c[a] for a in ARGS), c["softmax_scale"],
                         out=c.get("out"), lse=c.get("lse"), dtype=c.get("dtype_arg", "bf16"))


def test_wrong_dtype(case):
    with pytest.raises(TypeError, match=r"argument 'q': dtype float32, expected bf16"):
        call(case, q=case["q"].astype(np.float32))
    with pytest.raises(TypeError, match=r"argument 'kv_cache': dtype float16, expected bf16"):
        call(case, kv_cache=case["kv_cache"].astype(np.float16))
    with pytest.raises(TypeError, match=r"argument 'lse': dtype float64, expected float32"):
        call(case, lse=np.zeros((7, 2), np.float64))
    with pytest.raises(TypeError, match=r"uint16 arrays hold bf16 or fp16 bits"):
        call(case, dtype_arg=None)
    with pytest.raises(TypeError, match=r"argument 'parents'.*integer"):
        call(case, parents=case["parents"].astype(np.float32))


def test_non_contiguous(case):
    kv = np.asfortranarray(case["kv_cache"])
    with pytest.raises(ValueError, match=r"invalid argument: argument 'kv_cache': is not contiguous"):
        call(case, kv_cache=kv)
    q = np.ascontiguousarray(case["q"][:, :, ::-1])[:, :, ::-1]  # reversed last dimension
    with pytest.raises(ValueError, match=r"argument 'q': last dimension has stride -1"):
        call(case, q=q)
    q = np.broadcast_to(case["q"][:1], case["q"].shape)
    with pytest.raises(ValueError, match=r"argument 'q': stride 0 in dimension 0"):
        call(case, q=q)


def test_shape_mismatch(case):
    with pytest.raises(ValueError, match=r"argument 'out': shape \[7, 2, 576\], expected \[7, 2, 512\]"):
        call(case, out=np.zeros((7, 2, 576), np.uint16))
    with pytest.raises(ValueError, match=r"argument 'q': shape \[6, 2, 576\], expected \[7, 2, 576\]"):
        call(case, q=case["q"][:6])
    with pytest.raises(ValueError, match=r"argument 'parents': has 6 entries, but qo_indptr\[B\] = 7"):
        call(case, parents=case["parents"][:6])
    with pytest.raises(ValueError, match=r"argument 'kv_len': has 1 entries, expected B = 2"):
        call(case, kv_len=case["kv_len"][:1])


def test_bad_tree_and_metadata(case):
    parents = case["parents"].copy()
    parents[2] = 2  # a node that is its own parent
    with pytest.raises(ValueError, match=r"invalid argument: argument 'parents': request 0 node 2: "
                                         r"parent = 2"):
        call(case, parents=parents)
    indices = case["kv_page_indices"].copy()
    indices[-1] = case["kv_cache"].shape[0]
    with pytest.raises(ValueError, match=r"argument 'kv_page_indices': request 1"):
        call(case, kv_page_indices=indices)
    with pytest.raises(ValueError, match=r"argument 'kv_len': request 1: kv_len = 2 with tree size"):
        call(case, kv_len=[14, 2])
    with pytest.raises(ValueError, match=r"argument 'softmax_scale'"):
        call(case, softmax_scale=float("nan"))


def test_failed_call_writes_nothing(case):
    out = np.full((7, 2, 512), 0x7FC1, np.uint16)
    lse = np.full((7, 2), 5.0, np.float32)
    with pytest.raises(ValueError):
        call(case, out=out, lse=lse, kv_cache=case["kv_cache"][:, :2])
    assert (out == 0x7FC1).all() and (lse == 5.0).all()


def test_plan_errors(case):
    kw = dict(num_heads=2, page_size=4, num_pages=case["kv_cache"].shape[0], dtype="bf16",
              softmax_scale=0.1)
    meta = [case[a] for a in ARGS]
    with pytest.raises(ValueError, match=r"argument 'num_heads'"):
        tv.plan(*meta, **dict(kw, num_heads=0))
    with pytest.raises(ValueError, match=r"argument 'page_size'"):
        tv.plan(*meta, **dict(kw, page_size=3))
    with pytest.raises(ValueError, match=r"argument 'dtype': 'fp8'"):
        tv.plan(*meta, **dict(kw, dtype="fp8"))
    with pytest.raises(ValueError, match=r"unknown backend 'fast'"):
        tv.plan(*meta, **kw, backend="fast")
    with pytest.raises(ValueError, match=r"argument 'backend': 'cpu' runs on the CPU"):
        tv.plan(*meta, **kw, device="cuda:0", backend="cpu")
    p = tv.plan(*meta, **kw)
    with pytest.raises(ValueError, match=r"argument 'kv_cache': shape"):
        p.run(case["q"], case["kv_cache"][:1])


@pytest.mark.skipif(tv.build_info()["cuda_compiled"], reason="this build has CUDA")
def test_cuda_request_without_cuda_build(case):
    meta = [case[a] for a in ARGS]
    with pytest.raises(tv.Error, match=r"^unsupported: .*no CUDA backend"):
        tv.plan(*meta, num_heads=2, page_size=4, num_pages=case["kv_cache"].shape[0],
                dtype="bf16", softmax_scale=0.1, device="cuda")


def test_merge_state_errors():
    v = np.zeros((3, 2, 8), np.float16)
    s = np.zeros((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"argument 's_b': shape \[3\]"):
        tv.merge_state(v, s, v, s[:, 0])
    with pytest.raises(TypeError, match=r"argument 'v_b': dtype float32"):
        tv.merge_state(v, s, v.astype(np.float32), s)
    with pytest.raises(TypeError, match=r"argument 's_a': dtype float64"):
        tv.merge_state(v, s.astype(np.float64), v, s)


def fp16_case():
    return make_case(np.random.default_rng(2), prefix_lens=[10, 4], tree_sizes=[4, 3],
                     num_heads=2, page_size=4, dtype="fp16")


def verify_outputs():
    """Preallocated fp16 out and lse holding sentinels, to see that a refused call wrote nothing."""
    return np.full((7, 2, 512), 7.0, np.float16), np.full((7, 2), 5.0, np.float32)


def unchanged(out, lse):
    return (out == 7.0).all() and (lse == 5.0).all()


def test_q_kv_cache_and_out_must_share_one_dtype():
    # ml_dtypes bfloat16 reaches the extension as uint16 bits: only the Python layer still sees
    # that it is not fp16, and must refuse it rather than read bf16 bits as fp16.
    ml_dtypes = pytest.importorskip("ml_dtypes")
    c = fp16_case()
    meta = [c[a] for a in ARGS]
    bf16_kv = c["kv_cache"].view(np.uint16).view(ml_dtypes.bfloat16)
    out, lse = verify_outputs()
    with pytest.raises(TypeError, match=r"argument 'kv_cache': dtype bfloat16, expected fp16"):
        tv.mla_verify(c["q"], bf16_kv, *meta, 0.1, out=out, lse=lse)
    assert unchanged(out, lse)
    bf16_out = np.zeros((7, 2, 512), ml_dtypes.bfloat16)
    with pytest.raises(TypeError, match=r"argument 'out': dtype bfloat16, expected fp16"):
        tv.mla_verify(c["q"], c["kv_cache"], *meta, 0.1, out=bf16_out, lse=lse)
    assert (bf16_out.view(np.uint16) == 0).all() and unchanged(out, lse)
    p = tv.plan(*meta, num_heads=2, page_size=4, num_pages=c["kv_cache"].shape[0], dtype="fp16",
                softmax_scale=0.1)
    with pytest.raises(TypeError, match=r"argument 'q': dtype bfloat16, expected fp16"):
        p.run(c["q"].view(np.uint16).view(ml_dtypes.bfloat16), c["kv_cache"], out=out, lse=lse)
    assert unchanged(out, lse)


def test_plan_run_dtype_must_be_the_plans():
    c = fp16_case()
    p = tv.plan(*(c[a] for a in ARGS), num_heads=2, page_size=4,
                num_pages=c["kv_cache"].shape[0], dtype="bf16", softmax_scale=0.1)
    out, lse = np.full((7, 2, 512), 0x7FC1, np.uint16), np.full((7, 2), 5.0, np.float32)
    with pytest.raises(TypeError, match=r"argument 'q': dtype float16, expected bf16"):
        p.run(c["q"], c["kv_cache"].view(np.uint16), out=out, lse=lse)
    assert (out == 0x7FC1).all() and (lse == 5.0).all()


def test_merge_state_ml_dtypes_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(3)
    va, vb = (rng.standard_normal((3, 2, 8)).astype(ml_dtypes.bfloat16) for _ in range(2))
    sa, sb = (rng.standard_normal((3, 2)).astype(np.float32) for _ in range(2))
    v, s = tv.merge_state(va, sa, vb, sb)  # the dtype comes from the arrays, as in mla_verify
    bits, s_bits = tv.merge_state(va.view(np.uint16), sa, vb.view(np.uint16), sb, dtype="bf16")
    assert v.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(v.view(np.uint16), bits)
    np.testing.assert_array_equal(s, s_bits)
    v_out, s_out = np.full((3, 2, 8), 7.0, np.float16), np.full((3, 2), 5.0, np.float32)
    with pytest.raises(TypeError, match=r"argument 'v_b': dtype float16, expected bf16"):
        tv.merge_state(va, sa, vb.astype(np.float16), sb, v_merged=v_out, s_merged=s_out)
    with pytest.raises(TypeError, match=r"argument 'v_merged': dtype float16, expected bf16"):
        tv.merge_state(va, sa, vb, sb, v_merged=v_out, s_merged=s_out)
    with pytest.raises(TypeError, match=r"argument 'v_a': dtype bfloat16, expected fp16"):
        tv.merge_state(va, sa, vb, sb, v_merged=v_out, s_merged=s_out, dtype="fp16")
    assert (v_out == 7.0).all() and (s_out == 5.0).all()


def test_merge_state_uint16_needs_dtype():
    v = np.zeros((3, 8), np.uint16)
    s = np.zeros(3, np.float32)
    with pytest.raises(TypeError, match=r"argument 'dtype': uint16 arrays hold bf16 or fp16 bits"):
        tv.merge_state(v, s, v, s)


PLAN_KW = dict(num_heads=2, page_size=4, num_pages=20, dtype="bf16", softmax_scale=0.1)


SCALAR_CASES = [
    ("num_heads", 2.9, TypeError, r"argument 'num_heads': 2.9 \(float\), expected an integer"),
    ("num_heads", 2**31, ValueError, r"argument 'num_heads': 2147483648 is out of range \(int32"),
    ("num_heads", True, TypeError, r"argument 'num_heads': True \(bool\)"),
    ("page_size", np.float64(4.0), TypeError, r"argument 'page_size': .*expected an integer"),
    ("num_pages", 2**64, ValueError, r"argument 'num_pages': 18446744073709551616 is out of range"),
    ("softmax_scale", "0.1", TypeError, r"argument 'softmax_scale': '0.1' \(str\), expected"),
    ("softmax_scale", 10**400, ValueError, r"argument 'softmax_scale': .* out of range"),
    ("num_threads", 1.5, TypeError, r"argument 'num_threads'"),
    ("round_p", "no", TypeError, r"argument 'round_p': 'no' \(str\), expected True or False"),
    ("force_config_arch", 2**40, ValueError, r"argument 'force_config_arch'"),
    ("backend", 1, TypeError, r"argument 'backend': 1 \(int\), expected a string"),
    ("device", 2**40, ValueError, r"argument 'device': 1099511627776 is out of range"),
    ("device", "cuda:99999999999", ValueError, r"argument 'device': 99999999999 is out of range"),
]


@pytest.mark.parametrize("name, value, error, message", SCALAR_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(SCALAR_CASES)])
def test_plan_scalars_are_checked_not_converted(case, name, value, error, message):
    meta = [case[a] for a in ARGS]
    with pytest.raises(error, match=message):
        tv.plan(*meta, **dict(PLAN_KW, **{name: value}))


def test_numpy_scalars_are_accepted(case):
    meta = [case[a] for a in ARGS]
    p = tv.plan(*meta, num_heads=np.int64(2), page_size=np.int32(4),
                num_pages=np.uint64(case["kv_cache"].shape[0]), dtype="bf16",
                softmax_scale=np.float32(0.1), round_p=np.bool_(False))
    assert p.num_heads == 2 and p.page_size == 4


def test_mla_verify_scalars(case):
    out, lse = np.full((7, 2, 512), 0x7FC1, np.uint16), np.full((7, 2), 5.0, np.float32)
    with pytest.raises(TypeError, match=r"argument 'softmax_scale': '0.1'"):
        call(case, softmax_scale="0.1", out=out, lse=lse)
    p = tv.plan(*(case[a] for a in ARGS), **dict(PLAN_KW, num_pages=case["kv_cache"].shape[0]))
    with pytest.raises(ValueError, match=r"argument 'stream': -1 is out of range \(uint64"):
        p.run(case["q"], case["kv_cache"], out=out, lse=lse, stream=-1)
    assert (out == 0x7FC1).all() and (lse == 5.0).all()


def test_outputs_must_not_overlap_the_inputs(case):
    """The backends read q and kv_cache while they write out and lse: sharing memory would give
    garbage, so it is refused before anything is written."""
    kv = case["kv_cache"]
    kv_before, q_before = kv.copy(), case["q"].copy()
    lse = np.full((7, 2), 5.0, np.float32)
    out_in_kv = kv.reshape(-1)[: 7 * 2 * 512].reshape(7, 2, 512)
    with pytest.raises(ValueError, match=r"argument 'out': shares memory with kv_cache"):
        call(case, out=out_in_kv, lse=lse)
    out_in_q = case["q"][:, :, :512]  # a view of q's first 512 columns
    with pytest.raises(ValueError, match=r"argument 'out': shares memory with q"):
        call(case, out=out_in_q, lse=lse)
    out = np.full((7, 2, 512), 0x7FC1, np.uint16)
    lse_in_out = out.reshape(-1).view(np.float32)[:14].reshape(7, 2)
    with pytest.raises(ValueError, match=r"argument 'lse': shares memory with out"):
        call(case, out=out, lse=lse_in_out)
    lse_in_kv = kv.reshape(-1).view(np.float32)[100:114].reshape(7, 2)
    with pytest.raises(ValueError, match=r"argument 'lse': shares memory with kv_cache"):
        call(case, lse=lse_in_kv)
    assert (kv == kv_before).all() and (case["q"] == q_before).all()
    assert (out == 0x7FC1).all() and (lse == 5.0).all()


def test_merge_state_outputs_alias_exactly_or_not_at_all():
    rng = np.random.default_rng(8)
    buf = rng.standard_normal((5, 8)).astype(np.float16)
    vb = rng.standard_normal((4, 8)).astype(np.float16)
    s = np.zeros(5, np.float32)
    buf_before, s_before = buf.copy(), s.copy()
    with pytest.raises(ValueError, match=r"argument 'v_merged': partly overlaps v_a in memory"):
        tv.merge_state(buf[:4], s[:4], vb, s[:4], v_merged=buf[1:],
                       s_merged=np.zeros(4, np.float32))
    with pytest.raises(ValueError, match=r"argument 's_merged': partly overlaps s_b in memory"):
        tv.merge_state(vb, s[:4], vb, s[1:], v_merged=np.zeros((4, 8), np.float16),
                       s_merged=s[:4])
    s_in_v = buf.reshape(-1).view(np.float32)[:4]
    with pytest.raises(ValueError, match=r"argument 's_merged': shares memory with v_a"):
        tv.merge_state(buf[:4], s[:4], vb, s[:4], v_merged=np.zeros((4, 8), np.float16),
                       s_merged=s_in_v)
    with pytest.raises(ValueError, match=r"argument 's_merged': shares memory with v_merged"):
        tv.merge_state(vb, s[:4], vb, s[:4], v_merged=buf[:4], s_merged=s_in_v)
    assert (buf == buf_before).all() and (s == s_before).all()
    # Exact aliasing is in place, as merge.h allows: the result equals the out-of-place one.
    want_v, want_s = tv.merge_state(buf[:4], s[:4], vb, s[1:])
    va, sa = buf[:4].copy(), s[:4].copy()
    got_v, got_s = tv.merge_state(va, sa, vb, s[1:], v_merged=va, s_merged=sa)
    assert got_v is va and got_s is sa
    np.testing.assert_array_equal(va, want_v)
    np.testing.assert_array_equal(sa, want_s)


# Issue 52: arrays nanobind cannot take (read-only outputs, big-endian data, lists) and
# AcceptedPaths given as something else raised "incompatible function arguments" with a list of
# overloads, or a raw AttributeError; each now names its argument.
def _read_only(a):
    a = a.copy()
    a.setflags(write=False)
    return a


def test_read_only_outputs_are_named(case):
    out, lse = np.zeros((7, 2, 512), np.uint16), np.zeros((7, 2), np.float32)
    with pytest.raises(ValueError, match=r"argument 'out': is read-only, but the call writes it"):
        call(case, out=_read_only(out), lse=lse)
    with pytest.raises(ValueError, match=r"argument 'lse': is read-only, but the call writes it"):
        call(case, out=out, lse=_read_only(lse))
    assert (out == 0).all() and (lse == 0).all()
    v, s = np.zeros((3, 2, 8), np.float16), np.zeros((3, 2), np.float32)
    with pytest.raises(ValueError, match=r"argument 'v_merged': is read-only"):
        tv.merge_state(v, s, v, s, v_merged=_read_only(v))
    with pytest.raises(ValueError, match=r"argument 's_merged': is read-only"):
        tv.merge_state(v, s, v, s, s_merged=_read_only(s))
    # Read-only inputs are fine: nothing writes them.
    call(case, q=_read_only(case["q"]), kv_cache=_read_only(case["kv_cache"]))
    tv.merge_state(_read_only(v), _read_only(s), _read_only(v), _read_only(s))


def test_big_endian_arrays_are_named(case):
    be = lambda a: a.astype(a.dtype.newbyteorder(">"))  # noqa: E731
    for name in ("q", "kv_cache"):
        with pytest.raises(TypeError, match=rf"argument '{name}': dtype >u2 is not in this "
                                            r"machine's byte order"):
            call(case, **{name: be(case[name])})
    with pytest.raises(TypeError, match=r"argument 'out': dtype >u2"):
        call(case, out=be(np.zeros((7, 2, 512), np.uint16)))
    with pytest.raises(TypeError, match=r"argument 'lse': dtype >f4"):
        call(case, lse=np.zeros((7, 2), ">f4"))
    v, s = np.zeros((3, 2, 8), np.float16), np.zeros((3, 2), np.float32)
    for i, name in enumerate(("v_a", "s_a", "v_b", "s_b")):
        args = [v, s, v, s]
        args[i] = be(args[i])
        with pytest.raises(TypeError, match=rf"argument '{name}': dtype >"):
            tv.merge_state(*args)
    # Index arrays are converted (copied to int32), so their byte order does not matter.
    tv.validate_trees(np.array([0, 1], ">i4"), np.array([-1], ">i4"))


def test_lists_for_arrays_are_named(case):
    with pytest.raises(TypeError, match=r"argument 'kv_cache': list is not an array"):
        call(case, kv_cache=case["kv_cache"].tolist())
    with pytest.raises(TypeError, match=r"argument 'q': list is not an array"):
        call(case, q=case["q"].tolist())
    with pytest.raises(TypeError, match=r"argument 'kv_cache': list is not an array"):
        tv.commit_kv_paged(case["kv_cache"].tolist(), case["kv_page_indptr"],
                           case["kv_page_indices"], case["kv_len"], case["qo_indptr"],
                           case["parents"], tv.AcceptedPaths([0, 1, 2], [0, 0], [3, 3]))


@pytest.mark.parametrize("accepted", [None, ([0, 1, 2], [0, 0], [3, 3]),
                                      [[0, 1, 2], [0, 0], [3, 3]], {"indptr": [0, 1, 2]}],
                         ids=["None", "tuple", "list", "dict"])
def test_accepted_paths_of_another_type_are_named(case, accepted):
    kv = case["kv_cache"].copy()
    with pytest.raises(TypeError, match=r"argument 'accepted': \w+, expected "
                                        r"treeverify.AcceptedPaths"):
        tv.commit_kv_paged(kv, case["kv_page_indptr"], case["kv_page_indices"], case["kv_len"],
                           case["qo_indptr"], case["parents"], accepted)
    with pytest.raises(TypeError, match=r"argument 'accepted': \w+, expected "
                                        r"treeverify.AcceptedPaths"):
        tv.commit_slots([0, 14, 21], list(range(21)), case["kv_len"], case["qo_indptr"],
                        case["parents"], accepted)
    np.testing.assert_array_equal(kv, case["kv_cache"])


def test_read_only_kv_cache_of_a_commit_is_named(case):
    kv = _read_only(case["kv_cache"])
    with pytest.raises(ValueError, match=r"argument 'kv_cache': is read-only, but the call writes"):
        tv.commit_kv_paged(kv, case["kv_page_indptr"], case["kv_page_indices"], case["kv_len"],
                           case["qo_indptr"], case["parents"],
                           tv.AcceptedPaths([0, 1, 2], [0, 0], [3, 3]))


def test_num_threads_is_capped_and_negative_refused(case):
    # Issue 52: num_threads = 10000 ran for minutes in thread and buffer setup; any count past
    # the hardware's runs as the hardware's, bit for bit.
    args = (case["q"], case["kv_cache"], *(case[a] for a in ARGS), case["softmax_scale"])
    want = tv.mla_verify(*args, dtype="bf16", backend="cpu")
    for threads in (2**20, 2**31 - 1):
        got = tv.mla_verify(*args, dtype="bf16", backend="cpu", num_threads=threads)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    with pytest.raises(ValueError, match=r"argument 'options.num_threads': num_threads = -1"):
        tv.mla_verify(*args, dtype="bf16", backend="cpu", num_threads=-1)
