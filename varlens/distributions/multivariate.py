"""Families with a non-trivial event_shape: Independent, MultivariateNormal, LowRankMultivariateNormal,
Dirichlet, LogisticNormal."""
from __future__ import annotations

import math

import varlens as _vl
import varlens.linalg as _la
from varlens.core.array import xp
from varlens.distributions import constraints
from varlens.distributions._gamma import standard_gamma
from varlens.distributions.distribution import Distribution, lazy_property, rng, sum_rightmost
from varlens.distributions.transforms import TransformedDistribution
from varlens.core.tensor import Size, Tensor


class Independent(Distribution):
    """Reinterprets the rightmost ``reinterpreted_batch_ndims`` batch dims of ``base_distribution``
    as event dims: log_prob and entropy sum over them."""

    arg_constraints = {}

    def __init__(self, base_distribution, reinterpreted_batch_ndims, validate_args=None):
        if not isinstance(base_distribution, Distribution):
            raise TypeError(f"Independent: base_distribution must be a Distribution, got "
                            f"{type(base_distribution).__name__}")
        n = int(reinterpreted_batch_ndims)
        if n < 0 or n > len(base_distribution.batch_shape):
            raise ValueError("Expected reinterpreted_batch_ndims <= len(base_distribution.batch_shape), "
                             f"actual {n} vs {len(base_distribution.batch_shape)}")
        self.base_dist, self.reinterpreted_batch_ndims = base_distribution, n
        shape = tuple(base_distribution.batch_shape) + tuple(base_distribution.event_shape)
        event_dim = n + len(base_distribution.event_shape)
        super().__init__(shape[:len(shape) - event_dim], shape[len(shape) - event_dim:],
                         validate_args=validate_args)

    def expand(self, batch_shape, _instance=None):
        batch_shape = tuple(batch_shape)
        base = self.base_dist.expand(batch_shape + tuple(self.event_shape[:self.reinterpreted_batch_ndims]))
        return Independent(base, self.reinterpreted_batch_ndims, validate_args=False)

    has_rsample = property(lambda self: self.base_dist.has_rsample)
    has_enumerate_support = property(lambda self: False if self.reinterpreted_batch_ndims > 0
                                     else self.base_dist.has_enumerate_support)

    @property
    def support(self):
        s = self.base_dist.support
        return constraints.independent(s, self.reinterpreted_batch_ndims) if self.reinterpreted_batch_ndims else s

    mean = property(lambda self: self.base_dist.mean)
    mode = property(lambda self: self.base_dist.mode)
    variance = property(lambda self: self.base_dist.variance)

    def sample(self, sample_shape=Size(), generator=None):
        return self.base_dist.sample(sample_shape, generator)

    def rsample(self, sample_shape=Size(), generator=None):
        return self.base_dist.rsample(sample_shape, generator)

    def log_prob(self, value):
        return sum_rightmost(self.base_dist.log_prob(value), self.reinterpreted_batch_ndims)

    def entropy(self):
        return sum_rightmost(self.base_dist.entropy(), self.reinterpreted_batch_ndims)

    def enumerate_support(self, expand=True):
        if self.reinterpreted_batch_ndims > 0:
            raise NotImplementedError("Enumeration over cartesian product is not implemented")
        return self.base_dist.enumerate_support(expand)

    def __repr__(self):
        return f"Independent({self.base_dist!r}, {self.reinterpreted_batch_ndims})"


def _tensor(v):
    v = v if isinstance(v, Tensor) else _vl.tensor(v)
    return v if v.dtype.kind == "f" else v.to(_vl.get_default_dtype())


