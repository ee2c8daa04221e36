"""The first LSTM layer fed straight by an embedding lookup (varlens/ops/nn/rnn.py,
``LSTMEmbedLayerFunction``): float64 finite differences of the fused op, PyTorch parity of
Embedding -> nn.LSTM -> Linear models with the fused path taken (outputs and every gradient),
the lookup's output used elsewhere too, and the cases that must fall back (in-place edits,
padding_idx, a large vocabulary, bidirectional)."""
import os
import subprocess
import sys

import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd.gradcheck import gradcheck
from varlens.ops.kernels import recurrent as RK
from varlens.ops.nn import rnn as R


def _fused():
    return R.EMBED_FUSED_CALLS[0]


@pytest.mark.parametrize("reverse", [False, True])
def test_gradcheck_float64(reverse):
    rng = np.random.default_rng(0)
    V, I, H, T, B = 5, 3, 4, 6, 3
    idx = rng.integers(0, V, (T, B))

    def p(*shape):
        return vl.tensor(rng.standard_normal(shape) * 0.5, dtype=vl.float64, requires_grad=True)
    E, h0, c0 = p(V, I), p(B, H), p(B, H)
    w_ih, w_hh, b_ih, b_hh = p(4 * H, I), p(4 * H, H), p(4 * H), p(4 * H)
    n0 = _fused()

    def fn(E, h0, c0, w_ih, w_hh, b_ih, b_hh):
        y, hn, cn = R.lstm_embed_layer(E, idx, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=reverse)
        return vl.cat([y.reshape(-1), hn.reshape(-1), cn.reshape(-1)])
    assert gradcheck(fn, (E, h0, c0, w_ih, w_hh, b_ih, b_hh), eps=1e-6, atol=1e-7, rtol=1e-5)
    assert _fused() > n0
    # and it is the lookup followed by the layer op
    y1 = fn(E, h0, c0, w_ih, w_hh, b_ih, b_hh)
    y2 = R.lstm_layer(vl.nn.functional.embedding(vl.tensor(idx), E), h0, c0, w_ih, w_hh, b_ih, b_hh,
                      reverse=reverse)
    np.testing.assert_allclose(y1.detach().numpy()[:T * B * H], y2[0].detach().numpy().reshape(-1),
                               rtol=1e-12, atol=1e-12)


def _models(dtype, bf, layers, V=11, I=16, H=5, bias=True):
    torch.manual_seed(0)
    te = torch.nn.Embedding(V, I).to(dtype)
    tl = torch.nn.LSTM(I, H, num_layers=layers, batch_first=bf, bias=bias).to(dtype)
    th = torch.nn.Linear(H, V).to(dtype)
    vdt = vl.float64 if dtype == torch.float64 else vl.float32
    ve = vl.nn.Embedding(V, I).to(vdt)
    vlstm = vl.nn.LSTM(I, H, num_layers=layers, batch_first=bf, bias=bias).to(vdt)
    vh = vl.nn.Linear(H, V).to(vdt)
    with vl.no_grad():
        for tm, vm in ((te, ve), (tl, vlstm), (th, vh)):
            for n, p in tm.named_parameters():
                getattr(vm, n).copy_(vl.tensor(p.detach().numpy()))
    return (te, tl, th), (ve, vlstm, vh)


def _run(mods, lib, idx, extra, edit, h0c0):
    e, lstm, head = mods
    x = e(lib.tensor(idx))
    if edit:
        x.mul_(1.5)                     # an in-place change of the lookup's output
    hx = None if h0c0 is None else tuple(lib.tensor(a) for a in h0c0)
    y, (hn, cn) = lstm(x, hx)
    out = head(y)
    loss = (out ** 2).mean() + hn.sum() * 0.3 + cn.sum() * 0.7
    if extra:                           # the lookup's output used elsewhere too
        loss = loss + (x ** 3).sum() * 0.1
    loss.backward()
    return out, hn, cn


def _check(dtype, bf, layers, B, T, extra=False, edit=False, h0c0=False, bias=True, expect_fused=True,
           V=11, padding_idx=None):
    tm, vm = _models(dtype, bf, layers, V=V, bias=bias)
    if padding_idx is not None:
        tm[0].padding_idx = vm[0].padding_idx = padding_idx
    rng = np.random.default_rng(1)
    idx = rng.integers(0, V, (B, T) if bf else (T, B))
    hc = None
    if h0c0:
        npdt = np.float64 if dtype == torch.float64 else np.float32
        hc = tuple(rng.standard_normal((layers, B, 5)).astype(npdt) for _ in range(2))
    n0 = _fused()
    vo = _run(vm, vl, idx, extra, edit, hc)
    to = _run(tm, torch, idx, extra, edit, hc)
    assert (_fused() > n0) == expect_fused
    tol = 1e-10 if dtype == torch.float64 else 2e-5
    for a, b in zip(vo, to):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=tol, atol=tol)
    for t, v in zip(tm, vm):
        for n, p in t.named_parameters():
            np.testing.assert_allclose(getattr(v, n).grad.numpy(), p.grad.numpy(), rtol=tol, atol=tol,
                                       err_msg=n)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("bf", [False, True])
