"""Dropout: inverted scaling, the ReLU+dropout variance, and the kept-unit count.

Seed 001 §1.1-1.5 (p = drop probability); seed 003 §4.1.2 (p = keep probability).
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats

from varlens.theory.registry import CheckResult, all_of, claim, close, exact, mc_mean, mc_var, rng_for, with_wrong

N = 1_000_000


def _chi2_gof(counts_obs, pmf, n):
    """Chi-square goodness of fit with cells of expected count < 5 pooled into the tails.

    Returns a CheckResult: measured = statistic, expected = degrees of freedom, tolerance =
    the 1 - 1e-6 quantile minus the dof (a false alarm once in a million seeds).
    """
    exp = pmf * n
    obs = counts_obs.astype(np.float64)
    keep = exp >= 5
    idx = np.flatnonzero(keep)
    lo, hi = idx[0], idx[-1]
    e = np.concatenate([[exp[:lo + 1].sum()], exp[lo + 1:hi], [exp[hi:].sum()]])
    o = np.concatenate([[obs[:lo + 1].sum()], obs[lo + 1:hi], [obs[hi:].sum()]])
    stat = float(((o - e) ** 2 / e).sum())
    dof = len(e) - 1
    tol = float(stats.chi2.ppf(1 - 1e-6, dof) - dof)
    return CheckResult(stat, float(dof), tol, int(n), bool(stat - dof <= tol), "chi-square statistic vs dof")


@claim("dropout.inverted_mean", "001", "§1.1 L26-33", "dropout",
       "Inverted dropout h~ = m h/(1-p), m ~ Bernoulli(1-p): E[h~] = E[h]; the unscaled mask gives "
       "(1-p) E[h] (p = 0.3, h = ReLU(N(0,1)))")
def inverted_mean():
    g = rng_for("dropout.inverted_mean")
    p = 0.3
    h = np.maximum(g.standard_normal(N), 0.0)
    m = g.random(N) >= p
    eh = 1 / math.sqrt(2 * math.pi)
    return all_of([with_wrong(mc_mean(m * h / (1 - p), eh), {"1/(1-p) factor missing: (1-p) E[h]": (1 - p) * eh,
                                                             "divided by p, not 1-p": (1 - p) / p * eh}),
                   with_wrong(mc_mean(m * h, (1 - p) * eh), {"as if the mask kept the mean: E[h]": eh,
                                                            "p E[h] (p read as the keep probability)": p * eh})])


@claim("dropout.keep_prob_convention", "003", "§4.1.2 L1283-1291", "dropout",
       "003's convention (p = keep probability): inverted a = m h(z)/p has E[a] = E[h(z)]; standard "
       "dropout's test-time output p h(z) equals the training expectation (p = 0.8); each must reject "
       "001's convention (p = drop probability) applied by mistake")
def keep_prob_convention():
    g = rng_for("dropout.keep_prob_convention")
    p = 0.8
    h = np.tanh(g.normal(0.5, 1.0, N))
    m = g.random(N) < p
    e_h = h.mean()
    # wrong values: 001's convention (p = drop probability) applied to 003's keep probability
    r1 = with_wrong(mc_mean(m * h / p - h, 0.0),          # paired: inverted output minus h
                    {"divided by 1-p (001's convention)": (p / (1 - p) - 1) * e_h})
    r2 = with_wrong(mc_mean(m * h - p * h, 0.0),          # train-mode output minus test-time p h
                    {"test-time (1-p) h (001's convention)": (2 * p - 1) * e_h})
    r = all_of([r1, r2])
    r.note = f"E[h] = {e_h:.4f}"
    return r


@claim("dropout.relu_variance", "001", "§1.2 L55-57", "dropout",
       "After ReLU and inverted dropout, Var[h~_i] = 1/(2(1-p)) - 1/(2 pi): 0.8408450569 at p = 0.5, "
       "also checked at p = 0.2 and 0.7; each p must reject Var[h]/(1-p) (the mean's 1/(2 pi) scaled too) and "
       "the unscaled mask's (1-p)/2 - (1-p)^2/(2 pi)")
def relu_dropout_variance():
    g = rng_for("dropout.relu_variance")
    out = []
    for p in (0.2, 0.5, 0.7):
        h = np.maximum(g.standard_normal(N), 0.0)
        m = g.random(N) >= p
        out.append(with_wrong(mc_var(m * h / (1 - p), 1 / (2 * (1 - p)) - 1 / (2 * math.pi)),
                              {f"Var[h]/(1-p) at p = {p}": (0.5 - 1 / (2 * math.pi)) / (1 - p),
                               f"1/(1-p) factor missing at p = {p}": (1 - p) / 2 - (1 - p) ** 2 / (2 * math.pi)}))
    return all_of(out)


def _chi2_noncentrality(pmf, alt_pmf, n):
    """n sum_cells (q - p)^2 / p over the cells _chi2_gof pools: the amount by which the statistic's
    mean exceeds its dof when the counts follow ``alt_pmf`` instead of ``pmf``."""
    exp = pmf * n
    idx = np.flatnonzero(exp >= 5)
    lo, hi = idx[0], idx[-1]

    def cells(q):
        return np.concatenate([[q[:lo + 1].sum()], q[lo + 1:hi], [q[hi:].sum()]])
    p_c, q_c = cells(pmf), cells(alt_pmf)
    return float(n * ((q_c - p_c) ** 2 / p_c).sum())


@claim("dropout.kept_count_binomial", "001", "§1.3 L59-66", "dropout",
       "Kept units K = sum 1{m_i = 1} ~ Binomial(M, 1-p) (M = 100, p = 0.3): E[K] = 70 and a "
       "chi-square goodness of fit to the Binomial pmf. Wrong values: E[K] = M p (p read as the keep "
       "probability) and, for the fit, the statistic's expected excess if K were Poisson(70) (001 §1.4's limit)")
def kept_binomial():
    g = rng_for("dropout.kept_count_binomial")
    M, p, n = 100, 0.3, 40_000
    K = (g.random((n, M)) >= p).sum(axis=1)
    mean = with_wrong(mc_mean(K, M * (1 - p)), {"M p": M * p})
    pmf = stats.binom.pmf(np.arange(M + 1), M, 1 - p)
    gof = _chi2_gof(np.bincount(K, minlength=M + 1), pmf, n)
    # if K were Poisson(M(1-p)), the statistic would exceed its dof by n sum (q - p)^2 / p on the same cells
    gof.alternatives = {"K ~ Poisson(M(1-p)): expected excess of the statistic":
                        gof.expected + _chi2_noncentrality(pmf, stats.poisson.pmf(np.arange(M + 1), M * (1 - p)), n)}
    return all_of([mean, gof])


@claim("dropout.poisson_limit", "001", "§1.4 L68-74", "dropout",
       "M -> inf with M(1-p) = lambda = 3 fixed: Binomial(M, lambda/M) -> Poisson(lambda); exact total "
       "variation distance at M = 10, 100, 1000, 10000 decreases and stays under Le Cam's bound lambda^2/M. "
       "No wrong value: a limit checked against a bound, with no competing limit to reject")
def poisson_limit():
    lam = 3.0
    tvs = []
    for M in (10, 100, 1000, 10_000):
        k = np.arange(0, M + 1)
        b = stats.binom.pmf(k, M, lam / M)
        po = stats.poisson.pmf(k, lam)
        tv = 0.5 * (np.abs(b - po).sum() + stats.poisson.sf(M, lam))
        tvs.append(tv)
    decreasing = all(a > b for a, b in zip(tvs, tvs[1:]))
    r = close(tvs[-1], 0.0, lam * lam / 10_000, 0, note=f"TV at M=10..1e4: {', '.join(f'{t:.2e}' for t in tvs)}")
    r.passed = r.passed and decreasing and all(t <= lam * lam / M for t, M in zip(tvs, (10, 100, 1000, 10_000)))
    return r


@claim("dropout.poisson_thinning", "001", "§1.5 L76-86", "dropout",
       "M ~ Poisson(lambda = 20), keep each unit w.p. 1-p = 0.6: K ~ Poisson(12) (mean = variance = 12, "
       "chi-square fit). Wrong values: lambda p (p read as the keep probability, 8) for the mean, the "
       "fixed-M binomial variance lambda(1-p)p (4.8) for the variance")
def poisson_thinning():
    g = rng_for("dropout.poisson_thinning")
    n, lam, keep = 200_000, 20.0, 0.6
    M = g.poisson(lam, n)
    K = g.binomial(M, keep)
    kmax = int(K.max()) + 1
    gof = _chi2_gof(np.bincount(K, minlength=kmax + 1)[:kmax + 1],
                    np.append(stats.poisson.pmf(np.arange(kmax), lam * keep), stats.poisson.sf(kmax - 1, lam * keep)), n)
    return all_of([with_wrong(mc_mean(K, lam * keep), {"lambda p": lam * (1 - keep)}),
                   with_wrong(mc_var(K, lam * keep), {"binomial lambda(1-p)p": lam * keep * (1 - keep)}),
                   gof])


@claim("dropout.masked_units_zero_grad", "003", "§4.1.2 L1289", "dropout",
       "Errors propagate through the mask: units dropped in the forward pass get exactly zero gradient "
       "(varlens autograd through x * m / (1-p)). Wrong value: the largest |gradient| on dropped units if the "
       "mask were left out of the backward (upstream / (1-p))")
def masked_zero_grad():
    import varlens as vl
    g = rng_for("dropout.masked_units_zero_grad")
    x = vl.tensor(g.standard_normal((64, 32)), requires_grad=True)
    m = g.random((64, 32)) >= 0.5
    y = x * vl.tensor(m.astype(np.float64)) / 0.5
    up = g.standard_normal((64, 32))
    (y * vl.tensor(up)).sum().backward()
    gx = x.grad.numpy()
    return with_wrong(exact(float(np.abs(gx[~m]).max()), 0.0, 0.0),
                      {"mask left out of the backward": float(np.abs(up[~m]).max() / 0.5)})


@claim("dropout.varlens_layer_variance", "001", "§1.2 L55-57", "dropout",
       "varlens.nn.Dropout(p = 0.5) in training mode on h = ReLU(N(0,1)) gives mean 1/sqrt(2 pi) and "
       "variance 1/(2(1-p)) - 1/(2 pi) = 0.8408 (the library's layer); in eval mode it is the identity. Wrong values: "
       "no 1/(1-p) scaling (mean (1-p)/sqrt(2 pi)), Var[h]/(1-p) = 0.6817")
def varlens_dropout_variance():
    import varlens as vl
    from varlens import nn
    g = rng_for("dropout.varlens_layer_variance")
    h = np.maximum(g.standard_normal((1000, 500)), 0.0)
    layer = nn.Dropout(0.5)
    vl.manual_seed(123)
    out = layer(vl.tensor(h)).numpy()
    layer.eval()
    same = np.array_equal(layer(vl.tensor(h)).numpy(), h)
    eh = 1 / math.sqrt(2 * math.pi)
    r = all_of([with_wrong(mc_mean(out, eh), {"no 1/(1-p) scaling": 0.5 * eh}),
                with_wrong(mc_var(out, 1 / (2 * 0.5) - 1 / (2 * math.pi)),
                           {"Var[h]/(1-p)": (0.5 - 1 / (2 * math.pi)) / 0.5})])
    r.passed = r.passed and bool(same)
    return r
