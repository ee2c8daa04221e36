"""Image grids as PNG (matplotlib, no display needed)."""
from __future__ import annotations

import os

import numpy as np


def _arr(x):
    return np.asarray(x._data if hasattr(x, "_data") else x)


def save_image_grid(images, path, nrow=8, titles=None, cmap="gray", normalize="each", suptitle=None,
                    scale=1.4):
    """Save images (N, H, W), (N, 1, H, W) or (N, 3, H, W) as a grid PNG at ``path``.

    normalize: 'each' rescales every image to [0, 1], 'all' uses one range for the grid,
    'symmetric' centres 0 (for signed maps such as perturbations and filters), None: as is.
    Returns the path.
    """
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    a = _arr(images).astype(np.float64)
    if a.ndim == 4 and a.shape[1] == 1:
        a = a[:, 0]
    elif a.ndim == 4 and a.shape[1] == 3:
        a = a.transpose(0, 2, 3, 1)
    elif a.ndim != 3:
        raise ValueError(f"save_image_grid: images must be (N, H, W), (N, 1, H, W) or (N, 3, H, W), got {a.shape}")
    n = len(a)
    ncol = min(nrow, n)
    nr = (n + ncol - 1) // ncol
    fig, axes = plt.subplots(nr, ncol, figsize=(scale * ncol, scale * nr + (0.4 if suptitle else 0)),
                             squeeze=False)
    lo_all, hi_all = a.min(), a.max()
    for i, ax in enumerate(axes.ravel()):
        ax.axis("off")
        if i >= n:
            continue
        im = a[i]
        kw = {}
        if normalize == "each":
            lo, hi = im.min(), im.max()
            im = (im - lo) / (hi - lo) if hi > lo else im * 0
            kw = dict(vmin=0, vmax=1)
        elif normalize == "all":
            kw = dict(vmin=lo_all, vmax=hi_all)
        elif normalize == "symmetric":
            m = np.abs(im).max() or 1.0
            kw = dict(vmin=-m, vmax=m)
            cmap_i = "bwr" if cmap == "gray" else cmap
        ax.imshow(im, cmap=cmap_i if normalize == "symmetric" else cmap, interpolation="nearest", **kw)
        if titles is not None and i < len(titles):
            ax.set_title(str(titles[i]), fontsize=7)
    if suptitle:
        fig.suptitle(suptitle, fontsize=9)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