@pytest.mark.parametrize("layers", [1, 2])
@pytest.mark.parametrize("B", [4, 32])
def test_parity_fused(dtype, bf, layers, B):
    _check(dtype, bf, layers, B, 7)


@pytest.mark.parametrize("bf", [False, True])
def test_parity_output_used_elsewhere(bf):
    _check(torch.float32, bf, 2, 32, 7, extra=True)
    _check(torch.float64, bf, 1, 4, 7, extra=True, h0c0=True)


def test_parity_initial_state_and_no_bias():
    _check(torch.float32, True, 2, 16, 9, h0c0=True)
    _check(torch.float64, False, 2, 4, 9, h0c0=True, bias=False)


def test_compiled_accumulating_gemm_matches_numpy(monkeypatch):
    # float32 with a batch of 32: the per-step products go through the packed GEMM that adds
    # W [h; 1] to the gathered projections (kernels/recurrent.py, ``blocks_acc`` / ``rows_acc``);
    # against the same op with NumPy's BLAS for them
    if RK.step_gemm(32) is None:
        pytest.skip("no compiled packed GEMM here (numba off)")
    used = []
    real = R.step_gemm

    def spy(n):
        g = real(n)
        used.append(g is not None)
        return g
    res = []
    for gemm in (spy, lambda n: None):
        monkeypatch.setattr(R, "step_gemm", gemm)
        rng = np.random.default_rng(6)
        E = vl.tensor(rng.standard_normal((9, 20)).astype(np.float32), requires_grad=True)
        ws = [vl.tensor(rng.standard_normal(s).astype(np.float32) * 0.3, requires_grad=True)
              for s in ((4 * 19, 20), (4 * 19, 19), (4 * 19,), (4 * 19,))]   # 4H = 76: left-over rows too
        idx = rng.integers(0, 9, (5, 32))
        y, hn, cn = R.lstm_embed_layer(E, idx, None, None, *ws)
        ((y ** 2).sum() + hn.sum() + cn.sum()).backward()
        res.append([y.detach().numpy(), E.grad.numpy()] + [w.grad.numpy() for w in ws])
    assert used and all(used)
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-5)


def test_inplace_edit_of_lookup_falls_back():
    _check(torch.float32, True, 2, 32, 7, edit=True, expect_fused=False)
    _check(torch.float64, False, 1, 4, 7, edit=True, extra=True, expect_fused=False)


