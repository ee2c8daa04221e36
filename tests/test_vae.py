"""VAE (seed 003 §10): Gaussian KLs, reparametrisation, ELBO <= log p(x) on a linear-Gaussian
model with a closed-form evidence, importance-sampled log p(x), a small trained VAE."""
import math

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

import varlens as vl
from varlens.autograd import gradcheck
from varlens.generative.vae import (VAE, elbo, gaussian_kl, importance_log_px, kl_standard_normal,
                                    log_likelihood, reparameterize)
from varlens.core.tensor import Tensor
from conftest import assert_close, to_torch


def T(a):
    return Tensor._make(np.asarray(a, dtype=np.float64))


def test_kl_closed_form_against_monte_carlo_and_known_values():
    rng = np.random.default_rng(0)
    for mu1, s1, mu2, s2 in [(1.0, 1.0, 0.0, 1.0), (0.0, 2.0, 0.0, 1.0), (0.3, 0.5, -1.0, 1.7)]:
        kl = float(gaussian_kl(T(mu1), T(2 * math.log(s1)), T(mu2), T(2 * math.log(s2))))
        z = rng.normal(mu1, s1, 400_000)
        logq = -0.5 * ((z - mu1) / s1) ** 2 - math.log(s1)
        logp = -0.5 * ((z - mu2) / s2) ** 2 - math.log(s2)
        mc = (logq - logp).mean()
        assert kl == pytest.approx(mc, abs=0.01)
    assert float(gaussian_kl(T(1.0), T(0.0))) == pytest.approx(0.5, abs=1e-12)
    assert float(gaussian_kl(T(0.0), T(math.log(4)))) == pytest.approx(0.5 * (4 - math.log(4) - 1), abs=1e-12)
    # eq. 10.2.8 = sum over dims of eq. 10.2.7 with mu2 = 0, s2 = 1; zero at q = p; and invariance 10.2.6
    mu, lv = T(rng.standard_normal((3, 4))), T(rng.standard_normal((3, 4)))
    np.testing.assert_allclose(kl_standard_normal(mu, lv)._data,
                               gaussian_kl(mu, lv, T(np.zeros((3, 4))), T(np.zeros((3, 4))))._data.sum(1))
    assert float(kl_standard_normal(T(np.zeros(5)), T(np.zeros(5)))) == 0.0
    a, b = 0.7, 2.5  # common affine map x -> a x + b
    k1 = gaussian_kl(T(0.3), T(math.log(0.25)), T(-1.0), T(math.log(2.0)))
    k2 = gaussian_kl(T(a * 0.3 + b), T(math.log(0.25 * a * a)), T(-a + b), T(math.log(2.0 * a * a)))
    assert float(k1) == pytest.approx(float(k2), rel=1e-12)


def test_kl_gradcheck_and_torch_parity():
    rng = np.random.default_rng(1)
    mu = T(rng.standard_normal((4, 3))).requires_grad_(True)
    lv = T(rng.standard_normal((4, 3))).requires_grad_(True)
    mu2 = T(rng.standard_normal((4, 3))).requires_grad_(True)
    lv2 = T(rng.standard_normal((4, 3))).requires_grad_(True)
    gradcheck(lambda a, b: kl_standard_normal(a, b), [mu, lv])
    gradcheck(lambda a, b, c, d: gaussian_kl(a, b, c, d), [mu, lv, mu2, lv2])
    out = gaussian_kl(mu, lv, mu2, lv2).sum()
    out.backward()
    tm, tl, tm2, tl2 = (to_torch(x, True) for x in (mu, lv, mu2, lv2))
    ref = torch.distributions.kl_divergence(torch.distributions.Normal(tm, (0.5 * tl).exp()),
                                            torch.distributions.Normal(tm2, (0.5 * tl2).exp())).sum()
    ref.backward()
    assert_close(out, ref, rtol=1e-10)
    for a, b in ((mu, tm), (lv, tl), (mu2, tm2), (lv2, tl2)):
        assert_close(a.grad, b.grad, rtol=1e-9, atol=1e-12)


