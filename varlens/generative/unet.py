"""A small U-Net eps-predictor for images (seed 003 §11.5.2, Figure 11.5.2), built from varlens.nn.

Shape walk for 28x28 (base channels C, ``mults=(1, 2, 2)``):
  conv_in 3x3: (B, in, 28, 28) -> (B, C, 28, 28)
  level 0: ResBlock C -> C           at 28, skip saved, stride-2 conv -> 14
  level 1: ResBlock C -> 2C          at 14, skip saved, stride-2 conv -> 7
  level 2: ResBlock 2C -> 2C         at 7, self-attention (+ cross-attention when ``context_dim``)
  middle:  ResBlock, attention, ResBlock at 7
  up:      mirror image: concatenate the skip, ResBlock, nearest x2 upsample + 3x3 conv
  conv_out 3x3 back to ``in`` channels (eps has the image's shape).
Every ResBlock adds a projection of the time embedding (sinusoidal table of seed 003 §7.2 ->
Linear -> SiLU -> Linear) to its feature maps; an optional class embedding is added to the time
embedding (index ``num_classes`` is the "no label" token for classifier-free guidance).

Cross-attention (seed 003 §11.5.2, Remark 11.5.1): queries come from the flattened image
features, keys and values from a conditioning sequence E(c) of shape (B, L, context_dim):
Q = phi(x_t) W_Q, K = E(c) W_K, V = E(c) W_V. The output has one row per image position and
does not depend on the order of the conditioning tokens.
"""
from __future__ import annotations

import numpy as np

import varlens.nn.functional as F
from varlens.generative.diffusion import SinusoidalTimeEmbedding
from varlens.nn import (Conv2d, Embedding, GroupNorm, Linear, Module, ModuleList, MultiheadAttention, Upsample)
from varlens.ops import cat
from varlens.core.tensor import Tensor


def _groups(c):
    # at least 4 channels per group: with one channel per group, GroupNorm would subtract the
    # per-channel time embedding added just before it, and the network could not see t
    for g in (8, 4, 2, 1):
        if c % g == 0 and c // g >= 4:
            return g
    return 1


class ResBlock(Module):
    """GroupNorm -> SiLU -> conv3x3 (+ time projection) -> GroupNorm -> SiLU -> conv3x3, plus the
    input (through a 1x1 conv when the channel count changes)."""

    def __init__(self, cin, cout, temb_dim):
        super().__init__()
        self.norm1, self.conv1 = GroupNorm(_groups(cin), cin), Conv2d(cin, cout, 3, padding=1)
        self.temb = Linear(temb_dim, cout)
        self.norm2, self.conv2 = GroupNorm(_groups(cout), cout), Conv2d(cout, cout, 3, padding=1)
        self.skip = Conv2d(cin, cout, 1) if cin != cout else None

    def forward(self, x, emb):
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(emb)).reshape(emb.shape[0], -1, 1, 1)
        h = self.conv2(F.silu(self.norm2(h)))
        return h + (x if self.skip is None else self.skip(x))


def _tokens(x):
    B, C, H, W = x.shape
    return x.reshape(B, C, H * W).transpose(1, 2)


def _untokens(t, shape):
    B, C, H, W = shape
    return t.transpose(1, 2).reshape(B, C, H, W)


class SelfAttention2d(Module):
    """Residual multi-head self-attention over the H*W positions of a feature map."""

    def __init__(self, channels, num_heads=1):
        super().__init__()
        self.norm = GroupNorm(_groups(channels), channels)
        self.attn = MultiheadAttention(channels, num_heads, batch_first=True)

    def forward(self, x):
        t = _tokens(self.norm(x))
        out, _ = self.attn(t, t, t, need_weights=False)
        return x + _untokens(out, x.shape)


class CrossAttention2d(Module):
    """Residual cross-attention: queries from the feature map's positions, keys and values from
    a conditioning sequence ``context`` (B, L, context_dim) (seed 003 §11.5.2)."""

    def __init__(self, channels, context_dim, num_heads=1):
        super().__init__()
        self.norm = GroupNorm(_groups(channels), channels)
        self.attn = MultiheadAttention(channels, num_heads, kdim=context_dim, vdim=context_dim, batch_first=True)

    def attend(self, x, context):
        """The attention output as tokens (B, H*W, C), without the residual."""
        t = _tokens(self.norm(x))
        out, _ = self.attn(t, context, context, need_weights=False)
        return out

    def forward(self, x, context):
        return x + _untokens(self.attend(x, context), x.shape)


