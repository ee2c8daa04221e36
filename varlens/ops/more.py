"""Further torch functions: inverse trigonometric and special functions (one Function each,
derivative written beside it) and the rest composed from checked ops (so their gradients are
those ops' gradients): tan, sinh, cosh, atan2, hypot, logaddexp, xlogy, exp2, erfc, deg2rad,
rad2deg, copysign, addmm/baddbmm/addmv/addr, cross, kron, trace, tile, vstack/hstack/dstack/
column_stack, atleast_1d/2d/3d, swapdims, masked_select, take, take_along_dim, argwhere,
kthvalue, quantile, logcumsumexp, aminmax, cdist; and the non-differentiable searchsorted,
bucketize, signbit, heaviside.
"""
from __future__ import annotations

import math

from varlens.core import dtypes as DT
from varlens.core.function import Function
from varlens.core.array import xp
from varlens.core import primitives as D
from varlens.core.tensor import Tensor


def _o():
    import varlens.ops as ops
    return ops


def _T(v, like=None):
    if isinstance(v, Tensor):
        return v
    a = xp.asarray(v)
    if like is not None and a.dtype.kind != "b" and like.dtype.kind == "f":
        a = a.astype(like.dtype)
    return Tensor._make(a)


# ---------------------------------------------------------------- Functions (no primitive to compose)
class _Elementary(Function):
    """y = fn(x) for a NumPy ufunc; ``grad(g, x)`` gives the gradient from the saved input.  It is
    written with Python operators and varlens.core.primitives, so it is differentiable again."""

    def forward(self, x):
        self.save_for_backward(x)
        return self.fn(x)

    def backward(self, g):
        (x,) = self.saved
        return self.grad(g, x)


def _elementary(name, fn, grad, doc):
    """A Function class named ``name``: forward ``fn(x)``, backward ``grad(g, x)``."""
    return type(name, (_Elementary,), {"fn": staticmethod(fn), "grad": staticmethod(grad), "__doc__": doc})


Atan = _elementary("Atan", xp.arctan, lambda g, x: g / (1 + x * x), "d atan(x)/dx = 1 / (1 + x^2).")
Asin = _elementary("Asin", xp.arcsin, lambda g, x: g / D.sqrt(1 - x * x), "d asin(x)/dx = 1 / sqrt(1 - x^2).")
Acos = _elementary("Acos", xp.arccos, lambda g, x: -g / D.sqrt(1 - x * x), "d acos(x)/dx = -1 / sqrt(1 - x^2).")


class Atan2(Function):
    """atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2)."""

    def forward(self, y, x):
        self.save_for_backward(y, x)
        return xp.arctan2(y, x)

    def backward(self, g):
        y, x = self.saved
        r2 = x * x + y * y
        return g * x / r2, -g * y / r2


class Erfinv(Function):
    """y = erfinv(x): dy/dx = sqrt(pi)/2 exp(y^2) (the inverse of erf's derivative)."""

    def forward(self, x):
        from scipy.special import erfinv
        y = erfinv(x).astype(x.dtype, copy=False)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved
        return g * (0.5 * math.sqrt(math.pi)) * D.exp(y * y)


class _ScipyUnary(Function):
    """y = scipy.special.<fn>(x) in x's dtype; ``grad(g, x, y)`` gives the gradient (each op's
    derivative is written in its table row).  Second derivatives are not implemented (the
    backward calls SciPy on arrays)."""

    differentiable_backward = False
    fn = ""

    def forward(self, x):
        import scipy.special as S
        y = getattr(S, self.fn)(x).astype(x.dtype, copy=False)
        self.save_for_backward(x, y)
        return y

    def backward(self, g):
        x, y = self.saved
        return self.grad(g, x, y)


def _sp(name):
    import scipy.special as S
    return getattr(S, name)


def _scipy_unary(name, fn, grad, doc):
    """A Function class named ``name``: forward by scipy.special.<fn>, backward ``grad(g, x, y)``."""
    return type(name, (_ScipyUnary,), {"fn": fn, "grad": staticmethod(grad), "__doc__": doc})


