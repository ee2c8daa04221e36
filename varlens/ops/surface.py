"""More of the torch.* / Tensor.* function surface that model and training code reaches for.

Functions of their own (derivative written beside the forward): cumprod (exact gradient when the
input has zeros), sinc, asinh/acosh/atanh.  Everything else is composed from checked ops, so its
gradient is those ops' gradient: cummax/cummin/mode/nanmedian (values gathered at the returned
indices), block_diag, cartesian_prod, combinations, float_power, masked_scatter, index_put with
accumulate, put, trapezoid/cumulative_trapezoid, cov/corrcoef, renorm, diag_embed/diagflat,
tensordot/inner/vdot, chain_matmul, addcmul/addcdiv/addbmm, dist, nansum/nanmean, vander,
fmax/fmin, logaddexp2, ldexp, scatter_reduce, select/slice/diagonal_scatter, the split family.
Non-differentiable: nextafter, isin, histogram, logspace, tril/triu_indices, unique_consecutive,
unravel_index, gcd/lcm, frexp, bit shifts.  ``install`` puts the methods (and in-place variants)
on Tensor; ``FUNCTIONS`` is what varlens.ops adds to the namespace.
"""
from __future__ import annotations

import itertools
import math
from collections import namedtuple

from varlens.core import dtypes as DT
from varlens.core import grad_mode as _gm
from varlens.core.function import Function
from varlens.core.array import xp
from varlens.core import primitives as D
from varlens.ops.more import _elementary, _scipy_unary, _sp
from varlens.core.tensor import Tensor
from varlens.ops.tensor_methods import _random_


def _o():
    import varlens.ops as ops
    return ops


def _arr(v):
    return v._data if isinstance(v, Tensor) else xp.asarray(v)


def _tensor(v, what="input"):
    if isinstance(v, Tensor):
        return v
    raise TypeError(f"{what} must be a Tensor, got {type(v).__name__}")


def _dim(x, dim, what, ndim=None):
    n = x.ndim if ndim is None else ndim
    n1 = max(n, 1)
    if not isinstance(dim, int) or isinstance(dim, bool):
        raise TypeError(f"{what}: dim must be an int, got {type(dim).__name__}")
    if not -n1 <= dim < n1:
        raise IndexError(f"{what}: dim {dim} is out of range for a tensor with {n} dimensions "
                         f"(expected to be in [{-n1}, {n1 - 1}])")
    return dim % n1


def _float(x):
    return x if x.dtype.kind == "f" else _o().cast(x, DT.get_default_dtype())


def _to_last(x, d):
    """Permutation moving dim d to the end, and its inverse."""
    order = [i for i in range(x.ndim) if i != d] + [d]
    inv = [0] * len(order)
    for i, o in enumerate(order):
        inv[o] = i
    return order, inv


def _result_dtype(dtypes):
    fl = [d for d in dtypes if d.kind == "f"]
    if fl:
        return max(fl, key=lambda d: d.itemsize)
    ints = [d for d in dtypes if d.kind in "iu"]
    return xp.result_type(*ints) if ints else xp.dtype(bool)


# ---------------------------------------------------------------- Functions
def _revcumsum(a):
    return xp.flip(xp.cumsum(xp.flip(a, -1), -1), -1)


class CumProd(Function):
    """y_i = prod_{k<=i} x_k along dim.  dL/dx_j = sum_{i>=j} g_i prod_{k<=i, k!=j} x_k.
    Without zeros this is revcumsum(g*y)_j / x_j.  Where a slice has zeros, entries before the
    first zero keep that formula (every later y_i is 0 anyway), the first zero gets
    revcumsum(g*y')_j with y' the cumulative product taken with that zero replaced by 1, and
    entries after it get 0 (their products all contain the zero).  The product rule of
    seed 003 §1 (backprop through a product) applied to a running product."""

    differentiable_backward = False

    def forward(self, x, dim):
        self.dim = dim
        y = xp.cumprod(x, axis=dim)
        self.save_for_backward(x, y)
        return y

    def backward(self, g):
        x, y = self.saved
        d = self.dim
        x, y, g = (xp.moveaxis(a, d, -1) for a in (x, y, g))
        zero = x == 0
        gy = g * y
        if not zero.any():
            gx = _revcumsum(gy) / x
        else:
            nz = xp.cumsum(zero, -1)
            before = nz == 0
            first = zero & (nz == 1)
            gx = xp.where(before, _revcumsum(gy) / xp.where(before, x, 1), 0)
            y1 = xp.cumprod(xp.where(first, 1, x), -1)
            gx = gx + xp.where(first, _revcumsum(g * y1), 0)
        return xp.moveaxis(gx, -1, d), None

    @staticmethod
    def composite(x, dim):
        """The running product as a chain of multiplications (differentiable twice)."""
        o = _o()
        parts = o.unbind(x, dim)
        run, outs = parts[0], [parts[0]]
        for p in parts[1:]:
            run = run * p
            outs.append(run)
        return o.stack(outs, dim)


class Sinc(Function):
    """sinc(x) = sin(pi x)/(pi x), 1 at 0.  d/dx = (cos(pi x) - sinc(x)) / x, 0 at x = 0."""

    def forward(self, x):
        self.save_for_backward(x)
        return xp.sinc(x)

    def backward(self, g):
        (x,) = self.saved
        zero = x == 0
        xs = D.where(zero, 1.0, x)  # a safe stand-in at 0, so no 0/0 reaches either branch
        px = xs * math.pi
        return D.where(zero, 0.0, g * ((D.cos(px) - D.sin(px) / px) / xs))


Asinh = _elementary("Asinh", xp.arcsinh, lambda g, x: g / D.sqrt(x * x + 1), "d asinh(x)/dx = 1 / sqrt(x^2 + 1).")
Acosh = _elementary("Acosh", xp.arccosh, lambda g, x: g / D.sqrt(x * x - 1),
                    "d acosh(x)/dx = 1 / sqrt(x^2 - 1) (x > 1).")
Atanh = _elementary("Atanh", xp.arctanh, lambda g, x: g / (1 - x * x), "d atanh(x)/dx = 1 / (1 - x^2) (|x| < 1).")


class Polygamma(Function):
    """psi^(n)(x), the n-th derivative of digamma; d/dx = psi^(n+1)(x).  Under create_graph the
    backward calls polygamma itself, so every order is differentiable."""

    def forward(self, x, n):
        from scipy.special import polygamma as _pg
        self.n = n
        self.save_for_backward(x)
        return _pg(n, x).astype(x.dtype, copy=False)

    def backward(self, g):
        (x,) = self.saved
        if isinstance(x, Tensor):
            return g * polygamma(self.n + 1, x), None
        from scipy.special import polygamma as _pg
        return g * _pg(self.n + 1, x).astype(x.dtype, copy=False), None


I0 = _scipy_unary("I0", "i0", lambda g, x, y: g * _sp("i1")(x).astype(x.dtype, copy=False),
                  "Modified Bessel function I0; d/dx = I1(x).  Second derivatives are not implemented.")


class IGamma(Function):
    """Regularised lower (upper=False) or upper incomplete gamma P(a, x) / Q(a, x).  Only the
    gradient in x exists (as PyTorch): dP/dx = x^(a-1) e^(-x) / Gamma(a), and dQ/dx = -dP/dx.
    Second derivatives are not implemented."""

    differentiable_backward = False

    def forward(self, a, x, upper):
        from scipy.special import gammainc, gammaincc
        self.upper = upper
        self.save_for_backward(a, x)
        dt = xp.result_type(a, x)
        return (gammaincc if upper else gammainc)(a, x).astype(dt, copy=False)

    def backward(self, g):
        from scipy.special import gammaln
        a, x = self.saved
        with xp.errstate(divide="ignore", invalid="ignore"):
            d = xp.exp((a - 1) * xp.log(x) - x - gammaln(a))
        return None, g * (-d if self.upper else d)


def polygamma(n, input):  # noqa: A002
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise RuntimeError(f"polygamma: n must be a non-negative int, got {n!r}")
    return Polygamma.apply(_float(_tensor(input, "polygamma: input")), n)


def i0(input):  # noqa: A002
    return I0.apply(_float(_tensor(input, "i0: input")))


def _igamma(input, other, upper):  # noqa: A002
    what = "igammac" if upper else "igamma"
    a, x = _tensor(input, f"{what}: input"), _tensor(other, f"{what}: other")
    if a.requires_grad and _gm.is_grad_enabled():
        raise NotImplementedError(f"{what}: the derivative with respect to input (the shape a) is not "
                                  "implemented (as in PyTorch); detach it")
    a, x = _float(a), _float(x)
    return IGamma.apply(a, x, upper)


def igamma(input, other):  # noqa: A002
    return _igamma(input, other, False)


def igammac(input, other):  # noqa: A002
    return _igamma(input, other, True)


def poisson(input, generator=None):  # noqa: A002
    """Poisson draws with the given rates (input's dtype, never requires grad)."""
    from varlens.random import _gen
    x = _tensor(input, "poisson: input")
    if bool((x._data < 0).any()):
        raise RuntimeError("poisson: rates must be non-negative")
    return Tensor._make(_gen(generator).rng.poisson(x._data).astype(x.dtype))


def binomial(count, prob, generator=None):
    from varlens.random import _gen
    c, p = _tensor(count, "binomial: count"), _tensor(prob, "binomial: prob")
    if bool(((p._data < 0) | (p._data > 1)).any()):
        raise RuntimeError("binomial: prob must be in [0, 1]")
    return Tensor._make(_gen(generator).rng.binomial(c._data.astype(xp.int64), p._data).astype(c.dtype))


