"""Comparisons and logical ops: no gradient (their outputs are bool or integer).  Each computes
with its inputs' array library (NumPy, or the CUDA device's: ``B.namespace``); host arrays
with host operands take NumPy's function directly (these are the Tensor's operators)."""
from __future__ import annotations

from varlens.core.arg_rules import torch_args
from varlens.core import array as B
from varlens.core.array import xp as _np   # the host library
from varlens.core.tensor import Tensor
from varlens.ops._args import _arr as _arr_args
from varlens.ops._args import _tensor


def _arr(v):
    return v._data if isinstance(v, Tensor) else v


_ndarray = _np.ndarray
_HOST = {_ndarray, int, float, bool}   # operands NumPy's function takes as they are


def _mk(name):
    """The comparison or logical function ``name`` of the array library, on Tensors or numbers."""
    host = getattr(_np, name)

    @torch_args(tensor_first=True)
    def f(a, b=None):
        x = _arr(a)
        if b is None:
            if x.__class__ is _ndarray:
                return Tensor._make(_np.asarray(host(x)))
            xp = B.namespace(x)
            return Tensor._make(xp.asarray(getattr(xp, name)(x)))
        y = _arr(b)
        if x.__class__ is _ndarray and y.__class__ in _HOST:
            return Tensor._make(_np.asarray(host(x, y)))
        xp = B.namespace(x, y)
        return Tensor._make(xp.asarray(getattr(xp, name)(x, y)))
    f.__name__ = f.__qualname__ = name
    return f


eq = _mk("equal")
ne = _mk("not_equal")
lt = _mk("less")
le = _mk("less_equal")
gt = _mk("greater")
ge = _mk("greater_equal")
logical_and = _mk("logical_and")
logical_or = _mk("logical_or")
logical_xor = _mk("logical_xor")
logical_not = _mk("logical_not")
isnan = _mk("isnan")
isinf = _mk("isinf")
isfinite = _mk("isfinite")


bitwise_and = _mk("bitwise_and")
bitwise_or = _mk("bitwise_or")
bitwise_not = _mk("invert")


@torch_args(tensor_first=True)
def equal(a, b):
    """True when both have the same shape and values (a Python bool: on CUDA a host read, as in
    PyTorch)."""
    if a.shape != b.shape:
        return False
    x, y = a._data, b._data
    return bool(B.namespace(x, y).array_equal(x, y))


@torch_args(tensor_first=True)
def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    """A Python bool (on CUDA a host read, as in PyTorch)."""
    x, y = _arr(a), _arr(b)
    return bool(B.namespace(x, y).allclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan))


@torch_args(tensor_first=True)
def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    x, y = _arr(a), _arr(b)
    return Tensor._make(B.namespace(x, y).isclose(x, y, rtol=rtol, atol=atol, equal_nan=equal_nan))


# PyTorch's other names for the same functions
greater = gt
less = lt


@torch_args(tensor_first=True)
def isposinf(input):  # noqa: A002
    a = _tensor(input, "isposinf: input")._data
    return Tensor._make(B.namespace(a).isposinf(a))


@torch_args(tensor_first=True)
def isneginf(input):  # noqa: A002
    a = _tensor(input, "isneginf: input")._data
    return Tensor._make(B.namespace(a).isneginf(a))


@torch_args(tensor_first=True)
def bitwise_xor(input, other):  # noqa: A002
    a, b = _arr_args(input), _arr_args(other)
    if a.dtype.kind not in "iub" or b.dtype.kind not in "iub":
        raise RuntimeError(f"bitwise_xor: expected integer or bool tensors, got {a.dtype} and {b.dtype}")
    xp = B.namespace(a, b)
    return Tensor._make(xp.asarray(xp.bitwise_xor(a, b)))


@torch_args(tensor_first=True)
def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` occurs in ``test_elements`` (either may be a number)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: elements or test_elements must be a Tensor")
    e, t = _arr_args(elements), _arr_args(test_elements)
    xp = B.namespace(e, t)
    return Tensor._make(xp.asarray(xp.isin(e, t, assume_unique=assume_unique, invert=invert)))


@torch_args(tensor_first=True)
def greater_equal(input, other):  # noqa: A002
    return ge(input, other)


@torch_args(tensor_first=True)
def less_equal(input, other):  # noqa: A002
    return le(input, other)


@torch_args(tensor_first=True)
def not_equal(input, other):  # noqa: A002
    return ne(input, other)
