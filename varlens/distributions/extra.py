"""More of torch.distributions: Gumbel, Weibull, Pareto, HalfCauchy, InverseGamma, LogisticNormal,
Kumaraswamy (TransformedDistributions, as torch's), FisherSnedecor, NegativeBinomial and
MixtureSameFamily."""
from __future__ import annotations

import math

import varlens as _vl
from varlens.core.array import xp
from varlens.distributions import constraints
from varlens.distributions.continuous import Exponential, Gamma, Uniform
from varlens.distributions.discrete import Categorical, _BinaryParams
from varlens.distributions.distribution import Distribution, broadcast_all, rng
from varlens.distributions.transforms import (AffineTransform, ExpTransform, PowerTransform,
                                              TransformedDistribution)
from varlens.core.tensor import Size, Tensor

_EULER = 0.57721566490153286060


class _Rebuilt(TransformedDistribution):
    """expand() rebuilds the distribution from its broadcast parameters (``_ctor``)."""

    _ctor: tuple = ()

    def expand(self, batch_shape, _instance=None):
        args = [_vl.broadcast_to(getattr(self, n), tuple(batch_shape)) for n in self._ctor]
        new = type(self)(*args, validate_args=False)
        new._validate_args = self._validate_args
        return new


class Gumbel(_Rebuilt):
    """Gumbel(loc, scale): loc - scale log(-log U), U ~ Uniform(0, 1)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    _ctor = ("loc", "scale")

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = broadcast_all(loc, scale)
        fi = xp.finfo(self.loc._data.dtype)
        base = Uniform(_vl.full_like(self.loc, float(fi.tiny)), _vl.full_like(self.loc, 1 - float(fi.eps)),
                       validate_args=validate_args)
        super().__init__(base, [ExpTransform().inv, AffineTransform(0, -_vl.ones_like(self.scale)),
                                ExpTransform().inv, AffineTransform(self.loc, -self.scale)],
                         validate_args=validate_args)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        y = (self.loc - value) / self.scale
        return (y - _vl.exp(y)) - _vl.log(self.scale)

    mean = property(lambda self: self.loc + self.scale * _EULER)
    mode = property(lambda self: self.loc)
    stddev = property(lambda self: (math.pi / math.sqrt(6)) * self.scale)
    variance = property(lambda self: self.stddev ** 2)

    def entropy(self):
        return _vl.log(self.scale) + (1 + _EULER)


class Weibull(_Rebuilt):
    """Weibull(scale, concentration): scale * E^(1/concentration), E ~ Exp(1)."""

    arg_constraints = {"scale": constraints.positive, "concentration": constraints.positive}
    support = constraints.positive
    _ctor = ("scale", "concentration")

    def __init__(self, scale, concentration, validate_args=None):
        self.scale, self.concentration = broadcast_all(scale, concentration)
        self.concentration_reciprocal = 1 / self.concentration
        super().__init__(Exponential(_vl.ones_like(self.scale), validate_args=validate_args),
                         [PowerTransform(self.concentration_reciprocal), AffineTransform(0, self.scale)],
                         validate_args=validate_args)

    @property
    def mean(self):
        return self.scale * _vl.exp(_vl.lgamma(1 + self.concentration_reciprocal))

    @property
    def mode(self):
        k = self.concentration
        return self.scale * ((k - 1) / k) ** (1 / k)

    @property
    def variance(self):
        r = self.concentration_reciprocal
        return self.scale ** 2 * (_vl.exp(_vl.lgamma(1 + 2 * r)) - _vl.exp(2 * _vl.lgamma(1 + r)))

    def entropy(self):
        r = self.concentration_reciprocal
        return _EULER * (1 - r) + _vl.log(self.scale * r) + 1


class Pareto(_Rebuilt):
    """Pareto type I (scale, alpha): scale * exp(E), E ~ Exp(alpha); support [scale, inf)."""

    arg_constraints = {"alpha": constraints.positive, "scale": constraints.positive}
    _ctor = ("scale", "alpha")

    def __init__(self, scale, alpha, validate_args=None):
        self.scale, self.alpha = broadcast_all(scale, alpha)
        super().__init__(Exponential(self.alpha, validate_args=validate_args),
                         [ExpTransform(), AffineTransform(0, self.scale)], validate_args=validate_args)

    @property
    def support(self):
        return constraints.greater_than_eq(self.scale)

    @property
    def mean(self):
        a = _vl.clamp(self.alpha, min=1)
        return a * self.scale / (a - 1)

    mode = property(lambda self: self.scale)

    @property
    def variance(self):
        a = _vl.clamp(self.alpha, min=2)
        return self.scale ** 2 * a / ((a - 1) ** 2 * (a - 2))

    def entropy(self):
        return _vl.log(self.scale / self.alpha) + (1 + 1 / self.alpha)


class NegativeBinomial(_BinaryParams):
    """Successes before total_count failures, success probability probs (a Gamma-Poisson mixture)."""

    arg_constraints = {"total_count": constraints.greater_than_eq(0), "probs": constraints.half_open_interval(0.0, 1.0),
                       "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, total_count, probs=None, logits=None, validate_args=None):
        (self.total_count,) = self._set_params(probs, logits, total_count)
        self.total_count = self.total_count.to(self._param.dtype)
        super().__init__(self._param.shape, validate_args=validate_args)

    mean = property(lambda self: self.total_count * _vl.exp(self.logits))
    mode = property(lambda self: _vl.clamp(_vl.floor((self.total_count - 1) * _vl.exp(self.logits)), min=0.0))
    variance = property(lambda self: self.mean / _vl.sigmoid(-self.logits))

    def _sample(self, sample_shape, generator):
        r = rng(generator)
        shape = tuple(sample_shape) + tuple(self.batch_shape)
        lam = r.standard_gamma(xp.broadcast_to(self.total_count._data.astype(xp.float64), shape)) * \
            xp.exp(self.logits._data.astype(xp.float64))
        return Tensor._make(xp.asarray(r.poisson(lam)).astype(self._param._data.dtype))

    def log_prob(self, value):
        import varlens.nn.functional as F
        v = self._value(value, self._param)
        n = self.total_count
        unnorm = n * F.logsigmoid(-self.logits) + v * F.logsigmoid(self.logits)
        norm = -_vl.lgamma(n + v) + _vl.lgamma(1.0 + v) + _vl.lgamma(n)
        norm = _vl.where(n + v == 0, 0.0, norm)
        return unnorm - norm


class _MixtureSupport(constraints.Constraint):
    def __init__(self, base):
        self.base_constraint = base
        self.event_dim, self.is_discrete = base.event_dim, base.is_discrete

    def _check(self, v):
        return self.base_constraint._check(v)

    def __repr__(self):
        return f"MixtureSameFamilyConstraint({self.base_constraint!r})"


class MixtureSameFamily(Distribution):
    """A mixture of the components along component_distribution's last batch dim, weighted by the
    Categorical mixture_distribution: p(x) = sum_k pi_k p_k(x) (log_prob by logsumexp)."""

    arg_constraints = {}
    has_rsample = False

    def __init__(self, mixture_distribution, component_distribution, validate_args=None):
        if not isinstance(mixture_distribution, Categorical):
            raise ValueError(" The Mixture distribution needs to be an  instance of torch.distributions.Categorical"
                             f" (got {type(mixture_distribution).__name__})")
        if not isinstance(component_distribution, Distribution):
            raise ValueError("The Component distribution needs to be an instance of torch.distributions.Distribution"
                             f" (got {type(component_distribution).__name__})")
        mdbs, cdbs = tuple(mixture_distribution.batch_shape), tuple(component_distribution.batch_shape[:-1])
        for a, b in zip(reversed(mdbs), reversed(cdbs)):
            if a != 1 and b != 1 and a != b:
                raise ValueError(f"`mixture_distribution.batch_shape` ({Size(mdbs)}) is not compatible with "
                                 f"`component_distribution.batch_shape`({Size(cdbs)})")
        km, kc = mixture_distribution.logits.shape[-1], component_distribution.batch_shape[-1]
        if km != kc:
            raise ValueError(f"`mixture_distribution component` ({km}) does not equal "
                             f"`component_distribution.batch_shape[-1]` ({kc})")
        self._mixture_distribution, self._component_distribution = mixture_distribution, component_distribution
        self._num_component = km
        self._event_ndims = len(component_distribution.event_shape)
        super().__init__(cdbs, component_distribution.event_shape, validate_args=validate_args)

    mixture_distribution = property(lambda self: self._mixture_distribution)
    component_distribution = property(lambda self: self._component_distribution)

    @property
    def support(self):
        return _MixtureSupport(self._component_distribution.support)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        new = MixtureSameFamily(self._mixture_distribution.expand(batch_shape),
                                self._component_distribution.expand(batch_shape + (self._num_component,)),
                                validate_args=False)
        new._validate_args = self._validate_args
        return new

    def _pad(self, x):
        return x.unsqueeze(-1 - self._event_ndims)

    def _pad_mix(self, p):
        nb, cb = len(self.batch_shape), len(self._mixture_distribution.batch_shape)
        pad = 0 if cb == 1 else nb - cb
        s = tuple(p.shape)
        return p.reshape(s[:-1] + (1,) * pad + s[-1:] + (1,) * self._event_ndims)

    @property
    def mean(self):
        p = self._pad_mix(self._mixture_distribution.probs)
        return (p * self._component_distribution.mean).sum(-1 - self._event_ndims)

    @property
    def variance(self):
        p = self._pad_mix(self._mixture_distribution.probs)
        c = self._component_distribution
        d = -1 - self._event_ndims
        return (p * c.variance).sum(d) + (p * (c.mean - self._pad(self.mean)) ** 2).sum(d)

    def cdf(self, x):
        return (self._component_distribution.cdf(self._pad(x)) * self._mixture_distribution.probs).sum(-1)

    def log_prob(self, x):
        if self._validate_args:
            self._validate_sample(x)
        lp = self._component_distribution.log_prob(self._pad(x))
        return _vl.logsumexp(lp + _vl.log_softmax(self._mixture_distribution.logits, -1), -1)

    def _sample(self, sample_shape, generator):
        sample_shape = tuple(sample_shape)
        k = self._mixture_distribution.sample(sample_shape, generator)._data  # sample + batch
        comp = self._component_distribution.sample(sample_shape, generator)._data  # sample + batch + (K,) + event
        gather = len(sample_shape) + len(self.batch_shape)
        idx = xp.broadcast_to(k.reshape(k.shape + (1,) * (1 + self._event_ndims)),
                              comp.shape[:gather] + (1,) + comp.shape[gather + 1:])
        return Tensor._make(xp.take_along_axis(comp, idx, axis=gather).squeeze(gather))

    def __repr__(self):
        return f"MixtureSameFamily(\n  {self._mixture_distribution},\n  {self._component_distribution})"


class HalfCauchy(_Rebuilt):
    """|Cauchy(0, scale)| (a TransformedDistribution with AbsTransform, as torch)."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    _ctor = ("scale",)

    def __init__(self, scale, validate_args=None):
        from varlens.distributions.continuous import Cauchy
        from varlens.distributions.transforms import AbsTransform
        (scale,) = broadcast_all(scale)
        base = Cauchy(_vl.zeros_like(scale), scale, validate_args=False)
        self.__dict__["_scale"] = scale
        super().__init__(base, AbsTransform(), validate_args=validate_args)

    scale = property(lambda self: self._scale)
    mean = property(lambda self: _vl.full(tuple(self.batch_shape), math.inf, dtype=self.scale.dtype))
    mode = property(lambda self: _vl.zeros_like(self.scale))
    variance = property(lambda self: self.base_dist.variance)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        v = value if isinstance(value, Tensor) else _vl.tensor(value)
        z = v / self.scale
        lp = math.log(2 / math.pi) - _vl.log(self.scale) - _vl.log1p(z * z)
        return _vl.where(v >= 0, lp, -math.inf)

    def cdf(self, value):
        if self._validate_args:
            self._validate_sample(value)
        return 2 * _vl.atan(value / self.scale) / math.pi

    def icdf(self, prob):
        return self.base_dist.icdf((prob + 1) / 2)

    def entropy(self):
        return self.base_dist.entropy() - math.log(2)