def test_reparameterisation_moments_and_pathwise_gradient():
    n = 200_000
    mu = T(np.full(n, 0.8)).requires_grad_(True)
    lv = T(np.full(n, math.log(0.3 ** 2))).requires_grad_(True)
    z = reparameterize(mu, lv)
    assert float(z.mean()) == pytest.approx(0.8, abs=0.005)
    assert float(z.var()) == pytest.approx(0.09, rel=0.02)
    # E[z^2] = mu^2 + sigma^2: d/dmu = 2 mu, d/dlogvar = sigma^2 (= d/dsigma * dsigma/dlogvar)
    (z * z).mean().backward()
    assert float(mu.grad._data.sum()) == pytest.approx(1.6, rel=0.01)
    assert float(lv.grad._data.sum()) == pytest.approx(0.09, rel=0.03)


def test_log_likelihoods_are_true_densities():
    rng = np.random.default_rng(2)
    x, m = T(rng.standard_normal((3, 5))), T(rng.standard_normal((3, 5)))
    ll = log_likelihood(x, m, "gaussian", obs_std=0.7)._data
    ref = torch.distributions.Normal(to_torch(m), 0.7).log_prob(to_torch(x)).sum(1).numpy()
    np.testing.assert_allclose(ll, ref, rtol=1e-12)
    xb = T((rng.random((3, 5)) < 0.5).astype(float))
    llb = log_likelihood(xb, m, "bernoulli")._data
    refb = torch.distributions.Bernoulli(logits=to_torch(m)).log_prob(to_torch(xb)).sum(1).numpy()
    np.testing.assert_allclose(llb, refb, rtol=1e-12)
    with pytest.raises(ValueError, match="likelihood must be"):
        log_likelihood(x, m, "poisson")


class LinearGaussian:
    """p(z) = N(0, I_k), p(x|z) = N(W z + b, s^2 I_n): p(x) = N(b, W W^T + s^2 I) in closed form.
    W has orthogonal columns, so the true posterior has a diagonal covariance."""

    def __init__(self, n=4, k=2, s=0.5, seed=0):
        rng = np.random.default_rng(seed)
        Q, _ = np.linalg.qr(rng.standard_normal((n, k)))
        self.W, self.b, self.s = Q * np.array([2.0, 0.7])[:k], rng.standard_normal(n), s

    def decode(self, z):
        return z @ T(self.W.T) + T(self.b)

    def log_px(self, x):
        C = self.W @ self.W.T + self.s ** 2 * np.eye(len(self.b))
        d = x - self.b
        _, logdet = np.linalg.slogdet(C)
        return -0.5 * (np.einsum("ij,jk,ik->i", d, np.linalg.inv(C), d) + logdet + len(self.b) * math.log(2 * math.pi))

    def posterior(self, x):
        P = np.eye(self.W.shape[1]) + self.W.T @ self.W / self.s ** 2  # precision, diagonal here
        cov = np.linalg.inv(P)
        mean = (x - self.b) @ self.W @ cov.T / self.s ** 2
        return mean, np.log(np.tile(np.diag(cov), (len(x), 1))), cov


