"""Special functions (torch.special's differentiable core): lgamma, digamma, polygamma, erfinv,
xlogy, i0/i0e/i1/i1e, ndtri, log_ndtr, erfcx, entr, zeta, igamma/igammac, mvlgamma.  Forward
by SciPy where NumPy has none; each Function's docstring gives the derivative its backward
computes.  The torch.special namespace (argument checks, aliases) is varlens/special.py.

Devices: the special functions come from ``B.special(xp)`` for the inputs' array library
(scipy.special on the host, cupyx.scipy.special on CUDA); value checks that would read device
values on the host run on the CPU only."""
from __future__ import annotations
from varlens.core.arg_rules import torch_args
from varlens.core import array as B
from varlens.core import primitives as D
from varlens.core.function import Function
from varlens.ops._args import _T
from varlens.ops._args import _float
from varlens.ops.pointwise import log
import math
from varlens.ops.pointwise import where
from varlens.core.array import xp as _np   # the host library
from varlens.core.tensor import Tensor
from varlens.core import grad_mode as _gm
from varlens.ops._args import _tensor
from varlens.ops.pointwise import _fl, _promote


class Erfinv(Function):
    """y = erfinv(x): dy/dx = sqrt(pi)/2 exp(y^2) (the inverse of erf's derivative)."""

    def forward(self, x):
        y = B.special(self.xp).erfinv(x).astype(x.dtype, copy=False)
        self.save_for_backward(y)
        return y

    def backward(self, g):
        (y,) = self.saved
        return g * (0.5 * math.sqrt(math.pi)) * D.exp(y * y)


class _ScipyUnary(Function):
    """y = scipy.special.<fn>(x) in x's dtype (cupyx.scipy.special's on CUDA); ``grad(xp, g, x, y)``
    gives the gradient (each op's derivative is written in its table row).  Second derivatives
    are not implemented (the backward calls the special functions on arrays)."""

    differentiable_backward = False
    fn = ""

    def forward(self, x):
        y = _sp(self.fn, self.xp)(x).astype(x.dtype, copy=False)
        self.save_for_backward(x, y)
        return y

    def backward(self, g):
        x, y = self.saved
        return self.grad(self.xp, g, x, y)


def _sp(name, xp=_np):
    """The special function ``name`` of array library ``xp`` (scipy.special's on the host)."""
    return getattr(B.special(xp), name)


def _polygamma(xp, n, x):
    """psi^(n)(x) on x's device (CuPy's polygamma broadcasts n, so it gets an array there)."""
    return _sp("polygamma", xp)(n if xp is _np else xp.asarray(n), x).astype(x.dtype, copy=False)


def _scipy_unary(name, fn, grad, doc):
    """A Function class named ``name``: forward by scipy.special.<fn>, backward ``grad(xp, g, x, y)``."""
    return type(name, (_ScipyUnary,), {"fn": fn, "grad": staticmethod(grad), "__doc__": doc})


Lgamma = _scipy_unary("Lgamma", "gammaln", lambda xp, g, x, y: g * _sp("digamma", xp)(x).astype(x.dtype, copy=False),
                      "d lgamma(x)/dx = digamma(x).  Second derivatives are not implemented.")


Digamma = _scipy_unary("Digamma", "digamma", lambda xp, g, x, y: g * _polygamma(xp, 1, x),
                       "d digamma(x)/dx = polygamma(1, x).  Second derivatives are not implemented.")


@torch_args(tensor_first=True)
def erfinv(x):
    return Erfinv.apply(_float(x))


@torch_args(tensor_first=True)
def lgamma(x):
    return Lgamma.apply(_float(x))


@torch_args(tensor_first=True)
def digamma(x):
    return Digamma.apply(_float(x))


