"""Diffusion (seed 003 §11): schedule numbers, forward process, corrected posterior, losses, samplers."""
import math

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

import varlens as vl
from varlens.autograd import gradcheck
from varlens.generative import DenoiserMLP, GaussianDiffusion, cosine_beta_schedule, energy_distance
from varlens.core.tensor import Tensor
from conftest import assert_close, to_torch


def test_linear_schedule_abar_values_from_definition():
    # abar_t = prod_{s<=t} (1 - beta_s), beta_s = 1e-4 + (0.02 - 1e-4) (s - 1) / 999, by hand
    ab, table = 1.0, {}
    for s in range(1, 1001):
        ab *= 1.0 - (1e-4 + (0.02 - 1e-4) * (s - 1) / 999)
        table[s] = ab
    D = GaussianDiffusion.linear(1000)
    for t in (1, 100, 500, 1000):
        assert D.alphas_cumprod[t] == pytest.approx(table[t], rel=1e-12)
    assert table[1000] == pytest.approx(4.04e-5, rel=5e-3)
    assert D.alphas_cumprod[1000] == pytest.approx(4.04e-5, rel=5e-3)
    assert D.alphas_cumprod[100] == pytest.approx(0.897, abs=1e-3)
    assert D.alphas_cumprod[500] == pytest.approx(0.0786, abs=1e-4)
    assert D.betas[1:].sum() == pytest.approx(10.05, rel=1e-12)
    assert D.alphas_cumprod[0] == 1.0


def test_cosine_schedule_matches_its_definition():
    T, s = 50, 0.008
    b = cosine_beta_schedule(T, s)
    f = lambda t: math.cos((t / T + s) / (1 + s) * math.pi / 2) ** 2  # noqa: E731
    ab = np.cumprod(1 - b)
    for t in (1, 10, 25, 49):
        assert ab[t - 1] == pytest.approx(f(t) / f(0), rel=1e-10)
    assert ab[-1] < 1e-3 and np.all(np.diff(ab) < 0)


def test_one_step_preserves_unit_variance():
    D = GaussianDiffusion.linear(1000)
    vl.manual_seed(1)
    x = vl.randn(200_000, dtype=vl.float64)
    for t in (1, 500, 1000):  # beta from 1e-4 to 0.02; use a big beta too
        y = D.q_step(x, np.full(x.shape[0], t))
        assert float(y.var()) == pytest.approx(1.0, abs=0.01)
    big = GaussianDiffusion(np.array([0.3, 0.6]))
    y = big.q_step(big.q_step(x, np.full(x.shape[0], 1)), np.full(x.shape[0], 2))
    assert float(y.var()) == pytest.approx(1.0, abs=0.01)
    assert float(y.mean()) == pytest.approx(0.0, abs=0.01)


def test_closed_form_marginal_matches_iterated_steps():
    # iterate eq. 11.1.3 t times from a fixed x_0 and compare with eq. 11.1.4
    D = GaussianDiffusion.linear(1000)
    n, t = 40_000, 300
    x0 = np.array([1.5, -0.7])
    x = Tensor._make(np.tile(x0, (n, 1)))
    vl.manual_seed(2)
    for s in range(1, t + 1):
        x = D.q_step(x, np.full(n, s))
    a = x._data
    ab = D.alphas_cumprod[t]
    np.testing.assert_allclose(a.mean(0), math.sqrt(ab) * x0, atol=0.02)
    np.testing.assert_allclose(a.var(0), 1 - ab, rtol=0.03)
    mean, var = D.q_mean_variance(Tensor._make(x0[None]), np.array([t]))
    np.testing.assert_allclose(mean._data[0], math.sqrt(ab) * x0, rtol=1e-12)
    direct = D.q_sample(Tensor._make(np.tile(x0, (n, 1))), np.full(n, t))._data
    np.testing.assert_allclose(direct.mean(0), a.mean(0), atol=0.03)
    np.testing.assert_allclose(direct.var(0), a.var(0), rtol=0.05)


