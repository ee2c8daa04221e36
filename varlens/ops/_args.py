"""Argument handling shared by the op families: a Tensor argument checked (``_tensor``), a dim
checked and made non-negative (``_dim``), a value made a Tensor like another (``_T``), integer
input promoted to the default float dtype (``_float``), and two small dtype/permutation helpers.
Imports only the core."""
from __future__ import annotations
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.core.array import xp


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
    return x if x.dtype.kind == "f" else x.to(DT.get_default_dtype())


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


def _T(v, like=None):
    if isinstance(v, Tensor):
        return v
    a = xp.asarray(v)
    if like is not None and a.dtype.kind != "b" and like.dtype.kind == "f":
        a = a.astype(like.dtype)
    return Tensor._make(a)
