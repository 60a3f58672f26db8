"""Framework-neutral helpers: where an array lives, its dtype, streams, and new arrays.

Nothing here imports torch or cupy at module load: a tensor's framework is recognized by the
module of its type, and that framework (already imported by the caller) allocates outputs.
"""
import numbers
import sys

import numpy as np

_DL_CPU, _DL_CUDA = 1, 2


def device_of(x, name):
    """("cpu", 0) or ("cuda", ordinal) for any DLPack-capable array."""
    if isinstance(x, np.ndarray):
        return ("cpu", 0)
    get = getattr(x, "__dlpack_device__", None)
    if get is None:
        raise TypeError(f"invalid argument: argument '{name}': {type(x).__name__} is not an "
                        "array with DLPack support (numpy, torch, cupy, jax)")
    kind, index = get()
    if int(kind) == _DL_CPU:
        return ("cpu", 0)
    if int(kind) == _DL_CUDA:
        return ("cuda", int(index))
    raise TypeError(f"invalid argument: argument '{name}': DLPack device type {int(kind)}; only "
                    "CPU and CUDA memory is accepted")


def check_array(x, name, writable=False):
    """x as the extension takes it for `name`, checked here so that a mismatch names the
    argument (nanobind would list every overload instead): an array with DLPack support, in
    this machine's byte order, and writable when the call writes it in place."""
    if not isinstance(x, np.ndarray) and not hasattr(x, "__dlpack__") and not _buffer(x):
        raise TypeError(f"invalid argument: argument '{name}': {type(x).__name__} is not an "
                        "array with DLPack support (numpy, torch, cupy, jax)")
    if isinstance(x, np.ndarray):
        if not x.dtype.isnative:
            raise TypeError(f"invalid argument: argument '{name}': dtype {x.dtype.str} is not in "
                            "this machine's byte order (DLPack has no other); pass "
                            f"{name}.astype({name}.dtype.newbyteorder('='))")
        if writable and not x.flags.writeable:
            raise ValueError(f"invalid argument: argument '{name}': is read-only, but the call "
                             "writes it in place")
    return x


def _buffer(x):
    """Whether x exposes the buffer protocol (nanobind takes such arrays too)."""
    try:
        memoryview(x)
    except TypeError:
        return False
    return True


def host_f32(a, name):
    """A numpy array as contiguous float32. Real numbers only: complex values (whose imaginary
    part a cast drops), strings and objects are refused; a finite value outside float32's range
    is an error, not the infinity the cast gives (-1e39 would read as -inf)."""
    if a.size and a.dtype.kind not in "iuf":
        raise TypeError(f"invalid argument: argument '{name}': dtype {a.dtype}, expected real "
                        "numbers (a float or integer array)")
    with np.errstate(over="ignore"):
        f = np.ascontiguousarray(a, dtype=np.float32)
    if a.dtype.kind == "f" and a.dtype.itemsize > 4:
        outside = np.flatnonzero(np.isinf(f) & np.isfinite(a))
        if outside.size:
            where = np.unravel_index(outside[0], a.shape)
            raise ValueError(f"invalid argument: argument '{name}': value {a[where]} at index "
                             f"{list(map(int, where))} is outside float32's range (it would "
                             f"become {f[where]}; {outside.size} such values)")
    return f


def _framework(x):
    return type(x).__module__.split(".")[0]


def raw(x):
    """The array as the extension sees it: ml_dtypes bfloat16 numpy arrays become their uint16
    bits (numpy cannot export bfloat16 over DLPack), float8_e4m3fn arrays (torch, ml_dtypes)
    their uint8 bits (a view: DLPack export of float8 is missing from many torch versions)."""
    if isinstance(x, np.ndarray):
        if x.dtype.name == "bfloat16":
            return x.view(np.uint16)
        if x.dtype.name == "float8_e4m3fn":
            return x.view(np.uint8)
    elif _framework(x) == "torch" and str(x.dtype) == "torch.float8_e4m3fn":
        return x.view(sys.modules["torch"].uint8)
    return x


def element_name(x):
    """The element type's name without the framework prefix: 'bfloat16', 'float8_e4m3fn',
    'uint8', ... ('' for objects without a dtype)."""
    return str(getattr(x, "dtype", "")).replace("torch.", "")


