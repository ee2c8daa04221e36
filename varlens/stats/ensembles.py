"""Bagging and boosting (seed 003 §4.5) over small varlens models on a tabular data set.

Members are logistic regressions written with varlens tensors and autograd (one weight
vector and bias each, trained by full-batch gradient descent on the weighted
cross-entropy).  Many members are trained at once as one batched problem: member m has its
own rows of the (M, n, d) design tensor, so one backward pass gives every member's gradient.

* Bagging: each member sees a bootstrap resample (n rows drawn with replacement); the
  ensemble averages the members' probabilities (soft vote) or takes the majority vote.
* AdaBoost (Freund and Schapire 1997; the notes give no formulas): weak learners are
  logistic regressions on a single feature; each round fits one per feature on the current
  example weights, keeps the one with the lowest weighted error eps, gives it the vote
  weight alpha = 1/2 ln((1 - eps)/eps) and multiplies the weights of the examples it got
  wrong by e^{alpha} (right ones by e^{-alpha}) before renormalising.  The committee predicts
  sign(sum alpha_m h_m(x)).
"""
from __future__ import annotations

import math

import numpy as np

import varlens as vl

__all__ = ["load_tabular", "fit_logistic_batch", "predict_proba_batch", "bagging", "adaboost",
           "averaging_mse"]


def load_tabular(name="breast_cancer", test_fraction=0.3, seed=0):
    """A standardised train/test split of a scikit-learn bundled data set (no download):
    "breast_cancer" (569 x 30, binary) or "digits" (1797 x 64, turned binary: digit < 5).
    Labels are 0/1.  Standardisation uses training statistics only."""
    from sklearn import datasets
    if name == "breast_cancer":
        X, y = datasets.load_breast_cancer(return_X_y=True)
    elif name == "digits":
        X, y = datasets.load_digits(return_X_y=True)
        y = (y < 5).astype(np.int64)
    else:
        raise ValueError(f"name: expected 'breast_cancer' or 'digits', got {name!r}")
    rng = np.random.default_rng(seed)
    idx = rng.permutation(len(y))
    n_test = int(round(test_fraction * len(y)))
    te, tr = idx[:n_test], idx[n_test:]
    mu, sd = X[tr].mean(0), X[tr].std(0)
    sd[sd == 0] = 1.0
    X = (X - mu) / sd
    return X[tr], y[tr].astype(np.float64), X[te], y[te].astype(np.float64)


def fit_logistic_batch(Xb, yb, wb=None, steps=300, lr=0.5, l2=1e-3):
    """Train M logistic regressions at once by gradient descent with varlens autograd.

    Xb: (M, n, d) inputs, yb: (M, n) 0/1 labels, wb: (M, n) example weights (each row is
    normalised to sum to 1; default uniform).  Loss per member: sum_i w_i (softplus(z_i) - y_i z_i)
    + l2/2 ||w||^2, the weighted cross-entropy.  Returns (W (M, d), b (M,))."""
    Xb = np.asarray(Xb, dtype=np.float64)
    yb = np.asarray(yb, dtype=np.float64)
    if Xb.ndim != 3 or yb.shape != Xb.shape[:2]:
        raise ValueError(f"Xb, yb: expected shapes (M, n, d) and (M, n), got {Xb.shape} and {yb.shape}")
    M, n, d = Xb.shape
    wb = np.full((M, n), 1.0 / n) if wb is None else np.asarray(wb, dtype=np.float64)
    wb = wb / wb.sum(axis=1, keepdims=True)
    X, y, w = (vl.tensor(a, dtype=vl.float64) for a in (Xb, yb, wb))
    W = vl.zeros((M, d, 1), dtype=vl.float64, requires_grad=True)
    b = vl.zeros((M, 1), dtype=vl.float64, requires_grad=True)
    for _ in range(steps):
        W.grad = None
        b.grad = None
        z = (X @ W).squeeze(-1) + b                       # (M, n)
        loss = (w * (vl.softplus(z) - y * z)).sum() + 0.5 * l2 * (W * W).sum()
        loss.backward()
        with vl.no_grad():
            W.sub_(lr * W.grad)
            b.sub_(lr * b.grad)
    return W.detach().numpy()[..., 0].copy(), b.detach().numpy()[:, 0].copy()


def predict_proba_batch(W, b, X):
    """(M, n) probabilities of class 1 for each member on inputs X (n, d)."""
    z = X @ W.T + b
    return (1.0 / (1.0 + np.exp(-z))).T


