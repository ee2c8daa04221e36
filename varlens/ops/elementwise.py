"""Elementwise ops: arithmetic, transcendental functions and activations.

Convention for every backward here: it returns dL/d(input) = dL/d(out) * d(out)/d(input)
elementwise (the chain rule of seed 003 §1.6 / seed 001 §3.1, one entry of the
Jacobian's diagonal at a time).  Broadcast inputs are reduced by the engine.
"""
from __future__ import annotations

import math

from varlens.core import function as _F
from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.dtypes import get_default_dtype
from varlens.core.array import xp
from varlens.core import primitives as D
from varlens.core.primitives import Clone
from varlens.ops.kernels import pointwise as _KP
from varlens.core.dtypes import torch_dtype_name  # noqa: F401  (used below; other ops import it from core.dtypes)


_PY = (float, int, bool)
_F64 = xp.dtype("float64")
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
            return cast(a, xp.int64), b  # bool tensor with a Python int: int64, as PyTorch
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
            return a, cast(b, xp.int64)
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
        return a + b

    def backward(self, g):
        return g, g


class Sub(Function):
    """out = a - b;  d/da = 1, d/db = -1."""

    def forward(self, a, b):
        return a - b

    def backward(self, g):
        return g, (-g if self.next[1] is not None else None)


