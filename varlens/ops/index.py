"""Indexing: slicing, advanced indexing, gather/scatter (and scatter_reduce, index_add/copy/fill,
put, select/slice/diagonal scatters), masked_fill/masked_select/masked_scatter, take, nonzero,
and the ops that read or place elements by position: tril/triu, diag/diagonal/diag_embed,
repeat_interleave, combinations.

The backward of reading ``x[key]`` is writing: the cotangent is scattered into a
zero tensor of x's shape at ``key``, with repeated indices accumulated (so an
embedding row used twice gets both contributions).
"""
from __future__ import annotations

from varlens.core.arg_rules import torch_args
from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.array import xp
from varlens.ops.shape import _dim as _shape_dim
from varlens.core.grad_mode import _enabled
from varlens.core import primitives as D
from varlens.core.primitives import IndexScatter, is_basic_index as _is_basic
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.ops.shape import broadcast_to
from varlens.ops.shape import reshape
from varlens.ops._args import _dim
from varlens.ops._args import _arr
from varlens.core import grad_mode as _gm
from varlens.ops._args import _tensor
from varlens.ops.pointwise import add
from varlens.ops.pointwise import cast
from varlens.ops.pointwise import div
from varlens.ops.shape import expand
from varlens.ops.pointwise import mul
from varlens.ops.shape import permute
from varlens.ops.pointwise import where
from varlens.ops._args import _dim as _dim_args
from varlens.ops.shape import flatten
import itertools
from varlens.ops.shape import movedim


def _ns(a):
    """The array library of the array ``a`` (NumPy without a lookup on the host path)."""
    return xp if a.__class__ is xp.ndarray else B.namespace(a)


def _key_to(key, lib):
    """``key`` for a CUDA tensor: host index arrays copied to ``lib``'s device (a list or CPU index:
    a host-to-device copy, as PyTorch allows for CPU indices), and each boolean mask of n dims
    replaced by its n integer index arrays (``mask.nonzero()``, NumPy's own equivalence).  Finding
    the True positions reads the device once, here, as the result's size needs; the op's backward
    then scatters by integer positions and reads nothing."""
    parts = key if key.__class__ is tuple else (key,)
    out = []
    for k in parts:
        if k.__class__ is xp.ndarray:
            k = lib.asarray(k)
        if B.is_device_array(k) and k.dtype == bool and k.ndim:
            out.extend(lib.nonzero(k))
        else:
            out.append(k)
    return tuple(out) if key.__class__ is tuple or len(out) != 1 else out[0]


def _on(a, like):
    """The array ``a`` on the device of the array ``like`` (host arrays are copied to the device)."""
    if a.__class__ is like.__class__ or like.__class__ is xp.ndarray:
        return a
    return B.namespace(like).asarray(a)


def index_key(key):
    """Turn Tensors/lists inside an index into arrays; leave ints, slices, None, Ellipsis."""
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
            m = self.xp.ones(self._oshape, dtype=bool)
            m[self.key] = False
            gx = g * m
        if n[2] is not None:
            gv = g[self.key]
        return gx, None, gv


class Gather(Function):
    """out[i][j] = x[i][index[i][j]] along dim;  dL/dx = zeros with g added at those positions."""

    def forward(self, x, dim, index):
        self.dim, self.index, self.in_shape = dim, index, x.shape
        return x[_full_index(dim, index, self.xp)]  # index may be smaller than x in the other dims

    def backward(self, g):
        xp = self.xp
        if hasattr(g, "_data"):
            return scatter_add(Tensor._make(xp.zeros(self.in_shape, dtype=g.dtype)), self.dim, _t(self.index),
                               g), None, None
        z = xp.zeros(self.in_shape, dtype=g.dtype)
        _add_along(z, self.dim, self.index, g, xp)
        return z, None, None


def _t(a):
    return Tensor._make(a)


def _full_index(dim, index, xp=xp):
    nd = index.ndim   # open grids, as indices(sparse=True), which CuPy lacks
    idx = [xp.arange(n).reshape((1,) * i + (n,) + (1,) * (nd - i - 1)) for i, n in enumerate(index.shape)]
    idx[dim] = index
    return tuple(idx)


def _add_along(z, dim, index, src, xp=xp):
    B.add_at(xp, z, _full_index(dim, index, xp), src[tuple(slice(0, s) for s in index.shape)])


class ScatterAdd(Function):
    """out = x, then out[index along dim] += src;  dL/dx = g;  dL/dsrc = gather(g, dim, index)."""

    def forward(self, x, dim, index, src):
        self.dim, self.index = dim, index
        out = x.copy()
        _add_along(out, dim, index, src, self.xp)
        self.src_shape = src.shape
        return out

    def backward(self, g):
        gs = None
        if self.next[3] is not None:
            gs = gather(g, self.dim, _t(self.index)) if hasattr(g, "_data") else \
                g[_full_index(self.dim, self.index, self.xp)]
            if tuple(gs.shape) != tuple(self.src_shape):  # src larger than index: the rest gets 0
                gs = D.index_scatter(gs, tuple(slice(0, s) for s in self.index.shape), self.src_shape)
        return g, None, None, gs


