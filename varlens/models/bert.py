"""A small BERT-style encoder (seed 003 §8.1; Devlin et al. 2019): masked-language-model
pre-training, then fine-tuning for sequence classification.

Model: token + learned position embeddings -> LayerNorm -> post-LN Transformer encoder (GELU,
as BERT) -> (a) an MLM head (Linear, GELU, LayerNorm, then logits through the tied token
embedding) and (b) a classifier on the first token ([CLS]) through a tanh "pooler".

Masking (``mask_tokens``): each maskable token is chosen with probability 0.15; a chosen
token becomes [MASK] with probability 0.8, a uniformly random token with 0.1, and stays
unchanged with 0.1 (so per token: 0.12, 0.015, 0.015, as the inventory checks).  Only the
chosen positions carry a label; the rest get ``ignore_index`` -100, which cross_entropy skips.

Fine-tuning task (``shuffled_verse_task``): is a line of the corpus a real verse, or the
same words in a random order?  Word counts match exactly, so a model must know English
word order to answer; MLM pre-training is what teaches it.
"""
from __future__ import annotations

import math

import numpy as np

import varlens as vl
from varlens import nn
from varlens.nn import functional as F

SPECIALS = ("<pad>", "<cls>", "<mask>")
PAD, CLS, MASK = 0, 1, 2


class CharVocabBERT:
    """Characters of the corpus plus the specials <pad> = 0, <cls> = 1, <mask> = 2."""

    n_special = len(SPECIALS)

    def __init__(self, text):
        self.itos = list(SPECIALS) + sorted(set(text))
        self.stoi = {c: i for i, c in enumerate(self.itos)}

    def __len__(self):
        return len(self.itos)

    def encode_batch(self, lines, length):
        """(B, length) int64: <cls> then the characters, truncated / padded with <pad>."""
        out = np.full((len(lines), length), PAD, dtype=np.int64)
        for i, s in enumerate(lines):
            ids = [CLS] + [self.stoi[c] for c in s[:length - 1]]
            out[i, :len(ids)] = ids
        return out


class WordVocabBERT:
    """Lower-cased words seen at least ``min_count`` times, after <pad>, <cls>, <mask>, <unk>."""

    n_special = len(SPECIALS) + 1
    UNK = len(SPECIALS)

    def __init__(self, text, min_count=3):
        from varlens.text.embeddings import WordVocab, tokenize_words
        self.tokenize = tokenize_words
        words = WordVocab(tokenize_words(text), min_count=min_count).itos
        self.itos = list(SPECIALS) + ["<unk>"] + words
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    def __len__(self):
        return len(self.itos)

    def encode_batch(self, lines, length):
        out = np.full((len(lines), length), PAD, dtype=np.int64)
        for i, s in enumerate(lines):
            ids = [CLS] + [self.stoi.get(w, self.UNK) for w in self.tokenize(s)[:length - 1]]
            out[i, :len(ids)] = ids
        return out


def mask_tokens(ids, vocab_size, mask_id=MASK, n_special=len(SPECIALS), mlm_probability=0.15,
                rng=None, ignore_index=-100):
    """BERT's MLM corruption of an int array ``ids``.  Returns (inputs, labels).

    Special tokens (ids < n_special) are never chosen.  Of the chosen positions, 80% become
    ``mask_id``, 10% a random non-special token, 10% keep their token; ``labels`` holds the
    original token there and ``ignore_index`` elsewhere.
    """
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"mask_tokens: mlm_probability must be in (0, 1), got {mlm_probability}")
    rng = rng if rng is not None else np.random.default_rng()
    ids = np.asarray(ids)
    chosen = (rng.random(ids.shape) < mlm_probability) & (ids >= n_special)
    labels = np.where(chosen, ids, ignore_index)
    u = rng.random(ids.shape)
    inputs = ids.copy()
    inputs[chosen & (u < 0.8)] = mask_id
    rand = chosen & (u >= 0.8) & (u < 0.9)
    inputs[rand] = rng.integers(n_special, vocab_size, int(rand.sum()))
    return inputs, labels


