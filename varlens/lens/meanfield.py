"""Mean-field signal propagation in deep fully connected networks (Poole et al. 2016; Schoenholz et al. 2017).

With weights W_ij ~ N(0, sigma_w^2/n) and biases N(0, sigma_b^2), the pre-activation
second moment follows the length map

    q^l = sigma_w^2 E[phi(sqrt(q^{l-1}) z)^2] + sigma_b^2,         z ~ N(0, 1),

and the correlation c between two inputs the correlation map

    c^l = (sigma_w^2 E[phi(u_1) phi(u_2)] + sigma_b^2) / q*,   (u_1, u_2) ~ N(0, q*[[1, c], [c, 1]]).

Its slope at c = 1 is chi_1 = sigma_w^2 E[phi'(sqrt(q*) z)^2]: chi_1 < 1 is the ordered phase
(inputs collapse together), chi_1 > 1 the chaotic one, chi_1 = 1 the edge of chaos; the
same chi_1 is the per-layer factor of the back-propagated gradient's second moment
(seed 000's variance lens applied to the backward pass).  Depth scales:
xi_c = -1/log(chi_c) with chi_c the slope of the c-map at its stable fixed point,
and xi_q from the slope of the q-map at q*.
"""
from __future__ import annotations

import math

import numpy as np
from numpy.polynomial.hermite_e import hermegauss

from varlens.lens.rules import ACTIVATIONS, activation

_Z, _W = hermegauss(80)
_W = _W / _W.sum()        # probabilists' Hermite weights normalised: sum w f(z) = E[f(z)], z ~ N(0,1)


def _phi(name):
    return activation(name)


_Q_SMALL, _Q_LARGE = 1e-12, 1e12   # where the limits q* -> 0+ and q* -> inf are read


def _keep(dropout):
    p = float(dropout)
    if not 0.0 <= p < 1.0:
        raise ValueError(f"meanfield: dropout must be a drop probability in [0, 1), got {dropout!r}")
    return 1.0 - p


def _finite_q(q):
    """q* as a point to evaluate at: 0 and inf (sigma_b = 0 fixed points) become their limits."""
    if not q > 0.0:
        return _Q_SMALL
    if math.isinf(q):
        return _Q_LARGE
    return float(q)


def q_map(q, act="tanh", sigma_w2=1.0, sigma_b2=0.0, dropout=0.0):
    """One step of the length map (pre-activation second moment); dropout p scales E[phi^2] by 1/(1-p)."""
    a = _phi(act)
    return sigma_w2 / _keep(dropout) * a.second_moment(0.0, q) + sigma_b2


def q_star(act="tanh", sigma_w2=1.0, sigma_b2=0.0, q0=1.0, dropout=0.0):
    """The stable fixed point of the length map (0 when the signal dies out, inf when it explodes).

    g(q) = q_map(q) - q is scanned on a log grid; the first + to - sign change is the stable
    fixed point (refined with Brent's method).  g = 0 everywhere (ReLU at sigma_w^2 = 2,
    sigma_b = 0: every q is fixed) returns q0.
    """
    from scipy.optimize import brentq
    grid = np.logspace(-12, 8, 161)
    gv = np.array([q_map(q, act, sigma_w2, sigma_b2, dropout) - q for q in grid])
    if np.all(np.abs(gv) <= 1e-10 * grid):
        return float(q0)
    if gv[0] < 0 and sigma_b2 == 0:
        return 0.0
    for i in range(len(grid) - 1):
        if gv[i] > 0 and gv[i + 1] <= 0:
            return float(brentq(lambda q: q_map(q, act, sigma_w2, sigma_b2, dropout) - q, grid[i], grid[i + 1],
                                xtol=1e-15, rtol=1e-13))
    return 0.0 if gv[-1] < 0 else float("inf")


def q_sequence(depth, q0, act="tanh", sigma_w2=1.0, sigma_b2=0.0, dropout=0.0):
    """q^1..q^depth: the predicted pre-activation second moment at each layer."""
    out, q = [], q0
    for _ in range(depth):
        q = q_map(q, act, sigma_w2, sigma_b2, dropout)
        out.append(q)
    return np.array(out)


def _pair_expectation(f, q, c):
    """E[f(u1) f(u2)] for (u1, u2) ~ N(0, q [[1, c], [c, 1]]) by 2-D Gauss-Hermite quadrature."""
    c = min(max(c, -1.0), 1.0)
    s = math.sqrt(q)
    z1 = _Z[:, None]
    z2 = _Z[None, :]
    u1 = s * z1
    u2 = s * (c * z1 + math.sqrt(max(1 - c * c, 0.0)) * z2)
    return float((_W[:, None] * _W[None, :] * f(u1) * f(u2)).sum())


def c_map(c, q, act="tanh", sigma_w2=1.0, sigma_b2=0.0, dropout=0.0):
    """One step of the correlation map at second moment q (usually q*).

    The numerator is the covariance of two different inputs' pre-activations (independent
    dropout masks: no 1/rho), the denominator the length map's q (with 1/rho).
    """
    a = _phi(act)
    q = _finite_q(q)
    return (sigma_w2 * _pair_expectation(a.f, q, c) + sigma_b2) / q_map(q, act, sigma_w2, sigma_b2, dropout)


