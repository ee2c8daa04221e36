"""What a ViT attends to (seed 003 §7.5.4): the mean attention distance of every head against depth,
attention rollout to the class token, and one PNG that shows both.
"""
from __future__ import annotations

import numpy as np

import varlens as vl


def mean_attention_distance(maps, distances):
    """(layers, heads) mean attention distance in pixels: for each query patch, sum_j p_ij d_ij
    over key patches (the class token dropped and the weights renormalised), averaged over
    queries and images (seed 003 §7.5.4, Figure 7.5.3)."""
    out = []
    for w in maps:
        p = w[:, :, 1:, 1:]
        p = p / np.maximum(p.sum(-1, keepdims=True), 1e-12)
        out.append((p * distances).sum(-1).mean(axis=(0, 2)))
    return np.array(out)


def attention_rollout(maps):
    """(N, n) how much each patch contributes to the class token through all layers."""
    N, _, T, _ = maps[0].shape
    R = np.broadcast_to(np.eye(T), (N, T, T)).copy()
    for w in maps:
        a = w.mean(1) + np.eye(T)
        a = a / a.sum(-1, keepdims=True)
        R = a @ R
    r = R[:, 0, 1:]
    return r / r.sum(-1, keepdims=True)


def plot_attention(model, images, path, labels=None, class_names=None):
    """One PNG: the images with their attention rollout overlaid (top) and the mean attention
    distance of every head against depth (bottom).  ``images``: (N, 1, H, W) or flattened,
    as the model takes them; displayed after min-max scaling.  Returns the (layers, heads)
    distances."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    x = vl.tensor(np.asarray(images, dtype=np.float32))
    maps = model.attention_maps(x)
    mad = mean_attention_distance(maps, model.patch_distances())
    roll = attention_rollout(maps)
    n = len(images)
    S, g = model.image_size, model.grid
    fig = plt.figure(figsize=(2 * n, 6))
    for i in range(n):
        img = np.asarray(images[i], dtype=np.float64).reshape(S, S)
        img = (img - img.min()) / max(img.max() - img.min(), 1e-12)
        ax = fig.add_subplot(3, n, i + 1)
        ax.imshow(img, cmap="gray")
        ax.axis("off")
        if labels is not None:
            ax.set_title(class_names[labels[i]] if class_names else str(labels[i]), fontsize=8)
        ax = fig.add_subplot(3, n, n + i + 1)
        ax.imshow(img, cmap="gray")
        ax.imshow(np.kron(roll[i].reshape(g, g), np.ones((model.patch_size, model.patch_size))),
                  cmap="inferno", alpha=0.6)
        ax.axis("off")
    ax = fig.add_subplot(3, 1, 3)
    L, H = mad.shape
    for h in range(H):
        ax.scatter(np.arange(1, L + 1), mad[:, h], s=20, label=f"head {h}")
    ax.set_xlabel("layer (depth)")
    ax.set_ylabel("mean attention distance (pixels)")
    ax.set_xticks(np.arange(1, L + 1))
    ax.legend(fontsize=7, ncol=H)
    fig.suptitle("ViT: images, attention rollout to the class token, mean attention distance")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return mad
