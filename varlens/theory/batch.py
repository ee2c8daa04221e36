"""Batch size and learning rate (seed 000 Costume 3; seed 003 §4.4)."""
from __future__ import annotations

import math

from varlens.theory.registry import all_of, claim, close, mc_mean, mc_var, rng_for, with_wrong


def _per_example_grads(g, n=4000, d=4, noise=1.0):
    X = g.standard_normal((n, d))
    w_true = g.standard_normal(d)
    y = X @ w_true + noise * g.standard_normal(n)
    w = w_true + 0.5 * g.standard_normal(d)
    return (X @ w - y)[:, None] * X            # gradient of (1/2)(x w - y)^2


@claim("batch.gradient_variance_over_B", "000", "Costume 3 L19", "batch",
       "The mean of B per-example gradients drawn with replacement has variance sigma_g^2 / B "
       "(B = 1, 4, 16, 64 on a least-squares problem; first coordinate). Wrong values at B > 1: sigma_g^2/sqrt(B) "
       "(the std's 1/sqrt(B) read as the variance's) and B sigma_g^2 (the sum of the batch, not its mean)")
def gradient_variance():
    g = rng_for("batch.gradient_variance_over_B")
    per = _per_example_grads(g)[:, 0]
    s2 = per.var()          # population variance of the finite data set (sampling with replacement)
    out = []
    for B in (1, 4, 16, 64):
        idx = g.integers(0, per.size, (20_000, B))
        r = mc_var(per[idx].mean(1), s2 / B)
        if B > 1:   # at B = 1 all three coincide
            with_wrong(r, {f"sigma^2/sqrt(B) at B = {B}": s2 / math.sqrt(B), f"sum, B sigma^2 at B = {B}": s2 * B})
        out.append(r)
    return all_of(out)


@claim("batch.sqrt_lr_rule", "000", "Costume 3 L19", "batch",
       "With eta proportional to sqrt(B) the update noise std eta sigma_g/sqrt(B) does not change with B "
       "(B = 4 and 256: ratio of update-noise variances 1)",
       alternatives={"eta constant (ratio 4/256)": 4 / 256, "eta proportional to B (ratio 256/4)": 256 / 4})
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
    r = mc_mean(big - small, 0.0, note="E[one big step] - E[k small steps]")
    # eta scaled by sqrt(k), not k: the big step moves sqrt(k)/k as far in expectation
    return with_wrong(r, {"eta proportional to sqrt(B): (sqrt(k) - k) eta_0 E[g]": (math.sqrt(k) - k) * eta0 * per.mean()})


@claim("batch.noise_scale_linear_regression", "000", "Costume 3 L20 (gradient noise scale)", "batch",
       "McCandlish et al.'s B_simple = tr(Sigma)/|G|^2, estimated from two batch sizes with their unbiased "
       "estimators, matches its closed form on linear regression (within 5 standard errors). Wrong value: "
       "|G|^2 read off the big batch (B = 64) alone, biased up by tr(Sigma)/64, which gives B_simple/(1 + B_simple/64)")
def noise_scale_check():
    from varlens.lens.noise_scale import linear_regression_check
    r = linear_regression_check(seed=1234, b_big=64, n_batches=6000)
    return with_wrong(r, {"|G|^2 from the big batch alone": r.expected / (1 + r.expected / 64)})
