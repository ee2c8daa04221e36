"""Convolution, pooling, upsampling, padding and the recurrent layers on the (simulated) CUDA device
(issue 21): each layer runs on the device against the same layer (same weights) on the CPU, float64
and float32, outputs and gradients, with the forward and backward inside ``forbid_host_sync()`` (no
device value is read on the host) and every result on cuda:0.  The CPU path of these layers is held
to PyTorch by tests/test_conv.py, test_pool.py, test_rnn*.py and test_nn_layers.py."""
from __future__ import annotations

import copy

import numpy as np
import pytest

import varlens as vl
import varlens.nn as nn
import varlens.nn.functional as F
from conftest import assert_close

TOL = {np.float64: dict(rtol=1e-10, atol=1e-10), np.float32: dict(rtol=2e-5, atol=2e-5)}
DTYPES = [np.float64, np.float32]


class Fn(nn.Module):
    """A functional call as a module (no parameters)."""

    def __init__(self, f):
        super().__init__()
        self.f = f

    def forward(self, x):
        return self.f(x)


def _first(out):
    """The tensors of a layer's result (RNNs give (output, h_n) or (output, (h_n, c_n)))."""
    if isinstance(out, vl.Tensor):
        return [out]
    res = []
    for o in out:
        res += _first(o)
    return res


def _check_on_device(sim_cuda, make, shape, dtype, inputs=None):
    """The layer ``make()`` on the CPU and a copy of it on the device, same input; outputs, input
    gradient and parameter gradients equal, the device ones on cuda:0, the device forward and
    backward without a host synchronisation."""
    vl.manual_seed(0)
    m = make().to(dtype)
    md = copy.deepcopy(m).cuda()
    rng = np.random.default_rng(0)
    x = vl.tensor(rng.standard_normal(shape).astype(dtype), requires_grad=True)
    xd = x.detach().cuda().requires_grad_(True)
    extra = [] if inputs is None else inputs(rng, dtype)
    extra_d = [e.cuda() if isinstance(e, vl.Tensor) else tuple(t.cuda() for t in e) for e in extra]
    outs = _first(m(x, *extra))
    ws = [vl.tensor(rng.standard_normal(tuple(o.shape)).astype(o.dtype)) for o in outs]
    loss = sum((o * w).sum() for o, w in zip(outs, ws))
    loss.backward()
    ws_d = [w.cuda() for w in ws]
    before = sim_cuda.host_syncs[0]
    with sim_cuda.forbid_host_sync():
        outs_d = _first(md(xd, *extra_d))
        loss_d = sum((o * w).sum() for o, w in zip(outs_d, ws_d))
        loss_d.backward()
    assert sim_cuda.host_syncs[0] == before
    tol = TOL[dtype]
    for i, (od, o) in enumerate(zip(outs_d, outs)):
        assert od.device == vl.device("cuda", 0), f"output {i} is on {od.device}"
        assert od.dtype == o.dtype
        assert_close(od, o, what=f"output {i}", **tol)
    assert xd.grad.is_cuda
    assert_close(xd.grad, x.grad, what="input gradient", **tol)
    for (name, p), pd in zip(m.named_parameters(), md.parameters()):
        assert pd.grad is not None and pd.grad.is_cuda, f"{name}: no device gradient"
        assert_close(pd.grad, p.grad, what=f"gradient of {name}", **tol)


