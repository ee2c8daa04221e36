"""kl_divergence(p, q) with torch's registry: register_kl(TypeP, TypeQ) decorates a function; the
most specific registered pair (by the two classes' MROs) is used."""
from __future__ import annotations

import math

import varlens as _vl
import varlens.linalg as _la
from varlens.core.array import xp
from varlens.distributions.continuous import (Beta, Cauchy, Exponential, Gamma, HalfNormal, Laplace, LogNormal,
                                              Normal, Uniform)
from varlens.distributions.discrete import (Bernoulli, Binomial, Categorical, Geometric, OneHotCategorical,
                                            Poisson, _bce_logits)
from varlens.distributions.multivariate import Dirichlet, Independent, MultivariateNormal
from varlens.distributions.distribution import sum_rightmost
from varlens.distributions.continuous import Gumbel, Pareto
from varlens.distributions.transforms import TransformedDistribution

__all__ = ["kl_divergence", "register_kl"]

_KL_REGISTRY: dict = {}
_KL_MEMOIZE: dict = {}


def register_kl(type_p, type_q):
    """Decorator: ``@register_kl(Normal, Normal) def kl(p, q): ...``."""
    if not isinstance(type_p, type) or not isinstance(type_q, type):
        raise TypeError(f"Expected type_p and type_q to be classes, got {type_p!r} and {type_q!r}")

    def decorator(fn):
        _KL_REGISTRY[type_p, type_q] = fn
        _KL_MEMOIZE.clear()
        return fn
    return decorator


def _dispatch(tp, tq):
    matches = [(tp.__mro__.index(p), tq.__mro__.index(q), p, q) for p, q in _KL_REGISTRY
               if issubclass(tp, p) and issubclass(tq, q)]
    if not matches:
        return None
    return _KL_REGISTRY[min(matches, key=lambda m: (m[0] + m[1], m[0]))[2:]]


def kl_divergence(p, q):
    """KL(p || q) = E_p[log p(x) - log q(x)] in closed form, batched over batch_shape."""
    key = (type(p), type(q))
    fn = _KL_MEMOIZE.get(key)
    if fn is None:
        fn = _KL_MEMOIZE[key] = _dispatch(*key)
    if fn is None:
        raise NotImplementedError(f"No KL(p || q) is implemented for p type {type(p).__name__} and "
                                  f"q type {type(q).__name__}")
    return fn(p, q)



@register_kl(Normal, Normal)
def _kl_normal_normal(p, q):
    vr = (p.scale / q.scale) ** 2
    d = (p.loc - q.loc) / q.scale
    return 0.5 * (vr + d * d - 1 - _vl.log(vr))


@register_kl(LogNormal, LogNormal)
def _kl_lognormal_lognormal(p, q):
    return _kl_normal_normal(p.base_dist, q.base_dist)


@register_kl(HalfNormal, HalfNormal)
def _kl_halfnormal_halfnormal(p, q):
    vr = (p.scale / q.scale) ** 2
    return 0.5 * (vr - 1 - _vl.log(vr))


@register_kl(Uniform, Uniform)
def _kl_uniform_uniform(p, q):
    outside = (q.low > p.low) | (q.high < p.high)
    return _vl.where(outside, math.inf, _vl.log((q.high - q.low) / (p.high - p.low)))


@register_kl(Uniform, Normal)
def _kl_uniform_normal(p, q):
    w = p.high - p.low
    t1 = _vl.log(math.sqrt(2 * math.pi) * q.scale / w)
    t2 = w * w / 12
    t3 = ((p.high + p.low - 2 * q.loc) / 2) ** 2
    return t1 + 0.5 * (t2 + t3) / q.scale ** 2


@register_kl(Bernoulli, Bernoulli)
def _kl_bernoulli_bernoulli(p, q):
    return _bce_logits(q.logits, p.probs) - _bce_logits(p.logits, p.probs)


