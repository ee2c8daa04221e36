"""What a CNN has learned, as pictures (seed 003 §5.2.7), and two small facts of §5.2-5.3.

* save_filters: first-layer filters as grey/colour tiles (weights rescaled for display).
* feature_maps / save_feature_maps: the activations of one layer for one sample.
* apply_edge_filter: the vertical-edge detector of Example 5.2.3 run over an image.
* param_count_5x5_vs_3x3: Example 5.3.1 (25 weights against 2 * 9 = 18, same 5x5 field).
"""
from __future__ import annotations

import numpy as np

import varlens as vl
from varlens import nn
from varlens.autograd import no_grad
from varlens.vision.grid import save_image_grid

VERTICAL_EDGE = np.array([[-1.0, 0.0, 1.0]] * 3)  # Example 5.2.3


def save_filters(weight, path, title="first-layer filters"):
    """Tiles of a conv weight (out, in, kh, kw): one per output channel (RGB if in == 3,
    else the mean over input channels), on a symmetric colour scale (blue < 0 < red)."""
    w = np.asarray(weight._data if hasattr(weight, "_data") else weight)
    if w.ndim != 4:
        raise ValueError(f"save_filters: expected a (out, in, kh, kw) weight, got shape {w.shape}")
    if w.shape[1] == 3:
        return save_image_grid(w, path, normalize="each", suptitle=title)
    return save_image_grid(w.mean(1), path, normalize="symmetric", suptitle=title,
                           titles=[f"#{i}" for i in range(len(w))])


def feature_maps(model, x, layer):
    """The output of ``layer`` (a submodule of model) for input x, via a forward hook."""
    got = {}
    h = layer.register_forward_hook(lambda m, i, o: got.setdefault("out", o))
    try:
        with no_grad():
            model.eval()
            model(x)
    finally:
        h.remove()
    return got["out"]


def save_feature_maps(model, x, layer, path, title="feature maps"):
    """Every channel of ``layer``'s output for the single sample x (1, C, H, W)."""
    fm = feature_maps(model, x, layer)._data[0]
    return save_image_grid(fm, path, normalize="each", suptitle=title,
                           titles=[f"ch {i}" for i in range(len(fm))])


def apply_edge_filter(image, kernel=VERTICAL_EDGE, padding=1):
    """Correlate one (H, W) image with a 3x3 kernel (Example 5.2.3) -> (H, W) response."""
    import varlens.nn.functional as F
    img = np.asarray(image._data if hasattr(image, "_data") else image, dtype=np.float64)
    k = np.asarray(kernel, dtype=np.float64)
    out = F.conv2d(vl.tensor(img[None, None]), vl.tensor(k[None, None]), padding=padding)
    return out._data[0, 0]


def save_edge_filter_demo(image, path):
    """Input, the Example 5.2.3 kernel, and its response, side by side."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    r = apply_edge_filter(image)
    fig, ax = plt.subplots(1, 3, figsize=(8, 2.8))
    ax[0].imshow(np.asarray(image), cmap="gray")
    ax[0].set_title("input")
    ax[1].imshow(VERTICAL_EDGE, cmap="bwr", vmin=-1, vmax=1)
    ax[1].set_title("kernel (Example 5.2.3)")
    for (i, j), v in np.ndenumerate(VERTICAL_EDGE):
        ax[1].text(j, i, f"{v:+.0f}", ha="center", va="center")
    m = np.abs(r).max() or 1
    ax[2].imshow(r, cmap="bwr", vmin=-m, vmax=m)
    ax[2].set_title("response (red: dark->bright)")
    for a in ax:
        a.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def param_count_5x5_vs_3x3(channels=1):
    """Example 5.3.1 with real layers: (weights of one 5x5 conv, of two stacked 3x3 convs,
    receptive field side of the stack).  channels=1, no bias: (25, 18, 5)."""
    one = nn.Conv2d(channels, channels, 5, bias=False)
    two = nn.Sequential(nn.Conv2d(channels, channels, 3, bias=False), nn.Conv2d(channels, channels, 3, bias=False))
    n1 = sum(p.numel() for p in one.parameters())
    n2 = sum(p.numel() for p in two.parameters())
    # receptive field: which input pixels move the centre output of the stack
    x = vl.zeros(1, channels, 9, 9, requires_grad=True)
    y = two(x)
    y[0, 0, 2, 2].backward()
    rows = np.nonzero(np.abs(x.grad._data[0]).sum(0).sum(1))[0]
    return n1, n2, int(rows.max() - rows.min() + 1)