CONV = {
    "conv1d_stride_pad": (lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1), (2, 3, 9)),
    "conv1d_same_reflect": (lambda: nn.Conv1d(3, 4, 4, padding="same", padding_mode="reflect"), (2, 3, 9)),
    "conv1d_dilation_groups": (lambda: nn.Conv1d(4, 6, 3, dilation=2, groups=2), (2, 4, 11)),
    "conv2d_stride1": (lambda: nn.Conv2d(3, 4, 3, padding=1), (2, 3, 7, 6)),
    "conv2d_big_map": (lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1), (2, 2, 24, 22)),
    "conv2d_stride_dilation_groups": (lambda: nn.Conv2d(4, 6, 3, stride=2, dilation=2, padding=1, groups=2),
                                      (2, 4, 9, 9)),
    "conv2d_depthwise_nobias": (lambda: nn.Conv2d(3, 6, (3, 2), groups=3, bias=False), (2, 3, 6, 5)),
    "conv2d_same_circular": (lambda: nn.Conv2d(3, 4, (3, 2), padding="same", padding_mode="circular"),
                             (2, 3, 6, 7)),
    "conv2d_replicate": (lambda: nn.Conv2d(3, 4, 3, padding=(1, 2), padding_mode="replicate"), (2, 3, 5, 6)),
    "conv2d_unbatched": (lambda: nn.Conv2d(3, 4, 3), (3, 6, 6)),
    "conv3d": (lambda: nn.Conv3d(2, 3, 2, stride=(1, 2, 1), padding=1), (2, 2, 4, 5, 4)),
    "conv_transpose1d": (lambda: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1), (2, 3, 7)),
    "conv_transpose2d": (lambda: nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, groups=2), (2, 4, 5, 5)),
    "conv_transpose2d_dilation": (lambda: nn.ConvTranspose2d(3, 2, (2, 3), stride=(1, 2), dilation=2),
                                  (2, 3, 4, 4)),
    "conv_transpose3d": (lambda: nn.ConvTranspose3d(2, 3, 2, stride=(2, 1, 2), padding=(1, 0, 0)), (2, 2, 3, 3, 2)),
}

POOL = {
    "max_pool1d": (lambda: nn.MaxPool1d(3, 2, 1), (2, 3, 9)),
    "max_pool2d_tiled": (lambda: nn.MaxPool2d(2), (2, 3, 8, 6)),
    "max_pool2d_overlap_ceil": (lambda: nn.MaxPool2d(3, 2, 1, ceil_mode=True), (2, 3, 8, 7)),
    "max_pool2d_dilation": (lambda: nn.MaxPool2d(2, 1, dilation=2), (2, 3, 6, 6)),
    "max_pool3d": (lambda: nn.MaxPool3d(2, padding=1), (2, 2, 4, 5, 4)),
    "avg_pool1d": (lambda: nn.AvgPool1d(3, 2, 1), (2, 3, 9)),
    "avg_pool2d": (lambda: nn.AvgPool2d(3, 2, 1, count_include_pad=False), (2, 3, 8, 7)),
    "avg_pool2d_divisor": (lambda: nn.AvgPool2d(2, ceil_mode=True, divisor_override=3), (2, 3, 7, 7)),
    "avg_pool3d": (lambda: nn.AvgPool3d(2, stride=1, padding=1), (2, 2, 4, 3, 4)),
    "adaptive_avg_pool1d": (lambda: nn.AdaptiveAvgPool1d(3), (2, 3, 7)),
    "adaptive_avg_pool2d_global": (lambda: nn.AdaptiveAvgPool2d(1), (2, 3, 5, 5)),
    "adaptive_avg_pool2d": (lambda: nn.AdaptiveAvgPool2d((3, 2)), (2, 3, 5, 7)),
    "adaptive_avg_pool3d": (lambda: nn.AdaptiveAvgPool3d(2), (2, 2, 5, 4, 3)),
    "adaptive_max_pool1d": (lambda: nn.AdaptiveMaxPool1d(3), (2, 3, 7)),
    "adaptive_max_pool2d": (lambda: nn.AdaptiveMaxPool2d((3, 4)), (2, 3, 5, 7)),
    "adaptive_max_pool3d": (lambda: nn.AdaptiveMaxPool3d(2), (2, 2, 5, 4, 3)),
    "lp_pool2d": (lambda: nn.LPPool2d(2, 2), (2, 3, 6, 6)),
    "max_pool_unpool2d": (lambda: Fn(lambda x: F.max_unpool2d(*F.max_pool2d(x, 2, return_indices=True), 2)),
                          (2, 3, 6, 4)),
    "channel_shuffle": (lambda: nn.ChannelShuffle(3), (2, 6, 3, 2)),
    "fractional_max_pool2d": (lambda: Fn(lambda x: F.fractional_max_pool2d(
        x, 2, output_size=(3, 4), _random_samples=vl.tensor(np.linspace(0.1, 0.9, 12).reshape(2, 3, 2)))),
        (2, 3, 7, 8)),
}

