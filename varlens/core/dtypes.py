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

from varlens.core.arg_rules import torch_args

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


class UnsupportedDtype:
    """A PyTorch dtype that NumPy cannot hold (bfloat16, float8, quantised types).  The name
    exists, so that code building tables such as ``{'bfloat16': torch.bfloat16, ...}`` or
    comparing ``dtype == torch.bfloat16`` runs; using it to make or convert an array raises a
    TypeError naming the dtype and why (NumPy reads the ``dtype`` attribute, which refuses)."""

    def __init__(self, name, itemsize, is_floating_point, why):
        self._name, self.itemsize, self.is_floating_point, self._why = name, itemsize, is_floating_point, why
        self.is_complex, self.is_signed = False, is_floating_point

    @property
    def dtype(self):
        raise TypeError(f"varlens.{self._name} is not supported: {self._why}")

    def __repr__(self):
        return f"varlens.{self._name}"


_NO_BF16 = "NumPy has no bfloat16 type (use varlens.float32, or varlens.float16 for half precision)"
_NO_F8 = "NumPy has no 8-bit float types (use varlens.float16 or varlens.float32)"
_NO_Q = "varlens has no quantised tensors"
bfloat16 = UnsupportedDtype("bfloat16", 2, True, _NO_BF16)
complex32 = chalf = UnsupportedDtype("complex32", 4, False, "NumPy has no complex32 type (use complex64)")
float8_e4m3fn = UnsupportedDtype("float8_e4m3fn", 1, True, _NO_F8)
float8_e4m3fnuz = UnsupportedDtype("float8_e4m3fnuz", 1, True, _NO_F8)
float8_e5m2 = UnsupportedDtype("float8_e5m2", 1, True, _NO_F8)
float8_e5m2fnuz = UnsupportedDtype("float8_e5m2fnuz", 1, True, _NO_F8)
float8_e8m0fnu = UnsupportedDtype("float8_e8m0fnu", 1, True, _NO_F8)
qint8 = UnsupportedDtype("qint8", 1, False, _NO_Q)
quint8 = UnsupportedDtype("quint8", 1, False, _NO_Q)
qint32 = UnsupportedDtype("qint32", 4, False, _NO_Q)
_NO_COMPLEX = "varlens has no complex tensors (its arrays and autograd are real)"
complex64 = cfloat = UnsupportedDtype("complex64", 8, False, _NO_COMPLEX)
complex128 = cdouble = UnsupportedDtype("complex128", 16, False, _NO_COMPLEX)
UNSUPPORTED_DTYPES = ("complex64", "cfloat", "complex128", "cdouble", "bfloat16", "complex32", "chalf", "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2",
                      "float8_e5m2fnuz", "float8_e8m0fnu", "qint8", "quint8", "qint32")
short, int, long = int16, int32, int64  # noqa: A001

_default_float = [float32]


@torch_args(wrap=False)
def get_default_dtype():
    """The dtype given to tensors built from Python floats (float32 unless changed)."""
    return _default_float[0]


@torch_args(wrap=False)
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
    if isinstance(dtype, UnsupportedDtype):
        return dtype.dtype   # raises the TypeError that says why
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
