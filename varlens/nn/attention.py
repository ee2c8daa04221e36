"""MultiheadAttention with PyTorch's parameter layout (seed 003 §7.1).

Each head h projects queries, keys and values to d_head = E / H features, attends
with the fused scaled_dot_product_attention (scale 1/sqrt(d_head), seeds 000/002),
and the heads' outputs are concatenated and projected by ``out_proj``.
Parameters: ``in_proj_weight`` (3E, E) and ``in_proj_bias`` (3E,) when query, key and
value share the embedding size, else ``q_proj_weight``, ``k_proj_weight``,
``v_proj_weight``; ``out_proj`` is a Linear(E, E).  As in PyTorch, inputs are
(L, N, E) unless ``batch_first=True``, and boolean masks mark positions to IGNORE
(True = masked), the opposite of scaled_dot_product_attention's convention.
"""
from __future__ import annotations

from varlens import ops
from varlens.core.array import xp
from varlens.nn import init
from varlens.nn.functional._errors import ArgAssertionError, ShapeAssertionError
from varlens.nn.linear import Linear
from varlens.nn.module import Module
from varlens.nn.parameter import Parameter
from varlens.ops.nn.attention import causal_mask, scaled_dot_product_attention
from varlens.core import array as B
from varlens.core.tensor import Tensor
from varlens.core.dtypes import get_default_dtype
from varlens.nn import functional as F
from varlens.nn.functional.attention import merge_masks


def _empty(*shape, dtype=None):
    return Parameter(Tensor._make(xp.empty(shape, dtype=dtype or get_default_dtype())))


class NonDynamicallyQuantizableLinear(Linear):
    """A Linear under PyTorch's name for MultiheadAttention's output projection (same maths;
    the name only keeps ``repr(model)`` and ``isinstance`` checks identical to PyTorch's)."""


