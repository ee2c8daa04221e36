"""Bayesian updating with conjugate priors, MAP estimates, and MAP = weight decay
(seed 003 §3.4 and §3.4.1; §4.1.1 for the L1/L2 penalties).

Conjugate pairs: Beta-Bernoulli, Normal-Normal (known noise variance), Gamma-Poisson
(Gamma with shape alpha and *rate* beta).  The Warriors example of 003 Example 3.4.1 is
:func:`warriors`.

MAP as regularisation: with y = X theta + noise, noise ~ N(0, sigma^2) and prior
theta_j ~ N(0, tau^2), the negative log posterior is, up to a constant,
||y - X theta||^2 / (2 sigma^2) + ||theta||^2 / (2 tau^2), so the MAP estimate is ridge
regression with penalty lambda = sigma^2 / tau^2 on the summed squared error:
theta = (X^T X + lambda I)^{-1} X^T y.  With a Laplace(0, b) prior the penalty is
||theta||_1 / b, i.e. the lasso.  (The notes write -ln p(theta|D) = -ln p(D|theta) + ln p(theta);
the prior term has a minus sign: -ln p(D|theta) - ln p(theta), up to ln p(D).)
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import special, stats

import varlens as vl

__all__ = ["BetaBernoulli", "NormalNormal", "GammaPoisson", "warriors", "neg_log_posterior",
           "ridge_closed_form", "map_regression", "load_regression_data"]


@dataclass
class BetaBernoulli:
    """Beta(alpha, beta) prior on a coin's probability; each update adds successes to alpha
    and failures to beta."""

    alpha: float = 1.0
    beta: float = 1.0

    def update(self, x):
        a = np.asarray(x, dtype=np.float64).ravel()
        if not np.all((a == 0) | (a == 1)):
            raise ValueError("x: expected 0/1 observations")
        return BetaBernoulli(self.alpha + a.sum(), self.beta + a.size - a.sum())

    def mean(self):
        """Posterior mean, also the predictive probability of the next success."""
        return self.alpha / (self.alpha + self.beta)

    predictive = mean

    def map(self):
        """Posterior mode (alpha - 1)/(alpha + beta - 2) (defined for alpha, beta > 1)."""
        if self.alpha <= 1 or self.beta <= 1:
            raise ValueError(f"map: the Beta mode needs alpha, beta > 1, got alpha={self.alpha}, beta={self.beta}")
        return (self.alpha - 1) / (self.alpha + self.beta - 2)

    def pdf(self, theta):
        return stats.beta(self.alpha, self.beta).pdf(theta)

    def evidence(self, k, n, ordered=False):
        """P(k successes in n trials) under this prior: C(n, k) B(alpha + k, beta + n - k)/B(alpha, beta)
        (without the binomial coefficient when ``ordered``, i.e. one particular sequence)."""
        logb = special.betaln(self.alpha + k, self.beta + n - k) - special.betaln(self.alpha, self.beta)
        c = 0.0 if ordered else math.log(math.comb(n, k))
        return math.exp(c + logb)


@dataclass
class NormalNormal:
    """N(mu0, tau2) prior on the mean of N(mean, sigma2) data with known sigma2.
    Posterior precision = 1/tau2 + n/sigma2; posterior mean = precision-weighted average."""

    mu0: float = 0.0
    tau2: float = 1.0
    sigma2: float = 1.0

    def update(self, x):
        a = np.asarray(x, dtype=np.float64).ravel()
        prec = 1 / self.tau2 + a.size / self.sigma2
        mean = (self.mu0 / self.tau2 + a.sum() / self.sigma2) / prec
        return NormalNormal(float(mean), float(1 / prec), self.sigma2)

    def mean(self):
        return self.mu0

    def map(self):
        """The posterior is Gaussian, so its mode equals its mean."""
        return self.mu0

    def predictive(self):
        """(mean, variance) of the next observation: N(mu0, tau2 + sigma2)."""
        return self.mu0, self.tau2 + self.sigma2


@dataclass
class GammaPoisson:
    """Gamma(alpha, rate beta) prior on a Poisson rate: posterior Gamma(alpha + sum x, beta + n)."""

    alpha: float = 1.0
    beta: float = 1.0

    def update(self, x):
        a = np.asarray(x, dtype=np.float64).ravel()
        if np.any(a < 0) or not np.all(a == np.round(a)):
            raise ValueError("x: expected non-negative integer counts")
        return GammaPoisson(self.alpha + a.sum(), self.beta + a.size)

    def mean(self):
        return self.alpha / self.beta

    def map(self):
        """Mode (alpha - 1)/beta for alpha >= 1."""
        if self.alpha < 1:
            raise ValueError(f"map: the Gamma mode needs alpha >= 1, got {self.alpha}")
        return (self.alpha - 1) / self.beta

    def predictive_pmf(self, k):
        """Negative binomial: P(next = k) = C(k + alpha - 1, k) (beta/(beta+1))^alpha (1/(beta+1))^k."""
        k = np.asarray(k, dtype=np.float64)
        a, b = self.alpha, self.beta
        return np.exp(special.gammaln(k + a) - special.gammaln(a) - special.gammaln(k + 1)
                      + a * math.log(b / (b + 1)) - k * math.log(b + 1))


def warriors(wins=2, games=3):
    """003 Example 3.4.1: wins out of games with a uniform prior.  Returns a dict with the MLE,
    the evidence P(D) (with the binomial coefficient, as the notes), the posterior (a
    BetaBernoulli), its density function, the MAP and the predictive P(win next)."""
    prior = BetaBernoulli(1.0, 1.0)
    post = prior.update([1] * wins + [0] * (games - wins))
    return {"mle": wins / games, "evidence": prior.evidence(wins, games), "posterior": post,
            "posterior_pdf": post.pdf, "map": post.map() if 0 < wins < games else wins / games,
            "predictive": post.predictive()}


# ----------------------------------------------------------------------------- MAP regression
def load_regression_data():
    """scikit-learn's diabetes data (bundled with scikit-learn, no download): 442 x 10
    features standardised to zero mean and unit variance, target centred."""
    from sklearn.datasets import load_diabetes
    X, y = load_diabetes(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    return X, y - y.mean()


def neg_log_posterior(theta, X, y, noise_var, prior="gaussian", prior_scale=1.0):
    """-ln p(D | theta) - ln p(theta) computed from the densities themselves (scipy.stats
    log-pdfs), with Gaussian noise of variance ``noise_var`` and i.i.d. prior N(0, prior_scale^2)
    or Laplace(0, prior_scale) on each coefficient.  (The evidence ln p(D) is left out.)"""
    theta = np.asarray(theta, dtype=np.float64)
    lik = stats.norm(X @ theta, math.sqrt(noise_var)).logpdf(y).sum()
    if prior == "gaussian":
        lp = stats.norm(0, prior_scale).logpdf(theta).sum()
    elif prior == "laplace":
        lp = stats.laplace(0, prior_scale).logpdf(theta).sum()
    else:
        raise ValueError(f"prior: expected 'gaussian' or 'laplace', got {prior!r}")
    return float(-lik - lp)


def ridge_closed_form(X, y, lam):
    """argmin ||y - X theta||^2 + lam ||theta||^2 = (X^T X + lam I)^{-1} X^T y (003 Example 4.1.2
    with the sum, not the mean, of squared errors)."""
    d = X.shape[1]
    return np.linalg.solve(X.T @ X + lam * np.eye(d), X.T @ y)


def map_regression(X, y, noise_var, prior="gaussian", prior_scale=1.0, steps=3000, lr=None):
    """MAP estimate of linear-regression coefficients by minimising the negative log
    posterior with varlens autograd.

    Gaussian prior: plain gradient descent on ||y - X theta||^2/(2 sigma^2) + ||theta||^2/(2 tau^2)
    (the same minimiser as :func:`ridge_closed_form` with lam = sigma^2/tau^2).
    Laplace prior: proximal gradient (ISTA): an autograd gradient step on the likelihood term,
    then soft-thresholding by lr/b, which minimises the non-smooth ||theta||_1/b term exactly
    and gives exact zeros as the lasso does.  The step size defaults to 1/L with L the largest
    eigenvalue of the smooth part's Hessian.  Returns (theta, losses)."""
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2 or y.shape != (X.shape[0],):
        raise ValueError(f"X, y: expected X of shape (n, d) and y of shape (n,), got {X.shape} and {y.shape}")
    Xt, yt = vl.tensor(X, dtype=vl.float64), vl.tensor(y, dtype=vl.float64)
    L = np.linalg.eigvalsh(X.T @ X).max() / noise_var
    if prior == "gaussian":
        L += 1 / prior_scale ** 2
    elif prior != "laplace":
        raise ValueError(f"prior: expected 'gaussian' or 'laplace', got {prior!r}")
    lr = 1.0 / L if lr is None else lr
    theta = vl.zeros(X.shape[1], dtype=vl.float64, requires_grad=True)
    losses = []
    for _ in range(steps):
        theta.grad = None
        r = yt - Xt @ theta
        loss = (r * r).sum() / (2 * noise_var)
        if prior == "gaussian":
            loss = loss + (theta * theta).sum() / (2 * prior_scale ** 2)
        loss.backward()
        with vl.no_grad():
            theta.sub_(lr * theta.grad)
            if prior == "laplace":
                t = theta.detach().numpy()
                theta.copy_(vl.tensor(np.sign(t) * np.maximum(np.abs(t) - lr / prior_scale, 0.0),
                                      dtype=vl.float64))
        losses.append(loss.item() + (np.abs(theta.detach().numpy()).sum() / prior_scale
                                     if prior == "laplace" else 0.0))
    return theta.detach().numpy().copy(), losses
