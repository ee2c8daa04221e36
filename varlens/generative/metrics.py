"""Sample-based distances between two point clouds, for judging generative models.

- ``mmd_rbf(x, y)``: squared maximum mean discrepancy with a Gaussian kernel (unbiased U-statistic),
  summed over several bandwidths.
- ``energy_distance(x, y)``: 2 E|X - Y| - E|X - X'| - E|Y - Y'| (Szekely), >= 0, zero iff equal laws.
- ``frechet_distance(mu1, cov1, mu2, cov2)``: |mu1 - mu2|^2 + tr(C1 + C2 - 2 (C1 C2)^{1/2}), the
  Frechet (2-Wasserstein) distance between Gaussians fitted to features (the FID recipe).
- ``mode_coverage(samples, centers, radius)``: which mixture modes receive samples.
These are evaluation tools on NumPy arrays (no gradients).
"""
from __future__ import annotations

import numpy as np


def _arr(x, what):
    a = x._data if hasattr(x, "_data") else np.asarray(x)
    a = np.asarray(a, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"{what}: expected a 2-D array (n_samples, n_features), got shape {a.shape}")
    return a


def _sqdist(a, b):
    d = (a * a).sum(1)[:, None] + (b * b).sum(1)[None, :] - 2 * a @ b.T
    return np.maximum(d, 0.0)


def mmd_rbf(x, y, bandwidths=(0.1, 0.2, 0.5, 1.0, 2.0)):
    """Unbiased MMD^2 with k(a, b) = sum_h exp(-|a - b|^2 / (2 h^2)); can dip slightly below 0."""
    x, y = _arr(x, "mmd_rbf(x)"), _arr(y, "mmd_rbf(y)")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"mmd_rbf: x and y need the same number of features, got {x.shape[1]} and {y.shape[1]}")
    n, m = len(x), len(y)
    if n < 2 or m < 2:
        raise ValueError(f"mmd_rbf: need at least 2 samples in each set, got {n} and {m}")
    dxx, dyy, dxy = _sqdist(x, x), _sqdist(y, y), _sqdist(x, y)
    out = 0.0
    for h in bandwidths:
        kxx, kyy, kxy = (np.exp(-d / (2 * h * h)) for d in (dxx, dyy, dxy))
        out += (kxx.sum() - np.trace(kxx)) / (n * (n - 1)) + (kyy.sum() - np.trace(kyy)) / (m * (m - 1)) \
            - 2 * kxy.mean()
    return float(out)


def energy_distance(x, y):
    """Energy distance 2 E|X-Y| - E|X-X'| - E|Y-Y'| (V-statistic; >= 0)."""
    x, y = _arr(x, "energy_distance(x)"), _arr(y, "energy_distance(y)")
    if x.shape[1] != y.shape[1]:
        raise ValueError(f"energy_distance: x and y need the same number of features, got "
                         f"{x.shape[1]} and {y.shape[1]}")
    dxy = np.sqrt(_sqdist(x, y)).mean()
    dxx = np.sqrt(_sqdist(x, x)).mean()
    dyy = np.sqrt(_sqdist(y, y)).mean()
    return float(2 * dxy - dxx - dyy)


def gaussian_stats(features):
    """Mean and covariance (unbiased, rows are samples) of a feature matrix."""
    f = _arr(features, "gaussian_stats")
    return f.mean(0), np.cov(f, rowvar=False)


def frechet_distance(mu1, cov1, mu2, cov2):
    """|mu1 - mu2|^2 + tr(cov1 + cov2 - 2 sqrtm(cov1 cov2))."""
    from scipy import linalg
    mu1, mu2 = np.atleast_1d(mu1).astype(np.float64), np.atleast_1d(mu2).astype(np.float64)
    c1, c2 = np.atleast_2d(cov1).astype(np.float64), np.atleast_2d(cov2).astype(np.float64)
    if mu1.shape != mu2.shape or c1.shape != c2.shape or c1.shape != (mu1.size, mu1.size):
        raise ValueError(f"frechet_distance: shapes must be mu (d,), cov (d, d) for both; got {mu1.shape}, "
                         f"{c1.shape}, {mu2.shape}, {c2.shape}")
    import warnings
    with warnings.catch_warnings():  # features with dead units give singular covariances; sqrtm copes
        warnings.simplefilter("ignore", getattr(linalg, "LinAlgWarning", RuntimeWarning))
        covmean = linalg.sqrtm(c1 @ c2)
    if not np.isfinite(covmean).all():
        off = np.eye(len(c1)) * 1e-6
        covmean = linalg.sqrtm((c1 + off) @ (c2 + off))
    covmean = np.real(covmean)
    return float(((mu1 - mu2) ** 2).sum() + np.trace(c1) + np.trace(c2) - 2 * np.trace(covmean))


def feature_frechet_distance(feat_x, feat_y):
    """Frechet distance between Gaussians fitted to two feature matrices."""
    return frechet_distance(*gaussian_stats(feat_x), *gaussian_stats(feat_y))


def ring_centers(k=8, radius=2.0):
    ang = 2 * np.pi * np.arange(k) / k
    return np.stack([radius * np.cos(ang), radius * np.sin(ang)], 1)


def mode_coverage(samples, centers, radius, min_count=None):
    """Assign each sample within ``radius`` of a centre to it.

    Returns a dict: ``counts`` per mode, ``covered`` (modes with at least ``min_count`` samples;
    default: 20% of an even share, len(samples) / len(centers) / 5), ``high_quality`` (fraction of
    samples within ``radius`` of some centre)."""
    s = _arr(samples, "mode_coverage(samples)")
    c = _arr(centers, "mode_coverage(centers)")
    d = np.sqrt(_sqdist(s, c))
    near = d.min(1) <= radius
    idx = d.argmin(1)
    counts = np.bincount(idx[near], minlength=len(c))
    if min_count is None:
        min_count = max(1, int(0.2 * len(s) / len(c)))
    return dict(counts=counts, covered=int((counts >= min_count).sum()), high_quality=float(near.mean()),
                min_count=min_count)