class Scatter(Function):
    """out = x, then out[index along dim] = src;  dL/dx = g with zeros where written;
    dL/dsrc = gather(g, dim, index)."""

    def forward(self, x, dim, index, src):
        self.dim, self.index = dim, index
        xp = self.xp
        out = x.copy()
        if isinstance(src, (int, float, bool)):
            if xp is B.xp:
                xp.put_along_axis(out, index, src, axis=dim)
            else:
                out[_full_index(dim, index, xp)] = src
        else:
            out[_full_index(dim, index, xp)] = src[tuple(slice(0, s) for s in index.shape)]
        return out

    def backward(self, g):
        xp = self.xp
        m = xp.ones(self._oshape, dtype=bool)
        m[_full_index(self.dim, self.index, xp)] = False
        gs = None
        if len(self.next) > 3 and self.next[3] is not None:
            gs = gather(g, self.dim, _t(self.index)) if hasattr(g, "_data") else \
                g[_full_index(self.dim, self.index, xp)]
        return g * m, None, None, gs


class MaskedFill(Function):
    """out = value where mask else x;  dL/dx = g where not mask, 0 where filled."""

    def forward(self, x, mask, value):
        xp = self.xp
        self.mask = mask
        return xp.where(mask, xp.asarray(value, dtype=x.dtype), x)

    def backward(self, g):
        return D.where(self.mask, 0.0, g), None, None


# ---------------------------------------------------------------- wrappers
def getitem(x, key):
    basic = _plain_basic(key)
    if not basic:
        key = index_key(key)
        split = _ints_first(key)
        if split is not None:
            return getitem(getitem(x, split[0]), split[1])
    if x._data.__class__ is not xp.ndarray:
        key = _key_to(key, B.namespace(x._data))
    out = GetItem.apply(x, key)
    if basic or _is_basic(key):  # basic indexing gives a view: share the version counter
        out._version = x._version
        node = out._node
        if node is not None:
            node.slice_key = key  # the engine writes g into one buffer shared by x's slices
        if _enabled[0]:  # remember the base, so an in-place op on the view can update it (tensor._commit)
            out._view_of = (x, "index", key, x._data)
    return out


def _ints_first(key):
    """PyTorch applies the integers of a key before its index arrays (x[0, :, [1, 3]] is
    x[0][:, [1, 3]], of shape (3, 2)), where NumPy treats an integer next to an array as one
    more advanced index and may move the result's dimensions to the front.  For a key with
    both, the two keys to apply one after the other; None when NumPy's rule gives PyTorch's
    result anyway (no integers, no arrays, or a boolean mask, which spans several dims)."""
    if key.__class__ is not tuple:
        return None
    has_int = has_arr = False
    for k in key:
        if k.__class__ is int:
            has_int = True
        elif hasattr(k, "ndim") and hasattr(k, "dtype"):
            if k.dtype == bool or k.ndim == 0:
                return None
            has_arr = True
    if not (has_int and has_arr):
        return None
    first = tuple(k if k.__class__ is int or k is None or k is Ellipsis else slice(None) for k in key)
    second = tuple(slice(None) if k is None else k for k in key if k.__class__ is not int)
    return first, second


def ints_first_key(key, a):
    """For a key into the array ``a`` mixing integers and index arrays (see _ints_first), one
    key of index arrays (in ``a``'s library) that picks the same elements in PyTorch's order and
    shape, so ``x[key] = v`` expects v of PyTorch's shape; None when NumPy's rule agrees."""
    split = _ints_first(key)
    if split is None:
        return None
    first, second = split
    lib, shape = _ns(a), a.shape
    n = len(shape)
    return tuple(lib.broadcast_to(lib.arange(m).reshape((1,) * d + (m,) + (1,) * (n - d - 1)), shape)
                 [first][second] for d, m in enumerate(shape))


def _plain_basic(key):
    """True for a key of ints, None, Ellipsis and step-less slices only (x[:, -1, :]), which
    index_key would return unchanged: the common key skips its conversion loop."""
    c = key.__class__
    if c is tuple:
        for k in key:
            c = k.__class__
            if c is slice:
                if k.step is not None:
                    return False
            elif c is not int and k is not None and k is not Ellipsis:
                return False
        return True
    return c is int or c is slice and key.step is None


def index_scatter(g, key, shape):
    return IndexScatter.apply(g, key, shape)


def setitem(x, key, value):
    """out = x with out[key] = value (``x[key] = value`` as a recorded op; torch.index_put is
    varlens.index_put)."""
    key = index_key(key)
    if x._data.__class__ is not xp.ndarray:
        key = _key_to(key, B.namespace(x._data))
    if not isinstance(value, Tensor):
        value = _ns(x._data).asarray(value, dtype=x.dtype)
    return IndexPut.apply(x, key, value)


