"""Word embeddings by skip-gram with negative sampling (seed 003 §8.2.3; Mikolov et al. 2013).

Each word w has two vectors: v_w (``in_embed``, used when w is the centre word) and u_w
(``out_embed``, used when w is a context word).  For a centre c, an observed context word o
and K words n_1..n_K drawn from the unigram distribution raised to the power 3/4, the loss is

    -log sigma(u_o . v_c) - sum_k log sigma(-u_{n_k} . v_c),

a logistic regression telling true (centre, context) pairs from noise.  Its gradients are
(sigma(u_o . v_c) - 1) v_c for u_o, sigma(u_n . v_c) v_c for each u_n, and the matching sums
of u's for v_c; here they come from autograd through ``logsigmoid`` and are checked by
finite differences in tests/test_skipgram.py.  After training, ``in_embed`` is the word
vector; ``nearest`` ranks words by cosine similarity.
"""
from __future__ import annotations

import collections
import re

import numpy as np

import varlens as vl
from varlens import nn
from varlens.nn import functional as F
from varlens.train.loop import train_loop

_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?")


def tokenize_words(text):
    """Lower-case words (letters and inner apostrophes) in order."""
    return _WORD.findall(text.lower())


class WordVocab:
    """Words seen at least ``min_count`` times, most frequent first; counts kept for sampling."""

    def __init__(self, words, min_count=5, max_size=None):
        c = collections.Counter(words)
        items = [(w, n) for w, n in c.most_common(max_size) if n >= min_count]
        if not items:
            raise ValueError(f"WordVocab: no word occurs min_count={min_count} times")
        self.itos = [w for w, _ in items]
        self.stoi = {w: i for i, w in enumerate(self.itos)}
        self.counts = np.array([n for _, n in items], dtype=np.float64)

    def __len__(self):
        return len(self.itos)

    def encode(self, words):
        """ids of the words in the vocabulary (others dropped)."""
        s = self.stoi
        return np.array([s[w] for w in words if w in s], dtype=np.int64)


def skipgram_pairs(ids, window, rng, counts=None, subsample=None):
    """(centre, context) id pairs for every position and a random window 1..``window`` on each
    side (word2vec's dynamic window, which weights near words more).  ``subsample`` t drops
    word w with probability 1 - sqrt(t / f(w)) first (f = relative frequency)."""
    ids = np.asarray(ids)
    if subsample and counts is not None:
        f = counts / counts.sum()
        keep = rng.random(len(ids)) < np.minimum(1.0, np.sqrt(subsample / f[ids]))
        ids = ids[keep]
    n = len(ids)
    spans = rng.integers(1, window + 1, n)
    cs, os = [], []
    for off in range(1, window + 1):
        m = spans[: n - off] >= off
        a = np.arange(n - off)[m]
        cs += [ids[a], ids[a + off]]          # left word as centre, right as context
        os += [ids[a + off], ids[a]]          # and the other way round
    return np.concatenate(cs), np.concatenate(os)


class SkipGram(nn.Module):
    def __init__(self, vocab_size, dim=64):
        super().__init__()
        self.in_embed = nn.Embedding(vocab_size, dim)
        self.out_embed = nn.Embedding(vocab_size, dim)
        nn.init.uniform_(self.in_embed.weight, -0.5 / dim, 0.5 / dim)  # word2vec's init
        nn.init.zeros_(self.out_embed.weight)

    def forward(self, centre, context, negatives):
        """Mean negative-sampling loss.  centre, context: (B,) ids; negatives: (B, K) ids."""
        return sgns_loss(self.in_embed(centre), self.out_embed(context), self.out_embed(negatives))

    def vectors(self):
        return self.in_embed.weight.detach().numpy()


def sgns_loss(v_c, u_o, u_neg):
    """-log sigma(u_o.v_c) - sum_k log sigma(-u_k.v_c), averaged over the batch.
    v_c, u_o: (B, D); u_neg: (B, K, D)."""
    pos = (u_o * v_c).sum(-1)
    neg = vl.matmul(u_neg, v_c.unsqueeze(-1)).squeeze(-1)  # (B, K)
    return -(F.logsigmoid(pos) + F.logsigmoid(-neg).sum(-1)).mean()


def negative_table(counts, power=0.75):
    p = counts ** power
    return np.cumsum(p / p.sum())


def train_skipgram(ids, vocab_size, counts, dim=64, window=4, negatives=5, epochs=1, batch_size=1024,
                   lr=0.01, subsample=1e-4, seed=0, log=None, max_pairs=None):
    """Train a SkipGram on the id stream with Adam; returns (model, list of batch losses)."""
    rng = np.random.default_rng(seed)
    vl.manual_seed(seed)
    model = SkipGram(vocab_size, dim)
    opt = vl.optim.Adam(model.parameters(), lr=lr)
    table = negative_table(counts)
    where = {}

    def batches():
        for ep in range(epochs):
            c, o = skipgram_pairs(ids, window, rng, counts, subsample)
            perm = rng.permutation(len(c))
            if max_pairs:
                perm = perm[:max_pairs]
            for s in range(0, len(perm), batch_size):
                b = perm[s:s + batch_size]
                neg = np.searchsorted(table, rng.random((len(b), negatives)))
                where.update(epoch=ep, batch=s // batch_size)
                yield c[b], o[b], np.minimum(neg, vocab_size - 1)

    def logged(step, loss):
        if log and where["batch"] % 200 == 0:
            log(f"epoch {where['epoch']} batch {where['batch']}: loss {loss:.3f}")

    losses = train_loop(model, lambda b: model(*(vl.tensor(a) for a in b)), batches(), opt, on_step=logged)
    return model, losses


def cosine_matrix(vectors):
    n = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    return n @ n.T


def nearest(vectors, vocab, word, k=5):
    """The k words with the highest cosine similarity to ``word`` (itself excluded)."""
    if word not in vocab.stoi:
        raise KeyError(f"nearest: {word!r} is not in the vocabulary ({len(vocab)} words)")
    n = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    i = vocab.stoi[word]
    sims = n @ n[i]
    sims[i] = -np.inf
    top = np.argsort(-sims)[:k]
    return [(vocab.itos[j], float(sims[j])) for j in top]
