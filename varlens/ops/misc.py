"""Smaller tensor functions PyTorch users reach for: triangles, diagonals, rolls, grids,
repeat_interleave, nonzero/unique.  Differentiable ones are built from existing ops
(masks, gathers, concatenation), so their gradients come from those ops' backward."""
from __future__ import annotations

from varlens.core.array import xp


def _T():
    from varlens.core.tensor import Tensor
    return Tensor


def _check_2d(x, op):
    if x.ndim < 2:
        raise RuntimeError(f"{op}: expected a tensor with at least 2 dimensions, got shape {tuple(x.shape)}")


def tril(x, diagonal=0):
    """Lower triangle (the rest zeroed); gradient passes only through the kept entries."""
    _check_2d(x, "tril")
    m = xp.tril(xp.ones(x.shape[-2:], dtype=bool), k=diagonal)
    return _keep(x, m)


def triu(x, diagonal=0):
    _check_2d(x, "triu")
    m = xp.triu(xp.ones(x.shape[-2:], dtype=bool), k=diagonal)
    return _keep(x, m)


def _keep(x, m):
    """x where the bool mask m is True, exact zeros elsewhere (a masked fill, not a product with
    0/1, so an Inf or NaN outside the kept triangle does not turn into NaN)."""
    from varlens.ops.index import masked_fill
    return masked_fill(x, _T()._make(~m), 0)


def _diag_indices(r, c, offset):
    """(rows, cols) index arrays of the offset-th diagonal of an r x c matrix (offset > 0: above)."""
    if offset >= 0:
        k = max(0, min(r, c - offset))
        return xp.arange(k), xp.arange(k) + offset
    k = max(0, min(r + offset, c))
    return xp.arange(k) - offset, xp.arange(k)


def diag(x, diagonal=0):
    """1-D -> a square matrix with x on the given diagonal; 2-D -> that diagonal as 1-D."""
    from varlens.ops.index import getitem, index_put
    if x.ndim == 1:
        n = x.shape[0] + abs(diagonal)
        out = _T()._make(xp.zeros((n, n), dtype=x.dtype))
        return index_put(out, _diag_indices(n, n, diagonal), x)
    if x.ndim == 2:
        return getitem(x, _diag_indices(x.shape[0], x.shape[1], diagonal))
    raise RuntimeError(f"diag: expected a 1-D or 2-D tensor, got shape {tuple(x.shape)}")


def diagonal(x, offset=0, dim1=0, dim2=1):
    from varlens.ops.shape import movedim
    if x.ndim != 2:  # any number of dims: the diagonal of the (dim1, dim2) planes, as a last dim
        from varlens.ops.decomp import _diagonal
        return _diagonal(x, offset, dim1, dim2, "diagonal")
    if (dim1, dim2) != (0, 1):
        x = movedim(movedim(x, dim1, 0), dim2 if dim2 > dim1 else dim2 + 1, 1)
    if x.ndim == 2:
        return diag(x, offset)
    raise RuntimeError("diagonal: only 2-D inputs are supported")


def roll(x, shifts, dims=None):
    """Cyclic shift; built from slicing and cat, so the gradient rolls back."""
    from varlens.ops.shape import cat, flatten, reshape
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
    from varlens.ops.shape import _dim
    d = _dim(d, max(x.ndim, 1), "roll") if x.ndim else 0
    n = x.shape[d]
    s = shifts % n if n else 0
    if s == 0:
        return x
    pre = (slice(None),) * d
    return cat([x[pre + (slice(n - s, n),)], x[pre + (slice(0, n - s),)]], d)


def repeat_interleave(x, repeats, dim=None):
    from varlens.ops.index import index_select
    from varlens.ops.shape import flatten
    if dim is None:
        x, dim = flatten(x), 0
    dim %= x.ndim
    r = repeats._data if isinstance(repeats, _T()) else repeats
    idx = xp.repeat(xp.arange(x.shape[dim]), r)
    return index_select(x, dim, _T()._make(idx))


def meshgrid(*tensors, indexing="ij"):
    from varlens.ops.shape import expand, reshape
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


def nonzero(x, as_tuple=False):
    a = xp.nonzero(x._data)
    T = _T()
    if as_tuple:
        return tuple(T._make(i.astype(xp.int64)) for i in a)
    return T._make(xp.stack(a, axis=1).astype(xp.int64) if a else xp.zeros((0, 0), dtype=xp.int64))


def unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    T = _T()
    if dim is None:
        vals, inv, counts = xp.unique(x._data, return_inverse=True, return_counts=True)
        inv = inv.reshape(x.shape)
    else:   # unique slices along dim (sorted lexicographically, as torch)
        if not -x.ndim <= dim < max(x.ndim, 1):
            raise IndexError(f"Dimension out of range (expected to be in range of [{-x.ndim}, {x.ndim - 1}], "
                             f"but got {dim})")
        vals, inv, counts = xp.unique(x._data, return_inverse=True, return_counts=True, axis=dim)
        inv = inv.reshape(-1)
    out = [T._make(vals)]
    if return_inverse:
        out.append(T._make(inv.astype(xp.int64)))
    if return_counts:
        out.append(T._make(counts.astype(xp.int64)))
    return out[0] if len(out) == 1 else tuple(out)


def baddbmm(input, batch1, batch2, *, beta=1, alpha=1):  # noqa: A002
    from varlens.ops.elementwise import add, mul
    from varlens.ops.linalg import bmm
    prod = bmm(batch1, batch2)
    return add(mul(input, beta) if beta != 1 else input, mul(prod, alpha) if alpha != 1 else prod)
