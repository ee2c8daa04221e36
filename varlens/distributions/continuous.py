"""Univariate continuous families with torch.distributions' arguments, properties and methods."""
from __future__ import annotations

import math

import varlens as _vl
from varlens.core.array import xp
from varlens.distributions import constraints
from varlens.distributions._gamma import standard_gamma
from varlens.distributions.distribution import (Distribution, as_float, broadcast_all, nan_like, rng,
                                                shape_of)
from varlens.distributions.transforms import ExpTransform, TransformedDistribution
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
