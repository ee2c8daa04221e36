"""dtypes (ground floor, varlens.core): the dtype objects exported as varlens.float32 etc., the
default float dtype, normalising a dtype argument, PyTorch's promotion rules between dtypes,
finfo/iinfo and PyTorch's short dtype names for messages.

Floats default to float32 (as in PyTorch), integers to int64.  Operand casting for a binary op
(a Tensor with a Python number, 0-d against dimensioned tensors) is in varlens/ops/pointwise.py,
which applies these rules to Tensors.
"""
from __future__ import annotations

import builtins as _builtins

import numpy as np

# dtypes are plain NumPy dtype objects, exported as varlens.float32 etc.
float16 = np.dtype("float16")
float32 = np.dtype("float32")
float64 = np.dtype("float64")
int8 = np.dtype("int8")
int16 = np.dtype("int16")
int32 = np.dtype("int32")
int64 = np.dtype("int64")
uint8 = np.dtype("uint8")
bool_ = np.dtype("bool")

half, float, double = float16, float32, float64  # noqa: A001  (PyTorch aliases)
short, int, long = int16, int32, int64  # noqa: A001

_default_float = [float32]


def get_default_dtype():
    """The dtype given to tensors built from Python floats (float32 unless changed)."""
    return _default_float[0]


def set_default_dtype(dtype) -> None:
    d = np.dtype(dtype)
    if d.kind != "f":
        raise TypeError(f"set_default_dtype: expected a floating dtype, got {d}")
    _default_float[0] = d


def to_dtype(dtype):
    """Normalise a dtype argument (varlens/NumPy dtype, type or string) to np.dtype."""
    if dtype is None:
        return None
    if isinstance(dtype, np.dtype):
        return dtype
    try:
        return np.dtype(dtype)
    except TypeError:
        # a torch dtype passed by habit: torch.float32 -> 'float32'
        name = str(dtype).rsplit(".", 1)[-1]
        return np.dtype(name)


def is_floating(dtype) -> bool:
    return dtype.kind == "f"


_TORCH_NAMES = {"bool": "Bool", "uint8": "Byte", "int8": "Char", "int16": "Short", "int32": "Int",
                "int64": "Long", "float16": "Half", "float32": "Float", "float64": "Double",
                "complex64": "ComplexFloat", "complex128": "ComplexDouble"}


def torch_dtype_name(dtype):
    """PyTorch's short name of a dtype ('Long' for int64, 'Float' for float32), for messages."""
    return _TORCH_NAMES.get(str(dtype), str(dtype))


_RANK = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def promote_types(type1, type2):
    """PyTorch's rule: across categories (bool < int < float) the higher type wins as it is
    (int32 with float16 is float16, where NumPy says float64); within one, NumPy's promotion."""
    d1, d2 = to_dtype(type1), to_dtype(type2)
    r1, r2 = _RANK[d1.kind], _RANK[d2.kind]
    if r1 != r2:
        return d1 if r1 > r2 else d2
    return np.promote_types(d1, d2)


def can_cast(from_, to):
    f, t = to_dtype(from_), to_dtype(to)
    return _RANK[f.kind] <= _RANK[t.kind]


class finfo:
    """Machine limits of a floating dtype (torch.finfo), with fields as Python floats."""

    def __init__(self, type=None):  # noqa: A002
        fi = np.finfo(to_dtype(type) or get_default_dtype())
        self.bits = _builtins.int(fi.bits)
        self.eps, self.max, self.min = _builtins.float(fi.eps), _builtins.float(fi.max), _builtins.float(fi.min)
        self.tiny = self.smallest_normal = _builtins.float(fi.smallest_normal)
        self.resolution = 10.0 ** -_builtins.int(fi.precision)
        self.dtype = str(fi.dtype)

    def __repr__(self):
        return (f"finfo(resolution={self.resolution:g}, min={self.min:g}, max={self.max:g}, eps={self.eps:g}, "
                f"smallest_normal={self.tiny:g}, tiny={self.tiny:g}, dtype={self.dtype})")


class iinfo:
    """Limits of an integer dtype (torch.iinfo), with fields as Python ints."""

    def __init__(self, type):  # noqa: A002
        ii = np.iinfo(to_dtype(type))
        self.bits, self.min, self.max = _builtins.int(ii.bits), _builtins.int(ii.min), _builtins.int(ii.max)
        self.dtype = str(ii.dtype)

    def __repr__(self):
        return f"iinfo(min={self.min:g}, max={self.max:g}, dtype={self.dtype})"
