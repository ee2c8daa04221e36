"""Transformer-XL: relative-position attention with segment-level recurrence (seed 003 §7.6;
Dai et al. 2019).

Scores.  With absolute positions U added to the content E, a query/key score expands into
four terms (seed 003 eq. 7.6.1): content-content, content-position, position-content and
position-position.  Transformer-XL keeps the first, and rewrites the other three so that
position enters only through the *distance* between query and key (eq. 7.6.2).  With query
position i, key position j and distance d = i - j >= 0 (Dai et al.'s indexing), per head:

    A[i, j] = q_i . k_j          (a') content
            + u . k_j            (b') global content bias, u learned
            + q_i . r_{i-j}      (c') content-dependent position bias
            + v . r_{i-j}        (d') global position bias, v learned
    with r_d = W_R R_d, R_d the sinusoidal embedding of the distance d (seed 003 §7.2).

The notes write the same four terms with the roles of i and j swapped (their key is E_i
and their distance j - i); the mathematics is the same.  (a') + (b') = (q_i + u) . k_j and
(c') + (d') = (q_i + v) . r_{i-j}, which is how they are computed: two matrix products.

Relative shift.  (q_i + v) . r_m is computed for every query i and every row m of the
distance table (distances K-1, ..., 1, 0 in that order, K = memory + segment length).  The
score needs row m = K-1-(i+M-j) for query i and key j.  Padding one zero column on the
left, reading the (T, K+1) block as (K+1, T), dropping the first row and reading it back
as (T, K) moves every row i left by T-1-i places, which is exactly that re-indexing for all
j <= i + M (the entries beyond are garbage and are removed by the causal mask).  It costs
one copy instead of a gather.

Recurrence.  Each layer attends over [memory; current segment], where memory holds the
hidden states that entered the same layer on the previous segment.  The memory is
*detached*: no gradient flows into the previous segment (a truncated-BPTT-like cut), yet
information does, so the effective context grows with depth by about one segment per layer.
"""
from __future__ import annotations

import math

from varlens import ops
from varlens.core.dtypes import get_default_dtype
from varlens.core.array import xp
from varlens.nn import functional as F
from varlens.nn import init
from varlens.nn.container import ModuleList
from varlens.nn.dropout import Dropout
from varlens.nn.sparse import Embedding
from varlens.nn.linear import Linear
from varlens.nn.module import Module
from varlens.nn.normalization import LayerNorm
from varlens.nn.parameter import Parameter
from varlens.core.tensor import Tensor


def relative_sinusoid(klen, d_model, dtype=None):
    """(klen, d_model) sinusoidal embeddings of the distances klen-1, ..., 1, 0 (in that
    order), sines in the first half of the features and cosines in the second (Dai et al.'s
    layout; seed 003 §7.2's frequencies 1/10000^(2i/d))."""
    if d_model % 2:
        raise ValueError(f"relative_sinusoid: d_model must be even, got {d_model}")
    pos = xp.arange(klen - 1, -1, -1, dtype=xp.float64)[:, None]
    inv = 1.0 / (10000.0 ** (xp.arange(0, d_model, 2, dtype=xp.float64) / d_model))
    ang = pos * inv
    return Tensor._make(xp.concatenate([xp.sin(ang), xp.cos(ang)], -1).astype(dtype or get_default_dtype()))


def rel_shift(x):
    """The relative-shift trick on the last two dims of x (..., T, K): out[..., i, j] =
    x[..., i, j + T - 1 - i] wherever j + T - 1 - i < K (i.e. j <= i + K - T)."""
    *lead, T, K = x.shape
    lead = tuple(lead)
    zero = Tensor._make(xp.zeros(lead + (T, 1), dtype=x.dtype))
    padded = ops.cat([zero, x], -1)                    # (..., T, K+1)
    padded = ops.reshape(padded, lead + (K + 1, T))    # read the block the other way
    return ops.reshape(padded[..., 1:, :], lead + (T, K))


