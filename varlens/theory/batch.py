"""Batch size and learning rate (seed 000 Costume 3; seed 003 §4.4)."""
from __future__ import annotations

import math

from varlens.theory.registry import all_of, claim, close, mc_mean, mc_var, rng_for


def _per_example_grads(g, n=4000, d=4, noise=1.0):
    X = g.standard_normal((n, d))
    w_true = g.standard_normal(d)
    y = X @ w_true + noise * g.standard_normal(n)
    w = w_true + 0.5 * g.standard_normal(d)
    return (X @ w - y)[:, None] * X            # gradient of (1/2)(x w - y)^2


@claim("batch.gradient_variance_over_B", "000", "Costume 3 L19", "batch",
       "The mean of B per-example gradients drawn with replacement has variance sigma_g^2 / B "
       "(B = 1, 4, 16, 64 on a least-squares problem; first coordinate)")
def gradient_variance():
    g = rng_for("batch.gradient_variance_over_B")
    per = _per_example_grads(g)[:, 0]
    s2 = per.var()          # population variance of the finite data set (sampling with replacement)
    out = []
    for B in (1, 4, 16, 64):
        idx = g.integers(0, per.size, (20_000, B))
        out.append(mc_var(per[idx].mean(1), s2 / B))
    return all_of(out)


@claim("batch.sqrt_lr_rule", "000", "Costume 3 L19", "batch",
       "With eta proportional to sqrt(B) the update noise std eta sigma_g/sqrt(B) does not change with B "
       "(B = 4 and 256: ratio of update-noise stds 1)")
def sqrt_rule():
    g = rng_for("batch.sqrt_lr_rule")
    per = _per_example_grads(g)[:, 0]
    eta0, B0 = 0.1, 4
    stds = {}
    for B in (4, 256):
        idx = g.integers(0, per.size, (20_000, B))
        upd = eta0 * math.sqrt(B / B0) * per[idx].mean(1)
        stds[B] = upd
    a, b = stds[4], stds[256]
    # ratio of variances; delta-method tolerance from the two independent variance estimates
    from varlens.theory.registry import var_se
    va, vb = a.var(ddof=1), b.var(ddof=1)
    r = vb / va
    se = r * math.hypot(var_se(a) / va, var_se(b) / vb)
    return close(r, 1.0, 5 * se, a.size + b.size, note="Var(update at B=256)/Var(update at B=4)")


@claim("batch.linear_lr_rule", "000", "Costume 3 L20", "batch",
       "With eta proportional to B, one step at batch kB moves the parameters by the same expected amount "
       "as k steps at batch B from the same point (first order: gradient held fixed), k = 16")
def linear_rule():
    g = rng_for("batch.linear_lr_rule")
    per = _per_example_grads(g)[:, 0]
    eta0, B0, k = 0.01, 4, 16
    big = eta0 * k * per[g.integers(0, per.size, (20_000, B0 * k))].mean(1)
    small = (eta0 * per[g.integers(0, per.size, (20_000, k, B0))].mean(2)).sum(1)
    return mc_mean(big - small, 0.0, note="E[one big step] - E[k small steps]")


@claim("batch.noise_scale_linear_regression", "000", "Costume 3 L20 (gradient noise scale)", "batch",
       "McCandlish et al.'s B_simple = tr(Sigma)/|G|^2, estimated from two batch sizes with their unbiased "
       "estimators, matches its closed form on linear regression (within 5 standard errors)")
def noise_scale_check():
    from varlens.lens.noise_scale import linear_regression_check
    return linear_regression_check(seed=1234)