class MultivariateNormal(Distribution):
    """N(loc, Sigma) with exactly one of covariance_matrix, precision_matrix or scale_tril.

    Everything goes through the lower Cholesky factor L (Sigma = L L^T): rsample = loc + L eps,
    log_prob = -1/2 |L^-1 (x - loc)|^2 - sum log diag L - d/2 log 2 pi (triangular solve, no
    inverse), entropy = d/2 (1 + log 2 pi) + sum log diag L; all differentiable through
    varlens.linalg.cholesky / solve_triangular."""

    arg_constraints = {"loc": constraints.real_vector, "covariance_matrix": constraints.positive_definite,
                       "precision_matrix": constraints.positive_definite, "scale_tril": constraints.lower_cholesky}
    support = constraints.real_vector
    has_rsample = True
    _event_dims = {"loc": 1, "covariance_matrix": 2, "precision_matrix": 2, "scale_tril": 2,
                   "_unbroadcasted_scale_tril": 2}

    def __init__(self, loc, covariance_matrix=None, precision_matrix=None, scale_tril=None, validate_args=None):
        loc = _tensor(loc)
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        if (covariance_matrix is not None) + (scale_tril is not None) + (precision_matrix is not None) != 1:
            raise ValueError("Exactly one of covariance_matrix or precision_matrix or scale_tril may be specified.")
        name, m = next((n, _tensor(v)) for n, v in (("scale_tril", scale_tril), ("covariance_matrix",
                       covariance_matrix), ("precision_matrix", precision_matrix)) if v is not None)
        if m.ndim < 2:
            what = "scale_tril matrix" if name == "scale_tril" else name.replace("_", " ")
            raise ValueError(f"{what} must be at least two-dimensional, with optional leading batch dimensions")
        if m.shape[-1] != m.shape[-2] or m.shape[-1] != loc.shape[-1]:
            raise ValueError(f"MultivariateNormal: {name} must be square with the size of loc's last dim "
                             f"({loc.shape[-1]}), got shape {tuple(m.shape)}")
        batch_shape = xp.broadcast_shapes(tuple(m.shape[:-2]), tuple(loc.shape[:-1]))
        d = loc.shape[-1]
        self.__dict__[name] = _vl.broadcast_to(m, batch_shape + (d, d))
        self.loc = _vl.broadcast_to(loc, batch_shape + (d,))
        super().__init__(batch_shape, (d,), validate_args=validate_args)
        if name == "scale_tril":
            self._unbroadcasted_scale_tril = m
        elif name == "covariance_matrix":
            self._unbroadcasted_scale_tril = _la.cholesky(m)
        else:
            self._unbroadcasted_scale_tril = _la.cholesky(_la.inv(m))

    def _L(self):
        return _vl.broadcast_to(self._unbroadcasted_scale_tril, tuple(self.batch_shape) + tuple(self.event_shape) * 2)

    @lazy_property
    def scale_tril(self):
        return self._L()

    @lazy_property
    def covariance_matrix(self):
        L = self._L()
        return L @ L.transpose(-1, -2)

    @lazy_property
    def precision_matrix(self):
        return _la.inv(self.covariance_matrix)

    @property
    def mean(self):
        return self.loc

    mode = mean

    @property
    def variance(self):
        L = self._L()
        return (L * L).sum(-1)

    def rsample(self, sample_shape=Size(), generator=None):
        shape = self._extended_shape(sample_shape)
        eps = Tensor._make(rng(generator).standard_normal(tuple(shape)).astype(self.loc._data.dtype))
        return self.loc + (self._unbroadcasted_scale_tril @ eps.unsqueeze(-1)).squeeze(-1)

    def _mahalanobis(self, diff):
        """|L^-1 diff|^2 over the event dim, L broadcast to diff's batch shape."""
        L = self._unbroadcasted_scale_tril
        shape = xp.broadcast_shapes(tuple(diff.shape[:-1]), tuple(L.shape[:-2]))
        d = self.event_shape[0]
        z = _la.solve_triangular(_vl.broadcast_to(L, shape + (d, d)),
                                 _vl.broadcast_to(diff, shape + (d,)).unsqueeze(-1), upper=False)
        return (z * z).sum((-2, -1))

    def _half_log_det(self):
        return _vl.log(_vl.diagonal(self._unbroadcasted_scale_tril, 0, -2, -1)).sum(-1)

    def log_prob(self, value):
        v = self._value(value, self.loc)
        m = self._mahalanobis(v - self.loc)
        d = self.event_shape[0]
        return -0.5 * (d * math.log(2 * math.pi) + m) - self._half_log_det()

    def entropy(self):
        d = self.event_shape[0]
        h = 0.5 * d * (1.0 + math.log(2 * math.pi)) + self._half_log_det()
        return h if tuple(h.shape) == tuple(self.batch_shape) else _vl.broadcast_to(h, tuple(self.batch_shape))

    def _expand_extra(self, old, batch_shape):
        self._unbroadcasted_scale_tril = old._unbroadcasted_scale_tril


