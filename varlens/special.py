"""varlens.special: PyTorch's torch.special namespace.

Most entries are the varlens ops under torch.special's names (erf, expit, gammaln, psi,
logsumexp, ...), so their gradients are those ops' checked gradients.  A few need a tail-accurate
primitive and are one Function each here: ndtri, log_ndtr, erfcx, i0e, i1, i1e (each one table row,
SciPy forward with its derivative beside it) and entr.  As everywhere in varlens, integer and bool
inputs give the default float dtype (float32), as PyTorch.  The Bessel, Airy and
orthogonal-polynomial functions have no gradient (as PyTorch); zeta, gammainc and gammaincc
differentiate in their second argument only.  On CUDA the special functions are
cupyx.scipy.special's (``B.special(xp)``), computed on the device.
"""
from __future__ import annotations

import math

from varlens import ops as _ops
from varlens.core import array as B
from varlens.core.array import xp as _np   # the host library
from varlens.ops.pointwise import _fl, erf, erfc, exp2, expm1, log1p  # noqa: F401
from varlens.ops.special import _scipy_unary, _sp, digamma, erfinv, xlogy  # noqa: F401
from varlens.ops.special import lgamma as gammaln
from varlens.ops.special import i0, polygamma
from varlens.ops.pointwise import sinc  # noqa: F401
from varlens.core.tensor import Tensor
from varlens.ops.special import Entr, Erfcx, I0e, I1, I1e, LogNdtr, Ndtri, Zeta
from varlens.ops import special as _special_mod

__all__ = ["erf", "erfc", "erfcx", "erfinv", "expit", "logit", "xlogy", "xlog1py", "log1p", "expm1",
           "exp2", "gammaln", "digamma", "psi", "polygamma", "multigammaln", "i0", "i0e", "i1", "i1e",
           "ndtr", "ndtri", "log_ndtr", "sinc", "entr", "logsumexp", "softmax", "log_softmax", "round",
           "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
           "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
           "spherical_bessel_j0", "airy_ai", "chebyshev_polynomial_t", "chebyshev_polynomial_u",
           "shifted_chebyshev_polynomial_t", "shifted_chebyshev_polynomial_u", "hermite_polynomial_h",
           "hermite_polynomial_he", "laguerre_polynomial_l", "legendre_polynomial_p", "zeta", "gammainc",
           "gammaincc"]

psi = digamma


def _t(x, name):
    if not isinstance(x, Tensor):
        raise TypeError(f"special.{name}(): argument 'input' must be a Tensor, got {type(x).__name__}")
    return _fl(x)


def expit(input):  # noqa: A002
    """The logistic sigmoid 1/(1 + e^-x)."""
    return _ops.sigmoid(_t(input, "expit"))


def logit(input, eps=None):  # noqa: A002
    """log(p / (1 - p)), with p clamped to [eps, 1 - eps] when eps is given."""
    from varlens.ops.pointwise import logit as _logit
    return _logit(_t(input, "logit"), eps)


def xlog1py(input, other):  # noqa: A002
    """x log(1 + y), defined as 0 where x == 0 (also when y == -1)."""
    x = input if isinstance(input, Tensor) else None
    y = other if isinstance(other, Tensor) else None
    if x is None and y is None:
        raise TypeError("special.xlog1py(): at least one of input and other must be a Tensor")
    like = x if x is not None else y
    xp = B.namespace(like._data)   # a number operand is made on the Tensor's device
    x = _fl(x) if x is not None else Tensor._make(xp.asarray(input, dtype=_fl(like).dtype))
    y = _fl(y) if y is not None else Tensor._make(xp.asarray(other, dtype=x.dtype))
    yd = y._data
    bad = (x == 0)._data & ~((yd > -1) & xp.isfinite(yd))
    # log1p(0) only where x == 0 and log1p(y) is not finite: d/dx = log1p(y) elsewhere, as PyTorch
    # (not inf * 0); on CUDA always, as ``bad`` is not read on the host
    safe = _ops.where(Tensor._make(bad), Tensor._make(xp.zeros_like(yd)), y) if xp is not _np or bad.any() else y
    return x * log1p(safe)


def multigammaln(input, p):  # noqa: A002
    return _special_mod.mvlgamma(input, p)


def ndtr(input):  # noqa: A002
    """Phi(x) = erfc(-x / sqrt 2) / 2, the standard normal CDF (accurate in the left tail)."""
    return erfc(_t(input, "ndtr") * (-1.0 / math.sqrt(2.0))) * 0.5


def _unary(name, cls):
    """special.<name>(input): the Function ``cls`` on a Tensor (integer/bool input gives float32)."""
    def f(input):  # noqa: A002
        return cls.apply(_t(input, name))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = cls.__doc__
    return f


globals().update({n: _unary(n, c) for n, c in (("ndtri", Ndtri), ("log_ndtr", LogNdtr), ("erfcx", Erfcx),
                                                 ("i0e", I0e), ("i1", I1), ("i1e", I1e), ("entr", Entr))})


def logsumexp(input, dim, keepdim=False):  # noqa: A002
    return _ops.logsumexp(input, dim, keepdim)


