"""The encoder-decoder Transformer of seed 003 §7.3 on character transduction tasks, with the
same data layout, loss and exact-match evaluation as the RNN encoder-decoder
(varlens.models.seq2seq), so the two can be compared on varlens.text.tasks.date_pairs.

Source and target characters are embedded, scaled by sqrt(d_model) and given sinusoidal
positions (seed 003 §7.2); ``nn.Transformer`` (pre-LN by default here, ``norm_first``)
encodes the source with padding masked and decodes the shifted target under a causal mask
with cross-attention to the encoder output.  Decoding is greedy and batched: the decoder is
re-run on the growing prefix (targets are a dozen characters, so a cache is not worth it).
Training and evaluation: ``varlens.text.translation.train_transformer_seq2seq``.
"""
from __future__ import annotations

import math
import numpy as np

import varlens as vl
from varlens import nn
from varlens.nn.positional import sinusoidal_table


class TransformerSeq2Seq(nn.Module):
    def __init__(self, src_vocab_size, tgt_vocab_size, d_model=64, nhead=4, num_encoder_layers=2,
                 num_decoder_layers=2, dim_feedforward=128, dropout=0.0, max_len=64, norm_first=True,
                 pad_idx=0, sos_idx=1, eos_idx=2):
        super().__init__()
        self.src_embed = nn.Embedding(src_vocab_size, d_model)
        self.tgt_embed = nn.Embedding(tgt_vocab_size, d_model)
        nn.init.normal_(self.src_embed.weight, std=d_model ** -0.5)
        nn.init.normal_(self.tgt_embed.weight, std=d_model ** -0.5)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)
        self.transformer = nn.Transformer(d_model, nhead, num_encoder_layers, num_decoder_layers,
                                          dim_feedforward, dropout, batch_first=True, norm_first=norm_first)
        self.out = nn.Linear(d_model, tgt_vocab_size)
        self.scale = math.sqrt(d_model)
        self.max_len = max_len
        self.pad_idx, self.sos_idx, self.eos_idx = pad_idx, sos_idx, eos_idx

    def _embed(self, emb, ids):
        T = ids.shape[1]
        if T > self.max_len:
            raise ValueError(f"TransformerSeq2Seq: length {T} exceeds max_len {self.max_len}")
        return emb(vl.tensor(ids)) * self.scale + self.pe[:T]

    def encode(self, src):
        pad = src == self.pad_idx
        mem = self.transformer.encoder(self._embed(self.src_embed, src), src_key_padding_mask=vl.tensor(pad))
        return mem, pad

    def decode(self, memory, src_pad, tgt_in):
        T = tgt_in.shape[1]
        causal = vl.tensor(np.triu(np.ones((T, T), dtype=bool), 1))
        h = self.transformer.decoder(self._embed(self.tgt_embed, tgt_in), memory, tgt_mask=causal,
                                     tgt_key_padding_mask=vl.tensor(tgt_in == self.pad_idx),
                                     memory_key_padding_mask=vl.tensor(src_pad))
        return self.out(h)

    def forward(self, src, src_lengths, tgt_in):
        """The RNN Seq2Seq's signature: int arrays src (B, S), lengths (unused: padding is
        read from the ids), tgt_in (B, T) -> logits (B, T, V)."""
        mem, pad = self.encode(np.asarray(src))
        return self.decode(mem, pad, np.asarray(tgt_in))

    @vl.no_grad()
    def greedy(self, src, max_len):
        was = self.training
        self.eval()
        mem, pad = self.encode(src)
        B = src.shape[0]
        out = np.full((B, 1), self.sos_idx, dtype=np.int64)
        done = np.zeros(B, dtype=bool)
        for _ in range(max_len):
            nxt = self.decode(mem, pad, out)[:, -1].numpy().argmax(-1)
            nxt = np.where(done, self.pad_idx, nxt)
            out = np.concatenate([out, nxt[:, None]], 1)
            done |= nxt == self.eos_idx
            if done.all():
                break
        self.train(was)
        return out[:, 1:]
