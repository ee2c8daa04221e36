"""Recurrent modules (varlens/nn/rnn.py, varlens/nn/utils/rnn.py): PyTorch parity of
values and gradients for every option, loading PyTorch state_dicts, packed sequences,
finite differences, dropout between layers, errors."""

import numpy as np
import pytest
import torch

import varlens as vl
import varlens.nn as nn
from varlens.autograd import gradcheck
from varlens.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

from conftest import assert_close

KINDS = {"lstm": (nn.LSTM, torch.nn.LSTM, {}), "gru": (nn.GRU, torch.nn.GRU, {}),
         "rnn_tanh": (nn.RNN, torch.nn.RNN, {"nonlinearity": "tanh"}),
         "rnn_relu": (nn.RNN, torch.nn.RNN, {"nonlinearity": "relu"})}


def _pair(kind, *args, **kw):
    """A torch module and a varlens module with the same weights (loaded from torch's state_dict)."""
    vcls, tcls, extra = KINDS[kind]
    tm = tcls(*args, **kw, **extra).double()
    vm = vcls(*args, **kw, **extra).double()
    vm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    return vm, tm


def _compare_grads(vm, tm, what):
    for (n, p), (tn, tp) in zip(vm.named_parameters(), tm.named_parameters()):
        assert n == tn
        assert_close(p.grad, tp.grad, rtol=1e-8, atol=1e-10, what=f"{what} d{n}")


@pytest.mark.parametrize("kind", list(KINDS))
@pytest.mark.parametrize("num_layers,bidirectional,batch_first,with_state,bias",
                         [(1, False, False, False, True), (2, True, True, True, True),
                          (2, False, False, True, False), (1, True, False, False, True)])
def test_layer_parity_with_torch(kind, num_layers, bidirectional, batch_first, with_state, bias):
    I, H, T, B = 3, 4, 5, 2
    vm, tm = _pair(kind, I, H, num_layers=num_layers, bidirectional=bidirectional,
                   batch_first=batch_first, bias=bias)
    assert [n for n, _ in vm.named_parameters()] == [n for n, _ in tm.named_parameters()]
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((B, T, I) if batch_first else (T, B, I))
    D = 2 if bidirectional else 1
    ha = rng.standard_normal((num_layers * D, B, H))
    ca = rng.standard_normal((num_layers * D, B, H))
    x, tx = vl.tensor(xa, requires_grad=True), torch.tensor(xa, requires_grad=True)
    h, th = vl.tensor(ha, requires_grad=True), torch.tensor(ha, requires_grad=True)
    c, tc = vl.tensor(ca, requires_grad=True), torch.tensor(ca, requires_grad=True)
    if kind == "lstm":
        out, (hn, cn) = vm(x, (h, c) if with_state else None)
        tout, (thn, tcn) = tm(tx, (th, tc) if with_state else None)
        outs, touts = [out, hn, cn], [tout, thn, tcn]
    else:
        out, hn = vm(x, h if with_state else None)
        tout, thn = tm(tx, th if with_state else None)
        outs, touts = [out, hn], [tout, thn]
    w = [rng.standard_normal(tuple(o.shape)) for o in outs]
    for o, to, nm in zip(outs, touts, ["output", "h_n", "c_n"]):
        assert_close(o, to, rtol=1e-9, atol=1e-12, what=nm)
    sum((o * vl.tensor(wi)).sum() for o, wi in zip(outs, w)).backward()
    sum((o * torch.tensor(wi)).sum() for o, wi in zip(touts, w)).backward()
    assert_close(x.grad, tx.grad, rtol=1e-8, atol=1e-10, what="dx")
    if with_state:
        assert_close(h.grad, th.grad, rtol=1e-8, atol=1e-10, what="dh0")
        if kind == "lstm":
            assert_close(c.grad, tc.grad, rtol=1e-8, atol=1e-10, what="dc0")
    _compare_grads(vm, tm, kind)


