"""Sorting and selection: sort, argsort, topk.

Indices carry no gradient; the values are read with ``gather``, so their gradient is
scattered back to the positions they came from (the adjoint of a permutation).
"""
from __future__ import annotations


from varlens.core.array import xp

from varlens.ops.return_types import sort as SortResult, topk as TopKResult  # noqa: E402


def _dim(dim, ndim, op):
    nd = max(ndim, 1)
    if not -nd <= dim < nd:
        raise IndexError(f"{op}: dim {dim} out of range for a tensor with {ndim} dimensions")
    return dim % nd


def argsort(x, dim=-1, descending=False, stable=False):
    from varlens.core.tensor import Tensor
    a = x._data
    if a.ndim == 0:
        return Tensor._make(xp.zeros((), dtype=xp.int64))
    d = _dim(dim, a.ndim, "argsort")
    kind = "stable" if stable or descending else "quicksort"
    if descending:  # stable descending order: sort the negated keys (ties keep their order)
        key = -a if a.dtype.kind in "fi" else ~a
        idx = xp.argsort(key, axis=d, kind=kind)
    else:
        idx = xp.argsort(a, axis=d, kind=kind)
    return Tensor._make(idx.astype(xp.int64))


def sort(x, dim=-1, descending=False, stable=False):
    from varlens.ops.index import gather
    if x.ndim == 0:
        return SortResult(x, argsort(x))
    idx = argsort(x, dim, descending, stable)
    return SortResult(gather(x, dim, idx), idx)


def topk(x, k, dim=-1, largest=True, sorted=True):  # noqa: A002
    from varlens.ops.index import gather
    from varlens.core.tensor import Tensor
    d = _dim(dim, x.ndim, "topk")
    n = x.shape[d] if x.ndim else 1
    if not 0 <= k <= n:
        raise RuntimeError(f"topk: k ({k}) must be between 0 and the size of dimension {d} ({n})")
    idx = argsort(x, d, descending=largest, stable=True)._data
    idx = xp.take(idx, xp.arange(k), axis=d)
    idx_t = Tensor._make(idx)
    return TopKResult(gather(x, d, idx_t), idx_t)
