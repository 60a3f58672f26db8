"""GraphPlan: the graph-safe plan (include/treeverify/graph.h) for engines that capture their
decoding step in a CUDA graph."""
from . import _arrays, _ext
from ._verify import _parse_device, _split_scale

_LATENT = _ext.LATENT_DIM

_ERROR_BITS = {
    1: "kv_len clamped", 2: "page id clamped", 4: "table row or range clamped",
    8: "parent clamped", 16: "mask not a tree",
}


class GraphPlan(_ext.GraphPlan):
    """A plan made once per captured batch size from bounds only; every value that changes
    from step to step is read on the device from the arrays prepare() is given, so prepare()
    (once per step) and run() (once per layer) can be captured in a CUDA graph and replayed
    after the engine rewrote those arrays in place. Neither allocates, copies to the host or
    synchronizes; the plan's workspace and its error-flag word are allocated here, once.

    Bounds: batch_size lanes (padding included) of tree_size nodes each, num_heads, page_size,
    num_pages (the pool), max_kv_len (L + T of any lane at any step; longer ones are clamped
    and flagged), dtype (q and out), kv_dtype (None or 'e4m3'). Each layer's run() brings its
    softmax scale.
    page_table: 'csr' (kv_page_indptr [B+1] + kv_page_indices [page_capacity]), 'rows' (a
    table [page_capacity, table_stride] of page ids, lane b's row table_rows[b]) or
    'slot_rows' (the same of token slots, as SGLang's req_to_token at any page size).
    tree: 'chain' (decode, MTP and DFlash blocks), 'parents' ([B*T] int32), 'mask' ([B, T, T]
    bool: SGLang's QLEN_ONLY) or 'full_mask' (SGLang's FULL_MASK, lanes of T x kv_len).
    kv_len_excludes_tree: prepare()'s kv_len is L (SGLang's verify seq_lens); the plan adds T.

    Out-of-range values are clamped on the device, never read out of bounds, and reported by
    error_flags(). Attributes: backend, kernel, reason, precision, workspace_bytes, chunk_cap,
    device, dtype, kv_dtype, batch_size, tree_size, num_heads."""

    __slots__ = ()

    def __init__(self, *, batch_size, tree_size, num_heads, page_size, num_pages, max_kv_len,
                 dtype, device="cpu", kv_dtype=None, page_table="csr",
                 page_capacity=0, table_stride=0, tree="chain", kv_len_excludes_tree=False,
                 backend="auto", num_threads=0, precision="exact", force_config_arch=0,
                 force_chunk_tokens=0):
        dev = _parse_device(device)
        check_int = _arrays.check_int
        super().__init__(
            check_int(batch_size, "batch_size"), check_int(tree_size, "tree_size"),
            check_int(num_heads, "num_heads"), check_int(page_size, "page_size"),
            check_int(num_pages, "num_pages", _arrays.INT64), check_int(max_kv_len, "max_kv_len"),
            _arrays.dtype_name(None, dtype),
            _arrays.kv_dtype_name(kv_dtype), _arrays.check_str(page_table, "page_table"),
            check_int(page_capacity, "page_capacity", _arrays.INT64),
            check_int(table_stride, "table_stride"), _arrays.check_str(tree, "tree"),
            _arrays.check_bool(kv_len_excludes_tree, "kv_len_excludes_tree"), dev[0], dev[1],
            _arrays.check_str(backend, "backend"), check_int(num_threads, "num_threads"),
            _arrays.check_str(precision, "precision"),
            check_int(force_config_arch, "force_config_arch"),
            check_int(force_chunk_tokens, "force_chunk_tokens"))

    def prepare(self, kv_len, kv_page_indices, *, kv_page_indptr=None, table_rows=None,
                parents=None, tree_mask=None, stream=None):
        """Once per step: the step's lengths, page table and tree, read where they lie (int32
        arrays on the plan's device; tree_mask bool or uint8), checked and clamped into the
        plan's workspace. Launches on `stream` (default: torch's current stream)."""
        device = _arrays.device_of(kv_len, "kv_len")
        handle = _arrays.stream_handle(stream, device)
        raw = lambda a: None if a is None else _arrays.raw(a)  # noqa: E731
        self._prepare(raw(kv_len), raw(kv_page_indices), raw(kv_page_indptr), raw(table_rows),
                      raw(parents), raw(tree_mask), handle)

    def run(self, q, kv_cache, softmax_scale, out=None, lse=None, stream=None, *, kv_scale=None):
        """One layer, after prepare() of this step: q [B*T, H, 576], kv_cache [num_pages,
        page_size, 576], the layer's softmax_scale; out [B*T, H, 512] in q's dtype and lse [B*T, H] float32 (natural log)
        are returned, allocated when not given (give them when capturing). kv_scale (e4m3): a
        1-element float32 tensor on the plan's device, read by the kernel (graph-safe)."""
        _arrays.require_kv_dtype(kv_cache, self.kv_dtype)
        halves = (("q", q), ("out", out)) if self.kv_dtype == "e4m3" else (
            ("q", q), ("kv_cache", kv_cache), ("out", out))
        _arrays.require_half_dtypes(self.dtype, halves)
        scale_array, scale_value = _split_scale(kv_scale)
        rows = self.batch_size * self.tree_size
        if out is None:
            out = _arrays.empty(q, (rows, self.num_heads, _LATENT))
        if lse is None:
            lse = _arrays.empty(q, (rows, self.num_heads), float32=True)
        device = _arrays.device_of(q, "q")
        handle = _arrays.stream_handle(stream, device)
        self._run(_arrays.raw(q), _arrays.raw(kv_cache), _arrays.raw(out), lse,
                  _arrays.check_real(softmax_scale, "softmax_scale"), handle, scale_array,
                  scale_value)
        return out, lse

    def error_flags(self, reset=False):
        """The names of what the steps so far clamped (empty: nothing), from the plan's flag
        word; on CUDA this waits for the device. reset=True clears the word."""
        bits = self._error_flags(reset)
        return [name for bit, name in _ERROR_BITS.items() if bits & bit]

    def step_chunk_tokens(self):
        """The chunk length the last prepare() chose for the split (waits for the device)."""
        return self._step_chunk_tokens()

    def __repr__(self):
        return (f"treeverify.GraphPlan(device={self.device}, backend={self.backend}, "
                f"kernel={self.kernel!r}, B={self.batch_size}, T={self.tree_size}, "
                f"H={self.num_heads}, kv_dtype={self.kv_dtype}, chunk_cap={self.chunk_cap})")
