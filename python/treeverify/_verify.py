"""plan / Plan.run / mla_verify / merge_state over the extension."""
import numbers

import numpy as np

from . import _arrays, _ext

_LATENT, _QK = _ext.LATENT_DIM, _ext.QK_DIM


def _parse_device(device):
    """'cpu', 'cuda', 'cuda:1', an int ordinal or a torch.device -> ("cpu"|"cuda", ordinal)."""
    if device is None:
        return ("cpu", 0)
    if isinstance(device, (int, np.integer, bool, np.bool_)):
        return ("cuda", _arrays.check_int(device, "device", (0, 2**31)))
    text = str(device)
    if text == "cpu":
        return ("cpu", 0)
    if text == "cuda":
        # The current device of this thread (torch's when torch set it).
        return ("cuda", max(int(_current_cuda_device()), 0))
    if text.startswith("cuda:") and text[5:].isdigit():
        return ("cuda", _arrays.check_int(int(text[5:]), "device", (0, 2**31)))
    raise ValueError(f"invalid argument: argument 'device': {device!r} (expected 'cpu', 'cuda', "
                     "'cuda:N' or an int)")


def _current_cuda_device():
    import sys
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        return torch.cuda.current_device()
    return 0


class Plan(_ext.Plan):
    """One step's verify plan, made by plan(): the validated metadata, the kernel choice and
    (CUDA) the index arrays' device copy. Run it once per layer. The state lives in the
    extension's Plan (attributes backend, kernel, reason, precision, workspace_bytes, device,
    dtype, kv_dtype, batch_size, num_heads, page_size, num_pages, total_q, num_chunks); this
    class only adds run()'s defaults. precision is what the chosen kernel computes: 'fast' only
    where fast was asked and the backend runs it, else 'exact' (reason says why).

    CUDA: runs use the workspace cached for their stream (grown when a plan needs more, kept
    between calls), so run() allocates, frees and copies nothing when out and lse are given,
    and a loop of runs can be captured in a CUDA graph. Runs that share a workspace must be
    ordered, which runs on one stream are; the cache keeps one workspace per stream, never
    shared between two. A graph that captured runs reads this plan's memory: keep the plan
    alive while the graph may be replayed, and replay the graphs captured on one stream in
    order, not concurrently."""

    __slots__ = ()

    def run(self, q, kv_cache, out=None, lse=None, stream=None, *, dtype=None, kv_scale=None):
        """out [total_q, H, 512] in q's dtype, lse [total_q, H] float32; both returned.
        stream: where the kernels are launched (default: torch's current stream, else the
        legacy default stream); a stream other than plan()'s waits for the plan's upload.
        kv_scale (plans with kv_dtype='e4m3'; real KV value = stored x kv_scale): a
        1-element float32 array on the plan's device (CUDA: read by the kernel when it runs,
        never on the host, so a per-layer device tensor works inside CUDA graphs), or on the
        CPU a real number; None uses the scale given to plan()."""
        for name, x, writable in (("q", q, False), ("kv_cache", kv_cache, False),
                                  ("out", out, True), ("lse", lse, True)):
            if x is not None:
                _arrays.check_array(x, name, writable)
        if dtype is not None and _arrays.dtype_name(None, dtype) != self.dtype:
            raise TypeError(f"invalid argument: argument 'dtype': {dtype}, but the plan was made "
                            f"for {self.dtype}")
        _arrays.require_kv_dtype(kv_cache, self.kv_dtype)
        halves = (("q", q), ("out", out)) if self.kv_dtype == "e4m3" else (
            ("q", q), ("kv_cache", kv_cache), ("out", out))
        _arrays.require_half_dtypes(self.dtype, halves)
        scale_array, scale_value = _split_scale(kv_scale)
        if out is None:
            out = _arrays.empty(q, (self.total_q, self.num_heads, _LATENT))
        if lse is None:
            lse = _arrays.empty(q, (self.total_q, self.num_heads), float32=True)
        device = _arrays.device_of(q, "q")
        handle = _arrays.stream_handle(stream, device)  # checked on the CPU too, where unused
        self._run(_arrays.raw(q), _arrays.raw(kv_cache), _arrays.raw(out), lse, handle,
                  scale_array, scale_value)
        return out, lse

    def __repr__(self):
        return (f"treeverify.Plan(device={self.device}, backend={self.backend}, "
                f"kernel={self.kernel!r}, B={self.batch_size}, total_q={self.total_q}, "
                f"H={self.num_heads}, kv_dtype={self.kv_dtype}, precision={self.precision}, "
                f"workspace_bytes={self.workspace_bytes})")