def _d(dim, x, op):
    return _shape_dim(dim, max(x.ndim, 1), op) if x.ndim else 0


def _same_dtype(x, src, op):
    if isinstance(src, Tensor) and src._data.dtype != x._data.dtype:
        raise RuntimeError(f"{op}(): Expected self.dtype to be equal to src.dtype (self is {x._data.dtype}, "
                           f"src is {src._data.dtype})")


@torch_args(tensor_first=True)
def index_select(x, dim, index):
    d = _d(dim, x, "index_select")
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"index_select(): Expected dtype int32 or int64 for index, got {idx.dtype}")
    if idx.ndim > 1:
        raise IndexError(f"index_select(): Index is supposed to be a vector (got an index of shape "
                         f"{tuple(idx.shape)})")
    n = x.shape[d] if x.ndim else 1
    if idx.__class__ is xp.ndarray and idx.size and (idx.min() < -n or idx.max() >= n):  # (host only: reads values)
        bad = int(idx.max()) if idx.max() >= n else int(idx.min())
        raise IndexError(f"index_select(): index out of range in self (index {bad} for dim {d} of size {n}; "
                         f"expected indices in [{-n}, {n - 1}])")
    return getitem(x, (slice(None),) * d + (index,))


def _check_index(index, x, dim, op):
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    if idx.dtype.kind not in "iu":
        raise RuntimeError(f"{op}: index must be an int64 tensor, got dtype {idx.dtype}")
    if idx.ndim != x.ndim:
        raise RuntimeError(f"{op}: index has {idx.ndim} dimensions but the input has {x.ndim}")
    n = x.shape[dim]
    if idx.__class__ is xp.ndarray:
        if idx.size and (idx.min() < -n or idx.max() >= n):   # (host only: the check reads values)
            raise RuntimeError(f"{op}: index {int(idx.max()) if idx.max() >= n else int(idx.min())} is out of "
                               f"bounds for dimension {dim} with size {n} (expected indices in [{-n}, {n - 1}])")
        return _on(idx, x._data)
    return idx


@torch_args(tensor_first=True)
def gather(x, dim, index):
    d = _d(dim, x, "gather")
    return Gather.apply(x, d, _check_index(index, x, d, "gather"))


@torch_args(tensor_first=True)
def scatter_add(x, dim, index, src):
    d = _d(dim, x, "scatter_add")
    _same_dtype(x, src, "scatter_add")
    return ScatterAdd.apply(x, d, _check_index(index, x, d, "scatter_add"), src)


@torch_args(tensor_first=True)
def scatter(x, dim, index, src=None, *, value=None, reduce=None):  # noqa: A002
    d = _d(dim, x, "scatter")
    _same_dtype(x, src, "scatter")
    if src is None:
        src = value
    if reduce is not None:   # torch's older reduce argument: scatter_reduce with include_self
        if reduce not in ("add", "multiply"):
            raise RuntimeError(f"scatter: reduce argument must be either 'add' or 'multiply', got {reduce!r}")
        idx = index if isinstance(index, Tensor) else Tensor._make(xp.asarray(index))
        if isinstance(src, Tensor):
            src = src[tuple(slice(0, s) for s in idx.shape)]
        else:
            src = Tensor._make(_on(xp.full(tuple(idx.shape), src, dtype=x._data.dtype), x._data))
        return scatter_reduce(x, d, idx, src, "sum" if reduce == "add" else "prod", include_self=True)
    return Scatter.apply(x, d, _check_index(index, x, d, "scatter"), src)


@torch_args(tensor_first=True)
def masked_fill(x, mask, value):
    m = mask._data if isinstance(mask, Tensor) else _on(xp.asarray(mask), x._data)
    if m.dtype != bool:
        raise RuntimeError(f"masked_fill: mask must be a bool tensor, got dtype {m.dtype}")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError("masked_fill_ only supports a 0-dimensional value tensor, but got a "
                               f"tensor of shape {tuple(value.shape)}")
        # a CUDA value stays on the device (0-d array), no host read
        value = value.item() if value._data.__class__ is xp.ndarray else value._data
    if isinstance(value, (str, bytes)) or value is None:
        raise TypeError(f"masked_fill(): argument 'value' must be a number or a 0-d Tensor, not "
                        f"{type(value).__name__} ({value!r})")
    try:
        xp.broadcast_shapes(m.shape, x.shape)
    except ValueError:
        raise RuntimeError(f"masked_fill: mask of shape {tuple(m.shape)} does not broadcast to the "
                           f"input's shape {tuple(x.shape)}") from None
    return MaskedFill.apply(x, m, value)


