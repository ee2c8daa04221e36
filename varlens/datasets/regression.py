"""Closed-form linear regression, to compare gradient descent against the exact optimum.

Seed 003 §1.3: with the loss (1/n)||Y - XW||^2 the gradient is -(2/n) X^T (Y - XW); it
vanishes at the normal equation X^T X W = X^T Y, so W = (X^T X)^{-1} X^T Y when the
columns of X are independent (Remark 1.3.2: never when n < p).
Seed 003 Example 4.1.2 (ridge): adding lambda ||W||^2 to that loss gives
(n lambda I + X^T X) W = X^T Y, solvable for every lambda > 0.
(scikit-learn's Ridge(alpha) minimises the unnormalised sum, so alpha = n lambda.)
"""
from __future__ import annotations

import numpy as np


def add_bias_column(X):
    """Append a column of ones, so a bias becomes one more weight (seed 003 Remark 1.3.1)."""
    X = np.asarray(X)
    return np.concatenate([X, np.ones((len(X), 1), dtype=X.dtype)], axis=1)


def _check(X, y, name):
    X = np.asarray(X, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"{name}: X must be 2-D (n samples, p features), got shape {X.shape}")
    if y.shape[0] != X.shape[0]:
        raise ValueError(f"{name}: y must have {X.shape[0]} rows like X, got shape {y.shape}")
    return X, y


def least_squares(X, y):
    """The W minimising (1/n)||y - XW||^2 from the normal equation (seed 003 (1.3.3)).

    Raises a clear error when X^T X is singular (linearly dependent columns, e.g. n < p).
    """
    X, y = _check(X, y, "least_squares")
    A = X.T @ X
    if np.linalg.matrix_rank(A) < A.shape[0]:
        raise np.linalg.LinAlgError(
            f"least_squares: X^T X is singular (rank {np.linalg.matrix_rank(A)} < p = {A.shape[0]}): the "
            "columns of X are linearly dependent (always so when n < p); no unique optimum. Use ridge().")
    return np.linalg.solve(A, X.T @ y)


def ridge(X, y, lam):
    """The W minimising (1/n)||y - XW||^2 + lam ||W||^2 (seed 003 Example 4.1.2)."""
    X, y = _check(X, y, "ridge")
    if not lam >= 0:
        raise ValueError(f"ridge: lam must be >= 0, got {lam}")
    n, p = X.shape
    return np.linalg.solve(n * lam * np.eye(p) + X.T @ X, X.T @ y)


def mse(X, y, W):
    """(1/n)||y - XW||^2."""
    X, y = _check(X, y, "mse")
    r = y - X @ np.asarray(W, dtype=np.float64)
    return float((r ** 2).sum() / len(X))
