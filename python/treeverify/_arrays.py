"""Framework-neutral helpers: where an array lives, its dtype, streams, and new arrays.

Nothing here imports torch or cupy at module load: a tensor's framework is recognized by the
module of its type, and that framework (already imported by the caller) allocates outputs.
"""
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


def _framework(x):
    return type(x).__module__.split(".")[0]


def raw(x):
    """The array as the extension sees it: ml_dtypes bfloat16 numpy arrays become their uint16
    bits (numpy cannot export bfloat16 over DLPack)."""
    if isinstance(x, np.ndarray) and x.dtype.name == "bfloat16":
        return x.view(np.uint16)
    return x


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
    if isinstance(stream, int):
        return stream
    for attr in ("cuda_stream", "ptr"):  # torch.cuda.Stream, cupy.cuda.Stream
        if hasattr(stream, attr):
            return int(getattr(stream, attr))
    raise TypeError(f"invalid argument: argument 'stream': {type(stream).__name__}; expected "
                    "a torch.cuda.Stream, a cupy Stream or an int cudaStream_t")


def host_i32(x, name):
    """A contiguous int32 numpy copy (or view) of an index array from any framework; device
    arrays are copied to the host (plan time only)."""
    if _framework(x) == "torch":
        x = x.detach().cpu().numpy()
    elif _framework(x) == "cupy":
        x = x.get()
    a = np.asarray(x)
    if a.dtype == np.int32:
        return np.ascontiguousarray(a).reshape(-1) if a.ndim == 1 else _bad_ndim(a, name)
    if a.size and a.dtype.kind not in "iu":
        raise TypeError(f"invalid argument: argument '{name}': dtype {a.dtype}, expected an "
                        "integer array (int32)")
    if a.ndim != 1:
        _bad_ndim(a, name)
    if a.size and (a.min() < -2**31 or a.max() >= 2**31):
        raise ValueError(f"invalid argument: argument '{name}': values outside int32")
    return np.ascontiguousarray(a, dtype=np.int32)


def _bad_ndim(a, name):
    raise ValueError(f"invalid argument: argument '{name}': shape {list(a.shape)}, expected a "
                     "1-D array")
