"""varlens.distributions against torch.distributions: log_prob, cdf, icdf, entropy, moments and KL
with their gradients (float64, batched grids, broadcast values); rsample gradients checked by
their expectations against closed forms; sample shapes; validation errors."""
import math

import numpy as np
import pytest
import scipy.special as S
import torch
import torch.distributions as TD

import varlens as vl
import varlens.distributions as VD
from varlens.ops.random import standard_gamma_grad

RNG = np.random.default_rng(0)


def _np(x):
    return x.detach().numpy() if hasattr(x, "detach") else np.asarray(x)


def compare(vout, tout, vins, tins, rtol=1e-9, atol=1e-11, grad=True):
    """Values equal (nan where torch has nan); then gradients of a random weighting."""
    a, b = _np(vout), _np(tout)
    assert a.shape == b.shape, (a.shape, b.shape)
    np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
    if not grad or not tout.requires_grad or not np.isfinite(b).all():
        return
    w = RNG.standard_normal(b.shape)
    (vout * vl.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    for va, ta in zip(vins, tins):
        gt = np.zeros(ta.shape) if ta.grad is None else ta.grad.numpy()
        gv = np.zeros(ta.shape) if va.grad is None else va.grad.numpy()
        np.testing.assert_allclose(gv, gt, rtol=rtol * 100, atol=atol * 100)


def pairs(params):
    v = [vl.tensor(p.copy(), requires_grad=True) if isinstance(p, np.ndarray) else p for p in params]
    t = [torch.tensor(p.copy(), requires_grad=True) if isinstance(p, np.ndarray) else p for p in params]
    return v, t


def u(lo, hi, *shape):
    return RNG.uniform(lo, hi, shape)


def simplex(*shape):
    p = RNG.uniform(0.1, 1, shape)
    return p / p.sum(-1, keepdims=True)


def spd(*shape):
    a = RNG.standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + np.eye(shape[-1])


B = (3, 4)  # batch shape of the grids below; values have shape (2, 3, 4) (a sample dim in front)
CASES = {
    # name: (constructor(D, *params), params, value, methods)
    "Normal": (lambda D, a, b: D.Normal(a, b), [RNG.standard_normal(4), u(0.5, 2, 3, 1)],
               RNG.standard_normal((2, 3, 4)), "log_prob cdf icdf entropy mean mode variance stddev"),
    "LogNormal": (lambda D, a, b: D.LogNormal(a, b), [RNG.standard_normal(B), u(0.3, 1.5, *B)],
                  u(0.1, 4, 2, *B), "log_prob cdf icdf entropy mean mode variance stddev"),
    "HalfNormal": (lambda D, s: D.HalfNormal(s), [u(0.5, 2, *B)], u(0, 3, 2, *B),
                   "log_prob cdf icdf entropy mean mode variance stddev"),
    "Uniform": (lambda D, lo, w: D.Uniform(lo, lo + w), [u(-1, 0.4, *B), u(1.6, 2, *B)],
                u(0.5, 0.99, 2, *B) * 0 + 0.5, "log_prob cdf icdf entropy mean variance stddev"),
    "Exponential": (lambda D, r: D.Exponential(r), [u(0.5, 2, *B)], u(0, 3, 2, *B),
                    "log_prob cdf icdf entropy mean mode variance stddev"),
    "Laplace": (lambda D, a, b: D.Laplace(a, b), [RNG.standard_normal(B), u(0.5, 2, *B)],
                RNG.standard_normal((2, *B)), "log_prob cdf icdf entropy mean mode variance stddev"),
    "Cauchy": (lambda D, a, b: D.Cauchy(a, b), [RNG.standard_normal(B), u(0.5, 2, *B)],
               RNG.standard_normal((2, *B)), "log_prob cdf icdf entropy mean mode variance"),
    "Gamma": (lambda D, a, b: D.Gamma(a, b), [u(0.3, 5, *B), u(0.5, 2, *B)], u(0.05, 4, 2, *B),
              "log_prob entropy mean mode variance stddev"),
    "Chi2": (lambda D, df: D.Chi2(df), [u(0.5, 6, *B)], u(0.05, 4, 2, *B), "log_prob entropy mean variance"),
    "Beta": (lambda D, a, b: D.Beta(a, b), [u(1.2, 4, *B), u(1.2, 4, *B)], u(0.02, 0.98, 2, *B),
             "log_prob entropy mean mode variance stddev"),
    "StudentT": (lambda D, df, a, b: D.StudentT(df, a, b), [u(2.5, 8, *B), RNG.standard_normal(B), u(0.5, 2, *B)],
                 RNG.standard_normal((2, *B)), "log_prob entropy mean mode variance"),
    "Dirichlet": (lambda D, c: D.Dirichlet(c), [u(0.5, 3, *B)], simplex(2, *B),
                  "log_prob entropy mean mode variance"),
    "MVN-cov": (lambda D, m, c: D.MultivariateNormal(m, covariance_matrix=c), [RNG.standard_normal((2, 3)),
                spd(2, 3, 3)], RNG.standard_normal((4, 2, 3)), "log_prob entropy mean variance"),
    "MVN-prec": (lambda D, m, c: D.MultivariateNormal(m, precision_matrix=c), [RNG.standard_normal(3), spd(2, 3, 3)],
                 RNG.standard_normal((4, 1, 3)), "log_prob entropy mean variance"),
    "MVN-tril": (lambda D, m, L: D.MultivariateNormal(m, scale_tril=L), [RNG.standard_normal((2, 3)),
                 np.tril(RNG.standard_normal((3, 3)), -1) + np.diag(u(0.5, 2, 3))],
                 RNG.standard_normal((4, 2, 3)), "log_prob entropy mean variance"),
    "Independent": (lambda D, a, b: D.Independent(D.Normal(a, b), 1), [RNG.standard_normal(B), u(0.5, 2, *B)],
                    RNG.standard_normal((2, *B)), "log_prob entropy mean variance"),
    "Bernoulli-p": (lambda D, p: D.Bernoulli(probs=p), [u(0.1, 0.9, *B)], (RNG.random((2, *B)) < 0.5) * 1.0,
                    "log_prob entropy mean variance stddev"),
    "Bernoulli-l": (lambda D, lg: D.Bernoulli(logits=lg), [RNG.standard_normal(B)], (RNG.random((2, *B)) < .5) * 1.,
                    "log_prob entropy mean mode variance"),
    "Geometric-p": (lambda D, p: D.Geometric(probs=p), [u(0.1, 0.9, *B)], RNG.integers(0, 6, (2, *B)) * 1.0,
                    "log_prob entropy mean mode variance"),
    "Geometric-l": (lambda D, lg: D.Geometric(logits=lg), [RNG.standard_normal(B)], RNG.integers(0, 6, (2, *B)) * 1.,
                    "log_prob entropy mean variance"),
    "Binomial-p": (lambda D, p: D.Binomial(7, probs=p), [u(0.1, 0.9, *B)], RNG.integers(0, 8, (2, *B)) * 1.0,
                   "log_prob entropy mean mode variance"),
    "Binomial-l": (lambda D, lg: D.Binomial(torch.full(B, 5.0, dtype=torch.float64) if D is TD else
                                            vl.full(B, 5.0, dtype=vl.float64), logits=lg),
                   [RNG.standard_normal(B)], RNG.integers(0, 6, (2, *B)) * 1.0, "log_prob entropy mean variance"),
    "Poisson": (lambda D, r: D.Poisson(r), [u(0.5, 6, *B)], RNG.integers(0, 9, (2, *B)) * 1.0,
                "log_prob mean mode variance"),
    "Categorical-p": (lambda D, p: D.Categorical(probs=p), [u(0.1, 1, *B)], RNG.integers(0, 4, (2, 3)),
                      "log_prob entropy mode"),
    "Categorical-l": (lambda D, lg: D.Categorical(logits=lg), [RNG.standard_normal(B)], RNG.integers(0, 4, (2, 3)),
                      "log_prob entropy mean variance"),
    "OneHotCategorical": (lambda D, lg: D.OneHotCategorical(logits=lg), [RNG.standard_normal(B)],
                          np.eye(4)[RNG.integers(0, 4, (2, 3))], "log_prob entropy mean mode variance"),
    "Multinomial": (lambda D, p: D.Multinomial(6, probs=p), [u(0.1, 1, *B)],
                    RNG.multinomial(6, [0.1, 0.2, 0.3, 0.4], (2, 3)) * 1.0, "log_prob entropy mean variance"),
    "Gumbel": (lambda D, a, b: D.Gumbel(a, b), [RNG.standard_normal(B), u(0.5, 2, *B)], RNG.standard_normal((2, *B)),
               "log_prob cdf icdf entropy mean mode variance stddev"),
    "Weibull": (lambda D, a, k: D.Weibull(a, k), [u(0.5, 2, *B), u(1.2, 3, *B)], u(0.1, 3, 2, *B),
                "log_prob cdf icdf entropy mean mode variance"),
    "Pareto": (lambda D, a, b: D.Pareto(a, b), [u(0.5, 1, *B), u(2.5, 4, *B)], u(1.1, 4, 2, *B),
               "log_prob cdf icdf entropy mean mode variance"),
    "NegativeBinomial-p": (lambda D, n, p: D.NegativeBinomial(n, probs=p), [u(0.5, 5, *B), u(0.1, 0.9, *B)],
                           RNG.integers(0, 9, (2, *B)) * 1.0, "log_prob mean mode variance"),
    "NegativeBinomial-l": (lambda D, n, lg: D.NegativeBinomial(n, logits=lg), [u(0.5, 5, *B), RNG.standard_normal(B)],
                           RNG.integers(0, 9, (2, *B)) * 1.0, "log_prob mean variance"),
    "Mixture": (lambda D, lg, m, s: D.MixtureSameFamily(D.Categorical(logits=lg), D.Normal(m, s)),
                [RNG.standard_normal(B), RNG.standard_normal(B), u(0.5, 2, *B)], RNG.standard_normal((2, 3)),
                "log_prob cdf mean variance"),
    "Mixture-MVN": (lambda D, lg, m, s: D.MixtureSameFamily(D.Categorical(logits=lg),
                                                            D.Independent(D.Normal(m, s), 1)),
                    [RNG.standard_normal(4), RNG.standard_normal((3, 4, 2)), u(0.5, 2, 3, 4, 2)],
                    RNG.standard_normal((5, 3, 2)), "log_prob mean variance"),
    "HalfCauchy": (lambda D, s: D.HalfCauchy(s), [u(0.5, 2, *B)], u(0.1, 3, 2, *B),
                   "log_prob cdf icdf entropy mean mode variance"),
    "InverseGamma": (lambda D, a, b: D.InverseGamma(a, b), [u(0.5, 5, *B), u(0.5, 2, *B)], u(0.2, 3, 2, *B),
                     "log_prob entropy mean mode variance"),
    "Kumaraswamy": (lambda D, a, b: D.Kumaraswamy(a, b), [u(0.5, 3, *B), u(0.5, 3, *B)], u(0.05, 0.95, 2, *B),
                    "log_prob cdf icdf entropy mean variance"),
    "FisherSnedecor": (lambda D, a, b: D.FisherSnedecor(a, b), [u(2.5, 8, *B), u(4.5, 9, *B)], u(0.1, 3, 2, *B),
                       "log_prob mean mode variance"),
    "LogisticNormal": (lambda D, m, s: D.LogisticNormal(m, s), [RNG.standard_normal(B), u(0.5, 1.5, *B)],
                       simplex(2, 3, 5), "log_prob"),
    "LowRankMVN": (lambda D, m, w, d: D.LowRankMultivariateNormal(m, w, d), [RNG.standard_normal((2, 3)),
                   RNG.standard_normal((3, 2)), u(0.5, 2, 2, 3)], RNG.standard_normal((4, 2, 3)),
                   "log_prob entropy mean variance covariance_matrix precision_matrix scale_tril"),
    "ContinuousBernoulli-p": (lambda D, p: D.ContinuousBernoulli(p), [np.r_[u(0.05, 0.95, 10), 0.4995, 0.5006]
                                                                      .reshape(B)], u(0.02, 0.98, 2, *B),
                              "log_prob cdf icdf entropy mean variance"),
    "ContinuousBernoulli-l": (lambda D, lg: D.ContinuousBernoulli(logits=lg), [RNG.standard_normal(B)],
                              u(0.02, 0.98, 2, *B), "log_prob cdf entropy mean variance stddev"),
    "VonMises": (lambda D, m, k: D.VonMises(m, k), [u(-3, 3, *B), u(0.1, 8, *B)], u(-3, 3, 2, *B),
                 "log_prob mean mode variance"),
    "RelaxedBernoulli": (lambda D, t, lg: D.RelaxedBernoulli(t, logits=lg), [np.array(0.7), RNG.standard_normal(B)],
                         u(0.05, 0.95, 2, *B), "log_prob"),
    "RelaxedOneHot": (lambda D, t, p: D.RelaxedOneHotCategorical(t, probs=p), [np.array(0.6), u(0.1, 1, *B)],
                      simplex(2, *B), "log_prob"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_values_and_gradients_match_torch(name):
    make, params, value, methods = CASES[name]
    for m in methods.split():
        vps, tps = pairs(params)
        vd, td = make(VD, *vps), make(TD, *tps)
        assert tuple(vd.batch_shape) == tuple(td.batch_shape) and tuple(vd.event_shape) == tuple(td.event_shape)
        assert vd.has_rsample == td.has_rsample
        if m in ("log_prob", "cdf") and np.asarray(value).dtype.kind == "f":  # d/dvalue too (the score)
            (vv,), (tv,) = pairs([np.asarray(value)])
            vps, tps = vps + [vv], tps + [tv]
            vo, to = getattr(vd, m)(vv), getattr(td, m)(tv)
        elif m in ("log_prob", "cdf"):
            vo, to = getattr(vd, m)(vl.tensor(value)), getattr(td, m)(torch.tensor(value))
        elif m == "icdf":
            q = u(0.05, 0.95, 2, *td.batch_shape)
            vo, to = vd.icdf(vl.tensor(q)), td.icdf(torch.tensor(q))
        elif m == "entropy":
            vo, to = vd.entropy(), td.entropy()
        else:
            vo, to = getattr(vd, m), getattr(td, m)
        # torch's Multinomial entropy takes lgamma(total_count + 1) in float32, and its VonMises
        # approximates log I0 / log I1 by polynomials (~1e-8); varlens uses SciPy's Bessel functions
        rtol = 1e-7 if (name, m) == ("Multinomial", "entropy") or name == "VonMises" else 1e-9
        atol = 1e-7 if name == "VonMises" else 1e-11
        compare(vo, to, vps, tps, rtol=rtol, atol=atol, grad=m != "mode")


def test_gamma_cdf_and_nonfinite_moments():
    a, b, x = u(0.5, 4, 3), u(0.5, 2, 3), u(0.1, 3, 3)
    vb, tb = pairs([b])
    compare(VD.Gamma(vl.tensor(a), vb[0]).cdf(vl.tensor(x)), TD.Gamma(torch.tensor(a), tb[0]).cdf(torch.tensor(x)),
            vb, tb)
    df = np.array([0.5, 1.0, 1.5, 2.0, 3.0])
    for m in ("mean", "variance"):
        compare(getattr(VD.StudentT(vl.tensor(df)), m), getattr(TD.StudentT(torch.tensor(df)), m), [], [])
    p = np.array([0.2, 0.5, 0.8])
    compare(VD.Bernoulli(vl.tensor(p)).mode, TD.Bernoulli(torch.tensor(p)).mode, [], [])
    c = np.array([[0.5, 0.7, 0.9], [2.0, 3.0, 0.5]])
    compare(VD.Dirichlet(vl.tensor(c)).mode, TD.Dirichlet(torch.tensor(c)).mode, [], [])


def test_float32_parameters_and_python_numbers():
    d, t = VD.Normal(0.0, 2.0), TD.Normal(0.0, 2.0)
    assert d.loc.dtype == vl.float32 and d.log_prob(vl.tensor(1.0)).dtype == vl.float32
    np.testing.assert_allclose(d.log_prob(vl.tensor(1.0)).item(), t.log_prob(torch.tensor(1.0)).item(), rtol=1e-6)
    g = VD.Gamma(vl.tensor([2.0, 3.0]), 1.0)
    assert g.rate.dtype == vl.float32 and tuple(g.rate.shape) == (2,)
    assert g.rsample((3,)).dtype == vl.float32


KL_CASES = {
    "Normal": (lambda D, a, b, c, d: (D.Normal(a, b), D.Normal(c, d)), "n p n p"),
    "LogNormal": (lambda D, a, b, c, d: (D.LogNormal(a, b), D.LogNormal(c, d)), "n p n p"),
    "HalfNormal": (lambda D, a, b: (D.HalfNormal(a), D.HalfNormal(b)), "p p"),
    "Uniform-Normal": (lambda D, a, w, c, d: (D.Uniform(a, a + w), D.Normal(c, d)), "n p n p"),
    "Bernoulli": (lambda D, a, b: (D.Bernoulli(probs=a), D.Bernoulli(logits=b)), "u n"),
    "Binomial": (lambda D, a, b: (D.Binomial(5, probs=a), D.Binomial(5, logits=b)), "u n"),
    "Categorical": (lambda D, a, b: (D.Categorical(logits=a), D.Categorical(probs=b)), "nv pv"),
    "OneHotCategorical": (lambda D, a, b: (D.OneHotCategorical(logits=a), D.OneHotCategorical(logits=b)), "nv nv"),
    "Geometric": (lambda D, a, b: (D.Geometric(probs=a), D.Geometric(probs=b)), "u u"),
    "Poisson": (lambda D, a, b: (D.Poisson(a), D.Poisson(b)), "p p"),
    "Exponential": (lambda D, a, b: (D.Exponential(a), D.Exponential(b)), "p p"),
    "Exponential-Gamma": (lambda D, a, b, c: (D.Exponential(a), D.Gamma(b, c)), "p p p"),
    "Laplace": (lambda D, a, b, c, d: (D.Laplace(a, b), D.Laplace(c, d)), "n p n p"),
    "Cauchy": (lambda D, a, b, c, d: (D.Cauchy(a, b), D.Cauchy(c, d)), "n p n p"),
    "Gamma": (lambda D, a, b, c, d: (D.Gamma(a, b), D.Gamma(c, d)), "p p p p"),
    "Beta": (lambda D, a, b, c, d: (D.Beta(a, b), D.Beta(c, d)), "p p p p"),
    "Dirichlet": (lambda D, a, b: (D.Dirichlet(a), D.Dirichlet(b)), "pv pv"),
    "Independent": (lambda D, a, b, c, d: (D.Independent(D.Normal(a, b), 1), D.Independent(D.Normal(c, d), 1)),
                    "n p n p"),
    "Beta-Normal": (lambda D, a, b, c, d: (D.Beta(a, b), D.Normal(c, d)), "p p n p"),
    "Beta-Exponential": (lambda D, a, b, c: (D.Beta(a, b), D.Exponential(c)), "p p p"),
    "Beta-Gamma": (lambda D, a, b, c, d: (D.Beta(a, b), D.Gamma(c, d)), "p p p p"),
    "Beta-Uniform": (lambda D, a, b, c, d: (D.Beta(a, b), D.Uniform(c - 3.5, d + 1)), "p p p p"),
    "Exponential-Normal": (lambda D, a, c, d: (D.Exponential(a), D.Normal(c, d)), "p n p"),
    "Gamma-Exponential": (lambda D, a, b, c: (D.Gamma(a, b), D.Exponential(c)), "p p p"),
    "Gamma-Normal": (lambda D, a, b, c, d: (D.Gamma(a, b), D.Normal(c, d)), "p p n p"),
    "Laplace-Normal": (lambda D, a, b, c, d: (D.Laplace(a, b), D.Normal(c, d)), "n p n p"),
    "Normal-Laplace": (lambda D, a, b, c, d: (D.Normal(a, b), D.Laplace(c, d)), "n p n p"),
    "Uniform-Exponential": (lambda D, a, w, c: (D.Uniform(a, a + w), D.Exponential(c)), "p p p"),
    "Uniform-Gamma": (lambda D, a, w, c, d: (D.Uniform(a, a + w), D.Gamma(c, d)), "p p p p"),
    "Bernoulli-Poisson": (lambda D, a, b: (D.Bernoulli(a), D.Poisson(b)), "u p"),
    "Normal-Gamma": (lambda D, a, b, c, d: (D.Normal(a, b), D.Gamma(c, d)), "n p p p"),
    "Poisson-Binomial": (lambda D, a, b: (D.Poisson(a), D.Binomial(3, b)), "p u"),
    "Gumbel": (lambda D, a, b, c, d: (D.Gumbel(a, b), D.Gumbel(c, d)), "n p n p"),
    "Pareto": (lambda D, a, b, c, d: (D.Pareto(a, b), D.Pareto(c * 0.1, d)), "p p p p"),
    "Transformed": (lambda D, a, b, c, d: tuple(D.TransformedDistribution(D.Normal(m, s),
                                                                          [D.transforms.TanhTransform()])
                                                for m, s in ((a, b), (c, d))), "n p n p"),
    "LowRankMVN": (lambda D, a, b, c, d: (D.LowRankMultivariateNormal(a, b, c), D.LowRankMultivariateNormal(
        d, b[..., :1] * 0.5, c + 1)), "nv spd p nv"),
    "LowRankMVN-MVN": (lambda D, a, b, c, d: (D.LowRankMultivariateNormal(a, b, c),
                                              D.MultivariateNormal(a * 0, scale_tril=d)), "nv spd p tril"),
    "MVN": (lambda D, a, b, c, d: (D.MultivariateNormal(a, covariance_matrix=b),
                                   D.MultivariateNormal(c, scale_tril=d)), "nv spd nv tril"),
}
_GEN = {"n": lambda: RNG.standard_normal(B), "p": lambda: u(0.5, 3, *B), "u": lambda: u(0.1, 0.9, *B),
        "nv": lambda: RNG.standard_normal(B), "pv": lambda: u(0.5, 3, *B), "spd": lambda: spd(3, 4, 4),
        "tril": lambda: np.tril(RNG.standard_normal((4, 4)), -1) + np.diag(u(0.5, 2, 4))}


@pytest.mark.parametrize("name", list(KL_CASES))
def test_kl_divergence_matches_torch(name):
    make, kinds = KL_CASES[name]
    vps, tps = pairs([_GEN[k]() for k in kinds.split()])
    compare(VD.kl_divergence(*make(VD, *vps)), TD.kl_divergence(*make(TD, *tps)), vps, tps)


def test_kl_edge_cases_and_register_kl():
    inf = VD.kl_divergence(VD.Uniform(0.0, 2.0), VD.Uniform(0.5, 3.0))
    assert inf.item() == math.inf == TD.kl_divergence(TD.Uniform(0.0, 2.0), TD.Uniform(0.5, 3.0)).item()
    p = vl.tensor([[0.5, 0.5, 0.0]], dtype=vl.float64)
    q = vl.tensor([[0.2, 0.8, 0.0]], dtype=vl.float64)
    assert np.isfinite(VD.kl_divergence(VD.Categorical(probs=p), VD.Categorical(probs=q)).numpy()).all()
    neg = VD.kl_divergence(VD.Uniform(-1.0, 1.0), VD.Exponential(1.0))  # q = 0 on part of p's support
    assert neg.item() == math.inf == TD.kl_divergence(TD.Uniform(-1.0, 1.0), TD.Exponential(1.0)).item()
    with pytest.raises(NotImplementedError, match="No KL"):
        VD.kl_divergence(VD.Normal(0.0, 1.0), VD.Poisson(1.0))

    class MyNormal(VD.Normal):
        pass
    # a subclass uses its parent's formula until a more specific one is registered
    np.testing.assert_allclose(VD.kl_divergence(MyNormal(1.0, 1.0), VD.Normal(0.0, 1.0)).item(), 0.5, rtol=1e-6)

    @VD.register_kl(MyNormal, VD.Normal)
    def _kl(p, q):
        return vl.tensor(42.0)
    assert VD.kl_divergence(MyNormal(1.0, 1.0), VD.Normal(0.0, 1.0)).item() == 42.0
    assert VD.kl_divergence(VD.Normal(1.0, 1.0), VD.Normal(0.0, 1.0)).item() != 42.0
    with pytest.raises(TypeError):
        VD.register_kl("Normal", VD.Normal)


def test_standard_gamma_implicit_gradient():
    """dx/dalpha with u = P(alpha, x) fixed: against torch's _standard_gamma_grad and against
    central differences of the inverse, x(alpha) = P^-1(alpha, u)."""
    a = np.array([0.05, 0.3, 1.0, 2.5, 7.0, 30.0, 0.5, 3.0])
    x = np.array([1e-6, 0.01, 1.0, 2.0, 9.0, 25.0, 3.0, 0.2])
    g = standard_gamma_grad(a, x)
    np.testing.assert_allclose(g, torch._standard_gamma_grad(torch.tensor(a), torch.tensor(x)).numpy(), rtol=5e-4)
    uu = S.gammainc(a, x)
    h = 1e-6 * a
    fd = (S.gammaincinv(a + h, uu) - S.gammaincinv(a - h, uu)) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5)


def _mean_grad(d_fn, params, f, n, seed):
    ps = [vl.tensor(np.array(p, dtype=float), requires_grad=True) for p in params]
    x = d_fn(*ps).rsample((n,), generator=vl.Generator().manual_seed(seed))
    f(x).mean(0).sum().backward()
    return [p.grad.numpy() for p in ps]


def _closed_grad(fn, params):
    ts = [torch.tensor(np.array(p, dtype=float), requires_grad=True) for p in params]
    fn(*ts).sum().backward()
    return [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("case", ["Gamma", "Beta", "Dirichlet", "Chi2", "StudentT", "MVN", "Exponential",
                                  "Laplace", "LogNormal", "HalfNormal", "Cauchy", "Uniform"])
def test_rsample_gradient_of_an_expectation(case):
    """d/dtheta E[f(x)] from rsample (pathwise, 40000 draws) against the closed form's gradient."""
    n = 40000
    specs = {
        "Gamma": (VD.Gamma, [[0.7, 3.0], [1.5, 0.8]], lambda x: x * x,
                  lambda a, b: a * (a + 1) / b ** 2),
        "Beta": (VD.Beta, [[0.8, 3.0], [2.0, 1.2]], lambda x: x, lambda a, b: a / (a + b)),
        "Dirichlet": (VD.Dirichlet, [[0.7, 2.0, 3.0]], lambda x: x * vl.tensor([1.0, 2.0, 3.0], dtype=vl.float64),
                      lambda c: c / c.sum() * torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)),
        "Chi2": (VD.Chi2, [[1.5, 4.0]], lambda x: x, lambda df: df),
        "StudentT": (VD.StudentT, [[5.0, 9.0]], lambda x: x * x, lambda df: df / (df - 2)),
        "MVN": (lambda m, L: VD.MultivariateNormal(m, scale_tril=vl.tril(L)), [[1.0, -1.0], [[1.0, 0.0], [0.5, 2.0]]],
                lambda x: (x * x).sum(-1), lambda m, L: (m * m).sum() + (L.tril() ** 2).sum()),
        "Exponential": (VD.Exponential, [[0.5, 2.0]], lambda x: x * x, lambda r: 2 / r ** 2),
        "Laplace": (VD.Laplace, [[0.5], [1.5]], lambda x: x * x, lambda m, s: m * m + 2 * s * s),
        "LogNormal": (VD.LogNormal, [[0.1], [0.4]], lambda x: x, lambda m, s: torch.exp(m + s * s / 2)),
        "HalfNormal": (VD.HalfNormal, [[0.7, 2.0]], lambda x: x, lambda s: s * math.sqrt(2 / math.pi)),
        "Cauchy": (VD.Cauchy, [[0.3], [1.2]], lambda x: vl.atan(x), None),
        "Uniform": (VD.Uniform, [[0.5], [2.0]], lambda x: x * x, lambda lo, hi: (hi ** 3 - lo ** 3) / (3 * (hi - lo))),
    }
    d_fn, params, f, closed = specs[case]
    got = _mean_grad(d_fn, params, f, n, seed=7)
    if closed is None:  # Cauchy: E[atan(x)] = atan(loc / (1 + scale)) ... checked via torch's rsample instead
        tp = [torch.tensor(np.array(p, dtype=float), requires_grad=True) for p in params]
        torch.manual_seed(0)
        torch.atan(TD.Cauchy(*tp).rsample((n,))).mean().backward()
        want = [t.grad.numpy() for t in tp]
    else:
        want = _closed_grad(closed, params)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=0.08, atol=0.03)


def test_relaxed_rsample_support_and_gradient():
    lg = vl.tensor(np.array([0.3, -1.0]), requires_grad=True)
    x = VD.RelaxedBernoulli(vl.tensor(0.5, dtype=vl.float64), logits=lg).rsample((2000,),
                                                                                generator=vl.Generator().manual_seed(3))
    assert tuple(x.shape) == (2000, 2) and ((x.detach().numpy() > 0) & (x.detach().numpy() < 1)).all()
    x.mean().backward()
    assert (lg.grad.numpy() > 0).all()  # a larger logit pushes the relaxed sample up
    # P(x > 1/2) = sigmoid(logits) for any temperature
    np.testing.assert_allclose((x.detach().numpy() > 0.5).mean(0), 1 / (1 + np.exp(-np.array([0.3, -1.0]))),
                               atol=0.04)
    p = vl.tensor(np.array([0.2, 0.3, 0.5]), requires_grad=True)
    y = VD.RelaxedOneHotCategorical(0.3, probs=p).rsample((4000,), generator=vl.Generator().manual_seed(4))
    assert tuple(y.shape) == (4000, 3)
    np.testing.assert_allclose(y.detach().numpy().sum(-1), 1, rtol=1e-9)
    np.testing.assert_allclose(np.bincount(y.detach().numpy().argmax(-1), minlength=3) / 4000, [0.2, 0.3, 0.5],
                               atol=0.03)  # the argmax is an exact categorical draw (Gumbel-max)
    y[:, 2].mean().backward()
    assert p.grad is not None and np.isfinite(p.grad.numpy()).all()


SHAPE_CASES = [
    lambda D: D.Normal(torch.zeros(3) if D is TD else vl.zeros(3), 1.0),
    lambda D: D.Gamma(2.0, torch.ones(2, 3) if D is TD else vl.ones(2, 3)),
    lambda D: D.Beta(2.0, torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.Dirichlet(torch.ones(2, 4) if D is TD else vl.ones(2, 4)),
    lambda D: D.MultivariateNormal(torch.zeros(2, 3) if D is TD else vl.zeros(2, 3),
                                   scale_tril=torch.eye(3) if D is TD else vl.eye(3)),
    lambda D: D.Independent(D.Laplace(torch.zeros(2, 3) if D is TD else vl.zeros(2, 3), 1.0), 1),
    lambda D: D.Categorical(probs=torch.ones(2, 5) if D is TD else vl.ones(2, 5)),
    lambda D: D.OneHotCategorical(probs=torch.ones(2, 5) if D is TD else vl.ones(2, 5)),
    lambda D: D.Multinomial(4, probs=torch.ones(2, 5) if D is TD else vl.ones(2, 5)),
    lambda D: D.Binomial(3, probs=torch.full((2,), 0.3) if D is TD else vl.full((2,), 0.3)),
    lambda D: D.Poisson(torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.Geometric(probs=torch.full((3,), 0.4) if D is TD else vl.full((3,), 0.4)),
    lambda D: D.StudentT(torch.full((3,), 4.0) if D is TD else vl.full((3,), 4.0)),
    lambda D: D.Chi2(torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.Cauchy(0.0, torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.HalfNormal(torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.LogNormal(0.0, torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.Exponential(torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.Uniform(0.0, torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.Bernoulli(logits=torch.zeros(3) if D is TD else vl.zeros(3)),
    lambda D: D.Gumbel(0.0, torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.Weibull(1.0, torch.full((3,), 2.0) if D is TD else vl.full((3,), 2.0)),
    lambda D: D.Pareto(1.0, torch.full((3,), 2.0) if D is TD else vl.full((3,), 2.0)),
    lambda D: D.NegativeBinomial(3.0, probs=torch.full((3,), 0.4) if D is TD else vl.full((3,), 0.4)),
    lambda D: D.MixtureSameFamily(D.Categorical(logits=torch.zeros(2, 3) if D is TD else vl.zeros(2, 3)),
                                  D.Normal(torch.zeros(2, 3) if D is TD else vl.zeros(2, 3), 1.0)),
    lambda D: D.MixtureSameFamily(D.Categorical(logits=torch.zeros(3) if D is TD else vl.zeros(3)),
                                  D.MultivariateNormal(torch.zeros(3, 2) if D is TD else vl.zeros(3, 2),
                                                       scale_tril=torch.eye(2) if D is TD else vl.eye(2))),
    lambda D: D.ContinuousBernoulli(torch.full((3,), 0.3) if D is TD else vl.full((3,), 0.3)),
    lambda D: D.VonMises(0.0, torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.HalfCauchy(torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.InverseGamma(2.0, torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.Kumaraswamy(2.0, torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.FisherSnedecor(3.0, torch.full((3,), 5.0) if D is TD else vl.full((3,), 5.0)),
    lambda D: D.LogisticNormal(torch.zeros(2, 3) if D is TD else vl.zeros(2, 3), 1.0),
    lambda D: D.LowRankMultivariateNormal(torch.zeros(2, 3) if D is TD else vl.zeros(2, 3),
                                          torch.ones(3, 1) if D is TD else vl.ones(3, 1),
                                          torch.ones(3) if D is TD else vl.ones(3)),
    lambda D: D.OneHotCategoricalStraightThrough(logits=torch.zeros(2, 3) if D is TD else vl.zeros(2, 3)),
    lambda D: D.RelaxedBernoulli(torch.tensor(0.5) if D is TD else 0.5,
                                 logits=torch.zeros(3) if D is TD else vl.zeros(3)),
    lambda D: D.RelaxedOneHotCategorical(torch.tensor(0.5) if D is TD else 0.5,
                                         logits=torch.zeros(2, 3) if D is TD else vl.zeros(2, 3)),
]


def test_sample_and_expand_shapes_match_torch():
    for make in SHAPE_CASES:
        vd, td = make(VD), make(TD)
        name = type(td).__name__
        for ss in [(), (5,), (2, 3)]:
            assert tuple(vd.sample(ss).shape) == tuple(td.sample(ss).shape), (name, ss)
        assert tuple(vd.sample(4).shape) == tuple(td.sample((4,)).shape)
        assert repr(vd.support) == repr(td.support), name
        assert set(vd.arg_constraints) == set(td.arg_constraints), name
        big = (6,) + tuple(td.batch_shape)
        ve, te = vd.expand(big), td.expand(big)
        assert tuple(ve.batch_shape) == tuple(te.batch_shape) and tuple(ve.event_shape) == tuple(te.event_shape)
        s = te.sample()
        assert tuple(ve.log_prob(vl.tensor(s.numpy())).shape) == tuple(te.log_prob(s).shape), name
        if td.has_rsample:
            assert vd.rsample((2,)).shape == td.rsample((2,)).shape
        else:
            with pytest.raises(NotImplementedError):
                vd.rsample()


def test_discrete_sample_statistics():
    g = vl.Generator().manual_seed(5)
    n = 20000
    s = VD.Poisson(vl.tensor([0.5, 4.0])).sample((n,), generator=g).numpy()
    np.testing.assert_allclose(s.mean(0), [0.5, 4.0], rtol=0.04)
    s = VD.Binomial(10, probs=vl.tensor([0.2, 0.7])).sample((n,), generator=g).numpy()
    np.testing.assert_allclose(s.mean(0), [2.0, 7.0], rtol=0.03)
    np.testing.assert_allclose(s.var(0), [1.6, 2.1], rtol=0.08)
    s = VD.Geometric(probs=vl.tensor([0.3])).sample((n,), generator=g).numpy()
    np.testing.assert_allclose(s.mean(), 1 / 0.3 - 1, rtol=0.05)
    assert s.min() == 0
    s = VD.Multinomial(5, probs=vl.tensor([[0.2, 0.8], [0.5, 0.5]])).sample((n,), generator=g).numpy()
    assert (s.sum(-1) == 5).all()
    np.testing.assert_allclose(s.mean(0), [[1.0, 4.0], [2.5, 2.5]], rtol=0.03)
    c = VD.Categorical(probs=vl.tensor([[0.1, 0.0, 0.9], [0.5, 0.5, 0.0]])).sample((5000,), generator=g).numpy()
    assert c.shape == (5000, 2) and not (c[:, 0] == 1).any() and not (c[:, 1] == 2).any()
    np.testing.assert_allclose((c[:, 0] == 2).mean(), 0.9, atol=0.02)
    s = VD.NegativeBinomial(3.0, probs=vl.tensor([0.4])).sample((n,), generator=g).numpy()
    np.testing.assert_allclose([s.mean(), s.var()], [2.0, 2.0 / 0.6], rtol=0.06)
    mix = VD.MixtureSameFamily(VD.Categorical(probs=vl.tensor([0.3, 0.7])), VD.Normal(vl.tensor([-5.0, 5.0]), 1.0))
    s = mix.sample((n,), generator=g).numpy()
    np.testing.assert_allclose([(s < 0).mean(), s[s > 0].mean(), s.var()], [0.3, 5.0, mix.variance.item()],
                               rtol=0.05, atol=0.02)
    oh = VD.OneHotCategorical(probs=vl.tensor([0.25, 0.75])).sample((n,), generator=g).numpy()
    np.testing.assert_allclose(oh.mean(0), [0.25, 0.75], atol=0.02)
    b = VD.Bernoulli(probs=vl.tensor([0.2, 0.9])).sample((n,), generator=g).numpy()
    np.testing.assert_allclose(b.mean(0), [0.2, 0.9], atol=0.02)


def test_continuous_sample_moments():
    g = vl.Generator().manual_seed(6)
    n = 40000
    for d in [VD.Gamma(vl.tensor([0.5, 3.0]), 2.0), VD.Beta(vl.tensor([0.5, 3.0]), 2.0), VD.Laplace(1.0, 2.0),
              VD.StudentT(vl.tensor([5.0])), VD.LogNormal(0.2, 0.5), VD.HalfNormal(1.5), VD.Exponential(3.0),
              VD.Gumbel(1.0, 2.0), VD.Weibull(1.5, 2.0), VD.Pareto(1.0, 6.0), VD.ContinuousBernoulli(0.2),
              VD.Cauchy(0.0, 1.0).expand((2,))]:
        if isinstance(d, VD.Cauchy):  # no moments: check the median and quartiles instead
            x = d.sample((n,), generator=g).numpy()
            np.testing.assert_allclose(np.percentile(x, [25, 50, 75], axis=0).T, [[-1, 0, 1]] * 2, atol=0.05)
            continue
        x = d.sample((n,), generator=g).numpy().astype(float)
        np.testing.assert_allclose(x.mean(0), d.mean.numpy(), rtol=0.05, atol=0.02, err_msg=type(d).__name__)
        np.testing.assert_allclose(x.var(0), d.variance.numpy(), rtol=0.12, err_msg=type(d).__name__)
    L = np.array([[1.0, 0.0], [0.6, 0.8]])
    x = VD.MultivariateNormal(vl.tensor([1.0, 2.0], dtype=vl.float64), scale_tril=vl.tensor(L)).sample(
        (n,), generator=g).numpy()
    np.testing.assert_allclose(np.cov(x.T), L @ L.T, atol=0.03)
    x = VD.Dirichlet(vl.tensor([1.0, 2.0, 3.0])).sample((n,), generator=g).numpy()
    np.testing.assert_allclose(x.mean(0), [1 / 6, 2 / 6, 3 / 6], atol=0.01)
    k = np.array([1e-6, 0.5, 3.0, 50.0])
    x = VD.VonMises(vl.tensor([3.0, -1.0, 0.5, 2.0], dtype=vl.float64), vl.tensor(k)).sample((n,), generator=g).numpy()
    assert (x >= -np.pi).all() and (x < np.pi).all()
    from scipy.stats import vonmises
    np.testing.assert_allclose(VD.VonMises(vl.tensor([0.5], dtype=vl.float64), vl.tensor(k)).log_prob(
        vl.tensor(np.full(4, 1.3))).numpy(), vonmises.logpdf(1.3, k, loc=0.5), rtol=1e-12)
    np.testing.assert_allclose(VD.VonMises(0.0, vl.tensor(k)).variance.numpy(), 1 - S.i1(k) / S.i0(k), rtol=1e-12)
    # mean resultant length E cos(x - loc) = I1(k) / I0(k)
    np.testing.assert_allclose(np.cos(x - [3.0, -1.0, 0.5, 2.0]).mean(0), S.i1(k) / S.i0(k), atol=0.015)


def test_log_prob_gradcheck():
    """Finite differences (float64) through the composed densities and the MVN's Cholesky path."""
    from varlens.autograd import gradcheck
    x = vl.tensor(RNG.standard_normal((2, 3)))
    m = vl.tensor(RNG.standard_normal(3), requires_grad=True)
    A = vl.tensor(spd(3, 3), requires_grad=True)
    assert gradcheck(lambda m, A: VD.MultivariateNormal(m, covariance_matrix=(A + A.mT) / 2).log_prob(x), (m, A))
    a, b = vl.tensor(u(0.5, 3, 3), requires_grad=True), vl.tensor(u(0.5, 3, 3), requires_grad=True)
    v = vl.tensor(u(0.1, 0.9, 3))
    assert gradcheck(lambda a, b: VD.Beta(a, b).log_prob(v) + VD.Beta(a, b).entropy(), (a, b))
    assert gradcheck(lambda a, b: VD.kl_divergence(VD.Gamma(a, b), VD.Gamma(b, a)), (a, b))


def test_bad_arguments_raise_like_torch():
    neg = vl.tensor([1.0, -1.0])
    with pytest.raises(ValueError, match=r"parameter scale .* GreaterThan\(lower_bound=0.0\)"):
        VD.Normal(0.0, neg)
    with pytest.raises(ValueError):
        TD.Normal(0.0, torch.tensor([1.0, -1.0]))
    VD.Normal(0.0, neg, validate_args=False)  # validation off: accepted, as torch
    for make, param in [(lambda: VD.Gamma(neg, 1.0), "concentration"), (lambda: VD.Beta(1.0, neg), "concentration0"),
                        (lambda: VD.Exponential(neg), "rate"), (lambda: VD.Poisson(neg), "rate"),
                        (lambda: VD.Bernoulli(probs=vl.tensor([1.5])), "probs"),
                        (lambda: VD.Binomial(vl.tensor([2.5]), probs=0.5), "total_count"),
                        (lambda: VD.Dirichlet(neg), "concentration"),
                        (lambda: VD.Categorical(probs=neg), "probs"),
                        (lambda: VD.StudentT(neg), "df"), (lambda: VD.Uniform(1.0, 0.0), "low"),
                        (lambda: VD.MultivariateNormal(vl.zeros(2), covariance_matrix=vl.tensor([[1.0, 2.0],
                                                                                                  [2.0, 1.0]])),
                         "covariance_matrix"),
                        (lambda: VD.MultivariateNormal(vl.zeros(2), scale_tril=vl.tensor([[1.0, 1.0], [0.0, 1.0]])),
                         "scale_tril")]:
        with pytest.raises(ValueError, match=f"parameter {param} "):
            make()
    with pytest.raises(RuntimeError, match=r"broadcast .* shapes \(2,\) and \(3,\)"):
        VD.Normal(vl.zeros(2), vl.ones(3))
    with pytest.raises(RuntimeError):
        TD.Normal(torch.zeros(2), torch.ones(3))
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        VD.Categorical()
    with pytest.raises(ValueError, match="Either `probs` or `logits`"):
        VD.Bernoulli(probs=0.5, logits=0.0)
    with pytest.raises(ValueError, match="Exactly one of covariance_matrix"):
        VD.MultivariateNormal(vl.zeros(2))
    with pytest.raises(ValueError, match="within the support"):
        VD.Exponential(1.0).log_prob(vl.tensor(-1.0))
    with pytest.raises(ValueError, match="within the support"):
        VD.Uniform(0.0, 1.0).log_prob(vl.tensor(2.0))
    assert VD.Uniform(0.0, 1.0, validate_args=False).log_prob(vl.tensor(2.0)).item() == -math.inf
    with pytest.raises(ValueError, match="must be a Tensor"):
        VD.Normal(0.0, 1.0).log_prob(0.5)
    with pytest.raises(NotImplementedError, match="no reparametrised sample"):
        VD.Bernoulli(probs=0.5).rsample()
    with pytest.raises(ValueError, match="reinterpreted_batch_ndims"):
        VD.Independent(VD.Normal(vl.zeros(3), 1.0), 2)
    with pytest.raises(NotImplementedError):
        VD.Multinomial(vl.tensor(3.0), probs=vl.ones(2))


def test_normal_rsample_is_reparametrised():
    loc = vl.tensor(np.array([1.0, -2.0]), requires_grad=True)
    scale = vl.tensor(np.array([0.5, 3.0]), requires_grad=True)
    d = VD.Normal(loc, scale)
    x = d.rsample((20000,), generator=vl.Generator().manual_seed(0))
    assert tuple(x.shape) == (20000, 2)
    np.testing.assert_allclose(x.detach().numpy().std(0), [0.5, 3.0], rtol=0.03)
    x.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [20000, 20000])  # d(loc + scale eps)/d loc = 1 per draw
    assert not d.sample((3,)).requires_grad


TRANSFORM_CASES = {
    # tanh-squashed Gaussian (the SAC policy), a shifted log-normal, a logistic, an event-level affine map
    "tanh": (lambda D, T, m, s: D.TransformedDistribution(D.Normal(m, s), [T.TanhTransform()]), u(-0.9, 0.9, 2, *B)),
    "affine-exp": (lambda D, T, m, s: D.TransformedDistribution(D.Normal(m, s), [T.AffineTransform(0.5, 2.0),
                                                                                 T.ExpTransform()]),
                   u(0.2, 5, 2, *B)),
    "sigmoid-inv": (lambda D, T, m, s: D.TransformedDistribution(D.Uniform(0.0, 1.0 + 0 * m), [
        T.SigmoidTransform().inv, T.AffineTransform(m, s)]), RNG.standard_normal((2, *B))),
    "event-affine": (lambda D, T, m, s: D.TransformedDistribution(D.Independent(D.Normal(m, s), 1),
                                                                  [T.AffineTransform(m, s, event_dim=1)]),
                     RNG.standard_normal((2, *B))),
}


@pytest.mark.parametrize("name", list(TRANSFORM_CASES))
def test_transformed_distribution_matches_torch(name):
    make, value = TRANSFORM_CASES[name]
    vps, tps = pairs([RNG.standard_normal(B) * 0.3, u(0.5, 1.5, *B)])
    vd, td = make(VD, VD.transforms, *vps), make(TD, TD.transforms, *tps)
    assert (tuple(vd.batch_shape), tuple(vd.event_shape)) == (tuple(td.batch_shape), tuple(td.event_shape))
    compare(vd.log_prob(vl.tensor(value)), td.log_prob(torch.tensor(value)), vps, tps)
    if name != "event-affine":
        vps2, tps2 = pairs([p.detach().numpy() for p in tps])
        vd, td = make(VD, VD.transforms, *vps2), make(TD, TD.transforms, *tps2)
        compare(vd.cdf(vl.tensor(value)), td.cdf(torch.tensor(value)), vps2, tps2)
        q = u(0.1, 0.9, 2, *B)
        compare(vd.icdf(vl.tensor(q)), td.icdf(torch.tensor(q)), [], [], grad=False)
    s = vd.rsample((3,))
    assert tuple(s.shape) == tuple(td.rsample((3,)).shape) and s.requires_grad
    assert tuple(vd.expand((5,) + tuple(td.batch_shape)).sample().shape) == \
        tuple(td.expand((5,) + tuple(td.batch_shape)).sample().shape)


def test_transforms_inverse_and_jacobian():
    T = VD.transforms
    x = vl.tensor(RNG.standard_normal(5), requires_grad=True)
    for t in [T.ExpTransform(), T.SigmoidTransform(), T.TanhTransform(), T.AffineTransform(1.0, -2.0),
              T.ComposeTransform([T.AffineTransform(0.0, 0.5), T.TanhTransform()])]:
        y = t(x)
        np.testing.assert_allclose(t.inv(y).detach().numpy(), x.detach().numpy(), rtol=1e-6, atol=1e-6)
        dy = np.array([vl.autograd.grad(y[i], x, retain_graph=True)[0].numpy()[i] for i in range(5)])
        np.testing.assert_allclose(t.log_abs_det_jacobian(x, y).detach().numpy(), np.log(np.abs(dy)), rtol=1e-6)
        np.testing.assert_allclose(t.inv.log_abs_det_jacobian(y, x).detach().numpy(), -np.log(np.abs(dy)),
                                   rtol=1e-6)
    assert isinstance(VD.LogNormal(0.0, 1.0), VD.TransformedDistribution)
    with pytest.raises(ValueError, match="transforms must be"):
        VD.TransformedDistribution(VD.Normal(0.0, 1.0), "exp")


@pytest.mark.parametrize("cname", ["real", "positive", "greater_than", "less_than", "unit_interval", "interval",
                                   "simplex", "lower_cholesky", "real_vector", "softplus"])
def test_biject_to_and_transforms_match_torch(cname):
    """y, log|det J| and the inverse of biject_to(constraint) against torch's, with gradients."""
    def pick(D):
        C, T = D.constraints, D
        return {"real": lambda: T.biject_to(C.real), "positive": lambda: T.biject_to(C.positive),
                "greater_than": lambda: T.biject_to(C.greater_than(1.5)),
                "less_than": lambda: T.biject_to(C.less_than(-2.0)),
                "unit_interval": lambda: T.biject_to(C.unit_interval),
                "interval": lambda: T.biject_to(C.interval(-1.0, 3.0)), "simplex": lambda: T.biject_to(C.simplex),
                "lower_cholesky": lambda: T.transform_to(C.lower_cholesky),
                "real_vector": lambda: T.biject_to(C.real_vector), "softplus": lambda: T.SoftplusTransform()}[cname]()
    x = RNG.standard_normal((2, 3, 3))
    tv, tt = pick(VD), pick(TD)
    assert tv.domain.event_dim == tt.domain.event_dim and tv.codomain.event_dim == tt.codomain.event_dim
    (vx,), (tx,) = pairs([x])
    vy, ty = tv(vx), tt(tx)
    compare(vy, ty, [vx], [tx], rtol=1e-8)
    np.testing.assert_allclose(tv.inv(vl.tensor(ty.detach().numpy())).numpy(), x if cname != "lower_cholesky"
                               else np.tril(x), rtol=1e-6, atol=1e-8)
    if cname != "lower_cholesky":  # torch gives LowerCholeskyTransform no Jacobian either
        (vx,), (tx,) = pairs([x])
        compare(tv.log_abs_det_jacobian(vx, tv(vx)), tt.log_abs_det_jacobian(tx, tt(tx)), [vx], [tx], rtol=1e-8)
    to_simplex = VD.constraint_registry.transform_to(VD.constraints.simplex)
    np.testing.assert_allclose(to_simplex(vl.tensor(x)).numpy().sum(-1), 1.0)


def test_stick_breaking_transformed_distribution():
    """A logistic-normal on the 4-simplex: base Normal over R^3, StickBreakingTransform on top."""
    vps, tps = pairs([RNG.standard_normal((2, 3)), u(0.5, 1.5, 2, 3)])
    vd = VD.TransformedDistribution(VD.Normal(*vps), VD.StickBreakingTransform())
    td = TD.TransformedDistribution(TD.Normal(*tps), TD.StickBreakingTransform())
    assert (tuple(vd.batch_shape), tuple(vd.event_shape)) == (tuple(td.batch_shape), tuple(td.event_shape)) == \
        ((2,), (4,))
    y = simplex(5, 2, 4)
    compare(vd.log_prob(vl.tensor(y)), td.log_prob(torch.tensor(y)), vps, tps, rtol=1e-8)
    s = vd.rsample((7,))
    assert tuple(s.shape) == (7, 2, 4) and np.allclose(s.detach().numpy().sum(-1), 1)
    assert tuple(vd.expand((3, 2)).sample().shape) == tuple(td.expand((3, 2)).sample().shape)
    with pytest.raises(NotImplementedError, match="Cannot transform"):
        VD.biject_to(VD.constraints.boolean)


def test_straight_through_and_kumaraswamy_mode():
    lg = RNG.standard_normal((2, 3))
    vlg, tlg = pairs([lg])
    w = RNG.standard_normal((5, 2, 3))
    x = VD.OneHotCategoricalStraightThrough(logits=vlg[0]).rsample((5,))
    assert set(np.unique(x.detach().numpy())) <= {0.0, 1.0} and (x.detach().numpy().sum(-1) == 1).all()
    (x * vl.tensor(w)).sum().backward()
    (TD.OneHotCategoricalStraightThrough(logits=tlg[0]).probs * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(vlg[0].grad.numpy(), tlg[0].grad.numpy(), rtol=1e-10)  # straight through
    a, b = np.array([2.0, 3.0, 0.5]), np.array([2.5, 1.5, 2.0])
    grid = np.linspace(1e-4, 1 - 1e-4, 200001)
    dens = (a[:, None] - 1) * np.log(grid) + (b[:, None] - 1) * np.log1p(-grid ** a[:, None])
    m = VD.Kumaraswamy(vl.tensor(a), vl.tensor(b)).mode.numpy()
    np.testing.assert_allclose(m[:2], grid[dens.argmax(1)][:2], atol=1e-4)  # the density's maximiser
    assert np.isnan(m[2])  # a < 1: the density is unbounded at 0


def test_second_derivatives_through_log_prob_match_torch():
    """create_graph=True through the MVN's Cholesky path and Normal's density (Hessian-vector style)."""
    A = RNG.standard_normal((3, 3))
    C, m, x = A @ A.T + np.eye(3), RNG.standard_normal(3), RNG.standard_normal((4, 3))
    out = []
    for lib, D, grad in ((vl, VD, vl.autograd.grad), (torch, TD, torch.autograd.grad)):
        mm, CC = lib.tensor(m.copy(), requires_grad=True), lib.tensor(C.copy(), requires_grad=True)
        lp = D.MultivariateNormal(mm, covariance_matrix=CC).log_prob(lib.tensor(x)).sum()
        (g,) = grad(lp, [CC], create_graph=True)
        (h,) = grad((g * g).sum(), [mm])
        s = lib.tensor(np.array([0.7, 1.3]), requires_grad=True)
        (gs,) = grad(D.Normal(0.0, s).log_prob(lib.tensor(np.array([0.2, -1.0]))).sum(), [s], create_graph=True)
        (hs,) = grad(gs.sum(), [s])
        out.append((h.detach().numpy(), hs.detach().numpy()))
    for a, b in zip(*out):
        np.testing.assert_allclose(a, b, rtol=1e-9)


def test_utils_helpers_match_torch():
    from torch.distributions import utils as TU

    from varlens.distributions import utils as VU
    p = u(0.0, 1.0, 5)
    p[0] = 0.0
    for f in ("probs_to_logits", "clamp_probs"):
        np.testing.assert_allclose(getattr(VU, f)(vl.tensor(p)).numpy(), getattr(TU, f)(torch.tensor(p)).numpy())
    np.testing.assert_allclose(VU.probs_to_logits(vl.tensor(p), is_binary=True).numpy(),
                               TU.probs_to_logits(torch.tensor(p), is_binary=True).numpy())
    lg = RNG.standard_normal((2, 3))
    np.testing.assert_allclose(VU.logits_to_probs(vl.tensor(lg)).numpy(), TU.logits_to_probs(torch.tensor(lg)).numpy())
    a, b = VU.broadcast_all(vl.zeros(3, 1, dtype=vl.float64), 2.0)
    assert tuple(a.shape) == tuple(b.shape) == (3, 1) and b.dtype == vl.float64
