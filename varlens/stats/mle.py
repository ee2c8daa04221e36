"""Maximum likelihood (seed 003 §3.3): closed forms for Bernoulli, Gaussian, Poisson and
categorical models, and the same fits reached by minimising the cross-entropy (the mean
negative log-likelihood) with varlens autograd and gradient descent (003 §3.3.1: minimising
H(p_data, q_model) is maximum likelihood).

Also the Olkin et al. example of an unstable MLE (003 Remark 3.3.5): Binomial(k, p) with both
unknown.  **Correction to the notes:** for the data [16, 18, 22, 25, 28] the maximum
likelihood integer k is 191, not 190 (the log-likelihood at 190 is lower by about 2.6e-7;
the maximiser over real k is 190.73).  The first data set's k = 99 is right.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import special

import varlens as vl

__all__ = ["bernoulli_mle", "gaussian_mle", "poisson_mle", "categorical_mle",
           "bernoulli_loglik", "gaussian_loglik", "poisson_loglik", "categorical_loglik",
           "gaussian_loglik_grad", "fit_by_cross_entropy", "binomial_profile_loglik",
           "binomial_k_mle"]


def _data(x, name="x"):
    a = np.asarray(x, dtype=np.float64).ravel()
    if a.size == 0:
        raise ValueError(f"{name}: expected at least one observation")
    return a


# ----------------------------------------------------------------------------- closed forms
def bernoulli_mle(x):
    """theta_hat = k/n for 0/1 data (003 Example 3.3.3)."""
    a = _data(x)
    if not np.all((a == 0) | (a == 1)):
        raise ValueError("x: expected 0/1 observations for a Bernoulli model")
    return float(a.mean())


def gaussian_mle(x):
    """(mu_hat, sigma2_hat) = (sample mean, naive variance (1/n)) (003 Example 3.3.4)."""
    a = _data(x)
    mu = a.mean()
    return float(mu), float(((a - mu) ** 2).mean())


def poisson_mle(x):
    """lambda_hat = sample mean for counts."""
    a = _data(x)
    if np.any(a < 0) or not np.all(a == np.round(a)):
        raise ValueError("x: expected non-negative integer counts for a Poisson model")
    return float(a.mean())


def categorical_mle(x, num_classes):
    """q_hat = empirical frequencies of the classes 0..K-1: the argmin over q of the
    cross-entropy H(p_hat, q) (003 §3.3.1)."""
    a = np.asarray(x).ravel()
    if a.size == 0 or a.min() < 0 or a.max() >= num_classes:
        raise ValueError(f"x: expected class labels in [0, {num_classes - 1}]")
    return np.bincount(a.astype(np.int64), minlength=num_classes) / a.size


# ----------------------------------------------------------------------------- log-likelihoods
def bernoulli_loglik(theta, x):
    """k ln theta + (n - k) ln(1 - theta) (003 (3.3.1))."""
    a = _data(x)
    k, n = a.sum(), a.size
    return float(special.xlogy(k, theta) + special.xlogy(n - k, 1 - theta))


def gaussian_loglik(mu, sigma2, x):
    """-n/2 ln(2 pi) - n/2 ln sigma^2 - sum (x_i - mu)^2 / (2 sigma^2) (003 Example 3.3.4)."""
    a = _data(x)
    n = a.size
    return float(-n / 2 * math.log(2 * math.pi) - n / 2 * math.log(sigma2) - ((a - mu) ** 2).sum() / (2 * sigma2))


def gaussian_loglik_grad(mu, sigma2, x):
    """(d/d mu, d/d sigma^2) of the Gaussian log-likelihood: (3.3.2) sum (x_i - mu)/sigma^2
    and (3.3.3) -n/(2 sigma^2) + sum (x_i - mu)^2 / (2 sigma^4)."""
    a = _data(x)
    n = a.size
    return (float((a - mu).sum() / sigma2),
            float(-n / (2 * sigma2) + ((a - mu) ** 2).sum() / (2 * sigma2 ** 2)))


def poisson_loglik(lam, x):
    a = _data(x)
    return float((special.xlogy(a, lam) - lam - special.gammaln(a + 1)).sum())


def categorical_loglik(q, x):
    q = np.asarray(q, dtype=np.float64)
    a = np.asarray(x).ravel().astype(np.int64)
    with np.errstate(divide="ignore"):
        return float(np.log(q[a]).sum())


# ----------------------------------------------------------------------------- autograd fits
def fit_by_cross_entropy(family, x, num_classes=None, steps=500, lr=0.5):
    """Fit ``family`` ("bernoulli", "gaussian", "poisson", "categorical") by gradient descent
    on the mean negative log-likelihood (the cross-entropy between the data's empirical
    distribution and the model, 003 §3.3.1), computed with varlens tensors and autograd.

    Unconstrained parameters: logit theta; (mu, ln sigma^2); ln lambda; class logits.
    Returns (fitted parameters in the closed-form functions' format, list of losses)."""
    a = _data(x) if family != "categorical" else np.asarray(x).ravel()
    t = vl.tensor(a.astype(np.float64), dtype=vl.float64)
    if family == "bernoulli":
        params = [vl.zeros(1, dtype=vl.float64, requires_grad=True)]

        def nll(ps):  # -[y log s(z) + (1-y) log(1 - s(z))] = softplus(z) - y z
            z = ps[0]
            return (vl.softplus(z) - t * z).mean()
    elif family == "gaussian":
        params = [vl.tensor([float(a[0])], dtype=vl.float64, requires_grad=True),
                  vl.zeros(1, dtype=vl.float64, requires_grad=True)]

        def nll(ps):
            mu, logv = ps
            return (0.5 * math.log(2 * math.pi) + 0.5 * logv + (t - mu) ** 2 / (2 * vl.exp(logv))).mean()
    elif family == "poisson":
        params = [vl.zeros(1, dtype=vl.float64, requires_grad=True)]
        lg = vl.tensor(special.gammaln(a + 1), dtype=vl.float64)

        def nll(ps):
            loglam = ps[0]
            return (vl.exp(loglam) - t * loglam + lg).mean()
    elif family == "categorical":
        if num_classes is None:
            raise ValueError("num_classes: required for the categorical family")
        onehot = vl.tensor(np.eye(num_classes)[a.astype(np.int64)], dtype=vl.float64)
        params = [vl.zeros(num_classes, dtype=vl.float64, requires_grad=True)]

        def nll(ps):
            return -(onehot * vl.log_softmax(ps[0], dim=0)).sum(dim=1).mean()
    else:
        raise ValueError(f"family: expected 'bernoulli', 'gaussian', 'poisson' or 'categorical', got {family!r}")

    losses = []
    for _ in range(steps):
        for p in params:
            p.grad = None
        loss = nll(params)
        loss.backward()
        losses.append(loss.item())
        with vl.no_grad():
            for p in params:
                p.sub_(lr * p.grad)
    v = [p.detach().numpy().copy() for p in params]
    if family == "bernoulli":
        out = float(1 / (1 + math.exp(-v[0][0])))
    elif family == "gaussian":
        out = (float(v[0][0]), float(math.exp(v[1][0])))
    elif family == "poisson":
        out = float(math.exp(v[0][0]))
    else:
        e = np.exp(v[0] - v[0].max())
        out = e / e.sum()
    return out, losses


# ----------------------------------------------------------------------------- Olkin example
def binomial_profile_loglik(k, x):
    """Profile log-likelihood of Binomial(k, p) data maximised over p (p = mean/k), as a
    function of k (real k >= max(x) allowed, through the Gamma function)."""
    a = _data(x)
    k = np.asarray(k, dtype=np.float64)
    n = a.size
    p = a.mean() / k
    comb = (special.gammaln(k[..., None] + 1) - special.gammaln(a + 1)
            - special.gammaln(k[..., None] - a + 1)).sum(axis=-1)
    return comb + special.xlogy(a.sum(), p) + special.xlog1py(n * k - a.sum(), -p)


def binomial_k_mle(x, k_max=100_000):
    """MLE of k for Binomial(k, p) data with p unknown (003 Remark 3.3.5, Olkin et al.).

    Returns (k_integer, k_continuous): the integer maximiser of the profile likelihood over
    max(x) <= k <= k_max, and the maximiser over real k (found by bounded search).  Returns
    ``inf`` when the likelihood keeps increasing up to k_max (data at least as dispersed as a
    Poisson, sample variance >= mean, where the Poisson limit k -> inf is the best fit)."""
    from scipy.optimize import minimize_scalar
    a = _data(x)
    lo = int(a.max())
    ks = np.arange(lo, k_max + 1, dtype=np.float64)
    ll = binomial_profile_loglik(ks, a)
    i = int(np.argmax(ll))
    if i == len(ks) - 1:
        return math.inf, math.inf
    k_int = int(ks[i])
    r = minimize_scalar(lambda k: -float(binomial_profile_loglik(np.array([k]), a)[0]),
                        bounds=(max(lo, k_int - 2), k_int + 2), method="bounded",
                        options={"xatol": 1e-6})
    return k_int, float(r.x)