@register_kl(Binomial, Binomial)
def _kl_binomial_binomial(p, q):
    if bool((p.total_count._data < q.total_count._data).any()):
        raise NotImplementedError("KL between Binomials where q.total_count > p.total_count is not implemented")
    kl = p.total_count * (p.probs * (p.logits - q.logits) + _vl.log1p(-p.probs) - _vl.log1p(-q.probs))
    return _vl.where((p.total_count > q.total_count), math.inf, kl)


@register_kl(Categorical, Categorical)
def _kl_categorical_categorical(p, q):
    t = p.probs * (p.logits - q.logits)
    t = _vl.where((q.probs == 0), math.inf, t)
    t = _vl.where((p.probs == 0), 0.0, t)
    return t.sum(-1)


@register_kl(OneHotCategorical, OneHotCategorical)
def _kl_onehot_onehot(p, q):
    return _kl_categorical_categorical(p._categorical, q._categorical)


@register_kl(Geometric, Geometric)
def _kl_geometric_geometric(p, q):
    return -p.entropy() - _vl.log1p(-q.probs) / p.probs - q.logits


@register_kl(Poisson, Poisson)
def _kl_poisson_poisson(p, q):
    return p.rate * (_vl.log(p.rate) - _vl.log(q.rate)) - (p.rate - q.rate)


@register_kl(Exponential, Exponential)
def _kl_exponential_exponential(p, q):
    r = q.rate / p.rate
    return r - 1 - _vl.log(r)


@register_kl(Laplace, Laplace)
def _kl_laplace_laplace(p, q):
    sr = p.scale / q.scale
    ad = _vl.abs(p.loc - q.loc)
    return -_vl.log(sr) + ad / q.scale + sr * _vl.exp(-ad / p.scale) - 1


@register_kl(Cauchy, Cauchy)
def _kl_cauchy_cauchy(p, q):
    t1 = _vl.log(((p.scale + q.scale) ** 2 + (p.loc - q.loc) ** 2))
    return t1 - _vl.log(4 * p.scale * q.scale)


@register_kl(Gamma, Gamma)
def _kl_gamma_gamma(p, q):
    t1 = q.concentration * _vl.log(p.rate / q.rate)
    t2 = _vl.lgamma(q.concentration) - _vl.lgamma(p.concentration)
    t3 = (p.concentration - q.concentration) * _vl.digamma(p.concentration)
    t4 = (q.rate - p.rate) * (p.concentration / p.rate)
    return t1 + t2 + t3 + t4


@register_kl(Exponential, Gamma)
def _kl_exponential_gamma(p, q):
    r = q.rate / p.rate
    t1 = -q.concentration * _vl.log(r)
    euler = 0.5772156649015329
    return t1 + r + _vl.lgamma(q.concentration) + q.concentration * euler - (1 + euler)


@register_kl(Beta, Beta)
def _kl_beta_beta(p, q):
    sp = p.concentration1 + p.concentration0
    sq = q.concentration1 + q.concentration0
    t1 = _vl.lgamma(q.concentration1) + _vl.lgamma(q.concentration0) + _vl.lgamma(sp)
    t2 = _vl.lgamma(p.concentration1) + _vl.lgamma(p.concentration0) + _vl.lgamma(sq)
    t3 = (p.concentration1 - q.concentration1) * _vl.digamma(p.concentration1)
    t4 = (p.concentration0 - q.concentration0) * _vl.digamma(p.concentration0)
    t5 = (sq - sp) * _vl.digamma(sp)
    return t1 - t2 + t3 + t4 + t5


@register_kl(Dirichlet, Dirichlet)
def _kl_dirichlet_dirichlet(p, q):
    sp = p.concentration.sum(-1)
    sq = q.concentration.sum(-1)
    t1 = _vl.lgamma(sp) - _vl.lgamma(sq)
    t2 = (_vl.lgamma(p.concentration) - _vl.lgamma(q.concentration)).sum(-1)
    t3 = p.concentration - q.concentration
    t4 = _vl.digamma(p.concentration) - _vl.digamma(sp).unsqueeze(-1)
    return t1 - t2 + (t3 * t4).sum(-1)