RESIZE = {
    "upsample_nearest_x2": (lambda: nn.Upsample(scale_factor=2), (2, 3, 4, 5)),
    "upsample_nearest_size": (lambda: nn.Upsample(size=(7, 9)), (2, 3, 4, 5)),
    "upsample_nearest_exact": (lambda: nn.Upsample(scale_factor=1.5, mode="nearest-exact"), (2, 3, 4, 5)),
    "upsample_nearest_1d": (lambda: nn.Upsample(scale_factor=3), (2, 3, 5)),
    "upsample_linear": (lambda: nn.Upsample(scale_factor=2, mode="linear"), (2, 3, 5)),
    "upsample_bilinear": (lambda: nn.Upsample(scale_factor=2, mode="bilinear"), (2, 3, 4, 5)),
    "upsample_bilinear_corners": (lambda: nn.Upsample(size=(5, 7), mode="bilinear", align_corners=True),
                                  (2, 3, 4, 5)),
    "upsample_bicubic": (lambda: nn.Upsample(scale_factor=2, mode="bicubic"), (2, 3, 4, 5)),
    "upsample_trilinear": (lambda: nn.Upsample(scale_factor=2, mode="trilinear"), (1, 2, 3, 4, 3)),
    "interpolate_area": (lambda: Fn(lambda x: F.interpolate(x, size=(3, 3), mode="area")), (2, 3, 7, 5)),
    "pixel_shuffle": (lambda: nn.PixelShuffle(2), (2, 8, 3, 3)),
    "pixel_unshuffle": (lambda: nn.PixelUnshuffle(2), (2, 2, 4, 6)),
    "unfold": (lambda: nn.Unfold(3, padding=1, stride=2), (2, 3, 6, 7)),
    "fold": (lambda: nn.Fold((5, 6), 2), (2, 12, 20)),
    "fold_stride_pad": (lambda: nn.Fold((6, 5), 3, padding=1, stride=2), (2, 18, 9)),
}

PAD = {
    "pad_constant": (lambda: Fn(lambda x: F.pad(x, (1, 2, 0, 1), value=0.5)), (2, 3, 4, 5)),
    "pad_negative_crop": (lambda: Fn(lambda x: F.pad(x, (-1, 2, 1, -1))), (2, 3, 4, 5)),
    "pad_reflect": (lambda: Fn(lambda x: F.pad(x, (1, 2, 2, 1), mode="reflect")), (2, 3, 4, 5)),
    "pad_replicate": (lambda: Fn(lambda x: F.pad(x, (1, 2, 2, 1), mode="replicate")), (2, 3, 4, 5)),
    "pad_circular": (lambda: Fn(lambda x: F.pad(x, (1, 2, 2, 1), mode="circular")), (2, 3, 4, 5)),
    "zero_pad2d": (lambda: nn.ZeroPad2d((1, 0, 2, 1)), (2, 3, 4, 5)),
    "reflection_pad1d": (lambda: nn.ReflectionPad1d(2), (2, 3, 5)),
    "replication_pad3d": (lambda: nn.ReplicationPad3d(1), (1, 2, 3, 4, 3)),
    "circular_pad2d": (lambda: nn.CircularPad2d((1, 2, 0, 1)), (2, 3, 4, 5)),
}


def _hidden(shape):
    return lambda rng, dt: [vl.tensor(rng.standard_normal(shape).astype(dt))]


def _hc(shape):
    return lambda rng, dt: [(vl.tensor(rng.standard_normal(shape).astype(dt)),
                             vl.tensor(rng.standard_normal(shape).astype(dt)))]


