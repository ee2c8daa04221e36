"""Adversarial examples (seed 003 §5.4): FGSM and its iterated, projected form (PGD).

FGSM: x' = x + eps * sign(grad_x L(model(x), y)).  Among all perturbations with
||dx||_inf <= eps, sign(grad) maximises the first-order change <grad, dx> of the loss
(a linear function is maximised at a vertex of the cube; the dual of L-infinity is L1,
so the gain is eps * ||grad||_1 -- seed 003 Remark 5.4.1).  Every entry of the
perturbation is +-eps where the gradient is non-zero (0 where it is exactly 0), so its
L-infinity norm is exactly eps BEFORE the result is clipped to the valid pixel range;
``clamp=(lo, hi)`` then clips (default (0, 1), pixels in [0, 1]); clamp=None skips it.

PGD: start at x (or a uniform random point of the eps-ball), take ``steps`` steps of
size ``alpha`` along sign(grad), and after each one project back onto the L-infinity
ball around x (clip to [x - eps, x + eps]) and onto the valid range.
"""
from __future__ import annotations

import numpy as np

import varlens as vl
from varlens import ops
from varlens.autograd import grad as _grad
from varlens.autograd import no_grad


def _loss(model, x, y, loss_fn, preprocess):
    import varlens.nn.functional as F
    out = model(preprocess(x) if preprocess is not None else x)
    return (loss_fn or F.cross_entropy)(out, y)


def input_gradient(model, x, y, loss_fn=None, preprocess=None):
    """grad_x L(model(x), y): the loss seen as a function of the input (parameters fixed)."""
    xr = x.detach().requires_grad_(True)
    (g,) = _grad([_loss(model, xr, y, loss_fn, preprocess)], [xr])
    return g


def fgsm(model, x, y, eps, loss_fn=None, clamp=(0.0, 1.0), preprocess=None):
    """x + eps * sign(grad_x L), then clipped to ``clamp`` (None: not clipped).

    The model's parameter gradients are left untouched (the gradient is taken with
    respect to x only).  ``preprocess`` maps pixels to the model's input (e.g. z-scoring)
    so that eps and the clipping are in pixel units.
    """
    if eps < 0:
        raise ValueError(f"fgsm: eps must be >= 0, got {eps!r}")
    g = input_gradient(model, x, y, loss_fn, preprocess)
    with no_grad():
        adv = x.detach() + ops.sign(g) * eps
        if clamp is not None:
            adv = ops.clamp(adv, clamp[0], clamp[1])
    return adv.detach()


def pgd(model, x, y, eps, alpha=None, steps=10, random_start=True, loss_fn=None, clamp=(0.0, 1.0),
        preprocess=None, generator=None):
    """Projected gradient ascent in the L-infinity ball of radius eps around x.

    alpha defaults to 2.5 * eps / steps (so the walk can reach the boundary).
    """
    if eps < 0:
        raise ValueError(f"pgd: eps must be >= 0, got {eps!r}")
    if not isinstance(steps, int) or steps < 1:
        raise ValueError(f"pgd: steps must be a positive int, got {steps!r}")
    alpha = 2.5 * eps / steps if alpha is None else alpha
    x0 = x.detach()
    lo, hi = x0 - eps, x0 + eps
    adv = x0
    if random_start and eps > 0:
        adv = x0 + (vl.rand(*x0.shape, generator=generator, dtype=x0.dtype) * 2 - 1) * eps
    for _ in range(steps):
        if clamp is not None:
            adv = ops.clamp(adv, clamp[0], clamp[1])
        g = input_gradient(model, adv, y, loss_fn, preprocess)
        with no_grad():
            adv = adv + ops.sign(g) * alpha
            adv = ops.minimum(ops.maximum(adv, lo), hi)  # project onto the eps-ball around x
    if clamp is not None:
        adv = ops.clamp(adv, clamp[0], clamp[1])
    return adv.detach()


def predict(model, x, preprocess=None, batch_size=1000):
    outs = []
    with no_grad():
        for i in range(0, len(x), batch_size):
            xb = x[i:i + batch_size]
            outs.append(model(preprocess(xb) if preprocess is not None else xb).argmax(1)._data)
    return np.concatenate(outs)


def accuracy_under_attack(model, X, Y, eps_list, attack="fgsm", batch_size=500, preprocess=None, **kw):
    """[(eps, accuracy)] on (X, Y) for each eps (the model is put in eval mode).

    X: a float Tensor of pixels (N, C, H, W) in the clamp range; Y: int64 labels.
    """
    if attack not in ("fgsm", "pgd"):
        raise ValueError(f"accuracy_under_attack: attack must be 'fgsm' or 'pgd', got {attack!r}")
    fn = fgsm if attack == "fgsm" else pgd
    model.eval()
    y_np = Y._data if hasattr(Y, "_data") else np.asarray(Y)
    rows = []
    for eps in eps_list:
        correct = 0
        for i in range(0, len(X), batch_size):
            xb, yb = X[i:i + batch_size], vl.tensor(y_np[i:i + batch_size])
            adv = fn(model, xb, yb, eps, preprocess=preprocess, **kw) if eps > 0 else xb
            correct += int((predict(model, adv, preprocess) == y_np[i:i + batch_size]).sum())
        rows.append((float(eps), correct / len(X)))
    return rows


def format_table(rows_by_attack):
    """Markdown table: eps | accuracy per attack."""
    names = list(rows_by_attack)
    eps = [e for e, _ in rows_by_attack[names[0]]]
    lines = ["| eps | " + " | ".join(f"{n} accuracy" for n in names) + " |",
             "|---:|" + "---:|" * len(names)]
    for i, e in enumerate(eps):
        lines.append(f"| {e:.3f} | " + " | ".join(f"{rows_by_attack[n][i][1]:.4f}" for n in names) + " |")
    return "\n".join(lines)


def plot_accuracy_vs_eps(rows_by_attack, path, title="accuracy under attack"):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.5))
    for name, rows in rows_by_attack.items():
        e, a = zip(*rows)
        ax.plot(e, a, "o-", label=name)
    ax.set_xlabel("epsilon (L-infinity, pixel units in [0, 1])")
    ax.set_ylabel("test accuracy")
    ax.set_ylim(0, 1)
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