def one_hot(index, num_classes=-1):
    if not isinstance(index, Tensor):       # torch takes no list or array here (its TypeError)
        raise TypeError(f"one_hot(): argument 'input' (position 1) must be Tensor, not {type(index).__name__}")
    a = index._data
    if a.dtype.kind not in "iu":
        raise RuntimeError(f"one_hot: expected an integer (int64) tensor of class indices, got dtype {a.dtype}")
    if num_classes < 0:
        num_classes = int(a.max()) + 1 if a.size else 0
    if a.__class__ is xp.ndarray and a.size and (a.min() < 0 or a.max() >= num_classes):  # (host: reads values)
        raise RuntimeError(f"one_hot: class values must be in [0, {num_classes}), got "
                           f"{int(a.min()) if a.min() < 0 else int(a.max())}")
    out = (a[..., None] == _ns(a).arange(num_classes)).astype(xp.int64)
    return Tensor._make(out)


@torch_args(tensor_first=True)
def masked_select(input, mask):
    m = mask._data if isinstance(mask, Tensor) else xp.asarray(mask)
    if m.dtype != bool:
        raise RuntimeError(f"masked_select: mask must be a bool tensor, got dtype {m.dtype}")
    shape = xp.broadcast_shapes(m.shape, tuple(input.shape))
    x = broadcast_to(input, shape) if tuple(input.shape) != shape else input
    return x[Tensor._make(_ns(m).broadcast_to(m, shape).copy())]


@torch_args(tensor_first=True)
def take(input, index):
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    return reshape(input, (-1,))[Tensor._make(idx.astype(DT.int64))]


@torch_args(tensor_first=True)
def take_along_dim(input, indices, dim=None):
    if dim is None:
        return take(input, reshape(indices, (-1,)))
    idx = indices._data if isinstance(indices, Tensor) else xp.asarray(indices)
    d = dim % input.ndim
    shape = list(xp.broadcast_shapes(tuple(input.shape[:d]) + (1,) + tuple(input.shape[d + 1:]),
                                     tuple(idx.shape[:d]) + (1,) + tuple(idx.shape[d + 1:])))
    xs = list(shape)
    xs[d] = input.shape[d]
    ishape = list(shape)
    ishape[d] = idx.shape[d]
    x = broadcast_to(input, tuple(xs)) if tuple(input.shape) != tuple(xs) else input
    return gather(x, d, Tensor._make(_ns(idx).broadcast_to(idx, ishape).astype(DT.int64)))


@torch_args(tensor_first=True)
def argwhere(x):
    return Tensor._make(_ns(x._data).argwhere(x._data).astype(DT.int64))


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
    if idx.__class__ is xp.ndarray and idx.size and (idx.min() < -L or idx.max() >= L):  # (host: reads values)
        raise IndexError(f"{what}: index out of range for dimension {d} of size {L}")
    idx = _on(idx, x._data)
    idx = idx % L if idx.size else idx
    shape = [1] * x.ndim
    shape[d] = idx.size
    full = list(x.shape) if src_shape is None else list(src_shape)
    full[d] = idx.size
    return d, Tensor._make(_ns(idx).broadcast_to(idx.reshape(shape), full).astype(DT.int64))


@torch_args(tensor_first=True)
def index_add(x, dim, index, source, *, alpha=1):
    """x with ``alpha * source`` added at ``index`` along ``dim`` (repeated indices add up)."""
    src = source if isinstance(source, Tensor) else Tensor._make(_ns(x._data).asarray(source, dtype=x.dtype))
    d, idx = _index_along(x, dim, index, "index_add", src.shape)
    exp_shape = list(x.shape)
    exp_shape[d] = idx.shape[d]
    if list(src.shape) != exp_shape:
        raise RuntimeError(f"index_add: source must have shape {tuple(exp_shape)}, got {tuple(src.shape)}")
    return scatter_add(x, d, idx, src * alpha if alpha != 1 else src)


@torch_args(tensor_first=True)
def index_copy(x, dim, index, source):
    src = source if isinstance(source, Tensor) else Tensor._make(_ns(x._data).asarray(source, dtype=x.dtype))
    d, idx = _index_along(x, dim, index, "index_copy", src.shape)
    return scatter(x, d, idx, src)


@torch_args(tensor_first=True)
def index_fill(x, dim, index, value):
    d, _ = _index_along(x, dim, index, "index_fill")
    idx = index._data if isinstance(index, Tensor) else xp.asarray(index)
    lib = _ns(x._data)
    mask = lib.zeros(x.shape[d], dtype=bool)
    mask[_on(idx.reshape(-1), x._data)] = True
    shape = [1] * x.ndim
    shape[d] = x.shape[d]
    return masked_fill(x, Tensor._make(mask.reshape(shape)), value)


@torch_args(tensor_first=True)
def nonzero(x, as_tuple=False):
    lib = _ns(x._data)
    a = lib.nonzero(x._data)   # (on a device: a host sync, the result's size depends on the values)
    T = Tensor
    if as_tuple:
        return tuple(T._make(i.astype(xp.int64)) for i in a)
    return T._make(lib.stack(a, axis=1).astype(xp.int64) if a else lib.zeros((0, 0), dtype=xp.int64))


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


