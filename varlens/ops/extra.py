"""More of PyTorch's Tensor API, composed from the ops above (so their gradients are the
composed ops' gradients, already checked): in-place variants, index_add/index_fill/index_copy,
narrow, diff, median, fmod, frac, logit, nan_to_num, count_nonzero, bincount, histc, rot90,
fliplr/flipud, type conversions and storage queries.

Each function takes the tensor first, as the method does; ``install`` attaches them to Tensor.
"""
from __future__ import annotations


from varlens.core import dtypes as DT
from varlens.core import grad_mode as _gm
from varlens.core.function import Function
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.ops.tensor_methods import _inplace, _random_


def _o():
    import varlens.ops as ops
    return ops


def _dim(x, dim, what):
    n = max(x.ndim, 1)
    if not -n <= dim < n:
        raise IndexError(f"{what}: dim {dim} is out of range for a tensor with {x.ndim} dimensions")
    return dim % n


# ---------------------------------------------------------------- index_add / fill / copy
def _index_along(x, dim, index, what, src_shape=None):
    """``index`` (1-D int) laid along ``dim`` and expanded to ``src_shape``, for scatter."""
    d = _dim(x, dim, what)
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    if idx.ndim > 1 or idx.dtype.kind not in "iu":
        raise RuntimeError(f"{what}: index must be a 1-D integer tensor, got shape {tuple(idx.shape)} "
                           f"and dtype {idx.dtype}")
    idx = idx.reshape(-1)
    L = x.shape[d]
    if idx.size and (idx.min() < -L or idx.max() >= L):
        raise IndexError(f"{what}: index out of range for dimension {d} of size {L}")
    idx = idx % L if idx.size else idx
    shape = [1] * x.ndim
    shape[d] = idx.size
    full = list(x.shape) if src_shape is None else list(src_shape)
    full[d] = idx.size
    return d, Tensor._make(xp.broadcast_to(idx.reshape(shape), full).astype(DT.int64))


def index_add(x, dim, index, source, *, alpha=1):
    """x with ``alpha * source`` added at ``index`` along ``dim`` (repeated indices add up)."""
    src = source if isinstance(source, Tensor) else Tensor._make(xp.asarray(source, dtype=x.dtype))
    d, idx = _index_along(x, dim, index, "index_add", src.shape)
    exp_shape = list(x.shape)
    exp_shape[d] = idx.shape[d]
    if list(src.shape) != exp_shape:
        raise RuntimeError(f"index_add: source must have shape {tuple(exp_shape)}, got {tuple(src.shape)}")
    return _o().scatter_add(x, d, idx, src * alpha if alpha != 1 else src)


def index_copy(x, dim, index, source):
    src = source if isinstance(source, Tensor) else Tensor._make(xp.asarray(source, dtype=x.dtype))
    d, idx = _index_along(x, dim, index, "index_copy", src.shape)
    return _o().scatter(x, d, idx, src)


def index_fill(x, dim, index, value):
    d, _ = _index_along(x, dim, index, "index_fill")
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    mask = xp.zeros(x.shape[d], dtype=bool)
    mask[idx.reshape(-1)] = True
    shape = [1] * x.ndim
    shape[d] = x.shape[d]
    return _o().masked_fill(x, Tensor._make(mask.reshape(shape)), value)


# ---------------------------------------------------------------- elementwise and reductions
def fmod(x, other):
    """x - other * trunc(x / other): the remainder with the sign of x (C's fmod); one op in
    varlens/ops/elementwise.py (integer inputs stay integer, as PyTorch)."""
    from varlens.ops.elementwise import fmod as _fmod
    return _fmod(x, other)


def frac(x):
    o = _o()
    o.elementwise._float_only(x, "frac")  # no integer frac in PyTorch either
    return x - o.trunc(x)


def logit(x, eps=None):
    o = _o()
    x = o.elementwise._fl(x)  # bool/integer input: float32, as PyTorch
    if eps is not None:
        x = o.clamp(x, eps, 1 - eps)
    return o.log(x / (1 - x))