def cumprod(input, dim, *, dtype=None):  # noqa: A002
    x = _tensor(input, "cumprod: input")
    if dtype is not None:
        x = _o().cast(x, DT.to_dtype(dtype))
    elif x.dtype.kind in "bu":
        x = _o().cast(x, DT.to_dtype("int64"))  # bool/uint8 products are int64, as PyTorch
    if x.ndim == 0:
        return _o().clone(x)
    return CumProd.apply(x, _dim(x, dim, "cumprod"))


def sinc(input):  # noqa: A002
    return Sinc.apply(_float(_tensor(input, "sinc: input")))


def asinh(input):  # noqa: A002
    return Asinh.apply(_float(_tensor(input, "asinh: input")))


def acosh(input):  # noqa: A002
    return Acosh.apply(_float(_tensor(input, "acosh: input")))


def atanh(input):  # noqa: A002
    return Atanh.apply(_float(_tensor(input, "atanh: input")))


# ---------------------------------------------------------------- running extremes, mode, nan-reductions
from varlens.ops.return_types import cummax as _CumMax, cummin as _CumMin  # noqa: E402
from varlens.ops.return_types import mode as _Mode, nanmedian as _NanMedian  # noqa: E402


def _cum_extreme(input, dim, what, better):
    x = _tensor(input, f"{what}: input")
    if x.ndim == 0:
        return _o().clone(x), Tensor._make(xp.zeros((), dtype=DT.int64))
    d = _dim(x, dim, what)
    a = xp.moveaxis(x._data, d, -1)
    n = a.shape[-1]
    acc = (xp.maximum if better is xp.greater_equal else xp.minimum).accumulate(a, axis=-1)
    # a position takes over when it is at least as good as the running extreme before it (ties move
    # the index forward, as PyTorch); a NaN takes over and stays the value until the next NaN
    prev = xp.concatenate([a[..., :1], acc[..., :-1]], -1)
    nan = xp.isnan(a) if a.dtype.kind == "f" else xp.zeros(a.shape, bool)
    prev_nan = xp.isnan(prev) if a.dtype.kind == "f" else nan
    with xp.errstate(invalid="ignore"):
        take = nan | (better(a, prev) & ~prev_nan)
    take[..., 0] = True
    idx = xp.maximum.accumulate(xp.where(take, xp.arange(n), 0), axis=-1)
    idx = xp.moveaxis(idx, -1, d).astype(DT.int64)
    it = Tensor._make(idx)
    return _o().gather(x, d, it), it


def cummax(input, dim):  # noqa: A002
    """Running maximum along ``dim`` and where it was last reached (values, indices)."""
    return _CumMax(*_cum_extreme(input, dim, "cummax", xp.greater_equal))


def cummin(input, dim):  # noqa: A002
    return _CumMin(*_cum_extreme(input, dim, "cummin", xp.less_equal))


def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """Most frequent value along ``dim`` (the smallest among equally frequent ones) and the index
    of its last occurrence, as PyTorch; the value is gathered, so its gradient goes there."""
    x = _tensor(input, "mode: input")
    if x.ndim == 0:
        return _Mode(_o().clone(x), Tensor._make(xp.zeros((), dtype=DT.int64)))
    d = _dim(x, dim, "mode")
    a = xp.moveaxis(x._data, d, -1)
    n = a.shape[-1]
    if n == 0:
        raise IndexError(f"mode: dimension {d} is empty; cannot take a mode of zero elements")
    s = xp.sort(a, -1)
    start = xp.ones(s.shape, bool)
    start[..., 1:] = s[..., 1:] != s[..., :-1]
    ar = xp.arange(n)
    run_start = xp.maximum.accumulate(xp.where(start, ar, 0), axis=-1)
    count = ar - run_start + 1
    best = xp.take_along_axis(s, xp.argmax(count, -1)[..., None], -1)
    last = n - 1 - xp.argmax(xp.flip(a == best, -1), -1)
    idx = xp.moveaxis(last[..., None], -1, d).astype(DT.int64)
    it = Tensor._make(idx)
    vals = _o().gather(x, d, it)
    if not keepdim:
        vals, it = _o().squeeze(vals, d), Tensor._make(xp.squeeze(idx, d))
    return _Mode(vals, it)


def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """Sum with NaNs counted as zero (their gradient is 0)."""
    o = _o()
    x = _tensor(input, "nansum: input")
    if x.dtype.kind == "f":
        x = o.where(o.isnan(x), 0.0, x)
    return o.sum(x, dim, keepdim=keepdim, dtype=dtype)


def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    o = _o()
    x = _tensor(input, "nanmean: input")
    if x.dtype.kind != "f":
        raise RuntimeError(f"nanmean: expected a floating point input, got dtype {x.dtype}")
    if dtype is not None:
        x = o.cast(x, DT.to_dtype(dtype))
    keep = Tensor._make((~xp.isnan(x._data)).astype(x.dtype))
    return o.div(nansum(x, dim, keepdim), o.sum(keep, dim, keepdim=keepdim))


