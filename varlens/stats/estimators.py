"""Estimators and how to judge them: bias, variance and MSE = Var + Bias^2, measured by
simulation (seed 003 §3.2 and §3.5).

The two variance estimators of 003 Example 3.2.7: the naive one (divide by n; biased, the
Gaussian MLE, what BatchNorm uses) and the unbiased one (divide by n - 1).  NumPy's ``var``
defaults to the first (``ddof=0``), PyTorch's ``var`` to the second (``correction=1``).

Closed forms for Gaussian data (003 Example 3.5.3): MSE(S^2) = 2 sigma^4/(n-1),
MSE(S^2_naive) = (2n-1) sigma^4/n^2 (smaller).  The first holds for Gaussian data only
(the notes state it before assuming Gaussian data); for other data the fourth moment
enters: Var(S^2) = (mu_4 - (n-3)/(n-1) sigma^4)/n.
"""
from __future__ import annotations

import numpy as np

__all__ = ["sample_mean", "first_sample", "var_naive", "var_unbiased", "simulate_estimator",
           "gaussian_variance_estimator_mse", "variance_of_unbiased_var"]


def sample_mean(x):
    """X_bar over the last axis (003 Example 3.2.3)."""
    return np.asarray(x, dtype=np.float64).mean(axis=-1)


def first_sample(x):
    """The single-sample estimator X_1 of the mean (003 Example 3.2.6)."""
    return np.asarray(x, dtype=np.float64)[..., 0]


def var_naive(x):
    """(1/n) sum (X_i - X_bar)^2 over the last axis (biased: E = (n-1)/n Var)."""
    x = np.asarray(x, dtype=np.float64)
    return ((x - x.mean(axis=-1, keepdims=True)) ** 2).mean(axis=-1)


def var_unbiased(x):
    """(1/(n-1)) sum (X_i - X_bar)^2 over the last axis (unbiased; needs n >= 2)."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    if n < 2:
        raise ValueError(f"x: the unbiased variance needs at least 2 samples along the last axis, got {n}")
    return ((x - x.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1) / (n - 1)


def simulate_estimator(estimator, sampler, theta, n, reps=20000, seed=0, chunk=200_000):
    """Monte Carlo bias, variance and MSE of ``estimator`` (a function of a (reps, n) array
    reducing the last axis) for the true value ``theta``, with data from
    ``sampler(rng, shape)``.

    Returns a dict with ``mean``, ``bias`` = mean - theta, ``variance`` (1/reps),
    ``mse`` = mean (W - theta)^2, and ``se_mse`` (its standard error).  With these sample
    moments, mse = variance + bias^2 holds exactly (003 §3.5, up to rounding)."""
    if n < 1 or reps < 2:
        raise ValueError(f"n, reps: expected n >= 1 and reps >= 2, got n={n}, reps={reps}")
    rng = np.random.default_rng(seed)
    rows = max(1, chunk // n)
    vals = []
    for s in range(0, reps, rows):
        m = min(rows, reps - s)
        vals.append(np.asarray(estimator(sampler(rng, (m, n))), dtype=np.float64))
    w = np.concatenate(vals)
    mean = w.mean()
    err2 = (w - theta) ** 2
    return {"mean": float(mean), "bias": float(mean - theta), "variance": float(w.var()),
            "mse": float(err2.mean()), "se_mse": float(err2.std() / np.sqrt(reps))}


def gaussian_variance_estimator_mse(n, sigma2=1.0, kind="unbiased"):
    """Closed-form MSE for Gaussian data (003 Example 3.5.3): 2 sigma^4/(n-1) for the
    unbiased S^2, (2n-1) sigma^4/n^2 for the naive one (bias^2 sigma^4/n^2 plus variance
    2(n-1) sigma^4/n^2)."""
    if kind == "unbiased":
        return 2 * sigma2 ** 2 / (n - 1)
    if kind == "naive":
        return (2 * n - 1) * sigma2 ** 2 / n ** 2
    raise ValueError(f"kind: expected 'unbiased' or 'naive', got {kind!r}")


def variance_of_unbiased_var(n, sigma2, mu4):
    """Var(S^2) = (mu_4 - (n-3)/(n-1) sigma^4)/n for any distribution with fourth central
    moment mu_4 (equals MSE(S^2), since S^2 is unbiased).  Gaussian: mu_4 = 3 sigma^4 gives
    2 sigma^4/(n-1)."""
    return (mu4 - (n - 3) / (n - 1) * sigma2 ** 2) / n