def test_elbo_below_log_px_and_equal_at_true_posterior():
    m = LinearGaussian()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4)) * 1.5
    logpx = m.log_px(x)
    mean, logvar, cov = m.posterior(x)
    assert np.allclose(cov, np.diag(np.diag(cov)))
    # at the true posterior, log p(x, z) - log q(z) = log p(x) for every z: the ELBO is exact
    # even with a single sample (eq. 10.2.3 with KL(q || posterior) = 0)
    e = elbo(T(x), T(mean), T(logvar), m.decode, "gaussian", n_samples=1, obs_std=m.s, kl="sample")._data
    np.testing.assert_allclose(e, logpx, rtol=1e-10)
    # the closed-form-KL form (Lemma 10.2.3) agrees in expectation
    ea = elbo(T(x), T(mean), T(logvar), m.decode, "gaussian", n_samples=4000, obs_std=m.s)._data
    np.testing.assert_allclose(ea, logpx, rtol=0.01, atol=0.02)
    # any other q is below, and the gap is KL(q || posterior) (closed form, eq. 10.2.7)
    mq, lq = mean + 0.4, logvar - 0.5
    e2 = elbo(T(x), T(mq), T(lq), m.decode, "gaussian", n_samples=4000, obs_std=m.s)._data
    gap = gaussian_kl(T(mq), T(lq), T(mean), T(logvar))._data.sum(1)
    assert np.all(e2 < logpx)
    np.testing.assert_allclose(logpx - e2, gap, rtol=0.05, atol=0.02)
    # beta = 1 is the plain ELBO; beta > 1 lowers it by (beta - 1) KL(q || prior)
    vl.manual_seed(9)
    a = elbo(T(x), T(mq), T(lq), m.decode, "gaussian", beta=1.0, obs_std=m.s)._data
    vl.manual_seed(9)
    b = elbo(T(x), T(mq), T(lq), m.decode, "gaussian", beta=3.0, obs_std=m.s)._data
    np.testing.assert_allclose(a - b, 2 * kl_standard_normal(T(mq), T(lq))._data, rtol=1e-10)


def test_importance_sampled_log_px():
    m = LinearGaussian(seed=1)
    rng = np.random.default_rng(4)
    x = rng.standard_normal((5, 4))
    logpx = m.log_px(x)
    mean, logvar, _ = m.posterior(x)
    exact = importance_log_px(T(x), T(mean), T(logvar), m.decode, "gaussian", 3, obs_std=m.s)._data
    np.testing.assert_allclose(exact, logpx, rtol=1e-10)
    mq, lq = mean + 0.3, logvar + 0.4
    one = elbo(T(x), T(mq), T(lq), m.decode, "gaussian", n_samples=2000, obs_std=m.s)._data
    many = importance_log_px(T(x), T(mq), T(lq), m.decode, "gaussian", 2000, obs_std=m.s)._data
    assert np.all(one < many - 0.01) and np.all(np.abs(many - logpx) < 0.03)


def test_elbo_gradcheck():
    vl.manual_seed(0)
    net = VAE(in_features=5, latent_dim=2, hidden=(4,), likelihood="bernoulli").double()
    x = T((np.random.default_rng(0).random((3, 5)) < 0.5).astype(float))

    def f(*p):
        vl.manual_seed(7)  # the same eps for every evaluation
        return net.loss(x)
    gradcheck(f, list(net.parameters()))


def test_vae_learns_and_conditional_vae_uses_labels():
    # two classes of 12-pixel binary patterns; a conditional VAE must generate the asked class
    rng = np.random.default_rng(0)
    protos = np.array([[1] * 6 + [0] * 6, [0] * 6 + [1] * 6], dtype=np.float32)
    y = rng.integers(0, 2, 2000)
    X = np.abs(protos[y] - (rng.random((2000, 12)) < 0.05)).astype(np.float32)
    vl.manual_seed(0)
    net = VAE(in_features=12, latent_dim=2, hidden=(32,), num_classes=2)
    opt = vl.optim.Adam(net.parameters(), lr=1e-2)
    xs, ys = Tensor._make(X), Tensor._make(y)
    before = float(net.elbo(xs, ys).mean())
    with threadpool_limits(1):
        for step in range(300):
            idx = rng.integers(0, 2000, 128)
            loss = net.loss(Tensor._make(X[idx]), Tensor._make(y[idx]))
            opt.zero_grad()
            loss.backward()
            opt.step()
    after = float(net.elbo(xs, ys).mean())
    # optimum: 12 pixels of Bernoulli(0.05) noise -> -12 H(0.05) = -2.39 nats
    assert before < -8 and after > -3.5, (before, after)
    lp = float(net.log_px(xs[:200], ys[:200], n_importance=50).mean())
    assert lp >= float(net.elbo(xs[:200], ys[:200]).mean()) - 0.05
    s0 = net.sample(500, Tensor._make(np.zeros(500, np.int64)))._data
    s1 = net.sample(500, Tensor._make(np.ones(500, np.int64)))._data
    assert s0[:, :6].mean() > 0.85 and s0[:, 6:].mean() < 0.15
    assert s1[:, 6:].mean() > 0.85 and s1[:, :6].mean() < 0.15
    with pytest.raises(ValueError, match="pass the labels"):
        net.encode(xs)


