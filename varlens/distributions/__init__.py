"""varlens.distributions: the common part of torch.distributions, built from differentiable ops.

Normal, Bernoulli, Categorical and Uniform with PyTorch's constructor arguments and methods
(``sample``, ``rsample`` where the reparametrisation exists, ``log_prob``, ``entropy``, ``mean``,
``variance``, ``stddev``), and ``kl_divergence`` for the pairs of the same family.  Every density
is written with varlens ops, so gradients flow through ``log_prob``, ``entropy``, ``rsample`` and
the KL terms (the VAE's closed-form KL of seed 003 §10 is ``kl_divergence(Normal, Normal(0, 1))``).
Draws use the global generator (``varlens.manual_seed``) unless ``generator=`` is given: same seed,
same draws on every machine, but not PyTorch's draws.
"""
from __future__ import annotations

import math

import varlens as _vl
from varlens.backend import xp
from varlens.random import _gen
from varlens.tensor import Tensor

__all__ = ["Distribution", "Normal", "Bernoulli", "Categorical", "Uniform", "kl_divergence"]


def _t(v, like=None):
    if isinstance(v, Tensor):
        return v
    dtype = like.dtype if isinstance(like, Tensor) else None
    return _vl.tensor(v, dtype=dtype) if dtype is not None else _vl.tensor(float(v) if isinstance(v, (int, float)) else v)


def _shape(sample_shape):
    if isinstance(sample_shape, int):
        return (sample_shape,)
    return tuple(sample_shape)


class Distribution:
    """Base class: ``batch_shape``, ``event_shape`` and ``sample`` without gradient."""

    has_rsample = False
    event_shape = ()

    def __init__(self, batch_shape, validate_args=None):
        self.batch_shape = tuple(batch_shape)

    def sample(self, sample_shape=(), generator=None):
        with _vl.no_grad():
            return self._draw(_shape(sample_shape), generator)

    def rsample(self, sample_shape=(), generator=None):
        if not self.has_rsample:
            raise NotImplementedError(f"{type(self).__name__} has no reparametrised sample (rsample); "
                                      "use sample() (no gradient) or a score-function estimator")
        return self._draw(_shape(sample_shape), generator)

    @property
    def stddev(self):
        return _vl.sqrt(self.variance)

    def __repr__(self):
        return f"{type(self).__name__}(batch_shape={self.batch_shape})"


class Normal(Distribution):
    """N(loc, scale^2).  rsample = loc + scale * eps with eps ~ N(0, 1) (the reparametrisation
    trick, seed 003 §10)."""

    has_rsample = True

    def __init__(self, loc, scale, validate_args=None):
        self.loc, self.scale = _t(loc), _t(scale)
        if self.loc.dtype != self.scale.dtype:
            self.scale = self.scale.to(self.loc.dtype) if self.loc.dtype.kind == "f" else self.scale
        if validate_args is not False and bool((self.scale._data <= 0).any()):
            raise ValueError("Normal: scale must be positive (got a value <= 0)")
        shape = xp.broadcast_shapes(self.loc.shape, self.scale.shape)
        super().__init__(shape)

    @property
    def mean(self):
        return _vl.broadcast_to(self.loc, self.batch_shape)

    @property
    def variance(self):
        return _vl.broadcast_to(self.scale * self.scale, self.batch_shape)

    def _draw(self, sample_shape, generator):
        g = _gen(generator)
        eps = Tensor._make(g.normal(0.0, 1.0, sample_shape + self.batch_shape).astype(self.loc.dtype))
        return self.loc + self.scale * eps

    def log_prob(self, value):
        v = _t(value, self.loc)
        z = (v - self.loc) / self.scale
        return -0.5 * z * z - _vl.log(self.scale) - 0.5 * math.log(2 * math.pi)

    def cdf(self, value):
        v = _t(value, self.loc)
        return 0.5 * (1 + _vl.erf((v - self.loc) / (self.scale * math.sqrt(2))))

    def entropy(self):
        return _vl.broadcast_to(0.5 + 0.5 * math.log(2 * math.pi) + _vl.log(self.scale), self.batch_shape)


class Uniform(Distribution):
    """U[low, high); rsample = low + (high - low) u."""

    has_rsample = True

    def __init__(self, low, high, validate_args=None):
        self.low, self.high = _t(low), _t(high)
        if validate_args is not False and bool((self.high._data <= self.low._data).any()):
            raise ValueError("Uniform: high must be greater than low")
        super().__init__(xp.broadcast_shapes(self.low.shape, self.high.shape))

    @property
    def mean(self):
        return _vl.broadcast_to((self.low + self.high) / 2, self.batch_shape)

    @property
    def variance(self):
        w = self.high - self.low
        return _vl.broadcast_to(w * w / 12, self.batch_shape)

    def _draw(self, sample_shape, generator):
        u = Tensor._make(_gen(generator).random(sample_shape + self.batch_shape).astype(self.low.dtype))
        return self.low + (self.high - self.low) * u

    def log_prob(self, value):
        v = _t(value, self.low)
        inside = ((v >= self.low) & (v < self.high))._data
        lp = -_vl.log(self.high - self.low) + v * 0
        return _vl.where(inside, lp, -math.inf)

    def entropy(self):
        return _vl.broadcast_to(_vl.log(self.high - self.low), self.batch_shape)


