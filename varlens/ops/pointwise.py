"""Pointwise ops: arithmetic, exp/log, powers, trigonometric and hyperbolic functions, rounding,
where/clamp/cast, and torch's other pointwise functions (hypot, logaddexp, copysign, fmod,
frac, logit, nan_to_num, float_power, ldexp, frexp, gcd/lcm, bit shifts).  Activations are in
varlens/ops/activation.py.

Convention for every backward here: it returns dL/d(input) = dL/d(out) * d(out)/d(input)
elementwise (the chain rule of seed 003 §1.6 / seed 001 §3.1, one entry of the
Jacobian's diagonal at a time).  Broadcast inputs are reduced by the engine.

Devices (issue 21): every Function computes with ``xp = self.xp``, the array library of its
inputs (NumPy, or CuPy / the simulated CUDA library), and helpers working on arrays ask
``B.namespace(...)``; the numba fast paths are taken for NumPy arrays only.  On the device no
value is read on the host: the checks that need one (integer division by zero) run on the CPU.
"""
from __future__ import annotations

import math

from varlens.core.arg_rules import torch_args
from varlens.core import function as _F
from varlens.core.function import Function
from varlens.core.dtypes import get_default_dtype
from varlens.core import array as B
from varlens.core.array import erf as _erf_array
from varlens.core.array import xp as _np   # the host library: dtypes and host-only checks
from varlens.core import primitives as D
from varlens.core.primitives import Clone
from varlens.ops.kernels import pointwise as _KP
from varlens.ops.kernels import strided as _KS
from varlens.core.dtypes import torch_dtype_name  # noqa: F401  (used below; other ops import it from core.dtypes)
from varlens.core.tensor import Tensor
from varlens.ops._args import _T
from varlens.ops._args import _float
from varlens.ops._args import _arr
from varlens.ops._args import _tensor
from collections import namedtuple


_PY = (float, int, bool)
_ndarray = _np.ndarray
_KS_MIN = _KS.MIN_SIZE
_F64 = _np.dtype("float64")
_CAT = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


def _promote(a, b, true_div=False):
    """Cast operands so a binary op's result dtype follows PyTorch, not NumPy.

    They differ where integers meet floats: NumPy gives float64 for int64 * 2.5,
    float32 * int64 and int / int; PyTorch keeps the float tensor's dtype (or the
    default float dtype for Python floats and true division), and a 0-d tensor
    defers to a dimensioned one of the same kind.  Same-dtype tensors and float
    tensors with Python numbers (the hot path) return at once.
    """
    T = _F.Tensor
    if isinstance(a, T):
        da = a._data.dtype
        if isinstance(b, T):
            db = b._data.dtype
            if da is db or da == db:
                if true_div and da.kind != "f":
                    f = get_default_dtype()
                    return cast(a, f), cast(b, f)
                return a, b
            ka, kb = _CAT[da.kind], _CAT[db.kind]
            if ka == kb:
                na, nb = a._data.ndim, b._data.ndim
                if na == 0 and nb:
                    a = cast(a, db)
                elif nb == 0 and na:
                    b = cast(b, da)
            elif ka >= 2 and kb < 2:
                b = cast(b, da)
            elif kb >= 2 and ka < 2:
                a = cast(a, db)
            if true_div and a.dtype.kind != "f" and b.dtype.kind != "f":
                f = get_default_dtype()
                return cast(a, f), cast(b, f)
            return a, b
        if type(b) not in _PY:
            b = _scalarize(b)
            if b is None or isinstance(b, (str, bytes, dict, set)):
                _bad_operand(a, b)
        if da.kind == "f":
            return a, b
        if (true_div or isinstance(b, float)) and da.kind in "biu":
            return cast(a, get_default_dtype()), b
        if da.kind == "b" and b.__class__ is int:
            return cast(a, _np.int64), b  # bool tensor with a Python int: int64, as PyTorch
        return a, b
    if type(a) not in _PY:
        a = _scalarize(a)
        if a is None or isinstance(a, (str, bytes, dict, set)):
            _bad_operand(b, a)
    if isinstance(b, T):
        db = b._data.dtype
        if db.kind != "f" and (true_div or isinstance(a, float)) and db.kind in "biu":
            return a, cast(b, get_default_dtype())
        if db.kind == "b" and a.__class__ is int:
            return a, cast(b, _np.int64)
    return a, b


def type_name(v):
    """A value's type as torch's argument errors print it: 'list', 'numpy.ndarray'."""
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__name__}"


def not_tensor(v, op, arg="input"):
    """torch's TypeError for a non-Tensor where a Tensor is required (called from an except branch)."""
    raise TypeError(f"{op}(): argument '{arg}' (position 1) must be Tensor, not {type_name(v)}") from None


def _bad_operand(t, v):
    raise TypeError(f"unsupported operand type(s) for a Tensor operation: 'Tensor' and '{type(v).__name__}' "
                    f"({v!r}); expected a Tensor or a number")


def _scalarize(v):
    """NumPy scalars behave like Python numbers (weakly typed), as in PyTorch."""
    if type(v).__module__ == "numpy" and hasattr(v, "item") and getattr(v, "ndim", 1) == 0:
        return v.item()
    return v


def _fl(x):
    """Input of a float-only op (exp, log, sqrt, ...): an integer or bool tensor becomes the
    default float dtype (float32), as PyTorch, instead of NumPy's float64/float16 or a
    truncated integer."""
    d = getattr(x, "_data", None)
    if d is not None and d.dtype.kind in "biu":
        return Cast.apply(x, get_default_dtype())
    return x


