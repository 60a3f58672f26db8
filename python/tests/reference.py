"""Case generator and a float64 numpy reference for the binding tests (the C++ oracle is
checked separately through backend='cpu-reference')."""
import numpy as np

QK, V = 576, 512


def to_bf16_bits(x):
    """float -> bf16 bits (uint16), round to nearest even."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(b):
    return (np.asarray(b, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def to_float(x, dtype):
    return from_bf16_bits(x) if dtype == "bf16" else np.asarray(x, dtype=np.float32)


def from_float(x, dtype):
    return to_bf16_bits(x) if dtype == "bf16" else np.asarray(x, dtype=np.float16)


def e4m3_to_float(bits):
    """OCP e4m3fn bits (uint8) -> float64: bias 7, subnormals, NaN = 0x7f / 0xff."""
    b = np.asarray(bits, dtype=np.uint8).astype(np.int64)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp, man = (b >> 3) & 15, b & 7
    value = np.where(exp == 0, man / 8.0 * 2.0**-6, (1 + man / 8.0) * 2.0**(exp - 7))
    return np.where((b & 0x7F) == 0x7F, np.nan, sign * value)


_E4M3_CODES = np.array([c for c in range(256) if c & 0x7F != 0x7F], np.uint8)
_E4M3_VALUES = e4m3_to_float(_E4M3_CODES)
_E4M3_ORDER = np.argsort(_E4M3_VALUES, kind="stable")


def to_e4m3(x):
    """float -> the bits of the nearest e4m3fn value (saturating at +-448)."""
    values, codes = _E4M3_VALUES[_E4M3_ORDER], _E4M3_CODES[_E4M3_ORDER]
    x = np.clip(np.asarray(x, dtype=np.float64), -448.0, 448.0)
    hi = np.clip(np.searchsorted(values, x), 1, len(values) - 1)
    lo = hi - 1
    pick = np.where(np.abs(values[hi] - x) < np.abs(x - values[lo]), hi, lo)
    return codes[pick]


def with_e4m3_cache(case, kv_scale):
    """The case with its KV cache re-encoded as e4m3 bits (uint8) of kv_float / kv_scale."""
    kv = to_float(case["kv_cache"], case["dtype"]).astype(np.float64)
    return dict(case, kv_cache=to_e4m3(kv / kv_scale), kv_scale=kv_scale)


def random_tree(rng, size, kind="random"):
    if size == 0:
        return np.zeros(0, np.int32)
    if kind == "chain":
        return np.arange(-1, size - 1, dtype=np.int32)
    parents = [-1] + [int(rng.integers(0, i)) for i in range(1, size)]
    return np.array(parents, np.int32)


def make_case(rng, prefix_lens, tree_sizes, num_heads=4, page_size=4, dtype="bf16",
              spare_pages=3, kinds=None):
    """A ragged batch: random trees, pages shuffled over a pool with spare pages."""
    B = len(prefix_lens)
    kv_len = np.array([p + t for p, t in zip(prefix_lens, tree_sizes)], np.int32)
    pages_per = [(int(n) + page_size - 1) // page_size for n in kv_len]
    num_pages = sum(pages_per) + spare_pages
    perm = rng.permutation(num_pages).astype(np.int32)
    kv_page_indptr = np.zeros(B + 1, np.int32)
    kv_page_indptr[1:] = np.cumsum(pages_per)
    kv_page_indices = perm[: kv_page_indptr[-1]].copy()
    qo_indptr = np.zeros(B + 1, np.int32)
    qo_indptr[1:] = np.cumsum(tree_sizes)
    kinds = kinds or ["random"] * B
    parents = np.concatenate([random_tree(rng, t, k) for t, k in zip(tree_sizes, kinds)] +
                             [np.zeros(0, np.int32)]).astype(np.int32)
    total_q = int(qo_indptr[-1])
    q = from_float(rng.standard_normal((total_q, num_heads, QK)) * 0.5, dtype)
    kv = from_float(rng.standard_normal((num_pages, page_size, QK)) * 0.5, dtype)
    return dict(q=q, kv_cache=kv, kv_page_indptr=kv_page_indptr, kv_page_indices=kv_page_indices,
                kv_len=kv_len, qo_indptr=qo_indptr, parents=parents,
                softmax_scale=1.0 / np.sqrt(QK), dtype=dtype)


def reference(case):
    """float64 attention with the tree mask -> (out float64 [total_q, H, 512], lse [total_q, H])."""
    dtype = case["dtype"]
    q = to_float(case["q"], dtype).astype(np.float64)
    if "kv_scale" in case:  # an e4m3 cache: exact attention over the dequantized values
        kv = e4m3_to_float(case["kv_cache"]) * case["kv_scale"]
    else:
        kv = to_float(case["kv_cache"], dtype).astype(np.float64)
    page_size = kv.shape[1]
    total_q, H = q.shape[0], q.shape[1]
    out = np.zeros((total_q, H, V))
    lse = np.full((total_q, H), -np.inf)
    qo, parents = case["qo_indptr"], case["parents"]
    for b in range(len(case["kv_len"])):
        n, first, T = int(case["kv_len"][b]), int(qo[b]), int(qo[b + 1] - qo[b])
        pages = case["kv_page_indices"][case["kv_page_indptr"][b]:]
        t = np.arange(n)
        rows = kv[pages[t // page_size], t % page_size]  # [n, 576]
        L = n - T
        for i in range(T):
            visible = list(range(L))
            j = i
            while j >= 0:
                visible.append(L + j)
                j = int(parents[first + j])
            k = rows[sorted(visible)]
            s = case["softmax_scale"] * q[first + i] @ k.T  # [H, n_vis]
            m = s.max(axis=1, keepdims=True)
            e = np.exp(s - m)
            z = e.sum(axis=1, keepdims=True)
            out[first + i] = (e / z) @ k[:, :V]
            lse[first + i] = (m + np.log(z))[:, 0]
    return out, lse


def assert_close(out, lse, ref_out, ref_lse, dtype, rel=2.0**-7):
    """out within `rel` of the output's scale (a few units in the last place of bf16)."""
    got = to_float(out, dtype).astype(np.float64)
    scale = max(np.abs(ref_out).max(), 1e-6)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, ref_out, rtol=0, atol=rel * scale)
    np.testing.assert_array_equal(np.isinf(lse), np.isinf(ref_lse))
    finite = np.isfinite(ref_lse)
    np.testing.assert_allclose(lse[finite], ref_lse[finite], rtol=1e-5, atol=1e-5)
