"""Shape ops: views and rearrangements (reshape, permute, expand, cat/stack/split and the
hstack/vstack/tensor_split families, flip/rot90/roll, movedim, atleast_*d, tile, unfold).  Backward applies the inverse rearrangement
to the cotangent (reshape back, inverse permutation, split what was concatenated)."""
from __future__ import annotations

from varlens.core.arg_rules import torch_args
from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core import primitives as D
from varlens.core.primitives import Clone
from operator import index as _index
from varlens.ops._args import _dim as _dim_args
from varlens.ops._args import _tensor
from varlens.core.tensor import Tensor
from varlens.core import dtypes as DT
from varlens.ops._args import _arr
from varlens.ops._args import _result_dtype
from varlens.ops.pointwise import cast
from varlens.core.tensor import Size


class Reshape(Function):
    """out = x viewed with a new shape;  dL/dx = g reshaped to x's shape.  With ``view=True``
    (x.view of a non-contiguous NumPy array) one reshape that refuses to copy: torch's error where
    the strides make a view impossible."""

    def forward(self, x, shape, view=False):
        self.in_shape = x.shape
        try:
            return x.reshape(shape, copy=False) if view else x.reshape(shape)
        except ValueError as e:
            if view and "copy" in str(e):
                raise RuntimeError("view size is not compatible with input tensor's size and stride (at "
                                   "least one dimension spans across two contiguous subspaces). Use "
                                   ".reshape(...) instead.") from None
            if view:
                raise RuntimeError(f"shape '{list(shape)}' is invalid for input of size {x.size} (view: "
                                   f"tensor of shape {tuple(x.shape)})") from None
            raise RuntimeError(f"reshape: shape {tuple(shape)} is invalid for a tensor of "
                               f"{x.size} elements (shape {tuple(x.shape)})") from None

    def backward(self, g):
        return D.reshape(g, self.in_shape)


class Permute(Function):
    """out = x with axes reordered;  dL/dx = g with the inverse order."""

    def forward(self, x, axes):
        self.axes = axes
        return x.transpose(axes)   # (the array's method: NumPy's and CuPy's, less dispatch)

    def backward(self, g):
        inv = [0] * len(self.axes)
        for i, a in enumerate(self.axes):
            inv[a] = i
        return D.permute(g, tuple(inv))


class Expand(Function):
    """out = x broadcast to a larger shape (a view);  dL/dx = g summed over the broadcast
    axes, which the engine's central unbroadcast does."""

    def forward(self, x, shape):
        try:
            return self.xp.broadcast_to(x, shape)
        except ValueError:
            raise RuntimeError(f"expand: cannot expand shape {tuple(x.shape)} to {tuple(shape)}") from None

    def backward(self, g):
        return g


class Flip(Function):
    """out = x reversed along dims;  dL/dx = g reversed along the same dims."""

    def forward(self, x, dims):
        self.dims = dims
        return self.xp.flip(x, dims)

    def backward(self, g):
        if hasattr(g, "_data"):
            return flip(g, self.dims)
        return self.xp.flip(g, self.dims)


class Cat(Function):
    """out = inputs joined along dim;  each input gets its slice of g."""

    def forward(self, *xs, dim=0):
        self.dim = dim
        self.sizes = [x.shape[dim] for x in xs]
        return self.xp.concatenate(xs, axis=dim)

    def backward(self, g):
        out, start = [], 0
        pre = (slice(None),) * self.dim
        for s, p in zip(self.sizes, self.next):
            out.append(g[pre + (slice(start, start + s),)] if p is not None else None)
            start += s
        return tuple(out)


class Stack(Function):
    """out = inputs stacked along a new dim;  input i gets g[..., i, ...]."""

    def forward(self, *xs, dim=0):
        self.dim = dim
        return self.xp.stack(xs, axis=dim)

    def backward(self, g):
        pre = (slice(None),) * self.dim
        return tuple(g[pre + (i,)] if p is not None else None for i, p in enumerate(self.next))


# ---------------------------------------------------------------- wrappers
def _view_of(out, x, kind=None, arg=None):
    """A result that shares x's memory shares x's version counter (as PyTorch views do),
    so an in-place change through either is seen by a backward that saved the other.
    With ``kind`` the view also remembers its base, so an in-place op on it that is
    recorded for autograd updates the base too (tensor._commit)."""
    if out._data.base is not None:
        out._version = x._version
        if kind is not None and out._rg:
            out._view_of = (x, kind, arg, x._data)
    return out