class BERT(nn.Module):
    def __init__(self, vocab_size, max_len=64, d_model=64, n_layer=2, n_head=4, dim_feedforward=None,
                 dropout=0.0, num_classes=2, norm_first=False):
        super().__init__()
        self.tok = nn.Embedding(vocab_size, d_model, padding_idx=PAD)
        self.pos = nn.Embedding(max_len, d_model)
        self.emb_norm = nn.LayerNorm(d_model)
        self.drop = nn.Dropout(dropout)
        layer = nn.TransformerEncoderLayer(d_model, n_head, dim_feedforward or 4 * d_model, dropout,
                                           activation="gelu", batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, n_layer, norm=nn.LayerNorm(d_model) if norm_first else None)
        self.mlm_dense = nn.Linear(d_model, d_model)
        self.mlm_norm = nn.LayerNorm(d_model)
        self.mlm_bias = nn.Parameter(vl.zeros(vocab_size))
        self.pooler = nn.Linear(d_model, d_model)
        self.classifier = nn.Linear(d_model, num_classes)
        self.max_len = max_len
        for m in self.modules():  # BERT's init: N(0, 0.02) weights, zero biases
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, std=0.02)
                if isinstance(m, nn.Linear) and m.bias is not None:
                    nn.init.zeros_(m.bias)

    def encode(self, ids):
        """ids (B, T) -> hidden states (B, T, d); padding positions are masked as keys."""
        B, T = ids.shape
        if T > self.max_len:
            raise ValueError(f"BERT: sequence length {T} exceeds max_len {self.max_len}")
        x = self.emb_norm(self.tok(ids) + self.pos(vl.arange(T)))
        pad = vl.tensor(ids.numpy() == PAD)
        return self.encoder(self.drop(x), src_key_padding_mask=pad)

    def mlm_logits(self, h):
        z = self.mlm_norm(F.gelu(self.mlm_dense(h)))
        return vl.matmul(z, self.tok.weight.T) + self.mlm_bias

    def mlm_loss(self, inputs, labels):
        logits = self.mlm_logits(self.encode(inputs))
        V = logits.shape[-1]
        return F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1), ignore_index=-100)

    def forward(self, ids):
        """Classification logits from the [CLS] position."""
        h = self.encode(ids)
        return self.classifier(vl.tanh(self.pooler(h[:, 0])))


def corpus_lines(text, min_words=6, max_chars=None):
    """Clauses of the corpus (lines split at ; : . ? !) with at least ``min_words`` words
    and at most ``max_chars`` characters."""
    import re
    lines = [c.strip() for c in re.split(r"[;:.?!\n]", text)]
    lines = [s for s in lines if len(s.split()) >= min_words]
    if max_chars:
        lines = [s for s in lines if len(s) <= max_chars]
    return lines


def shuffled_verse_task(lines, n, seed=0, max_chars=None):
    """n (text, label) pairs: label 1 for a real line, 0 for a random word order of another line."""
    rng = np.random.default_rng(seed)
    pick = rng.choice(len(lines), n, replace=False)
    out = []
    for k, i in enumerate(pick):
        s = lines[i]
        if k % 2:
            w = s.split()
            perm = rng.permutation(len(w))
            while len(w) > 1 and (perm == np.arange(len(w))).all():
                perm = rng.permutation(len(w))
            s = " ".join(w[j] for j in perm)
            out.append((s, 0))
        else:
            out.append((s, 1))
    return out


def pretrain_mlm(model, vocab, lines, steps, batch_size=32, lr=1e-3, seq_len=None, seed=0, log=None):
    """Masked-LM pre-training on random corpus lines; returns the list of losses."""
    rng = np.random.default_rng(seed)
    L = seq_len or model.max_len
    opt = vl.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    sched = vl.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50) * (0.1 + 0.45 *
                                           (1 + math.cos(math.pi * min(s, steps) / steps))))
    losses = []
    model.train()
    for s in range(steps):
        ids = vocab.encode_batch([lines[i] for i in rng.integers(0, len(lines), batch_size)], L)
        inp, lab = mask_tokens(ids, len(vocab), n_special=vocab.n_special, rng=rng)
        opt.zero_grad()
        loss = model.mlm_loss(vl.tensor(inp), vl.tensor(lab))
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss))
        if log and s % 100 == 0:
            log(f"mlm step {s}: loss {losses[-1]:.3f}")
    return losses


def finetune(model, vocab, train_pairs, test_pairs, epochs=2, batch_size=32, lr=5e-4, seed=0):
    """Fine-tune every weight for classification; returns test accuracy."""
    rng = np.random.default_rng(seed)
    L = model.max_len
    X = vocab.encode_batch([s for s, _ in train_pairs], L)
    y = np.array([c for _, c in train_pairs], dtype=np.int64)
    opt = vl.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    model.train()
    for _ in range(epochs):
        for idx in np.array_split(rng.permutation(len(X)), max(1, len(X) // batch_size)):
            opt.zero_grad()
            F.cross_entropy(model(vl.tensor(X[idx])), vl.tensor(y[idx])).backward()
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
    return accuracy(model, vocab, test_pairs)


def accuracy(model, vocab, pairs, batch_size=256):
    model.eval()
    X = vocab.encode_batch([s for s, _ in pairs], model.max_len)
    y = np.array([c for _, c in pairs])
    pred = []
    with vl.no_grad():
        for i in range(0, len(X), batch_size):
            pred.append(model(vl.tensor(X[i:i + batch_size])).numpy().argmax(1))
    model.train()
    return float((np.concatenate(pred) == y).mean())
