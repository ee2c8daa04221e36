"""Positional information for attention: sinusoidal tables, learned tables, rotary (RoPE).

Sinusoidal (seed 003 §7.2): PE[pos, 2i] = sin(pos / 10000^(2i/d)), PE[pos, 2i+1] = cos(same).
Rotary (seed 000 mentions it; Su et al. 2021): rotate each pair of query/key features
(x_{2i}, x_{2i+1}) by the angle pos * theta_i.  A rotation by angle a applied to q and by
b applied to k leaves their dot product depending only on a - b, so attention scores
depend only on the relative position i - j.
"""
from __future__ import annotations

from varlens.core.dtypes import get_default_dtype
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens import ops


def sinusoidal_table(n_positions, d_model, base=10000.0, dtype=None):
    """(n_positions, d_model) table of interleaved sines and cosines (seed 003 §7.2)."""
    if d_model % 2:
        raise ValueError(f"sinusoidal_table: d_model must be even, got {d_model}")
    pos = xp.arange(n_positions, dtype=xp.float64)[:, None]
    inv = base ** (-xp.arange(0, d_model, 2, dtype=xp.float64) / d_model)
    pe = xp.zeros((n_positions, d_model))
    pe[:, 0::2] = xp.sin(pos * inv)
    pe[:, 1::2] = xp.cos(pos * inv)
    return Tensor._make(pe.astype(dtype or get_default_dtype()))


def rope_angles(n_positions, head_dim, base=10000.0, offset=0, dtype=None, device=None):
    """cos and sin tables of shape (n_positions, head_dim // 2) for rotary embeddings, made on the
    host and copied to ``device`` (the CPU by default)."""
    if head_dim % 2:
        raise ValueError(f"rope_angles: head_dim must be even, got {head_dim}")
    ns = B.namespace_of_device(device)
    inv = base ** (-xp.arange(0, head_dim, 2, dtype=xp.float64) / head_dim)
    ang = xp.arange(offset, offset + n_positions, dtype=xp.float64)[:, None] * inv
    dt = dtype or get_default_dtype()
    return (Tensor._make(B.to_namespace(xp.cos(ang).astype(dt), ns)),
            Tensor._make(B.to_namespace(xp.sin(ang).astype(dt), ns)))


def apply_rotary(x, cos, sin):
    """Rotate consecutive feature pairs of x (..., T, D) by the angles in cos/sin (T, D/2).

    Built from differentiable ops: the gradient is the inverse rotation of the cotangent.
    """
    T, D = x.shape[-2], x.shape[-1]
    if cos.shape[-2] < T or cos.shape[-1] * 2 != D:
        raise ValueError(f"apply_rotary: tables of shape {tuple(cos.shape)} do not fit input with "
                         f"{T} positions and {D} features")
    cos, sin = cos[:T], sin[:T]
    pairs = ops.reshape(x, tuple(x.shape[:-1]) + (D // 2, 2))
    x0, x1 = pairs[..., 0], pairs[..., 1]
    r0 = x0 * cos - x1 * sin
    r1 = x0 * sin + x1 * cos
    return ops.reshape(ops.stack([r0, r1], -1), tuple(x.shape))