@pytest.mark.parametrize("t", [2, 50, 500])
def test_posterior_mean_and_variance_by_monte_carlo(t):
    # regress x_{t-1} on (x_0, x_t) under the forward process; the coefficients and the residual
    # variance are those of q(x_{t-1} | x_t, x_0), corrected eq. 11.1.5 and eq. 11.1.6
    D = GaussianDiffusion.linear(1000)
    rng = np.random.default_rng(t)
    n = 200_000
    x0 = rng.uniform(-1, 1, n)
    ab_prev = D.alphas_cumprod[t - 1]
    xprev = math.sqrt(ab_prev) * x0 + math.sqrt(1 - ab_prev) * rng.standard_normal(n)
    xt = math.sqrt(1 - D.betas[t]) * xprev + math.sqrt(D.betas[t]) * rng.standard_normal(n)
    A = np.stack([x0, xt], 1)
    coef, *_ = np.linalg.lstsq(A, xprev, rcond=None)
    resid = xprev - A @ coef
    c0, ct = D.posterior_mean_coefs(np.array([t]))
    assert coef[1] == pytest.approx(ct[0], abs=0.01)
    assert coef[0] == pytest.approx(c0[0], abs=0.01 + 0.02 * abs(c0[0]))
    assert resid.var() == pytest.approx(D.posterior_variance[t], rel=0.02)
    assert D.posterior_variance[t] <= D.betas[t]
    if t == 500:
        # the printed eq. 11.1.5 (alpha_{t-1} for abar_{t-1}) is far off
        p0, pt = D.posterior_mean_coefs(np.array([t]), as_printed=True)
        assert abs(pt[0] - coef[1]) > 0.5
        assert (c0[0], ct[0]) == pytest.approx((0.00307, 0.99411), abs=1e-5)
        assert D.posterior_variance[t] == pytest.approx(0.010031, abs=1e-6)
    # q_posterior applies the same coefficients to tensors
    m, v = D.q_posterior(Tensor._make(x0[:5, None]), Tensor._make(xt[:5, None]), np.full(5, t))
    np.testing.assert_allclose(m._data[:, 0], c0[0] * x0[:5] + ct[0] * xt[:5], rtol=1e-12)
    assert D.posterior_variance[1] == 0.0


def test_eps_form_of_mean_and_weights():
    # substituting x_0 = (x_t - sqrt(1-abar) eps)/sqrt(abar) into the corrected mean gives the
    # eps-form of §11.4.2, and (m_t - mu_theta)^2 / (2 s_t^2) = w_t |eps - eps_theta|^2
    D = GaussianDiffusion.linear(1000)
    rng = np.random.default_rng(0)
    t = np.array([2, 3, 40, 500, 999, 1000])
    x0, eps, eps_th = (Tensor._make(rng.standard_normal((6, 3))) for _ in range(3))
    xt = D.q_sample(x0, t, eps)
    m, s2 = D.q_posterior(x0, xt, t)
    assert_close(D.mean_from_eps(xt, t, eps), m._data, rtol=1e-9, atol=1e-12)
    mu = D.mean_from_eps(xt, t, eps_th)
    lhs = (((m - mu) ** 2).sum(1) / (2 * s2[:, 0]))._data
    w = D.loss_weights()
    rhs = w[t] * ((eps._data - eps_th._data) ** 2).sum(1)
    np.testing.assert_allclose(lhs, rhs, rtol=1e-6)
    b = D.betas
    np.testing.assert_allclose(w[2:], b[2:] / (2 * (1 - D.alphas_cumprod[1:-1]) * (1 - b[2:])), rtol=1e-10)
    assert w[2] == pytest.approx(0.600, abs=1e-3) and w[1000] == pytest.approx(0.0102, abs=1e-4)
    assert w[1] == pytest.approx(1 / (2 * (1 - 1e-4)), rel=1e-12)  # the w_1 fix, finite


