"""Variance identities, sums of many terms, residual streams and the attention scale.

Seed 000 (the variance lens, Costume 1), seed 002 (1/sqrt(d)), seed 003 §3.1 (sums).
"""
from __future__ import annotations

import math

import numpy as np

from varlens.theory.registry import all_of, claim, mc_var, rng_for, with_wrong

N = 400_000


@claim("var.sum_identity", "000", "L10", "variance",
       "Var(A+B) = Var A + Var B + 2 Cov(A,B) for correlated A, B (A~N(0,1), B=0.6A+1.6Z: 5.12)",
       alternatives={"Cov counted once (4.52)": 1.0 + 2.92 + 0.6, "Cov dropped (3.92)": 1.0 + 2.92})
def sum_identity():
    g = rng_for("var.sum_identity")
    a = g.standard_normal(N)
    b = 0.6 * a + 1.6 * g.standard_normal(N)
    expected = 1.0 + (0.36 + 2.56) + 2 * 0.6
    return mc_var(a + b, expected)


@claim("var.product_identity", "000", "L11; 001 L246", "variance",
       "Var(AB) = VarA VarB + VarA E[B]^2 + VarB E[A]^2 for independent A~N(2,1), B~U(0,3): 6.0 "
       "(independence is needed; seed 000 leaves it implicit)",
       alternatives={"VarA VarB term dropped (first-order / delta method: 5.25)": 2.0 ** 2 * 0.75 + 1.0 * 1.5 ** 2,
                     "VarA VarB only (0.75)": 0.75})
def product_identity():
    g = rng_for("var.product_identity")
    a = g.normal(2.0, 1.0, N)
    b = g.uniform(0.0, 3.0, N)
    va, ea, vb, eb = 1.0, 2.0, 0.75, 1.5
    return mc_var(a * b, va * vb + va * eb ** 2 + vb * ea ** 2)


@claim("var.constant_multiple", "000", "L12", "variance",
       "Var(cX) = c^2 Var X (c = 3, X ~ Exp(1): 9)",
       alternatives={"c Var X (3)": 3.0})
def constant_multiple():
    g = rng_for("var.constant_multiple")
    return mc_var(3.0 * g.exponential(1.0, N), 9.0)


@claim("var.sum_grows_linearly", "000", "L7; 003 §3.1 L837", "variance",
       "Sum of n = 16 independent zero-mean variance-sigma^2 terms (uniform, sigma^2 = 1/3) has "
       "variance n sigma^2 = 5.33 (its std drifts like sqrt(n)); 60,000 sums, enough to tell n from n -/+ 1 terms",
       alternatives={"n - 1 terms (5.0)": 15 / 3, "n + 1 terms (5.67)": 17 / 3,
                     "variance grows like sqrt(n) (1.33)": math.sqrt(16) / 3})
def sum_grows_linearly():
    g = rng_for("var.sum_grows_linearly")
    x = g.uniform(-1, 1, (60_000, 16)).sum(axis=1)
    return mc_var(x, 16 / 3)


@claim("var.residual_stream", "000", "L7 (residual stream)", "variance",
       "A residual stream x_L = x_0 + sum of L = 16 independent unit-variance branches has variance "
       "1 + L = 17 (no normalisation)",
       alternatives={"L (the stream's own x_0 forgotten: 16)": 16.0, "2^L (branches multiplying, not adding)": 2.0 ** 16})
def residual_stream():
    g = rng_for("var.residual_stream")
    x = g.standard_normal(60_000)
    for _ in range(16):
        x = x + g.standard_normal(x.size)  # each branch independent of the stream
    return mc_var(x, 17.0)


@claim("attention.dot_product_variance", "000", "L13; 002 L76-81", "attention",
       "q.k for q, k in R^d with iid zero-mean unit-variance entries has variance d (d = 8). "
       "The notes print the sum as A_0B_0+...+A_dB_d (d+1 terms, inventory E19) but state d; d terms are "
       "tested, with enough samples to reject d+1", corrected=True,
       alternatives={"d + 1 (the sum as printed, A_0B_0 + ... + A_dB_d; inventory E19)": 9.0})
def dot_product_variance():
    g = rng_for("attention.dot_product_variance")
    d = 8
    parts = []
    for _ in range(8):          # 1.6M dot products, in chunks
        q = g.standard_normal((200_000, d))
        k = g.uniform(-math.sqrt(3), math.sqrt(3), (200_000, d))  # not Gaussian on purpose
        parts.append(np.einsum("nd,nd->n", q, k))
    return mc_var(np.concatenate(parts), float(d))


@claim("attention.scaled_unit_variance", "000", "L13; 002 L76-81; 003 §7.1.3", "attention",
       "Dividing q.k by sqrt(d) (not d) restores unit variance, at every d in {4, 64, 512}; each d must "
       "reject dividing by d (variance 1/d) and, at d = 4, d + 1 terms ((d+1)/d)")
def scaled_unit_variance():
    g = rng_for("attention.scaled_unit_variance")
    out = []
    for d in (4, 64, 512):
        n = 2_000_000 // d
        q = g.standard_normal((n, d))
        k = g.standard_normal((n, d))
        wrong = {f"divide by d (1/d at d = {d})": 1.0 / d}
        if d == 4:
            wrong["d + 1 terms ((d+1)/d at d = 4)"] = 5 / 4
        out.append(with_wrong(mc_var(np.einsum("nd,nd->n", q, k) / math.sqrt(d), 1.0), wrong))
    return all_of(out)
