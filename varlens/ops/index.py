"""Indexing: slicing, advanced indexing, gather/scatter, masked_fill.

The backward of reading ``x[key]`` is writing: the cotangent is scattered into a
zero tensor of x's shape at ``key``, with repeated indices accumulated (so an
embedding row used twice gets both contributions).
"""
from __future__ import annotations

from varlens.core.function import Function
from varlens.core.array import xp
from varlens.core.grad_mode import _enabled
from varlens.core import primitives as D
from varlens.core.primitives import IndexScatter, is_basic_index as _is_basic, scatter_array as _scatter_array


def index_key(key):
    """Turn Tensors/lists inside an index into arrays; leave ints, slices, None, Ellipsis."""
    from varlens.core.tensor import Tensor
    if isinstance(key, tuple):
        return tuple(_one(k, Tensor) for k in key)
    return _one(key, Tensor)


def _one(k, Tensor):
    if isinstance(k, Tensor):
        a = k._data
        if a.dtype.kind not in "iub":
            raise IndexError(f"index: tensors used as indices must be integer or bool, got dtype {a.dtype}")
        return a
    if isinstance(k, list):
        a = xp.asarray(k)
        if a.dtype.kind not in "iub" and a.size:
            raise IndexError(f"index: lists used as indices must hold integers or bools, got {a.dtype}")
        return a.astype(xp.int64) if a.dtype.kind != "b" else a
    if k.__class__ is slice and k.step is not None and k.step <= 0:
        if k.step == 0:
            raise ValueError("slice step cannot be zero")
        raise ValueError(f"step must be greater than zero (got a slice with step {k.step}; varlens, as torch, "
                         f"has no negative strides: use .flip(dim) to reverse)")
    return k


class GetItem(Function):
    """out = x[key];  dL/dx = zeros with g added at key (repeats accumulate)."""

    def forward(self, x, key):
        self.key, self.in_shape = key, x.shape
        try:
            return x[key]
        except IndexError as e:
            raise IndexError(f"index {_fmt(key)} is invalid for a tensor of shape {tuple(x.shape)}: {e}") from None

    def backward(self, g):
        return D.index_scatter(g, self.key, self.in_shape)


def _fmt(key):
    return repr(key) if not hasattr(key, "shape") else f"array of shape {key.shape}"


class IndexPut(Function):
    """out = x with out[key] = v;  dL/dx = g with zeros at key;  dL/dv = g[key]."""

    def forward(self, x, key, v):
        self.key = key
        out = x.copy()
        try:
            out[key] = v
        except ValueError as e:
            if "broadcast" not in str(e):
                raise
            raise RuntimeError(f"setitem: the value of shape {tuple(getattr(v, 'shape', ()))} cannot be "
                               f"broadcast to the indexed part of shape {tuple(x[key].shape)} of a tensor "
                               f"of shape {tuple(x.shape)}") from None
        return out

    def backward(self, g):
        n = self.next
        gx = gv = None
        if n[0] is not None:
            m = xp.ones(self._oshape, dtype=bool)
            m[self.key] = False
            gx = g * m
        if n[2] is not None:
            gv = g[self.key]
        return gx, None, gv


class Gather(Function):
    """out[i][j] = x[i][index[i][j]] along dim;  dL/dx = zeros with g added at those positions."""

    def forward(self, x, dim, index):
        self.dim, self.index, self.in_shape = dim, index, x.shape
        return x[_full_index(dim, index)]  # index may be smaller than x in the other dims

    def backward(self, g):
        if hasattr(g, "_data"):
            return scatter_add(_zeros_tensor(self.in_shape, g.dtype), self.dim, _t(self.index), g), None, None
        z = xp.zeros(self.in_shape, dtype=g.dtype)
        _add_along(z, self.dim, self.index, g)
        return z, None, None


def _t(a):
    from varlens.core.tensor import Tensor
    return Tensor._make(a)


def _zeros_tensor(shape, dtype):
    from varlens.core.tensor import Tensor
    return Tensor._make(xp.zeros(shape, dtype=dtype))


def _full_index(dim, index):
    idx = list(xp.indices(index.shape, sparse=True))
    idx[dim] = index
    return tuple(idx)


def _add_along(z, dim, index, src):
    xp.add.at(z, _full_index(dim, index), src[tuple(slice(0, s) for s in index.shape)])


class ScatterAdd(Function):
    """out = x, then out[index along dim] += src;  dL/dx = g;  dL/dsrc = gather(g, dim, index)."""

    def forward(self, x, dim, index, src):
        self.dim, self.index = dim, index
        out = x.copy()
        _add_along(out, dim, index, src)
        self.src_shape = src.shape
        return out

    def backward(self, g):
        gs = None
        if self.next[3] is not None:
            gs = gather(g, self.dim, _t(self.index)) if hasattr(g, "_data") else \
                g[_full_index(self.dim, self.index)]
            if tuple(gs.shape) != tuple(self.src_shape):  # src larger than index: the rest gets 0
                gs = D.index_scatter(gs, tuple(slice(0, s) for s in self.index.shape), self.src_shape)
        return g, None, None, gs