def test_prior_kl_corrected_vs_printed():
    D = GaussianDiffusion(np.array([0.5]))  # abar_T = 0.5
    x0 = np.array([[1.0]])
    assert D.prior_kl(x0)[0] == pytest.approx(0.3466, abs=1e-4)
    assert D.prior_kl(x0, as_printed=True)[0] == pytest.approx(0.6534, abs=1e-4)
    # check against eq. 10.2.7 per dimension with mean sqrt(abar) x0, variance 1 - abar
    D2 = GaussianDiffusion.linear(200, beta_end=0.05)
    x = np.array([[0.3, -1.2, 2.0]])
    ab = D2.alphas_cumprod[-1]
    mu, var = math.sqrt(ab) * x[0], 1 - ab
    kl = 0.5 * np.sum(var + mu ** 2 - np.log(var) - 1)
    assert D2.prior_kl(x)[0] == pytest.approx(kl, rel=1e-12)


def _tiny(seed=0):
    vl.manual_seed(seed)
    return DenoiserMLP(data_dim=2, hidden=(6, 5), time_dim=4, max_steps=20).double()


def test_l_simple_gradcheck_and_torch_parity():
    D = GaussianDiffusion.linear(20, beta_end=0.2)
    m = _tiny()
    rng = np.random.default_rng(0)
    x0 = Tensor._make(rng.standard_normal((5, 2)))
    noise = Tensor._make(rng.standard_normal((5, 2)))
    t = np.array([1, 4, 9, 15, 20])
    params = list(m.parameters())
    x0g = x0.detach().requires_grad_(True)
    gradcheck(lambda *p: D.training_losses(m, x0g, t=t, noise=noise), params + [x0g])
    gradcheck(lambda *p: D.training_losses(m, x0g, t=t, noise=noise, weighting="elbo"), params + [x0g])
    # torch: same network and the same formula
    loss = D.training_losses(m, x0, t=t, noise=noise)
    loss.backward()
    W = [to_torch(p, True) for p in params]
    temb = torch.from_numpy(m.temb.table[t])
    xt = torch.from_numpy(D.sqrt_ab[t][:, None] * x0._data + D.sqrt_1mab[t][:, None] * noise._data)
    h = torch.cat([xt, temb], 1)
    h = torch.nn.functional.silu(h @ W[0].T + W[1])
    h = torch.nn.functional.silu(h @ W[2].T + W[3])
    out = h @ W[4].T + W[5]
    tl = torch.nn.functional.mse_loss(out, torch.from_numpy(noise._data))
    tl.backward()
    assert_close(loss, tl, rtol=1e-10, what="L_simple")
    for p, q in zip(params, W):
        assert_close(p.grad, q.grad, rtol=1e-8, atol=1e-12, what="grad")


def _exact_eps(D, mu, sigma):
    """The exact eps-predictor E[eps | x_t] for data N(mu, sigma^2) (a function of x_t, t)."""
    def model(x, t, **kw):
        tt = t._data
        ab = D.alphas_cumprod[tt][:, None]
        v = ab * sigma ** 2 + 1 - ab
        return Tensor._make(np.sqrt(1 - ab) * (x._data - np.sqrt(ab) * mu) / v)
    return model