@pytest.mark.parametrize("kind", list(KINDS))
def test_packed_sequence_parity_with_torch(kind):
    I, H, B = 2, 3, 4
    lengths = [5, 3, 2, 1]
    vm, tm = _pair(kind, I, H, num_layers=2, bidirectional=True)
    rng = np.random.default_rng(1)
    xa = rng.standard_normal((5, B, I))
    xa[np.arange(5)[:, None] >= np.array(lengths)[None, :]] = 7.0  # garbage in the padding
    x, tx = vl.tensor(xa, requires_grad=True), torch.tensor(xa, requires_grad=True)
    pv = pack_padded_sequence(x, lengths)
    pt = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths)
    assert_close(pv.data, pt.data, what="packed data")
    assert pv.batch_sizes.tolist() == pt.batch_sizes.tolist()
    ov, hv = vm(pv)
    ot, ht = tm(pt)
    yv, lv = pad_packed_sequence(ov)
    yt, lt = torch.nn.utils.rnn.pad_packed_sequence(ot)
    assert lv.tolist() == lt.tolist()
    assert_close(yv, yt, rtol=1e-9, atol=1e-12, what="padded output")
    hv, ht = (hv[0], ht[0]) if kind == "lstm" else (hv, ht)
    assert_close(hv, ht, rtol=1e-9, atol=1e-12, what="h_n")
    (yv.sum() + (hv * hv).sum()).backward()
    (yt.sum() + (ht * ht).sum()).backward()
    assert_close(x.grad, tx.grad, rtol=1e-8, atol=1e-10, what="dx")
    assert np.all(x.grad.numpy()[xa == 7.0] == 0)
    _compare_grads(vm, tm, kind)


def test_pack_unsorted_and_helpers():
    x = vl.tensor(np.arange(12.0).reshape(3, 4, 1))
    with pytest.raises(RuntimeError, match="sorted"):
        pack_padded_sequence(x, [1, 3, 2, 2])
    p = pack_padded_sequence(x, [1, 3, 2, 2], enforce_sorted=False)
    tp = torch.nn.utils.rnn.pack_padded_sequence(torch.arange(12.0).reshape(3, 4, 1).double(),
                                                 [1, 3, 2, 2], enforce_sorted=False)
    assert_close(p.data, tp.data)
    padded, lens = pad_packed_sequence(p, batch_first=True, padding_value=-1.0, total_length=4)
    tpadded, _ = torch.nn.utils.rnn.pad_packed_sequence(tp, batch_first=True, padding_value=-1.0,
                                                        total_length=4)
    assert_close(padded, tpadded)
    seqs = [vl.ones(2, 3), vl.ones(4, 3)]
    assert tuple(pad_sequence(seqs, batch_first=True).shape) == (2, 4, 3)
    with pytest.raises(ValueError, match="lengths"):
        pack_padded_sequence(x, [3, 2])