@torch_args(tensor_first=True)
def index_put(input, indices, values, accumulate=False):  # noqa: A002
    """out = input with out[indices] = values (torch.index_put; indices a tuple of index
    tensors); with ``accumulate`` the values are added, repeated indices adding up."""
    x = _tensor(input, "index_put: input")
    key = index_key(_index_tuple(indices, "index_put"))
    if x._data.__class__ is not xp.ndarray:
        key = _key_to(key, B.namespace(x._data))
    try:
        sub_shape = x._data[key].shape
    except IndexError as e:
        raise IndexError(f"index_put: indices are invalid for an input of shape {tuple(x.shape)}: {e}") from None
    v = values if isinstance(values, Tensor) else Tensor._make(_ns(x._data).asarray(values, dtype=x.dtype))
    try:
        xp.broadcast_shapes(tuple(v.shape), sub_shape)
    except ValueError:
        raise RuntimeError(f"index_put: values of shape {tuple(v.shape)} cannot be broadcast to the indexed "
                           f"shape {tuple(sub_shape)}") from None
    if v.dtype != x.dtype:
        v = cast(v, x.dtype)
    if not accumulate:
        return setitem(x, key, v)
    if tuple(v.shape) != tuple(sub_shape):
        v = expand(v, sub_shape)
    return add(x, index_scatter(v, key, tuple(x.shape)))


@torch_args(tensor_first=True)
def put(input, index, source, accumulate=False):  # noqa: A002
    """Write ``source`` at flat positions ``index`` of ``input`` (as if it were 1-D)."""
    x = _tensor(input, "put: input")
    idx = _arr(index)
    if idx.dtype.kind not in "iu":
        raise IndexError(f"put: index must be an integer tensor, got dtype {idx.dtype}")
    src = _tensor(source, "put: source")
    if idx.size != src.numel():
        raise RuntimeError(f"put: index and source must have the same number of elements, got "
                           f"{idx.size} and {src.numel()}")
    n = x.numel()
    if idx.__class__ is xp.ndarray and idx.size and (idx.min() < -n or idx.max() >= n):  # (host: reads values)
        raise IndexError(f"put: index out of range for a tensor of {n} elements")
    flat = reshape(x, (-1,))
    out = index_put(flat, (Tensor._make(idx.reshape(-1) % max(n, 1)),), reshape(src, (-1,)), accumulate)
    return reshape(out, tuple(x.shape))


@torch_args(tensor_first=True)
def masked_scatter(input, mask, source):  # noqa: A002
    """Copy ``source``'s leading elements (in order) into the positions where ``mask`` is True."""
    x = _tensor(input, "masked_scatter: input")
    m = _arr(mask)
    if m.dtype != bool:
        raise RuntimeError(f"masked_scatter: mask must be a bool tensor, got dtype {m.dtype}")
    m = _on(m, x._data)
    try:
        m = _ns(m).broadcast_to(m, tuple(x.shape))
    except ValueError:
        raise RuntimeError(f"masked_scatter: mask of shape {tuple(m.shape)} does not broadcast to the "
                           f"input's shape {tuple(x.shape)}") from None
    src = _tensor(source, "masked_scatter: source")
    k = int(m.sum())
    if src.numel() < k:
        raise RuntimeError(f"masked_scatter: source has {src.numel()} elements but the mask selects {k}")
    vals = reshape(src, (-1,))[:k]
    if vals.dtype != x.dtype:
        vals = cast(vals, x.dtype)
    return setitem(x, (_ns(m).ascontiguousarray(m),), vals)


def fill_diagonal(input, fill_value, wrap=False):  # noqa: A002
    """input with its main diagonal set to fill_value (all dims equal for ndim > 2; for a tall
    2-D matrix ``wrap`` restarts the diagonal every ncols + 1 rows, as NumPy and PyTorch)."""
    x = _tensor(input, "fill_diagonal_: input")
    if x.ndim < 2:
        raise RuntimeError(f"fill_diagonal_: dimensions must be larger than 1, got shape {tuple(x.shape)}")
    if x.ndim > 2 and len(set(x.shape)) != 1:
        raise RuntimeError(f"fill_diagonal_: all dimensions of input must be of equal length, got {tuple(x.shape)}")
    lib = _ns(x._data)
    m = lib.zeros(tuple(x.shape), bool)
    lib.fill_diagonal(m, True, wrap=wrap)
    return masked_fill(x, Tensor._make(m), fill_value)


@torch_args(tensor_first=True)
def select(input, dim, index):  # noqa: A002
    x = _tensor(input, "select: input")
    d = _dim(x, dim, "select")
    n = x.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select: index {index} out of range for dimension {d} of size {n}")
    return x[(slice(None),) * d + (index % n,)]


@torch_args(tensor_first=True)
def select_scatter(input, src, dim, index):  # noqa: A002
    x = _tensor(input, "select_scatter: input")
    d = _dim(x, dim, "select_scatter")
    n = x.shape[d]
    if not -n <= index < n:
        raise IndexError(f"select_scatter: index {index} out of range for dimension {d} of size {n}")
    return _scatter_key(x, src, (slice(None),) * d + (index % n,), "select_scatter")