def softmax(input, dim, *, dtype=None):  # noqa: A002
    return _ops.softmax(input, dim, dtype=dtype)


def log_softmax(input, dim, *, dtype=None):  # noqa: A002
    return _ops.log_softmax(input, dim, dtype=dtype)


def round(input, *, decimals=0):  # noqa: A001,A002
    return _ops.round(input, decimals=decimals)


def _no_grad(name, fn, what):
    """special.<name>(input) by ``fn`` on the array (a scipy.special name, or a callable ``fn(xp, a)``),
    with no gradient (as PyTorch)."""
    def f(input):  # noqa: A002
        x = _t(input, name)
        xp = B.namespace(x._data)
        return Tensor._make(xp.asarray((fn(xp, x._data) if callable(fn) else _sp(fn, xp)(x._data)), dtype=x.dtype))
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"torch.special.{name}(input): the {what} (no gradient, as PyTorch)."
    return f


_NO_GRAD = {  # name: (SciPy function, what it computes)
    "bessel_j0": ("j0", "Bessel function of the first kind of order 0"),
    "bessel_j1": ("j1", "Bessel function of the first kind of order 1"),
    "bessel_y0": ("y0", "Bessel function of the second kind of order 0"),
    "bessel_y1": ("y1", "Bessel function of the second kind of order 1"),
    "modified_bessel_i0": ("i0", "modified Bessel function of the first kind of order 0"),
    "modified_bessel_i1": ("i1", "modified Bessel function of the first kind of order 1"),
    "modified_bessel_k0": ("k0", "modified Bessel function of the second kind of order 0"),
    "modified_bessel_k1": ("k1", "modified Bessel function of the second kind of order 1"),
    "scaled_modified_bessel_k0": ("k0e", "exponentially scaled e^x K0(x)"),
    "scaled_modified_bessel_k1": ("k1e", "exponentially scaled e^x K1(x)"),
    "spherical_bessel_j0": (lambda xp, a: _sp("spherical_jn", xp)(0, a) if xp is _np else xp.sinc(a / math.pi),
                            "spherical Bessel function j0 = sin(x)/x"),
    "airy_ai": (lambda xp, a: _sp("airy", xp)(a)[0] if xp is _np else _airy_ai_device(xp, a), "Airy function Ai"),
}


def _airy_ai_device(xp, a):
    """Ai(x) on the device, where CuPy (cupyx.scipy.special) has no ``airy``, in float64: for
    -6.5 <= x <= 2 the Maclaurin series Ai = Ai(0) f - |Ai'(0)| g (f, g the power series in x^3,
    DLMF 9.4.1); for x > 2 Ai = sqrt(x/3)/pi K_{1/3}(zeta), zeta = 2/3 x^1.5 (DLMF 9.6.1), with
    K_{1/3}(zeta) = int_0^inf exp(-zeta cosh t) cosh(t/3) dt (DLMF 10.32.9) by the trapezoidal rule,
    exponentially accurate for this analytic, fast-decaying integrand; for x < -6.5 the asymptotic
    expansion in zeta (DLMF 9.7.9)."""
    x = a.astype(_np.float64)
    with xp.errstate(all="ignore"):
        xs = xp.clip(x, -6.5, 2.0)
        x3 = xs * xs * xs
        t, u = xp.ones_like(xs), xs.copy()
        f, g = t.copy(), u.copy()
        for k in range(1, 40):
            t = t * x3 / ((3 * k - 1) * (3 * k))
            u = u * x3 / ((3 * k) * (3 * k + 1))
            f, g = f + t, g + u
        series = 0.355028053887817239 * f - 0.258819403792806798 * g
        xp_ = xp.maximum(x, 2.0)
        z = (2.0 / 3.0) * xp_ * xp.sqrt(xp_)
        h = 0.3 / xp.sqrt(z)            # the integrand's width is ~ zeta^-1/2; 41 nodes reach zeta(cosh t - 1) > 70
        kv = 0.5 * xp.ones_like(z)
        for j in range(1, 41):
            kv = kv + xp.exp(-z * (xp.cosh(j * h) - 1.0)) * xp.cosh(j * h / 3.0)
        pos = xp.sqrt(xp_ / 3.0) / math.pi * h * kv * xp.exp(-z)
        xn = xp.maximum(-x, 6.5)
        z = (2.0 / 3.0) * xn * xp.sqrt(xn)
        even, odd, uk, zk = xp.ones_like(z), xp.zeros_like(z), 1.0, xp.ones_like(z)
        for k in range(1, 25):
            uk *= (6 * k - 5) * (6 * k - 3) * (6 * k - 1) / ((2 * k - 1) * 216.0 * k)
            zk = zk * z
            if k % 2:
                odd = odd + (uk / zk if k % 4 == 1 else -uk / zk)
            else:
                even = even + (-uk / zk if k % 4 == 2 else uk / zk)
        ph = z + math.pi / 4
        neg = (xp.sin(ph) * even - xp.cos(ph) * odd) / (math.sqrt(math.pi) * xp.sqrt(xp.sqrt(xn)))
    return xp.where(x > 2.0, pos, xp.where(x < -6.5, neg, series))