def test_ancestral_and_ddim_sampling_recover_gaussian_data():
    D = GaussianDiffusion.linear(1000)
    mu, sigma = 1.5, 0.4
    model = _exact_eps(D, mu, sigma)
    g = vl.Generator().manual_seed(0)
    x = D.sample(model, (20_000, 1), generator=g, dtype=vl.float64)._data
    assert x.mean() == pytest.approx(mu, abs=0.02) and x.std() == pytest.approx(sigma, rel=0.03)
    # deterministic DDIM (eta = 0) discretises an ODE: the spread is slightly too small with few
    # steps and the error shrinks as the number of steps grows (measured: 0.27, 0.372, 0.397 for 10, 50, 1000)
    errs = []
    for steps in (10, 50, 1000):
        y = D.ddim_sample(model, (20_000, 1), steps=steps, generator=g, dtype=vl.float64)._data
        assert y.mean() == pytest.approx(mu, abs=0.02)
        errs.append(abs(y.std() - sigma))
    assert errs[0] > errs[1] > errs[2] and errs[1] < 0.1 * sigma and errs[2] < 0.02 * sigma
    # eta = 1 on all T steps is ancestral sampling with sigma_t^2 = s_t^2: same draws, same samples
    z = D.ddim_sample(model, (2000, 1), steps=1000, eta=1.0, generator=vl.Generator().manual_seed(5),
                      dtype=vl.float64)._data
    a = D.sample(model, (2000, 1), generator=vl.Generator().manual_seed(5), dtype=vl.float64)._data
    np.testing.assert_allclose(z, a, rtol=1e-8, atol=1e-10)
    # a wrong predictor (eps = 0) does not: DDPM then just shrinks noise, std far from sigma
    bad = D.ddim_sample(lambda x, t, **k: x * 0, (5000, 1), steps=50, generator=g, dtype=vl.float64)._data
    assert abs(bad.std() - sigma) > 0.3
    ts = D.ddim_timesteps(50)
    assert ts[0] == 1000 and ts[-1] == 1 and len(ts) == 50 and np.all(np.diff(ts) < 0)


def test_trained_denoiser_beats_untrained_on_moons():
    from varlens.datasets import make_moons
    D = GaussianDiffusion.linear(100, beta_end=0.2)
    X, _ = make_moons(2500, noise=0.05, seed=0)
    X = (X - X.mean(0)) / X.std(0)
    train, held = X[:2000], X[2000:]
    vl.manual_seed(0)
    m = DenoiserMLP(hidden=(64, 64), time_dim=16, max_steps=100)
    g = vl.Generator().manual_seed(1)
    untrained = energy_distance(D.ddim_sample(m, (500, 2), steps=20, generator=g), held)
    opt = vl.optim.Adam(m.parameters(), lr=3e-3)
    rng = np.random.default_rng(0)
    with threadpool_limits(1):  # small GEMMs: one BLAS thread is faster on a busy 2-core machine
        for step in range(600):
            xb = Tensor._make(train[rng.integers(0, 2000, 256)])
            loss = D.training_losses(m, xb)
            opt.zero_grad()
            loss.backward()
            opt.step()
    trained = energy_distance(D.ddim_sample(m, (500, 2), steps=20, generator=g), held)
    assert trained < 0.05 and trained < untrained / 10, (trained, untrained)


def test_bad_inputs_raise_clear_errors():
    D = GaussianDiffusion.linear(10)
    x = vl.randn(3, 2)
    with pytest.raises(ValueError, match="t must lie in 1..10"):
        D.q_sample(x, np.array([0, 1, 2]))
    with pytest.raises(ValueError, match="noise must have x0's shape"):
        D.q_sample(x, np.array([1, 1, 2]), noise=vl.randn(3, 3))
    with pytest.raises(ValueError, match="betas"):
        GaussianDiffusion(np.array([0.1, 1.5]))
    with pytest.raises(ValueError, match="weighting"):
        D.training_losses(lambda a, b: a, x, weighting="bogus")
    with pytest.raises(ValueError, match="steps"):
        D.ddim_timesteps(11)


# ----------------------------------------------------------------------- U-Net, guidance, latent
from varlens.generative.unet import CrossAttention2d, UNet  # noqa: E402
from varlens.generative.guidance import ClassifierFreeGuidance, LabelContext, drop_labels, guided_eps  # noqa: E402
from varlens.generative.latent import LatentDiffusion  # noqa: E402
from varlens.generative.vae import VAE  # noqa: E402


