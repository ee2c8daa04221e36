"""Random sampling ops: poisson, binomial, randint_like, and the two sampling Functions with a
gradient: Reparameterize (z = mu + e^{logvar/2} eps; dz/dmu = 1, dz/dlogvar = (z - mu)/2) and
StandardGamma (implicit reparameterisation: dx/dalpha = -(dF/dalpha)/(dF/dx) for the Gamma CDF F).
The generator state is varlens/random.py's."""
from __future__ import annotations
from varlens.core.arg_rules import torch_args
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.ops._args import _tensor
from varlens.core.array import xp
from varlens.core import array as B
from varlens.random import generator_for
from varlens.core.function import Function
from varlens.ops.pointwise import exp


@torch_args(tensor_first=True)
def poisson(input, generator=None):  # noqa: A002
    """Poisson draws with the given rates (input's dtype, never requires grad)."""
    x = _tensor(input, "poisson: input")
    lib = B.namespace(x._data)
    if lib is xp and bool((x._data < 0).any()):   # a host read: checked on the CPU only (docs/conventions.md)
        raise RuntimeError("poisson: rates must be non-negative")
    return Tensor._make(generator_for(lib, generator).rng.poisson(x._data).astype(x.dtype))


@torch_args(tensor_first=True)
def binomial(count, prob, generator=None):
    c, p = _tensor(count, "binomial: count"), _tensor(prob, "binomial: prob")
    lib = B.namespace(c._data, p._data)
    if lib is xp and bool(((p._data < 0) | (p._data > 1)).any()):   # a host read: CPU only
        raise RuntimeError("binomial: prob must be in [0, 1]")
    g = generator_for(lib, generator)
    return Tensor._make(g.rng.binomial(c._data.astype(xp.int64), p._data).astype(c.dtype))


@torch_args(tensor_first=True)
def randint_like(input, low=0, high=None, *, dtype=None, generator=None, requires_grad=False,  # noqa: A002
                 device=None):
    """Integers from [low, high) of input's shape, on input's device unless ``device`` is given."""
    if high is None:
        low, high = 0, low
    if not high > low:
        raise RuntimeError(f"randint_like: high must be larger than low, got low={low}, high={high}")
    dt = input.dtype if dtype is None else DT.to_dtype(dtype)
    lib = B.namespace(input._data) if device is None else B.namespace_of_device(device)
    return Tensor._make(generator_for(lib, generator).integers(int(low), int(high), tuple(input.shape)).astype(dt))


class Reparameterize(Function):
    """z = mu + e^(logvar/2) eps (seed 003 §10.3).  Backward (pathwise gradient): dz/dmu = 1,
    dz/dlogvar = e^(logvar/2) eps / 2, dz/deps = e^(logvar/2)."""

    differentiable_backward = False

    def forward(self, mu, logvar, eps):
        sd = xp.exp(logvar * 0.5)
        se = sd * eps
        self.sd, self.se = sd, se
        return mu + se

    def backward(self, g):
        n = self.next
        glv = g * self.se * 0.5 if n[1] is not None else None
        geps = g * self.sd if n[2] is not None else None
        return (g if n[0] is not None else None), glv, geps

    @staticmethod
    def composite(mu, logvar, eps):
        return mu + exp(0.5 * logvar) * eps


def _dP_dalpha(a, x):
    """d/da of the regularised lower incomplete gamma P(a, x) at fixed x.

    Central differences in a with Richardson extrapolation (error O(h^4)); taken on the upper
    tail Q = 1 - P where P > 1/2 so that tail values keep their relative precision."""
    import scipy.special as S
    upper = S.gammainc(a, x) > 0.5
    f = lambda aa: xp.where(upper, -S.gammaincc(aa, x), S.gammainc(aa, x))  # noqa: E731
    h = 1e-3 * a
    d1 = (f(a + h) - f(a - h)) / (2 * h)
    d2 = (f(a + h / 2) - f(a - h / 2)) / h
    return (4 * d2 - d1) / 3


def standard_gamma_grad(alpha, x):
    """dx/dalpha for x ~ Gamma(alpha, 1) with the uniform u = P(alpha, x) held fixed (implicit
    reparametrisation): dx/dalpha = -(dP/dalpha) / (dP/dx), dP/dx = x^(alpha-1) e^-x / Gamma(alpha)."""
    import scipy.special as S
    a = xp.asarray(alpha, dtype=xp.float64)
    xx = xp.asarray(x, dtype=xp.float64)
    log_density = (a - 1) * xp.log(xx) - xx - S.gammaln(a)
    return -_dP_dalpha(a, xx) * xp.exp(-log_density)


class StandardGamma(Function):
    """x ~ Gamma(alpha, rate 1), drawn with NumPy.  Backward: the implicit reparametrisation
    gradient g * dx/dalpha (see standard_gamma_grad; torch's _standard_gamma_grad computes the same
    derivative).  The pathwise gradient generalises the reparametrisation trick of seed 003 §10 to a
    family without a location-scale form.  Second derivatives are not implemented."""

    differentiable_backward = False

    def forward(self, alpha, shape=(), rng=None):
        a = xp.broadcast_to(alpha, shape)
        x = rng.standard_gamma(a.astype(xp.float64))
        x = xp.maximum(x, xp.finfo(alpha.dtype).tiny).astype(alpha.dtype)
        self.a, self.x = a, x
        return x

    def backward(self, g):
        return g * standard_gamma_grad(self.a, self.x).astype(self.x.dtype)