globals().update({n: _no_grad(n, fn, what) for n, (fn, what) in _NO_GRAD.items()})


def _poly(name, scipy_name):
    """An orthogonal polynomial P_n(x) of integer degree n (no gradient, as PyTorch)."""
    def f(input, n):  # noqa: A002
        x = input if isinstance(input, Tensor) else None
        nt = n._data if isinstance(n, Tensor) else _np.asarray(n)
        host_n = nt if nt.__class__ is _np.ndarray else None
        xp = B.namespace(nt) if x is None else B.namespace(x._data, nt)
        nt = xp.asarray(nt)   # (a number's degree: on the input's device)
        if x is None:
            x = Tensor._make(xp.asarray(input, dtype=_np.float32 if nt.dtype.kind != "f" else nt.dtype))
        x = _fl(x)
        nn_ = xp.floor(nt).astype(_np.int64)
        if xp is _np:
            with xp.errstate(invalid="ignore"):
                v = _sp(scipy_name, xp)(xp.maximum(nn_, 0), x._data)
        else:   # CuPy has no eval_* polynomials; a degree given on the device is read once (a sync)
            m = float(_np.floor(host_n).max() if host_n is not None else xp.max(nn_)) if nn_.size else 0.0
            nmax = int(m) if math.isfinite(m) else 0       # (a host degree: no sync)
            v = _poly_recurrence(xp, scipy_name, nn_, x._data, nmax)
        v = xp.where(nn_ < 0, 0, v)  # negative degree: 0, as PyTorch
        return Tensor._make(xp.asarray(v, dtype=x.dtype))
    f.__name__ = name
    f.__doc__ = f"torch.special.{name}(input, n): no gradient, as PyTorch."
    return f


_RECURRENCE = {  # SciPy name: (P_1(x), P_{k+1} from k, x, P_k, P_{k-1}), the three-term recurrences
    "eval_chebyt": (lambda x: x, lambda k, x, p, q: 2 * x * p - q),
    "eval_chebyu": (lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - q),
    "eval_hermite": (lambda x: 2 * x, lambda k, x, p, q: 2 * x * p - 2 * k * q),
    "eval_hermitenorm": (lambda x: x, lambda k, x, p, q: x * p - k * q),
    "eval_laguerre": (lambda x: 1 - x, lambda k, x, p, q: ((2 * k + 1 - x) * p - k * q) / (k + 1)),
    "eval_legendre": (lambda x: x, lambda k, x, p, q: ((2 * k + 1) * x * p - k * q) / (k + 1)),
}


def _poly_recurrence(xp, scipy_name, n, x, nmax):
    """P_n(x) on the device by its three-term recurrence up to degree ``nmax`` (each element takes
    the P_k of its own degree k = n; a negative degree is masked by the caller), in float64; the
    shifted Chebyshev polynomials are T_n(2x - 1), U_n(2x - 1)."""
    p1, step = _RECURRENCE[scipy_name.replace("_sh_", "_")]
    x = x.astype(_np.float64)
    if "_sh_" in scipy_name:
        x = 2 * x - 1
    q, p = xp.ones_like(x), p1(x)
    out = xp.where(n == 0, q, p)
    for k in range(1, nmax):
        q, p = p, step(k, x, p, q)
        out = xp.where(n == k + 1, p, out)
    return out


_POLYS = {"chebyshev_polynomial_t": "eval_chebyt", "chebyshev_polynomial_u": "eval_chebyu",
          "shifted_chebyshev_polynomial_t": "eval_sh_chebyt", "shifted_chebyshev_polynomial_u": "eval_sh_chebyu",
          "hermite_polynomial_h": "eval_hermite", "hermite_polynomial_he": "eval_hermitenorm",
          "laguerre_polynomial_l": "eval_laguerre", "legendre_polynomial_p": "eval_legendre"}
globals().update({n: _poly(n, f) for n, f in _POLYS.items()})


def zeta(input, other):  # noqa: A002
    """Hurwitz zeta(input, other); gradient in ``other`` only (as PyTorch)."""
    from varlens.core import grad_mode as _gm
    from varlens.ops.pointwise import _promote
    x = input if isinstance(input, Tensor) else Tensor._make(_np.asarray(input))
    q = other if isinstance(other, Tensor) else Tensor._make(_np.asarray(other))
    if x.requires_grad and _gm.is_grad_enabled():
        raise NotImplementedError("special.zeta: the derivative with respect to input (the exponent x) is not "
                                  "implemented (as in PyTorch); detach it")
    x, q = _promote(x, q)
    return Zeta.apply(_fl(x), _fl(q))


def gammainc(input, other):  # noqa: A002
    """Regularised lower incomplete gamma P(a, x); gradient in x only (as PyTorch)."""
    return _special_mod.igamma(input, other)


def gammaincc(input, other):  # noqa: A002
    """Regularised upper incomplete gamma Q(a, x); gradient in x only (as PyTorch)."""
    return _special_mod.igammac(input, other)