def _shape_arg(shape, op="reshape"):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    try:
        return tuple(map(_index, shape))  # operator.index: ints (and integer tensors), not floats/str
    except TypeError:
        bad = next(s for s in shape if not _is_index(s))
        raise TypeError(f"{op}(): argument 'shape' must be a tuple of ints, but found element of type "
                        f"{type(bad).__name__} ({bad!r}) in {tuple(shape)!r}") from None


def _is_index(s):
    try:
        _index(s)
        return True
    except TypeError:
        return False


@torch_args(tensor_first=True)
def reshape(x, *shape):
    return _reshaped(x, _shape_arg(shape))


def _reshaped(x, shape):
    """reshape for a shape that is already a tuple of ints (the ops' own calls: no argument
    parsing); the same tensor when the shape does not change."""
    if shape == x._data.shape:
        return x
    return _view_of(Reshape.apply(x, shape), x, "reshape", shape)


def view(x, *shape, dtype=None):
    """x.view(*shape): a reshape that must not copy (torch raises when the strides make that
    impossible, e.g. t().view(-1)); x.view(dtype) (or view(dtype=...)) reinterprets the bits
    as another dtype."""
    if dtype is not None:
        if shape:
            raise TypeError("view(): pass either a shape or dtype=, not both")
        return _view_dtype(x, dtype)
    if len(shape) == 1 and shape[0].__class__ is not int and _is_dtype(shape[0]):
        return _view_dtype(x, shape[0])
    shp = _shape_arg(shape, "view")
    a = x._data
    if a.__class__ is xp.ndarray and not a.flags.c_contiguous and a.size > 1:
        # one NumPy reshape(copy=False), which raises where torch's strides make a view impossible
        # (on a device a non-contiguous view copies, as reshape)
        return _view_of(Reshape.apply(x, shp, True), x, "reshape", shp)
    if shp == a.shape:   # reshape's own steps, without checking the shape a second time
        return x
    return _view_of(Reshape.apply(x, shp), x, "reshape", shp)


def _is_dtype(d):
    if isinstance(d, xp.dtype):
        return True
    return isinstance(d, type) and issubclass(d, xp.generic)


