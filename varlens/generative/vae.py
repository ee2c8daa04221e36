"""Variational autoencoders (seed 003 §10).

- ``gaussian_kl(mu1, logvar1, mu2, logvar2)``: elementwise KL(N(mu1, s1^2) || N(mu2, s2^2)),
  eq. 10.2.7: ((s1^2 + (mu1 - mu2)^2) / s2^2 - log(s1^2 / s2^2) - 1) / 2.
- ``kl_standard_normal(mu, logvar)``: KL(q || N(0, I)) summed over the latent dims, eq. 10.2.8.
- ``reparameterize(mu, logvar)``: z = mu + sigma * eps, eps ~ N(0, I) (§10.3).
- ``log_likelihood(x, out, likelihood)``: log p(x | z) for Bernoulli (logits) or Gaussian decoders
  (§10.2.4), with the Gaussian constant -(n/2) log(2 pi sigma^2) included so it is a true density.
- ``elbo(...)`` (Lemma 10.2.3 / eq. 10.2.4, beta-VAE weight on the KL) and
  ``importance_log_px(...)``: log p(x) ~ log mean_k p(x | z_k) p(z_k) / q(z_k | x), z_k ~ q.
- ``bernoulli_nll(logits, x)``: -log p(x | z) per example for a Bernoulli decoder.
- ``VAE``: MLP encoder -> (mu, log sigma^2), MLP decoder; ``num_classes`` makes it a conditional
  VAE (§10.5): a one-hot label is fed to both encoder and decoder.

``kl_standard_normal``, ``reparameterize`` and the Bernoulli likelihood are each one fused op
(``KLStdNormal``, ``Reparameterize``, ``BernoulliNLL``) with a closed-form backward, so the VAE
objective is a few tape nodes instead of some twenty small ones.
"""
from __future__ import annotations

import math

import numpy as np

from varlens.core.array import xp
from varlens.ops.creation import randn
from varlens.nn.module import Module
from varlens.ops import cat, exp, logsumexp
from varlens.core.tensor import Tensor
from varlens.ops.nn.loss import BernoulliNLL, KLStdNormal
from varlens.ops.random import Reparameterize

LOG_2PI = math.log(2 * math.pi)


def gaussian_kl(mu1, logvar1, mu2=None, logvar2=None):
    """Elementwise KL(N(mu1, exp(logvar1)) || N(mu2, exp(logvar2))) (seed 003 eq. 10.2.7);
    mu2, logvar2 default to the standard normal."""
    if mu2 is None and logvar2 is None:
        return 0.5 * (exp(logvar1) + mu1 * mu1 - logvar1 - 1.0)
    mu2 = 0.0 if mu2 is None else mu2
    logvar2 = 0.0 if logvar2 is None else logvar2
    inv_var2 = exp(-logvar2) if isinstance(logvar2, Tensor) else math.exp(-logvar2)
    d = mu1 - mu2
    return 0.5 * (exp(logvar1 - logvar2) + d * d * inv_var2 - (logvar1 - logvar2) - 1.0)


def kl_standard_normal(mu, logvar):
    """KL(N(mu, diag exp(logvar)) || N(0, I)) per example, summed over the last dim (eq. 10.2.8)."""
    if tuple(mu.shape) != tuple(logvar.shape):
        raise ValueError(f"kl_standard_normal: mu and logvar must have the same shape, got "
                         f"{tuple(mu.shape)} and {tuple(logvar.shape)}")
    return KLStdNormal.apply(mu, logvar)


def bernoulli_nll(logits, x):
    """-log p(x | z) per example for Bernoulli logits (summed over all but the first axis)."""
    if tuple(logits.shape) != tuple(x.shape):
        raise ValueError(f"bernoulli_nll: x must have the logits' shape {tuple(logits.shape)}, got "
                         f"{tuple(x.shape)}")
    if logits.ndim < 1:
        raise ValueError("bernoulli_nll: logits must have a batch axis, got a 0-d tensor")
    if not isinstance(x, Tensor):
        x = Tensor._make(xp.asarray(x, dtype=logits.dtype))
    elif x.dtype.kind != "f":
        x = Tensor._make(x._data.astype(logits.dtype))
    return BernoulliNLL.apply(logits, x)


