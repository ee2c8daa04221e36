"""ReLU moments under a Gaussian input (seed 001 §1.2, seed 002, seed 003 §4.3.1)."""
from __future__ import annotations

import math

import numpy as np

from varlens.theory.registry import claim, close, mc_mean, mc_var, rng_for, var_se, with_wrong

N = 1_000_000
INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _relu_mean_by_hermite(nodes=80):
    """E[ReLU(z)] by plain Gauss-Hermite quadrature: the kink at 0 makes it converge slowly
    (about 0.5% off with 80 nodes), the error a claim about E[ReLU] must be able to reject."""
    from numpy.polynomial.hermite_e import hermegauss
    x, w = hermegauss(nodes)
    return float(np.dot(w / w.sum(), np.maximum(x, 0.0)))


@claim("relu.mean", "001", "§1.2 L43", "variance",
       "z ~ N(0,1): E[ReLU(z)] = 1/sqrt(2 pi) = 0.3989422804",
       alternatives=lambda: {"80-node Gauss-Hermite quadrature across the kink": _relu_mean_by_hermite(80)})
def relu_mean():
    # antithetic pairs (z, -z): (ReLU(z) + ReLU(-z))/2 = |z|/2 has the same mean as ReLU(z) and a
    # quarter of its variance ((1 - 2/pi)/4 against 1/2 - 1/(2 pi)), so 8M draws give a 5-sigma
    # tolerance below the gap to the quadrature error
    g = rng_for("relu.mean")
    parts = [np.abs(g.standard_normal(N)) * 0.5 for _ in range(8)]
    return mc_mean(np.concatenate(parts), INV_SQRT_2PI)


@claim("relu.second_moment", "001", "§1.2 L43", "variance",
       "z ~ N(0,1): E[ReLU(z)^2] = 1/2",
       alternatives={"Var[ReLU(z)] = 1/2 - 1/(2 pi) (second moment and variance conflated, 001 L261)":
                     0.5 - 1.0 / (2.0 * math.pi)})
def relu_second_moment():
    z = rng_for("relu.second_moment").standard_normal(N)
    return mc_mean(np.maximum(z, 0.0) ** 2, 0.5)


@claim("relu.variance", "001", "§1.2 L47", "variance",
       "z ~ N(0,1): Var[ReLU(z)] = 1/2 - 1/(2 pi) = 0.3408450569",
       alternatives={"E[ReLU(z)^2] = 1/2 (second moment and variance conflated, 001 L261)": 0.5,
                     "1/2 - 1/pi (E[ReLU] taken as 1/pi)": 0.5 - 1.0 / math.pi})
def relu_variance():
    z = rng_for("relu.variance").standard_normal(N)
    return mc_var(np.maximum(z, 0.0), 0.5 - 1.0 / (2.0 * math.pi))


@claim("relu.half_second_moment_symmetric", "001", "§3.3 L252; 002 L50; 003 §4.3.1 L1441", "init",
       "E[ReLU(z)^2] = E[z^2]/2 for any symmetric z (here Laplace(0, 1.5), E[z^2] = 4.5)",
       alternatives={"Var[ReLU(z)] = E[z^2]/2 - (b/2)^2 (variance for second moment)": 2.25 - 0.75 ** 2,
                     "Laplace E[z^2] taken as b^2, not 2 b^2 (1.125)": 0.5 * 1.5 ** 2})
def relu_half_symmetric():
    z = rng_for("relu.half_second_moment_symmetric").laplace(0.0, 1.5, N)
    return mc_mean(np.maximum(z, 0.0) ** 2, 0.5 * 2 * 1.5 ** 2)


@claim("relu.orthonormal_projection", "001", "§1.2 L38-49", "dropout",
       "x ~ N(0,I_N), W with W W^T = I_M, b = 0: z = Wx ~ N(0, I_M), so h = ReLU(z) has diagonal "
       "covariance; the largest off-diagonal |Cov(h_i, h_j)| is 0 within 5 standard errors. Wrong value: the "
       "largest |Cov| (arc-cosine kernel, exact) if the same rows were only normalised, not orthogonalised")
def relu_orthonormal():
    g = rng_for("relu.orthonormal_projection")
    n_in, m, n = 32, 8, 200_000
    raw = g.standard_normal((n_in, m))
    q, _ = np.linalg.qr(raw)
    W = q.T                                   # (m, n_in), W W^T = I_m
    h = np.maximum(g.standard_normal((n, n_in)) @ W.T, 0.0)
    hc = h - h.mean(0)
    cov = hc.T @ hc / (n - 1)
    off = cov[~np.eye(m, dtype=bool)]
    worst = np.abs(off).max()
    # standard error of a covariance of independent variables: sqrt(Var h_i Var h_j / n)
    se = (0.5 - 1 / (2 * math.pi)) / math.sqrt(n)
    diag_ok = np.allclose(np.diag(cov), 0.5 - 1 / (2 * math.pi), atol=5 * var_se(h[:, 0]))
    r = close(worst, 0.0, 5 * se * 1.5, n)  # 1.5: max over 28 pairs (|N(0,1)| max of 28 < 3.5 sd w.h.p.)
    r.passed = r.passed and bool(diag_ok)
    # unit-norm but not orthogonal rows: rho_ij = cos angle; Cov(ReLU z_i, ReLU z_j) =
    # (sqrt(1 - rho^2) + rho (pi - arccos rho)) / (2 pi) - 1/(2 pi)
    u = raw / np.linalg.norm(raw, axis=0)
    rho = np.clip((u.T @ u)[~np.eye(m, dtype=bool)], -1.0, 1.0)
    cov_raw = (np.sqrt(1 - rho ** 2) + rho * (np.pi - np.arccos(rho))) / (2 * np.pi) - 1 / (2 * np.pi)
    return with_wrong(r, {"rows normalised but not orthogonalised (largest |Cov|)": float(np.abs(cov_raw).max())})