# Names accepted for kv_dtype='e4m3' (OCP e4m3fn, SGLang's and vLLM's fp8_e4m3).
_E4M3_NAMES = ("e4m3", "e4m3fn", "fp8_e4m3", "float8_e4m3fn")


def kv_dtype_name(kv_dtype):
    """'e4m3' for an e4m3 KV cache (a name or torch.float8_e4m3fn), 'same' for None."""
    if kv_dtype is None:
        return "same"
    name = str(kv_dtype).replace("torch.", "")
    if name in _E4M3_NAMES or getattr(kv_dtype, "name", None) == "float8_e4m3fn":
        return "e4m3"
    raise ValueError(f"invalid argument: argument 'kv_dtype': {kv_dtype!r} (expected 'e4m3' or "
                     "torch.float8_e4m3fn for an e4m3 cache, or None for the dtype of q)")


def kv_dtype_of(kv_cache, kv_dtype, name="kv_cache"):
    """The KV cache's format for a call that infers it: 'e4m3' (float8_e4m3fn arrays, or uint8
    with kv_dtype='e4m3') or 'same' (16-bit arrays); kv_dtype, when given, must agree."""
    element = element_name(kv_cache)
    wanted = None if kv_dtype is None else kv_dtype_name(kv_dtype)
    if element == "float8_e4m3fn":
        found = "e4m3"
    elif element == "uint8":
        if wanted is None:
            raise TypeError(f"invalid argument: argument 'kv_dtype': {name} is uint8; if it holds "
                            "e4m3 bits, say so with kv_dtype='e4m3'")
        found = wanted
    elif "float8" in element or element == "int8":
        raise TypeError(f"invalid argument: argument '{name}': dtype {element}; the e4m3 KV "
                        "cache is float8_e4m3fn (OCP e4m3fn), or uint8 with kv_dtype='e4m3'")
    else:
        found = "same"
    if wanted is not None and wanted != found:
        raise TypeError(f"invalid argument: argument '{name}': dtype {element}, but "
                        "kv_dtype='e4m3' (expected float8_e4m3fn, or uint8 holding its bits)")
    return found


def require_kv_dtype(kv_cache, plan_kv_dtype):
    """A run's KV cache against its plan's kv_dtype ('e4m3' or a half dtype), before raw()."""
    element = element_name(kv_cache)
    eight_bit = "float8" in element or element in ("uint8", "int8")
    if plan_kv_dtype == "e4m3":
        if element not in ("float8_e4m3fn", "uint8"):
            raise TypeError(f"invalid argument: argument 'kv_cache': dtype {element or '?'}, "
                            "expected float8_e4m3fn (or uint8 holding its bits): the plan's "
                            "kv_dtype is e4m3")
    elif eight_bit:
        raise TypeError(f"invalid argument: argument 'kv_cache': dtype {element}, but the plan's "
                        f"KV cache is {plan_kv_dtype}: make the plan with kv_dtype='e4m3' for an "
                        "e4m3 cache")


def dtype_name(x, dtype=None):
    """'bf16' or 'fp16' for a 16-bit float array; uint16 arrays (bits) need dtype."""
    if dtype is not None:
        return {"bf16": "bf16", "bfloat16": "bf16", "fp16": "fp16", "float16": "fp16"}.get(
            str(dtype).replace("torch.", ""), str(dtype))
    name = str(getattr(x, "dtype", "")).replace("torch.", "")
    if name in ("bfloat16", "float16"):
        return "bf16" if name == "bfloat16" else "fp16"
    if name == "uint16":
        raise TypeError("invalid argument: argument 'dtype': uint16 arrays hold bf16 or fp16 "
                        "bits; say which with dtype='bf16' or dtype='fp16'")
    raise TypeError(f"invalid argument: argument 'q': dtype {name or type(x).__name__}, expected "
                    "bfloat16 or float16 (or uint16 bits with dtype=)")


_HALF_KINDS = {"bfloat16": "bf16", "float16": "fp16"}
_HALF_NAMES = {"bf16": "bfloat16", "fp16": "float16"}


def half_kind(x):
    """'bf16' or 'fp16' when x's element type says so (torch, numpy, ml_dtypes, cupy, jax);
    None otherwise, uint16 bits included (they take the dtype of the call)."""
    return _HALF_KINDS.get(str(getattr(x, "dtype", "")).replace("torch.", ""))