def chi1(act="tanh", sigma_w2=1.0, sigma_b2=0.0, q=None, dropout=0.0):
    """Slope of the correlation map at c = 1: sigma_w^2 E[phi'(sqrt(q*) z)^2].

    d/dc E[phi(u1) phi(u2)] = q E[phi'(u1) phi'(u2)], so the slope at c = 1 is
    sigma_w^2 E[phi'^2] q / q_map(q) = sigma_w^2 E[phi'^2] at the fixed point (q_map(q*) = q*).
    q* = 0 or inf (sigma_b = 0) is read as its limit, so ReLU gives sigma_w^2/2 for every
    sigma_w^2 (it returned 0 and NaN before).
    """
    if q is None:
        q = q_star(act, sigma_w2, sigma_b2, dropout=dropout)
    a = _phi(act)
    return sigma_w2 * a.deriv_second_moment(0.0, _finite_q(q))


def backward_factor(act="tanh", sigma_w2=1.0, sigma_b2=0.0, dropout=0.0):
    """Per-layer factor of the back-propagated gradient's second moment: sigma_w^2/rho E[phi'^2] at q*.

    Without dropout this is chi_1; with dropout each layer's gradient also passes the mask,
    whose second moment is 1/rho.
    """
    return chi1(act, sigma_w2, sigma_b2, dropout=dropout) / _keep(dropout)


def phase(act="tanh", sigma_w2=1.0, sigma_b2=0.0, dropout=0.0):
    """'ordered' (chi_1 < 1), 'chaotic' (chi_1 > 1) or 'critical' (within 1e-6)."""
    x = chi1(act, sigma_w2, sigma_b2, dropout=dropout)
    if abs(x - 1) < 1e-6:
        return "critical"
    return "ordered" if x < 1 else "chaotic"


def critical_sigma_w2(act="tanh", sigma_b2=0.0, lo=0.1, hi=10.0, iters=48):
    """sigma_w^2 on the order-to-chaos boundary (chi_1 = 1) for the given sigma_b^2, by bisection."""
    f = lambda s: chi1(act, s, sigma_b2) - 1.0  # noqa: E731
    flo, fhi = f(lo), f(hi)
    if flo * fhi > 0:
        raise ValueError(f"critical_sigma_w2: chi_1 - 1 does not change sign on [{lo}, {hi}] "
                         f"({flo:.3g}, {fhi:.3g}); widen the bracket")
    for _ in range(iters):
        mid = 0.5 * (lo + hi)
        if f(mid) * flo > 0:
            lo, flo = mid, f(mid)
        else:
            hi = mid
    return 0.5 * (lo + hi)


def depth_scales(act="tanh", sigma_w2=1.0, sigma_b2=0.0, eps=1e-5, dropout=0.0):
    """Depth scales (xi_q, xi_c) of Schoenholz et al. 2017.

    xi_c = -1/log(chi_c), chi_c the slope of the c-map at its stable fixed point c*
    (c* = 1 in the ordered phase, c* < 1 in the chaotic phase); xi_q = -1/log(chi_q),
    chi_q the slope of the q-map at q*.  Both diverge at the critical line.
    """
    qs = _finite_q(q_star(act, sigma_w2, sigma_b2, dropout=dropout))
    # slope of the q-map at q*
    h = max(qs * 1e-4, 1e-8)
    chi_q = (q_map(qs + h, act, sigma_w2, sigma_b2, dropout) - q_map(max(qs - h, 0.0), act, sigma_w2, sigma_b2,
                                                                   dropout)) / (qs + h - max(qs - h, 0.0))
    x1 = chi1(act, sigma_w2, sigma_b2, qs, dropout=dropout)
    if x1 <= 1 and dropout == 0:
        chi_c = x1
    else:  # chaotic, or dropout (c = 1 not fixed): find c* < 1 by iteration, slope there by finite differences
        c = 0.5
        for _ in range(2000):
            c = c_map(c, qs, act, sigma_w2, sigma_b2, dropout)
        c = min(c, 1.0 - eps)
        chi_c = (c_map(c + eps, qs, act, sigma_w2, sigma_b2, dropout)
                 - c_map(c - eps, qs, act, sigma_w2, sigma_b2, dropout)) / (2 * eps)
    xi_c = -1.0 / math.log(chi_c) if 0 < chi_c < 1 else float("inf")
    xi_q = -1.0 / math.log(abs(chi_q)) if 0 < abs(chi_q) < 1 else float("inf")
    return xi_q, xi_c


def trainable_depth(act="tanh", sigma_w2=1.0, sigma_b2=0.0, dropout=0.0, factor=6.0):
    """Schoenholz et al.'s empirical bound: signals carry about ``factor`` * xi_c layers (6 in the paper)."""
    return factor * depth_scales(act, sigma_w2, sigma_b2, dropout=dropout)[1]


def summary(act="tanh", sigma_w2=1.0, sigma_b2=0.0, dropout=0.0):
    """q*, chi_1, the phase, xi_q, xi_c and the trainable depth (about 6 xi_c) as one dict."""
    qs = q_star(act, sigma_w2, sigma_b2, dropout=dropout)
    xi_q, xi_c = depth_scales(act, sigma_w2, sigma_b2, dropout=dropout)
    x1 = chi1(act, sigma_w2, sigma_b2, qs, dropout=dropout)
    return {"act": str(act), "sigma_w2": sigma_w2, "sigma_b2": sigma_b2, "dropout": dropout, "q_star": qs,
            "chi1": x1, "backward_factor": backward_factor(act, sigma_w2, sigma_b2, dropout),
            "phase": phase(act, sigma_w2, sigma_b2, dropout), "xi_q": xi_q, "xi_c": xi_c,
            "trainable_depth": 6.0 * xi_c}


__all__ = ["q_map", "q_star", "q_sequence", "c_map", "chi1", "backward_factor", "phase", "critical_sigma_w2",
           "depth_scales", "trainable_depth", "summary", "ACTIVATIONS"]
