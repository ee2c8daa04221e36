"""Scaling laws at small scale (seed 003 §8.7; Kaplan et al. 2020): the loss of a model with N
(non-embedding) parameters follows L(N) = (N_c / N)^alpha.

Taking logs, log L = alpha log N_c - alpha log N is a straight line in log N with slope -alpha,
so ``fit_power_law`` is ordinary least squares on (log N, log L).  Two uncertainties for
alpha are reported: the OLS standard error of the slope, sqrt(s^2 / sum (x - mean x)^2) with
s^2 the residual variance on n - 2 degrees of freedom, and a bootstrap over the points
(resample the (N, L) pairs with replacement, refit, take the standard deviation of alpha).
``run_scaling`` trains GPTs of several widths on the same data for the same number of steps.
"""
from __future__ import annotations

import math
import time

import numpy as np


def fit_power_law(N, L, n_boot=2000, seed=0):
    """Fit L = (N_c / N)^alpha by least squares in log-log space.

    Returns a dict: alpha, alpha_se (OLS), alpha_boot_sd, alpha_ci95 (bootstrap percentiles),
    N_c, and the fitted log-log intercept and slope.
    """
    N = np.asarray(N, dtype=np.float64)
    L = np.asarray(L, dtype=np.float64)
    if N.shape != L.shape or N.ndim != 1:
        raise ValueError(f"fit_power_law: N and L must be 1-D of the same length, got {N.shape} and {L.shape}")
    if len(N) < 3:
        raise ValueError(f"fit_power_law: need at least 3 points for a slope and its error, got {len(N)}")
    if (N <= 0).any() or (L <= 0).any():
        raise ValueError("fit_power_law: N and L must be positive (they are logged)")
    x, y = np.log(N), np.log(L)

    def ols(x, y):
        xm = x.mean()
        sxx = ((x - xm) ** 2).sum()
        b = ((x - xm) * (y - y.mean())).sum() / sxx
        return y.mean() - b * xm, b, sxx

    a, b, sxx = ols(x, y)
    resid = y - (a + b * x)
    s2 = (resid ** 2).sum() / (len(x) - 2)
    alpha = -b
    rng = np.random.default_rng(seed)
    boots = []
    for _ in range(n_boot):
        i = rng.integers(0, len(x), len(x))
        if np.ptp(x[i]) == 0:
            continue  # all copies of one point: no slope
        boots.append(-ols(x[i], y[i])[1])
    boots = np.array(boots)
    return {"alpha": float(alpha), "alpha_se": float(math.sqrt(s2 / sxx)),
            "alpha_boot_sd": float(boots.std(ddof=1)),
            "alpha_ci95": (float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))),
            "N_c": float(math.exp(a / alpha)) if alpha != 0 else float("inf"),
            "intercept": float(a), "slope": float(b), "residual_sd": float(math.sqrt(s2))}


def power_law(N, N_c, alpha):
    return (N_c / np.asarray(N, dtype=np.float64)) ** alpha


def non_embedding_params(model):
    """Kaplan et al.'s N: parameters outside the token and position embeddings."""
    n = 0
    for name, p in model.named_parameters():
        if name.startswith(("wte.", "wpe.")):
            continue
        n += p.numel()
    return n


def run_scaling(widths=(16, 24, 32, 48, 64), n_layer=2, n_head=4, steps=600, batch=32, block=64,
                lr=3e-3, chars=1_000_000, seed=0, log=print):
    """Train one GPT per width on the same characters and batches; returns a list of dicts
    (width, N, val loss in nats per character, seconds)."""
    import varlens as vl
    from varlens.datasets.text import CharVocab, load_kjv
    from varlens.models.gpt import GPT, GPTConfig
    from varlens.train.loop import train_loop
    text = load_kjv()[:chars]
    vocab = CharVocab(text)
    n_val = len(text) // 20
    tr, va = vocab.encode(text[:-n_val]), vocab.encode(text[-n_val:])
    nv = (len(va) - 1) // block
    xv, yv = va[:nv * block].reshape(nv, block), va[1:nv * block + 1].reshape(nv, block)
    out = []
    for w in widths:
        vl.manual_seed(seed)
        m = GPT(GPTConfig(vocab_size=vocab.size, block_size=block, n_layer=n_layer, n_head=n_head, n_embd=w))
        opt = vl.optim.AdamW(m.parameters(), lr=lr, weight_decay=0.01)
        rng = np.random.default_rng(seed)
        t0 = time.perf_counter()

        def windows():
            for _ in range(steps):
                st = rng.integers(0, len(tr) - block - 1, batch)
                yield np.stack([tr[i:i + block] for i in st]), np.stack([tr[i + 1:i + block + 1] for i in st])

        train_loop(m, lambda b: m(vl.tensor(b[0]), vl.tensor(b[1]))[1], windows(), opt, clip_grad_norm=1.0,
                   lr_at=lambda s: lr * min(1.0, (s + 1) / 50) * (0.1 + 0.45 * (1 + math.cos(math.pi * s / steps))))
        sec = time.perf_counter() - t0
        m.eval()
        tot = 0.0
        with vl.no_grad():
            for i in range(0, nv, 256):
                _, l = m(vl.tensor(xv[i:i + 256]), vl.tensor(yv[i:i + 256]))
                tot += float(l) * len(xv[i:i + 256])
        r = {"width": w, "N": non_embedding_params(m), "val_loss": tot / nv, "seconds": sec}
        log(r)
        out.append(r)
    return out


def plot_scaling(results, fit, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    N = np.array([r["N"] for r in results], dtype=float)
    L = np.array([r["val_loss"] for r in results])
    fig, ax = plt.subplots(figsize=(5, 3.6))
    ax.loglog(N, L, "o", label="GPT, validation loss")
    grid = np.geomspace(N.min() / 1.3, N.max() * 1.3, 50)
    ax.loglog(grid, power_law(grid, fit["N_c"], fit["alpha"]), "-",
              label=f"(N_c/N)^alpha, alpha = {fit['alpha']:.3f} +/- {fit['alpha_se']:.3f}")
    ax.set_xlabel("non-embedding parameters N")
    ax.set_ylabel("validation loss (nats/char)")
    ax.legend(fontsize=7)
    ax.set_title("Scaling of a character GPT (fixed data and steps)", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