def _float_only(x, kernel):
    """Refuse an integer or bool tensor where PyTorch has no integer kernel (gelu, softmax, ...)."""
    d = getattr(x, "_data", None)
    if d is not None and d.dtype.kind in "biu":
        raise NotImplementedError(
            f'"{kernel}" not implemented for \'{torch_dtype_name(d.dtype)}\': it needs a floating-point '
            f"tensor, got dtype {d.dtype}; convert the input with .float() first")
    return x


_NEG_BOOL = ("Negation, the `-` operator, on a bool tensor is not supported. If you are trying to "
             "invert a mask, use the `~` or `logical_not()` operator instead.")
_SUB_BOOL = ("Subtraction, the `-` operator, with a bool tensor is not supported. If you are trying "
             "to invert a mask, use the `~` or `logical_not()` operator instead.")
_SUB_BOOL2 = ("Subtraction, the `-` operator, with two bool tensors is not supported. Use the `^` or "
              "`logical_xor()` operator instead.")


def _is_bool(v):
    d = getattr(v, "_data", None)
    if d is not None:
        return d.dtype.kind == "b"
    return v.__class__ is bool or getattr(v, "dtype", None) == bool


def _check_sub(a, b):
    """PyTorch refuses subtraction with a bool operand (tensor or Python bool)."""
    ba, bb = _is_bool(a), _is_bool(b)
    if ba or bb:
        raise RuntimeError(_SUB_BOOL2 if ba and bb else _SUB_BOOL)


# ---------------------------------------------------------------- arithmetic
class Add(Function):
    """out = a + b;  d/da = 1, d/db = 1."""

    def forward(self, a, b):
        if a.__class__ is _ndarray and a.size >= _KS_MIN and _KS.usable(a, b):
            out = _KS.binary(_KS.ADD, a, b)   # strided views (split pieces): one compiled pass
            if out is not None:
                return out
        return a + b

    def backward(self, g):
        return g, g


class Sub(Function):
    """out = a - b;  d/da = 1, d/db = -1."""

    def forward(self, a, b):
        if a.__class__ is _ndarray and a.size >= _KS_MIN and _KS.usable(a, b):
            out = _KS.binary(_KS.SUB, a, b)
            if out is not None:
                return out
        return a - b

    def backward(self, g):
        return g, (-g if self.next[1] is not None else None)


class Mul(Function):
    """out = a * b;  d/da = b, d/db = a (product rule)."""
    cross_saved = True

    def forward(self, a, b):
        self.save_for_backward(a, b)
        return _mul(a, b)

    def backward(self, g):
        a, b = self.saved
        n = self.next
        return (_mul(g, b) if n[0] is not None else None), (_mul(g, a) if n[1] is not None else None)


def _mul(a, b):
    """a * b; strided float32 views (split pieces, transposed gradients) in one compiled pass
    (ops/kernels/strided.py).  Arrays or Tensors (a create_graph backward): Tensors multiply
    as Tensors."""
    if a.__class__ is _ndarray and a.size >= _KS_MIN and _KS.usable(a, b):
        out = _KS.binary(_KS.MUL, a, b)
        if out is not None:
            return out
    return a * b


class Div(Function):
    """out = a / b;  d/da = 1/b, d/db = -a/b^2."""

    def forward(self, a, b):
        self.save_for_backward(a, b)
        return a / b

    def backward(self, g):
        a, b = self.saved
        n = self.next
        ga = g / b if n[0] is not None else None
        gb = -g * a / (b * b) if n[1] is not None else None
        return ga, gb


class Neg(Function):
    """out = -x;  d/dx = -1."""

    def forward(self, x):
        return -x

    def backward(self, g):
        return -g


class Pow(Function):
    """out = x ** e;  d/dx = e x^(e-1);  d/de = x^e log x (exponent a tensor)."""

    def forward(self, x, e):
        self.save_for_backward(x, e)
        if e.__class__ is int and e < 0 and getattr(x, "dtype", _F64).kind in "iub":
            raise RuntimeError("Integers to negative integer powers are not allowed "
                               f"(pow: base of dtype {x.dtype}, exponent {e}); use a float base")
        if x.__class__ is _np.ndarray and x.dtype.kind == "f" and _KP.small_power(e):
            return _KP.int_power(x, _KP.small_power(e))  # x*x*x, not powf per element
        try:
            out = x ** e
        except ValueError:  # NumPy refuses negative integer exponents held in a tensor
            out = _int_pow_negative(x, e)
        if out.dtype.kind == "i" and _kind(x) == "b" and _kind(e) == "b":
            if e.__class__ is bool:
                return out.astype(bool)  # bool tensor ** True/False stays bool (PyTorch)
            raise NotImplementedError('"pow" not implemented for \'Bool\' (base and exponent are bool '
                                      "tensors); convert them with .long() first")
        return out

    def backward(self, g):
        x, e = self.saved
        n = self.next
        gx = ge = None
        if n[0] is not None:
            if g.__class__ is _np.ndarray and x.__class__ is _np.ndarray and x.dtype.kind == "f" \
                    and _KP.small_power(e):
                gx = _KP.int_power_grad(g, x, _KP.small_power(e))  # g e x^(e-1) by multiplies
            else:
                if isinstance(e, (int, float)):
                    gx = g * e * x ** (e - 1) if e != 0 else g * 0
                else:   # e = 0 gives 0, as PyTorch, not 0 * x^-1 = 0 * inf at x = 0
                    gx = D.where(e == 0, 0.0, g * e * x ** (e - 1))
        if n[1] is not None:
            # d/de x^e = x^e log x.  As PyTorch: 0 where x == 0, NaN where x < 0 (log of a
            # negative).  log is taken of a safe value at 0 so second derivatives stay finite.
            if isinstance(x, (int, float)):
                ge = g * (x ** e) * math.log(x) if x > 0 else (g * 0 if x == 0 else g * math.nan)
            else:
                zero = x == 0
                ge = D.where(zero, 0.0, g * (x ** e) * D.log(D.where(zero, 1.0, x)))
        return gx, ge


