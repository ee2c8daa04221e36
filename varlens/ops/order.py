"""Sorting and order statistics: sort, argsort, msort, topk, kthvalue, median/nanmedian, quantile,
mode, unique/unique_consecutive, searchsorted/bucketize, bincount, histc/histogram.

Indices carry no gradient; the values are read with ``gather``, so their gradient is
scattered back to the positions they came from (the adjoint of a permutation).
"""
from __future__ import annotations


from varlens.core.arg_rules import torch_args
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core.array import xp as np_   # (the host library, where a function's xp is the input's)

from varlens.ops.return_types import sort as SortResult, topk as TopKResult  # noqa: E402
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.core import function as _function
from varlens.core.grad_mode import _enabled as _grad_enabled
from varlens.ops.return_types import kthvalue as _KV
import math
from varlens.ops.shape import reshape
from varlens.ops.shape import squeeze
from varlens.ops.shape import stack
from varlens.ops.return_types import median as _Median
from varlens.ops._args import _dim as _dim_args
from varlens.ops.shape import narrow
from varlens.ops.return_types import mode as _Mode
from varlens.ops.return_types import nanmedian as _NanMedian
from varlens.ops._args import _tensor
from varlens.ops.pointwise import clone
from varlens.ops.index import _ns, gather
from varlens.ops.scan import _running
from collections import namedtuple


def _dim(dim, ndim, op):
    nd = max(ndim, 1)
    if not -nd <= dim < nd:
        raise IndexError(f"{op}: dim {dim} out of range for a tensor with {ndim} dimensions")
    return dim % nd


@torch_args(tensor_first=True)
def argsort(x, dim=-1, descending=False, stable=False):
    a = x._data
    lib = _ns(a)
    if a.ndim == 0:
        return Tensor._make(lib.zeros((), dtype=xp.int64))
    d = _dim(dim, a.ndim, "argsort")
    # (CuPy sorts stably, and takes no other kind)
    kind = "stable" if stable or descending or lib is not xp else "quicksort"
    idx = _descending_order(a, d, lib, kind) if descending else lib.argsort(a, axis=d, kind=kind)
    return Tensor._make(idx.astype(xp.int64))


def _descending_order(a, d, lib, kind="stable"):
    """Indices that sort ``a`` along axis ``d`` in descending order, ties (and NaNs) in their
    original order, NaN first: PyTorch counts NaN as larger than every number (an ascending
    sort puts NaN last, as NumPy does).  Keys: -a for floats, ~a for integers and bools (-a
    would overflow at the smallest integer)."""
    key = -a if a.dtype.kind in "fc" else ~a
    idx = lib.argsort(key, axis=d, kind=kind)
    if a.dtype.kind in "fc":
        nan = lib.isnan(a)
        # (on the host the reorder is skipped when there is no NaN; on a device it always runs,
        # as asking would read a device value)
        if lib is not xp or bool(nan.any()):
            nan_first = ~lib.take_along_axis(nan, idx, axis=d)   # False (sorts first) at NaN
            idx = lib.take_along_axis(idx, lib.argsort(nan_first, axis=d, kind="stable"), axis=d)
    return idx


@torch_args(tensor_first=True)
def sort(x, dim=-1, descending=False, stable=False):
    if x.ndim == 0:
        return SortResult(x, argsort(x))
    idx = argsort(x, dim, descending, stable)
    return SortResult(gather(x, dim, idx), idx)


@torch_args(tensor_first=True)
def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    d = _dim(dim, x.ndim, "topk")
    n = x.shape[d] if x.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: k ({k}) must be between 0 and the size of dimension {d} ({n})")
    first = (slice(None),) * d + (slice(0, k),)
    a = x._data
    if (a.__class__ is xp.ndarray and a.ndim and a.dtype.kind == "f" and not (x._rg and _grad_enabled[0])
            and _function.op_hook is None):
        # nothing to differentiate or observe (sampling under no_grad): two stable sorts of the
        # same keys give the values and the indices in the same order, without gather's op (on
        # short rows two sorts take 2.7 us where one sort and np.take_along_axis take 5.5, at 65)
        key = -a if largest else a
        if largest and bool(xp.isnan(a).any()):    # NaN is the largest: the NaN-aware order
            idx = _descending_order(a, d, xp)[first]
            vals = xp.take_along_axis(a, idx, axis=d)
        else:
            vals = xp.sort(key, axis=d, kind="stable")[first]
            vals = -vals if largest else vals
            idx = key.argsort(axis=d, kind="stable")[first]
        return TopKResult(Tensor._make(vals), Tensor._make(idx.astype(xp.int64, copy=False)))
    idx = argsort(x, d, descending=largest, stable=True)._data
    idx = idx[first] if x.ndim else idx
    idx_t = Tensor._make(idx)
    return TopKResult(gather(x, d, idx_t), idx_t)