def test_table_edited_after_lookup_falls_back():
    e = vl.nn.Embedding(7, 16)
    lstm = vl.nn.LSTM(16, 4)
    idx = vl.tensor(np.arange(28).reshape(7, 4) % 7)
    x = e(idx)
    with vl.no_grad():
        e.weight.add_(1.0)
    n0 = _fused()
    y, _ = lstm(x)
    assert _fused() == n0
    y2, _ = lstm(e(idx) - 1.0)
    np.testing.assert_allclose(y.detach().numpy(), y2.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_index_tensor_edited_after_lookup_falls_back():
    e = vl.nn.Embedding(7, 16)
    lstm = vl.nn.LSTM(16, 4)
    idx = vl.tensor(np.arange(28).reshape(7, 4) % 7)
    x = e(idx)
    idx.fill_(0)
    n0 = _fused()
    lstm(x)
    assert _fused() == n0


def test_other_fallbacks():
    # padding_idx (the pad row gets no gradient), a vocabulary too large for the batch,
    # bidirectional: the ordinary Embedding -> LSTMLayerFunction path, still PyTorch's numbers
    _check(torch.float64, False, 1, 4, 7, padding_idx=2, expect_fused=False)
    _check(torch.float64, False, 1, 4, 7, V=40, expect_fused=False)
    e, lstm = vl.nn.Embedding(5, 16), vl.nn.LSTM(16, 4, bidirectional=True)
    n0 = _fused()
    lstm(e(vl.tensor(np.zeros((9, 4), np.int64))))
    assert _fused() == n0
    # a narrow embedding (I < 16: the gather and scatter cost more than the GEMM columns saved)
    e, lstm = vl.nn.Embedding(5, 8), vl.nn.LSTM(8, 4)
    lstm(e(vl.tensor(np.zeros((9, 4), np.int64))))
    assert _fused() == n0
    # the same shapes with I = 16 do take it
    e, lstm = vl.nn.Embedding(5, 16), vl.nn.LSTM(16, 4)
    lstm(e(vl.tensor(np.zeros((9, 4), np.int64))))
    assert _fused() == n0 + 1


def test_char_rnn_model_fused_matches_unfused(monkeypatch):
    from varlens.models.char_rnn import CharRNN
    vl.manual_seed(0)
    m = CharRNN(13, hidden_size=16, num_layers=2, embed_dim=16)
    idx = vl.tensor(np.random.default_rng(5).integers(0, 13, (12, 16)))
    res = []
    for ratio in (R._EMBED_MIN_RATIO, 10 ** 9):
        monkeypatch.setattr(R, "_EMBED_MIN_RATIO", ratio)
        m.zero_grad()
        n0 = _fused()
        logits, _ = m(idx)
        (logits ** 2).mean().backward()
        assert (_fused() > n0) == (ratio != 10 ** 9)
        res.append([logits.detach().numpy()] + [p.grad.numpy().copy() for p in m.parameters()])
    for a, b in zip(*res):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_without_numba():
    code = ("import tests.test_rnn_embed as t, torch\n"
            "from varlens.ops.kernels import numba_module\n"
            "assert numba_module() is None\n"
            "t._check(torch.float32, True, 2, 32, 7, extra=True)\n"
            "t._check(torch.float64, False, 1, 4, 7)\n"
            "t.test_gradcheck_float64(False)\n")
    env = dict(os.environ, VARLENS_NO_NUMBA="1")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    r = subprocess.run([sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]


def test_double_backward_through_fused_path(monkeypatch):
    # create_graph goes through the op's composite (Embedding then the small-op LSTM)
    rng = np.random.default_rng(0)
    E = vl.tensor(rng.standard_normal((5, 16)), dtype=vl.float64, requires_grad=True)
    lstm = vl.nn.LSTM(16, 4).double()
    idx = vl.tensor(rng.integers(0, 5, (6, 3)))
    res = []
    for ratio in (R._EMBED_MIN_RATIO, 10 ** 9):
        monkeypatch.setattr(R, "_EMBED_MIN_RATIO", ratio)
        n0 = _fused()
        y, _ = lstm(vl.nn.functional.embedding(idx, E))
        g, = vl.autograd.grad((y ** 2).sum(), E, create_graph=True)
        gg, = vl.autograd.grad((g ** 2).sum(), E)
        assert (_fused() > n0) == (ratio != 10 ** 9)
        res.append((g.detach().numpy(), gg.numpy()))
    np.testing.assert_allclose(res[0][0], res[1][0], rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(res[0][1], res[1][1], rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("how", ["retain_grad", "register_hook", "lens"])
def test_lookup_whose_gradient_is_wanted_falls_back(how):
    # the fused op sends dL/dE past the lookup's output: a user (or the lens) who asked for that
    # output's gradient must get it, as PyTorch gives it, so the ordinary layer runs
    vl.manual_seed(0)
    torch.manual_seed(0)
    e, lstm = vl.nn.Embedding(7, 16), vl.nn.LSTM(16, 8)
    te, tl = torch.nn.Embedding(7, 16), torch.nn.LSTM(16, 8)
    te.weight.data = torch.tensor(e.weight.detach().numpy())
    for name, p in lstm.named_parameters():
        getattr(tl, name).data = torch.tensor(p.detach().numpy())
    idx = np.arange(28).reshape(7, 4) % 7
    seen = []
    n0 = _fused()
    if how == "lens":
        from varlens.lens import Lens
        model = vl.nn.Sequential(e)
        with Lens(model) as lens:
            x = model(vl.tensor(idx))
            lstm(x)[0].sum().backward()
        assert _fused() == n0    # the lens reads the lookup's gradient: ordinary layer
        return
    x = e(vl.tensor(idx))
    if how == "retain_grad":
        x.retain_grad()
    else:
        x.register_hook(lambda g: seen.append(g.numpy().copy()))
    lstm(x)[0].sum().backward()
    assert _fused() == n0
    tx = te(torch.tensor(idx))
    tx.retain_grad()
    tl(tx)[0].sum().backward()
    got = x.grad.numpy() if how == "retain_grad" else seen[0]
    np.testing.assert_allclose(got, tx.grad.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(e.weight.grad.numpy(), te.weight.grad.numpy(), rtol=1e-5, atol=1e-6)