@torch_args(tensor_first=True)
def xlogy(input, other):
    """x log y, defined as 0 where x == 0 (also when y == 0).  As PyTorch, d/dx = log y also
    where x == 0 (for finite y > 0), so it is x * log(y) with y replaced by 1 only where x == 0
    and log y is not finite."""
    x, y = _promote(_T(input), _T(other, input))
    x, y = _fl(x), _fl(y)  # promoted as PyTorch (float16 with bool is float16), then made float
    yd = y._data
    xp = B.namespace(yd)
    bad = (x == 0)._data & ~((yd > 0) & xp.isfinite(yd))
    one = Tensor._make(xp.ones_like(yd))
    # no -inf * 0 (nor inf * 0) in the value or gradient; on CUDA always (no host read of ``bad``)
    safe_y = where(bad, one, y) if xp is not _np or bad.any() else y
    return x * log(safe_y)


class Polygamma(Function):
    """psi^(n)(x), the n-th derivative of digamma; d/dx = psi^(n+1)(x).  Under create_graph the
    backward calls polygamma itself, so every order is differentiable."""

    def forward(self, x, n):
        self.n = n
        self.save_for_backward(x)
        return _polygamma(self.xp, n, x)

    def backward(self, g):
        (x,) = self.saved
        if isinstance(x, Tensor):
            return g * polygamma(self.n + 1, x), None
        return g * _polygamma(self.xp, self.n + 1, x), None


I0 = _scipy_unary("I0", "i0", lambda xp, g, x, y: g * _sp("i1", xp)(x).astype(x.dtype, copy=False),
                  "Modified Bessel function I0; d/dx = I1(x).  Second derivatives are not implemented.")


class IGamma(Function):
    """Regularised lower (upper=False) or upper incomplete gamma P(a, x) / Q(a, x).  Only the
    gradient in x exists (as PyTorch): dP/dx = x^(a-1) e^(-x) / Gamma(a), and dQ/dx = -dP/dx.
    Second derivatives are not implemented."""

    differentiable_backward = False

    def forward(self, a, x, upper):
        xp = self.xp
        self.upper = upper
        self.save_for_backward(a, x)
        dt = xp.result_type(a, x)
        return _sp("gammaincc" if upper else "gammainc", xp)(a, x).astype(dt, copy=False)

    def backward(self, g):
        xp = self.xp
        a, x = self.saved
        with xp.errstate(divide="ignore", invalid="ignore"):
            d = xp.exp((a - 1) * xp.log(x) - x - _sp("gammaln", xp)(a))
        return None, g * (-d if self.upper else d)


def polygamma(n, input):  # noqa: A002
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise RuntimeError(f"polygamma: n must be a non-negative int, got {n!r}")
    return Polygamma.apply(_float(_tensor(input, "polygamma: input")), n)


@torch_args(tensor_first=True)
def i0(input):  # noqa: A002
    return I0.apply(_float(_tensor(input, "i0: input")))


def _igamma(input, other, upper):  # noqa: A002
    what = "igammac" if upper else "igamma"
    a, x = _tensor(input, f"{what}: input"), _tensor(other, f"{what}: other")
    if a.requires_grad and _gm.is_grad_enabled():
        raise NotImplementedError(f"{what}: the derivative with respect to input (the shape a) is not "
                                  "implemented (as in PyTorch); detach it")
    a, x = _float(a), _float(x)
    return IGamma.apply(a, x, upper)


@torch_args(tensor_first=True)
def igamma(input, other):  # noqa: A002
    return _igamma(input, other, False)


@torch_args(tensor_first=True)
def igammac(input, other):  # noqa: A002
    return _igamma(input, other, True)


@torch_args(tensor_first=True)
def mvlgamma(input, p):  # noqa: A002
    """log of the multivariate gamma: sum_{i<p} lgamma(x - i/2) + p(p-1)/4 log(pi)."""
    x = _float(_tensor(input, "mvlgamma: input"))
    if not isinstance(p, int) or p < 1:
        raise ValueError(f"mvlgamma: p must be a positive int, got {p!r}")
    if x._data.__class__ is _np.ndarray and bool((x._data <= (p - 1) / 2).any()):  # (a host read: CPU only)
        raise RuntimeError(f"mvlgamma: all elements must be greater than (p-1)/2 = {(p - 1) / 2}")
    out = lgamma(x)
    for i in range(1, p):
        out = out + lgamma(x - i / 2)
    return out + p * (p - 1) / 4 * math.log(math.pi)


