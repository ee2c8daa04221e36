"""Masked-language-model pre-training and fine-tuning of varlens.models.BERT (seed 003 §8.1;
Devlin et al. 2019): character and word vocabularies with BERT's special tokens, the 80/10/10
masking of ``mask_tokens``, corpus clauses and the shuffled-verse classification task.
"""
from __future__ import annotations

import math

import numpy as np

import varlens as vl
from varlens.models.bert import CLS, MASK, PAD, SPECIALS
from varlens.nn import functional as F
from varlens.train.loop import train_loop


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

    def masked_batches():
        for _ in range(steps):
            ids = vocab.encode_batch([lines[i] for i in rng.integers(0, len(lines), batch_size)], L)
            yield mask_tokens(ids, len(vocab), n_special=vocab.n_special, rng=rng)

    def logged(step, loss):
        if log and (step - 1) % 100 == 0:
            log(f"mlm step {step - 1}: loss {loss:.3f}")

    return train_loop(model, lambda b: model.mlm_loss(vl.tensor(b[0]), vl.tensor(b[1])), masked_batches(), opt,
                      clip_grad_norm=1.0, scheduler=sched, on_step=logged)


def finetune(model, vocab, train_pairs, test_pairs, epochs=2, batch_size=32, lr=5e-4, seed=0):
    """Fine-tune every weight for classification; returns test accuracy."""
    rng = np.random.default_rng(seed)
    L = model.max_len
    X = vocab.encode_batch([s for s, _ in train_pairs], L)
    y = np.array([c for _, c in train_pairs], dtype=np.int64)
    opt = vl.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)

    def batches():
        for _ in range(epochs):
            yield from np.array_split(rng.permutation(len(X)), max(1, len(X) // batch_size))

    train_loop(model, lambda idx: F.cross_entropy(model(vl.tensor(X[idx])), vl.tensor(y[idx])), batches(), opt,
               clip_grad_norm=1.0)
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
