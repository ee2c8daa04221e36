"""Comparisons and logical ops: no gradient (their outputs are bool or integer)."""
from __future__ import annotations

from varlens.core.function import Function
from varlens.core.array import xp


def _arr(v):
    from varlens.core.tensor import Tensor
    return v._data if isinstance(v, Tensor) else v


def _mk(fn):
    from varlens.core.tensor import Tensor

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


class _Step(Function):
    """A piecewise-constant map (floor, ceil, round, trunc): derivative 0 almost everywhere,
    so backward returns zeros (as PyTorch, which keeps these ops differentiable)."""

    fn = None

    def forward(self, x, *args):
        if x.dtype.kind in "biu":
            if x.dtype.kind == "b":
                raise NotImplementedError(f'"{type(self).__name__.lower()}" not implemented for \'Bool\' '
                                          "(a bool tensor); convert it with .float() or .long() first")
            return x.copy()
        return type(self).fn(x, *args)

    def backward(self, g):
        return g * 0


class Floor(_Step):
    fn = staticmethod(xp.floor)


class Ceil(_Step):
    fn = staticmethod(xp.ceil)


class Round(_Step):
    fn = staticmethod(xp.round)


class Trunc(_Step):
    fn = staticmethod(xp.trunc)


def floor(x):
    return Floor.apply(x)


def ceil(x):
    return Ceil.apply(x)


def round(x, *, decimals=0):  # noqa: A001
    return Round.apply(x) if decimals == 0 else Round.apply(x, decimals)


def trunc(x):
    return Trunc.apply(x)

from varlens.ops.elementwise import floor_divide, remainder  # noqa: E402,F401  (promoted as PyTorch; % differentiable)
bitwise_and = _mk(xp.bitwise_and)
bitwise_or = _mk(xp.bitwise_or)
bitwise_not = _mk(xp.invert)


def equal(a, b):
    return bool(a.shape == b.shape and xp.array_equal(a._data, b._data))


def allclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    return bool(xp.allclose(_arr(a), _arr(b), rtol=rtol, atol=atol, equal_nan=equal_nan))


def isclose(a, b, rtol=1e-05, atol=1e-08, equal_nan=False):
    from varlens.core.tensor import Tensor
    return Tensor._make(xp.isclose(_arr(a), _arr(b), rtol=rtol, atol=atol, equal_nan=equal_nan))
