"""Discrete families (and the relaxed, continuous stand-ins of Bernoulli/OneHotCategorical) with
torch.distributions' arguments: each takes ``probs`` or ``logits`` (exactly one)."""
from __future__ import annotations

import math

import varlens as _vl
from varlens.core.array import xp
from varlens.distributions import constraints
from varlens.distributions.distribution import (Distribution, broadcast_all, clamp_probs, lazy_property,
                                                logits_to_probs, nan_like, probs_to_logits, rng, shape_of)
from varlens.core.tensor import Size, Tensor


def _one_of(name, probs, logits):
    if (probs is None) == (logits is None):
        raise ValueError("Either `probs` or `logits` must be specified, but not both."
                         f" ({name}: got probs={'None' if probs is None else 'a value'}, "
                         f"logits={'None' if logits is None else 'a value'})")


def _bce_logits(logits, target):
    import varlens.nn.functional as F
    if tuple(target.shape) != tuple(logits.shape):
        shape = xp.broadcast_shapes(tuple(logits.shape), tuple(target.shape))
        logits, target = _vl.broadcast_to(logits, shape), _vl.broadcast_to(target, shape)
    return F.binary_cross_entropy_with_logits(logits, target, reduction="none")


class _BinaryParams(Distribution):
    """probs in [0, 1] or logits (log-odds), the other computed lazily as in torch."""

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs, is_binary=True)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits, is_binary=True)

    def _set_params(self, probs, logits, *others):
        _one_of(type(self).__name__, probs, logits)
        vals = broadcast_all(probs if probs is not None else logits, *others)
        if probs is not None:
            self.probs = vals[0]
        else:
            self.logits = vals[0]
        self._param = vals[0]
        return vals[1:]

    @property
    def param_shape(self):
        return self._param.shape


