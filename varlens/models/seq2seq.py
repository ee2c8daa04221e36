"""RNN encoder-decoder (seed 003 §6.3-§6.4), without and with Bahdanau attention.

Encoder: embedding -> bidirectional GRU over the (packed) source; its final forward and
backward states, through ``tanh(Linear)``, start the decoder (h^D_0 from h^E_T, seed 003
§6.4).  Decoder, trained with teacher forcing on ``<sos> y_1 .. y_{T'-1}`` to predict
``y_1 .. y_{T'} <eos>``; the loss is the sum over steps of per-token cross-entropies
(seed 003 eq. 6.4.2), averaged over tokens.

* ``attention=False``: a GRU decoder that also receives the fixed representation (the
  concatenated final encoder states) at every step, as in Cho et al. (seed 003 §6.7.1).
* ``attention=True``: Bahdanau et al.'s additive attention (the notes only name it,
  seed 003 §7): at step t, scores ``e_tj = v^T tanh(W s_{t-1} + U h_j)`` over the encoder
  outputs h_j, weights ``a_t = softmax(e_t)`` (padded source positions get weight 0),
  context ``c_t = sum_j a_tj h_j``; the GRU cell reads ``[embed(y_{t-1}); c_t]`` and the
  output layer reads ``[s_t; c_t]``.

Decoding goes through ``varlens.text.decoding`` (greedy, sampling, beam search); training,
translation and evaluation are in ``varlens.text.translation``.
"""
from __future__ import annotations

import numpy as np

import varlens as vl
from varlens import nn
from varlens.core.tensor import Tensor
from varlens.nn import functional as F
from varlens.nn.utils.rnn import pack_padded_sequence


class BahdanauAttention(nn.Module):
    """Additive attention: ``score(s, h_j) = v^T tanh(W s + U h_j)``."""

    def __init__(self, query_size, key_size, attn_size):
        super().__init__()
        self.W = nn.Linear(query_size, attn_size, bias=False)
        self.U = nn.Linear(key_size, attn_size)
        self.v = nn.Linear(attn_size, 1, bias=False)

    def project_keys(self, keys):
        """U h_j for every source position, computed once per source: (B, S, A)."""
        return self.U(keys)

    def forward(self, query, proj_keys, values, mask_bias):
        """query (B, Hq), proj_keys (B, S, A), values (B, S, Hk), mask_bias (B, S) constant
        (0 at real positions, a large negative number at padding) -> (context (B, Hk), weights (B, S))."""
        e = self.v(vl.tanh(proj_keys + vl.unsqueeze(self.W(query), 1)))
        e = vl.squeeze(e, -1) + mask_bias
        a = F.softmax(e, dim=-1)
        ctx = vl.squeeze(vl.matmul(vl.unsqueeze(a, 1), values), 1)
        return ctx, a


class Seq2Seq(nn.Module):
    """GRU encoder-decoder for token sequences; PAD = 0, SOS = 1, EOS = 2 by default."""

    def __init__(self, src_vocab_size, tgt_vocab_size, embed_dim=32, hidden_size=128, attention=True,
                 pad_idx=0, sos_idx=1, eos_idx=2):
        super().__init__()
        self.attention = bool(attention)
        self.hidden_size = hidden_size
        self.pad_idx, self.sos_idx, self.eos_idx = pad_idx, sos_idx, eos_idx
        H = hidden_size
        self.src_embed = nn.Embedding(src_vocab_size, embed_dim, padding_idx=pad_idx)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, embed_dim, padding_idx=pad_idx)
        self.encoder = nn.GRU(embed_dim, H, bidirectional=True)
        self.bridge = nn.Linear(2 * H, H)
        if self.attention:
            self.attn = BahdanauAttention(H, 2 * H, H)
            self.decoder = nn.GRUCell(embed_dim + 2 * H, H)
        else:
            self.decoder = nn.GRU(embed_dim + 2 * H, H)
        self.out = nn.Linear(H + 2 * H, tgt_vocab_size)

    # ---------------------------------------------------------------- encoder
    def encode(self, src, src_lengths):
        """src int (B, S), lengths (B,) -> decoder start state dict (batch on axis 0 everywhere)."""
        src = src._data if isinstance(src, Tensor) else np.asarray(src)
        lengths = np.asarray(src_lengths._data if isinstance(src_lengths, Tensor) else src_lengths)
        x = self.src_embed(Tensor._make(np.ascontiguousarray(src.T)))  # (S, B, E)
        packed, h_n = self.encoder(pack_padded_sequence(x, lengths, enforce_sorted=False))
        enc = vl.transpose(packed.padded, 0, 1)  # (B, S', 2H)
        summary = vl.cat([h_n[0], h_n[1]], dim=-1)  # final forward and backward states (B, 2H)
        S = enc.shape[1]
        mask = (np.arange(S)[None, :] < lengths[:, None])
        state = {"h": vl.tanh(self.bridge(summary)), "summary": summary}
        if self.attention:
            state["enc"] = enc
            state["keys"] = self.attn.project_keys(enc)
            state["mask_bias"] = Tensor._make(np.where(mask, 0.0, -1e9).astype(enc.dtype))
        return state

    # ---------------------------------------------------------------- decoder
    def _attn_step(self, emb_t, state):
        ctx, a = self.attn(state["h"], state["keys"], state["enc"], state["mask_bias"])
        h = self.decoder(vl.cat([emb_t, ctx], dim=-1), state["h"])
        logits = self.out(vl.cat([h, ctx], dim=-1))
        return logits, h, a

    def forward(self, src, src_lengths, tgt_in):
        """Teacher forcing: logits (B, T', V) for the decoder inputs ``tgt_in`` (B, T')."""
        state = self.encode(src, src_lengths)
        tgt_in = tgt_in._data if isinstance(tgt_in, Tensor) else np.asarray(tgt_in)
        emb = self.tgt_embed(Tensor._make(np.ascontiguousarray(tgt_in.T)))  # (T', B, E)
        T = emb.shape[0]
        if not self.attention:
            summ = vl.expand(vl.unsqueeze(state["summary"], 0), (T,) + tuple(state["summary"].shape))
            out, _ = self.decoder(vl.cat([emb, summ], dim=-1), vl.unsqueeze(state["h"], 0))
            logits = self.out(vl.cat([out, summ], dim=-1))  # (T', B, V)
            return vl.transpose(logits, 0, 1)
        steps = []
        for t in range(T):
            logits, h, _ = self._attn_step(emb[t], state)
            state["h"] = h
            steps.append(logits)
        return vl.stack(steps, dim=1)

    def step_fn(self, record_attention=False):
        """``step_fn(tokens, state) -> (logits, state)`` for varlens.text.decoding; with
        ``record_attention`` the weights of every step are appended to ``state['attn']``."""
        def step(tokens, state):
            emb = self.tgt_embed(Tensor._make(np.asarray(tokens, dtype=np.int64)))
            state = dict(state)
            if self.attention:
                logits, h, a = self._attn_step(emb, state)
                if record_attention:
                    state["attn"] = tuple(state.get("attn", ())) + (a.numpy(),)
            else:
                x = vl.cat([emb, state["summary"]], dim=-1)
                out, _ = self.decoder(vl.unsqueeze(x, 0), vl.unsqueeze(state["h"], 0))
                h = out[0]
                logits = self.out(vl.cat([h, state["summary"]], dim=-1))
            state["h"] = h
            return logits, state
        return step


__all__ = ["BahdanauAttention", "Seq2Seq"]
