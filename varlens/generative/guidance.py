"""Conditioning a diffusion model (seed 003 §11.5.2).

Classifier-free guidance (Ho & Salimans 2022; not in the notes): one network learns both
eps(x_t, t, y) and eps(x_t, t, null) by replacing the label with the "null" token with
probability p_uncond during training (``drop_labels``). At sampling time
    eps_guided = eps(x_t, t, null) + s (eps(x_t, t, y) - eps(x_t, t, null)),
so s = 0 is unconditional, s = 1 plainly conditional and s > 1 pushes samples towards what
distinguishes class y. (Ho & Salimans write w = s - 1.)

Cross-attention conditioning: ``LabelContext`` turns a class label into a short sequence of
context tokens E(c) (B, L, d) for the U-Net's cross-attention blocks (varlens.generative.unet),
which take queries from the image features and keys/values from E(c) (Remark 11.5.1).
"""
from __future__ import annotations

import numpy as np

from varlens.nn import Embedding, Module, Parameter
from varlens.core.tensor import Tensor


def drop_labels(y, p_uncond, null_index, generator=None):
    """Labels with each entry replaced by ``null_index`` with probability ``p_uncond``."""
    if not 0 <= p_uncond <= 1:
        raise ValueError(f"drop_labels: p_uncond must lie in [0, 1], got {p_uncond}")
    a = (y._data if isinstance(y, Tensor) else np.asarray(y)).astype(np.int64).copy()
    from varlens.ops.creation import rand
    u = rand(a.shape[0], generator=generator, dtype=np.float64)._data
    a[u < p_uncond] = null_index
    return Tensor._make(a)


def guided_eps(model, x, t, y, scale, null_index, **kw):
    """eps(null) + scale (eps(y) - eps(null)), both from one batched call of ``model``."""
    from varlens.ops import cat
    B = x.shape[0]
    ya = y._data if isinstance(y, Tensor) else np.asarray(y)
    yy = Tensor._make(np.concatenate([ya.astype(np.int64), np.full(B, null_index, dtype=np.int64)]))
    tt = Tensor._make(np.concatenate([t._data, t._data]))
    extra = {k: cat([v, v], 0) if isinstance(v, Tensor) else v for k, v in kw.items()}
    out = model(cat([x, x], 0), tt, yy, **extra)
    ec, eu = out[:B], out[B:]
    return eu + scale * (ec - eu)


class ClassifierFreeGuidance:
    """Wrap a label-conditioned eps-model as an (x, t) -> eps callable for the samplers of
    ``GaussianDiffusion`` (``sample`` / ``ddim_sample``)."""

    def __init__(self, model, y, scale, null_index):
        self.model, self.y, self.scale, self.null = model, y, float(scale), int(null_index)

    def __call__(self, x, t, **kw):
        return guided_eps(self.model, x, t, self.y, self.scale, self.null, **kw)


class LabelContext(Module):
    """Class label -> a sequence of ``length`` context tokens of width ``dim``: a label
    embedding plus a learned per-position offset (so the tokens differ from each other)."""

    def __init__(self, num_classes, dim, length=4):
        super().__init__()
        self.emb = Embedding(num_classes + 1, dim)
        from varlens.ops.creation import randn
        self.pos = Parameter(randn(length, dim) * 0.02)
        self.length = length

    def forward(self, y):
        e = self.emb(y)  # (B, dim)
        return e.reshape(e.shape[0], 1, e.shape[1]) + self.pos.reshape(1, self.length, -1)