class RelativeMultiheadAttention(Module):
    """Transformer-XL's relative multi-head self-attention (causal, with optional memory).

    Inputs are batch-first: ``x`` (B, T, d_model) and ``mem`` (B, M, d_model) or None.
    Parameters: ``qkv_net`` (W_Q, W_K, W_V stacked, no bias), ``r_net`` (W_R), ``o_net``,
    and the global vectors ``r_w_bias`` = u and ``r_r_bias`` = v, one (d_head,) row per head.
    ``scale`` defaults to 1/sqrt(d_head) (seeds 000/002); set it to study other choices.
    """

    def __init__(self, d_model, n_head, d_head=None, dropout=0.0, scale=None, dtype=None):
        super().__init__()
        if d_head is None:
            if d_model % n_head:
                raise ValueError(f"RelativeMultiheadAttention: d_model ({d_model}) must be divisible by "
                                 f"n_head ({n_head}) when d_head is not given")
            d_head = d_model // n_head
        if d_model % 2:
            raise ValueError(f"RelativeMultiheadAttention: d_model must be even (sinusoidal distances), got {d_model}")
        self.d_model, self.n_head, self.d_head = d_model, n_head, d_head
        self.scale = 1.0 / math.sqrt(d_head) if scale is None else float(scale)
        self.qkv_net = Linear(d_model, 3 * n_head * d_head, bias=False, dtype=dtype)
        self.r_net = Linear(d_model, n_head * d_head, bias=False, dtype=dtype)
        self.o_net = Linear(n_head * d_head, d_model, bias=False, dtype=dtype)
        dt = dtype or get_default_dtype()
        self.r_w_bias = Parameter(Tensor._make(xp.zeros((n_head, d_head), dtype=dt)))
        self.r_r_bias = Parameter(Tensor._make(xp.zeros((n_head, d_head), dtype=dt)))
        init.normal_(self.r_w_bias, std=0.02)
        init.normal_(self.r_r_bias, std=0.02)
        self.drop = Dropout(dropout)

    def _heads(self, t, L):
        B = t.shape[0]
        return ops.permute(ops.reshape(t, (B, L, self.n_head, self.d_head)), (0, 2, 1, 3))  # (B, H, L, Dh)

    def scores(self, x, mem=None):
        """Pre-softmax scores (B, H, T, M+T), already scaled, before masking, and the values."""
        if x.ndim != 3 or x.shape[-1] != self.d_model:
            raise ValueError(f"RelativeMultiheadAttention: x must be (batch, length, {self.d_model}), "
                             f"got {tuple(x.shape)}")
        B, T, _ = x.shape
        if mem is not None:
            if mem.ndim != 3 or mem.shape[0] != B or mem.shape[-1] != self.d_model:
                raise ValueError(f"RelativeMultiheadAttention: mem must be ({B}, M, {self.d_model}), "
                                 f"got {tuple(mem.shape)}")
            cat = ops.cat([mem.detach(), x], 1)  # no gradient into the previous segment
        else:
            cat = x
        K = cat.shape[1]
        HD = self.n_head * self.d_head
        w = self.qkv_net(cat)
        q = self._heads(w[:, K - T:, :HD], T)
        k = self._heads(w[:, :, HD:2 * HD], K)
        v = self._heads(w[:, :, 2 * HD:], K)
        R = relative_sinusoid(K, self.d_model, dtype=x.dtype)
        r = ops.permute(ops.reshape(self.r_net(R), (K, self.n_head, self.d_head)), (1, 0, 2))  # (H, K, Dh)
        u = ops.unsqueeze(self.r_w_bias, 1)  # (H, 1, Dh)
        vb = ops.unsqueeze(self.r_r_bias, 1)
        ac = ops.matmul(q + u, ops.transpose(k, -2, -1))   # (a') + (b')
        bd = ops.matmul(q + vb, ops.transpose(r, -2, -1))  # (c') + (d') by table row
        bd = rel_shift(bd)                                  # ... by key position
        return (ac + bd) * self.scale, v

    def forward(self, x, mem=None, need_weights=False):
        B, T, _ = x.shape
        s, v = self.scores(x, mem)
        K = s.shape[-1]
        M = K - T
        blocked = Tensor._make(xp.triu(xp.ones((T, K), dtype=bool), k=M + 1))  # key j > i + M
        p = ops.softmax(ops.masked_fill(s, blocked, -float("inf")), -1)
        y = ops.matmul(self.drop(p), v)
        y = ops.reshape(ops.permute(y, (0, 2, 1, 3)), (B, T, self.n_head * self.d_head))
        out = self.o_net(y)
        return (out, p.detach()) if need_weights else out


class TransformerXLLayer(Module):
    """Relative attention + feed-forward, post-LN as Dai et al. (``norm_first=True`` for pre-LN)."""

    def __init__(self, d_model, n_head, dim_feedforward=None, dropout=0.0, norm_first=False, dtype=None):
        super().__init__()
        dff = dim_feedforward or 4 * d_model
        self.attn = RelativeMultiheadAttention(d_model, n_head, dropout=dropout, dtype=dtype)
        self.linear1 = Linear(d_model, dff, dtype=dtype)
        self.linear2 = Linear(dff, d_model, dtype=dtype)
        self.norm1 = LayerNorm(d_model, dtype=dtype)
        self.norm2 = LayerNorm(d_model, dtype=dtype)
        self.drop = Dropout(dropout)
        self.norm_first = norm_first

    def _ff(self, x):
        return self.drop(self.linear2(self.drop(F.relu(self.linear1(x)))))

    def forward(self, x, mem=None):
        if self.norm_first:
            m = None if mem is None else self.norm1(mem)
            x = x + self.drop(self.attn(self.norm1(x), m))
            return x + self._ff(self.norm2(x))
        x = self.norm1(x + self.drop(self.attn(x, mem)))
        return self.norm2(x + self._ff(x))


class TransformerXL(Module):
    """A Transformer-XL language model: Embedding -> n_layer TransformerXLLayer -> Linear head.

    ``forward(idx (B, T), mems=None) -> (logits (B, T, V), new_mems)``; ``mems`` is a list of
    n_layer tensors (B, M, d_model), the inputs each layer saw on the previous segments, kept
    to the last ``mem_len`` positions and detached.
    """

    def __init__(self, vocab_size, d_model=64, n_head=4, n_layer=2, mem_len=32, dim_feedforward=None,
                 dropout=0.0, norm_first=False):
        super().__init__()
        self.mem_len = mem_len
        self.embed = Embedding(vocab_size, d_model)
        self.layers = ModuleList([TransformerXLLayer(d_model, n_head, dim_feedforward, dropout, norm_first)
                                  for _ in range(n_layer)])
        self.head = Linear(d_model, vocab_size)
        self.emb_scale = math.sqrt(d_model)
        init.normal_(self.embed.weight, std=1.0 / math.sqrt(d_model))

    def forward(self, idx, mems=None):
        x = self.embed(idx) * self.emb_scale
        new = []
        for i, layer in enumerate(self.layers):
            m = None if mems is None else mems[i]
            cat = x if m is None else ops.cat([m, x.detach()], 1)
            new.append(cat[:, -self.mem_len:].detach() if self.mem_len > 0 else None)
            x = layer(x, m)
        return self.head(x), (new if self.mem_len > 0 else None)