class InverseGamma(_Rebuilt):
    """1 / Gamma(concentration, rate) (a TransformedDistribution with PowerTransform(-1), as torch)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.positive
    _ctor = ("concentration", "rate")

    def __init__(self, concentration, rate, validate_args=None):
        base = Gamma(concentration, rate, validate_args=validate_args)
        super().__init__(base, PowerTransform(-_vl.ones((), dtype=base.rate.dtype)), validate_args=validate_args)

    concentration = property(lambda self: self.base_dist.concentration)
    rate = property(lambda self: self.base_dist.rate)

    @property
    def mean(self):
        a = self.concentration
        return _vl.where(a > 1, self.rate / (a - 1), math.inf)

    mode = property(lambda self: self.rate / (self.concentration + 1))

    @property
    def variance(self):
        a = self.concentration
        return _vl.where(a > 2, self.rate ** 2 / ((a - 1) ** 2 * (a - 2)), math.inf)

    def entropy(self):
        a = self.concentration
        return a + _vl.log(self.rate) + _vl.lgamma(a) - (1 + a) * _vl.digamma(a)


class LogisticNormal(TransformedDistribution):
    """StickBreakingTransform of Normal(loc, scale) over R^(K-1): values on the K-simplex."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        from varlens.distributions.continuous import Normal
        from varlens.distributions.transforms import StickBreakingTransform
        base = Normal(loc, scale, validate_args=validate_args)
        if not tuple(base.batch_shape):
            base = base.expand((1,))
        super().__init__(base, StickBreakingTransform(), validate_args=validate_args)

    loc = property(lambda self: self.base_dist.base_dist.loc)
    scale = property(lambda self: self.base_dist.base_dist.scale)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape) + (self.loc.shape[-1],)
        return LogisticNormal(_vl.broadcast_to(self.loc, shape), _vl.broadcast_to(self.scale, shape),
                              validate_args=False)


