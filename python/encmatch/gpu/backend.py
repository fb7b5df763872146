"""Where the kernels run: a CUDA GPU through CuPy, or the CPU.

:mod:`encmatch.gpu` computes with the kernels of ``kernels.cu``. On a GPU
they are compiled by NVRTC through CuPy; without one, the same source is
compiled by the host's C++ compiler into a shared library (cached beside
the user's other build products) and every kernel runs as a loop over its
indices. The CPU backend exists so that the engine is tested bit for bit
on every machine; it is not meant to be fast.

A :class:`Backend` owns an array module (``cupy`` or ``numpy``), allocates
arrays and launches kernels by name with a fixed signature per kernel.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import InvalidArgument

__all__ = ["Backend", "cuda_available", "get_backend"]

SOURCE = Path(__file__).resolve().parent / "kernels.cu"



def _signatures(source: str) -> dict[str, str]:
    """Each kernel's parameters, read from the source: p = array
    (pointer), i = 64-bit integer."""
    out = {}
    for m in re.finditer(r"KERNEL void (\w+)\(([^)]*)\)", source):
        params = [x.strip() for x in m.group(2).split(",")]
        out[m.group(1)] = "".join("p" if "*" in x else "i" for x in params)
    return out


SIGNATURES = _signatures(SOURCE.read_text())

_BLOCK = 256


def cuda_available() -> bool:
    """Whether CuPy is installed and sees a CUDA device."""
    try:
        import cupy  # noqa: F401

        return cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:
        return False


class Backend:
    """Arrays and kernel launches on one device (``"cuda"`` or ``"cpu"``)."""

    def __init__(self, device: str):
        self.device = device
        #: Kernel launches so far (benchmarks report launches per search).
        self.launches = 0
        #: While a dict: each launch's time is added under its kernel's name
        #: (see :meth:`profile_stop`); None: no profiling.
        self._profile: list | None = None
        if device == "cuda":
            import cupy

            self.xp = cupy
            opts = ("--std=c++17", "--fmad=false")
            self._module = cupy.RawModule(code=SOURCE.read_text(), options=opts)
            self._kernels = {name: self._module.get_function(name) for name in SIGNATURES}
            self._sms = cupy.cuda.Device().attributes["MultiProcessorCount"]
            #: Blocks that keep the device busy (block kernels size their
            #: blocks to reach it).
            self.parallelism = 4 * self._sms
        elif device == "cpu":
            self.xp = np
            self.parallelism = 1
            lib = ctypes.CDLL(str(_host_library()))
            self._kernels = {}
            for name, sig in SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype = None
                fn.argtypes = [ctypes.c_void_p if c == "p" else ctypes.c_longlong for c in sig]
                self._kernels[name] = fn
        else:
            raise InvalidArgument(f"unknown device {device!r} (want 'cuda' or 'cpu')")

    # -- arrays --------------------------------------------------------
    def empty(self, shape: Any, dtype: Any = np.uint64) -> Any:
        return self.xp.empty(shape, dtype=dtype)

    def zeros(self, shape: Any, dtype: Any = np.uint64) -> Any:
        return self.xp.zeros(shape, dtype=dtype)

    def put(self, host: np.ndarray) -> Any:
        """A device copy of a host array."""
        if self.device == "cuda":
            return self.xp.asarray(np.ascontiguousarray(host))
        return np.array(host, copy=True, order="C")

    def get(self, arr: Any) -> np.ndarray:
        """A host copy of a device array."""
        if self.device == "cuda":
            return arr.get()
        return np.array(arr, copy=True)

    def synchronize(self) -> None:
        if self.device == "cuda":
            self.xp.cuda.Device().synchronize()

    # -- kernels -------------------------------------------------------
    def launch(self, name: str, threads: int, *args: Any) -> None:
        """Run kernel ``name`` over ``threads`` indices (a grid-stride loop)."""
        sig = SIGNATURES[name]
        if len(args) != len(sig):
            raise TypeError(f"{name} takes {len(sig)} arguments, got {len(args)}")
        if threads <= 0:
            return
        fn = self._kernels[name]
        self.launches += 1
        if self._profile is not None:
            self._profile.append((name, self._mark()))
        try:
            self._launch(name, sig, fn, threads, args)
        finally:
            if self._profile is not None:
                self._profile.append((None, self._mark()))

    def launch_blocks(self, name: str, blocks: int, *args: Any) -> None:
        """Run block kernel ``name`` (one that loops over ``blocks`` blocks of
        _BLOCK threads that share memory, see kernels.cu)."""
        self.launch(name, blocks * _BLOCK, *args)

    def _mark(self) -> Any:
        if self.device == "cuda":
            event = self.xp.cuda.Event()
            event.record()
            return event
        return time.perf_counter()

    def profile_start(self) -> None:
        """Times every launch from now on (on CUDA with events, which adds
        little to the kernels' own time)."""
        self.synchronize()
        self._profile = []

    def profile_stop(self) -> dict[str, dict]:
        """Per kernel name: launches and total milliseconds since
        :meth:`profile_start`."""
        self.synchronize()
        marks, self._profile = self._profile or [], None
        out: dict[str, dict] = {}
        for (name, start), (_, end) in zip(marks[0::2], marks[1::2]):
            if self.device == "cuda":
                ms = self.xp.cuda.get_elapsed_time(start, end)
            else:
                ms = (end - start) * 1e3
            entry = out.setdefault(name, {"launches": 0, "ms": 0.0})
            entry["launches"] += 1
            entry["ms"] += ms
        return out

    def _launch(self, name: str, sig: str, fn: Any, threads: int, args: tuple) -> None:
        if self.device == "cuda":
            conv = []
            for pos, (c, a) in enumerate(zip(sig, args)):
                if c == "p":
                    if not (isinstance(a, self.xp.ndarray) and a.flags.c_contiguous):
                        raise TypeError(f"{name}: argument {pos} is not a contiguous device array ({type(a).__name__})")
                    conv.append(a)
                else:
                    conv.append(np.int64(a))
            blocks = min((threads + _BLOCK - 1) // _BLOCK, self._sms * 32)
            fn((blocks,), (_BLOCK,), tuple(conv))
        else:
            conv = []
            for pos, (c, a) in enumerate(zip(sig, args)):
                if c == "p":
                    if not (isinstance(a, np.ndarray) and a.flags.c_contiguous):
                        raise TypeError(f"{name}: argument {pos} is not a contiguous numpy array ({type(a).__name__})")
                    conv.append(a.ctypes.data)
                else:
                    conv.append(int(a))
            fn(*conv)


def _host_library() -> Path:
    """The kernels compiled for the CPU, built once per source version."""
    src = SOURCE.read_bytes()
    digest = hashlib.sha256(src).hexdigest()[:16]
    cache = Path(os.environ.get("ENCMATCH_KERNEL_CACHE", Path.home() / ".cache" / "encmatch"))
    lib = cache / f"kernels-{digest}.so"
    if lib.exists():
        return lib
    cxx = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not cxx:
        raise InvalidArgument("the CPU backend of encmatch.gpu needs a C++ compiler (g++ or clang++)")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        out = Path(tmp) / lib.name
        base = [cxx, "-O2", "-ffp-contract=off", "-shared", "-fPIC", "-DENCMATCH_HOST", "-x", "c++", str(SOURCE), "-o", str(out)]
        run = subprocess.run(base[:1] + ["-fopenmp"] + base[1:], capture_output=True, text=True)
        if run.returncode != 0:  # no OpenMP: one thread
            run = subprocess.run(base, capture_output=True, text=True)
        if run.returncode != 0:
            raise InvalidArgument(f"compiling the CPU kernels failed:\n{run.stderr[-2000:]}")
        os.replace(out, lib)  # atomic: a concurrent build leaves one whole library
    return lib


_backends: dict[str, Backend] = {}


def get_backend(device: str = "auto") -> Backend:
    """The process's backend for ``device``: ``"cuda"``, ``"cpu"`` or
    ``"auto"`` (CUDA when a GPU is visible, else the CPU)."""
    if device == "auto":
        device = "cuda" if cuda_available() else "cpu"
    if device not in _backends:
        _backends[device] = Backend(device)
    return _backends[device]