Lgamma = _scipy_unary("Lgamma", "gammaln", lambda g, x, y: g * _sp("digamma")(x).astype(x.dtype, copy=False),
                      "d lgamma(x)/dx = digamma(x).  Second derivatives are not implemented.")
Digamma = _scipy_unary("Digamma", "digamma",
                       lambda g, x, y: g * _sp("polygamma")(1, x).astype(x.dtype, copy=False),
                       "d digamma(x)/dx = polygamma(1, x).  Second derivatives are not implemented.")


def _float(x):
    return x if x._data.dtype.kind in "fc" else x.to(DT.get_default_dtype())


def atan(x):
    return Atan.apply(_float(x))


arctan = atan


def asin(x):
    return Asin.apply(_float(x))


arcsin = asin


def acos(x):
    return Acos.apply(_float(x))


arccos = acos


def atan2(input, other):
    from varlens.ops.elementwise import _promote
    y, x = _promote(_T(input), _T(other, input))  # PyTorch's promotion first: int32 with float16 is float16
    return Atan2.apply(_float(y), _float(x))


arctan2 = atan2


def erfinv(x):
    return Erfinv.apply(_float(x))


def lgamma(x):
    return Lgamma.apply(_float(x))


def digamma(x):
    return Digamma.apply(_float(x))


# ---------------------------------------------------------------- composed elementwise
def tan(x):
    o = _o()
    return o.sin(x) / o.cos(x)


def sinh(x):
    o = _o()
    x = _float(x)
    return (o.exp(x) - o.exp(-x)) * 0.5


def cosh(x):
    o = _o()
    x = _float(x)
    return (o.exp(x) + o.exp(-x)) * 0.5


def hypot(input, other):
    return _o().sqrt(input * input + other * other)


def logaddexp(input, other):
    """log(e^a + e^b) = m + log(e^(a-m) + e^(b-m)), m = max(a, b) (no overflow)."""
    o = _o()
    other = _T(other, input)
    m = o.maximum(input, other).detach()
    return m + o.log(o.exp(input - m) + o.exp(other - m))


def xlogy(input, other):
    """x log y, defined as 0 where x == 0 (also when y == 0).  As PyTorch, d/dx = log y also
    where x == 0 (for finite y > 0), so it is x * log(y) with y replaced by 1 only where x == 0
    and log y is not finite."""
    o = _o()
    from varlens.ops.elementwise import _fl, _promote
    x, y = _promote(_T(input), _T(other, input))
    x, y = _fl(x), _fl(y)  # promoted as PyTorch (float16 with bool is float16), then made float
    yd = y._data
    bad = (x == 0)._data & ~((yd > 0) & xp.isfinite(yd))
    safe_y = o.where(bad, y * 0 + 1, y) if bad.any() else y  # no -inf * 0 in the value or gradient
    return x * o.log(safe_y)


def exp2(x):
    from varlens.ops.elementwise import exp2 as _exp2
    return _exp2(x)  # one op (exact powers of 2 for integer x)


def erfc(x):
    from varlens.ops.elementwise import erfc as _erfc
    return _erfc(x)  # one op: 1 - erf(x) loses every digit in the right tail


def deg2rad(x):
    return x * (math.pi / 180.0)


def rad2deg(x):
    return x * (180.0 / math.pi)


def copysign(input, other):
    o = _o()
    neg = xp.signbit(other._data if isinstance(other, Tensor) else xp.asarray(other))
    a = o.abs(input)
    return o.where(neg, -a, a)


def signbit(x):
    return Tensor._make(xp.signbit(x._data))


def heaviside(input, values):
    v = values._data if isinstance(values, Tensor) else values
    return Tensor._make(xp.heaviside(input._data, v).astype(input._data.dtype))


# ---------------------------------------------------------------- matrices
def addmm(input, mat1, mat2, *, beta=1, alpha=1):
    """beta * input + alpha * (mat1 @ mat2)."""
    p = _o().matmul(mat1, mat2)
    return (input * beta if beta != 1 else input) + (p * alpha if alpha != 1 else p)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    p = _o().bmm(batch1, batch2)
    return (input * beta if beta != 1 else input) + (p * alpha if alpha != 1 else p)