class Dirichlet(Distribution):
    """Dirichlet(concentration) on the simplex (event_shape = concentration's last dim).
    rsample = G / sum(G) with G_i ~ Gamma(concentration_i, 1), differentiable through the Gammas'
    implicit reparametrisation (torch uses the Dirichlet's own implicit derivative: the per-draw
    gradients differ, their expectation is the same)."""

    arg_constraints = {"concentration": constraints.independent(constraints.positive, 1)}
    support = constraints.simplex
    has_rsample = True
    _event_dims = {"concentration": 1}

    def __init__(self, concentration, validate_args=None):
        c = _tensor(concentration)
        if c.ndim < 1:
            raise ValueError("`concentration` parameter must be at least one-dimensional.")
        self.concentration = c
        super().__init__(c.shape[:-1], c.shape[-1:], validate_args=validate_args)

    @property
    def mean(self):
        return self.concentration / self.concentration.sum(-1, keepdim=True)

    @property
    def mode(self):
        c = self.concentration
        cm1 = _vl.clamp(c - 1, min=0.0)
        tot = cm1.sum(-1, keepdim=True)
        mode = cm1 / _vl.where(tot > 0, tot, 1.0)
        all_small = (c < 1).all(-1, keepdim=True)
        hot = _vl.one_hot(_vl.argmax(mode, -1), c.shape[-1]).to(c.dtype)
        return _vl.where(all_small, hot, mode)

    @property
    def variance(self):
        c = self.concentration
        c0 = c.sum(-1, keepdim=True)
        return c * (c0 - c) / (c0 * c0 * (c0 + 1))

    def rsample(self, sample_shape=Size(), generator=None):
        g = standard_gamma(self.concentration, tuple(self._extended_shape(sample_shape)), rng(generator))
        tiny = float(xp.finfo(g.dtype).tiny)
        return _vl.clamp(g / g.sum(-1, keepdim=True), tiny, 1 - float(xp.finfo(g.dtype).eps))

    def log_prob(self, value):
        v = self._value(value, self.concentration)
        c = self.concentration
        return _vl.xlogy(c - 1, v).sum(-1) + _vl.lgamma(c.sum(-1)) - _vl.lgamma(c).sum(-1)

    def entropy(self):
        c = self.concentration
        k = c.shape[-1]
        a0 = c.sum(-1)
        return _vl.lgamma(c).sum(-1) - _vl.lgamma(a0) - (k - a0) * _vl.digamma(a0) - \
            ((c - 1) * _vl.digamma(c)).sum(-1)


__all__ = ["Independent", "MultivariateNormal", "Dirichlet"]


class LowRankMultivariateNormal(MultivariateNormal):
    """N(loc, cov_factor cov_factor^T + diag(cov_diag)).  rsample = loc + W eps_W + sqrt(D) eps_D (as
    torch); log_prob/entropy go through the Cholesky factor of the full covariance (O(n^3), where torch
    uses the Woodbury identity in O(n r^2): same values).  Unlike torch it is a MultivariateNormal
    subclass, so the MultivariateNormal KL formulas apply to it."""

    arg_constraints = {"loc": constraints.real_vector,
                       "cov_factor": constraints.independent(constraints.real, 2),
                       "cov_diag": constraints.independent(constraints.positive, 1)}
    _event_dims = {"loc": 1, "cov_factor": 2, "cov_diag": 1, "_unbroadcasted_scale_tril": 2}

    def __init__(self, loc, cov_factor, cov_diag, validate_args=None):
        loc, cov_factor, cov_diag = _tensor(loc), _tensor(cov_factor), _tensor(cov_diag)
        if loc.ndim < 1:
            raise ValueError("loc must be at least one-dimensional.")
        n = loc.shape[-1]
        if cov_factor.ndim < 2:
            raise ValueError("cov_factor must be at least two-dimensional, with optional leading batch dimensions")
        if cov_factor.shape[-2] != n:
            raise ValueError(f"cov_factor must be a batch of matrices with shape {n} x m")
        if cov_diag.ndim < 1 or cov_diag.shape[-1] != n:
            raise ValueError(f"cov_diag must be a batch of vectors with shape {(n,)}")
        r = cov_factor.shape[-1]
        batch = xp.broadcast_shapes(tuple(loc.shape[:-1]), tuple(cov_factor.shape[:-2]), tuple(cov_diag.shape[:-1]))
        self.loc = _vl.broadcast_to(loc, batch + (n,))
        self.cov_factor = _vl.broadcast_to(cov_factor, batch + (n, r))
        self.cov_diag = _vl.broadcast_to(cov_diag, batch + (n,))
        Distribution.__init__(self, batch, (n,), validate_args=validate_args)
        cov = cov_factor @ cov_factor.transpose(-1, -2) + _vl.diag_embed(cov_diag)
        self._unbroadcasted_scale_tril = _la.cholesky(cov)

    @property
    def variance(self):
        return (self.cov_factor ** 2).sum(-1) + self.cov_diag

    def rsample(self, sample_shape=Size(), generator=None):
        shape = tuple(self._extended_shape(sample_shape))
        r = rng(generator)
        dt = self.loc._data.dtype
        eps_w = Tensor._make(r.standard_normal(shape[:-1] + (self.cov_factor.shape[-1],)).astype(dt))
        eps_d = Tensor._make(r.standard_normal(shape).astype(dt))
        return self.loc + (self.cov_factor @ eps_w.unsqueeze(-1)).squeeze(-1) + _vl.sqrt(self.cov_diag) * eps_d


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