@register_kl(MultivariateNormal, MultivariateNormal)
def _kl_mvn_mvn(p, q):
    """1/2 [tr(Sq^-1 Sp) + (mq - mp)^T Sq^-1 (mq - mp) - d + log det Sq - log det Sp], every term
    through the Cholesky factors (tr(Sq^-1 Sp) = |Lq^-1 Lp|_F^2)."""
    if p.event_shape != q.event_shape:
        raise ValueError("KL-divergence between two Multivariate Normals with different event shapes "
                         "cannot be computed")
    d = p.event_shape[0]
    shape = xp.broadcast_shapes(tuple(p.batch_shape), tuple(q.batch_shape))
    Lp = _vl.broadcast_to(p._unbroadcasted_scale_tril, shape + (d, d))
    Lq = _vl.broadcast_to(q._unbroadcasted_scale_tril, shape + (d, d))
    half_term1 = q._half_log_det() - p._half_log_det()
    m = _la.solve_triangular(Lq, Lp, upper=False)
    term2 = (m * m).sum((-2, -1))
    term3 = q._mahalanobis(q.loc - p.loc)
    return half_term1 + 0.5 * (term2 + term3 - d)


@register_kl(Independent, Independent)
def _kl_independent_independent(p, q):
    if p.reinterpreted_batch_ndims != q.reinterpreted_batch_ndims:
        raise NotImplementedError("KL between Independents with different reinterpreted_batch_ndims")
    return sum_rightmost(kl_divergence(p.base_dist, q.base_dist), p.reinterpreted_batch_ndims)


# ---- mixed families (torch registers these): cross-entropy E_p[-log q] minus the entropy of p
def _normal_cross(q, m1, m2):
    """E_p[-log N(x; q.loc, q.scale)] from p's first two moments m1 = E x, m2 = E x^2."""
    var = q.scale ** 2
    return 0.5 * _vl.log(2 * math.pi * var) + (0.5 * m2 - q.loc * m1 + 0.5 * q.loc ** 2) / var


def _gamma_cross(q, m1, elog):
    """E_p[-log Gamma(x; q)] from E x and E log x."""
    return _vl.lgamma(q.concentration) - q.concentration * _vl.log(q.rate) - (q.concentration - 1) * elog + \
        q.rate * m1


def _beta_moments(p):
    t = p.concentration1 + p.concentration0
    m1 = p.concentration1 / t
    return m1, m1 * (1 - m1) / (t + 1) + m1 * m1, _vl.digamma(p.concentration1) - _vl.digamma(t)


def _kl_beta(minus_entropy_plus_cross):
    """KL(Beta p || q) = -H(p) + E_p[-log q]; the argument adds the cross-entropy to -H(p) from the
    Beta moments E x, E x^2, E log x: fn(-H(p), q, m1, m2, elog)."""
    def kl(p, q):
        m1, m2, elog = _beta_moments(p)
        return minus_entropy_plus_cross(-p.entropy(), q, m1, m2, elog)
    return kl


register_kl(Beta, Normal)(_kl_beta(lambda h, q, m1, m2, elog: h + _normal_cross(q, m1, m2)))
register_kl(Beta, Exponential)(_kl_beta(lambda h, q, m1, m2, elog: h - _vl.log(q.rate) + q.rate * m1))
register_kl(Beta, Gamma)(_kl_beta(lambda h, q, m1, m2, elog: h + _gamma_cross(q, m1, elog)))


@register_kl(Beta, Uniform)
def _kl_beta_uniform(p, q):
    r = -p.entropy() + _vl.log(q.high - q.low)
    return _vl.where(((q.low > 0) | (q.high < 1)), math.inf, r)


@register_kl(Exponential, Normal)
def _kl_exponential_normal(p, q):
    return -p.entropy() + _normal_cross(q, 1 / p.rate, 2 / p.rate ** 2)