def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """Lower median of the non-NaN values (NaN where a slice is all NaN), as PyTorch."""
    o = _o()
    x = _tensor(input, "nanmedian: input")
    if dim is None:
        flat = o.reshape(x, (-1,))
        a = flat._data
        if a.size == 0:
            raise RuntimeError("nanmedian: cannot take the median of an empty tensor")
        order = xp.argsort(a, kind="stable")
        k = int((~xp.isnan(a)).sum()) if a.dtype.kind == "f" else a.size
        pos = order[(k - 1) // 2] if k else order[0]
        return flat[int(pos)] if k else o.clone(flat[int(order[0])]) * float("nan")
    d = _dim(x, dim, "nanmedian")
    if x.ndim == 0:
        return _NanMedian(o.clone(x), Tensor._make(xp.zeros((), dtype=DT.int64)))
    a = xp.moveaxis(x._data, d, -1)
    if a.shape[-1] == 0:
        raise IndexError(f"nanmedian: dimension {d} is empty")
    order = xp.argsort(a, -1, kind="stable")
    k = (~xp.isnan(a)).sum(-1) if a.dtype.kind == "f" else xp.full(a.shape[:-1], a.shape[-1])
    pos = xp.maximum((k - 1) // 2, 0)
    idx = xp.take_along_axis(order, pos[..., None], -1)
    idx = xp.moveaxis(idx, -1, d).astype(DT.int64)
    it = Tensor._make(idx)
    vals = o.gather(x, d, it)
    if not keepdim:
        vals, it = o.squeeze(vals, d), Tensor._make(xp.squeeze(idx, d))
    return _NanMedian(vals, it)


# ---------------------------------------------------------------- building matrices
def block_diag(*tensors):
    """The inputs (0-, 1- or 2-D) placed along the diagonal of one matrix, zeros elsewhere."""
    o = _o()
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    mats = []
    for i, t in enumerate(tensors):
        t = _tensor(t, f"block_diag: tensors[{i}]")
        if t.ndim > 2:
            raise RuntimeError(f"block_diag: tensors[{i}] must have 0, 1 or 2 dimensions, got shape "
                               f"{tuple(t.shape)}")
        mats.append(o.reshape(t, (1, 1)) if t.ndim == 0 else (o.reshape(t, (1, -1)) if t.ndim == 1 else t))
    if not mats:
        return Tensor._make(xp.zeros((0, 0), dtype=DT.get_default_dtype()))
    dt = _result_dtype([m.dtype for m in mats])
    mats = [m if m.dtype == dt else o.cast(m, dt) for m in mats]
    total = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m.shape
        parts = []
        if left:
            parts.append(Tensor._make(xp.zeros((r, left), dtype=dt)))
        parts.append(m)
        if total - left - c:
            parts.append(Tensor._make(xp.zeros((r, total - left - c), dtype=dt)))
        rows.append(o.cat(parts, 1) if len(parts) > 1 else m)
        left += c
    return o.cat(rows, 0)


def cartesian_prod(*tensors):
    """All tuples (a, b, ...) of the 1-D inputs' elements as rows, first input slowest."""
    o = _o()
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    for i, t in enumerate(tensors):
        if _tensor(t, f"cartesian_prod: tensors[{i}]").ndim != 1:
            raise RuntimeError(f"cartesian_prod: expected 1-D tensors, tensors[{i}] has shape {tuple(t.shape)}")
    if not tensors:
        raise RuntimeError("cartesian_prod: expected at least one tensor")
    if len(tensors) == 1:
        return tensors[0]
    dt = _result_dtype([t.dtype for t in tensors])
    grids = o.meshgrid(*[t if t.dtype == dt else o.cast(t, dt) for t in tensors], indexing="ij")
    return o.stack([o.reshape(g, (-1,)) for g in grids], 1)


def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """Length-r combinations of a 1-D tensor's elements (itertools order), one per row."""
    x = _tensor(input, "combinations: input")
    if x.ndim != 1:
        raise RuntimeError(f"combinations: input must be 1-D, got shape {tuple(x.shape)}")
    if not isinstance(r, int) or r < 0:
        raise ValueError(f"combinations: r must be a non-negative int, got {r!r}")
    if r == 0:
        return Tensor._make(xp.zeros((0,), dtype=x.dtype))
    fn = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = xp.asarray(list(fn(range(x.shape[0]), r)), dtype=DT.int64).reshape(-1, r)
    return _o().getitem(x, (Tensor._make(idx),))


def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """The last dimension of ``input`` laid on the ``offset`` diagonal of a new pair of dims."""
    o = _o()
    x = _tensor(input, "diag_embed: input")
    if x.ndim == 0:
        raise RuntimeError("diag_embed: input must have at least 1 dimension, got a 0-d tensor")
    nd = x.ndim + 1
    d1, d2 = _dim(x, dim1, "diag_embed", nd), _dim(x, dim2, "diag_embed", nd)
    if d1 == d2:
        raise RuntimeError(f"diag_embed: dim1 and dim2 cannot be the same dimension, got {dim1} and {dim2}")
    k = x.shape[-1]
    n = k + abs(offset)
    i = xp.arange(k)
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    out = Tensor._make(xp.zeros(tuple(x.shape[:-1]) + (n, n), dtype=x.dtype))
    out = o.index_put(out, (Ellipsis, rows, cols), x)
    # the new pair sits last as (rows, cols); send rows to d1 and cols to d2
    rest = iter(range(nd - 2))
    perm = [nd - 2 if j == d1 else nd - 1 if j == d2 else next(rest) for j in range(nd)]
    return o.permute(out, perm) if perm != list(range(nd)) else out


def diagflat(input, offset=0):  # noqa: A002
    o = _o()
    return o.diag(o.reshape(_tensor(input, "diagflat: input"), (-1,)), offset)


def vander(x, N=None, increasing=False):  # noqa: N803
    """Columns x^0, x^1, ..., x^(N-1) (reversed unless ``increasing``), built as a running
    product so the gradient is right at x = 0."""
    o = _o()
    x = _tensor(x, "vander: x")
    if x.ndim != 1:
        raise RuntimeError(f"vander: x must be 1-D, got shape {tuple(x.shape)}")
    n = x.shape[0] if N is None else N
    if n < 0:
        raise ValueError(f"vander: N must be non-negative, got {N}")
    if x.dtype.kind == "b":
        x = o.cast(x, DT.int64)
    if n == 0:
        return Tensor._make(xp.zeros((x.shape[0], 0), dtype=x.dtype))
    cols = [Tensor._make(xp.ones((x.shape[0], 1), dtype=x.dtype))]
    if n > 1:
        cols.append(o.expand(o.reshape(x, (-1, 1)), (x.shape[0], n - 1)))
    out = cumprod(o.cat(cols, 1), 1)
    return out if increasing else o.flip(out, (1,))


# ---------------------------------------------------------------- products
def tensordot(a, b, dims=2):
    """Contract ``dims`` of a with those of b: an int (a's last n with b's first n), a pair of
    lists, or a 2 x n tensor; the rest is one matmul on the permuted, flattened operands."""
    o = _o()
    a, b = _tensor(a, "tensordot: a"), _tensor(b, "tensordot: b")
    if isinstance(dims, Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0 or dims > min(a.ndim, b.ndim):
            raise RuntimeError(f"tensordot: dims must be in [0, {min(a.ndim, b.ndim)}], got {dims}")
        da, db = list(range(a.ndim - dims, a.ndim)), list(range(dims))
    else:
        try:
            da, db = dims
        except (TypeError, ValueError):
            raise TypeError(f"tensordot: dims must be an int or a pair of lists of dims, got {dims!r}") from None
        da = [da] if isinstance(da, int) else list(da)
        db = [db] if isinstance(db, int) else list(db)
        if len(da) != len(db):
            raise RuntimeError(f"tensordot: both lists in dims must have the same length, got {da} and {db}")
        da = [_dim(a, d, "tensordot") for d in da]
        db = [_dim(b, d, "tensordot") for d in db]
    for i, j in zip(da, db):
        if a.shape[i] != b.shape[j]:
            raise RuntimeError(f"tensordot: contracted dimensions must match in size, but a's dim {i} is "
                               f"{a.shape[i]} and b's dim {j} is {b.shape[j]}")
    fa = [i for i in range(a.ndim) if i not in da]
    fb = [j for j in range(b.ndim) if j not in db]
    k = 1
    for i in da:
        k *= a.shape[i]
    A = o.reshape(o.permute(a, fa + da) if fa + da != list(range(a.ndim)) else a, (-1, k))
    Bm = o.reshape(o.permute(b, db + fb) if db + fb != list(range(b.ndim)) else b, (k, -1))
    return o.reshape(o.matmul(A, Bm), tuple(a.shape[i] for i in fa) + tuple(b.shape[j] for j in fb))


def inner(input, other):  # noqa: A002
    a, b = _tensor(input, "inner: input"), _tensor(other, "inner: other")
    if a.ndim == 0 or b.ndim == 0:
        return _o().mul(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise RuntimeError(f"inner: the last dimensions must match, got shapes {tuple(a.shape)} and {tuple(b.shape)}")
    return tensordot(a, b, ([a.ndim - 1], [b.ndim - 1]))


def vdot(input, other):  # noqa: A002
    a, b = _tensor(input, "vdot: input"), _tensor(other, "vdot: other")
    if a.ndim != 1 or b.ndim != 1 or a.shape != b.shape:
        raise RuntimeError(f"vdot: expected two 1-D tensors of the same size, got shapes "
                           f"{tuple(a.shape)} and {tuple(b.shape)}")
    return _o().dot(a, b)


def ger(input, vec2):  # noqa: A002
    return _o().outer(input, vec2)


def chain_matmul(*matrices):
    if len(matrices) == 1 and isinstance(matrices[0], (list, tuple)):
        matrices = tuple(matrices[0])
    if not matrices:
        raise RuntimeError("chain_matmul: expected one or more matrices")
    for i, m in enumerate(matrices):
        if _tensor(m, f"chain_matmul: matrices[{i}]").ndim != 2:
            raise RuntimeError(f"chain_matmul: matrices[{i}] must be 2-D, got shape {tuple(m.shape)}")
    out = matrices[0]
    for m in matrices[1:]:
        out = _o().mm(out, m)
    return out if len(matrices) > 1 else _o().clone(out)


def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    o = _o()
    p = o.mul(tensor1, tensor2)
    return o.add(input, o.mul(p, value) if value != 1 else p)


def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    o = _o()
    t1 = tensor1
    if isinstance(t1, Tensor) and t1.dtype.kind != "f" and isinstance(tensor2, Tensor) and tensor2.dtype.kind != "f":
        raise RuntimeError("addcdiv: integer division with addcdiv is not supported; use floating point tensors")
    q = o.div(tensor1, tensor2)
    return o.add(input, o.mul(q, value) if value != 1 else q)


def addbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    o = _o()
    for nm, t in (("batch1", batch1), ("batch2", batch2)):
        if _tensor(t, f"addbmm: {nm}").ndim != 3:
            raise RuntimeError(f"addbmm: {nm} must be 3-D, got shape {tuple(t.shape)}")
    s = o.sum(o.bmm(batch1, batch2), 0)
    s = o.mul(s, alpha) if alpha != 1 else s
    return o.add(o.mul(input, beta) if beta != 1 else input, s)


def dist(input, other, p=2):  # noqa: A002
    """p-norm of (input - other) over all elements (p = inf, -inf, 0 allowed)."""
    o = _o()
    diff = o.reshape(o.sub(input, other), (-1,))
    a = o.abs(diff)
    if p == math.inf:
        return o.amax(a)
    if p == -math.inf:
        return o.amin(a)
    if p == 0:
        return o.sum(o.cast(o.ne(diff, 0), diff.dtype))
    if p == 2:
        return o.norm(diff)
    return o.pow(o.sum(o.pow(a, p)), 1.0 / p)


# ---------------------------------------------------------------- elementwise
def float_power(input, exponent):  # noqa: A002
    """input ** exponent computed in float64 (either may be a number), as PyTorch."""
    o = _o()
    f64 = xp.dtype("float64")
    a = o.cast(input, f64) if isinstance(input, Tensor) else float(input)
    b = o.cast(exponent, f64) if isinstance(exponent, Tensor) else float(exponent)
    if not isinstance(a, Tensor):
        if not isinstance(b, Tensor):
            raise TypeError("float_power: input or exponent must be a Tensor")
        return o.rpow(b, a)
    return o.pow(a, b)


def nextafter(input, other):  # noqa: A002
    a, b = _tensor(input, "nextafter: input"), other
    bd = _arr(b)
    if a.dtype.kind != "f":
        raise RuntimeError(f"nextafter: expected floating point tensors, got input dtype {a.dtype}")
    return Tensor._make(xp.nextafter(a._data, bd.astype(a.dtype)).astype(a.dtype))


def fmax(input, other):  # noqa: A002
    """Elementwise maximum that ignores a NaN on one side; the gradient goes to the chosen side
    (to input on ties), as PyTorch."""
    o = _o()
    a, b = o.elementwise._promote(input, other)
    take_a = Tensor._make(xp.asarray((_arr(a) >= _arr(b)) | xp.isnan(_arr(b))))
    return o.where(take_a, a, b)


def fmin(input, other):  # noqa: A002
    o = _o()
    a, b = o.elementwise._promote(input, other)
    take_a = Tensor._make(xp.asarray((_arr(a) <= _arr(b)) | xp.isnan(_arr(b))))
    return o.where(take_a, a, b)


def logaddexp2(input, other):  # noqa: A002
    o = _o()
    ln2 = math.log(2.0)
    return o.div(o.logaddexp(o.mul(input, ln2), o.mul(other, ln2)), ln2)


def ldexp(input, other):  # noqa: A002
    """input * 2**other (float result)."""
    o = _o()
    x = _float(_tensor(input, "ldexp: input"))
    e = _arr(other)
    return o.mul(x, Tensor._make(xp.ldexp(xp.ones((), dtype=x.dtype), e.astype(xp.int64)).astype(x.dtype)
                                 if e.dtype.kind in "iub" else xp.exp2(e).astype(x.dtype)))


_Frexp = namedtuple("frexp", ["mantissa", "exponent"])


def frexp(input):  # noqa: A002
    x = _tensor(input, "frexp: input")
    if x.dtype.kind != "f":
        raise RuntimeError(f"frexp: expected a floating point tensor, got dtype {x.dtype}")
    m, e = xp.frexp(x._data)
    return _Frexp(Tensor._make(m.astype(x.dtype)), Tensor._make(e.astype(xp.int32)))


def sgn(input):  # noqa: A002
    return _o().sign(input)


def isposinf(input):  # noqa: A002
    return Tensor._make(xp.isposinf(_tensor(input, "isposinf: input")._data))


def isneginf(input):  # noqa: A002
    return Tensor._make(xp.isneginf(_tensor(input, "isneginf: input")._data))


def adjoint(input):  # noqa: A002
    """The conjugate transpose of the last two dims (the transpose, for real tensors)."""
    x = _tensor(input, "adjoint: input")
    if x.ndim < 2:
        raise RuntimeError(f"adjoint: tensor must have at least 2 dimensions, got {x.ndim}")
    return _o().transpose(x, -2, -1)


def mvlgamma(input, p):  # noqa: A002
    """log of the multivariate gamma: sum_{i<p} lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    o = _o()
    x = _float(_tensor(input, "mvlgamma: input"))
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"mvlgamma: p must be a positive int, got {p!r}")
    if bool((x._data <= (p - 1) / 2).any()):
        raise RuntimeError(f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    out = o.lgamma(x)
    for i in range(1, p):
        out = out + o.lgamma(x - i / 2)
    return out + p * (p - 1) / 4 * math.log(math.pi)


def _int_op(name, fn):
    def f(input, other):  # noqa: A002
        a, b = _arr(input), _arr(other)
        for nm, v in (("input", a), ("other", b)):
            if v.dtype.kind not in "iub":
                raise RuntimeError(f"{name}: expected integer tensors, got {nm} of dtype {v.dtype}")
        return Tensor._make(xp.asarray(fn(a, b)).astype(xp.result_type(a, b) if a.ndim or not b.ndim else a.dtype))
    f.__name__ = name
    return f


_INT_OPS = {"gcd": xp.gcd, "lcm": xp.lcm, "bitwise_left_shift": xp.left_shift, "bitwise_right_shift": xp.right_shift}
globals().update({n: _int_op(n, f) for n, f in _INT_OPS.items()})


def bitwise_xor(input, other):  # noqa: A002
    a, b = _arr(input), _arr(other)
    if a.dtype.kind not in "iub" or b.dtype.kind not in "iub":
        raise RuntimeError(f"bitwise_xor: expected integer or bool tensors, got {a.dtype} and {b.dtype}")
    return Tensor._make(xp.asarray(xp.bitwise_xor(a, b)))


def isin(elements, test_elements, *, assume_unique=False, invert=False):
    """Whether each element of ``elements`` occurs in ``test_elements`` (either may be a number)."""
    if not isinstance(elements, Tensor) and not isinstance(test_elements, Tensor):
        raise TypeError("isin: elements or test_elements must be a Tensor")
    e, t = _arr(elements), _arr(test_elements)
    return Tensor._make(xp.asarray(xp.isin(e, t, assume_unique=assume_unique, invert=invert)))


def _cmp(name):
    return lambda input, other: getattr(_o(), name)(input, other)  # noqa: A006


greater_equal, less_equal, not_equal = _cmp("ge"), _cmp("le"), _cmp("ne")


# ---------------------------------------------------------------- writing into tensors
def _index_tuple(indices, what):
    if isinstance(indices, (tuple, list)):
        key = []
        for i, k in enumerate(indices):
            if isinstance(k, Tensor):
                if k.dtype.kind not in "iub":
                    raise IndexError(f"{what}: indices[{i}] must be an integer or bool tensor, got dtype {k.dtype}")
                key.append(k._data)
            else:
                key.append(k)
        return tuple(key)
    return indices


def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """out = input with out[indices] = values (torch.index_put; indices a tuple of index
    tensors); with ``accumulate`` the values are added, repeated indices adding up."""
    o = _o()
    x = _tensor(input, "index_put: input")
    key = o.index_key(_index_tuple(indices, "index_put"))
    try:
        sub_shape = x._data[key].shape
    except IndexError as e:
        raise IndexError(f"index_put: indices are invalid for an input of shape {tuple(x.shape)}: {e}") from None
    v = values if isinstance(values, Tensor) else Tensor._make(xp.asarray(values, dtype=x.dtype))
    try:
        xp.broadcast_shapes(tuple(v.shape), sub_shape)
    except ValueError:
        raise RuntimeError(f"index_put: values of shape {tuple(v.shape)} cannot be broadcast to the indexed "
                           f"shape {tuple(sub_shape)}") from None
    if v.dtype != x.dtype:
        v = o.cast(v, x.dtype)
    if not accumulate:
        return o.index_put(x, key, v)
    if tuple(v.shape) != tuple(sub_shape):
        v = o.expand(v, sub_shape)
    return o.add(x, o.index_scatter(v, key, tuple(x.shape)))


def put(input, index, source, accumulate=False):  # noqa: A002
    """Write ``source`` at flat positions ``index`` of ``input`` (as if it were 1-D)."""
    o = _o()
    x = _tensor(input, "put: input")
    idx = _arr(index)
    if idx.dtype.kind not in "iu":
        raise IndexError(f"put: index must be an integer tensor, got dtype {idx.dtype}")
    src = _tensor(source, "put: source")
    if idx.size != src.numel():
        raise RuntimeError(f"put: index and source must have the same number of elements, got "
                           f"{idx.size} and {src.numel()}")
    n = x.numel()
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise IndexError(f"put: index out of range for a tensor of {n} elements")
    flat = o.reshape(x, (-1,))
    out = index_put(flat, (Tensor._make(idx.reshape(-1) % max(n, 1)),), o.reshape(src, (-1,)), accumulate)
    return o.reshape(out, tuple(x.shape))


def masked_scatter(input, mask, source):  # noqa: A002
    """Copy ``source``'s leading elements (in order) into the positions where ``mask`` is True."""
    o = _o()
    x = _tensor(input, "masked_scatter: input")
    m = _arr(mask)
    if m.dtype != bool:
        raise RuntimeError(f"masked_scatter: mask must be a bool tensor, got dtype {m.dtype}")
    try:
        m = xp.broadcast_to(m, tuple(x.shape))
    except ValueError:
        raise RuntimeError(f"masked_scatter: mask of shape {tuple(m.shape)} does not broadcast to the "
                           f"input's shape {tuple(x.shape)}") from None
    src = _tensor(source, "masked_scatter: source")
    k = int(m.sum())
    if src.numel() < k:
        raise RuntimeError(f"masked_scatter: source has {src.numel()} elements but the mask selects {k}")
    vals = o.reshape(src, (-1,))[:k]
    if vals.dtype != x.dtype:
        vals = o.cast(vals, x.dtype)
    return o.index_put(x, (xp.ascontiguousarray(m),), vals)


def fill_diagonal(input, fill_value, wrap=False):  # noqa: A002
    """input with its main diagonal set to fill_value (all dims equal for ndim > 2; for a tall
    2-D matrix ``wrap`` restarts the diagonal every ncols + 1 rows, as NumPy and PyTorch)."""
    o = _o()
    x = _tensor(input, "fill_diagonal_: input")
    if x.ndim < 2:
        raise RuntimeError(f"fill_diagonal_: dimensions must be larger than 1, got shape {tuple(x.shape)}")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise RuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length, got {tuple(x.shape)}")
    m = xp.zeros(tuple(x.shape), bool)
    xp.fill_diagonal(m, True, wrap=wrap)
    return o.masked_fill(x, Tensor._make(m), fill_value)


def select(input, dim, index):  # noqa: A002
    x = _tensor(input, "select: input")
    d = _dim(x, dim, "select")
    n = x.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select: index {index} out of range for dimension {d} of size {n}")
    return x[(slice(None),) * d + (index % n,)]


def select_scatter(input, src, dim, index):  # noqa: A002
    x = _tensor(input, "select_scatter: input")
    d = _dim(x, dim, "select_scatter")
    n = x.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select_scatter: index {index} out of range for dimension {d} of size {n}")
    return _scatter_key(x, src, (slice(None),) * d + (index % n,), "select_scatter")


def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    x = _tensor(input, "slice_scatter: input")
    d = _dim(x, dim, "slice_scatter")
    return _scatter_key(x, src, (slice(None),) * d + (slice(start, end, step),), "slice_scatter")


def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    o = _o()
    x = _tensor(input, "diagonal_scatter: input")
    d1, d2 = _dim(x, dim1, "diagonal_scatter"), _dim(x, dim2, "diagonal_scatter")
    if d1 == d2:
        raise RuntimeError(f"diagonal_scatter: dim1 and dim2 cannot be equal, got {dim1} and {dim2}")
    r, c = x.shape[d1], x.shape[d2]
    k = max(0, min(r, c - offset)) if offset >= 0 else max(0, min(r + offset, c))
    i = xp.arange(k)
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    rest = [j for j in range(x.ndim) if j not in (d1, d2)]
    perm = rest + [d1, d2]
    xm = o.permute(x, perm)
    out = _scatter_key(xm, src, (Ellipsis, rows, cols), "diagonal_scatter")
    inv = [0] * x.ndim
    for j, p in enumerate(perm):
        inv[p] = j
    return o.permute(out, inv)


def _scatter_key(x, src, key, what):
    src = _tensor(src, f"{what}: src")
    want = x._data[key].shape
    if tuple(src.shape) != tuple(want):
        raise RuntimeError(f"{what}: src must have shape {tuple(want)}, got {tuple(src.shape)}")
    if src.dtype != x.dtype:
        src = _o().cast(src, x.dtype)
    return _o().index_put(x, key, src)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """Reduce ``src`` into ``input`` at ``index`` along ``dim`` (sum, prod, mean, amax, amin).
    sum and mean are scatter_add compositions; amax/amin send the gradient evenly to every
    element equal to the result (input's own included when include_self), as PyTorch."""
    o = _o()
    x = _tensor(input, "scatter_reduce: input")
    src = _tensor(src, "scatter_reduce: src")
    if reduce not in _REDUCES:
        raise RuntimeError(f"scatter_reduce: reduce must be one of {', '.join(_REDUCES)}, got {reduce!r}")
    d = _dim(x, dim, "scatter_reduce")
    idx = _arr(index)
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"scatter_reduce: index must be an int64 tensor, got dtype {idx.dtype}")
    if idx.ndim != x.ndim or src.ndim != x.ndim:
        raise RuntimeError(f"scatter_reduce: index, src and input must have the same number of dimensions, got "
                           f"{idx.ndim}, {src.ndim} and {x.ndim}")
    if any(i > s for i, s in zip(idx.shape, src.shape)):
        raise RuntimeError(f"scatter_reduce: index of shape {tuple(idx.shape)} is larger than src of shape "
                           f"{tuple(src.shape)}")
    n = x.shape[d]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise RuntimeError(f"scatter_reduce: index out of bounds for dimension {d} with size {n} "
                           f"(expected indices in [{-n}, {n - 1}])")
    idx = idx % max(n, 1)
    if src.dtype != x.dtype:
        src = o.cast(src, x.dtype)
    srcv = src if tuple(src.shape) == tuple(idx.shape) else src[tuple(slice(0, s) for s in idx.shape)]
    it = Tensor._make(idx.astype(DT.int64))
    from varlens.ops.index import _full_index
    full = _full_index(d, idx)
    hits = xp.zeros(tuple(x.shape), xp.int64)
    xp.add.at(hits, full, 1)
    hit = hits > 0
    base = x if include_self else o.mul(x, Tensor._make((~hit).astype(x.dtype)))
    if reduce == "sum":
        return o.scatter_add(base, d, it, srcv)
    if reduce == "mean":
        s = o.scatter_add(base, d, it, srcv)
        cnt = hits + (1 if include_self else 0)
        if x.dtype.kind == "f":
            return o.where(Tensor._make(cnt > 0), o.div(s, Tensor._make(xp.maximum(cnt, 1).astype(x.dtype))), x)
        return Tensor._make(xp.where(cnt > 0, xp.floor_divide(s._data, xp.maximum(cnt, 1)), x._data).astype(x.dtype))
    # values first, on arrays
    r = x._data.copy()
    ufunc = {"prod": xp.multiply, "amax": xp.maximum, "amin": xp.minimum}[reduce]
    if not include_self:
        r[hit] = {"prod": 1, "amax": -xp.inf if r.dtype.kind == "f" else xp.iinfo(r.dtype).min,
                  "amin": xp.inf if r.dtype.kind == "f" else xp.iinfo(r.dtype).max}[reduce]
    ufunc.at(r, full, srcv._data)
    if not include_self:
        r = xp.where(hit, r, x._data)
    need = _gm.is_grad_enabled() and (x.requires_grad or src.requires_grad)
    if not need:
        return Tensor._make(r)
    if reduce == "prod":
        raise NotImplementedError("scatter_reduce: the gradient of reduce='prod' is not implemented; "
                                  "use 'sum' on logarithms or compute it without grad")
    # gradient: evenly among the elements equal to the result
    rt = Tensor._make(r)
    # input's own element shares when it equals the result (include_self), or alone where nothing
    # landed.  The count of sharers includes input's element whenever it equals the result, even
    # with include_self=False (PyTorch's convention at such ties; away from ties nothing changes)
    eq_self = x._data == r
    ms = eq_self if include_self else eq_self & ~hit
    msrc = (srcv._data == r[full]).astype(x.dtype)
    cnt = eq_self.astype(x.dtype)
    xp.add.at(cnt, full, msrc)
    w = Tensor._make(ms.astype(x.dtype) / cnt)
    expr = o.scatter_add(o.mul(x, w), d, it, o.mul(srcv, Tensor._make(msrc / cnt[full])))
    return rt + (expr - expr.detach())


# ---------------------------------------------------------------- integration, statistics
def _trap_dx(y, x, dx, d, what):
    o = _o()
    if x is None:
        return 1.0 if dx is None else dx
    if dx is not None:
        raise RuntimeError(f"{what}: give x or dx, not both")
    x = x if isinstance(x, Tensor) else Tensor._make(xp.asarray(x))
    n = y.shape[d]
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"{what}: x has {x.shape[0]} points but y has {n} along dim {d}")
        dxs = o.sub(x[1:], x[:-1])
        shape = [1] * y.ndim
        shape[d] = n - 1
        return o.reshape(dxs, tuple(shape))
    if x.ndim != y.ndim:
        raise RuntimeError(f"{what}: x must be 1-D or have y's number of dimensions, got shapes "
                           f"{tuple(x.shape)} and {tuple(y.shape)}")
    from varlens.ops.extra import narrow
    xd = _dim(x, d, what)
    return o.sub(narrow(x, xd, 1, x.shape[xd] - 1), narrow(x, xd, 0, x.shape[xd] - 1))


def _trap_terms(y, x, dx, dim, what):
    from varlens.ops.extra import narrow
    y = _tensor(y, f"{what}: y")
    if y.ndim == 0:
        raise RuntimeError(f"{what}: y must have at least 1 dimension")
    d = _dim(y, dim, what)
    n = y.shape[d]
    if x is None and dx is None:
        dx = 1.0
    step = _trap_dx(y, x, dx, d, what)
    if n == 0:
        return None, d
    ya = _float(y)
    s = _o().add(narrow(ya, d, 1, n - 1), narrow(ya, d, 0, n - 1))
    return _o().mul(_o().mul(s, step), 0.5), d


def trapezoid(y, x=None, *, dx=None, dim=-1):
    """Trapezoid rule along ``dim`` with sample points ``x`` (1-D or y's shape) or spacing ``dx``."""
    terms, d = _trap_terms(y, x, dx, dim, "trapezoid")
    if terms is None:
        shape = tuple(s for i, s in enumerate(y.shape) if i != d)
        return Tensor._make(xp.zeros(shape, dtype=_float(y).dtype))
    return _o().sum(terms, d)


def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    terms, d = _trap_terms(y, x, dx, dim, "cumulative_trapezoid")
    if terms is None:
        return Tensor._make(xp.zeros(tuple(y.shape), dtype=_float(y).dtype))
    return _o().cumsum(terms, d)


def cov(input, *, correction=1, fweights=None, aweights=None):  # noqa: A002
    """Covariance of the rows (variables) over the columns (observations), optionally with
    integer frequency weights and float observation weights, as torch.cov."""
    o = _o()
    x = _tensor(input, "cov: input")
    if x.ndim > 2:
        raise RuntimeError(f"cov: expected input to have two or fewer dimensions but got {x.ndim}")
    if x.ndim < 2:
        x = o.reshape(x, (1, -1))
    x = _float(x)
    n = x.shape[1]
    w = None
    if fweights is not None:
        f = _tensor(fweights, "cov: fweights")
        if f.ndim > 1 or f.numel() != n:
            raise RuntimeError(f"cov: expected fweights to have one dimension of size {n}, got shape {tuple(f.shape)}")
        if f.dtype.kind not in "iu":
            raise RuntimeError(f"cov: expected fweights to have an integral dtype, got {f.dtype}")
        if bool((f._data < 0).any()):
            raise RuntimeError("cov: fweights cannot be negative")
        w = o.cast(o.reshape(f, (-1,)), x.dtype)
    if aweights is not None:
        a = _tensor(aweights, "cov: aweights")
        if a.ndim > 1 or a.numel() != n:
            raise RuntimeError(f"cov: expected aweights to have one dimension of size {n}, got shape {tuple(a.shape)}")
        if a.dtype.kind != "f":
            raise RuntimeError(f"cov: expected aweights to have a floating point dtype, got {a.dtype}")
        if bool((a._data < 0).any()):
            raise RuntimeError("cov: aweights cannot be negative")
        a = o.cast(o.reshape(a, (-1,)), x.dtype)
        w = a if w is None else o.mul(w, a)
    if w is None:
        wsum = float(n)
        avg = o.mean(x, 1, keepdim=True)
        fact = wsum - correction
    else:
        wsum = o.sum(w)
        avg = o.div(o.sum(o.mul(x, w), 1, keepdim=True), wsum)
        if aweights is None:
            fact = o.sub(wsum, correction)
        else:
            fact = o.sub(wsum, o.div(o.mul(o.sum(o.mul(w, a)), correction), wsum))
    if isinstance(fact, Tensor):
        fact = o.clamp(fact, 0.0, None)
    else:
        fact = max(fact, 0.0)
    xc = o.sub(x, avg)
    xw = xc if w is None else o.mul(xc, w)
    c = o.div(o.matmul(xw, o.t(xc)), fact)
    return o.reshape(c, ()) if input.ndim < 2 else c


def corrcoef(input):  # noqa: A002
    """Pearson correlation of the rows: cov / (std_i std_j), clipped to [-1, 1]."""
    o = _o()
    c = cov(input)
    if c.ndim == 0:
        return o.div(c, c)
    s = o.sqrt(o.diag(c))
    c = o.div(o.div(c, o.reshape(s, (-1, 1))), o.reshape(s, (1, -1)))
    return o.clamp(c, -1.0, 1.0)


def renorm(input, p, dim, maxnorm):  # noqa: A002
    """Each slice along ``dim`` whose p-norm exceeds maxnorm is scaled to norm maxnorm (by
    maxnorm / (norm + 1e-7), as PyTorch); the norm stays in the graph."""
    o = _o()
    x = _tensor(input, "renorm: input")
    if x.dtype.kind != "f":
        raise RuntimeError(f"renorm: expected a floating point input, got dtype {x.dtype}")
    if not p > 0:
        raise RuntimeError(f"renorm: non-positive norm p={p} is not supported")
    if maxnorm < 0:
        raise RuntimeError(f"renorm: expected maxnorm to be >= 0, got {maxnorm}")
    if x.ndim <= 1:
        raise RuntimeError(f"renorm: input needs at least 2 dimensions, got {x.ndim}")
    d = _dim(x, dim, "renorm")
    others = tuple(i for i in range(x.ndim) if i != d)
    a = o.abs(x)
    if p == math.inf:
        nrm = o.amax(a, others, keepdim=True)
    elif p == 2:
        nrm = o.sqrt(o.sum(o.mul(x, x), others, keepdim=True))
    else:
        nrm = o.pow(o.sum(o.pow(a, p), others, keepdim=True), 1.0 / p)
    over = Tensor._make(nrm._data > maxnorm)
    factor = o.where(over, o.div(maxnorm, o.add(nrm, 1e-7)), 1.0)
    return o.mul(x, o.cast(factor, x.dtype) if factor.dtype != x.dtype else factor)


# ---------------------------------------------------------------- non-differentiable helpers
_Hist = namedtuple("histogram", ["hist", "bin_edges"])


def histogram(input, bins=100, *, range=None, weight=None, density=False):  # noqa: A002
    x = _tensor(input, "histogram: input")
    if x.dtype.kind != "f":
        raise RuntimeError(f"histogram: input must be a floating point tensor, got dtype {x.dtype}")
    if isinstance(bins, Tensor):
        if bins.ndim != 1 or bins.numel() < 2:
            raise RuntimeError(f"histogram: bins tensor must be 1-D with at least 2 edges, got shape "
                               f"{tuple(bins.shape)}")
        b = bins._data
    elif isinstance(bins, int) and not isinstance(bins, bool):
        if bins <= 0:
            raise RuntimeError(f"histogram: bins must be positive, got {bins}")
        b = bins
    else:
        raise TypeError(f"histogram: bins must be an int or a 1-D tensor, got {type(bins).__name__}")
    a = x._data.reshape(-1)
    if range is not None:
        lo, hi = float(range[0]), float(range[1])
        if lo > hi:
            raise RuntimeError(f"histogram: range min {lo} is larger than max {hi}")
    elif a.size:
        lo, hi = float(a.min()), float(a.max())
    else:
        lo, hi = 0.0, 0.0
    if isinstance(b, int) and lo == hi:
        lo, hi = lo - 0.5, hi + 0.5  # NumPy's rule; PyTorch widens a zero range the same way
    wt = None if weight is None else _tensor(weight, "histogram: weight")._data.reshape(-1)
    if wt is not None and wt.size != a.size:
        raise RuntimeError(f"histogram: weight must have the input's {a.size} elements, got {wt.size}")
    h, e = xp.histogram(a, bins=b, range=None if not isinstance(b, int) else (lo, hi), weights=wt, density=density)
    return _Hist(Tensor._make(h.astype(x.dtype)), Tensor._make(e.astype(x.dtype)))


def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False, device=None):
    """``steps`` points base**t for t evenly spaced from start to end (float32 by default)."""
    if not isinstance(steps, int) or steps < 0:
        raise RuntimeError(f"logspace: steps must be a non-negative int, got {steps!r}")
    dt = DT.get_default_dtype() if dtype is None else DT.to_dtype(dtype)
    s, e = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    t = xp.linspace(float(s), float(e), steps, dtype=xp.float64)
    out = xp.power(float(base), t)
    if dt.kind in "iu":
        out = xp.trunc(out)
    r = Tensor._make(out.astype(dt))
    if requires_grad:
        r.requires_grad_(True)
    return r


def _tri_indices(what, row, col, offset, upper):
    for nm, v in (("row", row), ("col", col)):
        if not isinstance(v, int) or v < 0:
            raise RuntimeError(f"{what}: {nm} must be a non-negative int, got {v!r}")
    r, c = (xp.triu_indices if upper else xp.tril_indices)(row, offset, col)
    return Tensor._make(xp.stack([r, c]).astype(DT.int64))


def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    out = _tri_indices("tril_indices", row, col, offset, False)
    return out if dtype is None else out.to(dtype)


def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    out = _tri_indices("triu_indices", row, col, offset, True)
    return out if dtype is None else out.to(dtype)


def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    x = _tensor(input, "unique_consecutive: input")
    if dim is not None:
        d = _dim(x, dim, "unique_consecutive")
        a = xp.moveaxis(x._data, d, 0)
        n = a.shape[0]
        change = xp.ones(n, bool)
        if n > 1:
            change[1:] = (a[1:] != a[:-1]).reshape(n - 1, -1).any(1)
        vals = xp.moveaxis(a[change], 0, d)
    else:
        a = x._data.reshape(-1)
        n = a.size
        change = xp.ones(n, bool)
        if n > 1:
            change[1:] = a[1:] != a[:-1]
        vals = a[change]
    out = [Tensor._make(vals)]
    grp = xp.cumsum(change) - 1
    if return_inverse:
        out.append(Tensor._make((grp.reshape(x.shape) if dim is None else grp).astype(DT.int64)))
    if return_counts:
        starts = xp.flatnonzero(change)
        out.append(Tensor._make(xp.diff(xp.append(starts, n)).astype(DT.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def unravel_index(indices, shape):
    idx = _arr(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices must be an integer tensor, got dtype {idx.dtype}")
    shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
    total = int(xp.prod(shape)) if shape else 1
    if idx.size and (idx.min() < -total or idx.max() >= total):
        raise RuntimeError(f"unravel_index: index out of bounds for shape {shape} ({total} elements)")
    res = xp.unravel_index(idx % max(total, 1), shape)
    return tuple(Tensor._make(xp.asarray(r).astype(DT.int64)) for r in res)


def broadcast_shapes(*shapes):
    from varlens.core.tensor import Size
    try:
        return Size(xp.broadcast_shapes(*[(s,) if isinstance(s, int) else tuple(s) for s in shapes]))
    except ValueError:
        raise RuntimeError(f"broadcast_shapes: shapes {[tuple(s) if not isinstance(s, int) else s for s in shapes]} "
                           "cannot be broadcast together") from None


def broadcast_tensors(*tensors):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    shape = tuple(broadcast_shapes(*[tuple(_tensor(t, f"broadcast_tensors: tensors[{i}]").shape)
                                     for i, t in enumerate(tensors)]))
    return tuple(t if tuple(t.shape) == shape else _o().expand(t, shape) for t in tensors)


# ---------------------------------------------------------------- splitting
def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """Split into n nearly equal parts (the first n % size get one more), or at given indices."""
    x = _tensor(input, "tensor_split: input")
    d = _dim(x, dim, "tensor_split")
    n = x.shape[d]
    ios = indices_or_sections
    if isinstance(ios, Tensor):
        ios = ios.item() if ios.ndim == 0 else ios.tolist()
    if isinstance(ios, int):
        if ios <= 0:
            raise RuntimeError(f"tensor_split: number of sections must be larger than 0, got {ios}")
        q, r = divmod(n, ios)
        bounds, s = [], 0
        for i in range(ios - 1):
            s += q + (1 if i < r else 0)
            bounds.append(s)
    else:
        bounds = list(ios)
    pre = (slice(None),) * d
    out, start = [], 0
    for b in bounds + [n]:
        b = max(min(b, n), 0) if b >= 0 else max(n + b, 0)
        out.append(x[pre + (slice(start, max(b, start)),)])
        start = max(b, start)
    return tuple(out)


def _dsplit_family(what, axis, min_dim):
    def f(input, indices_or_sections):  # noqa: A002
        x = _tensor(input, f"{what}: input")
        if x.ndim < min_dim:
            raise RuntimeError(f"{what}: input must have at least {min_dim} dimensions, got {x.ndim}")
        ax = axis if not (what == "hsplit" and x.ndim == 1) else 0
        if isinstance(indices_or_sections, int) and x.shape[ax] % indices_or_sections:
            raise RuntimeError(f"{what}: dimension {ax} of size {x.shape[ax]} is not divisible by "
                               f"{indices_or_sections}")
        return tensor_split(x, indices_or_sections, ax)
    f.__name__ = what
    return f


hsplit = _dsplit_family("hsplit", 1, 1)
vsplit = _dsplit_family("vsplit", 0, 2)
dsplit = _dsplit_family("dsplit", 2, 3)


def split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    return _o().split(input, list(split_sizes), dim)


def msort(input):  # noqa: A002
    return _o().sort(input, 0).values


def ravel(input):  # noqa: A002
    return _o().reshape(input, (-1,))


def moveaxis(input, source, destination):  # noqa: A002
    return movedim(input, source, destination)


def movedim(input, source, destination):  # noqa: A002
    """movedim with ints or sequences of dims (as PyTorch)."""
    x = _tensor(input, "movedim: input")
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: source and destination must have the same number of dims, got "
                           f"{len(src)} and {len(dst)}")
    src = [_dim(x, s, "movedim") for s in src]
    dst = [_dim(x, s, "movedim") for s in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError("movedim: repeated dim in source or destination")
    order = [None] * x.ndim
    for s, t in zip(src, dst):
        order[t] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    order = [o if o is not None else next(rest) for o in order]
    return _o().permute(x, order) if order != list(range(x.ndim)) else x


# ---------------------------------------------------------------- creation helpers
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    from varlens.creation import as_tensor
    if isinstance(obj, Tensor) and not copy and (dtype is None or DT.to_dtype(dtype) == obj.dtype):
        out = obj
    else:
        out = as_tensor(obj, dtype=dtype)
        if copy:
            out = Tensor._make(out._data.copy())
    if requires_grad:
        out.requires_grad_(True)
    return out


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    dt = DT.get_default_dtype() if dtype is None else DT.to_dtype(dtype)
    out = Tensor._make(xp.asarray(s.item() if isinstance(s, Tensor) else s, dtype=dt))
    if requires_grad:
        out.requires_grad_(True)
    return out


def randint_like(input, low=0, high=None, *, dtype=None, generator=None, requires_grad=False):  # noqa: A002
    from varlens.random import _gen
    if high is None:
        low, high = 0, low
    if not high > low:
        raise RuntimeError(f"randint_like: high must be larger than low, got low={low}, high={high}")
    dt = input.dtype if dtype is None else DT.to_dtype(dtype)
    return Tensor._make(_gen(generator).integers(int(low), int(high), tuple(input.shape)).astype(dt))


def fill(input, value):  # noqa: A002
    """A new tensor of input's shape and dtype filled with ``value`` (torch.fill)."""
    x = _tensor(input, "fill: input")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"fill: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}")
        if value.requires_grad:  # the gradient reaches the value: every element is a copy of it
            v = _o().reshape(_o().cast(value, x.dtype), (1,) * x.ndim)
            return _o().clone(_o().expand(v, tuple(x.shape)))
        return Tensor._make(xp.full(tuple(x.shape), value.item(), dtype=x.dtype))
    return Tensor._make(xp.full(tuple(x.shape), value, dtype=x.dtype))


# ---------------------------------------------------------------- windows (signal helpers)
def _window(what, n, periodic, dtype, fn):
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise RuntimeError(f"{what}: window_length must be a non-negative int, got {n!r}")
    dt = DT.get_default_dtype() if dtype is None else DT.to_dtype(dtype)
    if dt.kind != "f":
        raise RuntimeError(f"{what}: expected a floating point dtype, got {dt}")
    if n <= 1:
        return Tensor._make(xp.ones((n,), dtype=dt))
    m = n + 1 if periodic else n  # a periodic window is the symmetric one of length n + 1, cut to n
    k = xp.arange(n, dtype=xp.float64)
    return Tensor._make(fn(k, m - 1).astype(dt))


def hann_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype,
                   lambda k, L: 0.5 - 0.5 * xp.cos(2 * math.pi * k / L))


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, device=None,
                   requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype,
                   lambda k, L: alpha - beta * xp.cos(2 * math.pi * k / L))


def bartlett_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    return _window("bartlett_window", window_length, periodic, dtype,
                   lambda k, L: 1 - xp.abs(2 * k / L - 1))


def blackman_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    return _window("blackman_window", window_length, periodic, dtype,
                   lambda k, L: 0.42 - 0.5 * xp.cos(2 * math.pi * k / L) + 0.08 * xp.cos(4 * math.pi * k / L))


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, device=None, requires_grad=False):
    return _window("kaiser_window", window_length, periodic, dtype,
                   lambda k, L: xp.i0(beta * xp.sqrt(xp.clip(1 - (2 * k / L - 1) ** 2, 0, None))) / xp.i0(beta))


# ---------------------------------------------------------------- predicates and dtype helpers
def is_floating_point(input):  # noqa: A002
    return _tensor(input, "is_floating_point: input").dtype.kind == "f"


def is_complex(input):  # noqa: A002
    return _tensor(input, "is_complex: input").dtype.kind == "c"


def is_signed(input):  # noqa: A002
    return _tensor(input, "is_signed: input").dtype.kind in "fic"


def is_nonzero(input):  # noqa: A002
    x = _tensor(input, "is_nonzero: input")
    if x.numel() != 1:
        raise RuntimeError(f"is_nonzero: a Boolean value of a tensor with {x.numel()} values is ambiguous "
                           "(expected exactly one element)")
    return bool(x._data.reshape(()) != 0)


def is_same_size(input, other):  # noqa: A002
    return tuple(_tensor(input, "is_same_size: input").shape) == tuple(_tensor(other, "is_same_size: other").shape)


def positive(input):  # noqa: A002
    x = _tensor(input, "positive: input")
    if x.dtype.kind == "b":
        raise RuntimeError("positive: not supported for bool tensors")
    return x


def _identity(input):  # noqa: A002
    """resolve_conj / resolve_neg / conj: real tensors have no lazy conjugate or negation bit."""
    return input


def get_device(input):  # noqa: A002
    return -1  # CPU, as PyTorch reports it


def _dtype_of(v):
    if isinstance(v, Tensor):
        return v.dtype, v.ndim == 0
    if isinstance(v, bool):
        return xp.dtype(bool), True
    if isinstance(v, int):
        return xp.dtype("int64"), True
    if isinstance(v, float):
        return DT.get_default_dtype(), True
    raise TypeError(f"result_type: expected a Tensor or a number, got {type(v).__name__}")


from varlens.core.dtypes import _RANK, can_cast, promote_types  # noqa: E402  (the dtype rules live in core)


def result_type(tensor1, tensor2):
    """The dtype PyTorch's promotion gives: the higher category wins; within one category a
    dimensioned tensor wins over a 0-d one or a Python number."""
    (d1, z1), (d2, z2) = _dtype_of(tensor1), _dtype_of(tensor2)
    num1, num2 = not isinstance(tensor1, Tensor), not isinstance(tensor2, Tensor)
    r1, r2 = _RANK[d1.kind], _RANK[d2.kind]
    if r1 != r2:
        hi, hnum = (d1, num1) if r1 > r2 else (d2, num2)
        lo = d2 if r1 > r2 else d1
        if hnum and hi.kind == "f":  # a Python float with an integer tensor: the default float
            return DT.get_default_dtype()
        if hnum and hi.kind in "iu" and lo.kind == "b":
            return xp.dtype("int64")
        return hi
    if num1 and not num2:
        return d2
    if num2 and not num1:
        return d1
    if z1 != z2:
        return d2 if z1 else d1
    return promote_types(d1, d2)


def sum_to_size(input, *size):  # noqa: A002
    """Sum broadcast dimensions away so the result has ``size`` (the reverse of expand)."""
    from varlens.core.tensor import _size
    x = _tensor(input, "sum_to_size: input")
    shape = tuple(_size(size))
    try:
        if tuple(xp.broadcast_shapes(shape, tuple(x.shape))) != tuple(x.shape):
            raise ValueError
    except ValueError:
        raise RuntimeError(f"sum_to_size: size {shape} is not expandable to the tensor's size "
                           f"{tuple(x.shape)}") from None
    return D.sum_to(x, shape)


# ---------------------------------------------------------------- runtime switches training scripts call
_SETTINGS = {"matmul_precision": "highest", "deterministic": False, "warn_only": False, "interop_threads": 1}


def set_float32_matmul_precision(precision):
    """Accepted for compatibility: NumPy's float32 matmul is always full precision."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: precision must be 'highest', 'high' or 'medium', "
                           f"got {precision!r}")
    _SETTINGS["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _SETTINGS["matmul_precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Accepted for compatibility: every varlens op is already deterministic on CPU."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms: mode must be a bool, got {type(mode).__name__}")
    _SETTINGS["deterministic"], _SETTINGS["warn_only"] = mode, bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _SETTINGS["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _SETTINGS["warn_only"]


def set_num_interop_threads(num):
    if not isinstance(num, int) or num < 1:
        raise RuntimeError(f"set_num_interop_threads: expected a positive int, got {num!r}")
    _SETTINGS["interop_threads"] = num


def get_num_interop_threads():
    return _SETTINGS["interop_threads"]


def compile(model=None, **kwargs):  # noqa: A001
    """torch.compile stand-in: varlens runs eagerly, so the model (or function) comes back as is;
    used as a decorator with options (``@compile(mode=...)``) it returns the identity decorator."""
    if model is None:
        return lambda m: m
    return model


def set_flush_denormal(mode):
    """Returns False: flushing denormals is not supported (NumPy keeps them)."""
    return False


def _bfloat16_error(*_a, **_k):
    raise RuntimeError("bfloat16 is not supported: NumPy has no bfloat16 dtype, so varlens has none "
                       "(use .float() for float32 or .half() for float16)")


def _H(self):
    if self.ndim != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors), got a {self.ndim}-D tensor; "
                           "for batches of matrices use tensor.mH")
    return self.T


def _o_trunc(input):  # noqa: A002
    return _o().trunc(input)


# ---------------------------------------------------------------- registration
FUNCTIONS = {
    "polygamma": polygamma, "i0": i0, "special_i0": i0, "igamma": igamma, "igammac": igammac,
    "poisson": poisson, "binomial": binomial,
    "cumprod": cumprod, "cummax": cummax, "cummin": cummin, "mode": mode,
    "nansum": nansum, "nanmean": nanmean, "nanmedian": nanmedian,
    "sinc": sinc, "asinh": asinh, "arcsinh": asinh, "acosh": acosh, "arccosh": acosh,
    "atanh": atanh, "arctanh": atanh,
    "block_diag": block_diag, "cartesian_prod": cartesian_prod, "combinations": combinations,
    "diag_embed": diag_embed, "diagflat": diagflat, "vander": vander,
    "tensordot": tensordot, "inner": inner, "vdot": vdot, "ger": ger, "chain_matmul": chain_matmul,
    "addcmul": addcmul, "addcdiv": addcdiv, "addbmm": addbmm, "dist": dist,
    "float_power": float_power, "nextafter": nextafter, "fmax": fmax, "fmin": fmin,
    "logaddexp2": logaddexp2, "ldexp": ldexp, "frexp": frexp, "sgn": sgn, "mvlgamma": mvlgamma,
    "isposinf": isposinf, "isneginf": isneginf, "adjoint": adjoint,
    "gcd": gcd, "lcm": lcm, "bitwise_xor": bitwise_xor, "bitwise_left_shift": bitwise_left_shift,
    "bitwise_right_shift": bitwise_right_shift, "isin": isin,
    "greater_equal": greater_equal, "less_equal": less_equal, "not_equal": not_equal,
    "put": put, "masked_scatter": masked_scatter, "select": select, "select_scatter": select_scatter,
    "slice_scatter": slice_scatter, "diagonal_scatter": diagonal_scatter, "scatter_reduce": scatter_reduce,
    "trapezoid": trapezoid, "trapz": trapz, "cumulative_trapezoid": cumulative_trapezoid,
    "cov": cov, "corrcoef": corrcoef, "renorm": renorm, "histogram": histogram, "logspace": logspace,
    "tril_indices": tril_indices, "triu_indices": triu_indices, "unique_consecutive": unique_consecutive,
    "unravel_index": unravel_index, "broadcast_shapes": broadcast_shapes,
    "broadcast_tensors": broadcast_tensors, "tensor_split": tensor_split, "hsplit": hsplit,
    "vsplit": vsplit, "dsplit": dsplit, "split_with_sizes": split_with_sizes, "msort": msort,
    "ravel": ravel, "moveaxis": moveaxis, "asarray": asarray, "scalar_tensor": scalar_tensor,
    "randint_like": randint_like, "fill": fill,
    "hann_window": hann_window, "hamming_window": hamming_window, "bartlett_window": bartlett_window,
    "blackman_window": blackman_window, "kaiser_window": kaiser_window,
    "is_floating_point": is_floating_point, "is_complex": is_complex, "is_signed": is_signed,
    "is_nonzero": is_nonzero, "is_same_size": is_same_size, "positive": positive, "fix": _o_trunc,
    "resolve_conj": _identity, "resolve_neg": _identity, "conj": _identity, "conj_physical": _identity,
    "get_device": get_device, "result_type": result_type, "promote_types": promote_types,
    "can_cast": can_cast, "sum_to_size": sum_to_size,
    "set_float32_matmul_precision": set_float32_matmul_precision,
    "get_float32_matmul_precision": get_float32_matmul_precision,
    "use_deterministic_algorithms": use_deterministic_algorithms,
    "are_deterministic_algorithms_enabled": are_deterministic_algorithms_enabled,
    "is_deterministic_algorithms_warn_only_enabled": is_deterministic_algorithms_warn_only_enabled,
    "set_num_interop_threads": set_num_interop_threads, "get_num_interop_threads": get_num_interop_threads,
    "compile": compile, "set_flush_denormal": set_flush_denormal,
    "unsafe_chunk": lambda input, chunks, dim=0: _o().chunk(input, chunks, dim),  # noqa: A006
    "unsafe_split": lambda input, split_size, dim=0: _o().split(input, split_size, dim),  # noqa: A006
}
# names varlens.ops already has with a narrower signature: these replace them at the top level
OVERRIDES = {"index_put": index_put, "movedim": movedim}

_NOT_METHODS = {"hann_window", "hamming_window", "bartlett_window", "blackman_window", "kaiser_window",
                "result_type", "promote_types", "can_cast", "set_float32_matmul_precision",
                "get_float32_matmul_precision", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
                "is_deterministic_algorithms_warn_only_enabled", "set_num_interop_threads",
                "get_num_interop_threads", "compile", "set_flush_denormal", "block_diag", "cartesian_prod",
                "chain_matmul", "logspace", "tril_indices", "triu_indices",
                "unravel_index", "broadcast_shapes", "broadcast_tensors", "asarray", "scalar_tensor",
                "randint_like", "fill", "trapezoid", "trapz", "cumulative_trapezoid", "isin",
                "combinations", "vander", "poisson", "binomial", "special_i0"}

# Tensor in-place variants: name_ computes the out-of-place op and writes it back
_INPLACE = ("acos", "arccos", "asin", "arcsin", "atan", "arctan", "atan2", "arctan2", "acosh", "arccosh",
            "asinh", "arcsinh", "atanh", "arctanh", "cosh", "sinh", "tan", "erf", "erfc", "erfinv",
            "exp2", "digamma", "lgamma", "deg2rad", "rad2deg", "copysign", "hypot", "xlogy", "heaviside",
            "logit", "sinc", "sgn", "mvlgamma", "cumprod", "cumsum", "addmm", "addmv", "addr", "baddbmm",
            "addbmm", "tril", "triu", "i0", "igamma", "igammac", "polygamma", "renorm", "nextafter", "ldexp",
            "gcd", "lcm", "divide",
            "true_divide", "multiply", "subtract", "negative", "floor_divide", "index_put", "put",
            "masked_scatter", "scatter_reduce", "bitwise_and", "bitwise_or", "bitwise_xor",
            "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "logical_and", "logical_or",
            "logical_xor", "logical_not", "clamp", "clip")
_CMP_BASE = {"greater": "gt", "less": "lt", "greater_equal": "ge", "less_equal": "le", "not_equal": "ne"}
_CMP_INPLACE = ("eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
                "not_equal")
# torch.NAME_(x, ...) functions: the Tensor method called on x
_TORCH_INPLACE = ("abs", "acos", "arccos", "asin", "arcsin", "atan", "arctan", "acosh", "arccosh", "asinh",
                  "arcsinh", "atanh", "arctanh", "ceil", "clamp", "clamp_max", "clamp_min", "clip", "cos",
                  "cosh", "deg2rad", "rad2deg", "erf", "erfc", "exp", "exp2", "expm1", "fill", "floor",
                  "frac", "gcd", "i0", "lcm", "ldexp", "log", "log10", "log1p", "log2", "logit", "nan_to_num",
                  "neg", "negative", "reciprocal", "relu", "round", "rsqrt", "sigmoid", "sin", "sinc",
                  "sinh", "sqrt", "square", "tan", "tanh", "trunc", "xlogy", "zero", "index_put", "addmv")


def _torch_inplace(name):
    def f(input, *args, **kwargs):  # noqa: A002
        return getattr(_tensor(input, f"{name}_: input"), name + "_")(*args, **kwargs)
    f.__name__ = name + "_"
    return f


def _cmp_cast(name):
    def f(self, other):
        return _o().cast(getattr(_o(), name)(self, other), self.dtype)
    return f


def _float_power_(self, exponent):
    if self.dtype != xp.dtype("float64"):
        raise RuntimeError(f"float_power_: the base has dtype {self.dtype} but the result is float64; "
                           "in-place float_power_ needs a float64 tensor (call .double() first)")
    from varlens.ops.extra import _inplace_from
    return _inplace_from("float_power", float_power)(self, exponent)


def _bernoulli_method(self, p=None, *, generator=None):
    from varlens.creation import bernoulli
    if p is None:
        return bernoulli(self, generator=generator)
    from varlens.random import _gen
    return Tensor._make((_gen(generator).random(tuple(self.shape)) < p).astype(self.dtype))


def _rand_fill(kind):
    def method(self, *args, generator=None):
        from varlens.random import _gen
        g = _gen(generator)
        if kind == "cauchy":
            med, sig = (list(args) + [0.0, 1.0][len(args):])[:2]
            return _random_(self, lambda s: med + sig * xp.tan(math.pi * (g.random(s) - 0.5)))
        if kind == "log_normal":
            mean, std = (list(args) + [1.0, 2.0][len(args):])[:2]
            return _random_(self, lambda s: xp.exp(g.normal(mean, std, s)))
        p = args[0] if args else 0.5
        if not 0 < p <= 1:
            raise RuntimeError(f"geometric_: p must be in (0, 1], got {p}")
        return _random_(self, lambda s: xp.floor(xp.log1p(-g.random(s)) / math.log1p(-p)) + 1 if p < 1
                             else xp.ones(s))
    method.__name__ = kind + "_"
    return method


def install():
    """Attach the methods (those Tensor does not have yet) and the in-place variants."""
    from varlens.ops.extra import _inplace_from
    o = _o()
    methods = {k: v for k, v in FUNCTIONS.items() if k not in _NOT_METHODS}
    methods.update({
        "index_put": index_put, "movedim": movedim, "fill_diagonal_": None,
        "bitwise_and": o.bitwise_and, "bitwise_or": o.bitwise_or, "bitwise_not": o.bitwise_not,
        "greater": o.gt, "less": o.lt, "floor_divide": o.floor_divide, "isclose": o.isclose,
        "ndimension": lambda s: s.ndim, "const_data_ptr": lambda s: s._data.ctypes.data,
        "bernoulli": _bernoulli_method, "bfloat16": _bfloat16_error,
        "cauchy_": _rand_fill("cauchy"), "log_normal_": _rand_fill("log_normal"),
        "geometric_": _rand_fill("geometric"),
    })
    methods["fill_diagonal_"] = lambda s, fill_value, wrap=False: _inplace_from(
        "fill_diagonal", lambda t: fill_diagonal(t, fill_value, wrap))(s)
    methods["polygamma"] = lambda s, n: polygamma(n, s)  # Tensor.polygamma(n): the tensor is the input
    methods["absolute_"] = lambda s: s.abs_()
    methods["is_inference"] = lambda s: False
    methods["is_shared"] = lambda s: False
    methods["is_pinned"] = lambda s: False
    # these replace methods whose signature was narrower
    for name in ("index_put", "movedim"):
        setattr(Tensor, name, methods.pop(name))
    for name, fn in methods.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for name in _INPLACE + ("fix",):
        fn = getattr(Tensor, name, None)
        if fn is not None and not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _inplace_from(name, fn))
    for name in _CMP_INPLACE:
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _inplace_from(name, _cmp_cast(_CMP_BASE.get(name, name))))
    props = {"H": _H,
             "mH": lambda s: _o().transpose(s, -2, -1), "itemsize": lambda s: s._data.itemsize,
             "is_sparse": lambda s: False, "is_quantized": lambda s: False, "is_meta": lambda s: False,
             "is_mkldnn": lambda s: False}
    for name, fn in props.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, property(fn))
    if not hasattr(Tensor, "float_power_"):
        Tensor.float_power_ = _float_power_
    for name in ("swapaxes", "swapdims"):
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", Tensor.transpose_)


def torch_inplace_functions():
    """torch.NAME_ functions (for the varlens namespace), for names that have a Tensor.NAME_."""
    return {n + "_": _torch_inplace(n) for n in _TORCH_INPLACE if hasattr(Tensor, n + "_")}