class Bernoulli(_BinaryParams):
    """Bernoulli(probs) or Bernoulli(logits=...); log_prob is minus the binary cross-entropy."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.boolean
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._set_params(probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)

    mean = property(lambda self: self.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self):
        m = (self.probs >= 0.5).to(self.probs.dtype)
        return _vl.where(self.probs == 0.5, math.nan, m)

    def _sample(self, sample_shape, generator):
        p = self.probs._data
        u = rng(generator).random(tuple(sample_shape) + tuple(self.batch_shape))
        return Tensor._make(xp.asarray(u < p).astype(p.dtype))

    def log_prob(self, value):
        v = self._value(value, self._param)
        return -_bce_logits(self.logits, v)

    def entropy(self):
        return _bce_logits(self.logits, self.probs)

    def enumerate_support(self, expand=True):
        v = _vl.tensor(xp.arange(2).reshape((-1,) + (1,) * len(self.batch_shape)).astype(self._param._data.dtype))
        return _vl.broadcast_to(v, (2,) + tuple(self.batch_shape)) if expand else v


class Geometric(_BinaryParams):
    """Number of failures before the first success, P(k) = (1 - p)^k p (k = 0, 1, ...)."""

    arg_constraints = {"probs": constraints.interval(0.0, 1.0), "logits": constraints.real}
    support = constraints.nonnegative_integer

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._set_params(probs, logits)
        super().__init__(self._param.shape, validate_args=validate_args)

    mean = property(lambda self: 1.0 / self.probs - 1.0)
    mode = property(lambda self: _vl.zeros_like(self.probs))
    variance = property(lambda self: (1.0 / self.probs - 1.0) / self.probs)

    def _sample(self, sample_shape, generator):
        p = self.probs._data
        k = xp.asarray(rng(generator).geometric(xp.broadcast_to(p, tuple(sample_shape) + tuple(self.batch_shape)))) - 1
        return Tensor._make(k.astype(p.dtype))

    def log_prob(self, value):
        v = self._value(value, self._param)
        p = self.probs
        shape = xp.broadcast_shapes(tuple(v.shape), tuple(p.shape))
        p_b = _vl.broadcast_to(p, shape)
        p_safe = _vl.where(((p_b == 1) & (v == 0)), 0.0, p_b)  # 0 * log(0) = 0 at p = 1
        return v * _vl.log1p(-p_safe) + _vl.log(p)

    def entropy(self):
        return _bce_logits(self.logits, self.probs) / self.probs


class Categorical(Distribution):
    """Categorical over the last axis of ``probs`` (normalised here) or ``logits`` (normalised to
    log-probabilities)."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    has_enumerate_support = True
    _event_dims = {"probs": 1, "logits": 1}

    def __init__(self, probs=None, logits=None, validate_args=None):
        _one_of(type(self).__name__, probs, logits)
        if probs is not None:
            p = probs if isinstance(probs, Tensor) else _vl.tensor(probs)
            if p.ndim < 1:
                raise ValueError("`probs` parameter must be at least one-dimensional.")
            self.probs = p / p.sum(-1, keepdim=True)
            self._param = self.probs
        else:
            lg = logits if isinstance(logits, Tensor) else _vl.tensor(logits)
            if lg.ndim < 1:
                raise ValueError("`logits` parameter must be at least one-dimensional.")
            self.logits = lg - _vl.logsumexp(lg, -1, keepdim=True)
            self._param = self.logits
        self._num_events = self._param.shape[-1]
        super().__init__(self._param.shape[:-1], validate_args=validate_args)

    def _expand_extra(self, old, batch_shape):
        self._param = self.__dict__.get("probs", self.__dict__.get("logits"))

    @lazy_property
    def logits(self):
        return probs_to_logits(self.probs)

    @lazy_property
    def probs(self):
        return logits_to_probs(self.logits)

    @property
    def param_shape(self):
        return self._param.shape

    @property
    def support(self):
        return constraints.integer_interval(0, self._num_events - 1)

    mean = property(lambda self: nan_like(self.batch_shape, self._param.dtype))
    variance = property(lambda self: nan_like(self.batch_shape, self._param.dtype))
    mode = property(lambda self: _vl.argmax(self.probs, -1))

    def _sample(self, sample_shape, generator):
        sample_shape = tuple(sample_shape)
        p = xp.asarray(self.probs._data, dtype=xp.float64).reshape(-1, self._num_events)
        cdf = xp.cumsum(p, -1)
        cdf /= cdf[:, -1:]
        n = int(xp.prod(sample_shape)) if sample_shape else 1
        rows, k = p.shape
        u = rng(generator).random((n, rows))
        # inverse CDF of every row at once: row r's CDF is shifted by r, so one sorted array serves all
        shift = xp.arange(rows, dtype=xp.float64)
        pos = xp.searchsorted((cdf + shift[:, None]).ravel(), (u + shift).ravel(), side="right")
        idx = xp.minimum(pos.reshape(n, rows) - xp.arange(rows) * k, k - 1)
        return Tensor._make(idx.reshape(sample_shape + tuple(self.batch_shape)).astype(xp.int64))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        v = value._data if isinstance(value, Tensor) else xp.asarray(value)
        v = v.astype(xp.int64)
        shape = xp.broadcast_shapes(v.shape, tuple(self.batch_shape))
        lg = _vl.broadcast_to(self.logits, shape + (self._num_events,))
        idx = Tensor._make(xp.broadcast_to(v, shape)[..., None].copy())
        return _vl.gather(lg, -1, idx).squeeze(-1)

    def entropy(self):
        lg = _vl.clamp(self.logits, min=float(xp.finfo(self.logits.dtype).min))
        return -(lg * self.probs).sum(-1)

    def enumerate_support(self, expand=True):
        v = _vl.tensor(xp.arange(self._num_events).reshape((-1,) + (1,) * len(self.batch_shape)))
        return _vl.broadcast_to(v, (self._num_events,) + tuple(self.batch_shape)) if expand else v