RNN = {
    "rnn_tanh_2layers_bidir_batch_first": (
        lambda: nn.RNN(4, 5, num_layers=2, batch_first=True, bidirectional=True), (3, 6, 4), None),
    "rnn_relu_h0": (lambda: nn.RNN(4, 5, nonlinearity="relu"), (6, 3, 4), _hidden((1, 3, 5))),
    "lstm_2layers_bidir_batch_first": (
        lambda: nn.LSTM(4, 5, num_layers=2, batch_first=True, bidirectional=True, dropout=0.0), (3, 6, 4), None),
    "lstm_h0_c0": (lambda: nn.LSTM(4, 5, num_layers=2), (6, 3, 4), _hc((2, 3, 5))),
    "lstm_no_bias": (lambda: nn.LSTM(3, 4, bias=False), (5, 2, 3), None),
    "gru_2layers_bidir": (lambda: nn.GRU(4, 5, num_layers=2, bidirectional=True), (6, 3, 4), None),
    "gru_unbatched_h0": (lambda: nn.GRU(4, 5), (6, 4), _hidden((1, 5))),
    "rnn_cell": (lambda: nn.RNNCell(4, 5), (3, 4), _hidden((3, 5))),
    "rnn_cell_relu_no_state": (lambda: nn.RNNCell(4, 5, nonlinearity="relu"), (3, 4), None),
    "lstm_cell": (lambda: nn.LSTMCell(4, 5), (3, 4), _hc((3, 5))),
    "lstm_cell_no_state": (lambda: nn.LSTMCell(4, 5), (3, 4), None),
    "gru_cell": (lambda: nn.GRUCell(4, 5), (3, 4), _hidden((3, 5))),
    "gru_cell_unbatched": (lambda: nn.GRUCell(4, 5, bias=False), (4,), None),
}

LAYERS = {**CONV, **POOL, **RESIZE, **PAD}


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("name", list(LAYERS))
def test_layer_on_device_matches_cpu(sim_cuda, name, dtype):
    make, shape = LAYERS[name]
    _check_on_device(sim_cuda, make, shape, dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=["float64", "float32"])
@pytest.mark.parametrize("name", list(RNN))
def test_recurrent_layer_on_device_matches_cpu(sim_cuda, name, dtype):
    make, shape, inputs = RNN[name]
    _check_on_device(sim_cuda, make, shape, dtype, inputs)


def test_max_pool_indices_stay_on_device(sim_cuda):
    x = vl.randn(2, 3, 7, 6, dtype=vl.float64)
    x[0, 0, :3, :3] = 1.0                       # ties: the first maximum wins, on both devices
    with sim_cuda.forbid_host_sync():
        outs_d = [F.max_pool2d(x.cuda(), 3, 2, 1, return_indices=True),
                  F.max_pool2d(x.cuda(), 2, return_indices=True),
                  F.adaptive_max_pool2d(x.cuda(), (3, 2), return_indices=True),
                  F.max_pool1d(x[0].cuda(), 2, return_indices=True)]
    outs = [F.max_pool2d(x, 3, 2, 1, return_indices=True), F.max_pool2d(x, 2, return_indices=True),
            F.adaptive_max_pool2d(x, (3, 2), return_indices=True), F.max_pool1d(x[0], 2, return_indices=True)]
    for (od, idd), (o, idx) in zip(outs_d, outs):
        assert od.is_cuda and idd.is_cuda and idd.dtype == vl.int64
        assert_close(od, o)
        assert_close(idd, idx)


def test_max_pool_nan_wins_on_device(sim_cuda):
    """PyTorch routes a window holding NaN to (the last) NaN; the device scan does the same
    without asking the host whether a NaN is there."""
    x = vl.randn(1, 2, 6, 6, dtype=vl.float64)
    x[0, 0, 1, 2] = float("nan")
    x[0, 1, 4, 4] = float("nan")
    x[0, 1, 5, 5] = float("nan")
    for f in (lambda t: F.max_pool2d(t, 2), lambda t: F.max_pool2d(t, 3, 1, 1)):
        xc, xd = x.clone().requires_grad_(True), x.cuda().requires_grad_(True)
        f(xc).sum().backward()
        with sim_cuda.forbid_host_sync():
            f(xd).sum().backward()
        np.testing.assert_array_equal(xd.grad.cpu().numpy(), xc.grad.numpy())


def test_fractional_max_pool_draws_on_device(sim_cuda):
    x = vl.randn(2, 3, 7, 8).cuda().requires_grad_(True)
    with sim_cuda.forbid_host_sync():
        out, idx = F.fractional_max_pool2d(x, 2, output_ratio=0.5, return_indices=True)
        out.sum().backward()
    assert out.is_cuda and idx.is_cuda and x.grad.is_cuda and tuple(out.shape) == (2, 3, 3, 4)
    assert_close(out, vl.gather(x.detach().reshape(2, 3, -1), 2, idx.reshape(2, 3, -1)).reshape(2, 3, 3, 4))


