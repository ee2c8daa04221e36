"""Train/validation/test splits and z-score standardisation.

Seed 003 §1.5.3: a random split of roughly 80% training, 10% validation (model
selection, early stopping) and 10% test (looked at once, at the end).  Seed 003 §1.5.2:
inputs are z-scored; the mean and standard deviation come from the training split only,
and the same numbers are then applied to validation and test data, so nothing about the
held-out data leaks into training.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


class Split(NamedTuple):
    """Three (X, y) pairs."""
    train: tuple
    val: tuple
    test: tuple


def _split_sizes(n, fractions):
    fr = tuple(float(f) for f in fractions)
    if len(fr) != 3 or any(f < 0 for f in fr) or abs(sum(fr) - 1) > 1e-9:
        raise ValueError("train_val_test_split: fractions must be three non-negative numbers summing to 1 "
                         f"(train, validation, test), got {fractions}")
    n_val = int(round(n * fr[1]))
    n_test = int(round(n * fr[2]))
    return n - n_val - n_test, n_val, n_test


def train_val_test_split(X, y=None, fractions=(0.8, 0.1, 0.1), seed=0, stratify=False):
    """Shuffle with ``seed`` and cut into train/validation/test (80/10/10 by default).

    Returns a ``Split`` of ``(X, y)`` pairs (``y`` is None throughout if not given).
    With ``stratify=True`` each class is split in the same proportions.
    """
    X = np.asarray(X)
    n = len(X)
    if y is not None:
        y = np.asarray(y)
        if len(y) != n:
            raise ValueError(f"train_val_test_split: X has {n} rows but y has {len(y)}")
    rng = np.random.Generator(np.random.PCG64(seed))
    if stratify:
        if y is None:
            raise ValueError("train_val_test_split: stratify=True needs labels y")
        parts = [[], [], []]
        for c in np.unique(y):
            idx = np.flatnonzero(y == c)
            idx = idx[rng.permutation(len(idx))]
            a, b, _ = _split_sizes(len(idx), fractions)
            for p, chunk in zip(parts, (idx[:a], idx[a:a + b], idx[a + b:])):
                p.append(chunk)
        order = [np.sort(np.concatenate(p)) for p in parts]
        order = [o[rng.permutation(len(o))] for o in order]
    else:
        perm = rng.permutation(n)
        a, b, _ = _split_sizes(n, fractions)
        order = [perm[:a], perm[a:a + b], perm[a + b:]]
    return Split(*[(X[o], None if y is None else y[o]) for o in order])


class Standardizer:
    """z-score features: ``(x - mean) / std`` with mean and std from the training data only.

    ``std`` is the population standard deviation (ddof=0, as scikit-learn's StandardScaler);
    features whose std is below ``eps`` (constant pixels) are left unscaled (divided by 1).
    """

    def __init__(self, eps=1e-8):
        self.eps = float(eps)
        self.mean = None
        self.std = None

    def fit(self, X):
        X = np.asarray(X, dtype=np.float64)
        if X.ndim < 1 or len(X) == 0:
            raise ValueError(f"Standardizer.fit: expected a non-empty array of samples, got shape {X.shape}")
        self.mean = X.mean(axis=0)
        std = X.std(axis=0)
        self.std = np.where(std < self.eps, 1.0, std)
        return self

    def transform(self, X, dtype=np.float32):
        if self.mean is None:
            raise RuntimeError("Standardizer.transform: call fit(X_train) first")
        X = np.asarray(X, dtype=np.float64)
        if X.shape[1:] != self.mean.shape:
            raise ValueError(f"Standardizer.transform: X has feature shape {X.shape[1:]}, the standardizer "
                             f"was fitted on {self.mean.shape}")
        return ((X - self.mean) / self.std).astype(dtype)

    def fit_transform(self, X, dtype=np.float32):
        return self.fit(X).transform(X, dtype)

    def inverse_transform(self, Z):
        return np.asarray(Z, dtype=np.float64) * self.std + self.mean

    def state_dict(self):
        return {"mean": self.mean, "std": self.std, "eps": self.eps}

    def load_state_dict(self, state):
        self.mean = np.asarray(state["mean"], dtype=np.float64)
        self.std = np.asarray(state["std"], dtype=np.float64)
        self.eps = float(state.get("eps", self.eps))
        return self