def test_unet_shapes_conditioning_and_gradcheck():
    vl.manual_seed(0)
    u = UNet(1, 4, mults=(1, 2), attn_levels=(1,), num_classes=3, context_dim=5, max_steps=10)
    x = vl.randn(2, 1, 8, 8)
    t = Tensor._make(np.array([1, 10]))
    y = Tensor._make(np.array([0, 2]))
    ctx = vl.randn(2, 3, 5)
    out = u(x, t, y, context=ctx)
    assert tuple(out.shape) == (2, 1, 8, 8)
    out2 = u(x, t, Tensor._make(np.array([1, 2])), context=ctx)
    assert np.abs(out2._data[0] - out._data[0]).max() > 1e-6 and np.allclose(out2._data[1], out._data[1])
    with pytest.raises(ValueError, match="needs context"):
        u(x, t, y)
    # float64 finite differences through the whole U-Net (input and first conv weight)
    vl.manual_seed(1)
    small = UNet(1, 2, mults=(1, 2), attn_levels=(1,), max_steps=5, context_dim=3).double()
    xs = vl.randn(1, 1, 4, 4, dtype=vl.float64, requires_grad=True)
    c = vl.randn(1, 2, 3, dtype=vl.float64, requires_grad=True)
    tt = Tensor._make(np.array([3]))
    gradcheck(lambda a, b, w: small(a, tt, context=b), [xs, c, small.conv_in.weight])


def test_unet_fits_a_fixed_batch():
    vl.manual_seed(0)
    D = GaussianDiffusion.linear(50, beta_end=0.3)
    u = UNet(1, 4, mults=(1, 2), attn_levels=(1,), max_steps=50)
    x0 = Tensor._make(np.sign(np.random.default_rng(0).standard_normal((4, 1, 8, 8))).astype(np.float32))
    noise, t = vl.randn(4, 1, 8, 8), np.array([5, 20, 35, 50])
    opt = vl.optim.Adam(u.parameters(), lr=5e-3)
    losses = []
    for _ in range(25):
        loss = D.training_losses(u, x0, t=t, noise=noise)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0], losses


def test_cross_attention_queries_from_image_keys_from_context():
    vl.manual_seed(0)
    ca = CrossAttention2d(4, context_dim=6, num_heads=2)
    x = vl.randn(2, 4, 3, 3)
    ctx = vl.randn(2, 5, 6)
    out = ca.attend(x, ctx)
    assert tuple(out.shape) == (2, 9, 4)  # one row per image position, feature dim d_V = channels
    perm = ctx[:, [3, 0, 4, 1, 2]]
    np.testing.assert_allclose(ca.attend(x, perm)._data, out._data, rtol=1e-5, atol=1e-6)
    assert np.abs(ca.attend(x, ctx * 2)._data - out._data).max() > 1e-4
    assert tuple(ca(x, ctx).shape) == (2, 4, 3, 3)
    lc = LabelContext(10, 6, length=5)
    assert tuple(lc(Tensor._make(np.array([1, 2]))).shape) == (2, 5, 6)


def test_classifier_free_guidance_combination():
    # a fake model whose eps is the label (10 = null token gives 0) plus x
    def model(x, t, y):
        return x + Tensor._make(y._data.astype(np.float32)[:, None] * (y._data != 10)[:, None])
    x = vl.zeros(3, 2)
    t = Tensor._make(np.array([1, 2, 3]))
    y = Tensor._make(np.array([1, 2, 3]))
    for s, expect in ((0.0, 0.0), (1.0, 1.0), (3.0, 3.0)):
        g = guided_eps(model, x, t, y, s, 10)
        np.testing.assert_allclose(g._data, expect * np.array([[1.0], [2.0], [3.0]]) * np.ones((3, 2)))
    cfg = ClassifierFreeGuidance(model, y, 2.0, 10)
    np.testing.assert_allclose(cfg(x, t)._data[:, 0], [2, 4, 6])
    d = drop_labels(Tensor._make(np.zeros(20000, np.int64)), 0.2, 10)._data
    assert (d == 10).mean() == pytest.approx(0.2, abs=0.01) and set(np.unique(d)) == {0, 10}
    with pytest.raises(ValueError, match="p_uncond"):
        drop_labels(d, 1.5, 10)


