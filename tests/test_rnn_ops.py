"""Fused recurrent ops (varlens/ops/nn/rnn.py): finite differences, PyTorch parity,
masking, second derivatives through the composite, long BPTT."""
import numpy as np
import pytest
import torch

import varlens as vl
from varlens.autograd import gradcheck, gradgradcheck
from varlens.ops.nn import rnn as R

from conftest import assert_close

T, B, I, H = 4, 3, 2, 3
GATES = {"lstm": 4, "gru": 3, "rnn_tanh": 1, "rnn_relu": 1}


def _params(mode, rng, bias=True, h=H, i=I):
    G = GATES[mode]
    ps = [rng.standard_normal((G * h, i)) * 0.6, rng.standard_normal((G * h, h)) * 0.6]
    ps += [rng.standard_normal(G * h) * 0.3, rng.standard_normal(G * h) * 0.3] if bias else [None, None]
    return [vl.tensor(p, requires_grad=True) if p is not None else None for p in ps]


def _layer(mode, x, h0, c0, ps, reverse=False, mask=None):
    """Run a layer op; returns the list of its results (outputs, h_n[, c_n])."""
    if mode == "lstm":
        return list(R.lstm_layer(x, h0, c0, *ps, reverse=reverse, mask=mask))
    if mode == "gru":
        return list(R.gru_layer(x, h0, *ps, reverse=reverse, mask=mask))
    return list(R.rnn_layer(x, h0, *ps, nonlinearity=mode[4:], reverse=reverse, mask=mask))


@pytest.mark.parametrize("mode", list(GATES))
@pytest.mark.parametrize("reverse", [False, True])
def test_layer_gradcheck(mode, reverse):
    rng = np.random.default_rng(1)
    x = vl.tensor(rng.standard_normal((T, B, I)), requires_grad=True)
    h0 = vl.tensor(rng.standard_normal((B, H)) * 0.5, requires_grad=True)
    c0 = vl.tensor(rng.standard_normal((B, H)) * 0.5, requires_grad=True)
    ps = _params(mode, rng)
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 0, 0]], dtype=np.float64)
    ins = [x, h0, c0] + ps
    gradcheck(lambda *a: _layer(mode, a[0], a[1], a[2], list(a[3:]), reverse), ins)
    gradcheck(lambda *a: _layer(mode, a[0], a[1], a[2], list(a[3:]), reverse, mask), ins)


@pytest.mark.parametrize("mode", list(GATES))
def test_cell_gradcheck_no_bias_no_state(mode):
    rng = np.random.default_rng(2)
    x = vl.tensor(rng.standard_normal((B, I)), requires_grad=True)
    h = vl.tensor(rng.standard_normal((B, H)), requires_grad=True)
    c = vl.tensor(rng.standard_normal((B, H)), requires_grad=True)
    ps = _params(mode, rng)
    ps_nb = _params(mode, rng, bias=False)
    if mode == "lstm":
        gradcheck(lambda *a: R.lstm_cell(*a), [x, h, c] + ps)
        gradcheck(lambda x_, w1, w2: R.lstm_cell(x_, None, None, w1, w2), [x] + ps_nb[:2])
    elif mode == "gru":
        gradcheck(lambda *a: R.gru_cell(*a), [x, h] + ps)
        gradcheck(lambda x_, w1, w2: R.gru_cell(x_, None, w1, w2), [x] + ps_nb[:2])
    else:
        nl = mode[4:]
        gradcheck(lambda *a: R.rnn_cell(*a, nonlinearity=nl), [x, h] + ps)
        gradcheck(lambda x_, w1, w2: R.rnn_cell(x_, None, w1, w2, nonlinearity=nl), [x] + ps_nb[:2])


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh"])
def test_double_backward_through_composite(mode):
    rng = np.random.default_rng(3)
    x = vl.tensor(rng.standard_normal((2, 2, I)), requires_grad=True)
    h0 = vl.tensor(rng.standard_normal((2, 2)) * 0.5, requires_grad=True)
    ps = _params(mode, rng, h=2)
    mask = np.array([[1, 1], [1, 0]], dtype=np.float64)
    gradgradcheck(lambda *a: _layer(mode, a[0], a[1], a[1], list(a[2:]), True, mask)[0], [x, h0] + ps)