class Scatter(Function):
    """out = x, then out[index along dim] = src;  dL/dx = g with zeros where written;
    dL/dsrc = gather(g, dim, index)."""

    def forward(self, x, dim, index, src):
        self.dim, self.index = dim, index
        out = x.copy()
        if isinstance(src, (int, float, bool)):
            xp.put_along_axis(out, index, src, axis=dim)
        else:
            out[_full_index(dim, index)] = src[tuple(slice(0, s) for s in index.shape)]
        return out

    def backward(self, g):
        m = xp.ones(self._oshape, dtype=bool)
        m[_full_index(self.dim, self.index)] = False
        gs = None
        if len(self.next) > 3 and self.next[3] is not None:
            gs = gather(g, self.dim, _t(self.index)) if hasattr(g, "_data") else \
                g[_full_index(self.dim, self.index)]
        return g * m, None, None, gs


class MaskedFill(Function):
    """out = value where mask else x;  dL/dx = g where not mask, 0 where filled."""

    def forward(self, x, mask, value):
        self.mask = mask
        return xp.where(mask, xp.asarray(value, dtype=x.dtype), x)

    def backward(self, g):
        return D.where(self.mask, 0.0, g), None, None


# ---------------------------------------------------------------- wrappers
def getitem(x, key):
    key = index_key(key)
    out = GetItem.apply(x, key)
    if _is_basic(key):  # basic indexing gives a view: share the version counter
        out._version = x._version
        if _enabled[0]:  # remember the base, so an in-place op on the view can update it (tensor._commit)
            out._view_of = (x, "index", key, x._data)
    return out


def index_scatter(g, key, shape):
    return IndexScatter.apply(g, key, shape)


def index_put(x, key, value):
    from varlens.core.tensor import Tensor
    if not isinstance(value, Tensor):
        value = xp.asarray(value, dtype=x.dtype)
    return IndexPut.apply(x, index_key(key), value)


def _d(dim, x, op):
    from varlens.ops.shape import _dim
    return _dim(dim, max(x.ndim, 1), op) if x.ndim else 0


def _same_dtype(x, src, op):
    from varlens.core.tensor import Tensor
    if isinstance(src, Tensor) and src._data.dtype != x._data.dtype:
        raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype (self is {x._data.dtype}, "
                           f"src is {src._data.dtype})")


def index_select(x, dim, index):
    from varlens.core.tensor import Tensor
    d = _d(dim, x, "index_select")
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"index_select(): Expected dtype int32 or int64 for index, got {idx.dtype}")
    if idx.ndim > 1:
        raise IndexError(f"index_select(): Index is supposed to be a vector (got an index of shape "
                         f"{tuple(idx.shape)})")
    n = x.shape[d] if x.ndim else 1
    if idx.size and (idx.min() < -n or idx.max() >= n):
        bad = int(idx.max()) if idx.max() >= n else int(idx.min())
        raise IndexError(f"index_select(): index out of range in self (index {bad} for dim {d} of size {n}; "
                         f"expected indices in [{-n}, {n - 1}])")
    return getitem(x, (slice(None),) * d + (index,))


def _check_index(index, x, dim, op):
    from varlens.core.tensor import Tensor
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"{op}: index must be an int64 tensor, got dtype {idx.dtype}")
    if idx.ndim != x.ndim:
        raise RuntimeError(f"{op}: index has {idx.ndim} dimensions but the input has {x.ndim}")
    n = x.shape[dim]
    if idx.size and (idx.min() < -n or idx.max() >= n):
        raise RuntimeError(f"{op}: index {int(idx.max()) if idx.max() >= n else int(idx.min())} is out of "
                           f"bounds for dimension {dim} with size {n} (expected indices in [{-n}, {n - 1}])")
    return idx


def gather(x, dim, index):
    d = _d(dim, x, "gather")
    return Gather.apply(x, d, _check_index(index, x, d, "gather"))


def scatter_add(x, dim, index, src):
    d = _d(dim, x, "scatter_add")
    _same_dtype(x, src, "scatter_add")
    return ScatterAdd.apply(x, d, _check_index(index, x, d, "scatter_add"), src)


def scatter(x, dim, index, src=None, *, value=None):
    d = _d(dim, x, "scatter")
    _same_dtype(x, src, "scatter")
    if src is None:
        src = value
    return Scatter.apply(x, d, _check_index(index, x, d, "scatter"), src)


def masked_fill(x, mask, value):
    from varlens.core.tensor import Tensor
    m = mask._data if isinstance(mask, Tensor) else xp.asarray(mask)
    if m.dtype != bool:
        raise RuntimeError(f"masked_fill: mask must be a bool tensor, got dtype {m.dtype}")
    if isinstance(value, Tensor):
        value = value.item()
    elif isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"masked_fill(): argument 'value' must be a number or a 0-d Tensor, not "
                        f"{type(value).__name__} ({value!r})")
    try:
        xp.broadcast_shapes(m.shape, x.shape)
    except ValueError:
        raise RuntimeError(f"masked_fill: mask of shape {tuple(m.shape)} does not broadcast to the "
                           f"input's shape {tuple(x.shape)}") from None
    return MaskedFill.apply(x, m, value)


def one_hot(index, num_classes=-1):
    from varlens.core.tensor import Tensor
    a = index._data if isinstance(index, Tensor) else xp.asarray(index)
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"one_hot: expected an integer (int64) tensor of class indices, got dtype {a.dtype}")
    if num_classes < 0:
        num_classes = int(a.max()) + 1 if a.size else 0
    if a.size and (a.min() < 0 or a.max() >= num_classes):
        raise RuntimeError(f"one_hot: class values must be in [0, {num_classes}), got "
                           f"{int(a.min()) if a.min() < 0 else int(a.max())}")
    out = (a[..., None] == xp.arange(num_classes)).astype(xp.int64)
    return Tensor._make(out)
