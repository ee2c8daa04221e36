"""Whole models trained on the CUDA device against the same models trained on the CPU (issue 21).

Each test builds a model on the CPU (float64, and float32), copies it (same weights) to the
device, and runs a few training steps of both with the same batches and the same optimiser.  The
device run must give the CPU's losses (to 1e-10 in float64) and end with the CPU's weights in the
same dtype, keep every parameter, gradient and optimiser state on cuda:0, and never read a value
on the host inside a training step (``forbid_host_sync``: forward, loss, backward, clipping and
optimiser step).

Without a GPU the device is the simulated array library (varlens/core/simulated_cuda.py), so these
fail whenever any op of the model computes with NumPy, mixes a host array in, or synchronises;
``make test-gpu`` runs the same tests on a real GPU through CuPy (VARLENS_TEST_REAL_CUDA=1).
"""
from __future__ import annotations

import contextlib
import copy

import numpy as np
import pytest

import varlens as vl
import varlens.nn as nn
import varlens.nn.functional as F
from conftest import assert_close

# float64: the same numbers to rounding; float32: the dtype must be kept on the device.  (The
# weights' float32 tolerance is looser than the losses': a parameter whose gradient is zero up to
# rounding, such as attention's key bias, gets Adam steps of noise that differ between any two
# ways of summing.)
TOLS = {"float64": dict(rtol=1e-10, atol=1e-10), "float32": dict(rtol=2e-5, atol=2e-6)}
PARAM_TOLS = {"float64": TOLS["float64"], "float32": dict(rtol=1e-4, atol=1e-4)}
DTYPES = pytest.mark.parametrize("dtype", ["float64", "float32"])


def _cast(model, dtype):
    return model.double() if dtype == "float64" else model.float()


def _to_device(batch):
    return tuple(vl.tensor(a).cuda() for a in batch)


def _to_cpu(batch):
    return tuple(vl.tensor(a) for a in batch)


def _assert_on_device(model, opt):
    for name, p in model.named_parameters():
        assert p.is_cuda, f"parameter {name} left the device: {p.device}"
        assert p.grad is None or p.grad.is_cuda, f"the gradient of {name} is on {p.grad.device}"
    for st in opt.state.values():
        for k, v in st.items():
            if isinstance(v, vl.Tensor) and v.ndim:
                assert v.is_cuda, f"optimiser state {k!r} is on {v.device}"


def _train_both(sim_cuda, model, make_opt, batches, loss_fn, clip=None):
    """Train ``model`` (on the CPU) and a copy of it on the device, step by step; return the
    two lists of losses (floats) and the two models.  ``loss_fn(model, batch, state)`` returns
    (loss, state) so a recurrent model can carry its (detached) state between steps."""
    dev = copy.deepcopy(model).to("cuda")
    runs = {}
    for where, m, move in (("cpu", model, _to_cpu), ("cuda", dev, _to_device)):
        opt = make_opt(m.parameters())
        state, losses = None, []
        for b in batches:
            b = move(b)
            ctx = sim_cuda.forbid_host_sync() if where == "cuda" else contextlib.nullcontext()
            with ctx:   # one whole training step, with no host read on the device
                opt.zero_grad()
                loss, state = loss_fn(m, b, state)
                loss.backward()
                if clip is not None:
                    nn.utils.clip_grad_norm_(m.parameters(), clip)
                opt.step()
            assert loss.is_cuda == (where == "cuda"), f"{where}: the loss is on {loss.device}"
            losses.append(loss.detach())     # read after the step, outside the no-sync block
        if where == "cuda":
            _assert_on_device(m, opt)
        runs[where] = [float(v.cpu()) for v in losses]
    return runs["cpu"], runs["cuda"], model, dev


def _assert_same_training(cpu_losses, dev_losses, cpu_model, dev_model, dtype):
    tol = TOLS[dtype]
    np.testing.assert_allclose(dev_losses, cpu_losses, err_msg="losses on the device vs the CPU", **tol)
    assert cpu_losses[-1] != cpu_losses[0], "the model did not train (the losses did not move)"
    dev_params = dict(dev_model.named_parameters())
    for name, p in cpu_model.named_parameters():
        assert dev_params[name].dtype == np.dtype(dtype), f"{name}: {dev_params[name].dtype} on the device"
        assert_close(dev_params[name], p, what=f"parameter {name} after training", **PARAM_TOLS[dtype])


# ------------------------------------------------------------------- a residual MLP

class ResidualMLP(nn.Module):
    def __init__(self, d_in=6, width=16, n_blocks=2, n_classes=4):
        super().__init__()
        self.inp = nn.Linear(d_in, width)
        self.blocks = nn.ModuleList(
            [nn.Sequential(nn.LayerNorm(width), nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))
             for _ in range(n_blocks)])
        self.out = nn.Linear(width, n_classes)

    def forward(self, x):
        h = F.relu(self.inp(x))
        for b in self.blocks:
            h = h + b(h)
        return self.out(h)