def reparameterize(mu, logvar, generator=None):
    """z = mu + exp(logvar / 2) * eps with eps ~ N(0, I): a draw from q that autograd can
    differentiate with respect to mu and logvar (seed 003 §10.3)."""
    eps = randn(*mu.shape, generator=generator, dtype=mu.dtype)
    return Reparameterize.apply(mu, logvar, eps)


def log_likelihood(x, out, likelihood="bernoulli", obs_std=1.0):
    """log p(x | z) per example, summed over all but the first dim.

    "bernoulli": ``out`` are logits; log p = sum x log theta + (1 - x) log(1 - theta) = -BCE.
    "gaussian": ``out`` is the mean; log p = -|x - out|^2 / (2 sigma^2) - (n/2) log(2 pi sigma^2)."""
    B = x.shape[0]
    if likelihood == "bernoulli":
        return -bernoulli_nll(out, x)
    if likelihood == "gaussian":
        n = int(np.prod(x.shape[1:]))
        sq = ((x - out) ** 2).reshape(B, -1).sum(1)
        return sq * (-0.5 / obs_std ** 2) - 0.5 * n * (LOG_2PI + 2 * math.log(obs_std))
    raise ValueError(f"log_likelihood: likelihood must be 'bernoulli' or 'gaussian', got {likelihood!r}")


def elbo(x, mu, logvar, decode, likelihood="bernoulli", beta=1.0, n_samples=1, obs_std=1.0, generator=None,
         kl="analytic"):
    """Per-example ELBO = E_q[log p(x|z)] - beta KL(q(z|x) || N(0, I)) (Lemma 10.2.3, eq. 10.2.4;
    beta != 1 is the beta-VAE objective of Remark 10.2.5). The reconstruction term is a Monte
    Carlo average over ``n_samples`` reparametrised draws. ``kl="analytic"`` uses the closed
    form eq. 10.2.8; ``kl="sample"`` estimates everything from the draws, i.e. Definition 10.2.1,
    E_q[log p(x, z) - log q(z)], which is exactly log p(x) for every draw when q is the posterior."""
    if kl not in ("analytic", "sample"):
        raise ValueError(f"elbo: kl must be 'analytic' or 'sample', got {kl!r}")
    rec = None
    for _ in range(int(n_samples)):
        z = reparameterize(mu, logvar, generator)
        term = log_likelihood(x, decode(z), likelihood, obs_std)
        if kl == "sample":
            term = term + beta * (gaussian_log_density(z, 0 * z, 0 * z) - gaussian_log_density(z, mu, logvar))
        rec = term if rec is None else rec + term
    if n_samples != 1:
        rec = rec * (1.0 / n_samples)
    return rec if kl == "sample" else rec - beta * kl_standard_normal(mu, logvar)


def gaussian_log_density(z, mu, logvar):
    """log N(z; mu, diag exp(logvar)) summed over the last dim."""
    return -0.5 * (((z - mu) ** 2) * exp(-logvar) + logvar + LOG_2PI).sum(-1)


def importance_log_px(x, mu, logvar, decode, likelihood="bernoulli", n_importance=100, obs_std=1.0,
                      generator=None):
    """Importance-sampled log p(x) per example with q(z|x) as proposal:
    log (1/K) sum_k p(x|z_k) p(z_k) / q(z_k|x). A lower bound in expectation that rises to log p(x)
    as K grows (K = 1 gives an unbiased ELBO sample). No gradients are recorded."""
    from varlens.autograd import no_grad
    K = int(n_importance)
    with no_grad():
        ws = []
        for _ in range(K):
            z = reparameterize(mu, logvar, generator)
            lw = log_likelihood(x, decode(z), likelihood, obs_std) + gaussian_log_density(z, 0 * z, 0 * z) \
                - gaussian_log_density(z, mu, logvar)
            ws.append(lw.reshape(-1, 1))
        W = cat(ws, 1)
        return logsumexp(W, 1) - math.log(K)


def _mlp(sizes, final_act=False):
    from varlens.nn import Linear, ReLU, Sequential
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(Linear(a, b))
        if i < len(sizes) - 2 or final_act:
            layers.append(ReLU())
    return Sequential(*layers)