class Kumaraswamy(_Rebuilt):
    """Kumaraswamy(a = concentration1, b = concentration0) on [0, 1]: density a b x^(a-1) (1 - x^a)^(b-1),
    (1 - U^(1/b))^(1/a) with U uniform, as torch's transforms."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    _ctor = ("concentration1", "concentration0")

    def __init__(self, concentration1, concentration0, validate_args=None):
        self.concentration1, self.concentration0 = broadcast_all(concentration1, concentration0)
        base = Uniform(_vl.zeros_like(self.concentration0), _vl.ones_like(self.concentration0),
                       validate_args=validate_args)
        super().__init__(base, [PowerTransform(1 / self.concentration0), AffineTransform(1.0, -1.0),
                                PowerTransform(1 / self.concentration1)], validate_args=validate_args)

    def _moment(self, n):
        a, b = self.concentration1, self.concentration0
        arg = 1 + n / a
        return b * _vl.exp(_vl.lgamma(arg) + _vl.lgamma(b) - _vl.lgamma(arg + b))

    mean = property(lambda self: self._moment(1))
    variance = property(lambda self: self._moment(2) - self._moment(1) ** 2)

    @property
    def mode(self):
        """((a - 1) / (a b - 1))^(1/a) for a, b >= 1 (nan otherwise).  torch's formula differs."""
        a, b = self.concentration1, self.concentration0
        safe = (a >= 1) & (b >= 1) & (a * b > 1)
        m = ((a - 1) / _vl.where(safe, a * b - 1, 1.0)) ** (1 / a)
        return _vl.where(safe, m, math.nan)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        t1, t0 = 1 - 1 / a, 1 - 1 / b
        H0 = _vl.digamma(b + 1) + _EULER
        return t0 + t1 * H0 - _vl.log(a) - _vl.log(b)