@pytest.mark.parametrize("mode", list(GATES))
def test_composite_matches_fused(mode):
    rng = np.random.default_rng(4)
    x = vl.tensor(rng.standard_normal((T, B, I)))
    h0 = vl.tensor(rng.standard_normal((B, H)))
    ps = [p.detach() for p in _params(mode, rng)]
    mask = np.array([[1, 1, 1], [1, 1, 0], [1, 0, 0], [1, 0, 0]], dtype=np.float64)
    if mode == "lstm":
        fused = R.LSTMLayerFunction.apply(x, h0, h0, *ps, reverse=True, mask=mask)
        comp = R._lstm_composite(x, h0, h0, *ps, True, mask)
    elif mode == "gru":
        fused = R.GRULayerFunction.apply(x, h0, *ps, reverse=True, mask=mask)
        comp = R._gru_composite(x, h0, *ps, True, mask)
    else:
        fused = R.RNNLayerFunction.apply(x, h0, *ps, nonlinearity=mode[4:], reverse=True, mask=mask)
        comp = R._rnn_composite(x, h0, *ps, mode[4:], True, mask)
    np.testing.assert_allclose(fused.numpy(), comp.numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("mode", list(GATES))
def test_mask_padding_contributes_nothing(mode):
    """A padded batch gives each sequence exactly what running it alone (unpadded) gives, in
    both directions, and the padded inputs get exactly zero gradient."""
    rng = np.random.default_rng(5)
    lengths = [4, 2, 1]
    xa = rng.standard_normal((T, B, I))
    ps = _params(mode, rng)
    mask = (np.arange(T)[:, None] < np.array(lengths)[None, :]).astype(np.float64)
    for reverse in (False, True):
        x = vl.tensor(xa, requires_grad=True)
        outs = _layer(mode, x, None, None, ps, reverse, mask)
        w = rng.standard_normal((T, B, H))
        loss = (outs[0] * vl.tensor(w)).sum() + outs[1].sum()
        loss.backward()
        gx = x.grad.numpy()
        for b, L in enumerate(lengths):
            xb = vl.tensor(xa[:L, b:b + 1], requires_grad=True)
            ob = _layer(mode, xb, None, None, ps, reverse)
            np.testing.assert_allclose(outs[0].detach().numpy()[:L, b], ob[0].detach().numpy()[:, 0], atol=1e-12)
            np.testing.assert_allclose(outs[1].detach().numpy()[b], ob[1].detach().numpy()[0], atol=1e-12)
            assert np.all(outs[0].detach().numpy()[L:, b] == 0)
            ((ob[0] * vl.tensor(w[:L, b:b + 1])).sum() + ob[1].sum()).backward()
            np.testing.assert_allclose(gx[:L, b], xb.grad.numpy()[:, 0], atol=1e-12)
            assert np.all(gx[L:, b] == 0)


def test_bptt_200_steps_fused_and_cellwise():
    """200 steps through the fused layer and through 200 chained cell ops (iterative engine,
    no recursion limit); both give the same gradient as PyTorch."""
    rng = np.random.default_rng(6)
    Tn, Hn = 200, 4
    xa = rng.standard_normal((Tn, 2, 3)) * 0.5
    ps = _params("lstm", rng, h=Hn, i=3)
    tl = torch.nn.LSTM(3, Hn).double()
    with torch.no_grad():
        for name, p in zip(["weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0"], ps):
            getattr(tl, name).copy_(torch.from_numpy(p.detach().numpy().copy()))
    tx = torch.tensor(xa, requires_grad=True)
    ty, _ = tl(tx)
    ty[-1].sum().backward()
    x = vl.tensor(xa, requires_grad=True)
    y, _, _ = R.lstm_layer(x, None, None, *ps)
    y[-1].sum().backward()
    assert_close(x.grad, tx.grad, rtol=1e-9, atol=1e-12, what="fused dx")
    x2 = vl.tensor(xa, requires_grad=True)
    h = c = None
    for t in range(Tn):
        h, c = R.lstm_cell(x2[t], h, c, *ps)
    h.sum().backward()
    assert_close(x2.grad, tx.grad, rtol=1e-9, atol=1e-12, what="cellwise dx")
    assert np.abs(x2.grad.numpy()[0]).max() > 0


def test_float32_forward_matches_float64():
    rng = np.random.default_rng(7)
    xa = rng.standard_normal((6, 2, I))
    ps = _params("lstm", rng)
    y64 = R.lstm_layer(vl.tensor(xa), None, None, *[p.detach() for p in ps])[0].numpy()
    y32 = R.lstm_layer(vl.tensor(xa).float(), None, None, *[p.detach().float() for p in ps])[0]
    assert y32.dtype == vl.float32
    np.testing.assert_allclose(y32.numpy(), y64, atol=2e-6)


def test_rnn_layer_rejects_bad_nonlinearity():
    rng = np.random.default_rng(8)
    ps = _params("rnn_tanh", rng)
    with pytest.raises(ValueError, match="nonlinearity"):
        R.rnn_layer(vl.zeros(2, 1, I, dtype=vl.float64), None, *ps, nonlinearity="sigmoid")


def test_create_graph_with_one_tensor_passed_twice():
    """Regression (core fix in Function._backward_graph): with create_graph=True a fused op
    whose inputs include the same tensor twice (h0 as both h0 and c0) must give that tensor
    its gradient once, equal to the small-op composite's."""
    from varlens.autograd import grad
    rng = np.random.default_rng(9)
    x = vl.tensor(rng.standard_normal((2, 2, I)), requires_grad=True)
    h0 = vl.tensor(rng.standard_normal((2, H)), requires_grad=True)
    ps = _params("lstm", rng)
    mask = np.array([[1, 1], [1, 0]], dtype=np.float64)
    w = vl.tensor(rng.standard_normal((2, 2, H)))
    a = grad([(R.lstm_layer(x, h0, h0, *ps, mask=mask)[0] * w).sum()], [x, h0] + ps, create_graph=True)
    b = grad([(R._lstm_composite(x, h0, h0, *ps, False, mask)[:2] * w).sum()], [x, h0] + ps, create_graph=True)
    for ga, gb in zip(a, b):
        np.testing.assert_allclose(ga.detach().numpy(), gb.detach().numpy(), rtol=1e-12, atol=1e-14)
    sa = grad([sum((g * g).sum() for g in a)], [h0])[0]
    sb = grad([sum((g * g).sum() for g in b)], [h0])[0]
    np.testing.assert_allclose(sa.numpy(), sb.numpy(), rtol=1e-10, atol=1e-12)
