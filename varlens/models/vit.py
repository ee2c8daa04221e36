"""Vision Transformer (seed 003 §7.5; Dosovitskiy et al. 2020), small enough for Fashion-MNIST.

Tokenisation (§7.5.1): the (C, H, W) image is cut into N = HW/P^2 square patches of P x P
pixels; each flattened patch (P^2 C numbers) is mapped to ``dim`` features by one Linear
layer, which is the same map as a Conv2d with kernel = stride = P.  A learned class token is
prepended, learned position embeddings are added, and a stack of pre-LN Transformer encoder
layers (§7.5.2) mixes the tokens; the class token's final state, layer-normalised, feeds the
classification head.

Interpretation (§7.5.4): ``attention_maps`` returns every layer's per-head attention weights;
varlens.vision.attention_maps's ``attention_rollout`` multiplies them through the layers (Abnar & Zuidema 2020: average the
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


def build_vit(cfg, in_features, n_classes):
    """The recipes' hook: a ViT for square single-channel images given as flat vectors."""
    C = int(cfg.get("in_channels", 1))
    S = int(round(math.sqrt(in_features / C)))
    if C * S * S != in_features:
        raise ValueError(f"build_vit: {in_features} features are not {C} square channels")
    return ViT(image_size=S, patch_size=int(cfg.get("patch_size", 7)), in_channels=C, num_classes=n_classes,
               dim=int(cfg.get("dim", 64)), depth=int(cfg.get("depth", 4)), heads=int(cfg.get("heads", 4)),
               mlp_dim=int(cfg.get("mlp_dim", 128)), dropout=float(cfg.get("dropout", 0.0)))