def _view_dtype(x, dtype):
    dt = DT.to_dtype(dtype)
    a = x._data
    if dt == a.dtype:
        return x
    if dt.itemsize != a.itemsize:
        if a.ndim == 0:
            raise RuntimeError(f"view(dtype): a 0-d tensor can only be viewed as a dtype of the same size "
                               f"({a.dtype} is {a.itemsize} bytes, {dt} is {dt.itemsize})")
        if not a.flags.c_contiguous:
            raise RuntimeError("view(dtype): the tensor must be contiguous to view it as a dtype of another size")
        big = max(dt.itemsize, a.itemsize)
        if dt.itemsize > a.itemsize and a.shape[-1] % (big // a.itemsize):
            raise RuntimeError(f"self.size(-1) must be divisible by {big // a.itemsize} to view {a.dtype} as "
                               f"{dt} (different element sizes), but got {a.shape[-1]}")
    out = Tensor._make(a.view(dt))
    out._version = x._version
    return out


def view_as(x, other):
    return view(x, tuple(other.shape))


@torch_args(tensor_first=True)
def permute(x, *dims):
    dims = _shape_arg(dims, "permute")
    nd = x.ndim
    for d in dims:
        _dim(d, max(nd, 1), "permute")
    if len(dims) != nd:
        raise RuntimeError(f"permute: number of dims don't match in permute (expected {nd} dims for a tensor "
                           f"of shape {tuple(x.shape)}, got {len(dims)}: {dims})")
    if len({d % nd for d in dims}) != nd:
        raise RuntimeError(f"permute(): duplicate dims are not allowed (got {dims})")
    if len(dims) != nd or sorted(d % nd for d in dims) != list(range(nd)):
        raise RuntimeError(f"permute: dims {dims} are not a permutation of the {nd} dimensions of a "
                           f"tensor of shape {tuple(x.shape)}")
    axes = tuple(d % nd for d in dims)
    return _view_of(Permute.apply(x, axes), x, "permute", axes)


@torch_args(tensor_first=True)
def transpose(x, dim0, dim1):
    nd = x._data.ndim
    if nd == 0:
        return x
    if not (-nd <= dim0 < nd and -nd <= dim1 < nd):
        d = dim1 if -nd <= dim0 < nd else dim0
        raise IndexError(f"transpose: dim {d} out of range for a tensor with {nd} dimensions")
    axes = list(range(nd))
    axes[dim0], axes[dim1] = axes[dim1], axes[dim0]
    axes = tuple(axes)
    return _view_of(Permute.apply(x, axes), x, "permute", axes)


swapaxes = transpose


@torch_args(tensor_first=True)
def t(x):
    if x.ndim > 2:
        raise RuntimeError(f"t(): expects a tensor with <= 2 dimensions, got {x.ndim}")
    return transpose(x, 0, 1) if x.ndim == 2 else x


@torch_args(tensor_first=True)
def squeeze(x, dim=None):
    s = x._data.shape
    if dim.__class__ is int and -len(s) <= dim < len(s):   # one dim in range: the common call
        d = dim % len(s)
        return _reshaped(x, s[:d] + s[d + 1:]) if s[d] == 1 else x
    if dim is None:
        new = tuple(d for d in s if d != 1)
    else:
        dims = dim if isinstance(dim, (tuple, list)) else (dim,)
        nd = max(x.ndim, 1)
        for d in dims:
            if not isinstance(d, int) or isinstance(d, bool):
                raise TypeError(f"squeeze(): argument 'dim' must be an int or a tuple of ints, got {d!r}")
            if not -nd <= d < nd:
                raise IndexError(f"Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                                 f"but got {d})")
        dims = {d % max(x.ndim, 1) for d in dims}
        new = tuple(d for i, d in enumerate(s) if not (i in dims and d == 1))
    return reshape(x, new)


@torch_args(tensor_first=True)
def unsqueeze(x, dim):
    nd = x._data.ndim + 1
    if not -nd <= dim < nd:
        raise IndexError(f"unsqueeze: dim {dim} out of range for a result with {nd} dimensions")
    dim %= nd
    s = x._data.shape
    return _reshaped(x, s[:dim] + (1,) + s[dim:])


@torch_args(tensor_first=True)
def flatten(x, start_dim=0, end_dim=-1):
    if x.ndim == 0:
        _dim(start_dim, 1, "flatten")
        _dim(end_dim, 1, "flatten")
        return reshape(x, (1,))
    s = x.shape
    a, b = _dim(start_dim, x.ndim, "flatten"), _dim(end_dim, x.ndim, "flatten")
    if a > b:
        raise RuntimeError(f"flatten() has invalid args: start_dim cannot come after end_dim (start_dim="
                           f"{start_dim}, end_dim={end_dim} for a tensor with {x.ndim} dimensions)")
    n = 1
    for d in s[a:b + 1]:
        n *= d
    return reshape(x, tuple(s[:a]) + (n,) + tuple(s[b + 1:]))


@torch_args(tensor_first=True)
def unflatten(x, dim, sizes):
    dim = _dim(dim, x.ndim, "unflatten")
    sizes = tuple(sizes)
    n, known, infer = x.shape[dim], 1, 0
    for v in sizes:
        if v == -1:
            infer += 1
        else:
            known *= v
    if infer > 1 or (known != n if not infer else (known == 0 or n % known)):
        raise RuntimeError(f"unflatten: Provided sizes {list(sizes)} don't multiply up to the size of dim {dim} "
                           f"({n}) in the input tensor of shape {tuple(x.shape)}")
    s = x.shape
    return reshape(x, tuple(s[:dim]) + tuple(sizes) + tuple(s[dim + 1:]))


def expand(x, *shape):
    shape = _shape_arg(shape)
    nd = len(shape)
    if nd < x.ndim:
        raise RuntimeError(f"expand: the target shape {shape} has fewer dimensions than the tensor "
                           f"{tuple(x.shape)}")
    src = (1,) * (nd - x.ndim) + tuple(x.shape)
    shape = tuple(s if t == -1 else t for s, t in zip(src, shape))
    if shape == tuple(x.shape):
        return x
    return _view_of(Expand.apply(x, shape), x)


def expand_as(x, other):
    return expand(x, tuple(other.shape))


@torch_args(tensor_first=True)
def broadcast_to(x, shape):
    return expand(x, tuple(shape))


@torch_args(tensor_first=True)
def flip(x, dims):
    dims = (dims,) if isinstance(dims, int) else tuple(dims)
    n = max(x.ndim, 1)
    ds = [_dim(d, n, "flip") for d in dims]
    if len(set(ds)) != len(ds):
        raise RuntimeError(f"flip: dims {tuple(dims)} has a dim that appears multiple times")
    return Flip.apply(x, tuple(ds) if x.ndim else ())


def _dim(dim, ndim, op):
    """dim wrapped into [0, ndim), or torch's IndexError naming the op and the valid range."""
    if not isinstance(dim, int) or isinstance(dim, bool):
        if hasattr(dim, "__index__") and not isinstance(dim, bool):
            dim = _index(dim)
        else:
            raise TypeError(f"{op}(): argument 'dim' must be int, not {type(dim).__name__} ({dim!r})")
    if not -ndim <= dim < ndim:
        raise IndexError(f"{op}: Dimension out of range (expected to be in range of [{-ndim}, {ndim - 1}], "
                         f"but got {dim})")
    return dim % ndim


def _check_seq(tensors, op):
    if isinstance(tensors, Tensor) or not isinstance(tensors, (list, tuple)) and not hasattr(tensors, "__iter__"):
        raise TypeError(f"{op}(): argument 'tensors' (position 1) must be a tuple or list of Tensors, not "
                        f"{type(tensors).__name__} (write {op}([a, b]), not {op}(a, b))")
    tensors = list(tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): expected Tensor as element {i} in argument 'tensors', but got "
                            f"{type(t).__name__}")
    return tensors


