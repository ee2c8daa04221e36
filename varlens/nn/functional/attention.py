"""Attention: scaled_dot_product_attention, multi_head_attention_forward.
"""
from __future__ import annotations

from varlens import ops as _ops
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn.functional._common import _shape
from varlens.nn.functional.linear_maps import linear
from varlens.ops.nn.attention import scaled_dot_product_attention  # noqa: F401
from varlens.ops.nn.attention import causal_mask
from varlens.core import array as B


# ---------------------------------------------------------------- functional multi-head attention
def _pad_mask_column(m):
    """One more key column, allowed (False / 0.0), for bias_k/bias_v and add_zero_attn."""
    if m is None:
        return None
    a = m._data if isinstance(m, Tensor) else m if B.is_array(m) else xp.asarray(m)
    ns = B.namespace(a)
    z = ns.zeros(a.shape[:-1] + (1,), dtype=a.dtype)
    return ns.concatenate([a, z], -1)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """nn.MultiheadAttention's computation with explicit weights ((L, N, E) or unbatched (L, E)
    inputs): project, split into heads, scaled dot-product attention (seed 003 §7.1), merge,
    project out.  Returns (output, weights or None)."""
    op = "multi_head_attention_forward"
    if static_k is not None or static_v is not None:
        raise NotImplementedError(f"{op}: static_k / static_v are not supported")
    batched = query.ndim == 3
    if not batched:
        query, key, value = (_ops.unsqueeze(t, 1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = _ops.unsqueeze(key_padding_mask, 0) if isinstance(key_padding_mask, Tensor) else \
                _mask_array(key_padding_mask, "key_padding_mask")[None]
    L, N, E = _shape(query)
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    if E % num_heads:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {num_heads}")
    H, Dh = num_heads, E // num_heads
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias[:E], in_proj_bias[E:2 * E], in_proj_bias[2 * E:]
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                                 "v_proj_weight is None")
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        wq, wk, wv = in_proj_weight[:E], in_proj_weight[E:2 * E], in_proj_weight[2 * E:]
    q, k, v = linear(query, wq, bq), linear(key, wk, bk), linear(value, wv, bv)
    if is_causal and attn_mask is None:
        attn_mask = ~causal_mask(L, key.shape[0], B.namespace(query._data))
    if bias_k is not None and bias_v is not None:
        k = _ops.cat([k, _ops.expand(_ops.reshape(bias_k, (1, 1, E)), (1, N, E))], 0)
        v = _ops.cat([v, _ops.expand(_ops.reshape(bias_v, (1, 1, E)), (1, N, E))], 0)
        attn_mask, key_padding_mask = _pad_mask_column(attn_mask), _pad_mask_column(key_padding_mask)
    elif (bias_k is None) != (bias_v is None):
        raise AssertionError("bias_k and bias_v must both be given or both be None")
    S = k.shape[0]

    def heads(t, T):  # (T, N, E) -> (N, H, T, Dh)
        return _ops.permute(_ops.reshape(t, (T, N, H, Dh)), (1, 2, 0, 3))
    q, k, v = heads(q, L), heads(k, S), heads(v, S)
    if add_zero_attn:
        z = Tensor._make(B.namespace(q._data).zeros((N, H, 1, Dh), dtype=q.dtype))
        k, v = _ops.cat([k, z], 2), _ops.cat([v, z], 2)
        attn_mask, key_padding_mask = _pad_mask_column(attn_mask), _pad_mask_column(key_padding_mask)
        S += 1
    mask = merge_masks(attn_mask, key_padding_mask, N, H, L, S, query.dtype)
    res = scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else Tensor._make(mask),
                                       dropout_p=dropout_p if training else 0.0, return_weights=need_weights)
    out, w = res if need_weights else (res, None)
    out = linear(_ops.reshape(_ops.permute(out, (2, 0, 1, 3)), (L, N, E)), out_proj_weight, out_proj_bias)
    if w is not None and average_attn_weights:
        w = _ops.mean(w, 1)
    if not batched:
        out = _ops.squeeze(out, 1)
        w = _ops.squeeze(w, 0) if w is not None else None
    return out, w


def _mask_array(m, name):
    if m is None:
        return None
    return m._data if isinstance(m, Tensor) else m if B.is_array(m) else xp.asarray(m)


def merge_masks(attn_mask, key_padding_mask, n_batch, n_heads, L, S, dtype):
    """Combine MultiheadAttention-style masks (True / -inf = blocked) into one additive or
    boolean 'allowed' mask of shape broadcastable to (N, H, L, S) for SDPA."""
    allowed = None
    additive = None
    if attn_mask is not None:
        a = _mask_array(attn_mask, "attn_mask")
        if a.ndim == 3:  # (N*H, L, S)
            if a.shape[0] != n_batch * n_heads:
                raise RuntimeError(f"MultiheadAttention: a 3-D attn_mask must have shape "
                                   f"({n_batch * n_heads}, {L}, {S}), got {tuple(a.shape)}")
            a = a.reshape(n_batch, n_heads, L, S)
        elif a.ndim == 2:
            if a.shape != (L, S):
                raise RuntimeError(f"MultiheadAttention: a 2-D attn_mask must have shape ({L}, {S}), "
                                   f"got {tuple(a.shape)}")
        else:
            raise RuntimeError(f"MultiheadAttention: attn_mask must be 2-D or 3-D, got {a.ndim}-D")
        if a.dtype == bool:
            allowed = ~a
        else:
            additive = a.astype(dtype)
    if key_padding_mask is not None:
        k = _mask_array(key_padding_mask, "key_padding_mask")
        if k.shape != (n_batch, S):
            raise RuntimeError(f"MultiheadAttention: key_padding_mask must have shape ({n_batch}, {S}), "
                               f"got {tuple(k.shape)}")
        k = k.reshape(n_batch, 1, 1, S)
        if k.dtype == bool:
            allowed = ~k if allowed is None else (allowed & ~k)
        else:
            additive = k.astype(dtype) if additive is None else additive + k.astype(dtype)
    if additive is None:
        return allowed
    if allowed is not None:
        additive = B.namespace(allowed, additive).where(allowed, additive, -xp.inf)
    return additive