_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)


_SQRT_2PI = math.sqrt(2.0 * math.pi)


def _i1_grad(xp, g, x, y):
    """dI1/dx = I0(x) - I1(x)/x, which is 1/2 at x = 0."""
    safe = xp.where(x == 0, 1, x)
    d = xp.where(x == 0, 0.5, _sp("i0", xp)(x) - y / safe)
    return g * d.astype(x.dtype, copy=False)


def _i1e_grad(xp, g, x, y):
    """d(e^{-|x|} I1(x))/dx = i0e(x) - y (sign(x) + 1/x), which is 1/2 at x = 0."""
    safe = xp.where(x == 0, 1, x)
    d = xp.where(x == 0, 0.5, _sp("i0e", xp)(x) - y * (xp.sign(x) + 1 / safe))
    return g * d.astype(x.dtype, copy=False)


# Forward by SciPy, derivative beside it (g: incoming gradient, x: input, y: output).
Ndtri = _scipy_unary("Ndtri", "ndtri", lambda xp, g, x, y: g * _SQRT_2PI * xp.exp(0.5 * y * y),
                     "y = Phi^{-1}(p) (the standard normal quantile);  dy/dp = 1/phi(y) = sqrt(2 pi) e^{y^2/2}.")


LogNdtr = _scipy_unary("LogNdtr", "log_ndtr", lambda xp, g, x, y: g * xp.exp(-0.5 * x * x - _LOG_SQRT_2PI - y),
                       "y = log Phi(x);  dy/dx = phi(x)/Phi(x) = exp(-x^2/2 - log sqrt(2 pi) - y) (no underflow).")


Erfcx = _scipy_unary("Erfcx", "erfcx", lambda xp, g, x, y: g * (2 * x * y - 2.0 / math.sqrt(math.pi)),
                     "y = e^{x^2} erfc(x);  dy/dx = 2 x y - 2/sqrt(pi).")


I0e = _scipy_unary("I0e", "i0e", lambda xp, g, x, y: g * (_sp("i1e", xp)(x).astype(x.dtype, copy=False) - xp.sign(x) * y),
                   "y = e^{-|x|} I0(x);  dy/dx = i1e(x) - sign(x) y  (I0' = I1).")


I1 = _scipy_unary("I1", "i1", _i1_grad, "y = I1(x);  dy/dx = I0(x) - I1(x)/x, which is 1/2 at x = 0.")


I1e = _scipy_unary("I1e", "i1e", _i1e_grad,
                   "y = e^{-|x|} I1(x);  dy/dx = i0e(x) - y (sign(x) + 1/x), which is 1/2 at x = 0.")


class Entr(Function):
    """y = -x log x for x > 0, 0 at x = 0, -inf for x < 0;  dy/dx = -(1 + log x)
    (+inf at 0 and NaN below 0, as PyTorch)."""

    def forward(self, x):
        self.save_for_backward(x)
        xp = self.xp
        with xp.errstate(divide="ignore", invalid="ignore"):
            y = xp.where(x > 0, -x * xp.log(xp.where(x > 0, x, 1)), xp.where(x == 0, 0, -xp.inf))
        return y.astype(x.dtype, copy=False)

    def backward(self, g):
        x = self.saved[0]
        if not isinstance(x, Tensor):
            xp = self.xp
            with xp.errstate(divide="ignore", invalid="ignore"):
                return g * -(1 + xp.log(x))
        return g * -(1 + D.log(x))


class Zeta(Function):
    """Hurwitz zeta(x, q) = sum_k (k + q)^-x;  d/dq = -x zeta(x + 1, q).  The derivative in x is
    not implemented (as PyTorch).  Second derivatives are not implemented."""

    differentiable_backward = False

    def forward(self, x, q):
        xp = self.xp
        self.x, self.q = x, q
        return xp.asarray(_sp("zeta", xp)(x, q)).astype(xp.result_type(x, q), copy=False)

    def backward(self, g):
        x, q = self.x, self.q
        gq = None
        if self.next[1] is not None:
            gq = g * (-x * _sp("zeta", self.xp)(x + 1, q))
        return None, gq