class FisherSnedecor(Distribution):
    """F(df1, df2) = (X1 / df1) / (X2 / df2) with Xi ~ Chi2(dfi); rsample through the Gammas."""

    arg_constraints = {"df1": constraints.positive, "df2": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, df1, df2, validate_args=None):
        self._init_params(validate_args, df1=df1, df2=df2)

    @property
    def mean(self):
        d2 = self.df2
        return _vl.where(d2 > 2, d2 / (d2 - 2), math.nan)

    @property
    def mode(self):
        d1, d2 = self.df1, self.df2
        return _vl.where(d1 > 2, (d1 - 2) / d1 * d2 / (d2 + 2), math.nan)

    @property
    def variance(self):
        d1, d2 = self.df1, self.df2
        v = 2 * d2 ** 2 * (d1 + d2 - 2) / (d1 * (d2 - 2) ** 2 * (d2 - 4))
        return _vl.where(d2 > 4, v, math.nan)

    def rsample(self, sample_shape=Size(), generator=None):
        g1 = Gamma(self.df1 * 0.5, self.df1, validate_args=False).rsample(sample_shape, generator)
        g2 = Gamma(self.df2 * 0.5, self.df2, validate_args=False).rsample(sample_shape, generator)
        tiny = float(xp.finfo(g1._data.dtype).tiny)
        return _vl.clamp(g1 / _vl.clamp(g2, min=tiny), min=tiny)

    def log_prob(self, value):
        v = self._value(value, self.df1)
        c1, c2 = self.df1 * 0.5, self.df2 * 0.5
        c3 = self.df1 / self.df2
        t1 = _vl.lgamma(c1 + c2) - _vl.lgamma(c1) - _vl.lgamma(c2)
        return t1 + c1 * _vl.log(c3) + (c1 - 1) * _vl.log(v) - (c1 + c2) * _vl.log1p(c3 * v)


