"""varlens.distributions against torch.distributions: log_prob, entropy, moments, KL and their
gradients (float64); sampling checked by its statistics."""
import numpy as np
import pytest
import torch
import torch.distributions as TD

import varlens as vl
import varlens.distributions as VD

RNG = np.random.default_rng(0)


def grads_match(vout, tout, vins, tins):
    w = RNG.standard_normal(tuple(tout.shape))
    np.testing.assert_allclose(vout.detach().numpy(), tout.detach().numpy(), rtol=1e-10, atol=1e-12)
    (vout * vl.tensor(w)).sum().backward()
    (tout * torch.tensor(w)).sum().backward()
    for a, b in zip(vins, tins):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-10, atol=1e-12)


def pair(a):
    return vl.tensor(a.copy(), requires_grad=True), torch.tensor(a.copy(), requires_grad=True)


def test_normal_log_prob_entropy_cdf_kl():
    mu, s, x = RNG.standard_normal(5), RNG.uniform(0.5, 2, 5), RNG.standard_normal(5)
    for method in ("log_prob", "cdf"):
        vm, tm = pair(mu)
        vs, ts = pair(s)
        grads_match(getattr(VD.Normal(vm, vs), method)(vl.tensor(x)),
                    getattr(TD.Normal(tm, ts), method)(torch.tensor(x)), (vm, vs), (tm, ts))
    vs, ts = pair(s)
    grads_match(VD.Normal(vl.tensor(mu), vs).entropy(), TD.Normal(torch.tensor(mu), ts).entropy(), (vs,), (ts,))
    vm, tm = pair(mu)
    vs, ts = pair(s)
    grads_match(VD.kl_divergence(VD.Normal(vm, vs), VD.Normal(0.0, 1.0)),
                TD.kl_divergence(TD.Normal(tm, ts), TD.Normal(torch.zeros(5, dtype=torch.float64),
                                                              torch.ones(5, dtype=torch.float64))), (vm, vs), (tm, ts))


def test_normal_rsample_is_reparametrised_and_has_the_right_moments():
    loc = vl.tensor(np.array([1.0, -2.0]), requires_grad=True)
    scale = vl.tensor(np.array([0.5, 3.0]), requires_grad=True)
    d = VD.Normal(loc, scale)
    x = d.rsample((20000,), generator=vl.Generator().manual_seed(0))
    assert tuple(x.shape) == (20000, 2)
    m, sd = x.detach().numpy().mean(0), x.detach().numpy().std(0)
    assert (np.abs(m - np.array([1.0, -2.0])) < 4 * np.array([0.5, 3.0]) / np.sqrt(20000)).all(), m
    np.testing.assert_allclose(sd, [0.5, 3.0], rtol=0.03)
    x.sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [20000, 20000])  # d(loc + scale eps)/d loc = 1 per draw
    assert not d.sample((3,)).requires_grad


def test_bernoulli_probs_and_logits():
    p, y = RNG.uniform(0.1, 0.9, 6), (RNG.random(6) < 0.5).astype(float)
    vp, tp = pair(p)
    grads_match(VD.Bernoulli(probs=vp).log_prob(vl.tensor(y)), TD.Bernoulli(probs=tp).log_prob(torch.tensor(y)),
                (vp,), (tp,))
    lg = RNG.standard_normal(6)
    vl_, tl = pair(lg)
    grads_match(VD.Bernoulli(logits=vl_).entropy(), TD.Bernoulli(logits=tl).entropy(), (vl_,), (tl,))
    a, b = pair(lg)
    grads_match(VD.kl_divergence(VD.Bernoulli(logits=a), VD.Bernoulli(probs=vl.tensor(p))),
                TD.kl_divergence(TD.Bernoulli(logits=b), TD.Bernoulli(probs=torch.tensor(p))), (a,), (b,))
    s = VD.Bernoulli(probs=vl.tensor(np.array([0.2, 0.9]))).sample((10000,), generator=vl.Generator().manual_seed(1))
    np.testing.assert_allclose(s.numpy().mean(0), [0.2, 0.9], atol=0.02)


def test_categorical():
    lg = RNG.standard_normal((3, 4))
    v, t = pair(lg)
    idx = np.array([0, 3, 1])
    grads_match(VD.Categorical(logits=v).log_prob(vl.tensor(idx)),
                TD.Categorical(logits=t).log_prob(torch.tensor(idx)), (v,), (t,))
    v, t = pair(lg)
    grads_match(VD.Categorical(logits=v).entropy(), TD.Categorical(logits=t).entropy(), (v,), (t,))
    p = RNG.uniform(0.1, 1, (3, 4))
    a, b = pair(lg)
    grads_match(VD.kl_divergence(VD.Categorical(logits=a), VD.Categorical(probs=vl.tensor(p))),
                TD.kl_divergence(TD.Categorical(logits=b), TD.Categorical(probs=torch.tensor(p))), (a,), (b,))
    d = VD.Categorical(probs=vl.tensor(np.array([[0.1, 0.0, 0.9], [0.5, 0.5, 0.0]])))
    s = d.sample((5000,), generator=vl.Generator().manual_seed(2)).numpy()
    assert s.shape == (5000, 2)
    np.testing.assert_allclose((s[:, 0] == 2).mean(), 0.9, atol=0.02)
    assert not (s[:, 0] == 1).any() and not (s[:, 1] == 2).any()


def test_uniform():
    lo, hi = np.array([0.0, -1.0]), np.array([2.0, 3.0])
    a, b = pair(hi)
    x = np.array([1.0, 0.5])
    grads_match(VD.Uniform(vl.tensor(lo), a).log_prob(vl.tensor(x)),
                TD.Uniform(torch.tensor(lo), b).log_prob(torch.tensor(x)), (a,), (b,))
    assert VD.Uniform(0.0, 1.0).log_prob(vl.tensor(2.0)).item() == -np.inf
    u = VD.Uniform(vl.tensor(lo), vl.tensor(hi)).sample((20000,), generator=vl.Generator().manual_seed(3)).numpy()
    np.testing.assert_allclose(u.mean(0), (lo + hi) / 2, atol=0.05)
    assert (u >= lo).all() and (u < hi).all()


def test_bad_arguments():
    with pytest.raises(ValueError, match="scale must be positive"):
        VD.Normal(0.0, vl.tensor(np.array([1.0, -1.0])))
    with pytest.raises(ValueError, match="exactly one of probs or logits"):
        VD.Categorical()
    with pytest.raises(NotImplementedError, match="no reparametrised sample"):
        VD.Bernoulli(probs=0.5).rsample()
    with pytest.raises(NotImplementedError, match="no formula"):
        VD.kl_divergence(VD.Normal(0.0, 1.0), VD.Uniform(0.0, 1.0))
