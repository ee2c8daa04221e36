"""Cumulative (scan) ops: cumsum, cumprod (exact gradient with zeros in the input), cummax/cummin
(values gathered at the running arg-extremes), logcumsumexp, diff, trapezoid and
cumulative_trapezoid.  The backward of a prefix sum is the reversed prefix sum of the
cotangent."""
from __future__ import annotations
from varlens.core.arg_rules import torch_args
from varlens.ops.reduce import amax
from varlens.ops.pointwise import exp
from varlens.ops.pointwise import log
from varlens.core.tensor import Tensor
from varlens.ops._args import _dim
from varlens.ops.shape import cat
from varlens.ops.shape import narrow
from varlens.ops.compare import ne
from varlens.core import array as B
from varlens.core.function import Function
from varlens.ops.reduce import _one_dim
from varlens.ops.shape import flip
from varlens.core import dtypes as DT
from varlens.ops.return_types import cummax as _CumMax
from varlens.ops.return_types import cummin as _CumMin
from varlens.ops._args import _float
from varlens.ops.reduce import sum as _reduce_sum
from varlens.ops._args import _tensor
from varlens.ops.pointwise import add
from varlens.ops.pointwise import cast
from varlens.ops.pointwise import clone
from varlens.ops.index import _on, gather
from varlens.ops.pointwise import mul
from varlens.ops.shape import reshape
from varlens.ops.shape import stack
from varlens.ops.pointwise import sub
from varlens.ops.shape import unbind


@torch_args(tensor_first=True)
def logcumsumexp(input, dim):
    """log(cumsum(exp(x))) along ``dim``, shifted by the maximum so it does not overflow."""
    m = amax(input, dim, keepdim=True).detach()
    return log(cumsum(exp(input - m), dim)) + m


@torch_args(tensor_first=True)
def diff(x, n=1, dim=-1, prepend=None, append=None):
    d = _dim(x, dim, "diff")
    if prepend is not None or append is not None:
        parts = [p if isinstance(p, Tensor) else Tensor._make(B.namespace(x._data).asarray(p, dtype=x.dtype))
                 for p in (prepend, x, append) if p is not None]
        x = cat(parts, d)
    for _ in range(n):
        L = x.shape[d]
        hi, lo = narrow(x, d, 1, L - 1), narrow(x, d, 0, L - 1)
        x = ne(hi, lo) if x.dtype.kind == "b" else hi - lo  # bool: changed or not, as PyTorch
    return x


class CumSum(Function):
    """out_i = sum_{j<=i} x_j;  dL/dx_j = sum_{i>=j} g_i (a reversed cumulative sum)."""

    def forward(self, x, dim):
        self.dim = dim
        return self.xp.cumsum(x, axis=dim)

    def backward(self, g):
        if hasattr(g, "_data"):
            return flip(cumsum(flip(g, (self.dim,)), self.dim), (self.dim,))
        xp = self.xp
        return xp.flip(xp.cumsum(xp.flip(g, self.dim), axis=self.dim), self.dim)


