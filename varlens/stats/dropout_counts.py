"""How many units does dropout keep?  Seed 001 §1.3-1.5.

With M units each dropped independently with probability p (001's convention, as PyTorch's
``nn.Dropout(p)``: p is the *drop* probability), the kept count K is Binomial(M, 1 - p)
(001 §1.3).  Holding lambda = M(1 - p) fixed while M grows, K tends to Poisson(lambda)
(001 §1.4).  If the number of units is itself Poisson(lambda) and each is kept with
probability 1 - p, the kept count is Poisson(lambda (1 - p)) (thinning, 001 §1.5).

Masks are drawn with :func:`varlens.bernoulli` (the generator dropout layers use), so these
simulations exercise varlens's own random numbers.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

import varlens as vl

__all__ = ["kept_count_pmf", "poisson_pmf", "simulate_kept_counts", "tv_binomial_poisson",
           "simulate_thinning", "chisquare_gof"]


def _check_p(p):
    if not 0 <= p <= 1:
        raise ValueError(f"p: expected a drop probability in [0, 1], got {p!r}")


def kept_count_pmf(M, p):
    """P(K = k) = C(M, k) (1-p)^k p^(M-k), k = 0..M (001 §1.3)."""
    _check_p(p)
    return stats.binom(M, 1 - p).pmf(np.arange(M + 1))


def poisson_pmf(lam, kmax):
    """e^{-lam} lam^k / k!, k = 0..kmax."""
    return stats.poisson(lam).pmf(np.arange(kmax + 1))


def simulate_kept_counts(M, p, reps, seed=0):
    """Kept-unit counts of ``reps`` dropout masks over M units, drawn with varlens.bernoulli."""
    _check_p(p)
    g = vl.Generator().manual_seed(seed)
    keep = vl.full((reps, M), 1.0 - p, dtype=vl.float64)
    mask = vl.bernoulli(keep, generator=g)
    return mask.sum(dim=1).numpy().astype(np.int64)


def tv_binomial_poisson(M, lam):
    """Total-variation distance between Binomial(M, lam/M) and Poisson(lam) (001 §1.4: it
    tends to 0 as M grows; Le Cam's bound gives at most lam^2/M)."""
    if lam > M:
        raise ValueError(f"lam: expected lam <= M so that lam/M is a probability, got lam={lam}, M={M}")
    kmax = M + int(lam + 20 * math.sqrt(lam) + 20)
    b = np.zeros(kmax + 1)
    b[:M + 1] = stats.binom(M, lam / M).pmf(np.arange(M + 1))
    q = stats.poisson(lam).pmf(np.arange(kmax + 1))
    tail = stats.poisson(lam).sf(kmax)
    return 0.5 * (np.abs(b - q).sum() + tail)


def simulate_thinning(lam, p, reps, seed=0):
    """N ~ Poisson(lam) units, each kept with probability 1 - p; returns the kept counts
    (001 §1.5: distributed as Poisson(lam (1 - p)))."""
    _check_p(p)
    rng = np.random.default_rng(seed)
    n = rng.poisson(lam, reps)
    g = vl.Generator().manual_seed(seed + 1)
    nmax = int(n.max()) if reps else 0
    keep = vl.full((reps, max(nmax, 1)), 1.0 - p, dtype=vl.float64)
    m = vl.bernoulli(keep, generator=g).numpy()
    m = m * (np.arange(m.shape[1]) < n[:, None])   # only the first n_i units exist
    return m.sum(axis=1).astype(np.int64)


def chisquare_gof(samples, pmf, min_expected=5.0):
    """Pearson chi-square goodness of fit of integer samples to a pmf on 0..len(pmf)-1
    (the remaining tail mass is put in the last cell); adjacent cells are pooled until each
    expects at least ``min_expected`` counts.  Returns the p-value."""
    x = np.asarray(samples, dtype=np.int64)
    pmf = np.asarray(pmf, dtype=np.float64)
    n = x.size
    probs = pmf.copy()
    probs[-1] += max(0.0, 1.0 - pmf.sum())
    obs = np.bincount(np.minimum(x, len(pmf) - 1), minlength=len(pmf)).astype(np.float64)
    exp = probs * n
    cells_o, cells_e, ao, ae = [], [], 0.0, 0.0
    for o, e in zip(obs, exp):
        ao += o
        ae += e
        if ae >= min_expected:
            cells_o.append(ao)
            cells_e.append(ae)
            ao = ae = 0.0
    if ae > 0 or ao > 0:
        if cells_e:
            cells_o[-1] += ao
            cells_e[-1] += ae
        else:
            cells_o.append(ao)
            cells_e.append(ae)
    if len(cells_e) < 2:
        return 1.0
    co, ce = np.array(cells_o), np.array(cells_e)
    ce *= co.sum() / ce.sum()
    return float(stats.chisquare(co, ce).pvalue)
