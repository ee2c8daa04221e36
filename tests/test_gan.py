"""GAN (seed 003 §9): losses against their BCE forms, 2 log 2 at d = 1/2, DCGAN structure, and a
2-D ring where the generator must cover the modes."""
import math

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_limits

import varlens as vl
from varlens.autograd import gradcheck
from varlens.generative.gan import (DCGANDiscriminator, DCGANGenerator, MLPDiscriminator, MLPGenerator,
                                    dcgan_init_, discriminator_loss, generator_loss, train_gan)
from varlens.generative.metrics import mode_coverage, ring_centers
from varlens.core.tensor import Tensor
from conftest import assert_close, to_torch


def sig(a):
    return 1 / (1 + np.exp(-a))


def test_losses_equal_their_bce_forms():
    rng = np.random.default_rng(0)
    r, f = rng.standard_normal((7, 1)) * 2, rng.standard_normal((5, 1)) * 2
    rt, ft = Tensor._make(r), Tensor._make(f)
    # eq. 9.1.1 with d = sigmoid(logit)
    expect = -np.log(sig(r)).mean() - np.log(1 - sig(f)).mean()
    assert float(discriminator_loss(rt, ft)) == pytest.approx(expect, rel=1e-12)
    assert float(generator_loss(ft)) == pytest.approx(-np.log(sig(f)).mean(), rel=1e-12)
    assert float(generator_loss(ft, saturating=True)) == pytest.approx(np.log(1 - sig(f)).mean(), rel=1e-12)
    # torch's BCEWithLogitsLoss gives the same numbers and gradients
    rt.requires_grad_(True)
    ft.requires_grad_(True)
    ld = discriminator_loss(rt, ft)
    ld.backward()
    tr, tf = to_torch(rt, True), to_torch(ft, True)
    bce = torch.nn.BCEWithLogitsLoss()
    ref = bce(tr, torch.ones_like(tr)) + bce(tf, torch.zeros_like(tf))
    ref.backward()
    assert_close(ld, ref, rtol=1e-12)
    assert_close(rt.grad, tr.grad, rtol=1e-10)
    assert_close(ft.grad, tf.grad, rtol=1e-10)
    gradcheck(lambda a, b: discriminator_loss(a, b), [rt, ft])
    gradcheck(lambda b: generator_loss(b), [ft])
    gradcheck(lambda b: generator_loss(b, saturating=True), [ft])


def test_equilibrium_value_is_two_log_two():
    z = Tensor._make(np.zeros((10, 1)))  # logit 0 <=> d = 1/2
    assert float(discriminator_loss(z, z)) == pytest.approx(2 * math.log(2), rel=1e-12)
    # and it is the most the discriminator can be forced to pay when real and fake coincide:
    # for any constant d, -log d - log(1 - d) >= 2 log 2
    for a in (-2.0, -0.3, 0.5, 3.0):
        c = Tensor._make(np.full((4, 1), a))
        assert float(discriminator_loss(c, c)) > 2 * math.log(2)


def test_non_saturating_loss_keeps_gradient_when_d_rejects_fakes():
    # d(g(z)) ~ 0 early in training: the minimax loss has a vanishing gradient, the
    # non-saturating one does not
    f = Tensor._make(np.full((4, 1), -8.0)).requires_grad_(True)
    generator_loss(f, saturating=True).backward()
    g_sat = np.abs(f.grad._data).max()
    f.grad = None
    generator_loss(f).backward()
    g_ns = np.abs(f.grad._data).max()
    assert g_sat < 1e-3 < 0.2 < g_ns


def test_dcgan_structure_and_shapes():
    vl.manual_seed(0)
    G, D = DCGANGenerator(nz=8, ngf=4), DCGANDiscriminator(ndf=4)
    dcgan_init_(G)
    dcgan_init_(D)
    names = lambda m: [type(x).__name__ for x in m.net]  # noqa: E731
    g, d = names(G), names(D)
    assert not any("Pool" in n for n in g + d)
    assert not any(n == "Linear" for n in g + d)
    assert g[-1] == "Tanh" and g[-2] == "ConvTranspose2d"          # no BN at the generator output
    assert d[0] == "Conv2d" and d[1] == "LeakyReLU"                 # no BN at the discriminator input
    assert g.count("BatchNorm2d") == 2 and d.count("BatchNorm2d") == 1
    assert [m.stride for m in G.net if type(m).__name__ == "ConvTranspose2d"][1:] == [(2, 2), (2, 2)]
    z = vl.randn(3, 8)
    x = G(z)
    assert tuple(x.shape) == (3, 1, 28, 28) and float(x.abs().max()) <= 1.0
    h = G.net[0](z.reshape(3, 8, 1, 1))
    assert tuple(h.shape[2:]) == (7, 7)
    assert tuple(G.net[3](G.net[2](G.net[1](h))).shape[2:]) == (14, 14)  # stride-2 ConvT doubles
    out = D(x)
    assert tuple(out.shape) == (3, 1)
    loss = generator_loss(out)
    loss.backward()
    assert all(p.grad is not None for p in G.parameters())


def test_ring_gan_covers_the_modes_with_minibatch_std():
    from varlens.datasets import make_ring_of_gaussians
    X, _ = make_ring_of_gaussians(20000, k=8, radius=2.0, std=0.05, seed=0)
    rng = np.random.default_rng(0)
    vl.manual_seed(0)
    G, D = MLPGenerator(2, 2, (64, 64)), MLPDiscriminator(2, (64, 64), minibatch_std=True)
    with threadpool_limits(1):
        logs = train_gan(G, D, lambda n: Tensor._make(X[rng.integers(0, len(X), n)]), steps=600,
                         batch_size=256, log_every=300)
    with vl.no_grad():
        s = G(vl.randn(2000, 2))._data
    cov = mode_coverage(s, ring_centers(8, 2.0), 0.3)
    assert cov["covered"] >= 7, cov
    assert cov["high_quality"] > 0.4, cov
    # the discriminator loss sits near its equilibrium value 2 log 2 = 1.386
    assert abs(logs[-1]["d_loss"] - 2 * math.log(2)) < 0.3, logs


def test_train_gan_in_chunks_keeps_the_optimisers():
    vl.manual_seed(0)
    G, D = MLPGenerator(2, 2, (8,)), MLPDiscriminator(2, (8,))
    opts = (vl.optim.Adam(G.parameters(), lr=1e-3), vl.optim.Adam(D.parameters(), lr=1e-3))
    real = lambda n: vl.randn(n, 2)  # noqa: E731
    a = train_gan(G, D, real, steps=4, batch_size=8, log_every=2, optimizers=opts)
    b = train_gan(G, D, real, steps=4, batch_size=8, log_every=2, optimizers=opts, start_step=4)
    assert [r["step"] for r in a + b] == [2, 4, 6, 8]
    assert opts[0].state[list(G.parameters())[0]]["step"] == 8