class VAE(Module):
    """MLP VAE on flattened inputs (seed 003 §10): x -> (mu, log sigma^2) -> z -> decoder output.

    ``likelihood="bernoulli"`` (decoder outputs logits; for data in [0, 1]) or ``"gaussian"``
    (decoder outputs the mean; ``obs_std`` fixes sigma). ``num_classes`` gives a conditional VAE
    (§10.5) with the one-hot label appended to the encoder input and to z."""

    def __init__(self, in_features=784, latent_dim=20, hidden=(400,), likelihood="bernoulli", obs_std=1.0,
                 num_classes=None, beta=1.0):
        super().__init__()
        if likelihood not in ("bernoulli", "gaussian"):
            raise ValueError(f"VAE: likelihood must be 'bernoulli' or 'gaussian', got {likelihood!r}")
        from varlens.nn import Linear
        self.in_features, self.latent_dim = in_features, latent_dim
        self.likelihood, self.obs_std, self.beta = likelihood, obs_std, beta
        self.num_classes = num_classes
        c = num_classes or 0
        self.encoder = _mlp([in_features + c] + list(hidden), final_act=True)
        self.fc_mu = Linear(hidden[-1], latent_dim)
        self.fc_logvar = Linear(hidden[-1], latent_dim)
        self.decoder = _mlp([latent_dim + c] + list(hidden)[::-1] + [in_features])

    def _onehot(self, y, n, dtype):
        if self.num_classes is None:
            return None
        if y is None:
            raise ValueError("VAE: this is a conditional VAE (num_classes set); pass the labels y")
        a = y._data if isinstance(y, Tensor) else np.asarray(y)
        oh = np.zeros((n, self.num_classes), dtype=dtype)
        oh[np.arange(n), a.astype(np.int64)] = 1
        return Tensor._make(oh)

    def encode(self, x, y=None):
        if x.ndim != 2:
            x = x.reshape(x.shape[0], -1)
        oh = self._onehot(y, x.shape[0], x.dtype)
        h = self.encoder(x if oh is None else cat([x, oh], 1))
        return self.fc_mu(h), self.fc_logvar(h)

    def decode(self, z, y=None):
        oh = self._onehot(y, z.shape[0], z.dtype)
        return self.decoder(z if oh is None else cat([z, oh], 1))

    def mean_image(self, out):
        """Decoder output -> the mean of p(x|z) (sigmoid of logits for Bernoulli)."""
        return out.sigmoid() if self.likelihood == "bernoulli" else out

    def forward(self, x, y=None):
        mu, logvar = self.encode(x, y)
        z = reparameterize(mu, logvar)
        return self.decode(z, y), mu, logvar

    def elbo(self, x, y=None, n_samples=1, beta=None):
        """Per-example ELBO (flattened x)."""
        x = x.reshape(x.shape[0], -1)
        mu, logvar = self.encode(x, y)
        return elbo(x, mu, logvar, lambda z: self.decode(z, y), self.likelihood,
                    self.beta if beta is None else beta, n_samples, self.obs_std)

    def loss(self, x, y=None):
        """-ELBO averaged over the batch (the training objective, beta included): the mean of
        -log p(x | z) + beta KL(q(z|x) || N(0, I)) with one reparametrised z per example."""
        if self.likelihood != "bernoulli":
            return -self.elbo(x, y).mean()
        if x.ndim != 2:
            x = x.reshape(x.shape[0], -1)
        mu, logvar = self.encode(x, y)
        z = reparameterize(mu, logvar)
        nll = bernoulli_nll(self.decode(z, y), x)
        kl = kl_standard_normal(mu, logvar)
        return (nll + (kl if self.beta == 1 else self.beta * kl)).mean()

    def log_px(self, x, y=None, n_importance=100):
        x = x.reshape(x.shape[0], -1)
        from varlens.autograd import no_grad
        with no_grad():
            mu, logvar = self.encode(x, y)
        return importance_log_px(x, mu, logvar, lambda z: self.decode(z, y), self.likelihood, n_importance,
                                 self.obs_std)

    def sample(self, n, y=None, generator=None):
        from varlens.autograd import no_grad
        with no_grad():
            z = randn(n, self.latent_dim, generator=generator)
            return self.mean_image(self.decode(z, y))
