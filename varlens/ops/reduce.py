"""Reductions over dimensions: sum, mean, var/std, max/min, logsumexp, softmax/log_softmax, prod,
nansum/nanmean, aminmax, count_nonzero, all/any.  (Norms are in varlens/ops/linalg.py, cumulative
ops in varlens/ops/scan.py.)

Each backward spreads the cotangent of the reduced output back over the
elements that produced it (re-inserting the reduced axes first).
"""
from __future__ import annotations

import builtins as _b

from varlens.core.arg_rules import torch_args
from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core import primitives as D
from varlens.ops.kernels import rows as _KR
from varlens.ops.shape import permute, reshape, unbind
from varlens.ops.return_types import aminmax as _MM
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.ops._args import _tensor
from varlens.ops.pointwise import cast
from varlens.ops.pointwise import div
from varlens.ops.compare import isnan
from varlens.ops.pointwise import where
from varlens.core.tensor import _size
from varlens.ops.index import Gather
from varlens.ops.pointwise import _fl, _float_only, maximum, minimum, not_tensor, torch_dtype_name
from varlens.ops.shape import squeeze


def norm_dims(dim, ndim, op):
    """Normalise a dim argument (int, tuple, list or None) to a sorted tuple of axes."""
    if dim.__class__ is int and -ndim <= dim < ndim:   # one int in range (ndim > 0): the common call
        return (dim % ndim,)
    if dim is None:
        return tuple(range(ndim))
    if isinstance(dim, (list, tuple)):
        dims = tuple(dim)
    else:
        dims = (dim,)
    out = []
    for d in dims:
        if not isinstance(d, int):
            if isinstance(d, (str, bytes, float)) or d is None:
                raise TypeError(f"{op}(): argument 'dim' must be an int or a tuple of ints, not "
                                f"{type(d).__name__} ({d!r})")
            d = int(d)
        if not -_b.max(ndim, 1) <= d < _b.max(ndim, 1):
            raise IndexError(f"{op}: dim {d} is out of range for a tensor with {ndim} dimensions "
                             f"(expected a value in [{-_b.max(ndim, 1)}, {_b.max(ndim, 1) - 1}])")
        out.append(d % _b.max(ndim, 1) if ndim else 0)
    if not ndim:
        return ()
    st = set(out)
    if len(st) != len(out):
        raise RuntimeError(f"{op}: dim {next(d for d in out if out.count(d) > 1)} appears multiple times in "
                           f"the list of dims {dims} (expected each dim at most once)")
    return tuple(sorted(st))


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else s for i, s in enumerate(shape))


def _expand_back(g, in_shape, axes, keepdim):
    """Re-insert reduced axes into ``g`` and broadcast it to the input shape."""
    if not keepdim:
        g = D.reshape(g, _kept_shape(in_shape, axes))
    return D.broadcast_to(g, in_shape)


def _spread(g, in_shape, axes, keepdim):
    """As _expand_back, but for arrays a fresh, owned array (what a leaf's .grad keeps
    without another copy); Tensors go the differentiable way."""
    if g.__class__ is xp.ndarray or B.is_device_array(g):
        out = (xp if g.__class__ is xp.ndarray else B.namespace(g)).empty(in_shape, dtype=g.dtype)
        out[...] = g if keepdim else g.reshape(_kept_shape(in_shape, axes))
        return out
    return _expand_back(g, in_shape, axes, keepdim)