def _common_dtype(tensors):
    """torch's promotion for cat: the highest category (bool < integer < float) wins, then the
    widest dtype within it (cat([float32, int64]) is float32)."""
    d0 = tensors[0]._data.dtype
    for t in tensors:   # (a plain loop: one dtype, the common case, returns without a set)
        d = t._data.dtype
        if d is not d0 and d != d0:
            break
    else:
        return None
    dts = {t._data.dtype for t in tensors}
    for kinds in ("c", "f", "iu", "b"):
        same = [d for d in dts if d.kind in kinds]
        if same:
            return xp.result_type(*same)


def cat(tensors, dim=0):
    tensors = _check_seq(tensors, "cat")
    if not tensors:
        raise ValueError("cat: expected a non-empty list of tensors")   # PyTorch's type (stack's is RuntimeError)
    dt = _common_dtype(tensors)
    if dt is not None:
        tensors = [t if t._data.dtype == dt else t.to(dt) for t in tensors]
    ref = tensors[0]
    rs = ref._data.shape
    d = _dim(dim, len(rs), "cat")
    for i, t in enumerate(tensors):
        ts = t._data.shape   # (the arrays' shapes: no Size objects on this per-call path)
        if len(ts) != len(rs) or ts[:d] != rs[:d] or ts[d + 1:] != rs[d + 1:]:
            raise RuntimeError(f"cat: tensors must match except in dimension {d}; tensor 0 has shape "
                               f"{tuple(ref.shape)} and tensor {i} has shape {tuple(t.shape)}")
    return Cat.apply(*tensors, dim=d)


concat = concatenate = cat


def stack(tensors, dim=0):
    tensors = _check_seq(tensors, "stack")
    dt = _common_dtype(tensors) if tensors else None
    if dt is not None:
        tensors = [t if t._data.dtype == dt else t.to(dt) for t in tensors]
    if not tensors:
        raise RuntimeError("stack: expected a non-empty list of tensors")
    ref = tensors[0]
    rs = ref._data.shape   # (the arrays' shapes: no Size objects on this per-call path)
    for i, t in enumerate(tensors):
        if t._data.shape != rs:
            raise RuntimeError(f"stack: expects each tensor to be equal size, but got {tuple(ref.shape)} "
                               f"at entry 0 and {tuple(t.shape)} at entry {i}")
    d = _dim(dim, len(rs) + 1, "stack")
    return Stack.apply(*tensors, dim=d)


