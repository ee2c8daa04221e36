"""Scaled dot-product attention as one fused op.

Forward:  S = scale * Q K^T (+ additive mask, or -inf where a boolean mask is False),
          P = softmax(S) over keys, P' = dropout(P), O = P' V.
The default scale 1/sqrt(d) keeps the logits at unit variance when q and k have
unit-variance entries: a sum of d products has variance d (seed 000 "Costume 1",
seed 002, seed 003 §7.1.3).  ``scale`` can be set to 1.0 to watch what happens
without it.

Backward (cached P and the dropout mask, like llm.c's attention; the mask is kept as booleans,
one byte per entry, and P' = P * mask/(1-p) is recomputed from P rather than kept beside it):
  dV = P'^T dO;  dP' = dO V^T;  dP = dP' * mask/(1-p);
  dS = P * (dP - rowsum(dP * P))   (the softmax Jacobian diag(P) - P P^T, seed 001 §3.1);
  dQ = scale * dS K;  dK = scale * dS^T Q.
"""
from __future__ import annotations

import math

from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core.array import xp as _np   # the host library: the compiled kernel's side
from varlens.ops.kernels import rows as _KR
from varlens.ops.index import masked_fill
from varlens.ops.linalg import matmul
from varlens.ops.reduce import softmax
from varlens.ops.shape import transpose
from varlens.core import grad_mode
from varlens.core.tensor import Tensor
from varlens.random import generator_for


def _swap(a):
    return a.swapaxes(-1, -2)   # (the array's own method: host or device)


class SDPA(Function):
    """Fused attention: forward as above; backward returns dQ, dK, dV (and nothing for the mask)."""

    differentiable_backward = False

    def forward(self, q, k, v, mask, dropout_mask, scale, p_drop):
        xp = self.xp
        L, S = q.shape[-2], k.shape[-2]
        if xp is _np and dropout_mask is None and scale > 0 and (mask is None or _is_causal(mask, L, S)) \
                and q.dtype == xp.float32 and k.dtype == q.dtype and v.dtype == q.dtype \
                and q.ndim >= 2 and q.size and _KR.kernel_ok(s := B.matmul(q, _swap(k))):
            # float32, no mask or the causal one: scale, mask and softmax in one compiled pass
            p = _KR.softmax(s.reshape(-1, S), True, scale, 0 if mask is None else L).reshape(s.shape)
            self.save_for_backward(q, k, v, p, None)
            self.scale, self.p_drop, self.fused = scale, p_drop, True
            return B.matmul(p, v)
        self.fused = False
        s = B.matmul(q, _swap(k)) * scale
        if mask is not None:
            if mask.dtype == bool:
                s = xp.where(mask, s, -xp.inf)
            else:
                s = s + mask
        m = xp.max(s, axis=-1, keepdims=True)
        m = xp.where(xp.isfinite(m), m, 0)
        e = xp.exp(s - m)
        den = e.sum(axis=-1, keepdims=True)
        p = e / xp.where(den == 0, 1, den)  # a row with every key masked attends to nothing
        pd = p
        if dropout_mask is not None:  # a boolean keep-mask: P' = P * mask / (1 - p)
            pd = _dropped(p, dropout_mask, p_drop)
        # saved: the boolean mask, not P' (backward recomputes P' from P in one pass)
        self.save_for_backward(q, k, v, p, dropout_mask)
        self.scale, self.p_drop = scale, p_drop
        return B.matmul(pd, v)

    def backward(self, g):
        """dV = P'^T dO, dS = P * (dP - rowsum(dP * P)) with dP = dO V^T masked and scaled like
        P' (the softmax Jacobian), dQ = scale dS K, dK = scale dS^T Q (module docstring)."""
        q, k, v, p, dmask = self.saved
        sc = self.scale
        n = self.next
        if dmask is not None:
            if n[2] is not None:
                dv = B.matmul(_swap(_dropped(p, dmask, self.p_drop)), g)
            else:
                dv = None
            dp = _dropped(B.matmul(g, _swap(v)), dmask, self.p_drop)
        else:
            dv = B.matmul(_swap(p), g) if n[2] is not None else None
            dp = B.matmul(g, _swap(v))
        if self.fused and dp.flags.c_contiguous and _KR.kernel_ok(dp):  # scale * dS in one pass
            ds = _KR.softmax_grad(dp.reshape(-1, p.shape[-1]), p.reshape(-1, p.shape[-1]), True,
                                  sc).reshape(p.shape)
            dq = B.matmul(ds, k) if n[0] is not None else None
            dk = B.matmul(_swap(ds), q) if n[1] is not None else None
            return dq, dk, dv, None, None, None, None
        ds = p * (dp - (dp * p).sum(axis=-1, keepdims=True))
        dq = B.matmul(ds, k) * sc if n[0] is not None else None
        dk = B.matmul(_swap(ds), q) * sc if n[1] is not None else None
        return dq, dk, dv, None, None, None, None

    @staticmethod
    def composite(q, k, v, mask, dropout_mask, scale, p_drop):
        """The same attention from small ops (used for second derivatives)."""
        s = matmul(q, transpose(k, -2, -1)) * scale
        if mask is not None:
            m = mask._data if hasattr(mask, "_data") else mask
            s = masked_fill(s, Tensor._make(~m), -float("inf")) if m.dtype == bool else s + mask
        p = softmax(s, -1)
        if dropout_mask is not None:
            keep = dropout_mask._data if hasattr(dropout_mask, "_data") else dropout_mask
            p = p * Tensor._make(_keep_scaled(keep, p._data.dtype, p_drop))
        return matmul(p, v)