def addmv(input, mat, vec, *, beta=1, alpha=1):
    p = _o().mv(mat, vec)
    return (input * beta if beta != 1 else input) + (p * alpha if alpha != 1 else p)


def addr(input, vec1, vec2, *, beta=1, alpha=1):
    p = _o().outer(vec1, vec2)
    return (input * beta if beta != 1 else input) + (p * alpha if alpha != 1 else p)


def trace(x):
    if x.ndim != 2:
        raise RuntimeError(f"trace: expected a 2-D tensor, got shape {tuple(x.shape)}")
    return _o().diagonal(x).sum()


def cross(input, other, dim=None):
    """The cross product along ``dim`` (the first axis of size 3 if None, as torch.cross)."""
    o = _o()
    if dim is None:
        dims = [i for i, s in enumerate(input.shape) if s == 3]
        if not dims:
            raise RuntimeError(f"cross: no dimension of size 3 in input of shape {tuple(input.shape)}")
        dim = dims[0]
    d = dim % input.ndim
    if input.shape[d] != 3 or other.shape[d] != 3:
        raise RuntimeError(f"cross: dimension {d} must have size 3 in both inputs, got "
                           f"{tuple(input.shape)} and {tuple(other.shape)}")
    from varlens.ops.extra import narrow
    a = [narrow(input, d, i, 1) for i in range(3)]
    b = [narrow(other, d, i, 1) for i in range(3)]
    return o.cat([a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0]], d)


def kron(input, other):
    """Kronecker product: out[i*m + k, j*n + l] = a[i, j] b[k, l] (any equal number of dims)."""
    o = _o()
    a, b = input, other
    nd = max(a.ndim, b.ndim)
    a = o.reshape(a, (1,) * (nd - a.ndim) + tuple(a.shape))
    b = o.reshape(b, (1,) * (nd - b.ndim) + tuple(b.shape))
    ai = [s for s in a.shape]
    bi = [s for s in b.shape]
    a_ex = o.reshape(a, tuple(x for s in ai for x in (s, 1)))
    b_ex = o.reshape(b, tuple(x for s in bi for x in (1, s)))
    return o.reshape(a_ex * b_ex, tuple(p * q for p, q in zip(ai, bi)))


def cdist(x1, x2, p=2.0):
    """Pairwise p-norm distances between the rows of x1 (..., P, M) and x2 (..., R, M)."""
    o = _o()
    diff = o.unsqueeze(x1, -2) - o.unsqueeze(x2, -3)
    if p == 2:  # sqrt with a zero gradient at zero distance (as PyTorch), not inf * 0
        sq = (diff * diff).sum(-1)
        pos = (sq > 0)._data
        return o.where(pos, o.sqrt(o.where(pos, sq, sq * 0 + 1)), sq * 0)
    if p == 1:
        return o.abs(diff).sum(-1)
    if p == math.inf:
        return o.amax(o.abs(diff), -1)
    return (o.abs(diff) ** p).sum(-1) ** (1.0 / p)


# ---------------------------------------------------------------- shapes and selection
def atleast_1d(x):
    return x if x.ndim >= 1 else _o().reshape(x, (1,))


def atleast_2d(x):
    return x if x.ndim >= 2 else _o().reshape(x, (1, -1) if x.ndim == 1 else (1, 1))


def atleast_3d(x):
    o = _o()
    if x.ndim >= 3:
        return x
    if x.ndim == 2:
        return o.unsqueeze(x, -1)
    return o.reshape(x, (1, -1, 1) if x.ndim == 1 else (1, 1, 1))


def vstack(tensors):
    return _o().cat([atleast_2d(t) for t in tensors], 0)


row_stack = vstack


def hstack(tensors):
    ts = [atleast_1d(t) for t in tensors]
    return _o().cat(ts, 0 if ts[0].ndim == 1 else 1)


def dstack(tensors):
    return _o().cat([atleast_3d(t) for t in tensors], 2)


def column_stack(tensors):
    o = _o()
    ts = [o.reshape(t, (-1, 1)) if t.ndim <= 1 else t for t in tensors]
    return o.cat(ts, 1)