def split(x, split_size_or_sections, dim=0):
    d = _dim(dim, x.ndim, "split")
    n = x.shape[d]
    if isinstance(split_size_or_sections, int):
        s = split_size_or_sections
        if s < 0 or s == 0 and n:
            raise RuntimeError(f"split: split_size can only be 0 if dimension size is 0, but got dimension size "
                               f"of {n} (split_size={s}; expected a positive int)" if s == 0 else
                               f"split: split_size must be non-negative, but got split_size={s}")
        if s == 0:
            return (x,)
        sizes = [s] * (n // s) + ([n % s] if n % s else [])
    else:
        sizes = list(split_size_or_sections)
        if sum(sizes) != n:
            raise RuntimeError(f"split: sections {sizes} sum to {sum(sizes)} but dimension {d} has size {n}")
    out, start, pre = [], 0, (slice(None),) * d
    for s in sizes:
        out.append(x[pre + (slice(start, start + s),)])
        start += s
    return tuple(out)


@torch_args(tensor_first=True)
def chunk(x, chunks, dim=0):
    if not isinstance(chunks, int) or isinstance(chunks, bool):
        raise TypeError(f"chunk(): argument 'chunks' must be int, not {type(chunks).__name__}")
    if chunks <= 0:
        raise RuntimeError(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    d = _dim(dim, x.ndim, "chunk")
    n = x.shape[d]
    size = -(-n // chunks)
    return split(x, size, d) if size else (x,)


@torch_args(tensor_first=True)
def unbind(x, dim=0):
    d = _dim(dim, x.ndim, "unbind")
    pre = (slice(None),) * d
    return tuple(x[pre + (i,)] for i in range(x.shape[d]))


def repeat(x, *sizes):
    """Tile x (torch.Tensor.repeat): built from expand + reshape, so the gradient sums the copies."""
    sizes = _shape_arg(sizes, "repeat")
    nd = len(sizes)
    if any(r < 0 for r in sizes):
        raise RuntimeError(f"repeat: Trying to create tensor with negative dimension (repeat sizes {sizes}; "
                           f"expected non-negative ints)")
    if nd < x.ndim:
        raise RuntimeError(f"repeat: Number of dimensions of repeat dims can not be smaller than number of "
                           f"dimensions of tensor (got {nd} repeat sizes {sizes} for a tensor of shape "
                           f"{tuple(x.shape)})")
    xs = reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape))
    inter, final = [], []
    for r, s in zip(sizes, xs.shape):
        inter += [r, s]
        final.append(r * s)
    y = reshape(xs, tuple(v for s in xs.shape for v in (1, s)))
    y = expand(y, tuple(inter))
    return reshape(Clone.apply(y), tuple(final))


@torch_args(tensor_first=True)
def movedim(input, source, destination):  # noqa: A002
    """movedim with ints or sequences of dims (as PyTorch)."""
    x = _tensor(input, "movedim: input")
    src = [source] if isinstance(source, int) else list(source)
    dst = [destination] if isinstance(destination, int) else list(destination)
    if len(src) != len(dst):
        raise RuntimeError(f"movedim: source and destination must have the same number of dims, got "
                           f"{len(src)} and {len(dst)}")
    src = [_dim_args(x, s, "movedim") for s in src]
    dst = [_dim_args(x, s, "movedim") for s in dst]
    if len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise RuntimeError("movedim: repeated dim in source or destination")
    order = [None] * x.ndim
    for s, t in zip(src, dst):
        order[t] = s
    rest = iter(i for i in range(x.ndim) if i not in src)
    order = [o if o is not None else next(rest) for o in order]
    return permute(x, order) if order != list(range(x.ndim)) else x


# ---------------------------------------------------------------- shapes and selection
def atleast_1d(x):
    return x if x.ndim >= 1 else reshape(x, (1,))


def atleast_2d(x):
    return x if x.ndim >= 2 else reshape(x, (1, -1) if x.ndim == 1 else (1, 1))


def atleast_3d(x):
    if x.ndim >= 3:
        return x
    if x.ndim == 2:
        return unsqueeze(x, -1)
    return reshape(x, (1, -1, 1) if x.ndim == 1 else (1, 1, 1))


def vstack(tensors):
    return cat([atleast_2d(t) for t in tensors], 0)


row_stack = vstack


def hstack(tensors):
    ts = [atleast_1d(t) for t in tensors]
    return cat(ts, 0 if ts[0].ndim == 1 else 1)


def dstack(tensors):
    return cat([atleast_3d(t) for t in tensors], 2)


def column_stack(tensors):
    ts = [reshape(t, (-1, 1)) if t.ndim <= 1 else t for t in tensors]
    return cat(ts, 1)


@torch_args(tensor_first=True)
def tile(x, dims):
    dims = tuple(dims)
    if len(dims) < x.ndim:
        dims = (1,) * (x.ndim - len(dims)) + dims
    elif len(dims) > x.ndim:
        x = reshape(x, (1,) * (len(dims) - x.ndim) + tuple(x.shape))
    return repeat(x, *dims)


@torch_args(tensor_first=True)
def swapdims(x, dim0, dim1):
    return transpose(x, dim0, dim1)


# ---------------------------------------------------------------- shapes
@torch_args(tensor_first=True)
def narrow(x, dim, start, length):
    d = _dim_args(x, dim, "narrow")
    L = x.shape[d]
    s = int(start.item() if isinstance(start, Tensor) else start)
    s = s + L if s < 0 else s
    if not (0 <= s and s + length <= L and length >= 0):
        raise RuntimeError(f"narrow: start ({start}) + length ({length}) exceeds dimension size ({L}) of dim {d} "
                           f"(expected 0 <= start and start + length <= {L})")
    key = (slice(None),) * d + (slice(s, s + length),)
    return x[key]


@torch_args(tensor_first=True)
def rot90(x, k=1, dims=(0, 1)):
    d0, d1 = _dim_args(x, dims[0], "rot90"), _dim_args(x, dims[1], "rot90")
    k %= 4
    if k == 1:
        return transpose(flip(x, (d1,)), d0, d1)
    if k == 2:
        return flip(x, (d0, d1))
    if k == 3:
        return flip(transpose(x, d0, d1), (d1,))
    return x


@torch_args(tensor_first=True)
def fliplr(x):
    return flip(x, (1,))


@torch_args(tensor_first=True)
def flipud(x):
    return flip(x, (0,))


def type_as(x, other):
    return x.to(other.dtype)


def reshape_as(x, other):
    return reshape(x, tuple(other.shape))


class Unfold(Function):
    """Windows of ``size`` taken every ``step`` along ``dim`` (Tensor.unfold): the windows axis
    replaces ``dim`` and the window's own axis goes last.  Backward adds each window's gradient
    back where the window was read from (overlapping windows add up): one strided slice-add per
    position inside the window, never a loop over windows."""

    def forward(self, x, dim, size, step):
        n = (x.shape[dim] - size) // step + 1
        self.dim, self.size, self.step, self.n, self.xshape = dim, size, step, n, x.shape
        xp = self.xp
        w = xp.lib.stride_tricks.sliding_window_view(x, size, axis=dim)
        key = (slice(None),) * dim + (slice(0, (n - 1) * step + 1, step),)
        return xp.ascontiguousarray(w[key])

    def backward(self, g):
        d, size, step, n = self.dim, self.size, self.step, self.n
        gx = self.xp.zeros(self.xshape, dtype=g.dtype)
        for k in range(size):
            dst = (slice(None),) * d + (slice(k, k + (n - 1) * step + 1, step),)
            gx[dst] += g[..., k]
        return gx


def unfold(x, dimension, size, step):
    d = _dim_args(x, dimension, "unfold")
    L = x.shape[d] if x.ndim else 1
    if size <= 0 or step <= 0:
        raise RuntimeError(f"unfold: size and step must be positive, got size={size}, step={step}")
    if size > L:
        raise RuntimeError(f"unfold: size {size} is larger than dimension {d} of size {L}")
    return Unfold.apply(x, d, size, step)


@torch_args(tensor_first=True)
def roll(x, shifts, dims=None):
    """Cyclic shift; built from slicing and cat, so the gradient rolls back."""
    if dims is None:
        return reshape(roll(flatten(x), shifts, 0), tuple(x.shape))
    if isinstance(shifts, (tuple, list)):
        if not isinstance(dims, (tuple, list)) or len(dims) != len(shifts):
            raise RuntimeError(f"roll: shifts and dimensions must align. shifts: {len(shifts)}, dims: "
                               f"{len(dims) if isinstance(dims, (tuple, list)) else 1}")
        for s, d in zip(shifts, dims):
            x = roll(x, s, d)
        return x
    d = dims[0] if isinstance(dims, (tuple, list)) else dims
    d = _dim(d, max(x.ndim, 1), "roll") if x.ndim else 0
    n = x.shape[d]
    s = shifts % n if n else 0
    if s == 0:
        return x
    pre = (slice(None),) * d
    return cat([x[pre + (slice(n - s, n),)], x[pre + (slice(0, n - s),)]], d)


def meshgrid(*tensors, indexing="ij"):
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    if indexing not in ("ij", "xy"):
        raise ValueError(f"meshgrid: indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = list(tensors)
    if indexing == "xy" and len(ts) >= 2:
        ts[0], ts[1] = ts[1], ts[0]
    shape = tuple(t.numel() for t in ts)
    out = []
    for i, t in enumerate(ts):
        s = [1] * len(ts)
        s[i] = t.numel()
        out.append(expand(reshape(t, tuple(s)), shape))
    if indexing == "xy" and len(out) >= 2:  # 'xy' is 'ij' on (y, x, ...), outputs swapped back
        out[0], out[1] = out[1], out[0]
    return tuple(out)


# ---------------------------------------------------------------- building matrices
def block_diag(*tensors):
    """The inputs (0-, 1- or 2-D) placed along the diagonal of one matrix, zeros elsewhere."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tuple(tensors[0])
    mats = []
    for i, t in enumerate(tensors):
        t = _tensor(t, f"block_diag: tensors[{i}]")
        if t.ndim > 2:
            raise RuntimeError(f"block_diag: tensors[{i}] must have 0, 1 or 2 dimensions, got shape "
                               f"{tuple(t.shape)}")
        mats.append(reshape(t, (1, 1)) if t.ndim == 0 else (reshape(t, (1, -1)) if t.ndim == 1 else t))
    if not mats:
        return Tensor._make(xp.zeros((0, 0), dtype=DT.get_default_dtype()))
    lib = B.namespace(*[m._data for m in mats])
    dt = _result_dtype([m.dtype for m in mats])
    mats = [m if m.dtype == dt else cast(m, dt) for m in mats]
    total = sum(m.shape[1] for m in mats)
    rows, left = [], 0
    for m in mats:
        r, c = m.shape
        parts = []
        if left:
            parts.append(Tensor._make(lib.zeros((r, left), dtype=dt)))
        parts.append(m)
        if total - left - c:
            parts.append(Tensor._make(lib.zeros((r, total - left - c), dtype=dt)))
        rows.append(cat(parts, 1) if len(parts) > 1 else m)
        left += c
    return cat(rows, 0)


def cartesian_prod(*tensors):
    """All tuples (a, b, ...) of the 1-D inputs' elements as rows, first input slowest."""
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
    grids = meshgrid(*[t if t.dtype == dt else cast(t, dt) for t in tensors], indexing="ij")
    return stack([reshape(g, (-1,)) for g in grids], 1)


@torch_args(tensor_first=True)
def adjoint(input):  # noqa: A002
    """The conjugate transpose of the last two dims (the transpose, for real tensors)."""
    x = _tensor(input, "adjoint: input")
    if x.ndim < 2:
        raise RuntimeError(f"adjoint: tensor must have at least 2 dimensions, got {x.ndim}")
    return transpose(x, -2, -1)


def _tri_indices(what, row, col, offset, upper, device=None):
    for nm, v in (("row", row), ("col", col)):
        if not isinstance(v, int) or v < 0:
            raise RuntimeError(f"{what}: {nm} must be a non-negative int, got {v!r}")
    xp = B.namespace_of_device(device)
    r, c = (xp.triu_indices if upper else xp.tril_indices)(row, offset, col)
    return Tensor._make(xp.stack([r, c]).astype(DT.int64))


def tril_indices(row, col, offset=0, *, dtype=None, device=None):
    out = _tri_indices("tril_indices", row, col, offset, False, device)
    return out if dtype is None else out.to(dtype)


def triu_indices(row, col, offset=0, *, dtype=None, device=None):
    out = _tri_indices("triu_indices", row, col, offset, True, device)
    return out if dtype is None else out.to(dtype)


def unravel_index(indices, shape):
    idx = _arr(indices)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"unravel_index: indices must be an integer tensor, got dtype {idx.dtype}")
    shape = tuple(int(s) for s in ((shape,) if isinstance(shape, int) else shape))
    total = int(xp.prod(shape)) if shape else 1
    on_host = idx.__class__ is xp.ndarray   # (the range check reads values: the CPU path only)
    if on_host and idx.size and (idx.min() < -total or idx.max() >= total):
        raise RuntimeError(f"unravel_index: index out of bounds for shape {shape} ({total} elements)")
    lib = B.namespace(idx)
    res = lib.unravel_index(idx % max(total, 1), shape)
    return tuple(Tensor._make(lib.asarray(r).astype(DT.int64)) for r in res)


def broadcast_shapes(*shapes):
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
    return tuple(t if tuple(t.shape) == shape else expand(t, shape) for t in tensors)


# ---------------------------------------------------------------- splitting
@torch_args(tensor_first=True)
def tensor_split(input, indices_or_sections, dim=0):  # noqa: A002
    """Split into n nearly equal parts (the first n % size get one more), or at given indices."""
    x = _tensor(input, "tensor_split: input")
    d = _dim_args(x, dim, "tensor_split")
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
    @torch_args(tensor_first=True)
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


@torch_args(tensor_first=True)
def split_with_sizes(input, split_sizes, dim=0):  # noqa: A002
    return split(input, list(split_sizes), dim)


@torch_args(tensor_first=True)
def ravel(input):  # noqa: A002
    return reshape(input, (-1,))


@torch_args(tensor_first=True)
def moveaxis(input, source, destination):  # noqa: A002
    return movedim(input, source, destination)


def _storage_of(a):
    """(flat storage, element offset of ``a`` in it, element strides of ``a``): the root array
    ``a`` is a view of when that root is C-contiguous (PyTorch's storage), else ``a``'s own
    C-ordered copy (offset 0, C strides)."""
    root = a
    while isinstance(getattr(root, "base", None), type(a)):
        root = root.base
    if root is not a and root.flags.c_contiguous and a.itemsize and \
            all(s % a.itemsize == 0 for s in a.strides):
        off = (a.__array_interface__["data"][0] - root.__array_interface__["data"][0]) // a.itemsize \
            if hasattr(a, "__array_interface__") else None
        if off is not None:
            return root.reshape(-1), int(off), tuple(s // a.itemsize for s in a.strides)
    c = a.copy() if not a.flags.c_contiguous else a
    strides, acc = [], 1
    for n in reversed(c.shape):
        strides.append(acc)
        acc *= max(n, 1)
    return c.reshape(-1), 0, tuple(reversed(strides))


def _strided_positions(size, stride, offset):
    """Flat storage positions read by the view (size, stride, offset) (a host int64 array)."""
    pos = xp.full(tuple(size), offset, dtype=xp.int64)
    for d, (s, st) in enumerate(zip(size, stride)):
        shape = [1] * len(size)
        shape[d] = s
        pos = pos + (xp.arange(s, dtype=xp.int64) * st).reshape(shape)
    return pos


class AsStrided(Function):
    """out[i] = storage[offset + sum_d i_d stride_d] over x's storage (Tensor.as_strided).
    Backward: dL/dstorage = the gradient scatter-added through the same positions (overlapping
    strides add up), then dL/dx = dL/dstorage read at x's own positions (divided by how many of
    x's elements share a storage element, as PyTorch, for an expanded x)."""

    def forward(self, x, size, stride, offset):
        flat, xoff, xstride = _storage_of(x)
        self.n, self.xshape = flat.shape[0], x.shape
        # the index arrays are built by the backward only (a stride-0 view of a huge size is
        # cheap as a view but not as an int64 array of its positions)
        self.view = (size, stride, offset, xstride, xoff)
        lib = self.xp
        if lib is xp and all(size):   # a read-only NumPy view (bounds checked by as_strided)
            return xp.lib.stride_tricks.as_strided(flat[offset:], tuple(size),
                                                   tuple(st * flat.itemsize for st in stride), writeable=False)
        return flat[lib.asarray(_strided_positions(size, stride, offset))]

    def backward(self, g):
        lib = self.xp
        size, stride, offset, xstride, xoff = self.view
        buf = lib.zeros(self.n, dtype=g.dtype)
        B.add_at(lib, buf, lib.asarray(_strided_positions(size, stride, offset).reshape(-1)), g.reshape(-1))
        xpos = _strided_positions(self.xshape, xstride, xoff).reshape(-1)
        gx = buf[lib.asarray(xpos)]
        cnt = xp.bincount(xpos, minlength=self.n)[xpos]
        if (cnt > 1).any():
            gx = gx / lib.asarray(cnt).astype(g.dtype)
        return gx.reshape(self.xshape)


@torch_args(tensor_first=True)
def as_strided(input, size, stride, storage_offset=None):  # noqa: A002
    """torch.as_strided / Tensor.as_strided: a read-only view of ``size`` with element ``stride``
    over input's storage, starting ``storage_offset`` elements in (input's own offset when None);
    refuses to read outside the storage."""
    size = tuple(_index(s) for s in (size if isinstance(size, (tuple, list, Size)) else (size,)))
    stride = tuple(_index(s) for s in (stride if isinstance(stride, (tuple, list, Size)) else (stride,)))
    if len(size) != len(stride):
        raise RuntimeError(f"as_strided: mismatch in length of strides and shape: size has {len(size)} "
                           f"dims, stride has {len(stride)}")
    if any(s < 0 for s in size):
        raise RuntimeError(f"as_strided: size must be non-negative, got size={list(size)}")
    if any(s < 0 for s in stride):
        raise RuntimeError(f"as_strided: negative strides are not supported, got stride={list(stride)}")
    flat, xoff, _ = _storage_of(input._data)
    off = xoff if storage_offset is None else _index(storage_offset)
    if off < 0:
        raise RuntimeError(f"as_strided: storage_offset must be non-negative, got {off}")
    need = 0 if 0 in size else off + 1 + sum((s - 1) * st for s, st in zip(size, stride))
    if need > flat.shape[0]:
        raise RuntimeError(f"setStorage: sizes {list(size)}, strides {list(stride)}, storage offset {off}, "
                           f"and itemsize {flat.itemsize} requiring a storage size of {need * flat.itemsize} "
                           f"are out of bounds for storage of size {flat.shape[0] * flat.itemsize}")
    return AsStrided.apply(input, size, stride, off)


@torch_args(tensor_first=True)
def narrow_copy(input, dim, start, length):  # noqa: A002
    """torch.narrow_copy: narrow, then a copy that owns its memory (differentiable)."""
    return Clone.apply(narrow(input, dim, start, length))
