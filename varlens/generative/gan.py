"""Generative adversarial networks (seed 003 §9).

Losses act on discriminator *logits* (d = sigmoid(logit)), through binary cross-entropy with
logits for numerical safety:
- ``discriminator_loss(real, fake)`` = -E log d(x) - E log(1 - d(g(z)))  (eq. 9.1.1): BCE with
  label 1 on real and 0 on fake, the two batch means added. At d = 1/2 it is 2 log 2.
- ``generator_loss(fake)`` = -E log d(g(z)), the non-saturating loss of Goodfellow et al. (not
  in the notes, which let the generator ascend eq. 9.1.1); ``saturating=True`` gives
  E log(1 - d(g(z))), the minimax generator loss (the generator minimises -L).
- ``MLPGenerator`` / ``MLPDiscriminator`` for low-dimensional data; ``DCGANGenerator`` /
  ``DCGANDiscriminator`` for 28x28 images (§9.2: strided convolutions instead of pooling,
  transposed convolutions to upsample, no fully connected hidden layers, batch norm everywhere
  except at the generator output and the discriminator input).
- ``train_gan``: alternating updates (``d_steps`` discriminator steps per generator step).
"""
from __future__ import annotations

import numpy as np

import varlens.nn.functional as F
from varlens.ops.creation import ones_like, randn, zeros_like
from varlens.nn.module import Module


def discriminator_loss(real_logits, fake_logits):
    """Eq. 9.1.1: BCE(real, 1) + BCE(fake, 0), each a mean over its batch."""
    return F.binary_cross_entropy_with_logits(real_logits, ones_like(real_logits)) + \
        F.binary_cross_entropy_with_logits(fake_logits, zeros_like(fake_logits))


def generator_loss(fake_logits, saturating=False):
    """Non-saturating -E log d(g(z)) (default) or the minimax E log(1 - d(g(z)))."""
    if saturating:
        return -F.binary_cross_entropy_with_logits(fake_logits, zeros_like(fake_logits))
    return F.binary_cross_entropy_with_logits(fake_logits, ones_like(fake_logits))


def _mlp(sizes, act):
    from varlens.nn import Linear, Sequential
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(act())
    return Sequential(*layers)


class MLPGenerator(Module):
    """z (B, latent_dim) -> x (B, data_dim) through a ReLU MLP."""

    def __init__(self, latent_dim=2, data_dim=2, hidden=(128, 128)):
        super().__init__()
        from varlens.nn import ReLU
        self.latent_dim = latent_dim
        self.net = _mlp([latent_dim] + list(hidden) + [data_dim], ReLU)

    def forward(self, z):
        return self.net(z)


class MLPDiscriminator(Module):
    """x (B, data_dim) -> one logit per example (B, 1), LeakyReLU(0.2) hidden layers.
    ``minibatch_std=True`` appends the batch's mean feature standard deviation as an extra input
    feature (a cheap form of minibatch discrimination against mode collapse)."""

    def __init__(self, data_dim=2, hidden=(128, 128), minibatch_std=False):
        super().__init__()
        from varlens.nn import LeakyReLU
        self.minibatch_std = minibatch_std
        self.net = _mlp([data_dim + int(minibatch_std)] + list(hidden) + [1], lambda: LeakyReLU(0.2))

    def forward(self, x):
        if self.minibatch_std:
            from varlens.ops import cat
            s = ((x - x.mean(0, keepdim=True)) ** 2).mean(0).sqrt().mean()
            x = cat([x, s.reshape(1, 1).expand(x.shape[0], 1)], 1)
        return self.net(x)


class DCGANGenerator(Module):
    """z (B, nz) -> image (B, channels, 28, 28) in [-1, 1].

    ConvT(nz -> 4 ngf, 7x7): 1 -> 7, BN, ReLU; ConvT(4, stride 2): 7 -> 14, BN, ReLU;
    ConvT(4, stride 2): 14 -> 28, tanh (no BN at the output)."""

    def __init__(self, nz=64, ngf=32, channels=1):
        super().__init__()
        from varlens.nn import BatchNorm2d, ConvTranspose2d, ReLU, Sequential, Tanh
        self.nz = nz
        self.net = Sequential(
            ConvTranspose2d(nz, 4 * ngf, 7, 1, 0, bias=False), BatchNorm2d(4 * ngf), ReLU(),
            ConvTranspose2d(4 * ngf, 2 * ngf, 4, 2, 1, bias=False), BatchNorm2d(2 * ngf), ReLU(),
            ConvTranspose2d(2 * ngf, channels, 4, 2, 1), Tanh())

    def forward(self, z):
        return self.net(z.reshape(z.shape[0], self.nz, 1, 1))


