"""Comparisons and logical ops: no gradient (their outputs are bool or integer)."""
from __future__ import annotations

from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.ops._args import _arr as _arr_args
from varlens.ops._args import _tensor


def _arr(v):
    return v._data if isinstance(v, Tensor) else v


def _mk(fn):

    def f(a, b=None):
        r = fn(_arr(a)) if b is None else fn(_arr(a), _arr(b))
        return Tensor._make(xp.asarray(r))
    return f


eq = _mk(xp.equal)
ne = _mk(xp.not_equal)
lt = _mk(xp.less)
le = _mk(xp.less_equal)
gt = _mk(xp.greater)
ge = _mk(xp.greater_equal)
logical_and = _mk(xp.logical_and)
logical_or = _mk(xp.logical_or)
logical_xor = _mk(xp.logical_xor)
logical_not = _mk(xp.logical_not)
isnan = _mk(xp.isnan)
isinf = _mk(xp.isinf)
isfinite = _mk(xp.isfinite)


bitwise_and = _mk(xp.bitwise_and)
bitwise_or = _mk(xp.bitwise_or)
bitwise_not = _mk(xp.invert)


def equal(a, b):
    return bool(a.shape == b.shape and xp.array_equal(a._data, b._data))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(xp.allclose(_arr(a), _arr(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return Tensor._make(xp.isclose(_arr(a), _arr(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


# PyTorch's other names for the same functions
greater = gt
less = lt


def isposinf(input):  # noqa: A002
    return Tensor._make(xp.isposinf(_tensor(input, "isposinf: input")._data))


def isneginf(input):  # noqa: A002
    return Tensor._make(xp.isneginf(_tensor(input, "isneginf: input")._data))


def bitwise_xor(input, other):  # noqa: A002
    a, b = _arr_args(input), _arr_args(other)
    if a.dtype.kind not in "iub" or b.dtype.kind not in "iub":
        raise RuntimeError(f"bitwise_xor: expected integer or bool tensors, got {a.dtype} and {b.dtype}")
    return Tensor._make(xp.asarray(xp.bitwise_xor(a, b)))


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` occurs in ``test_elements`` (either may be a number)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: elements or test_elements must be a Tensor")
    e, t = _arr_args(elements), _arr_args(test_elements)
    return Tensor._make(xp.asarray(xp.isin(e, t, assume_unique=assume_unique, invert=invert)))


def greater_equal(input, other):  # noqa: A002
    return ge(input, other)


def less_equal(input, other):  # noqa: A002
    return le(input, other)


def not_equal(input, other):  # noqa: A002
    return ne(input, other)