class Sum(Function):
    """out = sum of x over axes;  d/dx = 1 for every summed element."""

    def forward(self, x, axes, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        return x.sum(axis=None if len(axes) == x.ndim else axes, keepdims=keepdim)

    def backward(self, g):
        return _spread(g, self.in_shape, self.axes, self.keepdim)


_add_reduce = xp.add.reduce


class Mean(Function):
    """out = mean of x over axes;  d/dx = 1/N."""

    def forward(self, x, axes, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        n = 1
        for a in axes:
            n *= x.shape[a]
        self.n = n
        ax = None if len(axes) == x.ndim else axes
        if n and x.__class__ is xp.ndarray and x.dtype.char in "fd":
            # the sum and one division: NumPy's own mean (the same pairwise sum, then the same
            # division) spends 3-8 us in Python around it on small arrays
            return _add_reduce(x, axis=ax, keepdims=keepdim) / n
        return x.mean(axis=ax, keepdims=keepdim)

    def backward(self, g):
        # scale the (small) reduced cotangent first, then spread it
        return _spread(g * (1.0 / _b.max(self.n, 1)), self.in_shape, self.axes, self.keepdim)


class Var(Function):
    """out = sum (x - mean)^2 / (N - correction);  d/dx = 2 (x - mean) / (N - correction)."""

    def forward(self, x, axes, correction, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        self.n = _numel(x.shape, axes)
        self.denom = _b.max(self.n - correction, 0)
        self.save_for_backward(x)
        return self.xp.var(x, axis=axes, ddof=correction, keepdims=keepdim)

    def backward(self, g):
        x = self.saved[0]
        xc = x - D.sum(x, self.axes, True) * (1.0 / self.n)
        scale = 2.0 / self.denom if self.denom else float("inf")  # N <= correction: NaN, as PyTorch
        return _expand_back(g, self.in_shape, self.axes, self.keepdim) * xc * scale


def _numel(shape, axes):
    n = 1
    for a in axes:
        n *= shape[a]
    return n


class Std(Function):
    """out = sqrt(var);  d/dx = (x - mean) / ((N - correction) * std), 0 where std = 0."""

    def forward(self, x, axes, correction, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        self.n = _numel(x.shape, axes)
        self.denom = _b.max(self.n - correction, 0)
        y = self.xp.std(x, axis=axes, ddof=correction, keepdims=keepdim)
        self.save_for_backward(x, y)
        return y

    def backward(self, g):
        """(x - mean) / ((N - correction) std) times g, with 0 where std = 0 (a constant input),
        as PyTorch masks it, instead of 0 / 0."""
        x, y = self.saved
        xc = x - D.sum(x, self.axes, True) * (1.0 / self.n)
        zero = y == 0
        gy = D.where(zero, 0.0, g / D.where(zero, 1.0, y))
        gy = _expand_back(gy, self.in_shape, self.axes, self.keepdim)
        return gy * xc * (1.0 / self.denom if self.denom else float("inf"))


class Amax(Function):
    """out = max over axes;  the gradient is shared evenly among the maximal elements (as PyTorch)."""

    fn = "max"

    def forward(self, x, axes, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        y = getattr(self.xp, self.fn)(x, axis=axes, keepdims=True)
        mask = (x == y)
        self.w = mask / mask.sum(axis=axes, keepdims=True).astype(x.dtype)
        return y if keepdim else y.reshape(tuple(s for i, s in enumerate(x.shape) if i not in axes))

    def backward(self, g):
        return _expand_back(g, self.in_shape, self.axes, self.keepdim) * self.w


class Amin(Amax):
    """out = min over axes;  gradient shared evenly among the minimal elements."""

    fn = "min"


class LogSumExp(Function):
    """out = log sum exp x (computed stably);  d/dx = exp(x - out) = softmax(x)."""

    def forward(self, x, axes, keepdim):
        xp = self.xp
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        m = xp.max(x, axis=axes, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)
        y = xp.log(xp.sum(xp.exp(x - m), axis=axes, keepdims=True)) + m
        self.save_for_backward(x, y if keepdim else y.reshape(_drop(x.shape, axes)))
        return self.saved[1]

    def backward(self, g):
        x, y = self.saved
        yk = y if self.keepdim else D.reshape(y, _kept_shape(self.in_shape, self.axes))
        return _expand_back(g, self.in_shape, self.axes, self.keepdim) * D.exp(x - yk)


def _drop(shape, axes):
    return tuple(s for i, s in enumerate(shape) if i not in axes)


class Softmax(Function):
    """y = exp(x - max) / sum;  dL/dx = y * (g - sum(g*y)) (the Jacobian diag(y) - y y^T of seed 001 §3.1)."""

    def forward(self, x, dim):
        xp = self.xp
        self.dim = dim
        if dim == x.ndim - 1 and x.size and _KR.kernel_ok(x):  # float32 rows: one compiled pass
            e = _KR.softmax(x.reshape(-1, x.shape[-1]), use_kernel=True).reshape(x.shape)
            self.save_for_backward(e)
            return e
        e = xp.exp(x - xp.max(x, axis=dim, keepdims=True))
        e /= e.sum(axis=dim, keepdims=True)
        self.save_for_backward(e)
        return e

    def backward(self, g):
        y = self.saved[0]
        if self.dim == y.ndim - 1 and y.size and g.__class__ is xp.ndarray and _KR.kernel_ok(g, y):
            n = y.shape[-1]
            return _KR.softmax_grad(g.reshape(-1, n), y.reshape(-1, n), use_kernel=True).reshape(y.shape)
        gy = g * y
        return gy - y * D.sum(gy, self.dim, True)


class LogSoftmax(Function):
    """y = x - logsumexp(x);  dL/dx = g - softmax(x) * sum(g)."""

    def forward(self, x, dim):
        xp = self.xp
        self.dim = dim
        if dim == x.ndim - 1 and x.size and _KR.kernel_ok(x):  # float32 rows: one compiled pass
            y = _KR.log_softmax(x.reshape(-1, x.shape[-1]), use_kernel=True).reshape(x.shape)
            self.save_for_backward(y)
            return y
        s = x - xp.max(x, axis=dim, keepdims=True)
        y = s - xp.log(xp.sum(xp.exp(s), axis=dim, keepdims=True))
        self.save_for_backward(y)
        return y

    def backward(self, g):
        y = self.saved[0]
        if self.dim == y.ndim - 1 and y.size and g.__class__ is xp.ndarray and _KR.kernel_ok(g, y):
            n = y.shape[-1]
            return _KR.log_softmax_grad(g.reshape(-1, n), y.reshape(-1, n), use_kernel=True).reshape(y.shape)
        return g - D.exp(y) * D.sum(g, self.dim, True)


class Prod(Function):
    """out = prod x over axes;  d/dx_i = prod_{j != i} x_j (computed as out / x_i where x_i != 0)."""

    differentiable_backward = False

    def forward(self, x, axes, keepdim):
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        self.x = x
        y = self.xp.prod(x, axis=axes, keepdims=True)
        self.yk = y
        return y if keepdim else y.reshape(_drop(x.shape, axes))

    def backward(self, g):
        xp, x = self.xp, self.x
        gk = g if self.keepdim else g.reshape(self.yk.shape)
        if xp is B.xp and not (x == 0).any():   # (on a device: no host read, the exact path always)
            return gk * self.yk / x
        # exact product of the others, element by element along the (flattened) reduced axes
        moved = xp.moveaxis(x, self.axes, tuple(range(-len(self.axes), 0)))
        flat = moved.reshape(moved.shape[:moved.ndim - len(self.axes)] + (-1,))
        n = flat.shape[-1]
        left = xp.concatenate([xp.ones_like(flat[..., :1]), xp.cumprod(flat, -1)[..., :-1]], -1)
        right = xp.flip(xp.concatenate([xp.ones_like(flat[..., :1]),
                                        xp.cumprod(xp.flip(flat, -1), -1)[..., :-1]], -1), -1)
        others = (left * right).reshape(moved.shape)
        others = xp.moveaxis(others, tuple(range(-len(self.axes), 0)), self.axes)
        del n
        return gk * others

    @staticmethod
    def composite(x, axes, keepdim):
        """The same product as a chain of multiplications (differentiable twice)."""
        nd = x.ndim
        rest = [i for i in range(nd) if i not in axes]
        moved = permute(x, rest + list(axes))
        flat = reshape(moved, tuple(x.shape[i] for i in rest) + (-1,))
        parts = unbind(flat, -1)
        out = parts[0]
        for p in parts[1:]:
            out = out * p
        if keepdim:
            out = reshape(out, _kept_shape(x.shape, axes))
        return out


class Norm2(Function):
    """out = sqrt(sum x^2) over axes;  d/dx = x / out, taken as 0 where out = 0 (x = 0 there),
    as PyTorch (the subgradient 0 instead of 0/0 = NaN)."""

    def forward(self, x, axes, keepdim):
        xp = self.xp
        self.in_shape, self.axes, self.keepdim = x.shape, axes, keepdim
        y = xp.sqrt(xp.sum(x * x, axis=axes, keepdims=True))
        y = y if keepdim else y.reshape(_drop(x.shape, axes))
        self.save_for_backward(x, y)
        return y

    def backward(self, g):
        x, y = self.saved
        if not self.keepdim:
            kept = _kept_shape(self.in_shape, self.axes)
            y, g = D.reshape(y, kept), D.reshape(g, kept)
        safe = D.where(y == 0, 1.0, y)  # x = 0 wherever y = 0, so the quotient is 0 there
        return (g / safe) * x


def _tname(dtype):
    return torch_dtype_name(dtype)


# ---------------------------------------------------------------- wrappers
@torch_args(tensor_first=True)
def sum(x, dim=None, keepdim=False, *, dtype=None):  # noqa: A001
    dim = _empty_dims_all(dim)
    if dim is None and dtype is None and x._data.dtype.kind in "fc":  # the common case, fast
        return Sum.apply(x, tuple(range(x._data.ndim)), keepdim)
    if dtype is not None:
        x = x.to(dtype)
    elif x.dtype.kind in "bui":
        x = x.to("int64")
    return Sum.apply(x, norm_dims(dim, x.ndim, "sum"), keepdim)


@torch_args(tensor_first=True)
def mean(x, dim=None, keepdim=False, *, dtype=None):
    dim = _empty_dims_all(dim)
    if dtype is not None:
        x = x.to(dtype)
    if x.dtype.kind not in "fc":
        raise RuntimeError(f"mean(): could not infer output dtype. Input dtype must be either a floating point "
                           f"or complex dtype. Got: {_tname(x.dtype)} (dtype {x.dtype}); convert with .float() "
                           "first or pass dtype=")
    return Mean.apply(x, norm_dims(dim, x.ndim, "mean"), keepdim)


def _correction(unbiased, correction):
    if correction is not None:
        return correction
    if unbiased is None:
        return 1
    return 1 if unbiased else 0


def _float_input(x, op, msg):
    if x._data.dtype.kind in "biu":
        raise RuntimeError(f"{msg}: {op} got a tensor of dtype {x.dtype} ({_tname(x.dtype)}); "
                           "convert it with .float() first")


@torch_args(tensor_first=True)
def var(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):  # var(x, False) means unbiased=False in PyTorch
        unbiased, dim = dim, None
    _float_input(x, "var", "std and var only support floating point and complex dtypes")
    return Var.apply(x, norm_dims(dim, x.ndim, "var"), _correction(unbiased, correction), keepdim)


@torch_args(tensor_first=True)
def std(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    if isinstance(dim, bool):
        unbiased, dim = dim, None
    _float_input(x, "std", "std and var only support floating point and complex dtypes")
    return Std.apply(x, norm_dims(dim, x.ndim, "std"), _correction(unbiased, correction), keepdim)


@torch_args(tensor_first=True)
def var_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return var(x, dim, unbiased, keepdim, correction=correction), mean(x, dim, keepdim)


@torch_args(tensor_first=True)
def std_mean(x, dim=None, unbiased=None, keepdim=False, *, correction=None):
    return std(x, dim, unbiased, keepdim, correction=correction), mean(x, dim, keepdim)


@torch_args(tensor_first=True)
def amax(x, dim=None, keepdim=False):
    dim = _empty_dims_all(dim)
    dims = norm_dims(dim, x.ndim, "amax")
    _nonempty(x, "amax", None if dim is None else dims)
    return Amax.apply(x, dims, keepdim)


@torch_args(tensor_first=True)
def amin(x, dim=None, keepdim=False):
    dim = _empty_dims_all(dim)
    dims = norm_dims(dim, x.ndim, "amin")
    _nonempty(x, "amin", None if dim is None else dims)
    return Amin.apply(x, dims, keepdim)


def _empty_dims_all(dim):
    """sum/mean/amax/amin(dim=[]) reduce over every dim in PyTorch (not over none)."""
    return None if dim.__class__ in (tuple, list) and not dim else dim


def _nonempty(x, op, dims=None):
    """Refuse a max/min over nothing.  With ``dims`` (the reduced dims) only those must be
    non-empty, as PyTorch: amax over dim 1 of a (0, 3) tensor is an empty (0,) result."""
    # (this module defines its own any/min: a plain membership test instead)
    if x.numel() == 0 and (dims is None or not x.ndim or 0 in [x.shape[d] for d in dims]):
        # an empty reduced dim named by the caller is an IndexError in PyTorch, no dim a RuntimeError
        raise (RuntimeError if dims is None else IndexError)(
            f"{op}: cannot reduce an empty tensor of shape {tuple(x.shape)} over dims "
            f"{'(all)' if dims is None else dims}; give a dim of non-zero size")


def _int_dim(dim, op):
    """max/min/argmax/argmin(dim=...) take one dim, as PyTorch: a tuple is a TypeError."""
    if isinstance(dim, (tuple, list)):
        raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__}")


from varlens.ops import return_types as _rt  # noqa: E402


class MaxAll(Amax):
    """x.max() with no dim: the overall maximum, the gradient shared evenly among the maximal
    elements (as Amax).  Its own class only so the node prints as PyTorch's (MaxBackward1;
    x.amax() is AmaxBackward0)."""

    torch_node_name = "MaxBackward1"


class MinAll(Amin):
    """x.min() with no dim (PyTorch's MinBackward1); see MaxAll."""

    torch_node_name = "MinBackward1"


class MaxDim(Gather):
    """The values of x.max(dim) / x.min(dim) given the indices of the extremes along dim:
    out = x gathered at ``index`` (kept-dim shape), squeezed unless keepdim.  d/dx = g placed at
    those indices and 0 elsewhere: the gradient goes to the one index returned, not shared among
    ties (PyTorch's MaxBackward0 / MinBackward0, one node where a gather and a squeeze were)."""

    torch_node_name = "MaxBackward0"

    def forward(self, x, dim, index, keepdim=False):
        self.keepdim = keepdim
        if not x.ndim:            # a 0-d tensor: its own maximum, at index 0
            self.in_shape = ()
            return x.copy()
        out = Gather.forward(self, x, dim, index)
        return out if keepdim else out.reshape(_drop(x.shape, (dim,)))

    def backward(self, g):
        """d/dx: g at the extremes' indices along dim (unsqueezed back first), 0 elsewhere."""
        if not self.in_shape:
            return g, None, None
        if not self.keepdim:
            g = D.reshape(g, self.index.shape)
        return Gather.backward(self, g)


class MinDim(MaxDim):
    """The values of x.min(dim) (PyTorch's MinBackward0); see MaxDim."""

    torch_node_name = "MinBackward0"


@torch_args(tensor_first=True)
def max(x, dim=None, keepdim=False):  # noqa: A001
    """max(x) is the overall maximum; max(x, dim) returns (values, indices) as in PyTorch.
    max(x, other_tensor) is the elementwise maximum."""
    if isinstance(dim, Tensor):
        return maximum(x, dim)
    if dim is None:
        _nonempty(x, "max")
        return MaxAll.apply(x, norm_dims(None, x.ndim, "max"), False)
    return _minmax_dim(x, dim, keepdim, argmax, _rt.max, MaxDim)


@torch_args(tensor_first=True)
def min(x, dim=None, keepdim=False):  # noqa: A001
    if isinstance(dim, Tensor):
        return minimum(x, dim)
    if dim is None:
        _nonempty(x, "min")
        return MinAll.apply(x, norm_dims(None, x.ndim, "min"), False)
    return _minmax_dim(x, dim, keepdim, argmin, _rt.min, MinDim)


def _minmax_dim(x, dim, keepdim, argf, result, node):
    _int_dim(dim, "max/min")
    d = norm_dims(dim, x.ndim, "max/min")[0] if x.ndim else norm_dims(dim, 1, "max/min")[0] * 0
    _nonempty(x, "max/min", (d,))
    idx = argf(x, d, keepdim=True)
    vals = node.apply(x, d, idx._data, keepdim)
    if not keepdim and x.ndim:
        idx = squeeze(idx, d)
    return result(vals, idx)


@torch_args(tensor_first=True)
def argmax(x, dim=None, keepdim=False):
    a = x._data
    xp = B.namespace(a)
    if dim is None:
        if not a.size:
            raise IndexError("argmax(): Expected reduction dim to be specified for input.numel() == 0 (got an "
                             f"empty tensor of shape {tuple(a.shape)})")
        r = xp.argmax(a.reshape(-1))
        return Tensor._make(xp.asarray(r, dtype=xp.int64).reshape((1,) * a.ndim if keepdim else ()))
    _int_dim(dim, "argmax")
    d = norm_dims(dim, a.ndim, "argmax")[0] if a.ndim else 0
    return Tensor._make(xp.asarray(xp.argmax(a, axis=d, keepdims=keepdim), dtype=xp.int64))


@torch_args(tensor_first=True)
def argmin(x, dim=None, keepdim=False):
    a = x._data
    xp = B.namespace(a)
    if dim is None:
        if not a.size:
            raise IndexError("argmin(): Expected reduction dim to be specified for input.numel() == 0 (got an "
                             f"empty tensor of shape {tuple(a.shape)})")
        r = xp.argmin(a.reshape(-1))
        return Tensor._make(xp.asarray(r, dtype=xp.int64).reshape((1,) * a.ndim if keepdim else ()))
    _int_dim(dim, "argmin")
    d = norm_dims(dim, a.ndim, "argmin")[0] if a.ndim else 0
    return Tensor._make(xp.asarray(xp.argmin(a, axis=d, keepdims=keepdim), dtype=xp.int64))


@torch_args(tensor_first=True)
def logsumexp(x, dim, keepdim=False):
    if x._data.dtype.kind in "biu":
        x = _fl(x)  # integer input: the default float dtype, as PyTorch
    return LogSumExp.apply(x, norm_dims(dim, x.ndim, "logsumexp"), keepdim)


def _one_dim(dim, ndim, op):
    if dim is None:
        raise TypeError(f"{op}: dim must be given (an int)")
    return norm_dims(dim, ndim, op)[0] if ndim else 0


def _softmax_args(x, dim, dtype, op):
    """(x cast to dtype, the one normalised dim) for softmax/log_softmax: a Tensor of a floating
    dtype is required (torch's errors otherwise); no dim means PyTorch's legacy implicit choice."""
    if dtype is not None:
        x = x.to(dtype)
    try:
        k = x._data.dtype.kind
    except AttributeError:
        not_tensor(x, op)
    if k in "biu":
        _float_only(x, op)
    if dim is None:
        dim = 0 if x.ndim in (0, 1, 3) else 1
    return x, _one_dim(dim, x.ndim, op)


def _plain_dim(x, dim):
    """dim wrapped into [0, ndim) for a floating Tensor and an int dim in range, else None
    (then _softmax_args does the casts, the checks and their errors)."""
    if x.__class__ is Tensor and dim.__class__ is int:
        a = x._data
        nd = a.ndim
        if -nd <= dim < nd and a.dtype.kind == "f":
            return dim % nd
    return None


@torch_args(tensor_first=True)
def softmax(x, dim=None, dtype=None, **_):
    if dtype is None and (d := _plain_dim(x, dim)) is not None:
        return Softmax.apply(x, d)
    return Softmax.apply(*_softmax_args(x, dim, dtype, "softmax"))


@torch_args(tensor_first=True)
def log_softmax(x, dim=None, dtype=None, **_):
    if dtype is None and (d := _plain_dim(x, dim)) is not None:
        return LogSoftmax.apply(x, d)
    return LogSoftmax.apply(*_softmax_args(x, dim, dtype, "log_softmax"))


@torch_args(tensor_first=True)
def prod(x, dim=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = x.to(dtype)
    elif x._data.dtype.kind in "bu":
        x = x.to("int64")  # bool/uint8 products are int64 in PyTorch (NumPy: uint64)
    return Prod.apply(x, norm_dims(dim, x.ndim, "prod"), keepdim)


@torch_args(tensor_first=True)
def all(x, dim=None, keepdim=False):  # noqa: A001
    xp = B.namespace(x._data)
    r = xp.asarray(xp.all(x._data, axis=None if dim is None else norm_dims(dim, x.ndim, "all"), keepdims=keepdim))
    return Tensor._make(r.astype(xp.uint8) if x._data.dtype == xp.uint8 else r)  # uint8 stays uint8 (PyTorch)


@torch_args(tensor_first=True)
def any(x, dim=None, keepdim=False):  # noqa: A001
    xp = B.namespace(x._data)
    r = xp.asarray(xp.any(x._data, axis=None if dim is None else norm_dims(dim, x.ndim, "any"), keepdims=keepdim))
    return Tensor._make(r.astype(xp.uint8) if x._data.dtype == xp.uint8 else r)


@torch_args(tensor_first=True)
def aminmax(input, *, dim=None, keepdim=False):
    if dim is None:
        return _MM(amin(input), amax(input))
    return _MM(amin(input, dim, keepdim=keepdim), amax(input, dim, keepdim=keepdim))


@torch_args(tensor_first=True)
def count_nonzero(x, dim=None):
    a = x._data != 0
    if dim is not None:
        dim = norm_dims(dim, x.ndim, "count_nonzero") if x.ndim else None
    xp = B.namespace(a)
    return Tensor._make(xp.asarray(xp.count_nonzero(a, axis=dim), dtype=DT.int64))


@torch_args(tensor_first=True)
def nansum(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    """Sum with NaNs counted as zero (their gradient is 0)."""
    x = _tensor(input, "nansum: input")
    if x.dtype.kind == "f":
        x = where(isnan(x), 0.0, x)
    return sum(x, dim, keepdim=keepdim, dtype=dtype)


@torch_args(tensor_first=True)
def nanmean(input, dim=None, keepdim=False, *, dtype=None):  # noqa: A002
    x = _tensor(input, "nanmean: input")
    if x.dtype.kind != "f":
        raise RuntimeError(f"nanmean: expected a floating point input, got dtype {x.dtype}")
    if dtype is not None:
        x = cast(x, DT.to_dtype(dtype))
    keep = Tensor._make((~B.namespace(x._data).isnan(x._data)).astype(x.dtype))
    return div(nansum(x, dim, keepdim), sum(keep, dim, keepdim=keepdim))


def sum_to_size(input, *size):  # noqa: A002
    """Sum broadcast dimensions away so the result has ``size`` (the reverse of expand)."""
    x = _tensor(input, "sum_to_size: input")
    shape = tuple(_size(size))
    try:
        if tuple(xp.broadcast_shapes(shape, tuple(x.shape))) != tuple(x.shape):
            raise ValueError
    except ValueError:
        raise RuntimeError(f"sum_to_size: size {shape} is not expandable to the tensor's size "
                           f"{tuple(x.shape)}") from None
    return D.sum_to(x, shape)
