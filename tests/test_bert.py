"""BERT: the 15% / 80-10-10 masking rule, padding masks, the MLM loss, and a tiny model learning."""
import math

import numpy as np
import pytest

import varlens as vl
from varlens.models.bert import BERT, CLS, MASK, PAD
from varlens.text.mlm import CharVocabBERT, mask_tokens, shuffled_verse_task


def test_masking_proportions_15_percent_then_80_10_10():
    V, n_special = 50, 3
    rng = np.random.default_rng(0)
    ids = rng.integers(n_special, V, 400_000)
    inp, lab = mask_tokens(ids, V, rng=np.random.default_rng(1))
    chosen = lab != -100
    n = chosen.sum()
    assert abs(chosen.mean() - 0.15) < 0.003
    np.testing.assert_array_equal(lab[chosen], ids[chosen])
    np.testing.assert_array_equal(inp[~chosen], ids[~chosen])      # unchosen tokens untouched
    masked = (inp[chosen] == MASK).mean()
    changed = ((inp[chosen] != MASK) & (inp[chosen] != ids[chosen])).mean()
    kept = (inp[chosen] == ids[chosen]).mean()
    p_same = 1.0 / (V - n_special)                                    # a random draw can hit the original
    assert abs(masked - 0.8) < 0.006
    assert abs(changed - 0.1 * (1 - p_same)) < 0.004
    assert abs(kept - (0.1 + 0.1 * p_same)) < 0.004
    rnd = inp[chosen & (inp != MASK) & (inp != ids)]
    assert rnd.min() >= n_special and rnd.max() == V - 1               # never a special token
    assert n > 50_000


def test_special_tokens_are_never_chosen():
    ids = np.array([[CLS, 5, 6, PAD, PAD]] * 2000)
    inp, lab = mask_tokens(ids, 10, rng=np.random.default_rng(0))
    assert (lab[:, [0, 3, 4]] == -100).all()
    assert (inp[:, [0, 3, 4]] == ids[:, [0, 3, 4]]).all()
    with pytest.raises(ValueError, match="mlm_probability"):
        mask_tokens(ids, 10, mlm_probability=1.5)


def test_padding_does_not_change_the_classification():
    vl.manual_seed(0)
    m = BERT(12, max_len=10, d_model=16, n_layer=2, n_head=2)
    m.eval()
    a = vl.tensor(np.array([[CLS, 4, 5, 6]]))
    b = vl.tensor(np.array([[CLS, 4, 5, 6, PAD, PAD, PAD]]))
    with vl.no_grad():
        np.testing.assert_allclose(m(a).numpy(), m(b).numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="max_len"):
        m(vl.tensor(np.zeros((1, 11), dtype=np.int64)))


def test_mlm_loss_is_cross_entropy_over_labelled_positions_only():
    vl.manual_seed(0)
    m = BERT(12, max_len=8, d_model=16, n_layer=1, n_head=2)
    ids = np.array([[CLS, 4, 5, 6, 7, 8]])
    lab = np.array([[-100, 4, -100, -100, 7, -100]])
    loss = float(m.mlm_loss(vl.tensor(ids), vl.tensor(lab)))
    with vl.no_grad():
        logits = m.mlm_logits(m.encode(vl.tensor(ids))).numpy()[0]
    lp = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1, keepdims=True)) - logits.max(-1, keepdims=True)
    ref = -(lp[1, 4] + lp[4, 7]) / 2
    assert loss == pytest.approx(ref, rel=1e-5)


def test_shuffled_verse_task_is_balanced_and_keeps_the_words():
    lines = [f"w{i} a b c d e f" for i in range(100)]
    pairs = shuffled_verse_task(lines, 40, seed=0)
    labels = [c for _, c in pairs]
    assert sum(labels) == 20
    for s, c in pairs:
        if c == 0:
            orig = next(l for l in lines if l.split()[0] in s.split())
            assert sorted(s.split()) == sorted(orig.split()) and s != orig


def test_mlm_pretraining_learns_a_predictable_corpus():
    """Lines count upwards (c, c+1, c+2, ...): a masked token is fixed by its neighbours, so
    the MLM loss must fall far below log V."""
    from varlens.text.mlm import pretrain_mlm
    alpha = "abcdefghijklmnop"
    lines = [alpha[i:] + alpha[:i] for i in range(len(alpha))]
    vocab = CharVocabBERT("".join(alpha))
    vl.manual_seed(0)
    m = BERT(len(vocab), max_len=12, d_model=32, n_layer=1, n_head=2)
    losses = pretrain_mlm(m, vocab, lines, steps=300, batch_size=32, lr=1e-2, seq_len=12)
    assert np.mean(losses[-20:]) < 0.3 * math.log(len(alpha)), np.mean(losses[-20:])