def test_latent_diffusion_trains_only_the_denoiser():
    vl.manual_seed(0)
    vae = VAE(in_features=16, latent_dim=3, hidden=(8,))
    den = DenoiserMLP(data_dim=3, hidden=(8,), time_dim=4, max_steps=20)
    ld = LatentDiffusion(vae, den, GaussianDiffusion.linear(20, beta_end=0.2))
    x = Tensor._make((np.random.default_rng(0).random((64, 16)) < 0.5).astype(np.float32))
    ld.fit_scale(x)
    z = ld.encode(x)
    assert float(z._data.std()) == pytest.approx(1.0, rel=1e-4)
    np.testing.assert_allclose(z._data.mean(0), 0, atol=1e-5)
    ld.loss(x).backward()
    assert all(p.grad is None for p in vae.parameters())
    assert all(p.grad is not None for p in den.parameters())
    s = ld.sample(5, ddim_steps=5)
    assert tuple(s.shape) == (5, 16) and float(s.min()) >= 0 and float(s.max()) <= 1


def test_sigmoid_fast_path_matches_torch_at_extremes():
    # varlens/core/primitives.py _sigmoid_array was rewritten for speed (SiLU of the denoiser): check it
    for dt in (np.float32, np.float64):
        x = np.concatenate([np.array([-800, -100, -50, -20, -1e-3, 0, 1e-3, 20, 50, 100, 800]),
                            np.linspace(-8, 8, 101)]).astype(dt)
        got = vl.sigmoid(Tensor._make(x))
        assert got.dtype == dt
        ref = torch.sigmoid(torch.from_numpy(x)).numpy()
        np.testing.assert_allclose(got._data, ref, rtol=4 * np.finfo(dt).eps, atol=np.finfo(dt).tiny)  # torch flushes subnormals
    xs = vl.randn(4, 3, dtype=vl.float64, requires_grad=True)
    gradcheck(lambda a: vl.nn.functional.silu(a), [xs])
    # integer input: float32 values, as torch (not truncated to 0/1); silu of integers raises, as torch
    xi = np.array([3, -2, 0, 40, -40])
    got = vl.sigmoid(Tensor._make(xi))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got._data, torch.sigmoid(torch.from_numpy(xi)).numpy(), rtol=4e-7, atol=1e-38)
    with pytest.raises(NotImplementedError, match="silu"):
        vl.nn.functional.silu(Tensor._make(xi))
    # 0-d inputs take the two-branch form: check both signs against torch
    for v in (-30.0, 2.5):
        for dt in (np.float32, np.float64):
            a = np.array(v, dtype=dt)
            np.testing.assert_allclose(vl.sigmoid(Tensor._make(a))._data, torch.sigmoid(torch.from_numpy(a)).numpy(),
                                       rtol=4 * np.finfo(dt).eps)