@torch_args(tensor_first=True)
def slice_scatter(input, src, dim=0, start=None, end=None, step=1):  # noqa: A002
    x = _tensor(input, "slice_scatter: input")
    d = _dim(x, dim, "slice_scatter")
    return _scatter_key(x, src, (slice(None),) * d + (slice(start, end, step),), "slice_scatter")


@torch_args(tensor_first=True)
def diagonal_scatter(input, src, offset=0, dim1=0, dim2=1):  # noqa: A002
    x = _tensor(input, "diagonal_scatter: input")
    d1, d2 = _dim(x, dim1, "diagonal_scatter"), _dim(x, dim2, "diagonal_scatter")
    if d1 == d2:
        raise RuntimeError(f"diagonal_scatter: dim1 and dim2 cannot be equal, got {dim1} and {dim2}")
    r, c = x.shape[d1], x.shape[d2]
    k = max(0, min(r, c - offset)) if offset >= 0 else max(0, min(r + offset, c))
    i = _ns(x._data).arange(k)
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    rest = [j for j in range(x.ndim) if j not in (d1, d2)]
    perm = rest + [d1, d2]
    xm = permute(x, perm)
    out = _scatter_key(xm, src, (Ellipsis, rows, cols), "diagonal_scatter")
    inv = [0] * x.ndim
    for j, p in enumerate(perm):
        inv[p] = j
    return permute(out, inv)


def _scatter_key(x, src, key, what):
    src = _tensor(src, f"{what}: src")
    want = x._data[key].shape
    if tuple(src.shape) != tuple(want):
        raise RuntimeError(f"{what}: src must have shape {tuple(want)}, got {tuple(src.shape)}")
    if src.dtype != x.dtype:
        src = cast(src, x.dtype)
    return setitem(x, key, src)


_REDUCES = ("sum", "prod", "mean", "amax", "amin")


@torch_args(tensor_first=True)
def scatter_reduce(input, dim, index, src, reduce, *, include_self=True):  # noqa: A002
    """Reduce ``src`` into ``input`` at ``index`` along ``dim`` (sum, prod, mean, amax, amin).
    sum and mean are scatter_add compositions; amax/amin send the gradient evenly to every
    element equal to the result (input's own included when include_self), as PyTorch."""
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
    if idx.__class__ is xp.ndarray and idx.size and (idx.min() < -n or idx.max() >= n):  # (host: reads values)
        raise RuntimeError(f"scatter_reduce: index out of bounds for dimension {d} with size {n} "
                           f"(expected indices in [{-n}, {n - 1}])")
    lib = _ns(x._data)
    idx = _on(idx, x._data) % max(n, 1)
    if src.dtype != x.dtype:
        src = cast(src, x.dtype)
    srcv = src if tuple(src.shape) == tuple(idx.shape) else src[tuple(slice(0, s) for s in idx.shape)]
    it = Tensor._make(idx.astype(DT.int64))
    full = _full_index(d, idx, lib)
    hits = lib.zeros(tuple(x.shape), xp.int64)
    B.add_at(lib, hits, full, 1)
    hit = hits > 0
    base = x if include_self else mul(x, Tensor._make((~hit).astype(x.dtype)))
    if reduce == "sum":
        return scatter_add(base, d, it, srcv)
    if reduce == "mean":
        s = scatter_add(base, d, it, srcv)
        cnt = hits + (1 if include_self else 0)
        if x.dtype.kind == "f":
            return where(Tensor._make(cnt > 0), div(s, Tensor._make(lib.maximum(cnt, 1).astype(x.dtype))), x)
        return Tensor._make(lib.where(cnt > 0, lib.floor_divide(s._data, lib.maximum(cnt, 1)), x._data).astype(x.dtype))
    # values first, on arrays
    r = x._data.copy()
    ufunc = {"prod": lib.multiply, "amax": lib.maximum, "amin": lib.minimum}[reduce]
    if not include_self:   # (a where, not a boolean-mask write: no host sync on a device)
        r = lib.where(hit, r.dtype.type({"prod": 1, "amax": -xp.inf if r.dtype.kind == "f" else xp.iinfo(r.dtype).min,
                                         "amin": xp.inf if r.dtype.kind == "f" else xp.iinfo(r.dtype).max}[reduce]), r)
    ufunc.at(r, full, srcv._data)
    if not include_self:
        r = lib.where(hit, r, x._data)
    need = _gm.is_grad_enabled() and (x.requires_grad or src.requires_grad)
    if not need:
        return Tensor._make(r)
    if reduce == "prod":
        # d r / d e = the product of the group's other members: r / e where the group has no zero;
        # with exactly one zero, the nonzero product for that zero and 0 for the rest; 0 with more
        xin = lib.ones_like(hit) if include_self else ~hit
        xv, sv = x._data, srcv._data
        zeros = (xin & (xv == 0)).astype(xp.int64)
        B.add_at(lib, zeros, full, (sv == 0).astype(xp.int64))
        pnz = lib.where(xin & (xv != 0), xv, xv.dtype.type(1))
        ufunc.at(pnz, full, lib.where(sv != 0, sv, sv.dtype.type(1)))   # ufunc is multiply here (as the values above)
        one = xv.dtype.type(1)
        wx = lib.where(xin, lib.where(xv != 0, lib.where(zeros == 0, r / lib.where(xv != 0, xv, one), 0),
                                      lib.where(zeros == 1, pnz, 0)), 0).astype(x.dtype)
        zf, rf = zeros[full], r[full]
        wsrc = lib.where(sv != 0, lib.where(zf == 0, rf / lib.where(sv != 0, sv, one), 0),
                         lib.where(zf == 1, pnz[full], 0)).astype(x.dtype)
        return _ScatterProd.apply(x, srcv, r, d, idx, wx, wsrc)
    # gradient: evenly among the elements equal to the result
    # input's own element shares when it equals the result (include_self), or alone where nothing
    # landed.  The count of sharers includes input's element whenever it equals the result, even
    # with include_self=False (PyTorch's convention at such ties; away from ties nothing changes)
    eq_self = x._data == r
    ms = eq_self if include_self else eq_self & ~hit
    msrc = (srcv._data == r[full]).astype(x.dtype)
    cnt = eq_self.astype(x.dtype)
    B.add_at(lib, cnt, full, msrc)
    # the weights are constants and the values are r itself (an op, not a straight-through
    # r + (e - e.detach()), which turns an infinite input, as a -inf initial amax, into NaN)
    return _ScatterPick.apply(x, srcv, r, d, idx, ms.astype(x.dtype) / cnt, msrc / cnt[full])