def test_naive_prior_sampling_is_unbiased_but_far_noisier():
    # §10.1: p(x) = E_{p(z)} p(x|z) is unbiased with z from the prior, but its variance is much
    # larger than importance sampling with a posterior-like proposal (here the exact one)
    m = LinearGaussian(seed=2)
    x = np.array([[1.0, -2.0, 0.5, 1.5]])
    px = math.exp(m.log_px(x)[0])
    rng = np.random.default_rng(0)
    z = rng.standard_normal((200_000, 2))
    lik = np.exp(log_likelihood(T(np.repeat(x, len(z), 0)), m.decode(T(z)), "gaussian", m.s)._data)
    assert lik.mean() == pytest.approx(px, rel=0.1)
    mean, logvar, _ = m.posterior(x)
    zq = mean + np.exp(0.5 * logvar) * rng.standard_normal((200_000, 2))
    logw = log_likelihood(T(np.repeat(x, len(zq), 0)), m.decode(T(zq)), "gaussian", m.s)._data \
        - 0.5 * (zq ** 2).sum(1) + 0.5 * (((zq - mean) ** 2) * np.exp(-logvar)).sum(1) + 0.5 * logvar.sum()
    w = np.exp(logw)
    assert w.mean() == pytest.approx(px, rel=1e-8)
    assert lik.std() > 100 * w.std() + 1e-300 and lik.std() / px > 1.0