class Mul(Function):
    """out = a * b;  d/da = b, d/db = a (product rule)."""

    def forward(self, a, b):
        self.save_for_backward(a, b)
        return a * b

    def backward(self, g):
        a, b = self.saved
        n = self.next
        return (g * b if n[0] is not None else None), (g * a if n[1] is not None else None)


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
        if x.__class__ is xp.ndarray and x.dtype.kind == "f" and _KP.small_power(e):
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
            if g.__class__ is xp.ndarray and x.__class__ is xp.ndarray and x.dtype.kind == "f" \
                    and _KP.small_power(e):
                gx = _KP.int_power_grad(g, x, _KP.small_power(e))  # g e x^(e-1) by multiplies
            else:
                gx = g * e * x ** (e - 1) if not isinstance(e, (int, float)) or e != 0 else g * 0
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
        y = xp.exp(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return g * self.saved[0]


class Log(Function):
    """out = ln x;  d/dx = 1/x."""

    def forward(self, x):
        self.save_for_backward(x)
        return xp.log(x)

    def backward(self, g):
        return g / self.saved[0]


class Log1p(Function):
    """out = ln(1 + x), accurate for small x;  d/dx = 1/(1 + x)."""

    def forward(self, x):
        self.save_for_backward(x)
        return xp.log1p(x)

    def backward(self, g):
        return g / (1 + self.saved[0])


class Expm1(Function):
    """out = e^x - 1, accurate for small x;  d/dx = e^x = out + 1."""

    def forward(self, x):
        y = xp.expm1(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return g * (self.saved[0] + 1)


class Exp2(Function):
    """out = 2^x;  d/dx = 2^x ln 2 = out ln 2."""

    def forward(self, x):
        y = xp.exp2(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return g * self.saved[0] * math.log(2.0)


class Sqrt(Function):
    """out = sqrt(x);  d/dx = 1 / (2 sqrt(x))."""

    def forward(self, x):
        y = xp.sqrt(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        return g / (2 * self.saved[0])


class Abs(Function):
    """out = |x|;  d/dx = sign(x) (0 at 0, as PyTorch)."""

    def forward(self, x):
        self.save_for_backward(x)
        return xp.abs(x)

    def backward(self, g):
        return g * D.sign(self.saved[0])


class Sign(Function):
    """out = sign(x); derivative 0 almost everywhere."""

    def forward(self, x):
        return xp.sign(x)

    def backward(self, g):
        return g * 0


class Sin(Function):
    """out = sin x;  d/dx = cos x."""

    def forward(self, x):
        self.save_for_backward(x)
        return xp.sin(x)

    def backward(self, g):
        return g * D.cos(self.saved[0])


class Cos(Function):
    """out = cos x;  d/dx = -sin x."""

    def forward(self, x):
        self.save_for_backward(x)
        return xp.cos(x)

    def backward(self, g):
        return -g * D.sin(self.saved[0])


class Erf(Function):
    """out = erf x;  d/dx = 2/sqrt(pi) exp(-x^2)."""

    def forward(self, x):
        from varlens.core.array import erf
        self.save_for_backward(x)
        return erf(x).astype(x.dtype, copy=False)

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
    Two bool operands: PyTorch has no kernel for these ops."""
    if _kind(b) == "b" and _kind(a) == "b":
        raise NotImplementedError(f'"{op}" not implemented for \'Bool\' (both operands are bool tensors); '
                                  "convert them with .long() first")
    if not xp.all(b):
        raise RuntimeError(f"ZeroDivisionError: {op} of an integer tensor by zero")


class _Modulo(Function):
    """out = a - b q with q = a/b rounded (down for remainder, toward zero for fmod);  d/da = 1,
    d/db = -q.  q is piecewise constant, so it is kept as a constant array (as PyTorch)."""

    op_name = ""

    def forward(self, a, b):
        self.a, self.b = a, b
        if _kind(b) in "iub" and _kind(a) in "iub":
            _int_zero_div(a, b, self.op_name)
        return self.fwd(a, b)

    def backward(self, g):
        n = self.next
        gb = None
        if n[1] is not None:
            gb = -g * self.quotient(self.a, self.b, g)
        return (g if n[0] is not None else None), gb


class Remainder(_Modulo):
    """out = a - b floor(a/b) (the sign of b, as Python's %);  d/db = -floor(a/b)."""

    op_name, fwd = "remainder", staticmethod(xp.remainder)

    @staticmethod
    def quotient(a, b, g):
        return xp.floor_divide(a, b)


class Fmod(_Modulo):
    """out = a - b trunc(a/b) (the sign of a, C's fmod);  d/db = -trunc(a/b)."""

    op_name, fwd = "fmod", staticmethod(xp.fmod)

    @staticmethod
    def quotient(a, b, g):
        q = xp.trunc(xp.true_divide(a, b))
        return q.astype(getattr(g, "dtype", q.dtype), copy=False)


class FloorDivide(Function):
    """out = floor(a / b).  PyTorch records this op but has no derivative for it: backward raises."""

    def forward(self, a, b):
        if _kind(b) in "iub" and _kind(a) in "iub":
            _int_zero_div(a, b, "floor_divide")
        return xp.floor_divide(a, b)

    def backward(self, g):
        raise RuntimeError("derivative for aten::floor_divide is not implemented "
                           "(use torch.div(a, b, rounding_mode='floor'), whose gradient is 0)")


class DivRound(Function):
    """out = floor(a / b) or trunc(a / b) (div's rounding_mode): piecewise constant, so the
    gradient is 0 for both inputs (as PyTorch)."""

    def forward(self, a, b, mode):
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
        from scipy.special import erfc as _erfc
        self.save_for_backward(x)
        return _erfc(x).astype(x.dtype, copy=False)

    def backward(self, g):
        x = self.saved[0]
        return g * (-2.0 / math.sqrt(math.pi)) * D.exp(-(x * x))


# ---------------------------------------------------------------- activations
class Tanh(Function):
    """out = tanh x;  d/dx = 1 - tanh^2 x (seed 003 §1.4.2)."""

    def forward(self, x):
        y = xp.tanh(x)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        y = self.saved[0]
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


class ReLU(Function):
    """out = max(x, 0);  d/dx = 1{x > 0} (0 at x = 0, as seed 001 §2.3 and PyTorch;
    seed 003 §1.6.4 takes 1 there, see docs/conventions.md)."""

    def forward(self, x):
        # against a cached array of zeros: NumPy's maximum with a scalar is not vectorised
        y = xp.maximum(x, B.zeros_cached(x.shape, x.dtype)) if x.size >= 256 else xp.maximum(x, 0)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        if g.__class__ is xp.ndarray:
            return _KP.relu_grad(g, self.saved[0])  # one compiled pass for float32
        return g * (self.saved[0] > 0)


class LeakyReLU(Function):
    """out = x if x > 0 else slope*x;  d/dx = 1 or slope."""

    def forward(self, x, slope=0.01):
        self.slope = slope
        self.save_for_backward(x)
        return xp.where(x > 0, x, x * slope)

    def backward(self, g):
        x = self.saved[0]
        return D.where(x > 0, g, g * self.slope)


class ELU(Function):
    """out = x if x > 0 else alpha (e^x - 1);  d/dx = 1 or alpha e^x."""

    def forward(self, x, alpha=1.0):
        self.alpha = alpha
        self.save_for_backward(x)
        return xp.where(x > 0, x, alpha * xp.expm1(xp.minimum(x, 0)))

    def backward(self, g):
        x = self.saved[0]
        return D.where(x > 0, g, g * self.alpha * D.exp(D.where(x > 0, 0.0, x)))


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


class GELU(Function):
    """Exact: out = x Phi(x), d/dx = Phi(x) + x phi(x).
    tanh: out = x/2 (1 + tanh(u)), u = sqrt(2/pi)(x + 0.044715 x^3),
    d/dx = (1 + tanh u)/2 + x/2 (1 - tanh^2 u) sqrt(2/pi)(1 + 3*0.044715 x^2)."""

    def forward(self, x, approximate="none"):
        if approximate not in ("none", "tanh"):
            raise ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
        self.approximate = approximate
        self.save_for_backward(x)
        if approximate == "tanh":
            c = _SQRT_2_OVER_PI
            u = xp.asarray(x * x)       # an array even for 0-d x (NumPy gives a scalar)
            u *= c * 0.044715
            u += c
            u *= x                      # u = sqrt(2/pi) (x + 0.044715 x^3)
            t = xp.tanh(u, out=u) if isinstance(u, xp.ndarray) else xp.tanh(u)
            self.t = t                  # reused by the array-mode backward
            y = t + 1
            y *= x
            y *= 0.5
            return y
        if x.__class__ is xp.ndarray and x.ndim:
            return _KP.gelu(x)  # one compiled pass for float32 (NumPy + SciPy's erf otherwise)
        from varlens.core.array import erf
        return (0.5 * x * (1 + erf(x / math.sqrt(2.0)))).astype(x.dtype, copy=False)

    def backward(self, g):
        x = self.saved[0]
        if self.approximate == "tanh":
            if hasattr(g, "_data") or x.ndim == 0:  # recorded (create_graph), or a 0-d input
                t = D.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
                return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x))
            # array mode: the same formula in place, two temporaries instead of a dozen
            t, c = self.t, _SQRT_2_OVER_PI
            u = x * x
            u *= 3 * 0.044715 * c
            u += c
            u *= x
            u *= 0.5                    # u = x/2 * sqrt(2/pi) (1 + 3*0.044715 x^2)
            s = t * t
            xp.subtract(1, s, out=s)    # 1 - t^2
            s *= u
            xp.multiply(t, 0.5, out=u)
            s += u
            s += 0.5                    # (1 + t)/2 + u (1 - t^2)
            s *= g
            return s
        if g.__class__ is xp.ndarray and x.__class__ is xp.ndarray and x.ndim:
            return _KP.gelu_grad(g, x)  # g (Phi(x) + x phi(x)) in one pass
        cdf = 0.5 * (1 + D.erf(x * (1 / math.sqrt(2.0))))
        pdf = D.exp(-0.5 * x * x) * _INV_SQRT_2PI
        return g * (cdf + x * pdf)


class SiLU(Function):
    """out = x s(x);  d/dx = s(x) (1 + x (1 - s(x)))."""

    def forward(self, x):
        s = D._sigmoid_array(x)
        self.s = s                      # reused by the array-mode backward
        y = x * s
        self.save_for_backward(x, y)
        return y

    def backward(self, g):
        """Product rule on x s(x) with s' = s (1 - s) (seed 003 §1.4.2): s + x s (1 - s)."""
        x, y = self.saved
        if hasattr(g, "_data"):  # recorded (create_graph): recompute s from x
            s = D.sigmoid(x)
            return g * s * (1 + x * (1 - s))
        # array mode, in place on one buffer: x (1 - s) = x - y, so s (1 + x (1 - s)) = s (1 + x - y)
        d = x - y
        d += 1
        d *= self.s
        d *= g
        return d


class Softplus(Function):
    """out = log(1 + e^(beta x))/beta (linear above threshold);  d/dx = s(beta x)."""

    def forward(self, x, beta=1.0, threshold=20.0):
        self.beta, self.threshold = beta, threshold
        self.save_for_backward(x)
        bx = beta * x
        return xp.where(bx > threshold, x, xp.logaddexp(0, bx) / beta).astype(x.dtype, copy=False)

    def backward(self, g):
        x = self.saved[0]
        bx = x * self.beta
        return D.where(bx > self.threshold, g, g * D.sigmoid(bx))


class Clamp(Function):
    """out = min(max(x, lo), hi);  d/dx = 1 inside [lo, hi] (inclusive, as PyTorch), else 0."""

    def forward(self, x, lo=None, hi=None):
        if lo is None and hi is None:
            raise ValueError("clamp: at least one of min and max must be given")
        mask = xp.ones(x.shape, dtype=bool)
        if lo is not None:
            mask &= x >= lo
        if hi is not None:
            mask &= x <= hi
        self.mask = mask
        return xp.clip(x, lo, hi)

    def backward(self, g):
        return g * self.mask


class Maximum(Function):
    """out = max(a, b);  the gradient goes to the larger input, split in half at ties (as PyTorch)."""

    def forward(self, a, b):
        out = xp.maximum(a, b)
        self.wa = ((a > b) + 0.5 * (a == b)).astype(out.dtype, copy=False)
        return out

    def backward(self, g):
        return g * self.wa, g * (1 - self.wa)


class Minimum(Function):
    """out = min(a, b);  the gradient goes to the smaller input, split in half at ties."""

    def forward(self, a, b):
        out = xp.minimum(a, b)
        self.wa = ((a < b) + 0.5 * (a == b)).astype(out.dtype, copy=False)
        return out

    def backward(self, g):
        return g * self.wa, g * (1 - self.wa)


class Where(Function):
    """out = cond ? a : b;  d/da = 1{cond}, d/db = 1{not cond}."""

    def forward(self, cond, a, b):
        self.cond = cond
        return xp.where(cond, a, b)

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
def add(a, b, *, alpha=1):
    if alpha != 1:
        b = mul(b, alpha)
    return Add.apply(*_promote(a, b))


def _add(a, b):
    return Add.apply(*_promote(a, b))


def _sub(a, b):
    if a._data.dtype.kind == "b" or b.__class__ is bool or (isinstance(b, _F.Tensor) and b._data.dtype.kind == "b"):
        _check_sub(a, b)
    return Sub.apply(*_promote(a, b))


def sub(a, b, *, alpha=1):
    _check_sub(a, b)
    if alpha != 1:
        b = mul(b, alpha)
    return Sub.apply(*_promote(a, b))


def rsub(a, b):
    _check_sub(b, a)
    return Sub.apply(*_promote(b, a))


def mul(a, b):
    return Mul.apply(*_promote(a, b))


def div(a, b, *, rounding_mode=None):
    if rounding_mode is not None:
        if rounding_mode not in ("floor", "trunc"):
            raise ValueError(f"div: rounding_mode must be None, 'trunc' or 'floor', got {rounding_mode!r}")
        return DivRound.apply(*_promote(a, b), rounding_mode)
    return Div.apply(*_promote(a, b, True))


def remainder(a, b):
    """a % b with the sign of b (Python's %), dtype promoted as PyTorch; differentiable."""
    return Remainder.apply(*_promote(_scalarize(a), _scalarize(b)))


def fmod(a, b):
    """C's fmod: the remainder with the sign of a; fmod(int_tensor, 2) stays an integer tensor."""
    return Fmod.apply(*_promote(_scalarize(a), _scalarize(b)))


def floor_divide(a, b):
    """floor(a / b), dtype promoted as PyTorch; recorded but not differentiable (as PyTorch)."""
    return FloorDivide.apply(*_promote(_scalarize(a), _scalarize(b)))


def rremainder(a, b):
    return remainder(b, a)


def rfloor_divide(a, b):
    return floor_divide(b, a)


def rdiv(a, b):
    return Div.apply(*_promote(b, a, True))


def neg(x):
    if x._data.dtype.kind == "b":
        raise RuntimeError(_NEG_BOOL)
    return Neg.apply(x)


def pow(x, e):  # noqa: A001
    return Pow.apply(*_promote(x, e))


def rpow(x, b):
    return Pow.apply(*_promote(b, x))


def exp(x):
    return Exp.apply(_fl(x))


def log(x):
    return Log.apply(_fl(x))


def sqrt(x):
    return Sqrt.apply(_fl(x))


def log1p(x):
    return Log1p.apply(_fl(x))


def expm1(x):
    return Expm1.apply(_fl(x))


def exp2(x):
    return Exp2.apply(_fl(x))


def rsqrt(x):
    return Pow.apply(_fl(x), -0.5)


def square(x):
    if x._data.dtype.kind == "b":
        return pow(x, 2)  # bool squared is int64 in PyTorch
    return Mul.apply(x, x)


def abs(x):  # noqa: A001
    if x._data.dtype.kind == "b":
        _float_only(x, "abs")  # PyTorch has no bool abs either
    return Abs.apply(x)


def sign(x):
    if x._data.dtype.kind == "b":
        return clone(x)  # sign of a bool tensor is itself (NumPy has no bool sign)
    return Sign.apply(x)


def sin(x):
    return Sin.apply(_fl(x))


def cos(x):
    return Cos.apply(_fl(x))


def erf(x):
    return Erf.apply(_fl(x))


def erfc(x):
    return Erfc.apply(_fl(x))


def tanh(x):
    return Tanh.apply(_fl(x))


def sigmoid(x):
    return Sigmoid.apply(_fl(x))


def relu(x):
    try:
        k = x._data.dtype.kind
    except AttributeError:
        not_tensor(x, "relu")
    if k == "b":
        raise RuntimeError("Boolean inputs not supported for relu (got a bool tensor); convert it with "
                           ".float() first")
    return ReLU.apply(x)


def leaky_relu(x, negative_slope=0.01):
    return LeakyReLU.apply(_float_only(x, "leaky_relu"), negative_slope)


def elu(x, alpha=1.0):
    return ELU.apply(_float_only(x, "elu"), alpha)


def gelu(x, approximate="none"):
    return GELU.apply(_float_only(x, "gelu"), approximate=approximate)


def silu(x):
    return SiLU.apply(_float_only(x, "silu"))


def softplus(x, beta=1.0, threshold=20.0):
    return Softplus.apply(_float_only(x, "softplus"), beta, threshold)


def clamp(x, min=None, max=None):  # noqa: A002
    T = _F.Tensor
    if isinstance(min, T) and min.numel() > 1 or isinstance(max, T) and max.numel() > 1:
        # elementwise bounds: the same map as maximum/minimum (gradients reach the bounds too)
        if min is not None:
            x = maximum(x, min)
        if max is not None:
            x = minimum(x, max)
        return x
    lo = min.item() if hasattr(min, "item") and not isinstance(min, (int, float)) else min
    hi = max.item() if hasattr(max, "item") and not isinstance(max, (int, float)) else max
    if isinstance(lo, (str, bytes)) or isinstance(hi, (str, bytes)):
        bad, name = (lo, "min") if isinstance(lo, (str, bytes)) else (hi, "max")
        raise TypeError(f"clamp(): argument '{name}' must be a number or a Tensor, not {type(bad).__name__} "
                        f"({bad!r})")
    if (lo.__class__ is float or hi.__class__ is float) and x._data.dtype.kind in "biu":
        x = cast(x, get_default_dtype())  # an integer tensor clamped to float bounds is float32
    return Clamp.apply(x, lo, hi)


def maximum(a, b):
    return Maximum.apply(*_promote(a, b))


def minimum(a, b):
    return Minimum.apply(*_promote(a, b))


def where(cond, a=None, b=None):
    """where(cond, a, b) picks elementwise; where(cond) alone is nonzero(cond, as_tuple=True)."""
    from varlens.core.tensor import Tensor
    if a is None and b is None:
        from varlens.ops.misc import nonzero
        return nonzero(cond, as_tuple=True)
    c = cond._data if isinstance(cond, Tensor) else xp.asarray(cond)
    if c.dtype != bool:
        raise RuntimeError(f"where: condition must be a bool tensor, got dtype {c.dtype} (torch: where expected "
                           f"condition to be a boolean tensor); compare first, e.g. x > 0")
    a, b = _promote(_scalarize(a), _scalarize(b))
    out = Where.apply(c, a, b)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor) and out.dtype.kind == "f":
        out = cast(out, get_default_dtype())  # where(c, 1.0, 0.0) is float32, as in PyTorch
    return out


def cast(x, dtype):
    dt = xp.dtype(dtype)
    if dt.kind not in "fc":
        # integer and bool tensors never require grad (as in PyTorch): x.long() leaves the graph
        from varlens.core.tensor import Tensor
        data = x._data if isinstance(x, Tensor) else xp.asarray(x)
        return Tensor._make(data if data.dtype == dt else data.astype(dt))
    return Cast.apply(x, dtype)


def clone(x):
    return Clone.apply(x)