# ------------------------------------------------------------- speed paths (benchmarks/bench_generative.py)
def test_time_embedding_cache_equals_the_formula():
    emb = vl.generative.SinusoidalTimeEmbedding(8, max_steps=50)
    t = np.array([0, 1, 7, 50, 7])
    for dt in (np.float32, np.float64, np.float32):  # the second float32 call reads the cached table
        e = emb(Tensor._make(t), dt)._data
        assert e.dtype == dt and e.shape == (5, 8)
        # row t, column 2i: sin(t / 10000^(2i/8)); column 2i + 1: cos of the same angle
        ang = t[:, None] / 10000.0 ** (np.arange(0, 8, 2) / 8)
        np.testing.assert_allclose(e[:, 0::2], np.sin(ang), rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(e[:, 1::2], np.cos(ang), rtol=1e-6, atol=1e-7)
    np.testing.assert_array_equal(emb(t, np.float32)._data, emb.table[t].astype(np.float32))
    with pytest.raises(IndexError):
        emb(np.array([51]))


@pytest.mark.parametrize("num_classes", [None, 3])
def test_denoiser_no_grad_fast_path_equals_the_recorded_forward(num_classes):
    vl.manual_seed(3)
    m = DenoiserMLP(data_dim=3, hidden=(16, 12, 12), time_dim=8, max_steps=30, num_classes=num_classes).double()
    x = Tensor._make(np.random.default_rng(0).standard_normal((7, 3)) * 4)
    y = Tensor._make(np.array([0, 1, 2, 3, 0, 1, 2])) if num_classes else None
    for t0 in (1, 13, 30):
        t = Tensor._make(np.full(7, t0))
        ref = m(x, t, y)                      # grad on: the recorded Linear/SiLU path
        assert ref.requires_grad
        fast = m._forward_shared_t(x, t, y)   # the array path used under no_grad
        assert fast is not None and not fast.requires_grad
        np.testing.assert_allclose(fast._data, ref._data, rtol=1e-12, atol=1e-14)
        with vl.no_grad():
            np.testing.assert_allclose(m(x, t, y)._data, ref._data, rtol=1e-12, atol=1e-14)
    # steps that differ across the batch, or a hook on a layer: the fast path declines
    tv = Tensor._make(np.arange(1, 8))
    assert m._forward_shared_t(x, tv, y) is None
    ref_v = m(x, tv, y)._data
    with vl.no_grad():
        np.testing.assert_allclose(m(x, tv, y)._data, ref_v, rtol=1e-12, atol=1e-14)
        for i in (0, 4):  # each example alone has a shared t: the fast path gives the same rows
            one = m(x[i:i + 1], tv[i:i + 1], y[i:i + 1] if y is not None else None)._data
            np.testing.assert_allclose(one[0], ref_v[i], rtol=1e-12, atol=1e-14)
    seen = []
    h = m.layers[1].register_forward_hook(lambda mod, a, out: seen.append(out.shape))
    with vl.no_grad():
        m(x, Tensor._make(np.full(7, 5)), y)
    h.remove()
    assert seen == [(7, 12)]
    # float32, benchmark-sized layers: SiLU as h'(1 + tanh h') agrees to float32 rounding
    vl.manual_seed(4)
    m32 = DenoiserMLP(2, (256, 256), time_dim=64, max_steps=1000)
    x32 = Tensor._make((np.random.default_rng(1).standard_normal((64, 2)) * 3).astype(np.float32))
    for t0 in (1, 500, 1000):
        t = Tensor._make(np.full(64, t0))
        ref = m32(x32, t)._data
        with vl.no_grad():
            got = m32(x32, t)._data
        assert got.dtype == np.float32
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-6 * np.abs(ref).max())


def test_in_place_sampler_steps_equal_the_reference_formulas():
    D = GaussianDiffusion.linear(40, beta_end=0.2)
    rng = np.random.default_rng(5)
    x, eps, z = (rng.standard_normal((6, 2)) for _ in range(3))
    for t in (40, 17, 2, 1):
        # ancestral step: mu(x_t, t) (§11.4.2, through the per-example table gathers) + sigma_t z
        ref = D.mean_from_eps(Tensor._make(x), np.full(6, t), Tensor._make(eps))._data
        if t > 1:
            ref = ref + D.sigmas[t] * z
        got = D._p_step_(x.copy(), eps, t, z if t > 1 else None)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
        # clipped: the corrected posterior mean m_t(clip(x0_hat), x_t) + sigma_t z
        x0 = D.predict_x0(Tensor._make(x), np.full(6, t), Tensor._make(eps)).clamp(-1.0, 1.0)
        ref = D.q_posterior(x0, Tensor._make(x), np.full(6, t))[0]._data
        if t > 1:
            ref = ref + D.sigmas[t] * z
        got = D._p_step_(x.copy(), eps, t, z if t > 1 else None, clip=1.0)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-14)
    # whole samplers against loops of Tensor formulas, same generator stream and model
    m = _tiny(1)

    def model(xx, tt, **kw):
        return m(xx, tt)
    D = GaussianDiffusion.linear(20, beta_end=0.2)
    got = D.sample(model, (5, 2), generator=vl.Generator().manual_seed(3), dtype=vl.float64)._data
    g = vl.Generator().manual_seed(3)
    xr = vl.randn(5, 2, generator=g, dtype=vl.float64)
    for t in range(20, 0, -1):
        xr = D.p_sample(model, xr, t, generator=g)
    np.testing.assert_allclose(got, xr._data, rtol=1e-12, atol=1e-14)
    got = D.ddim_sample(model, (5, 2), steps=6, generator=vl.Generator().manual_seed(4), dtype=vl.float64)._data
    xr = vl.randn(5, 2, generator=vl.Generator().manual_seed(4), dtype=vl.float64)
    ts = D.ddim_timesteps(6)
    ab = D.alphas_cumprod
    for i, t in enumerate(ts):
        e = m(xr, Tensor._make(np.full(5, t)))
        x0 = (xr - math.sqrt(1 - ab[t]) * e) * (1 / math.sqrt(ab[t]))
        xr = x0 if i == len(ts) - 1 else math.sqrt(ab[ts[i + 1]]) * x0 + math.sqrt(1 - ab[ts[i + 1]]) * e
    np.testing.assert_allclose(got, xr._data, rtol=1e-12, atol=1e-14)
    # a model whose output is its input (eps aliases x): DDIM must not read an overwritten eps
    D.ddim_sample(lambda xx, tt, **k: xx, (3, 2), steps=4, generator=vl.Generator().manual_seed(0))
    xi = vl.randn(3, 2, generator=vl.Generator().manual_seed(0))._data
    for i, t in enumerate(D.ddim_timesteps(4)):
        x0 = (xi - math.sqrt(1 - ab[t]) * xi) / math.sqrt(ab[t])
        s = D.ddim_timesteps(4)[i + 1] if i < 3 else 0
        xi = x0 if s == 0 else math.sqrt(ab[s]) * x0 + math.sqrt(1 - ab[s]) * xi
    np.testing.assert_allclose(D.ddim_sample(lambda xx, tt, **k: xx, (3, 2), steps=4,
                                             generator=vl.Generator().manual_seed(0))._data, xi, rtol=1e-5)


