"""Fused elementwise kernels: small integer powers and the exact and tanh GELU, forward and backward.

``int_power(x, e)`` and ``int_power_grad(g, x, e)``: x^e and g e x^(e-1) for an integer e
in 2..4 by repeated multiplication (NumPy's ``x ** 3`` calls ``powf`` per element, about
100 times slower than two multiplies).  e = 3 (the cube in tanh-GELU) runs as one compiled
pass each way; the other exponents are NumPy multiplications in place.

``gelu(x)`` = x Phi(x) = x/2 (1 + erf(x / sqrt 2)) and ``gelu_grad(g, x)`` =
g (Phi(x) + x phi(x)), phi the standard normal density: one compiled pass each with the
float32 ``erf32``/``exp_nonpos`` of the package; NumPy with SciPy's erf otherwise.

``gelu_tanh(x)`` and ``gelu_tanh_grad(g, x)``: the tanh-approximate GELU and its derivative
(t = tanh u recomputed in the backward rather than kept), one compiled pass each.

``relu(x)``: max(x, 0); ``relu_grad(g, y)``: g where y > 0, else 0; and ``tanh_grad(g, y)``: g (1 - y^2) for
y = tanh x, each in one pass.
"""
from __future__ import annotations

import math

import numpy as np

from varlens.core.array import erf as _erf
from varlens.ops.kernels import usable

_K = {}
_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)
SMALL_POWERS = (2, 3, 4)


def _kernels():
    if _K:
        return _K
    from varlens.ops.kernels import compiled as c
    _K.update(cube=c.cube, cube_grad=c.cube_grad, gelu_fwd=c.gelu_fwd, gelu_bwd=c.gelu_bwd, relu_bwd=c.relu_bwd, relu_fwd=c.relu_fwd,
                  tanh_bwd=c.tanh_bwd, gelu_tanh_fwd=c.gelu_tanh_fwd, gelu_tanh_bwd=c.gelu_tanh_bwd)
    return _K


def small_power(e):
    """The integer in SMALL_POWERS that exponent ``e`` (a Python int or float) equals, or None."""
    if e.__class__ is int or e.__class__ is float:
        if e in SMALL_POWERS:
            return int(e)
    return None


def int_power(x, e, use_kernel=None):
    """x ** e for float array x and e in SMALL_POWERS, by multiplication."""
    if use_kernel is None:
        use_kernel = e == 3 and usable(x)
    if use_kernel:
        out = np.empty_like(x)
        _kernels()["cube"](x.reshape(-1), out.reshape(-1))
        return out
    y = x * x
    if e == 3:
        y *= x
    elif e == 4:
        y *= y
    return y


def int_power_grad(g, x, e, use_kernel=None):
    """g * e * x^(e-1) for float arrays g, x (same shape) and e in SMALL_POWERS."""
    if use_kernel is None:
        use_kernel = e == 3 and g.shape == x.shape and usable(g, x)
    if use_kernel:
        out = np.empty_like(x)
        _kernels()["cube_grad"](g.reshape(-1), x.reshape(-1), out.reshape(-1))
        return out
    if e == 2:
        d = x * 2.0
    else:
        d = x * x
        if e == 4:
            d *= x
        d *= float(e)
    d = d.astype(np.result_type(g, x), copy=False)
    d *= g
    return d


def gelu(x, use_kernel=None):
    """Exact GELU x Phi(x) of a float array (same dtype)."""
    if use_kernel is None:
        use_kernel = usable(x)
    if use_kernel:
        out = np.empty_like(x)
        _kernels()["gelu_fwd"](x.reshape(-1), out.reshape(-1))
        return out
    y = _erf(x * x.dtype.type(_SQRT1_2))
    y += 1
    with np.errstate(invalid="ignore"):  # -inf * 0 is NaN, as in PyTorch
        y *= x
    y *= 0.5
    return y.astype(x.dtype, copy=False)


def gelu_grad(g, x, use_kernel=None):
    """g * (Phi(x) + x phi(x)), the exact GELU's derivative times the upstream gradient."""
    if use_kernel is None:
        use_kernel = g.shape == x.shape and usable(g, x)
    if use_kernel:
        out = np.empty_like(x)
        _kernels()["gelu_bwd"](g.reshape(-1), x.reshape(-1), out.reshape(-1))
        return out
    cdf = _erf(x * x.dtype.type(_SQRT1_2))
    cdf += 1
    cdf *= 0.5
    pdf = x * x
    pdf *= -0.5
    np.exp(pdf, out=pdf)
    pdf *= x.dtype.type(_INV_SQRT_2PI)
    pdf *= x
    cdf += pdf
    cdf *= g
    return cdf.astype(np.result_type(g, x), copy=False)


_GC = math.sqrt(2.0 / math.pi)


def gelu_tanh(x, use_kernel=None):
    """tanh-approximate GELU x/2 (1 + tanh u), u = sqrt(2/pi) (x + 0.044715 x^3): one compiled
    pass for float32 (computed as x sigmoid(2u), the same quantity), NumPy passes otherwise."""
    if use_kernel if use_kernel is not None else usable(x):
        out = np.empty_like(x)
        _kernels()["gelu_tanh_fwd"](x.reshape(-1), out.reshape(-1))
        return out
    t = x * x
    t *= _GC * 0.044715
    t += _GC
    t *= x
    np.tanh(t, out=t)
    t += 1
    t *= x
    t *= 0.5
    return t.astype(x.dtype, copy=False)


def gelu_tanh_grad(g, x, use_kernel=None):
    """g * ((1 + t)/2 + x/2 (1 - t^2) u'), t = tanh u, u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2):
    the tanh-approximate GELU's derivative times the upstream gradient (t recomputed)."""
    if use_kernel if use_kernel is not None else (g.shape == x.shape and usable(g, x)):
        out = np.empty_like(x)
        _kernels()["gelu_tanh_bwd"](g.reshape(-1), x.reshape(-1), out.reshape(-1))
        return out
    x2 = x * x
    t = x2 * (_GC * 0.044715)
    t += _GC
    t *= x
    np.tanh(t, out=t)
    x2 *= 3 * 0.044715 * _GC
    x2 += _GC
    x2 *= x
    x2 *= 0.5                   # x/2 u'
    d = t * t
    np.subtract(1, d, out=d)
    d *= x2
    t += 1
    t *= 0.5
    d += t
    d *= g
    return d.astype(np.result_type(g, x), copy=False)


def relu(x, use_kernel=None):
    """max(x, 0) (NaN stays NaN) in one compiled pass for float32; NumPy's maximum otherwise."""
    if use_kernel if use_kernel is not None else usable(x):
        out = np.empty_like(x)
        _kernels()["relu_fwd"](x.reshape(-1), out.reshape(-1))
        return out
    return np.maximum(x, 0)


def relu_grad(g, y, use_kernel=None):
    """g where the ReLU output y > 0, else 0 (one pass instead of a compare and a multiply)."""
    if use_kernel if use_kernel is not None else (g.shape == y.shape and usable(g, y)):
        out = np.empty_like(y)
        _kernels()["relu_bwd"](g.reshape(-1), y.reshape(-1), out.reshape(-1))
        return out
    return g * (y > 0)


def tanh_grad(g, y, use_kernel=None):
    """g * (1 - y^2), tanh's derivative from its output y, in one pass for float32."""
    if use_kernel if use_kernel is not None else (g.shape == y.shape and usable(g, y)):
        out = np.empty_like(y)
        _kernels()["tanh_bwd"](g.reshape(-1), y.reshape(-1), out.reshape(-1))
        return out
    return g * (1 - y * y)