@DTYPES
def test_residual_mlp_trains_on_device_as_on_cpu(sim_cuda, dtype):
    model = _cast(ResidualMLP(), dtype)
    rng = np.random.default_rng(0)
    batches = [(rng.standard_normal((8, 6)).astype(dtype), rng.integers(0, 4, 8)) for _ in range(3)]

    def loss_fn(m, b, state):
        x, y = b
        return F.cross_entropy(m(x), y, label_smoothing=0.1), None

    cl, dl, cm, dm = _train_both(sim_cuda, model,
                                 lambda p: vl.optim.SGD(p, lr=0.1, momentum=0.9, weight_decay=1e-3),
                                 batches, loss_fn, clip=1.0)
    _assert_same_training(cl, dl, cm, dm, dtype)


# ------------------------------------------------------------------- a small CNN

def _small_cnn():
    # (no bias before BatchNorm: its gradient is zero up to rounding, which Adam would blow up to
    # full-size steps of random sign, so that bias would differ between any two ways of summing)
    return nn.Sequential(
        nn.Conv2d(1, 4, 3, padding=1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(4, 6, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(6, 3))


@DTYPES
def test_small_cnn_trains_on_device_as_on_cpu(sim_cuda, dtype):
    model = _cast(_small_cnn(), dtype)
    rng = np.random.default_rng(1)
    batches = [(rng.standard_normal((4, 1, 8, 8)).astype(dtype), rng.integers(0, 3, 4)) for _ in range(3)]

    def loss_fn(m, b, state):
        x, y = b
        return F.cross_entropy(m(x), y), None

    cl, dl, cm, dm = _train_both(sim_cuda, model, lambda p: vl.optim.Adam(p, lr=1e-2), batches, loss_fn)
    _assert_same_training(cl, dl, cm, dm, dtype)
    # BatchNorm's running statistics are buffers: updated on the device, equal to the CPU's
    cb, db = dict(cm.named_buffers()), dict(dm.named_buffers())
    for name, b in cb.items():
        if b.dtype.kind == "f":
            assert db[name].is_cuda, f"buffer {name} is on {db[name].device}"
            assert_close(db[name], b, what=f"buffer {name}", **PARAM_TOLS[dtype])


# ------------------------------------------------------------------- the GPT of varlens/models

@DTYPES
def test_gpt_trains_on_device_as_on_cpu(sim_cuda, dtype):
    from varlens.models.gpt import GPT, GPTConfig
    cfg = GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)
    model = _cast(GPT(cfg), dtype)
    rng = np.random.default_rng(2)
    batches = []
    for _ in range(3):
        x = rng.integers(0, 11, (3, 8))
        batches.append((x, np.roll(x, -1, axis=1)))

    def loss_fn(m, b, state):
        x, y = b
        _, loss = m(x, y)
        return loss, None

    cl, dl, cm, dm = _train_both(sim_cuda, model,
                                 lambda p: vl.optim.AdamW(p, lr=1e-2, weight_decay=0.1), batches, loss_fn,
                                 clip=1.0)
    _assert_same_training(cl, dl, cm, dm, dtype)
    assert dm.lm_head.weight is dm.wte.weight, "moving the GPT to the device untied its weights"


# ------------------------------------------------------------------- a character LSTM

@DTYPES
def test_char_lstm_trains_on_device_as_on_cpu(sim_cuda, dtype):
    """Truncated back-propagation through time: the LSTM's state is carried (detached) from one
    step to the next, so the carried state must stay on the device too."""
    from varlens.models.char_rnn import CharRNN
    model = _cast(CharRNN(vocab_size=10, hidden_size=12, num_layers=2, embed_dim=6, cell="lstm"), dtype)
    rng = np.random.default_rng(3)
    stream = rng.integers(0, 10, (3 * 5 + 1, 4))          # (time, batch) streams
    batches = [(stream[5 * i:5 * i + 5], stream[5 * i + 1:5 * i + 6]) for i in range(3)]

    def loss_fn(m, b, state):
        x, y = b
        if state is not None:
            state = tuple(s.detach() for s in state)
            assert all(s.is_cuda == x.is_cuda for s in state), "the carried state changed device"
        logits, state = m(x, state)
        return F.cross_entropy(logits.reshape(-1, 10), y.reshape(-1)), state

    cl, dl, cm, dm = _train_both(sim_cuda, model, lambda p: vl.optim.Adam(p, lr=3e-2), batches, loss_fn,
                                 clip=5.0)
    _assert_same_training(cl, dl, cm, dm, dtype)


def test_gpt_generates_on_device_as_on_cpu(sim_cuda):
    """Generation with the key/value cache on the device: the same tokens as on the CPU, greedy and
    sampled (the draw is made on the host with the CPU generator, so one seed gives one text)."""
    from varlens.models.gpt import GPT, GPTConfig
    model = GPT(GPTConfig(vocab_size=11, block_size=8, n_layer=2, n_head=2, n_embd=16)).double()
    dev = copy.deepcopy(model).to("cuda")
    start = np.array([[1, 2, 3], [4, 5, 6]])
    for kw in (dict(temperature=0), dict(temperature=0.8, top_k=5, top_p=0.9)):
        vl.manual_seed(7)
        cpu = model.generate(vl.tensor(start), 7, **kw)      # 10 tokens: the cache window restarts once
        vl.manual_seed(7)
        out = dev.generate(vl.tensor(start).cuda(), 7, **kw)
        assert out.is_cuda, f"{kw}: the generated tokens are on {out.device}"
        np.testing.assert_array_equal(out.cpu().numpy(), cpu.numpy(), err_msg=str(kw))
