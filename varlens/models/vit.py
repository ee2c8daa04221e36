"""Vision Transformer (seed 003 §7.5; Dosovitskiy et al. 2020), small enough for Fashion-MNIST.

Tokenisation (§7.5.1): the (C, H, W) image is cut into N = HW/P^2 square patches of P x P
pixels; each flattened patch (P^2 C numbers) is mapped to ``dim`` features by one Linear
layer, which is the same map as a Conv2d with kernel = stride = P.  A learned class token is
prepended, learned position embeddings are added, and a stack of pre-LN Transformer encoder
layers (§7.5.2) mixes the tokens; the class token's final state, layer-normalised, feeds the
classification head.

Interpretation (§7.5.4): ``attention_maps`` returns every layer's per-head attention weights,
``attention_rollout`` multiplies them through the layers (Abnar & Zuidema 2020: average the
heads, add the identity for the residual path, renormalise rows) to show which patches reach
the class token, and ``mean_attention_distance`` is the attention-weighted pixel distance
between query and key patches, averaged over queries: the Transformer's analogue of a
receptive field size.
"""
from __future__ import annotations

import math

import numpy as np

import varlens as vl
from varlens import nn


class ViT(nn.Module):
    """ViT(image_size, patch_size, in_channels, num_classes, dim, depth, heads, mlp_dim, dropout).

    Input: images (N, C, H, W), or flattened (N, C*H*W) as the recipes give them.
    """

    def __init__(self, image_size=28, patch_size=7, in_channels=1, num_classes=10, dim=64, depth=4,
                 heads=4, mlp_dim=128, dropout=0.0):
        super().__init__()
        if image_size % patch_size:
            raise ValueError(f"ViT: image_size ({image_size}) must be a multiple of patch_size ({patch_size})")
        self.image_size, self.patch_size, self.in_channels = image_size, patch_size, in_channels
        self.grid = image_size // patch_size
        n = self.grid ** 2
        self.patch_embed = nn.Linear(in_channels * patch_size * patch_size, dim)
        self.cls_token = nn.Parameter(vl.zeros(1, 1, dim))
        self.pos_embedding = nn.Parameter(vl.zeros(1, n + 1, dim))
        nn.init.trunc_normal_(self.pos_embedding, std=0.02)
        nn.init.normal_(self.cls_token, std=0.02)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList([
            nn.TransformerEncoderLayer(dim, heads, dim_feedforward=mlp_dim, dropout=dropout, activation="gelu",
                                       batch_first=True, norm_first=True)
            for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, num_classes)

    def patchify(self, x):
        """(N, C, H, W) or (N, C*H*W) -> (N, num_patches, C*P*P), patches in row-major order."""
        C, S, P = self.in_channels, self.image_size, self.patch_size
        N = x.shape[0]
        if x.ndim == 2:
            if x.shape[1] != C * S * S:
                raise ValueError(f"ViT: flattened input must have {C * S * S} features, got {x.shape[1]}")
            x = x.reshape(N, C, S, S)
        elif x.ndim != 4 or tuple(x.shape[1:]) != (C, S, S):
            raise ValueError(f"ViT: input must be (N, {C}, {S}, {S}) or (N, {C * S * S}), got {tuple(x.shape)}")
        g = self.grid
        x = x.reshape(N, C, g, P, g, P).permute(0, 2, 4, 1, 3, 5)
        return x.reshape(N, g * g, C * P * P)

    def embed(self, x):
        t = self.patch_embed(self.patchify(x))
        cls = self.cls_token.expand(t.shape[0], 1, t.shape[2])
        return self.drop(vl.cat([cls, t], 1) + self.pos_embedding)

    def forward(self, x):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h)
        return self.head(self.norm(h[:, 0]))

    @vl.no_grad()
    def attention_maps(self, x):
        """Per-layer attention weights, a list of arrays (N, heads, 1+n, 1+n) (token 0 = class)."""
        was = self.training
        self.eval()
        h = self.embed(x)
        maps = []
        for layer in self.layers:
            a = layer.norm1(h)
            _, w = layer.self_attn(a, a, a, need_weights=True, average_attn_weights=False)
            maps.append(w.numpy())
            h = layer(h)
        self.train(was)
        return maps

    def patch_distances(self):
        """(n, n) Euclidean distances in pixels between patch centres."""
        g, P = self.grid, self.patch_size
        yy, xx = np.meshgrid(np.arange(g), np.arange(g), indexing="ij")
        c = np.stack([yy.ravel(), xx.ravel()], 1) * P
        return np.sqrt(((c[:, None, :] - c[None, :, :]) ** 2).sum(-1))


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


def build_vit(cfg, in_features, n_classes):
    """The recipes' hook: a ViT for square single-channel images given as flat vectors."""
    C = int(cfg.get("in_channels", 1))
    S = int(round(math.sqrt(in_features / C)))
    if C * S * S != in_features:
        raise ValueError(f"build_vit: {in_features} features are not {C} square channels")
    return ViT(image_size=S, patch_size=int(cfg.get("patch_size", 7)), in_channels=C, num_classes=n_classes,
               dim=int(cfg.get("dim", 64)), depth=int(cfg.get("depth", 4)), heads=int(cfg.get("heads", 4)),
               mlp_dim=int(cfg.get("mlp_dim", 128)), dropout=float(cfg.get("dropout", 0.0)))