def _dropped(a, keep, p_drop):
    """a * keep / (1 - p_drop) in a's dtype, for a boolean keep-mask (a new array)."""
    out = a * keep
    out *= out.dtype.type(1.0 / (1.0 - p_drop))
    return out


def _keep_scaled(keep, dtype, p_drop):
    """The boolean keep-mask as numbers: keep / (1 - p_drop) in ``dtype`` (for the composites)."""
    return keep * dtype.type(1.0 / (1.0 - p_drop))


def _is_causal(mask, L, S):
    """True when the host boolean ``mask`` is the causal mask itself, or an (..., L, S) mask
    with the same entries (a model's own ``tril(ones(L, S))``, batch dims of size 1): then the
    compiled causal softmax applies."""
    c = causal_mask(L, S)
    if mask is c:
        return True
    if mask.__class__ is not _np.ndarray or mask.dtype != bool or mask.shape[-2:] != (L, S) or mask.size != L * S:
        return False
    return bool(_np.array_equal(mask.reshape(L, S), c))


def causal_mask(L, S, ns=None):
    """Boolean (L, S) mask, True where query i may attend to key j <= i (top-left aligned, as PyTorch);
    on the host (read-only, shared) or, given a device library ``ns``, on that device (cached too)."""
    if ns is None or ns is _np:
        return B._const(("causal_mask", L, S), lambda: xp.tril(xp.ones((L, S), dtype=bool)))
    key = (id(ns), L, S)
    m = _DEVICE_MASKS.get(key)
    if m is None:
        if len(_DEVICE_MASKS) >= 64:
            _DEVICE_MASKS.clear()
        m = _DEVICE_MASKS[key] = ns.tril(ns.ones((L, S), dtype=bool))
    return m


