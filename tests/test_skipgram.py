"""Skip-gram with negative sampling (seed 003 §8.2): loss gradient, pairs, planted co-occurrence."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import gradcheck
from varlens.text.embeddings import (WordVocab, nearest, sgns_loss, skipgram_pairs,
                                     tokenize_words, train_skipgram)

from conftest import assert_close


def test_sgns_loss_gradcheck():
    v = vl.randn(4, 3, dtype=vl.float64, requires_grad=True)
    u = vl.randn(4, 3, dtype=vl.float64, requires_grad=True)
    n = vl.randn(4, 5, 3, dtype=vl.float64, requires_grad=True)
    gradcheck(sgns_loss, [v, u, n])


def test_sgns_loss_matches_closed_form_gradients_and_pytorch():
    rng = np.random.default_rng(0)
    V, U, N = rng.standard_normal((3, 4)), rng.standard_normal((3, 4)), rng.standard_normal((3, 2, 4))
    v, u, n = (vl.tensor(a, requires_grad=True) for a in (V, U, N))
    loss = sgns_loss(v, u, n)
    loss.backward()
    tv, tu, tn = (torch.tensor(a, requires_grad=True) for a in (V, U, N))
    tl = -(torch.nn.functional.logsigmoid((tu * tv).sum(-1))
           + torch.nn.functional.logsigmoid(-(tn @ tv[:, :, None])[..., 0]).sum(-1)).mean()
    tl.backward()
    assert_close(loss, tl, what="loss")
    for a, b, w in ((v, tv, "v"), (u, tu, "u"), (n, tn, "neg")):
        assert_close(a.grad, b.grad, what=w)
    # the closed forms of the module docstring, divided by the batch size 3
    sig = lambda z: 1 / (1 + np.exp(-z))
    s_pos = sig((U * V).sum(-1))
    np.testing.assert_allclose(u.grad.numpy(), ((s_pos - 1)[:, None] * V) / 3, rtol=1e-10)
    s_neg = sig(np.einsum("bkd,bd->bk", N, V))
    np.testing.assert_allclose(n.grad.numpy(), s_neg[..., None] * V[:, None, :] / 3, rtol=1e-10)


def test_pairs_stay_inside_the_window_and_are_symmetric():
    ids = np.arange(50)
    c, o = skipgram_pairs(ids, 3, np.random.default_rng(0))
    d = np.abs(c - o)
    assert d.min() >= 1 and d.max() <= 3
    assert (c < o).sum() == (c > o).sum()
    assert (d == 1).sum() == 2 * 49          # the nearest neighbours are always included


def test_vocab_and_tokenizer():
    words = tokenize_words("The LORD said, Let there be light: and there was light.")
    assert words[:3] == ["the", "lord", "said"] and "light" in words
    v = WordVocab(words, min_count=2)
    assert v.itos == ["there", "light"] or set(v.itos) == {"there", "light"}
    with pytest.raises(KeyError, match="not in the vocabulary"):
        nearest(np.eye(2), v, "moon")
    with pytest.raises(ValueError, match="min_count"):
        WordVocab(["a"], min_count=3)


def test_planted_cooccurrence_brings_related_words_closer_than_random_ones():
    """40 words in 10 planted topics of 4: every sentence mixes words of one topic with
    random filler, so words of a topic share their contexts.  After training, a word must be
    closer (cosine) to its topic mates than to other words, and its nearest neighbour must
    be a topic mate for nearly every word."""
    rng = np.random.default_rng(0)
    n_topics, size = 10, 4
    V = n_topics * size
    stream = []
    for _ in range(3000):
        t = rng.integers(n_topics)
        sent = list(t * size + rng.integers(0, size, 6)) + list(rng.integers(0, V, 2))
        rng.shuffle(sent)
        stream += [int(w) for w in sent]
    ids = np.array(stream)
    counts = np.bincount(ids, minlength=V).astype(float)
    model, losses = train_skipgram(ids, V, counts, dim=16, window=2, negatives=5, epochs=2,
                                   batch_size=512, lr=0.02, subsample=None, seed=0)
    assert np.mean(losses[-10:]) < 0.9 * losses[0]
    W = model.vectors()
    Wn = W / np.linalg.norm(W, axis=1, keepdims=True)
    S = Wn @ Wn.T
    topic = np.arange(V) // size
    same = (topic[:, None] == topic[None, :]) & ~np.eye(V, dtype=bool)
    diff = topic[:, None] != topic[None, :]
    within = np.array([S[i, same[i]].mean() for i in range(V)])
    between = np.array([S[i, diff[i]].mean() for i in range(V)])
    assert (within > between).all()
    assert within.mean() > between.mean() + 0.3
    np.fill_diagonal(S, -np.inf)
    assert (topic[S.argmax(1)] == topic).mean() >= 0.9
