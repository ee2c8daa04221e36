"""The primitives every backward is written in (ground floor, varlens.core).

A backward receives arrays during ordinary training and Tensors when the engine records it
(``create_graph=True``).  Python operators already work on both; the few functions a backward
also needs are here, each dispatching on the type of its first argument: on arrays they are
plain array math, on Tensors they call the Tensor's own method (``g.sum(...)``,
``g.reshape(...)``, ``x.exp()``), which the method table in varlens/ops installs.  That is a call
through the object, not an import: this module, like the rest of the core, imports nothing
above it.  Also here: the two Functions the engine itself records, ``Clone`` (d/dx = 1) and
``IndexScatter`` (the adjoint of indexing).
"""
from __future__ import annotations

from varlens.core.array import erf as _erf_array
from varlens.core.array import matmul as _matmul_array
from varlens.core.array import namespace
from varlens.core.array import sum_to as _sum_to_array
from varlens.core.array import add_at, xp
from varlens.core.function import Function
from varlens.core.tensor import Tensor


class Clone(Function):
    """out = a copy of x;  d/dx = 1 (the gradient passes through unchanged)."""

    def forward(self, x):
        return x.copy()

    def backward(self, g):
        return g


def is_basic_index(key):
    """True for a key of ints, slices, None and Ellipsis only (NumPy basic indexing: a view)."""
    ks = key if isinstance(key, tuple) else (key,)
    for k in ks:   # (a plain loop: this runs on every indexing op)
        c = k.__class__
        if c is not slice and c is not int and k is not None and k is not Ellipsis \
                and not isinstance(k, (int, slice)):
            return False
    return True


def scatter_array(g, key, shape):
    """Zeros of ``shape`` with the array ``g`` added at ``key`` (repeated indices accumulate)."""
    xp = namespace(g)
    z = xp.zeros(shape, dtype=g.dtype)
    if is_basic_index(key):
        z[key] = g
    else:
        add_at(xp, z, key, g)
    return z


class IndexScatter(Function):
    """out = zeros(shape) with g added at key;  dL/dg = out_grad[key] (the adjoint of GetItem)."""

    def forward(self, g, key, shape):
        self.key = key
        return scatter_array(g, key, shape)

    def backward(self, gg):
        return gg[self.key]


def sum_to(g, shape):
    if isinstance(g, Tensor):
        if tuple(g.shape) == tuple(shape):
            return g
        nd = g.ndim - len(shape)
        axes = tuple(range(nd)) + tuple(i + nd for i, s in enumerate(shape) if s == 1 and g.shape[i + nd] != 1)
        out = g.sum(axes, keepdim=True) if axes else g
        return out.reshape(tuple(shape))
    return _sum_to_array(g, shape)


def sum(x, axis=None, keepdims=False):  # noqa: A001
    if isinstance(x, Tensor):
        return x.sum(axis, keepdim=keepdims)
    return x.sum(axis=axis, keepdims=keepdims)


def reshape(x, shape):
    return x.reshape(shape)


def broadcast_to(x, shape):
    return x.expand(shape) if isinstance(x, Tensor) else namespace(x).broadcast_to(x, shape)


def mT(x):
    return x.transpose(-2, -1) if isinstance(x, Tensor) else namespace(x).swapaxes(x, -1, -2)


def permute(x, axes):
    return x.permute(axes) if isinstance(x, Tensor) else namespace(x).transpose(x, axes)


def matmul(a, b):
    if isinstance(a, Tensor):
        return a @ b
    if isinstance(b, Tensor):
        return b.__rmatmul__(a)
    return _matmul_array(a, b)


def _unary(name):
    fn = getattr(xp, name)

    def f(x):
        if isinstance(x, Tensor):
            return getattr(x, name)()
        if x.__class__ is xp.ndarray:
            return fn(x)
        return getattr(namespace(x), name)(x)
    f.__name__ = name
    return f


exp = _unary("exp")
log = _unary("log")
sqrt = _unary("sqrt")
tanh = _unary("tanh")
sin = _unary("sin")
cos = _unary("cos")
sign = _unary("sign")


def sigmoid(x):
    if isinstance(x, Tensor):
        return x.sigmoid()
    return _sigmoid_array(x)


def _sigmoid_array(x):
    # s = 1/(1 + e^-x) in four passes over one buffer. NumPy's exp is vectorised; SciPy's expit
    # calls libm once per element and was 6x slower on (1000, 256) float32 (1.1 ms against 0.19).
    # Both tails keep full relative precision (measured max error 2 ulp): for very negative x,
    # e^-x overflows to inf and 1/inf = 0 is the right limit, so that warning is silenced.
    xp = namespace(x)
    if x.dtype.kind in "biu":
        x = x.astype(xp.float64)  # integer input gives float64, as NumPy's (and varlens') exp does
    if x.ndim:
        e = xp.negative(x)
        with xp.errstate(over="ignore"):
            xp.exp(e, out=e)
        e += 1
        return xp.divide(1, e, out=e)
    # 0-d: exp(-|x|) never overflows: s = 1/(1 + e) for x >= 0, e/(1 + e) below
    e = xp.exp(-xp.abs(x))
    r = 1.0 / (1.0 + e)
    return xp.where(x >= 0, r, e * r).astype(x.dtype, copy=False)


def erf(x):
    if isinstance(x, Tensor):
        return x.erf()
    return _erf_array(x).astype(x.dtype, copy=False)


def where(cond, a, b):
    if isinstance(a, Tensor):
        return a.where(cond, b)
    if isinstance(b, Tensor):  # where(c, a, b) = where(not c, b, a), as a method of the Tensor b
        return b.where(~cond, a)
    return namespace(cond, a, b).where(cond, a, b)


def zeros_like(x):
    if isinstance(x, Tensor):
        return Tensor._make(namespace(x._data).zeros_like(x._data))
    return namespace(x).zeros_like(x)


def index_scatter(g, key, shape):
    """Zeros of ``shape`` with ``g`` added at ``key`` (repeated indices accumulate)."""
    if isinstance(g, Tensor):
        return IndexScatter.apply(g, key, shape)
    return scatter_array(g, key, shape)


def getitem(x, key):
    return x[key]