class _OverCategorical(Distribution):
    """Vectors over K categories (event_shape (K,)) built on a Categorical(probs/logits), whose
    probs, logits and param_shape they share."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}

    def _init_categorical(self, probs, logits, validate_args):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        Distribution.__init__(self, self._categorical.batch_shape, self._categorical.param_shape[-1:],
                              validate_args=validate_args)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)
    param_shape = property(lambda self: self._categorical.param_shape)


class OneHotCategorical(_OverCategorical):
    """One-hot vectors of length K (event_shape (K,)) drawn as Categorical(probs/logits)."""

    support = constraints.one_hot
    has_enumerate_support = True

    def __init__(self, probs=None, logits=None, validate_args=None):
        self._init_categorical(probs, logits, validate_args)

    mean = property(lambda self: self._categorical.probs)
    variance = property(lambda self: self.probs * (1 - self.probs))

    @property
    def mode(self):
        p = self.probs
        return _vl.one_hot(_vl.argmax(p, -1), p.shape[-1]).to(p.dtype)

    def _sample(self, sample_shape, generator):
        k = self._categorical._sample(sample_shape, generator)
        return _vl.one_hot(k, self.event_shape[0]).to(self.probs.dtype)

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        idx = _vl.argmax(value if isinstance(value, Tensor) else _vl.tensor(value), -1)
        return Categorical.log_prob(self._categorical, idx) if not self._categorical._validate_args else \
            self._categorical.log_prob(idx)

    def entropy(self):
        return self._categorical.entropy()

    def enumerate_support(self, expand=True):
        n = self.event_shape[0]
        v = _vl.eye(n, dtype=self.probs.dtype).reshape((n,) + (1,) * len(self.batch_shape) + (n,))
        return _vl.broadcast_to(v, (n,) + tuple(self.batch_shape) + (n,)) if expand else v


class Binomial(_BinaryParams):
    """Binomial(total_count, probs or logits): successes in total_count Bernoulli trials."""

    arg_constraints = {"total_count": constraints.nonnegative_integer, "probs": constraints.unit_interval,
                       "logits": constraints.real}
    has_enumerate_support = True

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        (self.total_count,) = self._set_params(probs, logits, total_count)
        self.total_count = self.total_count.to(self._param.dtype)
        super().__init__(self._param.shape, validate_args=validate_args)

    @property
    def support(self):
        return constraints.integer_interval(0, self.total_count)

    mean = property(lambda self: self.total_count * self.probs)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    @property
    def mode(self):
        return _vl.minimum(_vl.floor((self.total_count + 1) * self.probs), self.total_count)

    def _sample(self, sample_shape, generator):
        shape = tuple(sample_shape) + tuple(self.batch_shape)
        n = xp.broadcast_to(self.total_count._data.astype(xp.int64), shape)
        p = xp.clip(xp.broadcast_to(self.probs._data.astype(xp.float64), shape), 0, 1)
        return Tensor._make(xp.asarray(rng(generator).binomial(n, p)).astype(self._param._data.dtype))

    def log_prob(self, value):
        v = self._value(value, self._param)
        n, lg = self.total_count, self.logits
        log_fact = _vl.lgamma(n + 1) - _vl.lgamma(v + 1) - _vl.lgamma(n - v + 1)
        pos = (_vl.clamp(lg, min=0) + lg - _vl.clamp(lg, max=0)) / 2  # max(logits, 0), torch's form
        normalize = n * pos + n * _vl.log1p(_vl.exp(-_vl.abs(lg)))
        return v * lg + log_fact - normalize

    def entropy(self):
        return _enumerated_entropy(self)

    def enumerate_support(self, expand=True):
        n = int(self.total_count._data.max()) if self.total_count.numel() else 0
        if not bool((self.total_count._data == n).all()):
            raise NotImplementedError("Inhomogeneous total count not supported by `enumerate_support`.")
        v = _vl.tensor(xp.arange(n + 1).reshape((-1,) + (1,) * len(self.batch_shape)).astype(
            self._param._data.dtype))
        return _vl.broadcast_to(v, (n + 1,) + tuple(self.batch_shape)) if expand else v


def _enumerated_entropy(d):
    lp = d.log_prob(d.enumerate_support(False))
    return -(_vl.exp(lp) * lp).sum(0)


class Multinomial(_OverCategorical):
    """Counts of total_count draws over K categories (event_shape (K,)); total_count is an int
    as in torch (sampling needs it; log_prob does not)."""

    def __init__(self, total_count=1, probs=None, logits=None, validate_args=None):
        if not isinstance(total_count, int) or isinstance(total_count, bool):
            raise NotImplementedError(f"inhomogeneous total_count is not supported (Multinomial: total_count "
                                      f"must be an int, got {type(total_count).__name__})")
        self.total_count = total_count
        self._init_categorical(probs, logits, validate_args)

    mean = property(lambda self: self.probs * self.total_count)
    variance = property(lambda self: self.total_count * self.probs * (1 - self.probs))

    @property
    def support(self):
        return constraints.multinomial(self.total_count)

    def _sample(self, sample_shape, generator):
        sample_shape = tuple(sample_shape)
        p = xp.asarray(self.probs._data, dtype=xp.float64)
        p = p / p.sum(-1, keepdims=True)
        out = rng(generator).multinomial(self.total_count, xp.broadcast_to(p, sample_shape + p.shape))
        return Tensor._make(out.astype(self.probs._data.dtype))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        v = value if isinstance(value, Tensor) else _vl.tensor(value)
        v = v.to(self.logits.dtype)
        lg = self.logits
        shape = xp.broadcast_shapes(tuple(v.shape), tuple(lg.shape))
        lg = _vl.broadcast_to(lg, shape)
        lg = _vl.where(((v == 0) & (lg == -math.inf)), 0.0, lg)
        return _vl.lgamma(v.sum(-1) + 1) - _vl.lgamma(v + 1).sum(-1) + (lg * v).sum(-1)

    def entropy(self):
        n = float(self.total_count)
        term1 = n * self._categorical.entropy() - math.lgamma(n + 1)
        b = Binomial(_vl.tensor(n, dtype=self.probs.dtype), self.probs, validate_args=False)
        support = b.enumerate_support(expand=False)[1:]
        term2 = (_vl.exp(b.log_prob(support)) * _vl.lgamma(support + 1)).sum((0, -1))
        return term1 + term2


class Poisson(Distribution):
    """Poisson(rate): P(k) = rate^k e^(-rate) / k!."""

    arg_constraints = {"rate": constraints.nonnegative}
    support = constraints.nonnegative_integer

    def __init__(self, rate, validate_args=None):
        self._init_params(validate_args, rate=rate)

    mean = property(lambda self: self.rate)
    mode = property(lambda self: _vl.floor(self.rate))
    variance = property(lambda self: self.rate)

    def _sample(self, sample_shape, generator):
        lam = xp.broadcast_to(self.rate._data.astype(xp.float64), tuple(sample_shape) + tuple(self.batch_shape))
        return Tensor._make(xp.asarray(rng(generator).poisson(lam)).astype(self.rate._data.dtype))

    def log_prob(self, value):
        v = self._value(value, self.rate)
        return _vl.xlogy(v, self.rate) - self.rate - _vl.lgamma(v + 1)


class RelaxedBernoulli(_BinaryParams):
    """The binary Concrete / Gumbel-softmax relaxation at ``temperature``: sigmoid((logits + L) / t)
    with L logistic noise; rsample is differentiable in logits/probs and temperature."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._set_params(probs, logits)
        self.temperature = temperature if isinstance(temperature, Tensor) else _vl.tensor(
            float(temperature), dtype=self._param.dtype)
        super().__init__(self._param.shape, validate_args=validate_args)

    def rsample(self, sample_shape=Size(), generator=None):
        shape = tuple(shape_of(sample_shape)) + tuple(self.batch_shape)
        u = clamp_probs(Tensor._make(rng(generator).random(shape).astype(self._param._data.dtype)))
        y = (self.logits + _vl.log(u) - _vl.log1p(-u)) / self.temperature
        return clamp_probs(_vl.sigmoid(y))

    def log_prob(self, value):
        v = self._value(value, self._param)
        v = clamp_probs(v)
        x = _vl.log(v) - _vl.log1p(-v)  # logit of the value
        diff = self.logits - x * self.temperature
        base = _vl.log(self.temperature) + diff - 2 * _vl.log1p(_vl.exp(diff))
        import varlens.nn.functional as F
        return base + F.softplus(-x) + F.softplus(x)  # minus log|d sigmoid/dx|


