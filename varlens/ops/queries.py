"""Queries about a tensor or a dtype that PyTorch exposes as functions: is_floating_point,
is_complex, is_signed, is_nonzero, is_same_size, get_device, result_type (PyTorch's promotion
between tensors and Python numbers; the dtype-only rules are in varlens/core/dtypes.py)."""
from __future__ import annotations
from varlens.core.arg_rules import torch_args
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.core.dtypes import _RANK
from varlens.ops._args import _tensor
from varlens.core.dtypes import promote_types
from varlens.core.array import xp


# ---------------------------------------------------------------- predicates and dtype helpers
@torch_args(tensor_first=True)
def is_floating_point(input):  # noqa: A002
    return _tensor(input, "is_floating_point: input").dtype.kind == "f"


@torch_args(tensor_first=True)
def is_complex(input):  # noqa: A002
    return _tensor(input, "is_complex: input").dtype.kind == "c"


@torch_args(tensor_first=True)
def is_signed(input):  # noqa: A002
    return _tensor(input, "is_signed: input").dtype.kind in "fic"


@torch_args(tensor_first=True)
def is_nonzero(input):  # noqa: A002
    x = _tensor(input, "is_nonzero: input")
    if x.numel() != 1:
        raise RuntimeError(f"is_nonzero: a Boolean value of a tensor with {x.numel()} values is ambiguous "
                           "(expected exactly one element)")
    return bool(x._data.reshape(()) != 0)


@torch_args(tensor_first=True)
def is_same_size(input, other):  # noqa: A002
    return tuple(_tensor(input, "is_same_size: input").shape) == tuple(_tensor(other, "is_same_size: other").shape)


@torch_args(tensor_first=True)
def get_device(input):  # noqa: A002
    return -1  # CPU, as PyTorch reports it


def _dtype_of(v):
    if isinstance(v, Tensor):
        return v.dtype, v.ndim == 0
    if isinstance(v, bool):
        return xp.dtype(bool), True
    if isinstance(v, int):
        return xp.dtype("int64"), True
    if isinstance(v, float):
        return DT.get_default_dtype(), True
    raise TypeError(f"result_type: expected a Tensor or a number, got {type(v).__name__}")


@torch_args(tensor_first=True)
def result_type(tensor1, tensor2):
    """The dtype PyTorch's promotion gives: the higher category wins; within one category a
    dimensioned tensor wins over a 0-d one or a Python number."""
    (d1, z1), (d2, z2) = _dtype_of(tensor1), _dtype_of(tensor2)
    num1, num2 = not isinstance(tensor1, Tensor), not isinstance(tensor2, Tensor)
    r1, r2 = _RANK[d1.kind], _RANK[d2.kind]
    if r1 != r2:
        hi, hnum = (d1, num1) if r1 > r2 else (d2, num2)
        lo = d2 if r1 > r2 else d1
        if hnum and hi.kind == "f":  # a Python float with an integer tensor: the default float
            return DT.get_default_dtype()
        if hnum and hi.kind in "iu" and lo.kind == "b":
            return xp.dtype("int64")
        return hi
    if num1 and not num2:
        return d2
    if num2 and not num1:
        return d1
    if z1 != z2:
        return d2 if z1 else d1
    return promote_types(d1, d2)