def tile(x, dims):
    dims = tuple(dims)
    o = _o()
    if len(dims) < x.ndim:
        dims = (1,) * (x.ndim - len(dims)) + dims
    elif len(dims) > x.ndim:
        x = o.reshape(x, (1,) * (len(dims) - x.ndim) + tuple(x.shape))
    return o.repeat(x, *dims)


def swapdims(x, dim0, dim1):
    return _o().transpose(x, dim0, dim1)


def masked_select(input, mask):
    m = mask._data if isinstance(mask, Tensor) else xp.asarray(mask)
    if m.dtype != bool:
        raise RuntimeError(f"masked_select: mask must be a bool tensor, got dtype {m.dtype}")
    shape = xp.broadcast_shapes(m.shape, tuple(input.shape))
    x = _o().broadcast_to(input, shape) if tuple(input.shape) != shape else input
    return x[Tensor._make(xp.broadcast_to(m, shape).copy())]


def take(input, index):
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    return _o().reshape(input, (-1,))[Tensor._make(idx.astype(DT.int64))]


def take_along_dim(input, indices, dim=None):
    o = _o()
    if dim is None:
        return take(input, o.reshape(indices, (-1,)))
    idx = indices._data if isinstance(indices, Tensor) else xp.asarray(indices)
    d = dim % input.ndim
    shape = list(xp.broadcast_shapes(tuple(input.shape[:d]) + (1,) + tuple(input.shape[d + 1:]),
                                     tuple(idx.shape[:d]) + (1,) + tuple(idx.shape[d + 1:])))
    xs = list(shape)
    xs[d] = input.shape[d]
    ishape = list(shape)
    ishape[d] = idx.shape[d]
    x = o.broadcast_to(input, tuple(xs)) if tuple(input.shape) != tuple(xs) else input
    return o.gather(x, d, Tensor._make(xp.broadcast_to(idx, ishape).astype(DT.int64)))


def argwhere(x):
    return Tensor._make(xp.argwhere(x._data).astype(DT.int64))


def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    s = sorted_sequence._data if isinstance(sorted_sequence, Tensor) else xp.asarray(sorted_sequence)
    v = values._data if isinstance(values, Tensor) else xp.asarray(values)
    sd = side or ("right" if right else "left")
    if s.ndim <= 1:
        r = xp.searchsorted(s, v, side=sd, sorter=None if sorter is None else xp.asarray(
            sorter._data if isinstance(sorter, Tensor) else sorter))
    else:
        if s.shape[:-1] != v.shape[:-1]:
            raise RuntimeError(f"searchsorted: leading dimensions of sorted_sequence {tuple(s.shape)} and "
                               f"values {tuple(v.shape)} must match")
        s2, v2 = s.reshape(-1, s.shape[-1]), v.reshape(-1, v.shape[-1])
        r = xp.stack([xp.searchsorted(a, b, side=sd) for a, b in zip(s2, v2)]).reshape(v.shape)
    return Tensor._make(xp.asarray(r).astype(DT.int32 if out_int32 else DT.int64))


def bucketize(input, boundaries, *, out_int32=False, right=False):
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


