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

from varlens.core.dtypes import _default_float, to_dtype

xp = np  # the array namespace used by every op

ndarray = np.ndarray

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
    """a @ b routed so BLAS does the work.

    NumPy's stacked matmul falls off the BLAS path when a matrix in the stack is a
    transposed view (10x slower on attention shapes), and an (N-D) @ (2-D) product is
    faster as one big GEMM than as a stack of small ones.  Both cases are fixed here.
    """
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


def sum_to(a, shape):
    """Sum ``a`` down to ``shape`` (the inverse of broadcasting); the one unbroadcast."""
    if a.shape == shape:
        return a
    nd = a.ndim - len(shape)
    axes = tuple(range(nd)) + tuple(i + nd for i, s in enumerate(shape) if s == 1 and a.shape[i + nd] != 1)
    out = a.sum(axis=axes, keepdims=True) if axes else a
    if nd:
        out = out.reshape(out.shape[nd:])
    return out.reshape(shape)


try:  # erf for the exact GELU and the normal CDF; SciPy has a vectorised one
    from scipy.special import erf  # noqa: F401
except ImportError:  # pragma: no cover - SciPy is a declared dependency
    import math as _math
    erf = np.vectorize(_math.erf, otypes=[np.float64])


try:  # logistic sigmoid in one C pass, exact in both tails (used by core/primitives.py _sigmoid_array)
    from scipy.special import expit  # noqa: F401
except ImportError:  # pragma: no cover - SciPy is a declared dependency
    expit = None
