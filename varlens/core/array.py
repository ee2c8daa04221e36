"""The array namespace: the one place varlens imports NumPy for math (ground floor, varlens.core).

Every op reaches array math through ``xp`` so a CuPy-like library with the same
API can replace NumPy later without touching the ops.  Also here: converting Python data to
arrays with PyTorch's default dtypes, BLAS routing for matmul, thread limits, cached read-only
constants and ``sum_to`` (the one unbroadcast).  The dtype objects and promotion rules are in
varlens/core/dtypes.py.
"""
from __future__ import annotations

import builtins as _builtins

import numpy as np

from varlens.core import simulated_cuda
from varlens.core.dtypes import _default_float, to_dtype

xp = np  # the host array namespace (NumPy); an op on device arrays uses namespace(...) instead

ndarray = np.ndarray


# ---------------------------------------------------------------- devices and their namespaces
# Every array lives on one device: a NumPy ndarray on the CPU, a CuPy ndarray (or, on a machine
# without a GPU, the simulated library's SimArray, core/simulated_cuda.py) on "cuda".  An op asks
# ``namespace(*arrays)`` which library to compute with; Function.apply does it once per op and
# keeps the answer on the node (``node.xp``), so forward and backward use their inputs' library.

class DeviceUnavailableError(RuntimeError, AssertionError):
    """Moving a tensor or module to a device that is not there.  PyTorch built without CUDA
    raises AssertionError("Torch not compiled with CUDA enabled") for 'cuda'; this is both that
    and a RuntimeError, so code catching either works."""


_cuda = [None]        # the CUDA array library once chosen: cupy, the simulator, or False (none)
_NS = {np.ndarray: np}   # array class -> namespace (host scalars count as NumPy)


def cuda_namespace(required=True):
    """The array library of the "cuda" device: CuPy when it imports and sees a GPU, the simulator
    after ``simulate_cuda()``; None (or, with ``required``, a clear error) when there is none."""
    lib = _cuda[0]
    if lib is None:
        lib = _cuda[0] = _probe_cupy()
    if lib is False:
        if not required:
            return None
        raise DeviceUnavailableError(
            "Torch not compiled with CUDA enabled: device 'cuda' is not available: varlens computes on "
            "CUDA through CuPy, which " + _cupy_problem[0] + ". Install it with `pip install varlens[cuda]` "
            "on a machine with an NVIDIA GPU (varlens.cuda.is_available() tells)")
    return lib


_cupy_problem = ["is not installed"]


def _probe_cupy():
    import os
    if os.environ.get("VARLENS_SIMULATED_CUDA", "") not in ("", "0"):
        return _use_simulator()
    try:
        import cupy
    except Exception as e:  # noqa: BLE001 - ImportError, or a CUDA library that fails to load
        _cupy_problem[0] = f"could not be imported ({type(e).__name__}: {e})"
        return False
    try:
        if cupy.cuda.runtime.getDeviceCount() < 1:
            _cupy_problem[0] = "sees no GPU"
            return False
    except Exception as e:  # noqa: BLE001 - no driver
        _cupy_problem[0] = f"found no usable GPU ({type(e).__name__}: {e})"
        return False
    _NS[cupy.ndarray] = cupy
    if not hasattr(cupy, "errstate"):
        cupy.errstate = np.errstate   # (a host-side context; CuPy raises no floating-point warnings)
    try:
        import cupyx.scipy.special as _sp
        cupy.special = _sp
    except Exception:  # noqa: BLE001
        pass
    return cupy


def _use_simulator():
    _NS[simulated_cuda.SimArray] = simulated_cuda.sim
    return simulated_cuda.sim


def simulate_cuda(on=True):
    """Make the simulated array library the "cuda" device (or, with False, forget the choice so
    the next use probes CuPy again).  For tests on machines without a GPU; the environment
    variable VARLENS_SIMULATED_CUDA=1 does the same at first use."""
    if on:
        _cuda[0] = _use_simulator()
    else:
        _cuda[0] = None
    return _cuda[0]