class UNet(Module):
    """eps_theta(x_t, t[, y][, context]) for images (B, in_channels, H, W); H, W divisible by
    2^(len(mults) - 1). ``attn_levels`` lists the levels (0 = full resolution) with attention."""

    def __init__(self, in_channels=1, base_channels=32, mults=(1, 2, 2), attn_levels=(2,), num_heads=1,
                 time_dim=None, max_steps=1000, num_classes=None, context_dim=None):
        super().__init__()
        C = base_channels
        td = time_dim or 4 * C
        self.tfeat = SinusoidalTimeEmbedding(C, max_steps)
        self.tmlp1, self.tmlp2 = Linear(C, td), Linear(td, td)
        self.num_classes = num_classes
        self.label_emb = Embedding(num_classes + 1, td) if num_classes else None
        self.context_dim = context_dim
        self.conv_in = Conv2d(in_channels, C, 3, padding=1)
        chans = [C * m for m in mults]
        self.down, self.down_attn, self.down_cross, self.downsample = (ModuleList() for _ in range(4))
        cin = C
        self._attn_levels = tuple(attn_levels)
        for i, c in enumerate(chans):
            self.down.append(ResBlock(cin, c, td))
            use = i in attn_levels
            self.down_attn.append(SelfAttention2d(c, num_heads) if use else _Skip())
            self.down_cross.append(CrossAttention2d(c, context_dim, num_heads) if use and context_dim else _Skip())
            self.downsample.append(Conv2d(c, c, 3, stride=2, padding=1) if i < len(chans) - 1 else _Skip())
            cin = c
        self.mid1, self.mid_attn, self.mid2 = ResBlock(cin, cin, td), SelfAttention2d(cin, num_heads), ResBlock(cin, cin, td)
        self.mid_cross = CrossAttention2d(cin, context_dim, num_heads) if context_dim else _Skip()
        self.up, self.up_attn, self.upsample = ModuleList(), ModuleList(), ModuleList()
        for i in reversed(range(len(chans))):
            c = chans[i]
            self.up.append(ResBlock(cin + c, c, td))
            self.up_attn.append(SelfAttention2d(c, num_heads) if i in attn_levels else _Skip())
            self.upsample.append(_Up(c) if i > 0 else _Skip())
            cin = c
        self.norm_out = GroupNorm(_groups(cin), cin)
        self.conv_out = Conv2d(cin, in_channels, 3, padding=1)

    def forward(self, x, t, y=None, context=None):
        emb = self.tmlp2(F.silu(self.tmlp1(self.tfeat(t, x.dtype))))
        if self.label_emb is not None:
            if y is None:
                y = Tensor._make(np.full((x.shape[0],), self.num_classes, dtype=np.int64))
            emb = emb + self.label_emb(y)
        if self.context_dim and context is None:
            raise ValueError("UNet: built with context_dim, so forward needs context (B, L, context_dim)")
        h = self.conv_in(x)
        skips = []
        for blk, att, cross, ds in zip(self.down, self.down_attn, self.down_cross, self.downsample):
            h = att(blk(h, emb))
            if isinstance(cross, CrossAttention2d):
                h = cross(h, context)
            skips.append(h)
            h = ds(h)
        h = self.mid_attn(self.mid1(h, emb))
        if isinstance(self.mid_cross, CrossAttention2d):
            h = self.mid_cross(h, context)
        h = self.mid2(h, emb)
        for blk, att, us in zip(self.up, self.up_attn, self.upsample):
            h = att(blk(cat([h, skips.pop()], 1), emb))
            h = us(h)
        return self.conv_out(F.silu(self.norm_out(h)))


class _Skip(Module):
    def forward(self, x, *args):
        return x


class _Up(Module):
    """Nearest-neighbour x2 upsampling then a 3x3 conv."""

    def __init__(self, c):
        super().__init__()
        self.up, self.conv = Upsample(scale_factor=2), Conv2d(c, c, 3, padding=1)

    def forward(self, x):
        return self.conv(self.up(x))