def _split_scale(kv_scale):
    """run()'s kv_scale as (array, None), (None, float) or (None, None)."""
    if kv_scale is None:
        return None, None
    if isinstance(kv_scale, np.ndarray) or hasattr(kv_scale, "__dlpack_device__"):
        return _arrays.check_array(kv_scale, "kv_scale"), None
    if isinstance(kv_scale, (numbers.Real, np.bool_)):
        return None, _arrays.check_real(kv_scale, "kv_scale")
    raise TypeError(f"invalid argument: argument 'kv_scale': {type(kv_scale).__name__}, expected "
                    "a 1-element float32 array on the plan's device, or a real number (CPU)")


def plan(kv_page_indptr, kv_page_indices, kv_len, qo_indptr, parents, num_heads, page_size,
         num_pages, dtype, softmax_scale, device="cpu", *, backend="auto", num_threads=0,
         round_p=False, force_config_arch=0, stream=None, kv_dtype=None, kv_scale=None,
         precision="exact"):
    """Validates the step's metadata and chooses the kernel. dtype: 'bf16', 'fp16',
    torch.bfloat16, ... (q and out; the KV cache too unless kv_dtype says otherwise) device:
    'cpu' (backend 'cpu' or 'cpu-reference') or 'cuda[:N]' ('cuda').

    kv_dtype='e4m3' (or torch.float8_e4m3fn): the KV cache is e4m3, rows of 576 bytes, real
    value = stored x kv_scale. kv_scale here is optional, a real number that every run uses
    unless it passes its own (CUDA: uploaded with the index arrays, at no extra cost); engines
    with a scale per layer pass each layer's device tensor to run() instead.
    precision ('exact' or 'fast', e4m3 caches only): exact runs the products in q's dtype on
    the dequantized cache; fast rounds Q (one scale a row) and P to e4m3 for native FP8
    products on GPUs that have them (sm_89, sm_120; sm_90 for more than 32 rows a request,
    by wgmma) and runs exact elsewhere, the CPU included. Plan.precision says which ran,
    Plan.reason why.

    The index arrays may be host arrays (numpy, lists, CPU tensors: engines keep host copies
    of the lengths) or device arrays, in any mix: the device ones are copied to the host in one
    transfer (one synchronization; none when every array is on the host). A CUDA plan then
    uploads its validated copy asynchronously on `stream` (default: torch's current stream,
    else the legacy default stream), from pooled pinned memory: plan() allocates nothing once
    warm and never waits for the device otherwise. It cannot be called while that stream is
    being captured into a CUDA graph."""
    dev = _parse_device(device)
    arrays = _arrays.host_i32s((
        ("kv_page_indptr", kv_page_indptr), ("kv_page_indices", kv_page_indices),
        ("kv_len", kv_len), ("qo_indptr", qo_indptr), ("parents", parents)))
    # Scalars are checked, not converted: int(2.9) or float("0.1") would hide a caller's bug.
    check_int, INT64 = _arrays.check_int, _arrays.INT64
    handle = _arrays.stream_handle(stream, dev)  # checked on the CPU too, where unused
    kv_format = _arrays.kv_dtype_name(kv_dtype)
    if kv_scale is not None:
        if isinstance(kv_scale, np.ndarray) or hasattr(kv_scale, "__dlpack_device__"):
            raise TypeError("invalid argument: argument 'kv_scale': plan() takes a real number "
                            "(uploaded once with the plan); pass arrays to run(kv_scale=)")
        kv_scale = _arrays.check_real(kv_scale, "kv_scale")
    return Plan(*arrays, check_int(num_heads, "num_heads"), check_int(page_size, "page_size"),
                check_int(num_pages, "num_pages", INT64), _arrays.dtype_name(None, dtype),
                _arrays.check_real(softmax_scale, "softmax_scale"), dev[0], dev[1],
                _arrays.check_str(backend, "backend"), check_int(num_threads, "num_threads"),
                _arrays.check_bool(round_p, "round_p"),
                check_int(force_config_arch, "force_config_arch"), handle, kv_format, kv_scale,
                _arrays.check_str(precision, "precision"))