def require_half_dtypes(expected, arrays):
    """Every typed 16-bit array of `arrays` ((name, array) pairs) must be `expected` ('bf16' or
    'fp16'); uint16 arrays hold bits and pass. Checked here, not only in the extension: raw()
    hands it ml_dtypes bfloat16 arrays as uint16, so a bf16 cache next to fp16 q would
    otherwise be read as fp16."""
    for name, x in arrays:
        kind = half_kind(x)
        if kind is not None and kind != expected:
            raise TypeError(f"invalid argument: argument '{name}': dtype {_HALF_NAMES[kind]}, "
                            f"expected {expected} (the arrays of one call share one dtype)")


def empty(like, shape, float32=False):
    """A new array from the framework of `like`, on its device: `like`'s dtype, or float32."""
    fw = _framework(like)
    if fw == "torch":
        torch = sys.modules["torch"]
        return torch.empty(shape, dtype=torch.float32 if float32 else like.dtype, device=like.device)
    if fw == "cupy":
        cupy = sys.modules["cupy"]
        with like.device:
            return cupy.empty(shape, dtype=np.float32 if float32 else like.dtype)
    if isinstance(like, np.ndarray):
        return np.empty(shape, dtype=np.float32 if float32 else like.dtype)
    raise TypeError(f"invalid argument: argument 'out': cannot allocate outputs for "
                    f"{type(like).__name__} arrays; pass out= and lse=")


# The C++ types scalar arguments are converted to; a value outside them would otherwise reach
# nanobind, which answers with a dump of every overload instead of naming the argument.
INT32, INT64, UINT64 = (-2**31, 2**31), (-2**63, 2**63), (0, 2**64)
_RANGE_NAMES = {INT32: "int32", INT64: "int64", UINT64: "uint64"}


def check_int(value, name, bounds=INT32):
    """value as a Python int: a Python or numpy integer within [lo, hi) = bounds. Floats are
    refused rather than truncated (num_heads=2.9 is a mistake, not 2), and so are bools."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"invalid argument: argument '{name}': {value!r} ({type(value).__name__}),"
                        " expected an integer")
    value = int(value)
    lo, hi = bounds
    if not lo <= value < hi:
        kind = _RANGE_NAMES.get(bounds)
        limits = f"{kind}: [{lo}, {hi - 1}]" if kind else f"[{lo}, {hi - 1}]"
        raise ValueError(f"invalid argument: argument '{name}': {value} is out of range ({limits})")
    return value


def check_real(value, name):
    """value as a float: a real number (Python or numpy; not a string or a bool)."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise TypeError(f"invalid argument: argument '{name}': {value!r} ({type(value).__name__}),"
                        " expected a real number")
    try:
        return float(value)
    except OverflowError:  # a Python int too large for a double
        raise ValueError(f"invalid argument: argument '{name}': {value} is out of range for a "
                         "float") from None


def check_bool(value, name):
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"invalid argument: argument '{name}': {value!r} ({type(value).__name__}),"
                        " expected True or False")
    return bool(value)


def check_str(value, name):
    if not isinstance(value, str):
        raise TypeError(f"invalid argument: argument '{name}': {value!r} ({type(value).__name__}),"
                        " expected a string")
    return value


def stream_handle(stream, device):
    """The cudaStream_t (as an int) for a CUDA call on `device`.

    None means torch's current stream on that device when torch is loaded (an engine built on
    torch has it loaded; importing it here would cost seconds for cupy or jax users), else the
    legacy default stream 0. torch.cuda.Stream / cupy Stream objects and ints are accepted."""
    if stream is None:
        torch = sys.modules.get("torch")
        if torch is not None and device[0] == "cuda" and torch.cuda.is_available():
            return int(torch.cuda.current_stream(device[1]).cuda_stream)
        return 0
    if isinstance(stream, (int, np.integer)) and not isinstance(stream, (bool, np.bool_)):
        return check_int(stream, "stream", UINT64)
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError(f"invalid argument: argument 'stream': {type(stream).__name__}; expected "
                    "a torch.cuda.Stream, a cupy Stream or an int cudaStream_t")


def host_array(x):
    """A numpy array (a view where possible) of any framework's array or a list; device arrays
    are copied to the host, one copy (and one synchronization) each: see host_i32s."""
    if _framework(x) == "torch":
        x = x.detach().cpu().numpy()
    elif _framework(x) == "cupy":
        x = x.get()
    return np.asarray(x)