_DEVICE_MASKS = {}   # (library, L, S) -> the causal mask on that device (never written to)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False, generator=None, return_weights=False):
    """torch.nn.functional.scaled_dot_product_attention: boolean masks mark allowed positions
    (True = attend), float masks are added to the logits.  ``return_weights=True`` (varlens
    only) also returns the attention probabilities, for the lens and for plots."""
    try:
        qd = query._data
        qs, ks, vs = qd.shape, key._data.shape, value._data.shape   # (the arrays' shapes: no Size objects per call)
    except AttributeError:      # a list or array where torch requires a Tensor: its TypeError
        for i, (name, v) in enumerate((("query", query), ("key", key), ("value", value))):
            if not isinstance(v, Tensor):
                raise TypeError(f"scaled_dot_product_attention(): argument '{name}' (position {i + 1}) "
                                f"must be Tensor, not {type(v).__name__}") from None
        raise
    if len(qs) < 2 or len(ks) < 2 or len(vs) < 2:
        raise RuntimeError("scaled_dot_product_attention: query, key and value need at least 2 dims "
                           f"(..., L, E); got {tuple(qs)}, {tuple(ks)}, {tuple(vs)}")
    if qs[-1] != ks[-1]:
        raise RuntimeError(f"scaled_dot_product_attention: query's last dim {qs[-1]} must equal "
                           f"key's {ks[-1]}")
    if ks[-2] != vs[-2]:
        raise RuntimeError(f"scaled_dot_product_attention: key has {ks[-2]} positions but value "
                           f"has {vs[-2]}")
    L, S = qs[-2], ks[-2]
    sc = 1.0 / math.sqrt(qs[-1]) if scale is None else float(scale)
    mask = None
    ns = _np if qd.__class__ is _np.ndarray else B.namespace(qd)   # the query's device
    if attn_mask is not None:
        mask = attn_mask._data if isinstance(attn_mask, Tensor) else \
            attn_mask if B.is_array(attn_mask) else xp.asarray(attn_mask)
        if mask.dtype != bool:
            mask = mask.astype(query.dtype)
    if is_causal:
        if attn_mask is not None:
            raise RuntimeError("scaled_dot_product_attention: pass either attn_mask or is_causal=True, not both")
        mask = causal_mask(L, S, ns)
    dmask = None
    if dropout_p > 0.0:
        g = generator_for(ns, generator)   # drawn on the query's device
        shape = tuple(query.shape[:-1]) + (S,)
        dmask = g.random(shape) >= dropout_p   # a boolean keep-mask (saved as is: 1 byte an entry)
    if grad_mode._enabled[0] and ((attn_mask is not None and isinstance(attn_mask, Tensor) and attn_mask.requires_grad
                                   and not is_causal)
                                  or (return_weights and (query.requires_grad or key.requires_grad
                                                          or value.requires_grad))):
        # a learned float mask needs its gradient, and returned weights that will be
        # differentiated need a graph: compose the same maths from differentiable ops
        return _sdpa_composed(query, key, value, attn_mask if mask is None or mask.dtype != bool else mask,
                              dmask, sc, float(dropout_p), return_weights)
    out = SDPA.apply(query, key, value, mask, dmask, sc, float(dropout_p))
    if return_weights:
        node = out._node
        p = node.saved[3] if node is not None else None
        if p is None:  # not recorded (no grad): recompute the probabilities
            s = matmul(query, transpose(key, -2, -1)) * sc
            if mask is not None:
                s = masked_fill(s, Tensor._make(~mask), -float("inf")) if mask.dtype == bool else s + Tensor._make(mask)
            return out, softmax(s, -1).detach()
        return out, Tensor._make(p)
    return out


def _sdpa_composed(query, key, value, mask, dmask, sc, p, return_weights):
    """softmax(q k^T * scale + mask) v from differentiable ops (gradients reach a float mask
    Tensor and the returned weights).  ``mask``: a bool array (True = attend), a float Tensor
    or array added to the logits, or None.  The returned weights are taken after dropout, as
    PyTorch's MultiheadAttention returns them."""
    s = matmul(query, transpose(key, -2, -1)) * sc
    if mask is not None:
        if not isinstance(mask, Tensor) and mask.dtype == bool:
            s = masked_fill(s, Tensor._make(~mask), -float("inf"))
        else:
            s = s + (mask if isinstance(mask, Tensor) else Tensor._make(mask))
    w = softmax(s, -1)
    if dmask is not None:
        w = w * Tensor._make(_keep_scaled(dmask, w._data.dtype, p))
    out = matmul(w, value)
    return (out, w) if return_weights else out