class VonMises(Distribution):
    """The circular normal: density exp(k cos(x - loc)) / (2 pi I0(k)) on [-pi, pi).  Draws by
    Best & Fisher's rejection sampler in float64 (no rsample, as torch); mean/variance are circular."""

    arg_constraints = {"loc": constraints.real, "concentration": constraints.positive}
    support = constraints.real

    def __init__(self, loc, concentration, validate_args=None):
        self._init_params(validate_args, loc=loc, concentration=concentration)

    @staticmethod
    def _log_i(k, order):
        import varlens.special as S
        return _vl.log(S.i0e(k) if order == 0 else S.i1e(k)) + k  # log I_n(k), from the scaled Bessel

    def log_prob(self, value):
        v = self._value(value, self.loc)
        return self.concentration * _vl.cos(v - self.loc) - math.log(2 * math.pi) - self._log_i(self.concentration, 0)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        k = self.concentration
        return 1 - _vl.exp(self._log_i(k, 1) - self._log_i(k, 0))

    def _sample(self, sample_shape, generator):
        r = rng(generator)
        shape = tuple(sample_shape) + tuple(self.batch_shape)
        k = xp.broadcast_to(self.concentration._data.astype(xp.float64), shape)
        loc = xp.broadcast_to(self.loc._data.astype(xp.float64), shape)
        tau = 1 + xp.sqrt(1 + 4 * k ** 2)
        rho = (tau - xp.sqrt(2 * tau)) / (2 * k)
        prop = xp.where(k < 1e-5, 1 / k + k, (1 + rho ** 2) / (2 * rho))
        x = xp.zeros(shape)
        todo = xp.ones(shape, dtype=bool)
        while todo.any():
            u1, u2, u3 = r.random((3,) + shape)
            z = xp.cos(math.pi * u1)
            f = (1 + prop * z) / (prop + z)
            c = k * (prop - f)
            with xp.errstate(divide="ignore", invalid="ignore"):
                ok = ((c * (2 - c) - u2) > 0) | ((xp.log(c / u2) + 1 - c) >= 0)
            new = todo & ok
            x = xp.where(new, xp.sign(u3 - 0.5) * xp.arccos(xp.clip(f, -1, 1)), x)
            todo &= ~ok
        out = (x + math.pi + loc) % (2 * math.pi) - math.pi
        return Tensor._make(out.astype(self.loc._data.dtype))
