"""Law of large numbers and central limit theorem as runnable demonstrations (seed 003 §3.1).

Run ``python -m varlens.stats.demo --out DIR`` to write two figures: the probability
P(|mean_n - mu| > eps) falling with n (LLN), and histograms of standardised sums of a skewed
source (exponential, Bernoulli(0.1)) against the normal density as n grows (CLT).

Correction to the notes: the MGF of N(0, sigma^2) is exp(sigma^2 t^2 / 2) (the notes print
an extra factor 1/2, 003 Example 3.1.3); :func:`gaussian_mgf` is the correct
exp(mu t + sigma^2 t^2 / 2), checked against Monte Carlo and quadrature in the tests.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

__all__ = ["SOURCES", "sample", "lln_exceedance", "standardized_sums", "clt_ks_distances",
           "normal_pdf", "gaussian_mgf", "mgf_monte_carlo", "log_mgf_standardized_sum",
           "plot_lln", "plot_clt", "main"]


# name -> (sampler(rng, shape), mean, variance)
SOURCES = {
    "exponential": (lambda rng, shape: rng.exponential(1.0, shape), 1.0, 1.0),
    "bernoulli0.1": (lambda rng, shape: (rng.random(shape) < 0.1).astype(np.float64), 0.1, 0.09),
    "uniform": (lambda rng, shape: rng.random(shape), 0.5, 1.0 / 12.0),
    "gaussian": (lambda rng, shape: rng.standard_normal(shape), 0.0, 1.0),
}


def _source(name):
    if name not in SOURCES:
        raise ValueError(f"source: expected one of {sorted(SOURCES)}, got {name!r}")
    return SOURCES[name]


def sample(source, shape, seed=0):
    """Draw i.i.d. values of a named source."""
    fn, _, _ = _source(source)
    return fn(np.random.default_rng(seed), shape)


def lln_exceedance(source="exponential", ns=(10, 100, 1000), eps=0.1, reps=2000, seed=0):
    """Monte Carlo estimate of P(|X_bar_n - mu| > eps) for each n (003 Slogan 3.1.1: it tends
    to 0).  Returns an array aligned with ``ns``."""
    fn, mu, _ = _source(source)
    rng = np.random.default_rng(seed)
    out = []
    for n in ns:
        means = np.empty(reps)
        chunk = max(1, 2_000_000 // int(n))
        for s in range(0, reps, chunk):
            m = min(chunk, reps - s)
            means[s:s + m] = fn(rng, (m, int(n))).mean(axis=1)
        out.append(np.mean(np.abs(means - mu) > eps))
    return np.array(out)


def standardized_sums(source="exponential", n=30, reps=5000, seed=0):
    """(X_1 + ... + X_n - n mu) / (sigma sqrt n) for ``reps`` independent draws: by the CLT
    close to N(0, 1) for large n (003 §3.1, Slogan 3.1.2)."""
    fn, mu, var = _source(source)
    rng = np.random.default_rng(seed)
    x = fn(rng, (reps, int(n)))
    return (x.sum(axis=1) - n * mu) / math.sqrt(n * var)


def clt_ks_distances(source="exponential", ns=(1, 4, 16, 64, 256), reps=5000, seed=0):
    """Kolmogorov-Smirnov distance between the standardised sums and N(0, 1) for each n."""
    return np.array([stats.kstest(standardized_sums(source, n, reps, seed + i), "norm").statistic
                     for i, n in enumerate(ns)])


def normal_pdf(x, mu=0.0, sigma2=1.0):
    """N(mu, sigma^2) density 1/sqrt(2 pi sigma^2) exp(-(x - mu)^2 / (2 sigma^2))."""
    if sigma2 <= 0:
        raise ValueError(f"sigma2: expected a positive variance, got {sigma2!r}")
    x = np.asarray(x, dtype=np.float64)
    return np.exp(-(x - mu) ** 2 / (2 * sigma2)) / math.sqrt(2 * math.pi * sigma2)


def gaussian_mgf(t, mu=0.0, sigma2=1.0):
    """E[exp(tX)] for X ~ N(mu, sigma^2): exp(mu t + sigma^2 t^2 / 2) (corrected; see the
    module docstring)."""
    t = np.asarray(t, dtype=np.float64)
    return np.exp(mu * t + sigma2 * t ** 2 / 2)


def mgf_monte_carlo(samples, t):
    """Sample mean of exp(t X)."""
    x = np.asarray(samples, dtype=np.float64)
    return np.mean(np.exp(np.multiply.outer(np.atleast_1d(t), x)), axis=-1)


def log_mgf_standardized_sum(source, n, t):
    """Exact ln E[exp(t S_n)] for S_n = (1/sqrt n) sum (X_i - mu), i.e. n ln M_{X-mu}(t/sqrt n)
    (003 §3.1's proof of the CLT); it tends to sigma^2 t^2 / 2.  Sources: "exponential"
    (t < sqrt n), "bernoulli0.1", "gaussian"."""
    s = t / math.sqrt(n)
    if source == "exponential":        # X - 1 with X ~ Exp(1): M(s) = e^{-s} / (1 - s)
        if s >= 1:
            return math.inf
        return n * (-s - math.log1p(-s))
    if source == "bernoulli0.1":
        p = 0.1
        return n * math.log((1 - p) * math.exp(-p * s) + p * math.exp((1 - p) * s))
    if source == "gaussian":
        return n * s * s / 2
    raise ValueError(f"source: expected 'exponential', 'bernoulli0.1' or 'gaussian', got {source!r}")


# ----------------------------------------------------------------------------- plots
def plot_lln(path, sources=("exponential", "bernoulli0.1"), ns=(5, 10, 20, 50, 100, 200, 500, 1000),
             eps=0.05, reps=2000, seed=0):
    """Figure: P(|X_bar_n - mu| > eps) against n for each source."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for s in sources:
        ax.plot(ns, lln_exceedance(s, ns, eps, reps, seed), marker="o", label=s)
    ax.set_xscale("log")
    ax.set_xlabel("n")
    ax.set_ylabel(f"P(|mean - mu| > {eps})")
    ax.set_title("Weak law of large numbers (003 §3.1)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_clt(path, sources=("exponential", "bernoulli0.1"), ns=(1, 5, 30, 300), reps=20000, seed=0):
    """Figure: histograms of standardised sums against the N(0, 1) density, one row per
    skewed source, one column per n."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(len(sources), len(ns), figsize=(3 * len(ns), 2.6 * len(sources)), squeeze=False)
    grid = np.linspace(-4, 4, 400)
    for r, s in enumerate(sources):
        _, mu, var = _source(s)
        for c, n in enumerate(ns):
            z = standardized_sums(s, n, reps, seed)
            ax = axes[r][c]
            if s.startswith("bernoulli"):
                # lattice values: bins centred on them, a whole number of lattice steps wide
                step = 1 / math.sqrt(n * var)
                width = step * max(1, math.ceil(0.2 / step))
                first = -n * mu / math.sqrt(n * var)
                k0 = math.floor((-4 - first) / width)
                bins = first + width * (np.arange(k0, k0 + int(8 / width) + 3) - 0.5)
            else:
                bins = np.linspace(-4, 4, 41)
            ax.hist(z, bins=bins, density=True, alpha=0.6)
            ax.plot(grid, normal_pdf(grid), "k-", lw=1.2)
            ks = stats.kstest(z, "norm").statistic
            ax.set_title(f"{s}, n={n}\nKS={ks:.3f}", fontsize=9)
            ax.set_xlim(-4, 4)
    fig.suptitle("Central limit theorem: standardised sums vs N(0,1) (003 §3.1)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def main(argv=None):
    import argparse
    import os
    ap = argparse.ArgumentParser(description="LLN and CLT demonstrations (seed 003 §3.1)")
    ap.add_argument("--out", default="runs/stats", help="directory for the figures")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    p1 = plot_lln(os.path.join(a.out, "lln.png"))
    p2 = plot_clt(os.path.join(a.out, "clt.png"))
    for s in ("exponential", "bernoulli0.1"):
        ks = clt_ks_distances(s)
        print(f"{s}: KS distance to N(0,1) for n = 1, 4, 16, 64, 256: " + ", ".join(f"{v:.3f}" for v in ks))
    print("wrote", p1, p2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