@torch_args(tensor_first=True)
def searchsorted(sorted_sequence, values, *, out_int32=False, right=False, side=None, sorter=None):
    s = sorted_sequence._data if isinstance(sorted_sequence, Tensor) else np_.asarray(sorted_sequence)
    v = values._data if isinstance(values, Tensor) else np_.asarray(values)
    xp = B.namespace(s, v)
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


@torch_args(tensor_first=True)
def bucketize(input, boundaries, *, out_int32=False, right=False):
    return searchsorted(boundaries, input, out_int32=out_int32, right=right)


@torch_args(tensor_first=True)
def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest element along ``dim`` (1-based k) and its index."""
    d = dim % max(input.ndim, 1)
    n = input.shape[d] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue: k must be in [1, {n}], got {k}")
    s = sort(input, d)
    v, i = narrow(s.values, d, k - 1, 1), narrow(s.indices, d, k - 1, 1)
    if not keepdim:
        v, i = squeeze(v, d), squeeze(i, d)
    return _KV(v, i)


@torch_args(tensor_first=True)
def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """Quantiles by linear interpolation between order statistics (as torch.quantile); q a float
    or a 1-D tensor (its values give a new leading dimension)."""
    if interpolation not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"quantile: interpolation must be linear, lower, higher, nearest or midpoint, "
                         f"got {interpolation!r}")
    qa = q._data if isinstance(q, Tensor) else xp.asarray(q, dtype=xp.float64)
    qa = B.to_host(qa)   # (q's values choose which order statistics to read: a host read for CUDA q)
    if qa.ndim > 1 or bool(((qa < 0) | (qa > 1)).any()):
        raise ValueError("quantile: q must be a scalar or 1-D with values in [0, 1]")
    x = reshape(input, (-1,)) if dim is None else input
    d = 0 if dim is None else dim % x.ndim
    n = x.shape[d]
    s = sort(x, d).values
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
            r = reshape(r, (1,) * input.ndim) if keepdim else reshape(r, ())
        elif not keepdim:
            r = squeeze(r, d)
        outs.append(r)
    return outs[0] if qa.ndim == 0 else stack(outs, 0)


def _median_positions(a, d, s):
    """Where each row's median sits in its ascending sort along ``d`` when NaNs are present (a
    keepdim index tensor): the first NaN (the sort puts the NaNs last, in their order), else
    (n - 1) // 2.  None when there is no NaN (asked on the host only; on a device the positions
    are always built, as asking would read a device value)."""
    if a.dtype.kind not in "fc" or a.ndim == 0:
        return None
    lib = _ns(a)
    nan = lib.isnan(a)
    if lib is xp and not nan.any():
        return None
    n = a.shape[d]
    c = nan.sum(axis=d, keepdims=True)
    return Tensor._make(lib.where(c > 0, n - c, (n - 1) // 2).astype(xp.int64))


@torch_args(tensor_first=True)
def median(x, dim=None, keepdim=False):
    """The lower median, as PyTorch: element (n - 1) // 2 of the sorted values, or NaN (the first
    NaN of the row, with its index) where the row holds one (nanmedian skips them).  With ``dim``:
    (values, indices), a named pair."""
    if dim is None:
        flat = reshape(x, (-1,))
        s = sort(flat)
        k = _median_positions(flat._data, 0, s)
        return s.values[(flat.shape[0] - 1) // 2] if k is None else gather(s.values, 0, k)[0]
    d = _dim_args(x, dim, "median")
    s = sort(x, d)
    k = _median_positions(x._data, d, s)
    if k is None:
        k = (x.shape[d] - 1) // 2
        vals, idx = narrow(s.values, d, k, 1), narrow(s.indices, d, k, 1)
    else:
        vals, idx = gather(s.values, d, k), gather(s.indices, d, k)
    if not keepdim:
        vals, idx = squeeze(vals, d), squeeze(idx, d)
    return _Median(vals, idx)


@torch_args(tensor_first=True)
def bincount(x, weights=None, minlength=0):
    a = x._data
    lib = _ns(a)
    if a.ndim != 1 or a.dtype.kind not in "iu" or (lib is xp and a.size and a.min() < 0):  # (values: host only)
        raise RuntimeError("bincount: input must be a 1-D tensor of non-negative integers")
    w = None if weights is None else (weights._data if isinstance(weights, Tensor) else lib.asarray(weights))
    r = lib.bincount(a, weights=w, minlength=minlength)
    return Tensor._make(r.astype(DT.int64) if w is None else r.astype(w.dtype, copy=False))


@torch_args(tensor_first=True)
def histc(x, bins=100, min=0, max=0):  # noqa: A002  (PyTorch's argument names)
    a = x._data
    lo, hi = float(min), float(max)
    if lo == hi:
        lo, hi = float(a.min()), float(a.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    h, _ = _ns(a).histogram(a, bins=bins, range=(lo, hi))
    return Tensor._make(h.astype(a.dtype if a.dtype.kind == "f" else DT.get_default_dtype()))


@torch_args(tensor_first=True)
def unique(x, sorted=True, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    T = Tensor
    xp = _ns(x._data)   # (on a device: a host sync, the result's size depends on the values)
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


@torch_args(tensor_first=True)
def mode(input, dim=-1, keepdim=False):  # noqa: A002
    """Most frequent value along ``dim`` (the smallest among equally frequent ones) and the index
    of its last occurrence, as PyTorch; the value is gathered, so its gradient goes there."""
    x = _tensor(input, "mode: input")
    xp = _ns(x._data)
    if x.ndim == 0:
        return _Mode(clone(x), Tensor._make(xp.zeros((), dtype=DT.int64)))
    d = _dim_args(x, dim, "mode")
    a = xp.moveaxis(x._data, d, -1)
    n = a.shape[-1]
    if n == 0:
        raise IndexError(f"mode: dimension {d} is empty; cannot take a mode of zero elements")
    s = xp.sort(a, -1)
    start = xp.ones(s.shape, bool)
    start[..., 1:] = s[..., 1:] != s[..., :-1]
    ar = xp.arange(n)
    run_start = _running(xp, xp.maximum, xp.where(start, ar, 0))   # (CuPy has no maximum.accumulate)
    count = ar - run_start + 1
    best = xp.take_along_axis(s, xp.argmax(count, -1)[..., None], -1)
    last = n - 1 - xp.argmax(xp.flip(a == best, -1), -1)
    idx = xp.moveaxis(last[..., None], -1, d).astype(DT.int64)
    it = Tensor._make(idx)
    vals = gather(x, d, it)
    if not keepdim:
        vals, it = squeeze(vals, d), Tensor._make(xp.squeeze(idx, d))
    return _Mode(vals, it)


@torch_args(tensor_first=True)
def nanmedian(input, dim=None, keepdim=False):  # noqa: A002
    """Lower median of the non-NaN values (NaN where a slice is all NaN), as PyTorch."""
    x = _tensor(input, "nanmedian: input")
    xp = _ns(x._data)
    if dim is None:
        flat = reshape(x, (-1,))
        a = flat._data
        if a.size == 0:
            raise RuntimeError("nanmedian: cannot take the median of an empty tensor")
        if xp is not np_:   # on a device: the per-dim path, which reads no value
            return nanmedian(flat, 0).values
        order = xp.argsort(a, kind="stable")
        k = int((~xp.isnan(a)).sum()) if a.dtype.kind == "f" else a.size
        pos = order[(k - 1) // 2] if k else order[0]
        return flat[int(pos)] if k else clone(flat[int(order[0])]) * float("nan")
    d = _dim_args(x, dim, "nanmedian")
    if x.ndim == 0:
        return _NanMedian(clone(x), Tensor._make(xp.zeros((), dtype=DT.int64)))
    a = xp.moveaxis(x._data, d, -1)
    if a.shape[-1] == 0:
        raise IndexError(f"nanmedian: dimension {d} is empty")
    order = xp.argsort(a, -1, kind="stable")
    k = (~xp.isnan(a)).sum(-1) if a.dtype.kind == "f" else xp.full(a.shape[:-1], a.shape[-1])
    pos = xp.maximum((k - 1) // 2, 0)
    idx = xp.take_along_axis(order, pos[..., None], -1)
    idx = xp.moveaxis(idx, -1, d).astype(DT.int64)
    it = Tensor._make(idx)
    vals = gather(x, d, it)
    if not keepdim:
        vals, it = squeeze(vals, d), Tensor._make(xp.squeeze(idx, d))
    return _NanMedian(vals, it)


# ---------------------------------------------------------------- non-differentiable helpers
_Hist = namedtuple("histogram", ["hist", "bin_edges"])


@torch_args(tensor_first=True)
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
    h, e = _ns(a).histogram(a, bins=b, range=None if not isinstance(b, int) else (lo, hi), weights=wt, density=density)
    return _Hist(Tensor._make(h.astype(x.dtype)), Tensor._make(e.astype(x.dtype)))


@torch_args(tensor_first=True)
def unique_consecutive(input, return_inverse=False, return_counts=False, dim=None):  # noqa: A002
    x = _tensor(input, "unique_consecutive: input")
    xp = _ns(x._data)   # (a boolean selection: a host sync on a device, as the result's size needs)
    if dim is not None:
        d = _dim_args(x, dim, "unique_consecutive")
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


@torch_args(tensor_first=True)
def msort(input):  # noqa: A002
    return sort(input, 0).values


@torch_args(tensor_first=True)
def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):  # noqa: A002
    """torch.nanquantile: quantile of each slice's non-NaN values (NaN for an all-NaN slice); the
    values are gathered from the sorted slice (NaNs sort last, so an all-NaN slice reads NaN),
    so gradients go to them."""
    if interpolation not in ("linear", "lower", "higher", "nearest", "midpoint"):
        raise ValueError(f"nanquantile: interpolation must be linear, lower, higher, nearest or midpoint, "
                         f"got {interpolation!r}")
    qa = q._data if isinstance(q, Tensor) else xp.asarray(q, dtype=xp.float64)
    qa = B.to_host(qa)
    if qa.ndim > 1 or bool(((qa < 0) | (qa > 1)).any()):
        raise ValueError("nanquantile: q must be a scalar or 1-D with values in [0, 1]")
    x = reshape(input, (-1,)) if dim is None else input
    d = 0 if dim is None else dim % x.ndim
    s = sort(x, d).values
    lib = _ns(s._data)
    cnt = B.to_host((~xp.isnan(B.to_host(x._data))).sum(axis=d, keepdims=True)).astype(xp.int64)
    outs = []
    for qq in xp.atleast_1d(qa).tolist():
        pos = qq * (xp.maximum(cnt, 1) - 1).astype(xp.float64)
        lo, hi = xp.floor(pos).astype(xp.int64), xp.ceil(pos).astype(xp.int64)
        frac = pos - lo
        if interpolation == "lower":
            hi, frac = lo, frac * 0
        elif interpolation == "higher":
            lo, frac = hi, frac * 0
        elif interpolation == "nearest":
            r = xp.where(xp.abs(frac - 0.5) > 1e-12, xp.round(pos), xp.where(lo % 2 == 0, lo, hi)).astype(xp.int64)
            lo, hi, frac = r, r, frac * 0
        elif interpolation == "midpoint":
            frac = xp.where(hi != lo, 0.5, 0.0)
        a = gather(s, d, Tensor._make(lib.asarray(lo)))
        b = gather(s, d, Tensor._make(lib.asarray(hi)))
        r = a + (b - a) * Tensor._make(lib.asarray(frac.astype(s._data.dtype)))
        if dim is None:
            r = reshape(r, (1,) * input.ndim) if keepdim else reshape(r, ())
        elif not keepdim:
            r = squeeze(r, d)
        outs.append(r)
    return outs[0] if qa.ndim == 0 else stack(outs, 0)