@register_kl(Gamma, Exponential)
def _kl_gamma_exponential(p, q):
    return -p.entropy() - _vl.log(q.rate) + q.rate * p.concentration / p.rate


@register_kl(Gamma, Normal)
def _kl_gamma_normal(p, q):
    a, b = p.concentration, p.rate
    return -p.entropy() + _normal_cross(q, a / b, (a * a + a) / b ** 2)


@register_kl(Laplace, Normal)
def _kl_laplace_normal(p, q):
    return -p.entropy() + _normal_cross(q, p.loc, p.loc ** 2 + 2 * p.scale ** 2)


@register_kl(Normal, Laplace)
def _kl_normal_laplace(p, q):
    """E_p|x - m| for x ~ N(mu, s^2) is s sqrt(2/pi) exp(-d^2 / 2s^2) + d erf(d / (s sqrt 2)), d = mu - m."""
    d = p.loc - q.loc
    e_abs = math.sqrt(2 / math.pi) * p.scale * _vl.exp(-0.5 * (d / p.scale) ** 2) + \
        d * _vl.erf(d / (p.scale * math.sqrt(2)))
    return -p.entropy() + _vl.log(2 * q.scale) + e_abs / q.scale


@register_kl(Uniform, Exponential)
def _kl_uniform_exponential(p, q):
    r = q.rate * (p.high + p.low) / 2 - _vl.log((p.high - p.low) * q.rate)
    return _vl.where((p.low < 0), math.inf, r)


@register_kl(Uniform, Gamma)
def _kl_uniform_gamma(p, q):
    w = p.high - p.low
    elog = (_vl.xlogy(p.high, p.high) - _vl.xlogy(p.low, p.low) - w) / w  # E log x on [low, high]
    r = -_vl.log(w) + _gamma_cross(q, (p.high + p.low) / 2, elog)
    return _vl.where((p.low < 0), math.inf, r)


@register_kl(Bernoulli, Poisson)
def _kl_bernoulli_poisson(p, q):
    return -p.entropy() - (p.probs * _vl.log(q.rate) - q.rate)


def _infinite(p, q):
    """q has zero density on part of p's support."""
    ref = next(v for v in p.__dict__.values() if hasattr(v, "_data") and v.dtype.kind == "f")
    return _vl.full(tuple(p.batch_shape), math.inf, dtype=ref.dtype)


for _p, _q in [(Normal, Beta), (Normal, Exponential), (Normal, Gamma), (Normal, Uniform), (Laplace, Beta),
               (Laplace, Exponential), (Laplace, Gamma), (Laplace, Uniform), (Exponential, Beta),
               (Exponential, Uniform), (Gamma, Beta), (Gamma, Uniform), (Poisson, Bernoulli),
               (Poisson, Binomial)]:
    register_kl(_p, _q)(_infinite)


@register_kl(Gumbel, Gumbel)
def _kl_gumbel_gumbel(p, q):
    r = p.scale / q.scale
    a, b = q.loc / q.scale, p.loc / q.scale
    euler = 0.5772156649015329
    return -_vl.log(r) - a + b + r * euler + _vl.exp(a + _vl.lgamma(1 + r) - b) - (1 + euler)


@register_kl(Pareto, Pareto)
def _kl_pareto_pareto(p, q):
    ar = q.alpha / p.alpha
    r = q.alpha * _vl.log(p.scale / q.scale) - _vl.log(ar) + ar - 1
    return _vl.where(p.scale < q.scale, math.inf, r)


@register_kl(TransformedDistribution, TransformedDistribution)
def _kl_transformed_transformed(p, q):
    """KL is invariant under a shared bijection: KL(t(P) || t(Q)) = KL(P || Q)."""
    if p.transforms != q.transforms or p.event_shape != q.event_shape:
        raise NotImplementedError("KL between TransformedDistributions needs equal transforms and event shapes")
    return kl_divergence(p.base_dist, q.base_dist)