# ------------------------------------------------------------- fused ops (one tape node each)
def test_fused_vae_ops_gradcheck_second_order_and_torch_parity():
    from varlens.generative.vae import bernoulli_nll
    from varlens.ops.random import Reparameterize
    from varlens.ops.nn.loss import BernoulliNLL, KLStdNormal
    rng = np.random.default_rng(6)
    l = T(rng.standard_normal((4, 2, 3)) * 3).requires_grad_(True)
    x = T(rng.random((4, 2, 3))).requires_grad_(True)       # soft targets: d/dx is checked too
    mu = T(rng.standard_normal((4, 5))).requires_grad_(True)
    lv = T(rng.standard_normal((4, 5))).requires_grad_(True)
    eps = T(rng.standard_normal((4, 5))).requires_grad_(True)
    gradcheck(lambda a, b: bernoulli_nll(a, b), [l, x])
    gradcheck(lambda a, b: kl_standard_normal(a, b), [mu, lv])
    gradcheck(lambda a, b, c: Reparameterize.apply(a, b, c), [mu, lv, eps])
    # second derivatives go through the composites
    for fn, args in ((lambda a, b: bernoulli_nll(a, b), (l, x)), (lambda a, b: kl_standard_normal(a, b), (mu, lv)),
                     (lambda a, b, c: Reparameterize.apply(a, b, c), (mu, lv, eps))):
        gs = vl.autograd.grad(fn(*args).sum(), list(args), create_graph=True)
        hs = vl.autograd.grad(sum((g * g).sum() for g in gs), list(args), allow_unused=True)
        targs = [to_torch(a, True) for a in args]
        if len(args) == 3:
            tout = targs[0] + (0.5 * targs[1]).exp() * targs[2]
        elif args[0] is l:
            bce = torch.nn.functional.binary_cross_entropy_with_logits
            tout = bce(targs[0], targs[1], reduction="none").sum((1, 2))
        else:
            tout = 0.5 * (targs[1].exp() + targs[0] ** 2 - targs[1] - 1).sum(-1)
        tgs = torch.autograd.grad(tout.sum(), targs, create_graph=True)
        ths = torch.autograd.grad(sum((g * g).sum() for g in tgs), targs, allow_unused=True)
        for a, b in zip(gs, tgs):
            assert_close(a, b, rtol=1e-10, atol=1e-12)
        for a, b in zip(hs, ths):
            if b is None:
                assert a is None or np.allclose(a._data, 0)
            else:
                assert_close(a, b, rtol=1e-9, atol=1e-12)
    # float32 values and gradients against torch, saturated logits included
    l32 = np.concatenate([rng.standard_normal((3, 20)) * 4, np.array([[-200, -90, -20, 0, 20, 90, 200] + [1] * 13])])
    x32 = (rng.random((4, 20)) < 0.4).astype(np.float32)
    a = Tensor._make(l32.astype(np.float32)).requires_grad_(True)
    ta = torch.from_numpy(l32.astype(np.float32)).requires_grad_(True)
    out = BernoulliNLL.apply(a, Tensor._make(x32))
    tout = torch.nn.functional.binary_cross_entropy_with_logits(ta, torch.from_numpy(x32), reduction="none").sum(1)
    w = np.array([0.5, -1.0, 2.0, 1.5], np.float32)
    (out * Tensor._make(w)).sum().backward()
    (tout * torch.from_numpy(w)).sum().backward()
    assert out.dtype == np.float32
    assert_close(out, tout, rtol=2e-6, atol=1e-5)
    assert_close(a.grad, ta.grad, rtol=1e-5, atol=1e-7)
    m32, v32 = (Tensor._make(rng.standard_normal((6, 3)).astype(np.float32)).requires_grad_(True) for _ in range(2))
    tm, tv = to_torch(m32, True), to_torch(v32, True)
    kl = KLStdNormal.apply(m32, v32)
    tkl = 0.5 * (tv.exp() + tm ** 2 - tv - 1).sum(-1)
    kl.sum().backward()
    tkl.sum().backward()
    assert_close(kl, tkl, rtol=1e-6, atol=1e-6)
    assert_close(m32.grad, tm.grad, rtol=1e-6)
    assert_close(v32.grad, tv.grad, rtol=1e-6, atol=1e-7)
    with pytest.raises(ValueError, match="x must have the logits' shape"):
        bernoulli_nll(a, Tensor._make(x32[:, :5]))


def test_vae_loss_fast_path_equals_the_elbo_composition():
    # VAE.loss (fused nodes) against -elbo(...).mean() built from the small ops, same eps draw
    vl.manual_seed(0)
    net = VAE(in_features=12, latent_dim=3, hidden=(8,), beta=1.7).double()
    x = T((np.random.default_rng(0).random((5, 12)) < 0.5).astype(float))
    vl.manual_seed(11)
    fused = net.loss(x)
    fused.backward()
    g1 = [p.grad._data.copy() for p in net.parameters()]
    net.zero_grad()
    vl.manual_seed(11)
    mu, lv = net.encode(x)
    eps = vl.randn(*mu.shape, dtype=mu.dtype)
    z = mu + vl.exp(0.5 * lv) * eps
    logits = net.decode(z)
    rec = -vl.nn.functional.binary_cross_entropy_with_logits(logits, x, reduction="none").sum(1)
    kl = (0.5 * (vl.exp(lv) + mu * mu - lv - 1)).sum(1)
    ref = -(rec - 1.7 * kl).mean()
    ref.backward()
    assert float(fused) == pytest.approx(float(ref), rel=1e-12)
    for a, p in zip(g1, net.parameters()):
        np.testing.assert_allclose(a, p.grad._data, rtol=1e-10, atol=1e-13)