def is_array(a):
    """True for an array of any device (a NumPy ndarray, or a CUDA array)."""
    return a.__class__ in _NS or isinstance(a, np.ndarray)


def is_device_array(a):
    """True for an array on the CUDA device (CuPy's or the simulator's)."""
    c = a.__class__
    return c is not np.ndarray and c in _NS


def namespace(*arrays):
    """The array library to compute with on these arrays: NumPy for host arrays and scalars, the
    device's library when they live on "cuda".  Arrays on two devices raise PyTorch's error."""
    ns = None
    host0 = False          # every host array seen so far is 0-d (a scalar, allowed beside device arrays)
    for a in arrays:
        lib = _NS.get(a.__class__)
        if lib is None or lib is ns and lib is not np:
            continue
        if lib is np:
            if ns is None:
                ns, host0 = np, a.ndim == 0
            elif ns is np:
                host0 = host0 and a.ndim == 0
            elif a.ndim:
                raise mixed_devices(ns, np)
        elif ns is None or (ns is np and host0):
            ns = lib
        else:
            raise mixed_devices(ns, lib)
    return np if ns is None else ns


def mixed_devices(a, b):
    names = sorted({device_name(a), device_name(b)})
    return RuntimeError("Expected all tensors to be on the same device, but found at least two devices, "
                        f"{names[1]} and {names[0]}!")


def device_name(ns):
    return "cpu" if ns is np else "cuda:0"


def namespace_of_device(dev):
    """The array library of a device given as None, a name ('cpu', 'cuda', 'cuda:0') or a device."""
    if dev is None:
        return np
    if isinstance(dev, str):
        t, _, i = dev.partition(":")
        idx = int(i) if i.isdigit() else None
        if i and idx is None:
            raise RuntimeError(f"Invalid device string: {dev!r} (expected 'cpu', 'cuda' or 'cuda:N')")
    else:
        t, idx = getattr(dev, "type", None), getattr(dev, "index", None)
        if t is None:
            raise TypeError(f"device: expected a device or a string such as 'cuda', got {type(dev).__name__}")
    if t == "cpu":
        return np
    if t == "cuda":
        lib = cuda_namespace()
        if idx not in (None, 0) and idx >= device_count():
            raise RuntimeError(f"CUDA error: invalid device ordinal (device 'cuda:{idx}': only "
                               f"{device_count()} CUDA device(s))")
        return lib
    raise RuntimeError(f"device: expected 'cpu' or 'cuda', got {str(dev)!r} (varlens has no {t!r} backend)")


def device_count():
    lib = cuda_namespace(required=False)
    if lib is None:
        return 0
    if getattr(lib, "simulated", False):
        return 1
    return lib.cuda.runtime.getDeviceCount()


def add_at(xp, a, key, values):
    """``a[key] += values`` with repeated indices accumulating (NumPy's ufunc.at; CuPy's scatter_add)."""
    at = getattr(xp.add, "at", None)
    if at is not None:
        at(a, key, values)
    else:  # pragma: no cover - CuPy versions without ufunc.at
        import cupyx
        cupyx.scatter_add(a, key, values)


def special(xp):
    """SciPy's special functions for this array library (scipy.special, or cupyx.scipy.special)."""
    if xp is np:
        import scipy.special
        return scipy.special
    return xp.special


def to_namespace(a, lib):
    """``a`` (an array of any device) copied to ``lib``'s device; the same array when already there."""
    src = _NS.get(a.__class__, np)
    if src is lib:
        return a
    if lib is np:
        return src.asnumpy(a)       # device -> host: a synchronisation
    if src is np:
        return lib.asarray(a)       # host -> device
    raise mixed_devices(src, lib)   # pragma: no cover - one CUDA library at a time


def to_host(a):
    """A host (NumPy) array with ``a``'s values (a copy for device arrays)."""
    return a if a.__class__ is np.ndarray else to_namespace(a, np) if a.__class__ in _NS else np.asarray(a)