class Bernoulli(Distribution):
    """Bernoulli(probs) or Bernoulli(logits=...); log_prob is minus the binary cross-entropy."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Bernoulli: pass exactly one of probs or logits")
        if probs is not None:
            self.probs = _t(probs)
            self.logits = _vl.log(_vl.clamp(self.probs, 1e-12, 1 - 1e-12)) - \
                _vl.log(_vl.clamp(1 - self.probs, 1e-12, 1))
        else:
            self.logits = _t(logits)
            self.probs = _vl.sigmoid(self.logits)
        super().__init__(self.probs.shape)

    @property
    def mean(self):
        return self.probs

    @property
    def variance(self):
        return self.probs * (1 - self.probs)

    def _draw(self, sample_shape, generator):
        u = _gen(generator).random(sample_shape + self.batch_shape)
        return Tensor._make((u < self.probs._data).astype(self.probs.dtype))

    def log_prob(self, value):
        import varlens.nn.functional as F
        v = _t(value, self.logits)
        return -F.binary_cross_entropy_with_logits(self.logits, _vl.broadcast_to(v, self.logits.shape)
                                                   if v.shape != self.logits.shape else v, reduction="none")

    def entropy(self):
        import varlens.nn.functional as F
        return F.binary_cross_entropy_with_logits(self.logits, self.probs, reduction="none")


class Categorical(Distribution):
    """Categorical over the last axis of ``probs`` (normalised here) or ``logits``."""

    def __init__(self, probs=None, logits=None, validate_args=None):
        if (probs is None) == (logits is None):
            raise ValueError("Categorical: pass exactly one of probs or logits")
        if probs is not None:
            p = _t(probs)
            if p.ndim == 0:
                raise ValueError("Categorical: probs must have at least one dimension (the categories)")
            self.probs = p / p.sum(-1, keepdim=True)
            self.logits = _vl.log(_vl.clamp(self.probs, 1e-38, None))
        else:
            lg = _t(logits)
            if lg.ndim == 0:
                raise ValueError("Categorical: logits must have at least one dimension (the categories)")
            self.logits = lg - _vl.logsumexp(lg, -1, keepdim=True)
            self.probs = _vl.exp(self.logits)
        self.num_categories = self.probs.shape[-1]
        super().__init__(self.probs.shape[:-1])

    @property
    def mean(self):
        return _vl.full(self.batch_shape, math.nan)

    @property
    def variance(self):
        return _vl.full(self.batch_shape, math.nan)

    def _draw(self, sample_shape, generator):
        p = self.probs._data.reshape(-1, self.num_categories)
        n = int(xp.prod(sample_shape)) if sample_shape else 1
        draws = _vl.multinomial(Tensor._make(p), n, replacement=True, generator=generator)._data  # (rows, n)
        out = draws.T.reshape(sample_shape + self.batch_shape)
        return Tensor._make(out)

    def log_prob(self, value):
        v = value._data if isinstance(value, Tensor) else xp.asarray(value)
        v = v.astype(xp.int64)
        shape = xp.broadcast_shapes(v.shape, self.batch_shape)
        lg = _vl.broadcast_to(self.logits, shape + (self.num_categories,))
        idx = Tensor._make(xp.broadcast_to(v, shape)[..., None].copy())
        return _vl.gather(lg, -1, idx).squeeze(-1)

    def entropy(self):
        return -(self.probs * self.logits).sum(-1)


def kl_divergence(p, q):
    """KL(p || q) for two distributions of the same family (Normal, Bernoulli, Categorical,
    Uniform), as torch.distributions.kl_divergence."""
    if isinstance(p, Normal) and isinstance(q, Normal):
        vr = (p.scale / q.scale) ** 2
        d = (p.loc - q.loc) / q.scale
        return 0.5 * (vr + d * d - 1 - _vl.log(vr))
    if isinstance(p, Categorical) and isinstance(q, Categorical):
        return (p.probs * (p.logits - q.logits)).sum(-1)
    if isinstance(p, Bernoulli) and isinstance(q, Bernoulli):
        import varlens.nn.functional as F
        return F.binary_cross_entropy_with_logits(q.logits, p.probs, reduction="none") - \
            F.binary_cross_entropy_with_logits(p.logits, p.probs, reduction="none")
    if isinstance(p, Uniform) and isinstance(q, Uniform):
        inside = ((q.low <= p.low) & (p.high <= q.high))._data
        return _vl.where(inside, _vl.log((q.high - q.low) / (p.high - p.low)), math.inf)
    raise NotImplementedError(f"kl_divergence: no formula for {type(p).__name__} || {type(q).__name__} "
                              "(varlens has Normal, Bernoulli, Categorical and Uniform pairs)")