# ---------------------------------------------------------------- order statistics
from varlens.ops.return_types import aminmax as _MM, kthvalue as _KV  # noqa: E402


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest element along ``dim`` (1-based k) and its index."""
    o = _o()
    from varlens.ops.extra import narrow
    d = dim % max(input.ndim, 1)
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue: k must be in [1, {n}], got {k}")
    s = o.sort(input, d)
    v, i = narrow(s.values, d, k - 1, 1), narrow(s.indices, d, k - 1, 1)
    if not keepdim:
        v, i = o.squeeze(v, d), o.squeeze(i, d)
    return _KV(v, i)


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """Quantiles by linear interpolation between order statistics (as torch.quantile); q a float
    or a 1-D tensor (its values give a new leading dimension)."""
    o = _o()
    if interpolation not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"quantile: interpolation must be linear, lower, higher, nearest or midpoint, "
                         f"got {interpolation!r}")
    qa = q._data if isinstance(q, Tensor) else xp.asarray(q, dtype=xp.float64)
    if qa.ndim > 1 or bool(((qa < 0) | (qa > 1)).any()):
        raise ValueError("quantile: q must be a scalar or 1-D with values in [0, 1]")
    x = o.reshape(input, (-1,)) if dim is None else input
    d = 0 if dim is None else dim % x.ndim
    n = x.shape[d]
    s = o.sort(x, d).values
    from varlens.ops.extra import narrow
    outs = []
    for qq in xp.atleast_1d(qa).tolist():
        pos = qq * (n - 1)
        lo, hi = int(math.floor(pos)), int(math.ceil(pos))
        frac = pos - lo
        if interpolation == "lower":
            hi, frac = lo, 0.0
        elif interpolation == "higher":
            lo, frac = hi, 0.0
        elif interpolation == "nearest":
            lo = hi = int(round(pos)) if abs(frac - 0.5) > 1e-12 else (lo if lo % 2 == 0 else hi)
            frac = 0.0
        elif interpolation == "midpoint":
            frac = 0.5 if hi != lo else 0.0
        a = narrow(s, d, lo, 1)
        r = a if hi == lo or frac == 0.0 else a + (narrow(s, d, hi, 1) - a) * frac
        if dim is None:
            r = o.reshape(r, (1,) * input.ndim) if keepdim else o.reshape(r, ())
        elif not keepdim:
            r = o.squeeze(r, d)
        outs.append(r)
    return outs[0] if qa.ndim == 0 else o.stack(outs, 0)


def logcumsumexp(input, dim):
    """log(cumsum(exp(x))) along ``dim``, shifted by the maximum so it does not overflow."""
    o = _o()
    m = o.amax(input, dim, keepdim=True).detach()
    return o.log(o.cumsum(o.exp(input - m), dim)) + m


def aminmax(input, *, dim=None, keepdim=False):
    o = _o()
    if dim is None:
        return _MM(o.amin(input), o.amax(input))
    return _MM(o.amin(input, dim, keepdim=keepdim), o.amax(input, dim, keepdim=keepdim))


def clamp_min(input, min):  # noqa: A002
    return _o().clamp(input, min, None)


def clamp_max(input, max):  # noqa: A002
    return _o().clamp(input, None, max)


FUNCTIONS = {
    "atan": atan, "arctan": arctan, "asin": asin, "arcsin": arcsin, "acos": acos, "arccos": arccos,
    "atan2": atan2, "arctan2": arctan2, "erfinv": erfinv, "lgamma": lgamma, "digamma": digamma,
    "tan": tan, "sinh": sinh, "cosh": cosh, "hypot": hypot, "logaddexp": logaddexp, "xlogy": xlogy,
    "exp2": exp2, "erfc": erfc, "deg2rad": deg2rad, "rad2deg": rad2deg, "copysign": copysign,
    "signbit": signbit, "heaviside": heaviside, "addmm": addmm, "baddbmm": baddbmm, "addmv": addmv,
    "addr": addr, "trace": trace, "cross": cross, "kron": kron, "cdist": cdist,
    "atleast_1d": atleast_1d, "atleast_2d": atleast_2d, "atleast_3d": atleast_3d, "vstack": vstack,
    "row_stack": row_stack, "hstack": hstack, "dstack": dstack, "column_stack": column_stack,
    "tile": tile, "swapdims": swapdims, "masked_select": masked_select, "take": take,
    "take_along_dim": take_along_dim, "argwhere": argwhere, "searchsorted": searchsorted,
    "bucketize": bucketize, "kthvalue": kthvalue, "quantile": quantile, "logcumsumexp": logcumsumexp,
    "aminmax": aminmax, "clamp_min": clamp_min, "clamp_max": clamp_max,
}


def _linalg():
    from varlens.ops import linalg as L
    return {"inverse": L.inv, "det": L.det, "logdet": L.logdet, "slogdet": L.slogdet}


FUNCTIONS.update(_linalg())
_NOT_METHODS = {"atleast_1d", "atleast_2d", "atleast_3d", "vstack", "row_stack", "hstack", "dstack",
                "column_stack", "searchsorted", "bucketize", "cdist"}


def install():
    for name, fn in FUNCTIONS.items():
        if name not in _NOT_METHODS and not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
