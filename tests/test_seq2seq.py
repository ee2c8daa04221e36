"""Encoder-decoder with and without Bahdanau attention (varlens/models/seq2seq.py)."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import gradcheck
from varlens.models.seq2seq import BahdanauAttention, Seq2Seq
from varlens.text.translation import evaluate, make_batch, sequence_loss, sequence_nll, train_seq2seq, translate
from varlens.text import CharSeqVocab, beam_search, greedy_decode, reverse_pairs
from varlens.text.visualize import attention_heatmap

from conftest import assert_close


@pytest.fixture(autouse=True, scope="module")
def _one_blas_thread():
    """Training loops of small GEMMs: one BLAS thread, so a busy shared machine does not stall
    OpenBLAS's thread pool (measured 20-50x slowdowns with 2 threads under load)."""
    from threadpoolctl import threadpool_limits
    with threadpool_limits(limits=1, user_api="blas"):
        yield


def _tiny(attention, seed=0):
    pairs = reverse_pairs(40, 2, 6, alphabet="abcde", seed=seed)
    vocab = CharSeqVocab([s + t for s, t in pairs])
    vl.manual_seed(seed)
    return pairs, vocab, Seq2Seq(len(vocab), len(vocab), 8, 12, attention=attention).double()


def test_bahdanau_attention_gradcheck_and_torch_parity():
    att = BahdanauAttention(3, 4, 5).double()
    rng = np.random.default_rng(0)
    q = vl.tensor(rng.standard_normal((2, 3)), requires_grad=True)
    keys = vl.tensor(rng.standard_normal((2, 6, 4)), requires_grad=True)
    mask = np.array([[0.0] * 6, [0.0] * 4 + [-1e9] * 2])

    def f(q_, k_, *ps):
        ctx, a = att(q_, att.project_keys(k_), k_, vl.tensor(mask))
        return ctx, a
    gradcheck(f, [q, keys] + list(att.parameters()))
    ctx, a = f(q, keys)
    np.testing.assert_allclose(a.detach().numpy().sum(-1), 1.0, rtol=1e-12)
    assert np.all(a.detach().numpy()[1, 4:] == 0)  # padded source positions get no weight
    # PyTorch: the same formula written directly
    W, U, Ub, v = (torch.tensor(p.detach().numpy()) for p in (att.W.weight, att.U.weight, att.U.bias, att.v.weight))
    tq = torch.tensor(q.detach().numpy(), requires_grad=True)
    tk = torch.tensor(keys.detach().numpy(), requires_grad=True)
    e = (torch.tanh(tk @ U.T + Ub + (tq @ W.T)[:, None, :]) @ v.T)[..., 0] + torch.tensor(mask)
    ta = torch.softmax(e, -1)
    tctx = (ta[:, None, :] @ tk)[:, 0]
    assert_close(ctx, tctx, rtol=1e-10, atol=1e-12)
    (ctx.sum() + (a * a).sum()).backward()
    (tctx.sum() + (ta * ta).sum()).backward()
    assert_close(q.grad, tq.grad, rtol=1e-8, atol=1e-12)
    assert_close(keys.grad, tk.grad, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("attention", [False, True])
def test_seq2seq_gradcheck(attention):
    pairs, vocab, m = _tiny(attention)
    src, sl, ti, to = make_batch(vocab, pairs[:3])
    ps = list(m.parameters())
    gradcheck(lambda *a: sequence_loss(m(src, sl, ti), to), ps, n_directions=2, check_coordinates=False)


@pytest.mark.parametrize("attention", [False, True])
def test_padding_and_decoding_consistency(attention):
    """(1) A source decodes the same alone and inside a padded batch (the packed encoder and
    the attention mask hide the padding).  (2) The sequence NLL is the sum of per-token
    cross-entropies from step-by-step decoding (seed 003 eq. 6.4.2).  (3) Beam 1 = greedy."""
    pairs, vocab, m = _tiny(attention)
    m.eval()
    src, sl, ti, to = make_batch(vocab, pairs[:5])
    with vl.no_grad():
        batch_logits = m(src, sl, ti).numpy()
        for b in range(5):
            s1, l1, t1, _ = make_batch(vocab, pairs[b:b + 1])
            alone = m(s1, l1, t1).numpy()[0]
            np.testing.assert_allclose(batch_logits[b, :alone.shape[0]], alone, atol=1e-12)
    nll = sequence_nll(m, vocab, pairs[:5])
    for b in range(5):
        s1, l1, _, t_out = make_batch(vocab, pairs[b:b + 1])
        with vl.no_grad():
            state = m.encode(s1, l1)
            step, tok, total = m.step_fn(), vocab.SOS, 0.0
            for y in t_out[0]:
                logits, state = step(np.array([tok]), state)
                lg = logits.numpy()[0]
                total -= lg[y] - np.log(np.exp(lg - lg.max()).sum()) - lg.max()
                tok = y
        assert nll[b] == pytest.approx(total, rel=1e-10)
    for s, _ in pairs[:4]:
        s1, l1 = vocab.batch([s], eos=False)
        g = greedy_decode(m.step_fn(), m.encode(s1, l1), [vocab.SOS], vocab.EOS, 12)[0]
        bm = beam_search(m.step_fn(), m.encode(s1, l1), vocab.SOS, vocab.EOS, 12, beam_size=1)
        assert [int(v) for v in g] == [int(v) for v in bm]


def test_attention_model_learns_reversal(tmp_path):
    """Small budget: string reversal (length 2-5, 5 letters) with attention reaches >= 90% exact
    match on held-out strings; the attention of an example is saved as a PNG."""
    data = reverse_pairs(1700, 2, 5, alphabet="abcde", seed=1)
    train = data[:1500]
    test = [p for p in data[1500:] if p not in train][:150]
    r = train_seq2seq(train, test, attention=True, embed_dim=16, hidden_size=32, epochs=4,
                      batch_size=50, lr=1e-2, seed=0)
    assert r["loss"][-1] < r["loss"][0] / 5
    assert r["exact_match"] >= 0.90, r["exact_match"]
    assert r["bleu"] >= 0.90
    outs, attns = translate(r["model"], r["vocab"], ["abcde"], record_attention=True)
    assert attns[0].shape == (len(outs[0]) + 1, 5)
    np.testing.assert_allclose(attns[0].sum(-1), 1.0, rtol=1e-5)
    path = attention_heatmap(attns[0], list("abcde"), list(outs[0]) + ["<eos>"], tmp_path / "a.png")
    assert (tmp_path / "a.png").stat().st_size > 1000 and path
    b = evaluate(r["model"], r["vocab"], test[:30], beam_size=3)
    assert b["exact_match"] >= 0.85