class DCGANDiscriminator(Module):
    """image (B, channels, 28, 28) -> logit (B, 1).

    Conv(4, stride 2): 28 -> 14, LeakyReLU (no BN at the input); Conv(4, stride 2): 14 -> 7, BN,
    LeakyReLU; Conv(7x7): 7 -> 1 logit. No pooling anywhere."""

    def __init__(self, ndf=32, channels=1):
        super().__init__()
        from varlens.nn import BatchNorm2d, Conv2d, LeakyReLU, Sequential
        self.net = Sequential(
            Conv2d(channels, ndf, 4, 2, 1), LeakyReLU(0.2),
            Conv2d(ndf, 2 * ndf, 4, 2, 1, bias=False), BatchNorm2d(2 * ndf), LeakyReLU(0.2),
            Conv2d(2 * ndf, 1, 7, 1, 0))

    def forward(self, x):
        return self.net(x).reshape(x.shape[0], 1)


def dcgan_init_(module, std=0.02):
    """DCGAN's initialisation: conv weights N(0, 0.02), BN gamma N(1, 0.02), beta 0."""
    from varlens.nn import BatchNorm2d, Conv2d, ConvTranspose2d, init
    for m in module.modules():
        if isinstance(m, (Conv2d, ConvTranspose2d)):
            init.normal_(m.weight, 0.0, std)
        elif isinstance(m, BatchNorm2d):
            init.normal_(m.weight, 1.0, std)
            init.zeros_(m.bias)
    return module


def train_gan(G, D, sample_real, steps=2000, batch_size=256, lr_g=1e-3, lr_d=1e-3, betas=(0.5, 0.999),
              d_steps=1, saturating=False, log_every=100, callback=None, generator=None, optimizers=None,
              start_step=0):
    """Alternating GAN training with Adam. ``sample_real(n)`` returns a Tensor batch of real data.

    Each iteration: ``d_steps`` discriminator steps on eq. 9.1.1 (fresh real and fake batches,
    the fakes detached), then one generator step. Returns a list of log dicts with the
    discriminator loss (2 log 2 = 1.386 at equilibrium) and the mean d(real), d(fake).
    ``optimizers=(opt_g, opt_d)`` continues with existing optimisers (to train in chunks without
    resetting Adam's moments); ``start_step`` offsets the logged step numbers."""
    from varlens.optim import Adam
    if optimizers is not None:
        opt_g, opt_d = optimizers
    else:
        opt_g = Adam(G.parameters(), lr=lr_g, betas=betas)
        opt_d = Adam(D.parameters(), lr=lr_d, betas=betas)
    nz = G.latent_dim if hasattr(G, "latent_dim") else G.nz
    logs = []
    for it in range(1, steps + 1):
        for _ in range(d_steps):
            real = sample_real(batch_size)
            fake = G(randn(batch_size, nz, generator=generator)).detach()
            lr_, lf_ = D(real), D(fake)
            ld = discriminator_loss(lr_, lf_)
            opt_d.zero_grad()
            ld.backward()
            opt_d.step()
        lg = generator_loss(D(G(randn(batch_size, nz, generator=generator))), saturating)
        opt_g.zero_grad()
        lg.backward()
        opt_g.step()
        if it % log_every == 0 or it == steps:
            rec = dict(step=start_step + it, d_loss=float(ld), g_loss=float(lg),
                       d_real=float(np.mean(1 / (1 + np.exp(-lr_._data)))),
                       d_fake=float(np.mean(1 / (1 + np.exp(-lf_._data)))))
            logs.append(rec)
            if callback is not None:
                callback(rec)
    return logs
