"""Univariate continuous families with torch.distributions' arguments, properties and methods."""
from __future__ import annotations

import math

import varlens as _vl
from varlens.core.array import xp
from varlens.distributions import constraints
from varlens.distributions._gamma import standard_gamma
from varlens.distributions.distribution import (Distribution, as_float, broadcast_all, nan_like, rng,
                                                shape_of)
from varlens.distributions.transforms import (AffineTransform, ExpTransform, PowerTransform,
                                              TransformedDistribution)
from varlens.core.tensor import Size, Tensor

_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _draw(d, sample_shape, like, fn):
    """An array of draws of shape sample_shape + batch_shape, as a tensor of like's dtype."""
    return Tensor._make(xp.asarray(fn(tuple(shape_of(sample_shape)) + tuple(d.batch_shape))).astype(like.dtype))


class _LocScale(Distribution):
    """A location-scale family on the real line (Normal, Laplace, Cauchy): loc real, scale > 0,
    mean = mode = loc, rsample = loc + scale * eps with eps a standard draw (``_standard``)."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self._init_params(validate_args, loc=loc, scale=scale)

    mean = property(lambda self: self.loc)
    mode = property(lambda self: self.loc)

    @staticmethod
    def _standard(r, shape):
        raise NotImplementedError

    def rsample(self, sample_shape=Size(), generator=None):
        eps = _draw(self, sample_shape, self.loc, lambda s: self._standard(rng(generator), s))
        return self.loc + self.scale * eps


class Normal(_LocScale):
    """N(loc, scale^2).  rsample = loc + scale * eps, eps ~ N(0, 1): the reparametrisation trick
    (seed 003 §10)."""

    stddev = property(lambda self: self.scale)
    variance = property(lambda self: self.scale * self.scale)
    _standard = staticmethod(lambda r, shape: r.standard_normal(shape))

    def log_prob(self, value):
        v = self._value(value, self.loc)
        z = (v - self.loc) / self.scale
        return -0.5 * z * z - _vl.log(self.scale) - _LOG_SQRT_2PI

    def cdf(self, value):
        v = self._value(value, self.loc)
        return 0.5 * (1 + _vl.erf((v - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return self.loc + self.scale * _vl.erfinv(2 * as_float(value) - 1) * math.sqrt(2)

    def entropy(self):
        return 0.5 + _LOG_SQRT_2PI + _vl.log(self.scale)


class LogNormal(TransformedDistribution):
    """exp(N(loc, scale^2)): a TransformedDistribution (Normal base, ExpTransform) as in torch, with
    the density, cdf and moments written out directly."""

    arg_constraints = {"loc": constraints.real, "scale": constraints.positive}
    support = constraints.positive
    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        base = Normal(loc, scale, validate_args=validate_args)
        self.loc, self.scale = base.loc, base.scale
        super().__init__(base, ExpTransform(), validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        shape = tuple(batch_shape)
        return LogNormal(_vl.broadcast_to(self.loc, shape), _vl.broadcast_to(self.scale, shape), validate_args=False)

    def sample(self, sample_shape=Size(), generator=None):
        with _vl.no_grad():
            return self.rsample(sample_shape, generator).detach()

    mean = property(lambda self: _vl.exp(self.loc + self.scale ** 2 / 2))
    mode = property(lambda self: _vl.exp(self.loc - self.scale ** 2))
    variance = property(lambda self: _vl.expm1(self.scale ** 2) * _vl.exp(2 * self.loc + self.scale ** 2))

    def rsample(self, sample_shape=Size(), generator=None):
        return _vl.exp(self.base_dist.rsample(sample_shape, generator))

    def log_prob(self, value):
        v = self._value(value, self.loc)
        lv = _vl.log(v)
        z = (lv - self.loc) / self.scale
        return -0.5 * z * z - _vl.log(self.scale) - _LOG_SQRT_2PI - lv

    def cdf(self, value):
        v = self._value(value, self.loc)
        return 0.5 * (1 + _vl.erf((_vl.log(v) - self.loc) / (self.scale * math.sqrt(2))))

    def icdf(self, value):
        return _vl.exp(self.base_dist.icdf(value))

    def entropy(self):
        return self.base_dist.entropy() + self.loc


class HalfNormal(Distribution):
    """|N(0, scale^2)|."""

    arg_constraints = {"scale": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, scale, validate_args=None):
        self._init_params(validate_args, scale=scale)

    mean = property(lambda self: self.scale * math.sqrt(2 / math.pi))
    mode = property(lambda self: _vl.zeros_like(self.scale))
    variance = property(lambda self: self.scale ** 2 * (1 - 2 / math.pi))

    def rsample(self, sample_shape=Size(), generator=None):
        eps = _draw(self, sample_shape, self.scale, lambda s: xp.abs(rng(generator).standard_normal(s)))
        return self.scale * eps

    def log_prob(self, value):
        v = self._value(value, self.scale)
        z = v / self.scale
        lp = -0.5 * z * z - _vl.log(self.scale) - _LOG_SQRT_2PI + math.log(2)
        return _vl.where(v >= 0, lp, -math.inf)

    def cdf(self, value):
        v = self._value(value, self.scale)
        return _vl.erf(v / (self.scale * math.sqrt(2)))

    def icdf(self, value):
        return self.scale * _vl.erfinv(as_float(value)) * math.sqrt(2)

    def entropy(self):
        return 0.5 + _LOG_SQRT_2PI + _vl.log(self.scale) - math.log(2)


class Uniform(Distribution):
    """U[low, high); rsample = low + (high - low) u."""

    arg_constraints = {"low": constraints.dependent(is_discrete=False, event_dim=0),
                       "high": constraints.dependent(is_discrete=False, event_dim=0)}
    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self._init_params(validate_args, low=low, high=high)
        if self._validate_args and not bool((self.low._data < self.high._data).all()):
            raise ValueError(f"Expected parameter low ({type(self.low).__name__} of shape {tuple(self.low.shape)}) "
                             f"of distribution {self!r} to satisfy the constraint LessThan(upper_bound=high), "
                             f"but found invalid values:\n{self.low}")

    @property
    def support(self):
        return constraints.interval(self.low, self.high)

    mean = property(lambda self: (self.low + self.high) / 2)
    mode = property(lambda self: nan_like(self.batch_shape, self.low.dtype))
    stddev = property(lambda self: (self.high - self.low) / 12 ** 0.5)
    variance = property(lambda self: (self.high - self.low) ** 2 / 12)

    def rsample(self, sample_shape=Size(), generator=None):
        u = _draw(self, sample_shape, self.low, lambda s: rng(generator).random(s))
        return self.low + (self.high - self.low) * u

    def log_prob(self, value):
        v = self._value(value, self.low)
        inside = (v >= self.low) & (v < self.high)
        return _vl.where(inside, -_vl.log(self.high - self.low) + 0 * v, -math.inf)

    def cdf(self, value):
        v = self._value(value, self.low)
        return _vl.clamp((v - self.low) / (self.high - self.low), 0, 1)

    def icdf(self, value):
        return as_float(value) * (self.high - self.low) + self.low

    def entropy(self):
        return _vl.log(self.high - self.low)


class Exponential(Distribution):
    """Exp(rate): density rate e^(-rate x) on x >= 0; rsample = E / rate with E ~ Exp(1)."""

    arg_constraints = {"rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, rate, validate_args=None):
        self._init_params(validate_args, rate=rate)

    mean = property(lambda self: 1 / self.rate)
    mode = property(lambda self: _vl.zeros_like(self.rate))
    stddev = property(lambda self: 1 / self.rate)
    variance = property(lambda self: self.rate ** -2)

    def rsample(self, sample_shape=Size(), generator=None):
        e = _draw(self, sample_shape, self.rate, lambda s: rng(generator).standard_exponential(s))
        return e / self.rate

    def log_prob(self, value):
        v = self._value(value, self.rate)
        return _vl.log(self.rate) - self.rate * v

    def cdf(self, value):
        v = self._value(value, self.rate)
        return 1 - _vl.exp(-self.rate * v)

    def icdf(self, value):
        return -_vl.log1p(-as_float(value)) / self.rate

    def entropy(self):
        return 1.0 - _vl.log(self.rate)


class Laplace(_LocScale):
    """Laplace(loc, scale): density exp(-|x - loc| / scale) / (2 scale)."""

    stddev = property(lambda self: math.sqrt(2) * self.scale)
    variance = property(lambda self: 2 * self.scale ** 2)

    def rsample(self, sample_shape=Size(), generator=None):
        eps = float(xp.finfo(self.loc.dtype).eps)
        u = _draw(self, sample_shape, self.loc, lambda s: rng(generator).uniform(eps - 1, 1, s))
        return self.loc - self.scale * _vl.sign(u) * _vl.log1p(-_vl.abs(u))

    def log_prob(self, value):
        v = self._value(value, self.loc)
        return -_vl.log(2 * self.scale) - _vl.abs(v - self.loc) / self.scale

    def cdf(self, value):
        v = self._value(value, self.loc)
        return 0.5 - 0.5 * _vl.sign(v - self.loc) * _vl.expm1(-_vl.abs(v - self.loc) / self.scale)

    def icdf(self, value):
        t = as_float(value) - 0.5
        return self.loc - self.scale * _vl.sign(t) * _vl.log1p(-2 * _vl.abs(t))

    def entropy(self):
        return 1 + _vl.log(2 * self.scale)


class Cauchy(_LocScale):
    """Cauchy(loc, scale): mean undefined (nan), variance inf, as torch."""

    mean = property(lambda self: nan_like(self.batch_shape, self.loc.dtype))
    variance = property(lambda self: _vl.full(tuple(self.batch_shape), math.inf, dtype=self.loc.dtype))
    _standard = staticmethod(lambda r, shape: r.standard_cauchy(shape))

    def log_prob(self, value):
        v = self._value(value, self.loc)
        z = (v - self.loc) / self.scale
        return -math.log(math.pi) - _vl.log(self.scale) - _vl.log1p(z * z)

    def cdf(self, value):
        v = self._value(value, self.loc)
        return _vl.atan((v - self.loc) / self.scale) / math.pi + 0.5

    def icdf(self, value):
        return _vl.tan(math.pi * (as_float(value) - 0.5)) * self.scale + self.loc

    def entropy(self):
        return math.log(4 * math.pi) + _vl.log(self.scale)


class Gamma(Distribution):
    """Gamma(concentration, rate), density b^a x^(a-1) e^(-b x) / Gamma(a).  rsample has the
    implicit reparametrisation gradient in the concentration (see _gamma.StandardGamma)."""

    arg_constraints = {"concentration": constraints.positive, "rate": constraints.positive}
    support = constraints.nonnegative
    has_rsample = True

    def __init__(self, concentration, rate, validate_args=None):
        self._init_params(validate_args, concentration=concentration, rate=rate)

    mean = property(lambda self: self.concentration / self.rate)
    mode = property(lambda self: _vl.clamp((self.concentration - 1) / self.rate, min=0))
    variance = property(lambda self: self.concentration / self.rate ** 2)

    def rsample(self, sample_shape=Size(), generator=None):
        shape = tuple(shape_of(sample_shape)) + tuple(self.batch_shape)
        x = standard_gamma(self.concentration, shape, rng(generator)) / self.rate
        return _vl.clamp(x, min=float(xp.finfo(x.dtype).tiny))

    def log_prob(self, value):
        v = self._value(value, self.rate)
        a, b = self.concentration, self.rate
        return _vl.xlogy(a, b) + _vl.xlogy(a - 1, v) - b * v - _vl.lgamma(a)

    def cdf(self, value):
        v = self._value(value, self.rate)
        return _vl.igamma(self.concentration, self.rate * v)

    def entropy(self):
        a = self.concentration
        return a - _vl.log(self.rate) + _vl.lgamma(a) + (1 - a) * _vl.digamma(a)


class Chi2(Gamma):
    """Chi2(df) = Gamma(df / 2, 1/2)."""

    arg_constraints = {"df": constraints.positive}

    def __init__(self, df, validate_args=None):
        (df,) = broadcast_all(df)
        super().__init__(0.5 * df, 0.5 * _vl.ones_like(df), validate_args=validate_args)

    @property
    def df(self):
        return self.concentration * 2


class Beta(Distribution):
    """Beta(concentration1, concentration0) on [0, 1]; rsample = G1 / (G1 + G0) with Gi ~ Gamma(ci, 1)
    (torch draws a two-category Dirichlet, the same law)."""

    arg_constraints = {"concentration1": constraints.positive, "concentration0": constraints.positive}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, concentration1, concentration0, validate_args=None):
        self._init_params(validate_args, concentration1=concentration1, concentration0=concentration0)

    @property
    def mean(self):
        return self.concentration1 / (self.concentration1 + self.concentration0)

    @property
    def mode(self):
        return (self.concentration1 - 1) / (self.concentration1 + self.concentration0 - 2)

    @property
    def variance(self):
        a, b = self.concentration1, self.concentration0
        t = a + b
        return a * b / (t ** 2 * (t + 1))

    def rsample(self, sample_shape=Size(), generator=None):
        shape = tuple(shape_of(sample_shape)) + tuple(self.batch_shape)
        r = rng(generator)
        g1 = standard_gamma(self.concentration1, shape, r)
        g0 = standard_gamma(self.concentration0, shape, r)
        tiny = float(xp.finfo(g1.dtype).tiny)
        eps = float(xp.finfo(g1.dtype).eps)
        return _vl.clamp(g1 / _vl.clamp(g1 + g0, min=tiny), tiny, 1 - eps)

    def log_prob(self, value):
        v = self._value(value, self.concentration1)
        a, b = self.concentration1, self.concentration0
        return _vl.xlogy(a - 1, v) + _vl.xlogy(b - 1, 1 - v) + _vl.lgamma(a + b) - _vl.lgamma(a) - _vl.lgamma(b)

    def entropy(self):
        a, b = self.concentration1, self.concentration0
        lbeta = _vl.lgamma(a) + _vl.lgamma(b) - _vl.lgamma(a + b)
        return lbeta - (a - 1) * _vl.digamma(a) - (b - 1) * _vl.digamma(b) + (a + b - 2) * _vl.digamma(a + b)


class StudentT(Distribution):
    """Student's t(df, loc, scale).  rsample = loc + scale * Z / sqrt(V / df), Z ~ N(0, 1),
    V ~ Chi2(df) (reparametrised in df through the Gamma draw)."""

    arg_constraints = {"df": constraints.positive, "loc": constraints.real, "scale": constraints.positive}
    support = constraints.real
    has_rsample = True

    def __init__(self, df, loc=0.0, scale=1.0, validate_args=None):
        self._init_params(validate_args, df=df, loc=loc, scale=scale)

    @property
    def mean(self):
        return _vl.where(self.df > 1, self.loc, math.nan)

    mode = property(lambda self: self.loc)

    @property
    def variance(self):
        df = self.df
        safe = _vl.where(df > 2, df, 3.0)
        v = self.scale ** 2 * safe / (safe - 2)
        v = _vl.where(df > 2, v, math.inf)
        return _vl.where(df > 1, v, math.nan)

    def rsample(self, sample_shape=Size(), generator=None):
        r = rng(generator)
        shape = tuple(shape_of(sample_shape)) + tuple(self.batch_shape)
        z = Tensor._make(r.standard_normal(shape).astype(self.df.dtype))
        v = 2 * standard_gamma(0.5 * self.df, shape, r)
        return self.loc + self.scale * z * _vl.rsqrt(v / self.df)

    def log_prob(self, value):
        v = self._value(value, self.loc)
        y = (v - self.loc) / self.scale
        df = self.df
        Z = _vl.log(self.scale) + 0.5 * _vl.log(df) + 0.5 * math.log(math.pi) + _vl.lgamma(0.5 * df) - \
            _vl.lgamma(0.5 * (df + 1))
        return -0.5 * (df + 1) * _vl.log1p(y * y / df) - Z

    def entropy(self):
        df = self.df
        lbeta = _vl.lgamma(0.5 * df) + math.lgamma(0.5) - _vl.lgamma(0.5 * (df + 1))
        return _vl.log(self.scale) + 0.5 * (df + 1) * (_vl.digamma(0.5 * (df + 1)) - _vl.digamma(0.5 * df)) + \
            0.5 * _vl.log(df) + lbeta


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
