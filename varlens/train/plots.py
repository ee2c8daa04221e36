"""Loss and accuracy curves as a PNG (matplotlib, Agg backend: no display needed)."""
from __future__ import annotations

import os


def plot_curves(history, path, title=None):
    """Plot train/val loss (and accuracy if present) per epoch from a list of epoch records."""
    import matplotlib
    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    if not history:
        raise ValueError("plot_curves: history is empty (no finished epoch to plot)")
    ep = [r["epoch"] for r in history]
    has_acc = any(r.get("train_acc") is not None or r.get("val_acc") is not None for r in history)
    fig, axes = plt.subplots(1, 2 if has_acc else 1, figsize=(10 if has_acc else 5.5, 4), squeeze=False)
    ax = axes[0, 0]
    for key, label in (("train_loss", "train"), ("val_loss", "validation")):
        ys = [r.get(key) for r in history]
        if any(v is not None for v in ys):
            ax.plot(ep, ys, marker="o", ms=3, label=label)
    ax.set_xlabel("epoch")
    ax.set_ylabel("loss")
    ax.set_title("loss")
    ax.legend()
    ax.grid(alpha=0.3)
    if has_acc:
        ax = axes[0, 1]
        for key, label in (("train_acc", "train"), ("val_acc", "validation")):
            ys = [r.get(key) for r in history]
            if any(v is not None for v in ys):
                ax.plot(ep, ys, marker="o", ms=3, label=label)
        ax.set_xlabel("epoch")
        ax.set_ylabel("accuracy")
        ax.set_title("accuracy")
        ax.legend()
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