def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN -> ``nan``, +Inf -> ``posinf`` (default: the dtype's largest), -Inf -> ``neginf``;
    the gradient flows through the entries that were finite."""
    a = x._data
    if a.dtype.kind != "f":
        return x
    fi = xp.finfo(a.dtype)
    out = x
    o = _o()
    for m, v in ((xp.isnan(a), nan), (xp.isposinf(a), fi.max if posinf is None else posinf),
                 (xp.isneginf(a), fi.min if neginf is None else neginf)):
        if m.any():
            out = o.masked_fill(out, Tensor._make(m), v)
    return out


def count_nonzero(x, dim=None):
    a = x._data != 0
    if dim is not None:
        from varlens.ops.reduce import norm_dims
        dim = norm_dims(dim, x.ndim, "count_nonzero") if x.ndim else None
    return Tensor._make(xp.asarray(xp.count_nonzero(a, axis=dim), dtype=DT.int64))


def diff(x, n=1, dim=-1, prepend=None, append=None):
    o = _o()
    d = _dim(x, dim, "diff")
    if prepend is not None or append is not None:
        parts = [p if isinstance(p, Tensor) else Tensor._make(xp.asarray(p, dtype=x.dtype))
                 for p in (prepend, x, append) if p is not None]
        x = o.cat(parts, d)
    for _ in range(n):
        L = x.shape[d]
        hi, lo = narrow(x, d, 1, L - 1), narrow(x, d, 0, L - 1)
        x = o.ne(hi, lo) if x.dtype.kind == "b" else hi - lo  # bool: changed or not, as PyTorch
    return x


def median(x, dim=None, keepdim=False):
    """The lower median, as PyTorch: element (n - 1) // 2 of the sorted values.  With ``dim``:
    (values, indices), a named pair."""
    o = _o()
    if dim is None:
        flat = o.reshape(x, (-1,))
        s = o.sort(flat)
        return s.values[(flat.shape[0] - 1) // 2]
    d = _dim(x, dim, "median")
    s = o.sort(x, d)
    k = (x.shape[d] - 1) // 2
    vals, idx = narrow(s.values, d, k, 1), narrow(s.indices, d, k, 1)
    if not keepdim:
        vals, idx = o.squeeze(vals, d), o.squeeze(idx, d)
    return _Median(vals, idx)


from varlens.ops.return_types import median as _Median  # noqa: E402


def bincount(x, weights=None, minlength=0):
    a = x._data
    if a.ndim != 1 or a.dtype.kind not in "iu" or (a.size and a.min() < 0):
        raise RuntimeError("bincount: input must be a 1-D tensor of non-negative integers")
    w = None if weights is None else (weights._data if isinstance(weights, Tensor) else xp.asarray(weights))
    r = xp.bincount(a, weights=w, minlength=minlength)
    return Tensor._make(r.astype(DT.int64) if w is None else r.astype(w.dtype, copy=False))


def histc(x, bins=100, min=0, max=0):  # noqa: A002  (PyTorch's argument names)
    a = x._data
    lo, hi = float(min), float(max)
    if lo == hi:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    h, _ = xp.histogram(a, bins=bins, range=(lo, hi))
    return Tensor._make(h.astype(a.dtype if a.dtype.kind == "f" else DT.get_default_dtype()))


# ---------------------------------------------------------------- shapes
def narrow(x, dim, start, length):
    d = _dim(x, dim, "narrow")
    L = x.shape[d]
    s = int(start.item() if isinstance(start, Tensor) else start)
    s = s + L if s < 0 else s
    if not (0 <= s and s + length <= L and length >= 0):
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({L}) of dim {d} "
                           f"(expected 0 <= start and start + length <= {L})")
    key = (slice(None),) * d + (slice(s, s + length),)
    return x[key]


def rot90(x, k=1, dims=(0, 1)):
    o = _o()
    d0, d1 = _dim(x, dims[0], "rot90"), _dim(x, dims[1], "rot90")
    k %= 4
    if k == 1:
        return o.transpose(o.flip(x, (d1,)), d0, d1)
    if k == 2:
        return o.flip(x, (d0, d1))
    if k == 3:
        return o.flip(o.transpose(x, d0, d1), (d1,))
    return x


def fliplr(x):
    return _o().flip(x, (1,))


def flipud(x):
    return _o().flip(x, (0,))


def type_as(x, other):
    return x.to(other.dtype)


def reshape_as(x, other):
    return _o().reshape(x, tuple(other.shape))


class Unfold(Function):
    """Windows of ``size`` taken every ``step`` along ``dim`` (Tensor.unfold): the windows axis
    replaces ``dim`` and the window's own axis goes last.  Backward adds each window's gradient
    back where the window was read from (overlapping windows add up): one strided slice-add per
    position inside the window, never a loop over windows."""

    def forward(self, x, dim, size, step):
        n = (x.shape[dim] - size) // step + 1
        self.dim, self.size, self.step, self.n, self.xshape = dim, size, step, n, x.shape
        w = xp.lib.stride_tricks.sliding_window_view(x, size, axis=dim)
        key = (slice(None),) * dim + (slice(0, (n - 1) * step + 1, step),)
        return xp.ascontiguousarray(w[key])

    def backward(self, g):
        d, size, step, n = self.dim, self.size, self.step, self.n
        gx = xp.zeros(self.xshape, dtype=g.dtype)
        for k in range(size):
            dst = (slice(None),) * d + (slice(k, k + (n - 1) * step + 1, step),)
            gx[dst] += g[..., k]
        return gx


def unfold(x, dimension, size, step):
    d = _dim(x, dimension, "unfold")
    L = x.shape[d] if x.ndim else 1
    if size <= 0 or step <= 0:
        raise RuntimeError(f"unfold: size and step must be positive, got size={size}, step={step}")
    if size > L:
        raise RuntimeError(f"unfold: size {size} is larger than dimension {d} of size {L}")
    return Unfold.apply(x, d, size, step)


# ---------------------------------------------------------------- in place
def _inplace_from(name, fn):
    """``name_``: the out-of-place ``fn`` written back into this tensor (as the in-place ops
    in tensor.py: an array update outside autograd, a re-pointed result inside it)."""
    def method(self, *args, **kwargs):
        other_rg = any(isinstance(a, Tensor) and a._rg for a in args) or \
            any(isinstance(v, Tensor) and v._rg for v in kwargs.values())

        def arr(a):
            if not a.flags.writeable:
                raise RuntimeError(f"{name}_: this tensor is a read-only view and cannot be changed in "
                                   "place; clone() it first")
            with _gm.no_grad():
                r = fn(Tensor._make(a), *args, **kwargs)
            if r._data.shape != a.shape:
                raise RuntimeError(f"{name}_: the result has shape {tuple(r._data.shape)}, not the "
                                   f"tensor's {tuple(a.shape)}")
            a[...] = r._data
        return _inplace(self, lambda: fn(self, *args, **kwargs), arr, other_rg)
    method.__name__ = name + "_"
    method.__doc__ = f"In-place {name}."
    return method


def _reshaping_inplace(name, fn):
    """``unsqueeze_``, ``t_``...: the tensor takes the new shape (a view of the same data)."""
    def method(self, *args):
        if self._node is None:  # a leaf stays a leaf: only its array takes the new shape
            with _gm.no_grad():
                self._data = fn(self, *args)._data
            return self
        res = fn(self, *args)
        self._data, self._node = res._data, res._node
        return self
    method.__name__ = name + "_"
    return method


def _random_fill(kind):
    def method(self, *args, generator=None):
        from varlens.random import _gen
        g = _gen(generator)
        if kind == "exponential":
            lam = args[0] if args else 1.0
            return _random_(self, lambda s: -xp.log1p(-g.random(s)) / lam)
        lo, hi = (0, args[0]) if len(args) == 1 else ((args[0], args[1]) if args else (0, 2 ** 24))
        return _random_(self, lambda s: g.integers(lo, hi, s))
    method.__name__ = kind + "_"
    return method


def install():
    o = _o()
    methods = {
        "index_add": index_add, "index_copy": index_copy, "index_fill": index_fill,
        "fmod": fmod, "frac": frac, "logit": logit, "nan_to_num": nan_to_num,
        "count_nonzero": count_nonzero, "diff": diff, "median": median, "bincount": bincount,
        "histc": histc, "narrow": narrow, "rot90": rot90, "fliplr": fliplr, "flipud": flipud,
        "type_as": type_as, "reshape_as": reshape_as, "unfold": unfold,
        "byte": lambda s: s.to(DT.uint8), "char": lambda s: s.to(DT.int8), "short": lambda s: s.to(DT.int16),
        "stride": lambda s, dim=None: (tuple(st // s._data.itemsize for st in s._data.strides) if dim is None
                                       else s._data.strides[dim] // s._data.itemsize),
        "element_size": lambda s: s._data.itemsize,
        "data_ptr": lambda s: s._data.ctypes.data,
        "pin_memory": lambda s: s,
        "share_memory_": lambda s: s,
        "exponential_": _random_fill("exponential"), "random_": _random_fill("random"),
    }
    for name, fn in methods.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    if not hasattr(Tensor, "nbytes"):
        Tensor.nbytes = property(lambda s: s._data.nbytes)
    inplace = {
        "scatter": o.scatter, "scatter_add": o.scatter_add, "masked_fill": o.masked_fill,
        "index_add": index_add, "index_copy": index_copy, "index_fill": index_fill,
        "clamp_min": lambda s, v: o.clamp(s, v, None), "clamp_max": lambda s, v: o.clamp(s, None, v),
        "floor": o.floor, "ceil": o.ceil, "round": o.round, "trunc": o.trunc, "sign": o.sign,
        "reciprocal": o.reciprocal, "square": o.square, "log1p": o.log1p, "expm1": o.expm1,
        "nan_to_num": nan_to_num, "fmod": fmod, "remainder": o.remainder, "frac": frac,
        "sigmoid": o.sigmoid, "relu": o.relu, "log2": o.log2, "log10": o.log10, "rsqrt": o.rsqrt,
        "where": lambda s, c, other: o.where(c, s, other),
    }
    for name, fn in inplace.items():
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _inplace_from(name, fn))
    for name, fn in {"unsqueeze": o.unsqueeze, "squeeze": o.squeeze, "t": o.t,
                     "transpose": o.transpose}.items():
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _reshaping_inplace(name, fn))