class RelaxedOneHotCategorical(Distribution):
    """The Concrete / Gumbel-softmax relaxation of OneHotCategorical: softmax((logits + G) / t)
    with G Gumbel noise; event_shape (K,), values on the simplex."""

    arg_constraints = {"probs": constraints.simplex, "logits": constraints.independent(constraints.real, 1)}
    support = constraints.simplex
    has_rsample = True

    def __init__(self, temperature, probs=None, logits=None, validate_args=None):
        self._categorical = Categorical(probs, logits, validate_args=validate_args)
        self.temperature = temperature if isinstance(temperature, Tensor) else _vl.tensor(
            float(temperature), dtype=self._categorical._param.dtype)
        super().__init__(self._categorical.batch_shape, self._categorical.param_shape[-1:],
                         validate_args=validate_args)

    probs = property(lambda self: self._categorical.probs)
    logits = property(lambda self: self._categorical.logits)

    def rsample(self, sample_shape=Size(), generator=None):
        lg = self.logits
        u = clamp_probs(Tensor._make(rng(generator).random(self._extended_shape(sample_shape)).astype(
            lg._data.dtype)))
        scores = (lg - _vl.log(-_vl.log(u))) / self.temperature
        return clamp_probs(_vl.exp(scores - _vl.logsumexp(scores, -1, keepdim=True)))

    def log_prob(self, value):
        if self._validate_args:
            self._validate_sample(value)
        x = _vl.log(value.to(self.logits.dtype))
        K = self.event_shape[0]
        t = self.temperature
        log_scale = math.lgamma(K) - _vl.log(t) * -(K - 1)
        score = self.logits - x * t
        score = (score - _vl.logsumexp(score, -1, keepdim=True)).sum(-1)
        return score + log_scale - x.sum(-1)