def _has_numpy_float64(data, depth=2):
    """True if a (nested) list holds NumPy float64 arrays or scalars: torch.tensor keeps float64
    for those, where Python floats become the default dtype.  Looks two levels deep."""
    if not isinstance(data, (list, tuple)):
        return False
    for e in data:
        if isinstance(e, (np.ndarray, np.generic)) and e.dtype == np.float64:
            return True
        if depth > 1 and isinstance(e, (list, tuple)) and _has_numpy_float64(e, depth - 1):
            return True
    return False


def as_array(data, dtype=None):
    """Convert Python data to an array with PyTorch's default-dtype rules.

    Python floats (and float64 arrays made from them) become the default float
    dtype; NumPy arrays keep their dtype unless one is given.
    """
    if data.__class__ in _NS and data.__class__ is not np.ndarray:   # a device array stays there
        return data if dtype is None else data.astype(to_dtype(dtype))
    if dtype is not None:
        return np.asarray(data, dtype=to_dtype(dtype))
    if isinstance(data, np.ndarray):
        return data
    arr = np.asarray(data)
    if arr.dtype == np.float64 and not isinstance(data, np.generic) and not _has_numpy_float64(data):
        arr = arr.astype(_default_float[0])
    elif arr.dtype.kind == "i" and arr.dtype != np.int64 and not isinstance(data, np.generic):
        arr = arr.astype(np.int64)   # (a NumPy scalar keeps its dtype, as in torch.tensor(np.int32(3)))
    elif arr.dtype.kind == "f" and isinstance(data, np.generic):
        pass
    elif arr.dtype.kind not in "fiub":
        raise TypeError(f"tensor(): cannot build a tensor from data of type {type(data).__name__} "
                        f"(NumPy made dtype {arr.dtype}); expected numbers, nested lists or an array")
    return arr


def matmul(a, b):
    """a @ b routed so BLAS does the work (on a device: the device library's matmul, cuBLAS).

    NumPy's stacked matmul falls off the BLAS path when a matrix in the stack is a
    transposed view (10x slower on attention shapes), and an (N-D) @ (2-D) product is
    faster as one big GEMM than as a stack of small ones.  Both cases are fixed here.
    """
    if a.__class__ is not np.ndarray or b.__class__ is not np.ndarray:
        return namespace(a, b).matmul(a, b)
    if b.ndim == 2 and a.ndim > 2:
        k = a.shape[-1]
        return np.matmul(a.reshape(-1, k), b).reshape(a.shape[:-1] + (b.shape[1],))
    if a.ndim > 2 and not a.flags.c_contiguous and not _blasable(a):
        a = np.ascontiguousarray(a)
    if b.ndim > 2 and not b.flags.c_contiguous and not _blasable(b):
        b = np.ascontiguousarray(b)
    return np.matmul(a, b)


def _blasable(a):
    """The stacked matrices have a unit stride along one of their two axes (a transposed or
    row-strided view, e.g. attention's heads split from a fused QKV): NumPy hands each to
    BLAS with a transpose flag or leading dimension, faster than copying the stack first."""
    st, it = a.strides, a.itemsize
    return (st[-1] == it and st[-2] >= it * a.shape[-1]) or (st[-2] == it and st[-1] >= it * a.shape[-2])


_thread_limit = [None]


_CONST = {}


def _const(key, make, *args):
    """A read-only array ``make(*args)``, built once and kept under ``key`` (a small cache)."""
    a = _CONST.get(key)
    if a is None:
        if len(_CONST) >= 256:
            _CONST.clear()
        a = _CONST[key] = make(*args)
        a.flags.writeable = False
    return a


def zeros_cached(shape, dtype):
    """Read-only zeros of this shape and dtype, cached.

    ``np.maximum(x, 0)`` with a scalar runs an unvectorised loop (several times slower than
    against an array of zeros), so ReLU compares against one of these instead.
    """
    return _const(("zeros", shape, dtype), np.zeros, shape, dtype)


