"""More of PyTorch's Tensor API, composed from the ops above (so their gradients are the
composed ops' gradients, already checked): in-place variants, index_add/index_fill/index_copy,
narrow, diff, median, fmod, frac, logit, nan_to_num, count_nonzero, bincount, histc, rot90,
fliplr/flipud, type conversions and storage queries.

Each function takes the tensor first, as the method does; ``install`` attaches them to Tensor.
"""
from __future__ import annotations


from varlens.core import dtypes as DT
from varlens.core import grad_mode as _gm
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.ops.pointwise import fmod
from varlens.ops.tensor_methods import _inplace, _random_
from varlens.ops.activation import relu
from varlens.ops.index import masked_fill, scatter, scatter_add
from varlens.ops.pointwise import ceil, clamp, expm1, floor, log10, log1p, log2, reciprocal, remainder, round as _pointwise_round, rsqrt, sigmoid, sign, square, trunc, where
from varlens.ops.shape import squeeze, t, transpose, unsqueeze
from varlens.ops.index import index_add, index_copy, index_fill
from varlens.ops.pointwise import frac, logit, nan_to_num
from varlens.ops.reduce import count_nonzero
from varlens.ops.scan import diff
from varlens.ops.order import bincount, histc, median
from varlens.ops.shape import fliplr, flipud, narrow, reshape_as, rot90, type_as, unfold


# ---------------------------------------------------------------- elementwise and reductions


from varlens.ops.return_types import median as _Median  # noqa: E402
from varlens.random import _gen


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
        g = _gen(generator)
        if kind == "exponential":
            lam = args[0] if args else 1.0
            return _random_(self, lambda s: -xp.log1p(-g.random(s)) / lam)
        lo, hi = (0, args[0]) if len(args) == 1 else ((args[0], args[1]) if args else (0, 2 ** 24))
        return _random_(self, lambda s: g.integers(lo, hi, s))
    method.__name__ = kind + "_"
    return method


def install():
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
        "scatter": scatter, "scatter_add": scatter_add, "masked_fill": masked_fill,
        "index_add": index_add, "index_copy": index_copy, "index_fill": index_fill,
        "clamp_min": lambda s, v: clamp(s, v, None), "clamp_max": lambda s, v: clamp(s, None, v),
        "floor": floor, "ceil": ceil, "round": _pointwise_round, "trunc": trunc, "sign": sign,
        "reciprocal": reciprocal, "square": square, "log1p": log1p, "expm1": expm1,
        "nan_to_num": nan_to_num, "fmod": fmod, "remainder": remainder, "frac": frac,
        "sigmoid": sigmoid, "relu": relu, "log2": log2, "log10": log10, "rsqrt": rsqrt,
        "where": lambda s, c, other: where(c, s, other),
    }
    for name, fn in inplace.items():
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _inplace_from(name, fn))
    for name, fn in {"unsqueeze": unsqueeze, "squeeze": squeeze, "t": t,
                     "transpose": transpose}.items():
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _reshaping_inplace(name, fn))
