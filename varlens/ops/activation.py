"""Activations (torch's nn.functional activations that are ops of their own): relu, leaky_relu,
elu, gelu (exact and tanh), silu, softplus.  Each is one Function, its derivative beside its
forward (seed 001 §2.3 for ReLU's value at 0).  Each computes with ``self.xp``, its inputs' array
library (NumPy or the CUDA device's); the compiled kernels are used for NumPy arrays only."""
from __future__ import annotations
from varlens.core.arg_rules import torch_args
from varlens.core import array as B
from varlens.core import primitives as D
from varlens.core.function import Function
from varlens.ops.kernels import pointwise as _KP
from varlens.ops.pointwise import _float_only
import math
from varlens.ops.pointwise import not_tensor
from varlens.core.array import erf as _erf_array
from varlens.core.array import xp as _np   # the host library (the numba paths take its arrays)


class ReLU(Function):
    """out = max(x, 0);  d/dx = 1{x > 0} (0 at x = 0, as seed 001 §2.3 and PyTorch;
    seed 003 §1.6.4 takes 1 there, see docs/conventions.md)."""

    def forward(self, x):
        xp = self.xp
        if x.__class__ is _np.ndarray and x.size >= 256:
            if _KP.usable(x):  # float32: one compiled pass (1.5x np.maximum's speed at 1M elements)
                y = _KP.relu(x, True)
            else:  # against a cached array of zeros: NumPy's maximum with a scalar is not vectorised
                y = xp.maximum(x, B.zeros_cached(x.shape, x.dtype))
        else:
            y = xp.maximum(x, 0)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        if g.__class__ is _np.ndarray:
            return _KP.relu_grad(g, self.saved[0])  # one compiled pass for float32
        return g * (self.saved[0] > 0)


class LeakyReLU(Function):
    """out = x if x > 0 else slope*x;  d/dx = 1 or slope."""

    def forward(self, x, slope=0.01):
        self.slope = slope
        self.save_for_backward(x)
        return self.xp.where(x > 0, x, x * slope)

    def backward(self, g):
        x = self.saved[0]
        return D.where(x > 0, g, g * self.slope)


class ELU(Function):
    """out = x if x > 0 else alpha (e^x - 1);  d/dx = 1 or alpha e^x."""

    def forward(self, x, alpha=1.0):
        self.alpha = alpha
        self.save_for_backward(x)
        xp = self.xp
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
        xp = self.xp
        if approximate == "tanh":
            if x.__class__ is _np.ndarray and x.ndim and _KP.usable(x):
                return _KP.gelu_tanh(x, True)   # one compiled pass; the backward recomputes tanh u
            c = _SQRT_2_OVER_PI
            u = xp.asarray(x * x)       # an array even for 0-d x (NumPy gives a scalar)
            u *= c * 0.044715
            u += c
            u *= x                      # u = sqrt(2/pi) (x + 0.044715 x^3)
            t = xp.tanh(u, out=u)
            # reused by the array-mode backward; saved (not an attribute) so the engine frees it
            # once that has run
            self.save_for_backward(x, t)
            y = t + 1
            y *= x
            y *= 0.5
            return y
        if x.__class__ is _np.ndarray and x.ndim:
            return _KP.gelu(x)  # one compiled pass for float32 (NumPy + SciPy's erf otherwise)
        return (0.5 * x * (1 + _erf_array(x / math.sqrt(2.0)))).astype(x.dtype, copy=False)

    def backward(self, g):
        """g times the derivative in the class docstring (exact or tanh form)."""
        x = self.saved[0]
        if self.approximate == "tanh":
            if hasattr(g, "_data") or x.ndim == 0:  # recorded (create_graph), or a 0-d input
                t = D.tanh(_SQRT_2_OVER_PI * (x + 0.044715 * x * x * x))
                return g * (0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x))
            if len(self.saved) == 1:    # the forward ran compiled: so does this, in one pass
                return _KP.gelu_tanh_grad(g, x)
            # array mode: the same formula in place, two temporaries instead of a dozen
            xp = self.xp
            t, c = self.saved[1], _SQRT_2_OVER_PI
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
        if g.__class__ is _np.ndarray and x.__class__ is _np.ndarray and x.ndim:
            return _KP.gelu_grad(g, x)  # g (Phi(x) + x phi(x)) in one pass
        cdf = 0.5 * (1 + D.erf(x * (1 / math.sqrt(2.0))))
        pdf = D.exp(-0.5 * x * x) * _INV_SQRT_2PI
        return g * (cdf + x * pdf)


class SiLU(Function):
    """out = x s(x);  d/dx = s(x) (1 + x (1 - s(x)))."""
    output_saved_by_torch = False   # only x is PyTorch's saved value: out.add_() stays allowed

    def forward(self, x):
        s = D._sigmoid_array(x)
        y = x * s
        # s is reused by the array-mode backward; saved (not an attribute) so the engine frees it
        # once that has run
        self.save_for_backward(x, y, s)
        return y

    def backward(self, g):
        """Product rule on x s(x) with s' = s (1 - s) (seed 003 §1.4.2): s + x s (1 - s)."""
        x, y, s = self.saved
        if hasattr(g, "_data"):  # recorded (create_graph): recompute s from x
            s = D.sigmoid(x)
            return g * s * (1 + x * (1 - s))
        # array mode, in place on one buffer: x (1 - s) = x - y, so s (1 + x (1 - s)) = s (1 + x - y)
        d = x - y
        d += 1
        d *= s
        d *= g
        return d


class Softplus(Function):
    """out = log(1 + e^(beta x))/beta (linear above threshold);  d/dx = s(beta x)."""

    def forward(self, x, beta=1.0, threshold=20.0):
        self.beta, self.threshold = beta, threshold
        self.save_for_backward(x)
        bx = beta * x
        xp = self.xp
        return xp.where(bx > threshold, x, xp.logaddexp(0, bx) / beta).astype(x.dtype, copy=False)

    def backward(self, g):
        x = self.saved[0]
        bx = x * self.beta
        return D.where(bx > self.threshold, g, g * D.sigmoid(bx))


@torch_args(tensor_first=True)
def relu(x):
    try:
        k = x._data.dtype.kind
    except AttributeError:
        not_tensor(x, "relu")
    if k == "b":
        raise RuntimeError("Boolean inputs not supported for relu (got a bool tensor); convert it with "
                           ".float() first")
    return ReLU.apply(x)


class Hardtanh(Function):
    """out = min(max(x, lo), hi) (hardtanh; relu6 is hardtanh on [0, 6]);  d/dx = 1 strictly inside
    (lo, hi) and 0 at and beyond the bounds, as PyTorch's hardtanh backward (clamp's mask, by
    contrast, includes the bounds)."""

    def forward(self, x, lo=-1.0, hi=1.0):
        self.mask = (x > lo) & (x < hi)
        return self.xp.clip(x, lo, hi)

    def backward(self, g):
        return g * self.mask


def hardtanh(x, min_val=-1.0, max_val=1.0):
    return Hardtanh.apply(_float_only(x, "hardtanh"), lo=min_val, hi=max_val)


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