def _int_pow_negative(x, e):
    """Integer power with some negative integer exponents, as PyTorch: x^e truncated towards 0,
    i.e. 1 for x = 1, +-1 for x = -1, 0 otherwise (x = 0 gives 0 here; PyTorch's value is
    platform-dependent there)."""
    xp = B.namespace(x, e)
    x = xp.asarray(x) if hasattr(x, "dtype") else xp.asarray(x, dtype=e.dtype)  # 2 ** int32 is int32
    e = xp.asarray(e) if hasattr(e, "dtype") else xp.asarray(e, dtype=x.dtype)
    neg = e < 0
    out = x ** xp.where(neg, 0, e)
    odd = (e % 2) != 0
    tiny = xp.where(x == 1, 1, xp.where(x == -1, xp.where(odd, -1, 1), 0)).astype(out.dtype)
    return xp.where(neg, tiny, out)


class Exp(Function):
    """out = e^x;  d/dx = e^x = out."""

    def forward(self, x):
        y = self.xp.exp(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return g * self.saved[0]


class Log(Function):
    """out = ln x;  d/dx = 1/x."""

    def forward(self, x):
        self.save_for_backward(x)
        return self.xp.log(x)

    def backward(self, g):
        return g / self.saved[0]


class Log1p(Function):
    """out = ln(1 + x), accurate for small x;  d/dx = 1/(1 + x)."""

    def forward(self, x):
        self.save_for_backward(x)
        return self.xp.log1p(x)

    def backward(self, g):
        return g / (1 + self.saved[0])


class Expm1(Function):
    """out = e^x - 1, accurate for small x;  d/dx = e^x = out + 1."""

    def forward(self, x):
        y = self.xp.expm1(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return g * (self.saved[0] + 1)


class Exp2(Function):
    """out = 2^x;  d/dx = 2^x ln 2 = out ln 2."""

    def forward(self, x):
        y = self.xp.exp2(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return g * self.saved[0] * math.log(2.0)


class Sqrt(Function):
    """out = sqrt(x);  d/dx = 1 / (2 sqrt(x))."""

    def forward(self, x):
        y = self.xp.sqrt(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return g / (2 * self.saved[0])


class Abs(Function):
    """out = |x|;  d/dx = sign(x) (0 at 0, as PyTorch)."""

    def forward(self, x):
        self.save_for_backward(x)
        return self.xp.abs(x)

    def backward(self, g):
        return g * D.sign(self.saved[0])


class Sign(Function):
    """out = sign(x); derivative 0 almost everywhere."""

    def forward(self, x):
        return self.xp.sign(x)

    def backward(self, g):
        return g * 0


class Sin(Function):
    """out = sin x;  d/dx = cos x."""

    def forward(self, x):
        self.save_for_backward(x)
        return self.xp.sin(x)

    def backward(self, g):
        return g * D.cos(self.saved[0])


class Cos(Function):
    """out = cos x;  d/dx = -sin x."""

    def forward(self, x):
        self.save_for_backward(x)
        return self.xp.cos(x)

    def backward(self, g):
        return -g * D.sin(self.saved[0])


class Erf(Function):
    """out = erf x;  d/dx = 2/sqrt(pi) exp(-x^2)."""

    def forward(self, x):
        self.save_for_backward(x)
        return _erf_array(x).astype(x.dtype, copy=False)

    def backward(self, g):
        x = self.saved[0]
        return g * (2.0 / math.sqrt(math.pi)) * D.exp(-(x * x))


def _kind(v):
    """dtype kind of an array or a Python number ('b', 'i', 'f', ...)."""
    d = getattr(v, "dtype", None)
    if d is not None:
        return d.kind
    return "b" if v.__class__ is bool else "i" if v.__class__ is int else "f"


def _int_zero_div(a, b, op):
    """Integer division by zero: PyTorch raises where NumPy returns 0 with a warning.
    Two bool operands: PyTorch has no kernel for these ops.  The zero check reads values, so it
    runs for host divisors only (on CUDA PyTorch gives an unspecified value without a check)."""
    if _kind(b) == "b" and _kind(a) == "b":
        raise NotImplementedError(f'"{op}" not implemented for \'Bool\' (both operands are bool tensors); '
                                  "convert them with .long() first")
    if B.is_device_array(b):
        return
    if not _np.all(b):
        raise RuntimeError(f"ZeroDivisionError: {op} of an integer tensor by zero")


class _Modulo(Function):
    """out = a - b q with q = a/b rounded (down for remainder, toward zero for fmod);  d/da = 1,
    d/db = -q.  q is piecewise constant, so it is kept as a constant array (as PyTorch)."""

    op_name = ""

    def forward(self, a, b):
        self.a, self.b = a, b
        if _kind(b) in "iub" and _kind(a) in "iub":
            _int_zero_div(a, b, self.op_name)
        return self.fwd(self.xp, a, b)

    def backward(self, g):
        n = self.next
        gb = None
        if n[1] is not None:
            gb = -g * self.quotient(self.xp, self.a, self.b, g)
        return (g if n[0] is not None else None), gb


class Remainder(_Modulo):
    """out = a - b floor(a/b) (the sign of b, as Python's %);  d/db = -floor(a/b)."""

    op_name = "remainder"

    @staticmethod
    def fwd(xp, a, b):
        return xp.remainder(a, b)

    @staticmethod
    def quotient(xp, a, b, g):
        return xp.floor_divide(a, b)


class Fmod(_Modulo):
    """out = a - b trunc(a/b) (the sign of a, C's fmod);  d/db = -trunc(a/b)."""

    op_name = "fmod"

    @staticmethod
    def fwd(xp, a, b):
        return xp.fmod(a, b)

    @staticmethod
    def quotient(xp, a, b, g):
        q = xp.trunc(xp.true_divide(a, b))
        return q.astype(getattr(g, "dtype", q.dtype), copy=False)


class FloorDivide(Function):
    """out = floor(a / b).  PyTorch records this op but has no derivative for it: backward raises."""

    def forward(self, a, b):
        if _kind(b) in "iub" and _kind(a) in "iub":
            _int_zero_div(a, b, "floor_divide")
        return self.xp.floor_divide(a, b)

    def backward(self, g):
        raise RuntimeError("derivative for aten::floor_divide is not implemented "
                           "(use torch.div(a, b, rounding_mode='floor'), whose gradient is 0)")


class DivRound(Function):
    """out = floor(a / b) or trunc(a / b) (div's rounding_mode): piecewise constant, so the
    gradient is 0 for both inputs (as PyTorch)."""

    def forward(self, a, b, mode):
        xp = self.xp
        if _kind(b) in "iub" and _kind(a) in "iub":
            _int_zero_div(a, b, "div")
            if mode == "floor":
                return xp.floor_divide(a, b)
            q = xp.floor_divide(a, b)  # trunc: round towards zero
            q += (q < 0) & (q * b != a)
            return q
        return xp.floor(a / b) if mode == "floor" else xp.trunc(a / b)

    def backward(self, g):
        n = self.next
        z = g * 0
        return (z if n[0] is not None else None), (z if n[1] is not None else None), None


class Erfc(Function):
    """out = erfc x = 1 - erf x, accurate in the right tail;  d/dx = -2/sqrt(pi) exp(-x^2)."""

    def forward(self, x):
        self.save_for_backward(x)
        return B.special(self.xp).erfc(x).astype(x.dtype, copy=False)

    def backward(self, g):
        x = self.saved[0]
        return g * (-2.0 / math.sqrt(math.pi)) * D.exp(-(x * x))


# ---------------------------------------------------------------- activations
class Tanh(Function):
    """out = tanh x;  d/dx = 1 - tanh^2 x (seed 003 §1.4.2)."""

    def forward(self, x):
        y = self.xp.tanh(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        y = self.saved[0]
        if g.__class__ is _np.ndarray:
            return _KP.tanh_grad(g, y)  # one compiled pass for float32
        return g * (1 - y * y)


class Sigmoid(Function):
    """out = s(x) = 1/(1+e^-x);  d/dx = s(x)(1 - s(x)) (seed 003 §1.4.2)."""

    def forward(self, x):
        y = D._sigmoid_array(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        y = self.saved[0]
        return g * y * (1 - y)


class Clamp(Function):
    """out = min(max(x, lo), hi);  d/dx = 1 inside [lo, hi] (inclusive, as PyTorch), else 0."""

    def forward(self, x, lo=None, hi=None):
        if lo is None and hi is None:
            raise RuntimeError("clamp: at least one of min and max must be given (both were None)")
        xp = self.xp
        mask = xp.ones(x.shape, dtype=bool)
        if lo is not None:
            mask &= x >= lo
        if hi is not None:
            mask &= x <= hi
        self.mask = mask
        return xp.clip(x, lo, hi)

    def backward(self, g):
        return g * self.mask


class ClampBounds(Function):
    """out = min(max(x, lo), hi) with a Tensor bound (the other a number, a Tensor or None),
    broadcast.  As PyTorch: d/dx = 1{lo <= x <= hi};  d/dlo = 1{x < lo}, only where lo <= hi;
    d/dhi = 1{max(x, lo) > hi} (where lo > hi the output is hi, so hi takes the gradient)."""

    def forward(self, x, lo, hi):
        xp = self.xp
        y = x if lo is None else xp.maximum(x, lo)
        keep = None if lo is None else x >= lo
        if hi is not None:
            keep = x <= hi if keep is None else keep & (x <= hi)
        self.mx = keep
        self.mlo = None if lo is None else (x < lo) if hi is None else (x < lo) & (lo <= hi)
        self.mhi = None if hi is None else y > hi
        return y if hi is None else xp.minimum(y, hi)

    def backward(self, g):
        n = self.next
        return (g * self.mx if n[0] is not None else None,
                g * self.mlo if n[1] is not None else None,
                g * self.mhi if n[2] is not None else None)


class Maximum(Function):
    """out = max(a, b);  the gradient goes to the larger input, split in half at ties (as PyTorch)."""

    def forward(self, a, b):
        out = self.xp.maximum(a, b)
        self.wa = ((a > b) + 0.5 * (a == b)).astype(out.dtype, copy=False)
        return out

    def backward(self, g):
        return g * self.wa, g * (1 - self.wa)


class Minimum(Function):
    """out = min(a, b);  the gradient goes to the smaller input, split in half at ties."""

    def forward(self, a, b):
        out = self.xp.minimum(a, b)
        self.wa = ((a < b) + 0.5 * (a == b)).astype(out.dtype, copy=False)
        return out

    def backward(self, g):
        return g * self.wa, g * (1 - self.wa)


class Where(Function):
    """out = cond ? a : b;  d/da = 1{cond}, d/db = 1{not cond}."""

    def forward(self, cond, a, b):
        self.cond = cond
        return self.xp.where(cond, a, b)

    def backward(self, g):
        c = self.cond
        n = self.next
        ga = D.where(c, g, 0.0) if n[1] is not None else None
        gb = D.where(c, 0.0, g) if n[2] is not None else None
        return None, ga, gb


class Cast(Function):
    """out = x converted to another dtype;  the gradient is cast back (by the engine)."""

    def forward(self, x, dtype):
        self.in_dtype = x.dtype
        return x.astype(dtype)

    def backward(self, g):
        if self.in_dtype.kind not in "fc":
            return None
        return g


# ---------------------------------------------------------------- functional wrappers
@torch_args(tensor_first=True)
def add(a, b, *, alpha=1):
    if alpha != 1:
        b = mul(b, alpha)
    return Add.apply(*_promote(a, b))


_Tensor = _F.Tensor


def _add(a, b):
    if b.__class__ is _Tensor and a._data.dtype is b._data.dtype:   # x + y of one dtype: nothing to promote
        return Add.apply(a, b)
    return Add.apply(*_promote(a, b))


def _sub(a, b):
    if a._data.dtype.kind == "b" or b.__class__ is bool or (isinstance(b, _F.Tensor) and b._data.dtype.kind == "b"):
        _check_sub(a, b)
    return Sub.apply(*_promote(a, b))


@torch_args(tensor_first=True)
def sub(a, b, *, alpha=1):
    _check_sub(a, b)
    if alpha != 1:
        b = mul(b, alpha)
    return Sub.apply(*_promote(a, b))


@torch_args(tensor_first=True)
def rsub(a, b):
    _check_sub(b, a)
    return Sub.apply(*_promote(b, a))


@torch_args(tensor_first=True)
def mul(a, b):
    if b.__class__ is _Tensor and a.__class__ is _Tensor and a._data.dtype is b._data.dtype:
        return Mul.apply(a, b)
    return Mul.apply(*_promote(a, b))


@torch_args(tensor_first=True)
def div(a, b, *, rounding_mode=None):
    if rounding_mode is not None:
        if rounding_mode not in ("floor", "trunc"):
            raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        return DivRound.apply(*_promote(a, b), rounding_mode)
    return Div.apply(*_promote(a, b, True))


@torch_args(tensor_first=True)
def remainder(a, b):
    """a % b with the sign of b (Python's %), dtype promoted as PyTorch; differentiable."""
    return Remainder.apply(*_promote(_scalarize(a), _scalarize(b)))


@torch_args(tensor_first=True)
def fmod(a, b):
    """C's fmod: the remainder with the sign of a; fmod(int_tensor, 2) stays an integer tensor."""
    return Fmod.apply(*_promote(_scalarize(a), _scalarize(b)))


@torch_args(tensor_first=True)
def floor_divide(a, b):
    """floor(a / b), dtype promoted as PyTorch; recorded but not differentiable (as PyTorch)."""
    return FloorDivide.apply(*_promote(_scalarize(a), _scalarize(b)))


def rremainder(a, b):
    return remainder(b, a)


def rfloor_divide(a, b):
    return floor_divide(b, a)


def rdiv(a, b):
    return Div.apply(*_promote(b, a, True))


@torch_args(tensor_first=True)
def neg(x):
    if x._data.dtype.kind == "b":
        raise RuntimeError(_NEG_BOOL)
    return Neg.apply(x)


@torch_args(tensor_first=True)
def pow(x, e):  # noqa: A001
    return Pow.apply(*_promote(x, e))


def rpow(x, b):
    return Pow.apply(*_promote(b, x))


@torch_args(tensor_first=True)
def exp(x):
    return Exp.apply(_fl(x))


@torch_args(tensor_first=True)
def log(x):
    return Log.apply(_fl(x))


@torch_args(tensor_first=True)
def sqrt(x):
    return Sqrt.apply(_fl(x))


@torch_args(tensor_first=True)
def log1p(x):
    return Log1p.apply(_fl(x))


@torch_args(tensor_first=True)
def expm1(x):
    return Expm1.apply(_fl(x))


@torch_args(tensor_first=True)
def exp2(x):
    return Exp2.apply(_fl(x))


@torch_args(tensor_first=True)
def rsqrt(x):
    return Pow.apply(_fl(x), -0.5)


@torch_args(tensor_first=True)
def square(x):
    if x._data.dtype.kind == "b":
        return pow(x, 2)  # bool squared is int64 in PyTorch
    return Mul.apply(x, x)


@torch_args(tensor_first=True)
def abs(x):  # noqa: A001
    if x._data.dtype.kind == "b":
        _float_only(x, "abs")  # PyTorch has no bool abs either
    return Abs.apply(x)


@torch_args(tensor_first=True)
def sign(x):
    if x._data.dtype.kind == "b":
        return clone(x)  # sign of a bool tensor is itself (NumPy has no bool sign)
    return Sign.apply(x)


@torch_args(tensor_first=True)
def sin(x):
    return Sin.apply(_fl(x))


@torch_args(tensor_first=True)
def cos(x):
    return Cos.apply(_fl(x))


@torch_args(tensor_first=True)
def erf(x):
    return Erf.apply(_fl(x))


@torch_args(tensor_first=True)
def erfc(x):
    return Erfc.apply(_fl(x))


@torch_args(tensor_first=True)
def tanh(x):
    return Tanh.apply(_fl(x))


@torch_args(tensor_first=True)
def sigmoid(x):
    return Sigmoid.apply(_fl(x))


@torch_args(tensor_first=True)
def clamp(x, min=None, max=None):  # noqa: A002
    T = _F.Tensor
    if isinstance(min, T) or isinstance(max, T):
        # Tensor bounds (never read on the host): gradients reach the bounds, as in PyTorch;
        # dtypes promoted as PyTorch (a 0-d bound defers to x of the same kind)
        if min is not None:
            x, min = _promote(x, _scalarize(min))
        if max is not None:
            x, max = _promote(x, _scalarize(max))
        return ClampBounds.apply(x, min, max)
    lo = min.item() if hasattr(min, "item") and not isinstance(min, (int, float)) else min
    hi = max.item() if hasattr(max, "item") and not isinstance(max, (int, float)) else max
    if isinstance(lo, (str, bytes)) or isinstance(hi, (str, bytes)):
        bad, name = (lo, "min") if isinstance(lo, (str, bytes)) else (hi, "max")
        raise TypeError(f"clamp(): argument '{name}' must be a number or a Tensor, not {type(bad).__name__} "
                        f"({bad!r})")
    if (lo.__class__ is float or hi.__class__ is float) and x._data.dtype.kind in "biu":
        x = cast(x, get_default_dtype())  # an integer tensor clamped to float bounds is float32
    return Clamp.apply(x, lo, hi)


@torch_args(tensor_first=True)
def maximum(a, b):
    return Maximum.apply(*_promote(a, b))


@torch_args(tensor_first=True)
def minimum(a, b):
    return Minimum.apply(*_promote(a, b))


@torch_args(tensor_first=True, first="condition", names=("condition", "input", "other"))
def where(cond, a=None, b=None):
    """where(cond, a, b) picks elementwise; where(cond) alone is nonzero(cond, as_tuple=True)."""
    if a is None and b is None:
        return cond.nonzero(as_tuple=True)  # Tensor.nonzero (ops/index.py), through the method table
    c = cond._data if isinstance(cond, Tensor) else cond if B.is_array(cond) else _np.asarray(cond)
    if c.dtype != bool:
        raise RuntimeError(f"where: condition must be a bool tensor, got dtype {c.dtype} (torch: where expected "
                           f"condition to be a boolean tensor); compare first, e.g. x > 0")
    a, b = _promote(_scalarize(a), _scalarize(b))
    out = Where.apply(c, a, b)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor) and out.dtype.kind == "f":
        out = cast(out, get_default_dtype())  # where(c, 1.0, 0.0) is float32, as in PyTorch
    return out


def cast(x, dtype):
    dt = _np.dtype(dtype)
    if dt.kind not in "fc":
        # integer and bool tensors never require grad (as in PyTorch): x.long() leaves the graph
        data = x._data if isinstance(x, Tensor) else _np.asarray(x)
        return Tensor._make(data if data.dtype == dt else data.astype(dt))
    return Cast.apply(x, dtype)


@torch_args(tensor_first=True)
def clone(x):
    return Clone.apply(x)


class _Step(Function):
    """A piecewise-constant map (floor, ceil, round, trunc): derivative 0 almost everywhere,
    so backward returns zeros (as PyTorch, which keeps these ops differentiable)."""

    fn = ""   # the name of the array library's function

    def forward(self, x, *args):
        if x.dtype.kind in "biu":
            if x.dtype.kind == "b":
                raise NotImplementedError(f'"{type(self).__name__.lower()}" not implemented for \'Bool\' '
                                          "(a bool tensor); convert it with .float() or .long() first")
            return x.copy()
        return getattr(self.xp, self.fn)(x, *args)

    def backward(self, g):
        return g * 0


class Floor(_Step):
    fn = "floor"


class Ceil(_Step):
    fn = "ceil"


class Round(_Step):
    fn = "round"


class Trunc(_Step):
    fn = "trunc"


@torch_args(tensor_first=True)
def floor(x):
    return Floor.apply(x)


@torch_args(tensor_first=True)
def ceil(x):
    return Ceil.apply(x)


@torch_args(tensor_first=True)
def round(x, *, decimals=0):  # noqa: A001
    return Round.apply(x) if decimals == 0 else Round.apply(x, decimals)


@torch_args(tensor_first=True)
def trunc(x):
    return Trunc.apply(x)


# PyTorch's other names for the same functions
clip = clamp
multiply = mul
subtract = sub
divide = div
true_divide = div
negative = neg
absolute = abs


@torch_args(tensor_first=True)
def log2(x):
    return div(log(x), 0.6931471805599453)


@torch_args(tensor_first=True)
def log10(x):
    return div(log(x), 2.302585092994046)


@torch_args(tensor_first=True)
def reciprocal(x):
    return rdiv(x, 1.0)


@torch_args(tensor_first=True)
def lerp(a, b, w):
    return add(a, mul(sub(b, a), w))


# ---------------------------------------------------------------- Functions (no primitive to compose)
class _Elementary(Function):
    """y = fn(x) for an array library's ufunc (``fn`` its name); ``grad(g, x)`` gives the gradient
    from the saved input.  It is written with Python operators and varlens.core.primitives, so it
    is differentiable again."""

    fn = ""

    def forward(self, x):
        self.save_for_backward(x)
        return getattr(self.xp, self.fn)(x)

    def backward(self, g):
        (x,) = self.saved
        return self.grad(g, x)


def _elementary(name, fn, grad, doc):
    """A Function class named ``name``: forward ``xp.<fn>(x)``, backward ``grad(g, x)``."""
    return type(name, (_Elementary,), {"fn": fn, "grad": staticmethod(grad), "__doc__": doc})


Atan = _elementary("Atan", "arctan", lambda g, x: g / (1 + x * x), "d atan(x)/dx = 1 / (1 + x^2).")


Asin = _elementary("Asin", "arcsin", lambda g, x: g / D.sqrt(1 - x * x), "d asin(x)/dx = 1 / sqrt(1 - x^2).")


Acos = _elementary("Acos", "arccos", lambda g, x: -g / D.sqrt(1 - x * x), "d acos(x)/dx = -1 / sqrt(1 - x^2).")


class Atan2(Function):
    """atan2(y, x): d/dy = x / (x^2 + y^2), d/dx = -y / (x^2 + y^2)."""

    def forward(self, y, x):
        self.save_for_backward(y, x)
        return self.xp.arctan2(y, x)

    def backward(self, g):
        """As above, and 0 at y = x = 0 (PyTorch's value there) instead of 0 / 0."""
        y, x = self.saved
        r2 = x * x + y * y
        zero = r2 == 0
        inv = D.where(zero, 0.0, 1.0 / D.where(zero, 1.0, r2))
        return g * x * inv, -g * y * inv


@torch_args(tensor_first=True)
def atan(x):
    return Atan.apply(_float(x))


arctan = atan


@torch_args(tensor_first=True)
def asin(x):
    return Asin.apply(_float(x))


arcsin = asin


@torch_args(tensor_first=True)
def acos(x):
    return Acos.apply(_float(x))


arccos = acos


@torch_args(tensor_first=True)
def atan2(input, other):
    y, x = _promote(_T(input), _T(other, input))  # PyTorch's promotion first: int32 with float16 is float16
    return Atan2.apply(_float(y), _float(x))


arctan2 = atan2


# ---------------------------------------------------------------- composed elementwise
@torch_args(tensor_first=True)
def tan(x):
    return sin(x) / cos(x)


@torch_args(tensor_first=True)
def sinh(x):
    x = _float(x)
    return (exp(x) - exp(-x)) * 0.5


@torch_args(tensor_first=True)
def cosh(x):
    x = _float(x)
    return (exp(x) + exp(-x)) * 0.5


@torch_args(tensor_first=True)
def hypot(input, other):
    return sqrt(input * input + other * other)


@torch_args(tensor_first=True)
def logaddexp(input, other):
    """log(e^a + e^b) = m + log(e^(a-m) + e^(b-m)), m = max(a, b) (no overflow)."""
    other = _T(other, input)
    m = maximum(input, other).detach()
    return m + log(exp(input - m) + exp(other - m))


@torch_args(tensor_first=True)
def deg2rad(x):
    return x * (math.pi / 180.0)


@torch_args(tensor_first=True)
def rad2deg(x):
    return x * (180.0 / math.pi)


@torch_args(tensor_first=True)
def copysign(input, other):
    o = other._data if isinstance(other, Tensor) else _np.asarray(other)
    neg = Tensor._make(B.namespace(o).signbit(o))
    a = abs(input)
    return where(neg, -a, a)


@torch_args(tensor_first=True)
def signbit(x):
    return Tensor._make(B.namespace(x._data).signbit(x._data))


@torch_args(tensor_first=True)
def heaviside(input, values):
    v = values._data if isinstance(values, Tensor) else values
    xp = B.namespace(input._data, v)
    return Tensor._make(xp.heaviside(input._data, v).astype(input._data.dtype))


@torch_args(tensor_first=True)
def clamp_min(input, min):  # noqa: A002
    return clamp(input, min, None)


@torch_args(tensor_first=True)
def clamp_max(input, max):  # noqa: A002
    return clamp(input, None, max)


@torch_args(tensor_first=True)
def frac(x):
    _float_only(x, "frac")  # no integer frac in PyTorch either
    return x - trunc(x)


@torch_args(tensor_first=True)
def logit(x, eps=None):
    x = _fl(x)  # bool/integer input: float32, as PyTorch
    if eps is not None:
        x = clamp(x, eps, 1 - eps)
    return log(x / (1 - x))


class NanToNum(Function):
    """out = x where finite, else ``nan`` / ``posinf`` / ``neginf`` (None: the dtype's largest or
    lowest value);  d/dx = 1{x finite} (the replaced entries are constants)."""

    def forward(self, x, nan, posinf, neginf):
        xp = self.xp
        self.finite = xp.isfinite(x)
        return xp.nan_to_num(x, nan=nan, posinf=posinf, neginf=neginf)

    def backward(self, g):
        return g * self.finite


@torch_args(tensor_first=True)
def nan_to_num(x, nan=0.0, posinf=None, neginf=None):
    """NaN -> ``nan``, +Inf -> ``posinf`` (default: the dtype's largest), -Inf -> ``neginf``;
    the gradient flows through the entries that were finite.  Integer and bool tensors come
    back as a copy."""
    if x._data.dtype.kind != "f":
        return clone(x)
    return NanToNum.apply(x, nan, posinf, neginf)


class Sinc(Function):
    """sinc(x) = sin(pi x)/(pi x), 1 at 0.  d/dx = (cos(pi x) - sinc(x)) / x, 0 at x = 0."""

    def forward(self, x):
        self.save_for_backward(x)
        return self.xp.sinc(x)

    def backward(self, g):
        (x,) = self.saved
        zero = x == 0
        xs = D.where(zero, 1.0, x)  # a safe stand-in at 0, so no 0/0 reaches either branch
        px = xs * math.pi
        return D.where(zero, 0.0, g * ((D.cos(px) - D.sin(px) / px) / xs))


Asinh = _elementary("Asinh", "arcsinh", lambda g, x: g / D.sqrt(x * x + 1), "d asinh(x)/dx = 1 / sqrt(x^2 + 1).")


Acosh = _elementary("Acosh", "arccosh", lambda g, x: g / D.sqrt(x * x - 1),
                    "d acosh(x)/dx = 1 / sqrt(x^2 - 1) (x > 1).")


Atanh = _elementary("Atanh", "arctanh", lambda g, x: g / (1 - x * x), "d atanh(x)/dx = 1 / (1 - x^2) (|x| < 1).")


@torch_args(tensor_first=True)
def sinc(input):  # noqa: A002
    return Sinc.apply(_float(_tensor(input, "sinc: input")))


@torch_args(tensor_first=True)
def asinh(input):  # noqa: A002
    return Asinh.apply(_float(_tensor(input, "asinh: input")))


@torch_args(tensor_first=True)
def acosh(input):  # noqa: A002
    return Acosh.apply(_float(_tensor(input, "acosh: input")))


@torch_args(tensor_first=True)
def atanh(input):  # noqa: A002
    return Atanh.apply(_float(_tensor(input, "atanh: input")))


@torch_args(tensor_first=True)
def addcmul(input, tensor1, tensor2, *, value=1):  # noqa: A002
    p = mul(tensor1, tensor2)
    return add(input, mul(p, value) if value != 1 else p)


@torch_args(tensor_first=True)
def addcdiv(input, tensor1, tensor2, *, value=1):  # noqa: A002
    t1 = tensor1
    if isinstance(t1, Tensor) and t1.dtype.kind != "f" and isinstance(tensor2, Tensor) and tensor2.dtype.kind != "f":
        raise RuntimeError("addcdiv: integer division with addcdiv is not supported; use floating point tensors")
    q = div(tensor1, tensor2)
    return add(input, mul(q, value) if value != 1 else q)


# ---------------------------------------------------------------- elementwise
@torch_args(tensor_first=True)
def float_power(input, exponent):  # noqa: A002
    """input ** exponent computed in float64 (either may be a number), as PyTorch."""
    f64 = _np.dtype("float64")
    a = cast(input, f64) if isinstance(input, Tensor) else float(input)
    b = cast(exponent, f64) if isinstance(exponent, Tensor) else float(exponent)
    if not isinstance(a, Tensor):
        if not isinstance(b, Tensor):
            raise TypeError("float_power: input or exponent must be a Tensor")
        return rpow(b, a)
    return pow(a, b)


@torch_args(tensor_first=True)
def nextafter(input, other):  # noqa: A002
    a, b = _tensor(input, "nextafter: input"), other
    bd = _arr(b)
    if a.dtype.kind != "f":
        raise RuntimeError(f"nextafter: expected floating point tensors, got input dtype {a.dtype}")
    xp = B.namespace(a._data, bd)
    return Tensor._make(xp.nextafter(a._data, bd.astype(a.dtype)).astype(a.dtype))


@torch_args(tensor_first=True)
def fmax(input, other):  # noqa: A002
    """Elementwise maximum that ignores a NaN on one side; the gradient goes to the chosen side
    (to input on ties), as PyTorch."""
    a, b = _promote(input, other)
    da, db = _arr(a), _arr(b)
    take_a = Tensor._make((da >= db) | B.namespace(da, db).isnan(db))
    return where(take_a, a, b)


@torch_args(tensor_first=True)
def fmin(input, other):  # noqa: A002
    a, b = _promote(input, other)
    da, db = _arr(a), _arr(b)
    take_a = Tensor._make((da <= db) | B.namespace(da, db).isnan(db))
    return where(take_a, a, b)


@torch_args(tensor_first=True)
def logaddexp2(input, other):  # noqa: A002
    ln2 = math.log(2.0)
    return div(logaddexp(mul(input, ln2), mul(other, ln2)), ln2)


@torch_args(tensor_first=True)
def ldexp(input, other):  # noqa: A002
    """input * 2**other (float result)."""
    x = _float(_tensor(input, "ldexp: input"))
    e = _arr(other)
    xp = B.namespace(x._data, e)
    return mul(x, Tensor._make(xp.ldexp(xp.ones((), dtype=x.dtype), e.astype(_np.int64)).astype(x.dtype)
                                 if e.dtype.kind in "iub" else xp.exp2(e).astype(x.dtype)))


_Frexp = namedtuple("frexp", ["mantissa", "exponent"])


@torch_args(tensor_first=True)
def frexp(input):  # noqa: A002
    x = _tensor(input, "frexp: input")
    if x.dtype.kind != "f":
        raise RuntimeError(f"frexp: expected a floating point tensor, got dtype {x.dtype}")
    m, e = B.namespace(x._data).frexp(x._data)
    return _Frexp(Tensor._make(m.astype(x.dtype)), Tensor._make(e.astype(_np.int32)))


@torch_args(tensor_first=True)
def sgn(input):  # noqa: A002
    return sign(input)


def _int_op(name, fn):
    @torch_args(tensor_first=True)
    def f(input, other):  # noqa: A002
        a, b = _arr(input), _arr(other)
        for nm, v in (("input", a), ("other", b)):
            if v.dtype.kind not in "iub":
                raise RuntimeError(f"{name}: expected integer tensors, got {nm} of dtype {v.dtype}")
        xp = B.namespace(a, b)
        r = xp.asarray(getattr(xp, fn)(a, b))
        return Tensor._make(r.astype(xp.result_type(a, b) if a.ndim or not b.ndim else a.dtype))
    f.__name__ = name
    return f


gcd = _int_op("gcd", "gcd")
lcm = _int_op("lcm", "lcm")
bitwise_left_shift = _int_op("bitwise_left_shift", "left_shift")
bitwise_right_shift = _int_op("bitwise_right_shift", "right_shift")


@torch_args(tensor_first=True)
def positive(input):  # noqa: A002
    x = _tensor(input, "positive: input")
    if x.dtype.kind == "b":
        raise RuntimeError("positive: not supported for bool tensors")
    return x