def ones_cached(shape, dtype):
    """Read-only ones of this shape (an int n for a vector), cached: sums as BLAS
    matrix-vector products use them, and backward's implicit output gradient is one."""
    return _const(("ones", shape, dtype), np.ones, shape, dtype)


def arange_cached(start, stop, step):
    """A read-only int64 ``arange(start, stop, step)``, cached (row offsets for flat indexing)."""
    return _const(("arange", start, stop, step), np.arange, start, stop, step)


def set_num_threads(n: int) -> None:
    """Limit the BLAS threads NumPy uses (torch.set_num_threads).  On a shared or small
    machine one thread per process is often faster for small matrices."""
    if not isinstance(n, _builtins.int) or n < 1:
        raise ValueError(f"set_num_threads: n must be a positive int, got {n!r}")
    from threadpoolctl import threadpool_limits
    _thread_limit[0] = threadpool_limits(limits=n, user_api="blas")


def get_num_threads() -> int:
    from threadpoolctl import threadpool_info
    counts = [p["num_threads"] for p in threadpool_info() if p.get("user_api") == "blas"]
    return max(counts) if counts else 1


# ---------------------------------------------------------------- host allocator
# NumPy takes array memory from glibc's malloc.  glibc serves blocks of 128 KiB and up by mmap
# until one such block is freed, then raises that threshold to the freed size and trims the top
# of its heap whenever more than twice that lies free.  A training step allocates and frees a
# few MB of activations and gradients, so the heap top is handed back to the kernel at the end
# of every step and faulted in again (pages zeroed by the kernel) in the next: the char-LSTM
# training step of bench_user_programs.py (2-layer LSTM 128, batch 32x32) took 625 page faults
# and 1.7 ms of system time per ~22 ms step (AMD EPYC, 2026-12-01; same-process runs with the
# thresholds below: 0 faults, step 24.3-26.7 -> 22.0-23.9 ms median).  Fixed thresholds of
# 32 MiB for mmap (glibc's own ceiling for the dynamic one) and 64 MiB for trimming keep those
# pages; larger arrays still come and go by mmap.  glibc only (elsewhere nothing is changed);
# VARLENS_MALLOC_TUNE=0 leaves malloc as it is.
_MMAP_THRESHOLD, _TRIM_THRESHOLD = 32 << 20, 64 << 20


def _tune_host_malloc():
    """Set glibc's mmap and trim thresholds (above); True when both were set."""
    import os
    import sys
    if os.environ.get("VARLENS_MALLOC_TUNE", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None)
        if not hasattr(libc, "gnu_get_libc_version"):   # not glibc (musl's mallopt does nothing)
            return False
        # M_MMAP_THRESHOLD = -3, M_TRIM_THRESHOLD = -1 (malloc.h)
        return bool(libc.mallopt(-3, _MMAP_THRESHOLD)) and bool(libc.mallopt(-1, _TRIM_THRESHOLD))
    except (OSError, AttributeError):
        return False


_MALLOC_TUNED = _tune_host_malloc()


def sum_to(a, shape):
    """Sum ``a`` down to ``shape`` (the inverse of broadcasting); the one unbroadcast."""
    if a.shape == shape:
        return a
    if not hasattr(a, "ndim"):
        a = np.asarray(a)
    nd = a.ndim - len(shape)
    axes = tuple(range(nd)) + tuple(i + nd for i, s in enumerate(shape) if s == 1 and a.shape[i + nd] != 1)
    out = a.sum(axis=axes, keepdims=True) if axes else a
    if nd:
        out = out.reshape(out.shape[nd:])
    return out.reshape(shape)


from scipy.special import erf as _scipy_erf  # vectorised erf (exact GELU, the normal CDF)


def erf(x, out=None):
    """The error function on host or device arrays (SciPy's, or the device library's)."""
    if x.__class__ is np.ndarray or not hasattr(x, "ndim"):
        return _scipy_erf(x) if out is None else _scipy_erf(x, out=out)
    f = special(namespace(x)).erf   # (a NumPy scalar from 0-d math: namespace is NumPy)
    return f(x) if out is None else f(x, out=out)