@pytest.mark.parametrize("kind", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
def test_cells_parity_and_unbatched(kind):
    I, H, B = 3, 4, 2
    vcls = {"lstm": nn.LSTMCell, "gru": nn.GRUCell}.get(kind, nn.RNNCell)
    tcls = {"lstm": torch.nn.LSTMCell, "gru": torch.nn.GRUCell}.get(kind, torch.nn.RNNCell)
    extra = {"nonlinearity": kind[4:]} if kind.startswith("rnn") else {}
    tm = tcls(I, H, **extra).double()
    vm = vcls(I, H, **extra).double()
    vm.load_state_dict({k: v.detach().numpy() for k, v in tm.state_dict().items()})
    rng = np.random.default_rng(2)
    xs = rng.standard_normal((3, B, I))
    x, tx = vl.tensor(xs, requires_grad=True), torch.tensor(xs, requires_grad=True)
    hv = ht = None
    for t in range(3):  # a 3-step unrolled loop, zero initial state first
        hv = vm(x[t], hv)
        ht = tm(tx[t], ht)
    outs = list(hv) if kind == "lstm" else [hv]
    touts = list(ht) if kind == "lstm" else [ht]
    for o, to in zip(outs, touts):
        assert_close(o, to, rtol=1e-9, atol=1e-12)
    sum((o * o).sum() for o in outs).backward()
    sum((o * o).sum() for o in touts).backward()
    assert_close(x.grad, tx.grad, rtol=1e-8, atol=1e-10)
    _compare_grads(vm, tm, kind)
    u = vm(vl.tensor(xs[0, 0]))
    tu = tm(torch.tensor(xs[0, 0]))
    assert_close(u[0] if kind == "lstm" else u, tu[0] if kind == "lstm" else tu, rtol=1e-9, atol=1e-12)


def test_unbatched_layer_matches_torch():
    vm, tm = _pair("gru", 2, 3, num_layers=2, bidirectional=True)
    xa = np.random.default_rng(3).standard_normal((4, 2))
    ov, hv = vm(vl.tensor(xa))
    ot, ht = tm(torch.tensor(xa))
    assert_close(ov, ot, rtol=1e-9, atol=1e-12)
    assert_close(hv, ht, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", list(KINDS))
def test_module_gradcheck(kind):
    vcls, _, extra = KINDS[kind]
    m = vcls(2, 2, num_layers=2, bidirectional=True, **extra).double()
    x = vl.tensor(np.random.default_rng(4).standard_normal((3, 2, 2)), requires_grad=True)
    h0 = vl.tensor(np.random.default_rng(5).standard_normal((4, 2, 2)) * 0.5, requires_grad=True)
    ps = list(m.parameters())

    def f(x_, h_, *_):
        return m(x_, (h_, h_))[0] if kind == "lstm" else m(x_, h_)[0]
    gradcheck(f, [x, h0] + ps)


def test_all_weights_matches_torch_layout():
    vm, tm = _pair("gru", 3, 4, num_layers=2, bidirectional=True)
    vm.flatten_parameters()
    assert [[tuple(w.shape) for w in ws] for ws in vm.all_weights] == \
        [[tuple(w.shape) for w in ws] for ws in tm.all_weights]
    for vws, tws in zip(vm.all_weights, tm.all_weights):
        for v, t in zip(vws, tws):
            assert_close(v, t)


def test_init_and_parameter_count():
    torch_sd = torch.nn.LSTM(5, 8).state_dict()
    m = nn.LSTM(5, 8)
    for k, v in m.state_dict().items():
        assert tuple(v.shape) == tuple(torch_sd[k].shape)
        assert v.dtype == vl.float32
        assert np.abs(v.numpy()).max() <= 1 / np.sqrt(8)
    big = nn.LSTM(64, 64)
    w = big.weight_hh_l0.detach().numpy()
    assert abs(w.std() - (1 / 8) / np.sqrt(3)) < 0.01  # U(-a, a) has std a/sqrt(3)
    # 4 (d_x d_h + d_h^2 + d_h) (seed 003 §6.1.3) plus PyTorch's second bias 4 d_h
    assert sum(p.numel() for p in m.parameters()) == 4 * (5 * 8 + 8 * 8 + 8) + 4 * 8
    assert sum(p.numel() for p in nn.RNN(5, 8, bias=False).parameters()) == 8 * 8 + 5 * 8


def test_dropout_between_layers():
    vm, tm = _pair("lstm", 3, 4, num_layers=3, dropout=0.5)
    x = vl.tensor(np.random.default_rng(6).standard_normal((6, 2, 3)))
    vm.eval()
    tm.eval()
    with vl.no_grad():
        ov = vm(x)[0].numpy()
        assert_close(ov, tm(torch.tensor(x.numpy()))[0], rtol=1e-9, atol=1e-12)
        vm.train()
        vl.manual_seed(1)
        o1 = vm(x)[0].numpy()
        o2 = vm(x)[0].numpy()
        assert not np.allclose(o1, ov)  # dropout is active in training
        assert not np.allclose(o1, o2)  # and random
        vm0 = nn.LSTM(3, 4, num_layers=1, dropout=0.5)  # one layer: nothing to drop between
        vm0.train()
        assert np.array_equal(vm0(x.float())[0].numpy(), vm0(x.float())[0].numpy())


def test_bad_arguments_raise_clear_errors():
    m = nn.LSTM(3, 4, num_layers=2)
    with pytest.raises(RuntimeError, match="input_size. Expected 3, got 5"):
        m(vl.randn(2, 1, 5))
    with pytest.raises(RuntimeError, match="h_0 size"):
        m(vl.randn(2, 1, 3), (vl.zeros(1, 1, 4), vl.zeros(2, 1, 4)))
    with pytest.raises(TypeError, match="tuple"):
        m(vl.randn(2, 1, 3), vl.zeros(2, 1, 4))
    with pytest.raises(ValueError, match="2D or 3D"):
        m(vl.randn(3))
    with pytest.raises(ValueError, match="dropout"):
        nn.GRU(3, 4, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size"):
        nn.RNN(3, 0)
    with pytest.raises(ValueError, match="nonlinearity"):
        nn.RNN(3, 4, nonlinearity="sigmoid")
    with pytest.raises(NotImplementedError, match="proj_size"):
        nn.LSTM(3, 4, proj_size=2)
    with pytest.raises(TypeError, match="dtype"):
        m(vl.randn(2, 1, 3).double())
    with pytest.raises(RuntimeError, match="input_size"):
        nn.GRUCell(3, 4)(vl.randn(2, 2))


def test_load_state_dict_gives_same_outputs_float32():
    """A float32 torch LSTM state_dict, converted to NumPy, loads into varlens."""
    tm = torch.nn.LSTM(6, 5, num_layers=2, bidirectional=True, batch_first=True)
    vm = nn.LSTM(6, 5, num_layers=2, bidirectional=True, batch_first=True)
    vm.load_state_dict({k: v.numpy() for k, v in tm.state_dict().items()})
    xa = np.random.default_rng(7).standard_normal((3, 7, 6)).astype(np.float32)
    ov = vm(vl.tensor(xa))[0]
    with torch.no_grad():
        ot = tm(torch.tensor(xa))[0]
    assert_close(ov, ot, rtol=1e-4, atol=1e-6)
