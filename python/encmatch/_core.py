"""The boundary to the Go core: ctypes bindings of ``libencmatch.so`` and input checks.

The core exports two C functions (``docs/ABI.md``)::

    int  EMCall(const char* method, const char* args_json,
                const void* in_buf, long long in_len,
                char** out_json, void** out_buf, long long* out_len);
    void EMFree(void* p);

:func:`call` wraps them: JSON arguments in, ``(result dict, bytes or None)``
out, every returned pointer freed with ``EMFree``, failures raised as
:class:`~encmatch.errors.EncmatchError` subclasses by error kind.

The library is looked up at ``encmatch/_lib/libencmatch.so`` (built by
``make core``); the environment variable ``ENCMATCH_LIB`` may point to
another build.

This module also validates numpy input before it crosses the boundary
(:func:`as_matrix`, :func:`as_vector`), so a bad array fails with a clear
:class:`~encmatch.errors.InvalidArgument` instead of garbage in the core.
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
import weakref
from pathlib import Path
from typing import Any

import numpy as np

from .errors import Internal, InvalidArgument, LibraryNotFound, error_for

__all__ = [
    "LIB_PATH",
    "library_path",
    "call",
    "Handle",
    "as_matrix",
    "as_vector",
    "as_scores",
    "as_payloads",
    "FLOAT32",
    "INT16",
    "MAX_PAYLOAD_WIDTH",
]

#: Default location of the core library inside the package.
LIB_PATH = Path(__file__).resolve().parent / "_lib" / "libencmatch.so"

#: The wire dtype of vectors: little-endian float32.
FLOAT32 = np.dtype("<f4")
_FLOAT64 = np.dtype("<f8")

#: The wire dtype of payloads: little-endian int16.
INT16 = np.dtype("<i2")

#: The most payload values per record an index can hold.
MAX_PAYLOAD_WIDTH = 64

#: Vectors with an L2 norm at or below this are refused as zero vectors (as in the core).
MIN_NORM = 1e-12

_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


def library_path() -> Path:
    """Path of the core library: ``$ENCMATCH_LIB`` if set, else :data:`LIB_PATH`."""
    env = os.environ.get("ENCMATCH_LIB")
    return Path(env) if env else LIB_PATH


def _load() -> ctypes.CDLL:
    """Load the library once (thread-safe) and declare the C signatures."""
    global _lib
    if _lib is not None:
        return _lib
    with _lib_lock:
        if _lib is not None:
            return _lib
        path = library_path()
        if not path.is_file():
            raise LibraryNotFound(
                f"the encmatch core library is missing ({path}); "
                "build it with `make core` in the repository root"
            )
        try:
            lib = ctypes.CDLL(str(path))
        except OSError as exc:
            raise LibraryNotFound(
                f"cannot load the encmatch core library {path}: {exc}; rebuild it with `make core`"
            ) from exc
        lib.EMCall.argtypes = [
            ctypes.c_char_p,
            ctypes.c_char_p,
            ctypes.c_void_p,
            ctypes.c_longlong,
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_void_p),
            ctypes.POINTER(ctypes.c_longlong),
        ]
        lib.EMCall.restype = ctypes.c_int
        lib.EMFree.argtypes = [ctypes.c_void_p]
        lib.EMFree.restype = None
        _lib = lib
        return lib


def _input_pointer(data: Any) -> tuple[Any, int, Any]:
    """Return ``(pointer, length, keepalive)`` for ``data`` without copying when possible.

    Accepts ``None``, bytes-like objects and numpy arrays (sent as their raw
    C-contiguous bytes).
    """
    if data is None:
        return None, 0, None
    if isinstance(data, np.ndarray):
        arr = np.ascontiguousarray(data)
    else:
        try:
            arr = np.frombuffer(memoryview(data).cast("B"), dtype=np.uint8)
        except TypeError as exc:
            raise InvalidArgument(f"input data must be bytes-like or a numpy array, not {type(data).__name__}") from exc
    if arr.nbytes == 0:
        return None, 0, arr
    return ctypes.c_void_p(arr.ctypes.data), arr.nbytes, arr


def call(method: str, args: dict | None = None, data: Any = None) -> tuple[dict, bytes | None]:
    """Run one core method; return its JSON result and its output bytes (or ``None``).

    ``args`` is serialised to JSON (paths may be :class:`pathlib.Path`);
    ``data`` goes in ``in_buf`` (bytes-like or numpy array). Everything the
    core returns is freed with ``EMFree``. A failure raises the
    :class:`~encmatch.errors.EncmatchError` subclass of its error kind.
    """
    lib = _load()
    args_json = json.dumps(args or {}, default=_json_default).encode()
    ptr, length, keep = _input_pointer(data)
    out_json = ctypes.c_void_p()
    out_buf = ctypes.c_void_p()
    out_len = ctypes.c_longlong(0)
    rc = lib.EMCall(
        method.encode(),
        args_json,
        ptr,
        length,
        ctypes.byref(out_json),
        ctypes.byref(out_buf),
        ctypes.byref(out_len),
    )
    del keep
    try:
        text = ctypes.string_at(out_json.value).decode("utf-8", "replace") if out_json.value else ""
        payload = _copy_out(out_buf.value, out_len.value) if out_buf.value and out_len.value > 0 else None
    finally:
        if out_json.value:
            lib.EMFree(out_json)
        if out_buf.value:
            lib.EMFree(out_buf)
    try:
        result = json.loads(text) if text else {}
    except json.JSONDecodeError as exc:
        raise Internal(f"core method {method!r} returned invalid JSON: {text[:200]!r}") from exc
    if not isinstance(result, dict):
        raise Internal(f"core method {method!r} returned {type(result).__name__}, expected an object")
    if rc != 0:
        raise error_for(result.get("kind"), result.get("error") or f"core method {method!r} failed")
    return result, payload


def _copy_out(ptr: int, size: int) -> bytes:
    """The core's returned bytes, copied (ctypes.string_at takes a C int
    size before Python 3.13: larger buffers are copied through an array)."""
    if size < 1 << 31:
        return ctypes.string_at(ptr, size)
    return bytes((ctypes.c_char * size).from_address(ptr))


def _json_default(obj: Any) -> Any:
    """JSON encoder hook: paths as strings, numpy scalars as Python numbers."""
    if isinstance(obj, os.PathLike):
        return os.fspath(obj)
    if isinstance(obj, np.generic):
        return obj.item()
    raise TypeError(f"{type(obj).__name__} is not JSON serialisable")


def _close_handle(handle: int) -> None:
    """Close a core handle, ignoring every failure (used from finalizers)."""
    try:
        call("close", {"handle": handle})
    except Exception:  # noqa: BLE001 - a finalizer must never raise
        pass


class Handle:
    """A core handle (opened client or server) that is closed exactly once.

    Closed by :meth:`close`, by leaving a ``with`` block, or by a
    :func:`weakref.finalize` finalizer when the owner is garbage collected
    or the interpreter exits, so forgetting to close never leaks and never
    raises from ``__del__``.
    """

    def __init__(self, owner: object, handle: int):
        """Track core handle ``handle``, closing it when ``owner`` is garbage collected."""
        self.id = int(handle)
        self._finalizer = weakref.finalize(owner, _close_handle, self.id)

    @property
    def closed(self) -> bool:
        """True once the handle has been closed."""
        return not self._finalizer.alive

    def get(self) -> int:
        """Return the handle id, or raise :class:`InvalidArgument` if it is closed."""
        if not self._finalizer.alive:
            raise InvalidArgument("the handle is closed")
        return self.id

    def close(self) -> None:
        """Close the handle (idempotent)."""
        if self._finalizer.alive:
            self._finalizer.detach()
            call("close", {"handle": self.id})


# --------------------------------------------------------------------------
# Input validation at the boundary.


def as_matrix(x: Any, dim: int | None = None, name: str = "vectors", allow_1d: bool = True) -> np.ndarray:
    """Return ``x`` as a C-contiguous little-endian float32 array ``[n, dim]``, checked.

    A 1-D array is taken as one row when ``allow_1d``. Raises
    :class:`InvalidArgument` for a non-numeric array, a wrong number of axes
    or columns, an empty array, NaN or infinite values (also after the cast
    to float32) and all-zero rows (which cannot be L2-normalised).
    """
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{name}: not an array of numbers ({exc})") from exc
    if arr.dtype == object or not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise InvalidArgument(f"{name}: expected numbers, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.complexfloating):
        raise InvalidArgument(f"{name}: complex values are not supported")
    if arr.ndim == 1 and allow_1d:
        arr = arr[None, :]
    if arr.ndim != 2:
        raise InvalidArgument(f"{name}: expected a 2-D array [n, dim], got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InvalidArgument(f"{name}: empty array of shape {arr.shape}")
    if dim is not None and arr.shape[1] != dim:
        raise InvalidArgument(f"{name}: dimension {arr.shape[1]} does not match the keys' dimension {dim}")
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.ascontiguousarray(arr, dtype=FLOAT32)
    finite = np.isfinite(out).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise InvalidArgument(f"{name}: NaN or infinite values (or values too large for float32) in row(s) {_rows(bad)}")
    norms = np.linalg.norm(out.astype(_FLOAT64), axis=1)
    if not (norms > MIN_NORM).all():
        bad = np.flatnonzero(~(norms > MIN_NORM))
        raise InvalidArgument(f"{name}: zero vector(s) in row(s) {_rows(bad)}; they cannot be normalised")
    return out


def as_vector(x: Any, dim: int | None = None, name: str = "query") -> np.ndarray:
    """Return one vector (1-D, or 2-D with a single row) as checked float32 ``[dim]``."""
    arr = np.asarray(x) if not isinstance(x, np.ndarray) else x
    if arr.ndim == 2 and arr.shape[0] != 1:
        raise InvalidArgument(f"{name}: expected one vector, got shape {arr.shape}")
    return as_matrix(arr, dim, name)[0]


def as_scores(x: Any) -> np.ndarray:
    """Return similarity scores as a flat C-contiguous little-endian float64 array."""
    arr = np.ascontiguousarray(np.asarray(x, dtype=_FLOAT64).reshape(-1))
    if not np.isfinite(arr).all():
        raise InvalidArgument("scores: NaN or infinite values")
    return arr


def as_payloads(x: Any, n: int, width: int, name: str = "payloads") -> np.ndarray:
    """Return payloads as a C-contiguous little-endian int16 array ``[n, width]``, checked.

    ``[width]`` is taken as one record when ``n`` is 1. Integers of any
    dtype, and floats that hold integers, are accepted; InvalidArgument for
    anything else: a wrong shape, non-numeric values, NaN or infinities,
    fractions, values outside int16 (-32768..32767).
    """
    try:
        arr = np.asarray(x)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{name}: not an array of integers ({exc})") from exc
    if arr.dtype == object or arr.dtype == np.bool_ or not np.issubdtype(arr.dtype, np.number) \
            or np.issubdtype(arr.dtype, np.complexfloating):
        raise InvalidArgument(f"{name}: expected integers, got dtype {arr.dtype}")
    if arr.ndim == 1 and n == 1:
        arr = arr[None, :]
    if arr.shape != (n, width):
        raise InvalidArgument(f"{name}: expected shape ({n}, {width}) (one row of {width} int16 value(s) per "
                              f"vector), got {arr.shape}")
    if np.issubdtype(arr.dtype, np.floating):
        finite = np.isfinite(arr).all(axis=1)
        if not finite.all():
            raise InvalidArgument(f"{name}: NaN or infinite values in row(s) {_rows(np.flatnonzero(~finite))}")
        whole = (arr == np.round(arr)).all(axis=1)
        if not whole.all():
            raise InvalidArgument(f"{name}: values that are not integers in row(s) {_rows(np.flatnonzero(~whole))}")
    info = np.iinfo(INT16)
    inside = ((arr >= info.min) & (arr <= info.max)).all(axis=1)
    if not inside.all():
        raise InvalidArgument(f"{name}: values outside int16 ({info.min}..{info.max}) in row(s) "
                              f"{_rows(np.flatnonzero(~inside))}")
    return np.ascontiguousarray(arr, dtype=INT16)


def _rows(idx: np.ndarray, limit: int = 5) -> str:
    """Format a few row numbers for an error message."""
    head = ", ".join(str(int(i)) for i in idx[:limit])
    return head + (f" and {len(idx) - limit} more" if len(idx) > limit else "")
