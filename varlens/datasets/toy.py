"""Small 2-D data sets for pictures and quick tests.  Each returns ``(X float32 (n, 2), y int64 (n,))``
and is reproducible from ``seed`` alone."""
from __future__ import annotations

import math

import numpy as np


def _rng(seed):
    return np.random.Generator(np.random.PCG64(seed))


def _check_n(n, name):
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n <= 0:
        raise ValueError(f"{name}: n must be a positive int, got {n!r}")


def make_circle(n=1000, radius=1.0, noise=0.0, seed=0):
    """Points uniform in a square, labelled 1 inside the circle of ``radius`` about the origin.

    The boundary no linear classifier can draw (seed 003 Figure 1.4.1).  The square's
    half-width is ``radius * sqrt(pi / 2)``, so the two classes are equally likely.
    ``noise`` is the std of Gaussian jitter added to the points after labelling.
    """
    _check_n(n, "make_circle")
    rng = _rng(seed)
    a = radius * math.sqrt(math.pi / 2)
    X = rng.uniform(-a, a, (n, 2))
    y = (np.sqrt((X ** 2).sum(1)) < radius).astype(np.int64)
    if noise:
        X = X + rng.normal(0, noise, X.shape)
    return X.astype(np.float32), y


def make_moons(n=1000, noise=0.1, seed=0):
    """Two interleaving half circles (class 0 on top, class 1 below and shifted)."""
    _check_n(n, "make_moons")
    rng = _rng(seed)
    n0 = n // 2
    n1 = n - n0
    t0 = rng.uniform(0, math.pi, n0)
    t1 = rng.uniform(0, math.pi, n1)
    X = np.concatenate([np.stack([np.cos(t0), np.sin(t0)], 1),
                        np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], 1)])
    y = np.concatenate([np.zeros(n0, np.int64), np.ones(n1, np.int64)])
    X = X + rng.normal(0, noise, X.shape)
    p = rng.permutation(n)
    return X[p].astype(np.float32), y[p]


def make_spirals(n=1000, n_classes=2, turns=1.5, noise=0.05, seed=0):
    """``n_classes`` interleaved arms of an Archimedean spiral, one class per arm."""
    _check_n(n, "make_spirals")
    if n_classes < 2:
        raise ValueError(f"make_spirals: n_classes must be >= 2, got {n_classes}")
    rng = _rng(seed)
    y = np.arange(n) % n_classes
    r = rng.uniform(0.05, 1.0, n)
    theta = 2 * math.pi * (turns * r + y / n_classes)
    X = np.stack([r * np.cos(theta), r * np.sin(theta)], 1) + rng.normal(0, noise, (n, 2))
    p = rng.permutation(n)
    return X[p].astype(np.float32), y[p].astype(np.int64)


def make_gaussian_mixture(n=1000, centers=((-1.0, 0.0), (1.0, 0.0)), std=0.5, weights=None, seed=0):
    """Samples of a mixture of isotropic 2-D Gaussians; the label is the component."""
    _check_n(n, "make_gaussian_mixture")
    centers = np.asarray(centers, dtype=np.float64)
    if centers.ndim != 2 or centers.shape[1] != 2:
        raise ValueError(f"make_gaussian_mixture: centers must have shape (k, 2), got {centers.shape}")
    k = len(centers)
    w = np.full(k, 1 / k) if weights is None else np.asarray(weights, dtype=np.float64)
    if w.shape != (k,) or np.any(w < 0) or not np.isclose(w.sum(), 1):
        raise ValueError(f"make_gaussian_mixture: weights must be {k} non-negative numbers summing to 1, "
                         f"got {weights}")
    std = np.broadcast_to(np.asarray(std, dtype=np.float64), (k,))
    rng = _rng(seed)
    y = rng.choice(k, size=n, p=w)
    X = centers[y] + rng.normal(0, 1, (n, 2)) * std[y, None]
    return X.astype(np.float32), y.astype(np.int64)


def make_ring_of_gaussians(n=1000, k=8, radius=2.0, std=0.05, seed=0):
    """``k`` equal Gaussians with centres evenly spaced on a circle of ``radius``."""
    ang = 2 * math.pi * np.arange(k) / k
    centers = np.stack([radius * np.cos(ang), radius * np.sin(ang)], 1)
    return make_gaussian_mixture(n, centers, std, seed=seed)