class MultiheadAttention(Module):
    """Multi-head attention (torch.nn.MultiheadAttention's arguments, layout and defaults)."""

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, add_bias_kv=False,
                 add_zero_attn=False, kdim=None, vdim=None, batch_first=False, device=None, dtype=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got embed_dim={embed_dim} and "
                             f"num_heads={num_heads} instead (MultiheadAttention)")
        if embed_dim % num_heads:
            raise ArgAssertionError(f"embed_dim must be divisible by num_heads (MultiheadAttention: "
                                    f"embed_dim={embed_dim}, num_heads={num_heads})")
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.dropout = dropout
        self.batch_first = batch_first
        self.scale = None  # None: 1/sqrt(head_dim); set a number to study other scalings
        if self._qkv_same_embed_dim:
            self.in_proj_weight = _empty(3 * embed_dim, embed_dim, dtype=dtype)
            self.register_parameter("q_proj_weight", None)
            self.register_parameter("k_proj_weight", None)
            self.register_parameter("v_proj_weight", None)
        else:
            self.register_parameter("in_proj_weight", None)
            self.q_proj_weight = _empty(embed_dim, embed_dim, dtype=dtype)
            self.k_proj_weight = _empty(embed_dim, self.kdim, dtype=dtype)
            self.v_proj_weight = _empty(embed_dim, self.vdim, dtype=dtype)
        if bias:
            self.in_proj_bias = _empty(3 * embed_dim, dtype=dtype)
        else:
            self.register_parameter("in_proj_bias", None)
        if add_bias_kv:   # a learned extra key/value position, appended to every sequence
            self.bias_k = _empty(1, 1, embed_dim, dtype=dtype)
            self.bias_v = _empty(1, 1, embed_dim, dtype=dtype)
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn   # append an all-zero key/value position
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias, dtype=dtype)
        self._reset_parameters()

    def _reset_parameters(self):
        # PyTorch: xavier_uniform on the packed projection, zero biases
        if self._qkv_same_embed_dim:
            init.xavier_uniform_(self.in_proj_weight)
        else:
            init.xavier_uniform_(self.q_proj_weight)
            init.xavier_uniform_(self.k_proj_weight)
            init.xavier_uniform_(self.v_proj_weight)
        if self.in_proj_bias is not None:
            init.constant_(self.in_proj_bias, 0.0)
            init.constant_(self.out_proj.bias, 0.0)
        if self.bias_k is not None:
            init.xavier_normal_(self.bias_k)
            init.xavier_normal_(self.bias_v)

    def _project(self, query, key, value):
        E = self.embed_dim
        b = self.in_proj_bias
        bq = bk = bv = None
        if b is not None:
            bq, bk, bv = b[:E], b[E:2 * E], b[2 * E:]
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            if query is key and key is value:  # self-attention: one GEMM for all three
                qkv = ops.matmul(query, w.T)
                if b is not None:
                    qkv = qkv + b
                return ops.split(qkv, E, -1)
            wq, wk, wv = w[:E], w[E:2 * E], w[2 * E:]
        else:
            wq, wk, wv = self.q_proj_weight, self.k_proj_weight, self.v_proj_weight

        def lin(x, wt, bb):
            y = ops.matmul(x, wt.T)
            return y + bb if bb is not None else y
        return lin(query, wq, bq), lin(key, wk, bk), lin(value, wv, bv)

    def forward(self, query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
                average_attn_weights=True, is_causal=False):
        batched = query.ndim == 3
        if not batched:
            query, key, value = (ops.unsqueeze(t, 1) for t in (query, key, value))
            if key_padding_mask is not None:
                key_padding_mask = ops.unsqueeze(key_padding_mask, 0)
        elif self.batch_first:
            query, key, value = (ops.transpose(t, 0, 1) for t in (query, key, value))
        if query.shape[-1] != self.embed_dim:
            raise ShapeAssertionError(f"was expecting embedding dimension of {self.embed_dim}, but got "
                                      f"{query.shape[-1]} (MultiheadAttention: query has {query.shape[-1]} features, "
                                      f"expected embed_dim={self.embed_dim})")
        ks, vs = tuple(key.shape), tuple(value.shape)
        if (ks != vs) if self._qkv_same_embed_dim else (ks[:2] != vs[:2]):
            raise ShapeAssertionError(f"key shape {ks} does not match value shape {vs} (MultiheadAttention: key "
                                      f"and value need the same sequence length and batch size"
                                      f"{'' if not self._qkv_same_embed_dim else ' and embed_dim'})")
        if self.bias_k is not None or self.add_zero_attn:
            return self._forward_general(query, key, value, key_padding_mask, need_weights, attn_mask,
                                         average_attn_weights, is_causal, batched)
        L, N, _ = query.shape
        S = key.shape[0]
        H, Dh = self.num_heads, self.head_dim
        q, k, v = self._project(query, key, value)

        def heads(t, T):  # (T, N, E) -> (N, H, T, Dh)
            return ops.permute(ops.reshape(t, (T, N, H, Dh)), (1, 2, 0, 3))
        q, k, v = heads(q, L), heads(k, S), heads(v, S)
        if is_causal and attn_mask is None:
            attn_mask = ~causal_mask(L, S, B.namespace(query._data))   # on the query's device
        mask = merge_masks(attn_mask, key_padding_mask, N, H, L, S, query.dtype)
        p = self.dropout if self.training else 0.0
        res = scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else Tensor._make(mask),
                                           dropout_p=p, scale=self.scale, return_weights=need_weights)
        out, w = res if need_weights else (res, None)
        out = ops.reshape(ops.permute(out, (2, 0, 1, 3)), (L, N, self.embed_dim))
        out = self.out_proj(out)
        if batched and self.batch_first:
            out = ops.transpose(out, 0, 1)
        if not batched:
            out = ops.squeeze(out, 1)
        if w is not None:
            if average_attn_weights:
                w = ops.mean(w, 1)
            if not batched:
                w = ops.squeeze(w, 0)
        return out, w

    def _forward_general(self, query, key, value, key_padding_mask, need_weights, attn_mask,
                         average_attn_weights, is_causal, batched):
        """The add_bias_kv / add_zero_attn path: F.multi_head_attention_forward on (L, N, E)."""
        sep = not self._qkv_same_embed_dim
        out, w = F.multi_head_attention_forward(
            query, key, value, self.embed_dim, self.num_heads, self.in_proj_weight, self.in_proj_bias,
            self.bias_k, self.bias_v, self.add_zero_attn, self.dropout, self.out_proj.weight,
            self.out_proj.bias, training=self.training, key_padding_mask=key_padding_mask,
            need_weights=need_weights, attn_mask=attn_mask, use_separate_proj_weight=sep,
            q_proj_weight=self.q_proj_weight, k_proj_weight=self.k_proj_weight,
            v_proj_weight=self.v_proj_weight, average_attn_weights=average_attn_weights, is_causal=is_causal)
        if batched and self.batch_first:
            out = ops.transpose(out, 0, 1)
        if not batched:
            out = ops.squeeze(out, 1)
            if w is not None:
                w = ops.squeeze(w, 0)
        return out, w