def _cuda_device(x):
    """The CUDA ordinal of an array in CUDA memory; None for host arrays and lists."""
    get = getattr(x, "__dlpack_device__", None)
    if get is None:
        return None
    kind, index = get()
    return int(index) if int(kind) == _DL_CUDA else None


# Integer dtypes that int64 holds exactly: such device arrays are gathered into one transfer.
_TORCH_GATHERED = {"torch.int8", "torch.int16", "torch.int32", "torch.int64", "torch.uint8"}


def _torch_gather(arrays):
    torch = sys.modules["torch"]
    if all(a.dtype == torch.int32 for a in arrays):
        parts = [a.detach().reshape(-1) for a in arrays]
    else:
        parts = [a.detach().reshape(-1).to(torch.int64) for a in arrays]
    flat = parts[0] if len(parts) == 1 else torch.cat(parts)  # on the device, no sync
    return flat.cpu().numpy()  # the one device-to-host copy


def _cupy_gather(arrays):
    cupy = sys.modules["cupy"]
    with arrays[0].device:
        if all(a.dtype == np.int32 for a in arrays):
            parts = [a.ravel() for a in arrays]
        else:
            parts = [a.ravel().astype(np.int64) for a in arrays]
        return cupy.concatenate(parts).get()


# framework -> (whether an array of it can join a gathered transfer, the transfer)
_GATHER = {
    "torch": (lambda a: str(a.dtype) in _TORCH_GATHERED, _torch_gather),
    "cupy": (lambda a: np.dtype(a.dtype).kind == "i" or (np.dtype(a.dtype).kind == "u" and
                                                          np.dtype(a.dtype).itemsize <= 4),
             _cupy_gather),
}


def host_i32s(named):
    """Contiguous int32 numpy arrays of the index arrays `named` ((name, array) pairs), in
    order, for plan(). Host arrays (numpy, lists, CPU tensors of any framework) are read where
    they are. Arrays in CUDA memory are copied to the host together: torch and cupy arrays of
    one device are concatenated there and copied back in one transfer, so plan() synchronizes
    once however many of its arrays live on the GPU (other frameworks' device arrays are
    copied one by one). Each array is then checked as host_i32 checks it."""
    out = [None] * len(named)
    groups = {}
    for i, (name, x) in enumerate(named):
        device = _cuda_device(x)
        gather = _GATHER.get(_framework(x))
        if (device is not None and gather is not None and len(getattr(x, "shape", ())) == 1
                and gather[0](x)):
            groups.setdefault((_framework(x), device), []).append(i)
        else:  # host arrays; device arrays that fail the checks below (their errors name them)
            out[i] = host_i32(x, name)
    for (framework, _), members in groups.items():
        arrays = [named[i][1] for i in members]
        flat = _GATHER[framework][1](arrays)
        start = 0
        for i, a in zip(members, arrays):
            n = int(a.shape[0])
            out[i] = host_i32(flat[start:start + n], named[i][0])
            start += n
    return out


def host_i32(x, name, ndim=1):
    """A contiguous int32 numpy copy (or view) of an index array from any framework (plan
    time only). Values outside int32 are an error, never wrapped (2**32 + 5 is not 5)."""
    a = host_array(x)
    if a.ndim != ndim:
        _bad_ndim(a, name, ndim)
    if a.dtype == np.int32:
        return np.ascontiguousarray(a)
    if a.size and a.dtype.kind not in "iu":
        raise TypeError(f"invalid argument: argument '{name}': dtype {a.dtype}, expected an "
                        "integer array (int32)")
    outside = np.flatnonzero((a < -2**31) | (a >= 2**31))
    if outside.size:
        where = np.unravel_index(outside[0], a.shape)
        raise ValueError(f"invalid argument: argument '{name}': value {a[where]} at index "
                         f"{list(map(int, where)) if a.ndim > 1 else int(where[0])} is outside "
                         f"int32 ({outside.size} such values)")
    return np.ascontiguousarray(a, dtype=np.int32)


def _bad_ndim(a, name, ndim):
    raise ValueError(f"invalid argument: argument '{name}': shape {list(a.shape)}, expected a "
                     f"{ndim}-D array")