def test_silu_op_gradcheck_double_backward_and_torch_parity():
    # SiLU's forward now saves its output and the array backward computes s (1 + x - y)
    x = np.concatenate([np.array([-120.0, -30.0, -8.0, -1e-4, 0.0, 1e-4, 8.0, 30.0, 120.0]),
                        np.random.default_rng(0).standard_normal(11) * 3])
    for dt, tol in ((np.float64, 1e-13), (np.float32, 3e-6)):
        a = Tensor._make(x.astype(dt)).requires_grad_(True)
        ta = torch.from_numpy(x.astype(dt)).requires_grad_(True)
        y = vl.nn.functional.silu(a)
        ty = torch.nn.functional.silu(ta)
        w = np.linspace(-1, 2, x.size).astype(dt)
        (y * Tensor._make(w)).sum().backward()
        (ty * torch.from_numpy(w)).sum().backward()
        assert_close(y, ty, rtol=tol, atol=tol * 1e-2, what=f"silu {dt.__name__}")
        assert_close(a.grad, ta.grad, rtol=tol, atol=tol * 1e-2, what=f"silu grad {dt.__name__}")
    xs = vl.randn(3, 4, dtype=vl.float64, requires_grad=True)
    gradcheck(lambda v: vl.nn.functional.silu(v), [xs])
    (g,) = vl.autograd.grad(vl.nn.functional.silu(xs).sum(), [xs], create_graph=True)
    (h,) = vl.autograd.grad((g * g).sum(), [xs])
    tx = to_torch(xs, True)
    (tg,) = torch.autograd.grad(torch.nn.functional.silu(tx).sum(), [tx], create_graph=True)
    (th,) = torch.autograd.grad((tg * tg).sum(), [tx])
    assert_close(g, tg, rtol=1e-12)
    assert_close(h, th, rtol=1e-10, atol=1e-12)
    # the backward reads the saved output: an in-place change to it afterwards must not leak in
    z = vl.randn(4, dtype=vl.float64, requires_grad=True)
    out = vl.nn.functional.silu(z * 1.0)
    out.add_(1.0)
    out.sum().backward()
    tz = to_torch(z, True)
    torch.nn.functional.silu(tz).sum().backward()
    assert_close(z.grad, tz.grad, rtol=1e-12, atol=1e-14)