def mla_verify(q, kv_cache, kv_page_indptr, kv_page_indices, kv_len, qo_indptr, parents,
               softmax_scale, out=None, lse=None, stream=None, *, dtype=None, backend="auto",
               num_threads=0, round_p=False, kv_dtype=None, kv_scale=None, precision="exact"):
    """One-shot tree verify: plan + run. Shapes (docs/DESIGN.md section 3):
      q [total_q, H, 576] bf16/fp16, kv_cache [num_pages, page_size, 576] same dtype, or e4m3
      (float8_e4m3fn, or uint8 bits with kv_dtype='e4m3') with kv_scale (a real number, or a
      1-element float32 array on q's device: see Plan.run),
      kv_page_indptr [B+1], kv_page_indices [nnz], kv_len [B] = L_b + T_b, qo_indptr [B+1],
      parents [total_q] (per request: parents[0] = -1, parents[i] < i).
    precision: 'exact' or 'fast' (e4m3 caches; see plan()).
    Returns (out [total_q, H, 512] in q's dtype, lse [total_q, H] float32, natural log).
    On CUDA this validates and uploads the metadata each call (one device-to-host copy when
    some of it is on the GPU; none when it is all on the host): engines should make one plan()
    per step and run it for every layer."""
    _arrays.check_array(q, "q")
    _arrays.check_array(kv_cache, "kv_cache")
    device = _arrays.device_of(q, "q")
    kv_format = _arrays.kv_dtype_of(kv_cache, kv_dtype)
    scale_array, scale_value = _split_scale(kv_scale)
    if scale_value is not None and kv_format != "e4m3":
        raise ValueError("invalid argument: argument 'kv_scale': given, but the KV cache is not "
                         "e4m3 (kv_scale is for an e4m3 cache)")
    shape = getattr(kv_cache, "shape", None)
    if shape is None or len(shape) != 3 or len(getattr(q, "shape", ())) != 3:
        raise ValueError("invalid argument: argument 'q'/'kv_cache': expected q [total_q, H, 576] "
                         "and kv_cache [num_pages, page_size, 576]")
    p = plan(kv_page_indptr, kv_page_indices, kv_len, qo_indptr, parents, q.shape[1], shape[1],
             shape[0], _arrays.dtype_name(q, dtype), softmax_scale,
             device=f"{device[0]}:{device[1]}" if device[0] == "cuda" else "cpu",
             backend=backend, num_threads=num_threads, round_p=round_p, stream=stream,
             kv_dtype="e4m3" if kv_format == "e4m3" else None, kv_scale=scale_value,
             precision=precision)
    return p.run(q, kv_cache, out=out, lse=lse, stream=stream, kv_scale=scale_array)


def merge_state(v_a, s_a, v_b, s_b, v_merged=None, s_merged=None, stream=None, *, dtype=None):
    """sgl_kernel.merge_state_v2: merges two attention results over disjoint KV ranges by their
    natural-log lse. v [..., D] bf16/fp16 (uint16 bits with dtype=), s = v.shape[:-1] float32.
    Returns (v, s); the outputs may alias the inputs exactly (in place), never in part."""
    for name, x, writable in (("v_a", v_a, False), ("s_a", s_a, False), ("v_b", v_b, False),
                              ("s_b", s_b, False), ("v_merged", v_merged, True),
                              ("s_merged", s_merged, True)):
        if x is not None:
            _arrays.check_array(x, name, writable)
    # The dtype is settled here, before raw() turns ml_dtypes bfloat16 into uint16 bits.
    if dtype is not None:
        dtype = _arrays.dtype_name(None, dtype)
    else:
        dtype = _arrays.half_kind(v_a)
        if dtype is None and str(getattr(v_a, "dtype", "")).endswith("uint16"):
            raise TypeError("invalid argument: argument 'dtype': uint16 arrays hold bf16 or fp16 "
                            "bits; say which with dtype='bf16' or dtype='fp16'")
    if dtype in ("bf16", "fp16"):
        _arrays.require_half_dtypes(dtype, (("v_a", v_a), ("v_b", v_b), ("v_merged", v_merged)))
    if v_merged is None:
        v_merged = _arrays.empty(v_a, tuple(v_a.shape))
    if s_merged is None:
        s_merged = _arrays.empty(v_a, tuple(s_a.shape), float32=True)
    device = _arrays.device_of(v_a, "v_a")
    handle = _arrays.stream_handle(stream, device)  # checked on the CPU too, where unused
    _ext.merge_state(_arrays.raw(v_a), s_a, _arrays.raw(v_b), s_b, _arrays.raw(v_merged),
                     s_merged, dtype or "", handle)
    return v_merged, s_merged