@pytest.mark.parametrize("mode", ["bilinear", "nearest", "bicubic"])
@pytest.mark.parametrize("padding_mode", ["zeros", "border", "reflection"])
@pytest.mark.parametrize("align_corners", [False, True])
def test_affine_grid_and_grid_sample_on_device(sim_cuda, mode, padding_mode, align_corners):
    rng = np.random.default_rng(0)
    theta = vl.tensor(np.eye(2, 3) + 0.4 * rng.standard_normal((2, 2, 3)), requires_grad=True)
    x = vl.tensor(rng.standard_normal((2, 3, 5, 6)), requires_grad=True)
    thd, xd = (t.detach().cuda().requires_grad_(True) for t in (theta, x))

    def run(th, inp):
        g = F.affine_grid(th, (2, 3, 4, 7), align_corners=align_corners)
        o = F.grid_sample(inp, g, mode=mode, padding_mode=padding_mode, align_corners=align_corners)
        (o * o).sum().backward()
        return o

    o = run(theta, x)
    with sim_cuda.forbid_host_sync():
        od = run(thd, xd)
    for a, b in ((od, o), (xd.grad, x.grad), (thd.grad, theta.grad)):
        assert a.is_cuda
        assert_close(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("layer", [nn.LSTM, nn.GRU, nn.RNN])
def test_packed_sequence_on_device_matches_cpu(sim_cuda, layer):
    """Variable lengths (lengths are host data, as in PyTorch): the mask goes to the device."""
    from varlens.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence
    vl.manual_seed(0)
    m = layer(3, 4, bidirectional=True).double()
    md = copy.deepcopy(m).cuda()
    x = vl.randn(5, 3, 3, dtype=vl.float64, requires_grad=True)
    xd = x.detach().cuda().requires_grad_(True)
    lengths = [5, 3, 2]

    def run(mod, inp):
        out, h = mod(pack_padded_sequence(inp, lengths))
        y, _ = pad_packed_sequence(out, padding_value=-1.0, total_length=6)
        states = list(h) if isinstance(h, tuple) else [h]
        (y.sum() + sum((s * s).sum() for s in states)).backward()
        return [y] + states

    res = run(m, x)
    with sim_cuda.forbid_host_sync():
        res_d = run(md, xd)
    pairs = list(zip(res_d, res)) + [(xd.grad, x.grad), (md.weight_hh_l0_reverse.grad, m.weight_hh_l0_reverse.grad)]
    for a, b in pairs:
        assert a.is_cuda
        assert_close(a, b, rtol=1e-10, atol=1e-12)
    with pytest.raises(RuntimeError, match="CPU int64 tensor"):
        pack_padded_sequence(xd, vl.tensor(lengths).cuda())


@pytest.mark.parametrize("make, shape", [
    (lambda: nn.Conv2d(2, 3, 3, stride=2, padding=1), (2, 2, 6, 6)),
    (lambda: nn.ConvTranspose2d(2, 3, 3, stride=2), (2, 2, 4, 4)),
    (lambda: nn.MaxPool2d(3, 2, 1), (2, 2, 6, 6)),
    (lambda: nn.AvgPool2d(3, 2, 1), (2, 2, 6, 6)),
    (lambda: nn.LSTM(3, 4), (5, 2, 3)),
    (lambda: nn.GRU(3, 4), (5, 2, 3)),
    (lambda: nn.RNN(3, 4), (5, 2, 3)),
], ids=["conv2d", "conv_transpose2d", "max_pool2d", "avg_pool2d", "lstm", "gru", "rnn"])
def test_second_derivatives_on_device(sim_cuda, make, shape):
    """A gradient penalty (the backward differentiated again) runs through the layers' composites,
    on the device without a host read."""
    vl.manual_seed(0)
    m = make().double()
    md = copy.deepcopy(m).cuda()
    x = vl.randn(*shape, dtype=vl.float64, requires_grad=True)
    xd = x.detach().cuda().requires_grad_(True)

    def penalty(mod, inp):
        o = mod(inp)
        o = o[0] if isinstance(o, tuple) else o
        g, = vl.autograd.grad((o * o).sum(), inp, create_graph=True)
        (g * g).sum().backward()

    penalty(m, x)
    with sim_cuda.forbid_host_sync():
        penalty(md, xd)
    assert xd.grad.is_cuda
    assert_close(xd.grad, x.grad, rtol=1e-9, atol=1e-10)


def test_parameters_built_or_reset_on_device_stay_there(sim_cuda):
    m = nn.GRU(3, 4).cuda()
    m.reset_parameters()
    c = nn.LSTMCell(3, 4).cuda()
    c.reset_parameters()
    k = nn.Conv2d(2, 3, 3).cuda()
    k.reset_parameters()
    built = [nn.LSTM(2, 3, device="cuda"), nn.Conv1d(2, 3, 3, device="cuda"), nn.RNNCell(2, 3, device="cuda")]
    params = [p for mod in [m, c, k] + built for p in mod.parameters()]
    assert params and all(p.is_cuda for p in params)


# ------------------------------------------------------------------- training a few steps

def _train(model, batches, loss_of, sim_cuda=None, steps=3):
    opt = vl.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    losses = []
    for x, y in batches[:steps]:
        opt.zero_grad()
        if sim_cuda is None:
            loss = loss_of(model, x, y)
            loss.backward()
            opt.step()
        else:
            with sim_cuda.forbid_host_sync():
                loss = loss_of(model, x.cuda(), y.cuda())
                loss.backward()
                opt.step()
        losses.append(loss.item())
    return losses


def _assert_trained_alike(m, md, losses, losses_d):
    np.testing.assert_allclose(losses_d, losses, rtol=1e-9)
    for (name, p), pd in zip(m.named_parameters(), md.parameters()):
        assert pd.is_cuda, name
        assert_close(pd, p, what=name, rtol=1e-8, atol=1e-10)


def test_lenet_trains_on_device_as_on_cpu(sim_cuda):
    vl.manual_seed(0)
    m = nn.Sequential(
        nn.Conv2d(1, 4, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3), nn.Tanh(), nn.AvgPool2d(2),
        nn.Flatten(), nn.Linear(6 * 2 * 2, 10), nn.ReLU(), nn.Linear(10, 3)).double()
    md = copy.deepcopy(m).cuda()
    rng = np.random.default_rng(0)
    batches = [(vl.tensor(rng.standard_normal((4, 1, 12, 12))), vl.tensor(rng.integers(0, 3, 4)))
               for _ in range(3)]

    def loss_of(model, x, y):
        return F.cross_entropy(model(x), y)

    losses = _train(m, batches, loss_of)
    losses_d = _train(md, batches, loss_of, sim_cuda)
    assert losses[-1] != losses[0]
    _assert_trained_alike(m, md, losses, losses_d)


class _CharGRU(nn.Module):
    def __init__(self, vocab=9, hidden=8):
        super().__init__()
        self.embed = nn.Embedding(vocab, 5)
        self.rnn = nn.GRU(5, hidden, num_layers=2, batch_first=True)
        self.lstm = nn.LSTM(hidden, hidden, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, x):
        h, _ = self.rnn(self.embed(x))
        h, _ = self.lstm(h)
        return self.head(h)


def test_char_rnn_trains_on_device_as_on_cpu(sim_cuda):
    vl.manual_seed(0)
    m = _CharGRU().double()
    md = copy.deepcopy(m).cuda()
    rng = np.random.default_rng(1)
    batches = []
    for _ in range(3):
        s = rng.integers(0, 9, (3, 7))
        batches.append((vl.tensor(s[:, :-1]), vl.tensor(s[:, 1:])))

    def loss_of(model, x, y):
        return F.cross_entropy(model(x).reshape(-1, 9), y.reshape(-1))

    losses = _train(m, batches, loss_of)
    losses_d = _train(md, batches, loss_of, sim_cuda)
    _assert_trained_alike(m, md, losses, losses_d)