class _ScatterPick(Function):
    """out = r (scatter_reduce's amax/amin values); dL/dx = g * wx; dL/dsrc = gather(g) * wsrc."""

    def forward(self, x, src, r, dim, index, wx, wsrc):
        self.dim, self.index, self.wx, self.wsrc = dim, index, wx, wsrc
        return r

    def backward(self, g):
        if hasattr(g, "_data"):
            gs = gather(g, self.dim, _t(self.index)) * _t(self.wsrc)
            return g * _t(self.wx), gs, None, None, None, None, None
        return g * self.wx, g[_full_index(self.dim, self.index, self.xp)] * self.wsrc, None, None, None, None, None


class _ScatterProd(_ScatterPick):
    """out = r (scatter_reduce's prod values); dL/dx = g * (product of x's group's other members),
    dL/dsrc = gather(g) * (product of src's group's other members): the weights are computed in
    forward, so this gives first derivatives only."""

    def backward(self, g):
        if hasattr(g, "_data"):
            raise NotImplementedError("scatter_reduce: the second derivative of reduce='prod' is not "
                                      "implemented (first derivatives only)")
        return _ScatterPick.backward(self, g)


def _check_2d(x, op):
    if x.ndim < 2:
        raise RuntimeError(f"{op}: expected a tensor with at least 2 dimensions, got shape {tuple(x.shape)}")


@torch_args(tensor_first=True)
def tril(x, diagonal=0):
    """Lower triangle (the rest zeroed); gradient passes only through the kept entries."""
    _check_2d(x, "tril")
    lib = _ns(x._data)
    m = lib.tril(lib.ones(x.shape[-2:], dtype=bool), k=diagonal)
    return _keep(x, m)


@torch_args(tensor_first=True)
def triu(x, diagonal=0):
    _check_2d(x, "triu")
    lib = _ns(x._data)
    m = lib.triu(lib.ones(x.shape[-2:], dtype=bool), k=diagonal)
    return _keep(x, m)


def _keep(x, m):
    """x where the bool mask m is True, exact zeros elsewhere (a masked fill, not a product with
    0/1, so an Inf or NaN outside the kept triangle does not turn into NaN)."""
    return masked_fill(x, Tensor._make(~m), 0)


def _diag_indices(r, c, offset, xp=xp):
    """(rows, cols) index arrays of the offset-th diagonal of an r x c matrix (offset > 0: above)."""
    if offset >= 0:
        k = max(0, min(r, c - offset))
        return xp.arange(k), xp.arange(k) + offset
    k = max(0, min(r + offset, c))
    return xp.arange(k) - offset, xp.arange(k)


@torch_args(tensor_first=True)
def diag(x, diagonal=0):
    """1-D -> a square matrix with x on the given diagonal; 2-D -> that diagonal as 1-D."""
    if x.ndim == 1:
        n = x.shape[0] + abs(diagonal)
        lib = _ns(x._data)
        out = Tensor._make(lib.zeros((n, n), dtype=x.dtype))
        return setitem(out, _diag_indices(n, n, diagonal, lib), x)
    if x.ndim == 2:
        return getitem(x, _diag_indices(x.shape[0], x.shape[1], diagonal, _ns(x._data)))
    raise RuntimeError(f"diag: expected a 1-D or 2-D tensor, got shape {tuple(x.shape)}")