@torch_args(tensor_first=True)
def cumsum(x, dim, *, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    elif x._data.dtype.kind in "bu":
        x = x.to("int64")  # bool/uint8 sums are int64 in PyTorch (NumPy: uint64)
    return CumSum.apply(x, _one_dim(dim, x.ndim, "cumsum"))


# ---------------------------------------------------------------- Functions
def _revcumsum(a, xp):
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
        y = self.xp.cumprod(x, axis=dim)
        self.save_for_backward(x, y)
        return y

    def backward(self, g):
        xp = self.xp
        x, y = self.saved
        d = self.dim
        x, y, g = (xp.moveaxis(a, d, -1) for a in (x, y, g))
        zero = x == 0
        gy = g * y
        if xp is B.xp and not zero.any():   # (on a device: no host read, the general path always)
            gx = _revcumsum(gy, xp) / x
        else:
            nz = xp.cumsum(zero, -1)
            before = nz == 0
            first = zero & (nz == 1)
            gx = xp.where(before, _revcumsum(gy, xp) / xp.where(before, x, 1), 0)
            y1 = xp.cumprod(xp.where(first, 1, x), -1)
            gx = gx + xp.where(first, _revcumsum(g * y1, xp), 0)
        return xp.moveaxis(gx, -1, d), None

    @staticmethod
    def composite(x, dim):
        """The running product as a chain of multiplications (differentiable twice)."""
        parts = unbind(x, dim)
        run, outs = parts[0], [parts[0]]
        for p in parts[1:]:
            run = run * p
            outs.append(run)
        return stack(outs, dim)


@torch_args(tensor_first=True)
def cumprod(input, dim, *, dtype=None):  # noqa: A002
    x = _tensor(input, "cumprod: input")
    if dtype is not None:
        x = cast(x, DT.to_dtype(dtype))
    elif x.dtype.kind in "bu":
        x = cast(x, DT.to_dtype("int64"))  # bool/uint8 products are int64, as PyTorch
    if x.ndim == 0:
        return clone(x)
    return CumProd.apply(x, _dim(x, dim, "cumprod"))


def _running(xp, op, a):
    """``op.accumulate(a, axis=-1)`` for op = maximum or minimum.  CuPy's ufuncs accumulate only
    add and multiply, so on the device the running extreme is a log-step scan (Hillis-Steele):
    ceil(log2 n) elementwise steps, each combining every position with the one 2^j before it
    (a NaN spreads forward as with accumulate); no host synchronisation."""
    if xp is B.xp:
        return op.accumulate(a, axis=-1)
    out, k, n = a.copy(), 1, a.shape[-1]
    while k < n:
        out[..., k:] = op(out[..., k:], out[..., :-k])
        k *= 2
    return out


def _cum_extreme(input, dim, what, better):
    x = _tensor(input, f"{what}: input")
    xp = B.namespace(x._data)
    if x.ndim == 0:
        return clone(x), Tensor._make(xp.zeros((), dtype=DT.int64))
    d = _dim(x, dim, what)
    a = xp.moveaxis(x._data, d, -1)
    n = a.shape[-1]
    better = getattr(xp, better)
    acc = _running(xp, xp.maximum if better is xp.greater_equal else xp.minimum, a)
    # a position takes over when it is at least as good as the running extreme before it (ties move
    # the index forward, as PyTorch); a NaN takes over and stays the value until the next NaN
    prev = xp.concatenate([a[..., :1], acc[..., :-1]], -1)
    nan = xp.isnan(a) if a.dtype.kind == "f" else xp.zeros(a.shape, bool)
    prev_nan = xp.isnan(prev) if a.dtype.kind == "f" else nan
    with xp.errstate(invalid="ignore"):
        take = nan | (better(a, prev) & ~prev_nan)
    take[..., 0] = True
    idx = _running(xp, xp.maximum, xp.where(take, xp.arange(n), 0))
    idx = xp.moveaxis(idx, -1, d).astype(DT.int64)
    it = Tensor._make(idx)
    return gather(x, d, it), it


@torch_args(tensor_first=True)
def cummax(input, dim):  # noqa: A002
    """Running maximum along ``dim`` and where it was last reached (values, indices)."""
    return _CumMax(*_cum_extreme(input, dim, "cummax", "greater_equal"))


@torch_args(tensor_first=True)
def cummin(input, dim):  # noqa: A002
    return _CumMin(*_cum_extreme(input, dim, "cummin", "less_equal"))


# ---------------------------------------------------------------- integration, statistics
def _trap_dx(y, x, dx, d, what):
    if x is None:
        return 1.0 if dx is None else dx
    if dx is not None:
        raise RuntimeError(f"{what}: give x or dx, not both")
    x = x if isinstance(x, Tensor) else Tensor._make(B.namespace(y._data).asarray(x))
    n = y.shape[d]
    if x.ndim == 1:
        if x.shape[0] != n:
            raise RuntimeError(f"{what}: x has {x.shape[0]} points but y has {n} along dim {d}")
        dxs = sub(x[1:], x[:-1])
        shape = [1] * y.ndim
        shape[d] = n - 1
        return reshape(dxs, tuple(shape))
    if x.ndim != y.ndim:
        raise RuntimeError(f"{what}: x must be 1-D or have y's number of dimensions, got shapes "
                           f"{tuple(x.shape)} and {tuple(y.shape)}")
    xd = _dim(x, d, what)
    return sub(narrow(x, xd, 1, x.shape[xd] - 1), narrow(x, xd, 0, x.shape[xd] - 1))


def _trap_terms(y, x, dx, dim, what):
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
    s = add(narrow(ya, d, 1, n - 1), narrow(ya, d, 0, n - 1))
    return mul(mul(s, step), 0.5), d


@torch_args(tensor_first=True)
def trapezoid(y, x=None, *, dx=None, dim=-1):
    """Trapezoid rule along ``dim`` with sample points ``x`` (1-D or y's shape) or spacing ``dx``."""
    terms, d = _trap_terms(y, x, dx, dim, "trapezoid")
    if terms is None:
        shape = tuple(s for i, s in enumerate(y.shape) if i != d)
        fy = _float(y)
        return Tensor._make(B.namespace(fy._data).zeros(shape, dtype=fy.dtype))
    return _reduce_sum(terms, d)


@torch_args(tensor_first=True)
def trapz(y, x=None, *, dx=None, dim=-1):
    return trapezoid(y, x, dx=dx, dim=dim)


@torch_args(tensor_first=True)
def cumulative_trapezoid(y, x=None, *, dx=None, dim=-1):
    terms, d = _trap_terms(y, x, dx, dim, "cumulative_trapezoid")
    if terms is None:
        fy = _float(y)
        return Tensor._make(B.namespace(fy._data).zeros(tuple(y.shape), dtype=fy.dtype))
    return cumsum(terms, d)


def _gradient_along(f, d, coords, h, edge_order):
    """One dimension of torch.gradient: second-order central differences inside (NumPy's
    non-uniform formula when ``coords`` is given, else step ``h``), first- or second-order
    one-sided differences at the two ends."""
    n = f.shape[d]
    lib = B.xp
    if coords is None:
        dx = lib.full(n - 1, float(h))
    else:
        dx = lib.diff(B.to_host(coords._data).astype(lib.float64))

    def along(v):   # a coefficient vector along d, broadcast over the other dims
        shape = [1] * f.ndim
        shape[d] = -1
        return Tensor._make(_on(lib.asarray(v, dtype=f._data.dtype).reshape(shape), f._data))

    def part(start, length):
        return narrow(f, d, start, length)
    dx1, dx2 = dx[:-1], dx[1:]
    inner = part(0, n - 2) * along(-dx2 / (dx1 * (dx1 + dx2))) + \
        part(1, n - 2) * along((dx2 - dx1) / (dx1 * dx2)) + part(2, n - 2) * along(dx1 / (dx2 * (dx1 + dx2)))
    if edge_order == 1:
        first = (part(1, 1) - part(0, 1)) * (1.0 / dx[0])
        last = (part(n - 1, 1) - part(n - 2, 1)) * (1.0 / dx[-1])
    else:
        a1, a2 = dx[0], dx[1]
        first = part(0, 1) * float(-(2 * a1 + a2) / (a1 * (a1 + a2))) + part(1, 1) * float((a1 + a2) / (a1 * a2)) + \
            part(2, 1) * float(-a1 / (a2 * (a1 + a2)))
        b1, b2 = dx[-2], dx[-1]
        last = part(n - 3, 1) * float(b2 / (b1 * (b1 + b2))) + part(n - 2, 1) * float(-(b2 + b1) / (b1 * b2)) + \
            part(n - 1, 1) * float((2 * b2 + b1) / (b2 * (b1 + b2)))
    return cat([first, inner, last], d)


@torch_args(tensor_first=True)
def gradient(input, *, spacing=1, dim=None, edge_order=1):  # noqa: A002
    """torch.gradient: a tuple with input's numerical derivative along each dim (all when dim is
    None); spacing a number, one number per dim, or one 1-D coordinate tensor per dim.
    Differentiable (every value is a weighted sum of input's entries)."""
    if edge_order not in (1, 2):
        raise RuntimeError("torch.gradient only supports edge_order=1 and edge_order=2.")
    x = input if input._data.dtype.kind == "f" else cast(input, DT.get_default_dtype())
    dims = list(range(x.ndim)) if dim is None else [dim] if isinstance(dim, int) else list(dim)
    dims = [_dim(x, d_, "gradient") for d_ in dims]
    if len(set(dims)) != len(dims):
        raise RuntimeError(f"gradient: argument 'dim' repeats a dimension: {dims}")
    if isinstance(spacing, (int, float, Tensor)) and not (isinstance(spacing, Tensor) and spacing.ndim):
        sp = [float(spacing.item() if isinstance(spacing, Tensor) else spacing)] * len(dims)
    else:
        sp = list(spacing)
        if len(sp) == 1 and not isinstance(sp[0], Tensor) and len(dims) > 1:
            sp = sp * len(dims)
        if len(sp) != len(dims):
            what = f"'self.dim() = {x.ndim}', since dim argument was not given" if dim is None else \
                f"the number of dims given, {len(dims)}"
            raise RuntimeError(f"torch.gradient expected spacing to be unspecified, a scalar, or a list of length "
                               f"equal to {what}, but got a list of length {len(sp)}")
    outs = []
    for d_, s in zip(dims, sp):
        if x.shape[d_] < edge_order + 1:
            raise RuntimeError("torch.gradient expected each dimension size to be at least edge_order+1")
        if isinstance(s, Tensor) and s.ndim:
            if s.ndim != 1 or s.shape[0] != x.shape[d_]:
                raise RuntimeError(f"torch.gradient expected each tensor in 'spacing' to be 1-D with "
                                   f"{x.shape[d_]} coordinates (dim {d_}), got shape {tuple(s.shape)}")
            outs.append(_gradient_along(x, d_, s, None, edge_order))
        else:
            outs.append(_gradient_along(x, d_, None, float(s.item() if isinstance(s, Tensor) else s), edge_order))
    return tuple(outs)