class OneHotCategoricalStraightThrough(OneHotCategorical):
    """OneHotCategorical whose rsample is the straight-through estimator: the one-hot draw in the
    forward pass, the gradient of probs in the backward pass (sample + probs - probs.detach())."""

    has_rsample = True

    def rsample(self, sample_shape=Size(), generator=None):
        s = self._sample(shape_of(sample_shape), generator)
        p = self.probs
        return s + (p - p.detach())


class ContinuousBernoulli(_BinaryParams):
    """The continuous Bernoulli on [0, 1]: density C(p) p^x (1 - p)^(1 - x).  Near p = 1/2 (inside
    ``lims``) the normaliser, mean and variance use their Taylor expansions, as torch; rsample is the
    inverse cdf of a uniform draw."""

    arg_constraints = {"probs": constraints.unit_interval, "logits": constraints.real}
    support = constraints.unit_interval
    has_rsample = True

    def __init__(self, probs=None, logits=None, lims=(0.499, 0.501), validate_args=None):
        self._set_params(probs, logits)
        if probs is not None:
            if validate_args is not False and not bool(constraints.unit_interval.check(self.probs)._data.all()):
                raise ValueError("The parameter probs has invalid values")
            self.probs = self._param = clamp_probs(self.probs)
        self._lims = lims
        super().__init__(self._param.shape, validate_args=validate_args)

    @lazy_property
    def probs(self):
        return clamp_probs(logits_to_probs(self.logits, is_binary=True))

    def _stable(self):
        return (self.probs <= self._lims[0]) | (self.probs > self._lims[1])

    def _cut(self):
        return _vl.where(self._stable(), self.probs, self._lims[0] * _vl.ones_like(self.probs))

    def _log_norm(self):
        c = self._cut()
        below = _vl.where(c <= 0.5, c, _vl.zeros_like(c))
        above = _vl.where(c >= 0.5, c, _vl.ones_like(c))
        exact = _vl.log(_vl.abs(_vl.log1p(-c) - _vl.log(c))) - _vl.where(
            c <= 0.5, _vl.log1p(-2.0 * below), _vl.log(2.0 * above - 1.0))
        x = (self.probs - 0.5) ** 2
        return _vl.where(self._stable(), exact, math.log(2.0) + (4.0 / 3.0 + 104.0 / 45.0 * x) * x)

    @property
    def mean(self):
        c = self._cut()
        exact = c / (2.0 * c - 1.0) + 1.0 / (_vl.log1p(-c) - _vl.log(c))
        x = self.probs - 0.5
        return _vl.where(self._stable(), exact, 0.5 + (1.0 / 3.0 + 16.0 / 45.0 * x * x) * x)

    @property
    def variance(self):
        c = self._cut()
        exact = c * (c - 1.0) / (1.0 - 2.0 * c) ** 2 + 1.0 / (_vl.log1p(-c) - _vl.log(c)) ** 2
        x = (self.probs - 0.5) ** 2
        return _vl.where(self._stable(), exact, 1.0 / 12.0 - (1.0 / 15.0 - 128.0 / 945.0 * x) * x)

    def rsample(self, sample_shape=Size(), generator=None):
        u = Tensor._make(rng(generator).random(tuple(self._extended_shape(sample_shape))).astype(
            self._param._data.dtype))
        return self.icdf(u)

    def log_prob(self, value):
        v = self._value(value, self._param)
        return -_bce_logits(self.logits, v) + self._log_norm()

    def cdf(self, value):
        v = self._value(value, self._param)
        c = self._cut()
        cdfs = (c ** v * (1.0 - c) ** (1.0 - v) + c - 1.0) / (2.0 * c - 1.0)
        inner = _vl.where(self._stable(), cdfs, v)
        return _vl.where(v <= 0.0, _vl.zeros_like(inner), _vl.where(v >= 1.0, _vl.ones_like(inner), inner))

    def icdf(self, value):
        c = self._cut()
        exact = (_vl.log1p(-c + value * (2.0 * c - 1.0)) - _vl.log1p(-c)) / (_vl.log(c) - _vl.log1p(-c))
        return _vl.where(self._stable(), exact, value + 0 * c)

    def entropy(self):
        l0, l1 = _vl.log1p(-self.probs), _vl.log(self.probs)
        return self.mean * (l0 - l1) - self._log_norm() - l0


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
