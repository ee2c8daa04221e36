"""Character-level LSTM language model (varlens/models/char_rnn.py), truncated BPTT, the
neuron picture and the vanishing-gradient measurement."""
import math
from collections import Counter

import numpy as np
import pytest

import varlens as vl
from varlens import nn
from varlens.models.char_rnn import CharRNN
from varlens.text.char_lm import detach_state, evaluate_bpc, iterate_chunks, load_english, make_streams, train_char_lm
from varlens.text.visualize import input_gradient_norms, neuron_html


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """Training loops of small GEMMs: one BLAS thread, so a busy shared machine does not stall
    OpenBLAS's thread pool (measured 20-50x slowdowns with 2 threads under load)."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        yield


@pytest.fixture(scope="module")
def trained():
    text = load_english(120_000)
    return text, train_char_lm(text, hidden_size=64, seq_len=40, batch_size=32, max_steps=80, lr=1e-2,
                               epochs=10)


def test_char_lm_beats_unigram_entropy(trained):
    """After 80 small steps the validation BPC is well below the entropy of the character
    distribution (what any model ignoring context can reach), computed here from counts."""
    text, r = trained
    counts = np.array(list(Counter(text).values()), dtype=float)
    p = counts / counts.sum()
    unigram_bits = float(-(p * np.log2(p)).sum())
    assert unigram_bits > 4.0
    assert r["val_bpc"] < unigram_bits - 0.8, (r["val_bpc"], unigram_bits)
    assert r["train_loss"][-1] < r["train_loss"][0] - 1.0


def test_sampling_temperature(trained):
    _, r = trained
    m, vocab = r["model"], r["vocab"]
    s0 = m.sample(vocab, "And the", 40, temperature=0)
    assert s0 == m.sample(vocab, "And the", 40, temperature=0)  # greedy is deterministic
    assert len(s0) == 40 and set(s0) <= set(vocab.itos)
    hot = m.sample(vocab, "And the", 300, temperature=2.0, generator=1)
    cold = m.sample(vocab, "And the", 300, temperature=0.3, generator=1)
    assert len(set(hot)) > len(set(cold))  # a hotter softmax spreads over more characters
    with pytest.raises(ValueError, match="prefix"):
        m.sample(vocab, "", 5)


def test_truncated_bptt_detaches_state():
    """The gradient of chunk 2's loss with the carried state detached equals the gradient of
    the same chunk run from that state as a constant, and reaches no chunk-1 computation."""
    vl.manual_seed(0)
    m = CharRNN(7, 6, embed_dim=5).double()
    ids = np.random.default_rng(0).integers(0, 7, 200)
    streams = make_streams(ids, 4)
    (x1, _), (x2, y2) = list(iterate_chunks(streams, 10))[:2]
    _, st = m(vl.Tensor._make(x1))
    st = detach_state(st)
    assert all(not s.requires_grad for s in st)
    logits, _ = m(vl.Tensor._make(x2), st)
    loss = nn.functional.cross_entropy(logits.reshape(-1, 7), vl.Tensor._make(y2.reshape(-1)))
    loss.backward()
    g1 = [p.grad.numpy().copy() for p in m.parameters()]
    m.zero_grad()
    const = tuple(vl.tensor(s.numpy()) for s in st)
    logits, _ = m(vl.Tensor._make(x2), const)
    nn.functional.cross_entropy(logits.reshape(-1, 7), vl.Tensor._make(y2.reshape(-1))).backward()
    for a, p in zip(g1, m.parameters()):
        np.testing.assert_allclose(a, p.grad.numpy(), rtol=1e-12, atol=1e-14)


def test_evaluate_bpc_of_uniform_model_is_log2_V():
    """A model whose output layer is zero predicts uniformly: exactly log2(V) bits per char."""
    m = CharRNN(11, 8)
    m.head.weight.data[...] = 0
    m.head.bias.data[...] = 0
    streams = make_streams(np.random.default_rng(0).integers(0, 11, 500), 5)
    assert evaluate_bpc(m, streams) == pytest.approx(math.log2(11), rel=1e-6)


def test_neuron_html(tmp_path):
    page = neuron_html("ab\nc", [1.0, -1.0, 0.0, 0.5], tmp_path / "n.html", title="unit 3")
    assert page.count("<span") == 4
    assert "background:#ff0000" in page and "background:#0000ff" in page and "background:#ffffff" in page
    assert (tmp_path / "n.html").read_text(encoding="utf-8") == page
    with pytest.raises(ValueError, match="one activation per character"):
        neuron_html("abc", [0.1, 0.2])


def test_vanishing_gradients_rnn_vs_lstm():
    """||dL/dx_t|| for a loss at the last step shrinks geometrically going back in time in a
    tanh RNN (seed 003 §6.1.2-6.1.3); an LSTM with a forget-gate bias of +3 keeps it."""
    vl.manual_seed(0)
    rnn = nn.RNN(8, 32).double()
    lstm = nn.LSTM(8, 32).double()
    lstm.bias_hh_l0.data[32:64] += 3.0
    g_rnn = input_gradient_norms(rnn, T=60, batch=4)
    g_lstm = input_gradient_norms(lstm, T=60, batch=4)
    assert g_rnn[0] < 1e-8 * g_rnn[-1]
    assert g_lstm[0] > 1e-2 * g_lstm[-1]
    # roughly geometric decay for the RNN: log-norm is close to linear in t over the middle
    lg = np.log(g_rnn[10:50])
    slope, icpt = np.polyfit(np.arange(40), lg, 1)
    assert slope > 0.1 and np.abs(lg - (slope * np.arange(40) + icpt)).max() < 3.0