@torch_args(tensor_first=True)
def diagonal(x, offset=0, dim1=0, dim2=1):
    if x.ndim != 2:  # any number of dims: the diagonal of the (dim1, dim2) planes, as a last dim
        return _diagonal(x, offset, dim1, dim2, "diagonal")
    if (dim1, dim2) != (0, 1):
        x = movedim(movedim(x, dim1, 0), dim2 if dim2 > dim1 else dim2 + 1, 1)
    if x.ndim == 2:
        return diag(x, offset)
    raise RuntimeError("diagonal: only 2-D inputs are supported")


@torch_args(tensor_first=True)
def repeat_interleave(x, repeats=None, dim=None, *, output_size=None):
    if repeats is None:  # repeat_interleave(counts): each index i, counts[i] times (PyTorch's form)
        if not isinstance(x, Tensor) or x.ndim > 1 or x.dtype.kind not in "iu":
            raise RuntimeError("repeat_interleave: with one argument, repeats must be a 0-D or 1-D "
                               f"integer tensor, got {getattr(x, 'dtype', type(x).__name__)}")
        x, repeats = Tensor._make(_on(xp.arange(x.numel()), x._data)), flatten(x)
    if dim is None:
        x, dim = flatten(x), 0
    dim %= x.ndim
    r = repeats._data if isinstance(repeats, Tensor) else repeats
    if B.is_device_array(r):
        r = B.to_host(r)   # (the result's size depends on the counts: a host read, as on a GPU)
    idx = _on(xp.repeat(xp.arange(x.shape[dim]), r), x._data)
    return index_select(x, dim, Tensor._make(idx))


@torch_args(tensor_first=True)
def combinations(input, r=2, with_replacement=False):  # noqa: A002
    """Length-r combinations of a 1-D tensor's elements (itertools order), one per row."""
    x = _tensor(input, "combinations: input")
    if x.ndim != 1:
        raise RuntimeError(f"combinations: input must be 1-D, got shape {tuple(x.shape)}")
    if not isinstance(r, int) or r < 0:
        raise ValueError(f"combinations: r must be a non-negative int, got {r!r}")
    if r == 0:
        return Tensor._make(_ns(x._data).zeros((0,), dtype=x.dtype))
    fn = itertools.combinations_with_replacement if with_replacement else itertools.combinations
    idx = xp.asarray(list(fn(range(x.shape[0]), r)), dtype=DT.int64).reshape(-1, r)
    return getitem(x, (Tensor._make(idx),))


@torch_args(tensor_first=True)
def diag_embed(input, offset=0, dim1=-2, dim2=-1):  # noqa: A002
    """The last dimension of ``input`` laid on the ``offset`` diagonal of a new pair of dims."""
    x = _tensor(input, "diag_embed: input")
    if x.ndim == 0:
        raise RuntimeError("diag_embed: input must have at least 1 dimension, got a 0-d tensor")
    nd = x.ndim + 1
    d1, d2 = _dim_args(x, dim1, "diag_embed", nd), _dim_args(x, dim2, "diag_embed", nd)
    if d1 == d2:
        raise RuntimeError(f"diag_embed: dim1 and dim2 cannot be the same dimension, got {dim1} and {dim2}")
    k = x.shape[-1]
    n = k + abs(offset)
    lib = _ns(x._data)
    i = lib.arange(k)
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    out = Tensor._make(lib.zeros(tuple(x.shape[:-1]) + (n, n), dtype=x.dtype))
    out = setitem(out, (Ellipsis, rows, cols), x)
    # the new pair sits last as (rows, cols); send rows to d1 and cols to d2
    rest = iter(range(nd - 2))
    perm = [nd - 2 if j == d1 else nd - 1 if j == d2 else next(rest) for j in range(nd)]
    return permute(out, perm) if perm != list(range(nd)) else out


@torch_args(tensor_first=True)
def diagflat(input, offset=0):  # noqa: A002
    return diag(reshape(_tensor(input, "diagflat: input"), (-1,)), offset)


def _diagonal(A, offset, dim1, dim2, fn):
    if not isinstance(A, Tensor):
        raise TypeError(f"{fn}: argument 'A' must be a Tensor, got {type(A).__name__}")
    nd = A.ndim
    if nd < 2:
        raise RuntimeError(f"{fn}: expected a tensor with at least 2 dimensions, got shape {tuple(A.shape)}")
    for name, d in (("dim1", dim1), ("dim2", dim2)):
        if not -nd <= d < nd:
            raise IndexError(f"{fn}: {name}={d} is out of range for a tensor with {nd} dimensions "
                             f"(expected [{-nd}, {nd - 1}])")
    d1, d2 = dim1 % nd, dim2 % nd
    if d1 == d2:
        raise RuntimeError(f"{fn}: dim1 and dim2 cannot be the same dimension, got {dim1} and {dim2}")
    order = [i for i in range(nd) if i not in (d1, d2)] + [d1, d2]
    x = permute(A, order) if order != list(range(nd)) else A
    rows, cols = _diag_indices(x.shape[-2], x.shape[-1], offset, _ns(x._data))
    return x[..., rows, cols]
