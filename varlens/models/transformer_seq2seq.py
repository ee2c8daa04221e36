"""The encoder-decoder Transformer of seed 003 §7.3 on character transduction tasks, with the
same data layout, loss and exact-match evaluation as the RNN encoder-decoder
(varlens.models.seq2seq), so the two can be compared on varlens.text.tasks.date_pairs.

Source and target characters are embedded, scaled by sqrt(d_model) and given sinusoidal
positions (seed 003 §7.2); ``nn.Transformer`` (pre-LN by default here, ``norm_first``)
encodes the source with padding masked and decodes the shifted target under a causal mask
with cross-attention to the encoder output.  Decoding is greedy and batched: the decoder is
re-run on the growing prefix (targets are a dozen characters, so a cache is not worth it).
"""
from __future__ import annotations

import math
import time

import numpy as np

import varlens as vl
from varlens import nn
from varlens.nn.positional import sinusoidal_table
from varlens.models.seq2seq import make_batch, sequence_loss


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


def evaluate_transformer(model, vocab, pairs, batch_size=256):
    """Exact match and corpus BLEU of greedy outputs, as varlens.models.seq2seq.evaluate."""
    from varlens.text.bleu import corpus_bleu
    preds = []
    max_len = max(len(t) for _, t in pairs) + 5
    for i in range(0, len(pairs), batch_size):
        src, _ = vocab.batch([s for s, _ in pairs[i:i + batch_size]], eos=False)
        preds += [vocab.decode(r) for r in model.greedy(src, max_len)]
    refs = [t for _, t in pairs]
    return {"exact_match": float(np.mean([p == r for p, r in zip(preds, refs)])),
            "bleu": corpus_bleu([list(r) for r in refs], [list(p) for p in preds]), "predictions": preds}


def train_transformer_seq2seq(train_pairs, val_pairs=None, vocab=None, d_model=64, nhead=4, layers=2,
                              dim_feedforward=128, epochs=3, batch_size=64, lr=1e-3, clip=1.0, seed=0,
                              max_steps=None, warmup=50):
    """Adam (warm-up then constant), teacher forcing, token-averaged cross-entropy; returns a dict
    as ``train_seq2seq`` does (model, vocab, loss, steps, seconds, exact_match, bleu)."""
    from varlens.text.tasks import CharSeqVocab
    vocab = vocab or CharSeqVocab([s + t for s, t in train_pairs + list(val_pairs or [])])
    vl.manual_seed(seed)
    model = TransformerSeq2Seq(len(vocab), len(vocab), d_model, nhead, layers, layers, dim_feedforward,
                               pad_idx=vocab.PAD, sos_idx=vocab.SOS, eos_idx=vocab.EOS)
    opt = vl.optim.Adam(model.parameters(), lr=lr, betas=(0.9, 0.98))
    rng = np.random.default_rng(seed)
    history, step, t0 = [], 0, time.perf_counter()
    for _ in range(epochs):
        order = rng.permutation(len(train_pairs))
        for i in range(0, len(order), batch_size):
            batch = [train_pairs[j] for j in order[i:i + batch_size]]
            src, src_len, tgt_in, tgt_out = make_batch(vocab, batch)
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, (step + 1) / warmup)
            loss = sequence_loss(model(src, src_len, tgt_in), tgt_out, vocab.PAD)
            opt.zero_grad()
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), clip)
            opt.step()
            history.append(float(loss))
            step += 1
            if max_steps is not None and step >= max_steps:
                break
        if max_steps is not None and step >= max_steps:
            break
    res = {"model": model, "vocab": vocab, "loss": history, "steps": step, "seconds": time.perf_counter() - t0}
    if val_pairs:
        res.update(evaluate_transformer(model, vocab, val_pairs))
    return res