def bagging(Xtr, ytr, Xte, yte, n_members=15, steps=300, lr=0.5, seed=0):
    """Bootstrap-aggregated logistic regressions.  Returns a dict: members' test errors,
    their mean, and the ensemble's test error for soft (probability averaging) and hard
    (majority) voting, as a function of the number of members used."""
    rng = np.random.default_rng(seed)
    n = len(ytr)
    idx = rng.integers(0, n, size=(n_members, n))
    W, b = fit_logistic_batch(Xtr[idx], ytr[idx], steps=steps, lr=lr)
    P = predict_proba_batch(W, b, Xte)                 # (M, n_test)
    member_err = ((P > 0.5) != (yte > 0.5)).mean(axis=1)
    soft = [float((((P[:m].mean(0)) > 0.5) != (yte > 0.5)).mean()) for m in range(1, n_members + 1)]
    hard = [float((((P[:m] > 0.5).mean(0) > 0.5) != (yte > 0.5)).mean()) for m in range(1, n_members + 1)]
    single_W, single_b = fit_logistic_batch(Xtr[None], ytr[None], steps=steps, lr=lr)
    single_err = float(((predict_proba_batch(single_W, single_b, Xte)[0] > 0.5) != (yte > 0.5)).mean())
    return {"member_test_error": member_err, "mean_member_error": float(member_err.mean()),
            "ensemble_soft_error": soft, "ensemble_hard_error": hard,
            "full_data_model_error": single_err}


def adaboost(Xtr, ytr, Xte, yte, rounds=20, steps=150, lr=1.0):
    """AdaBoost with single-feature logistic-regression weak learners (see the module
    docstring).  Returns a dict with each member's weighted training error eps, its vote
    weight alpha, its own test error, and the committee's train/test error after each round."""
    n, d = Xtr.shape
    ys_tr = 2 * ytr - 1
    ys_te = 2 * yte - 1
    w = np.full(n, 1.0 / n)
    Xf = np.transpose(Xtr)[:, :, None]                   # (d, n, 1): one problem per feature
    F_tr = np.zeros(n)
    F_te = np.zeros(len(yte))
    out = {"feature": [], "eps": [], "alpha": [], "member_test_error": [],
           "ensemble_train_error": [], "ensemble_test_error": []}
    for _ in range(rounds):
        W, b = fit_logistic_batch(Xf, np.broadcast_to(ytr, (d, n)), np.broadcast_to(w, (d, n)),
                                  steps=steps, lr=lr, l2=0.0)
        h = np.sign(Xtr * W[:, 0] + b)                   # (n, d) predictions of all d learners
        h[h == 0] = 1
        errs = ((h != ys_tr[:, None]) * w[:, None]).sum(0)
        j = int(np.argmin(errs))
        eps = float(min(max(errs[j], 1e-12), 1 - 1e-12))
        if eps >= 0.5:
            break
        alpha = 0.5 * math.log((1 - eps) / eps)
        ht = h[:, j]
        hte = np.sign(Xte[:, j] * W[j, 0] + b[j])
        hte[hte == 0] = 1
        w = w * np.exp(-alpha * ys_tr * ht)
        w /= w.sum()
        F_tr += alpha * ht
        F_te += alpha * hte
        out["feature"].append(j)
        out["eps"].append(eps)
        out["alpha"].append(alpha)
        out["member_test_error"].append(float((hte != ys_te).mean()))
        out["ensemble_train_error"].append(float((np.where(F_tr >= 0, 1, -1) != ys_tr).mean()))
        out["ensemble_test_error"].append(float((np.where(F_te >= 0, 1, -1) != ys_te).mean()))
    return out


def averaging_mse(n_models=(1, 2, 4, 8, 16), sigma=1.0, rho=0.0, reps=20000, seed=0):
    """MSE of the average of N predictors whose errors are zero-mean, variance sigma^2 and
    pairwise correlation rho (003 §4.5 with §3.5's MSE): sigma^2 (rho + (1 - rho)/N), which is
    sigma^2/N for uncorrelated errors.  Returns (measured, predicted) arrays."""
    rng = np.random.default_rng(seed)
    meas, pred = [], []
    for N in n_models:
        common = rng.standard_normal((reps, 1)) * math.sqrt(rho)
        own = rng.standard_normal((reps, N)) * math.sqrt(1 - rho)
        err = sigma * (common + own)
        meas.append(float((err.mean(axis=1) ** 2).mean()))
        pred.append(sigma ** 2 * (rho + (1 - rho) / N))
    return np.array(meas), np.array(pred)
