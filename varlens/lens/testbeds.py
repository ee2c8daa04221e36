"""Healthy networks and a planted fault, for calibrating the lens's verdicts.

``build(family, width, depth, seed)`` gives a He-initialised network of one family ('mlp',
'cnn', 'resnet', 'transformer' (pre-LN), 'functional' (an MLP written with F.relu)) and an
input batch; ``run(model, x)`` runs one forward/backward pass under a Lens with a fixed
Gaussian projection loss and returns (lens, rows).  ``Scaled`` is a Linear that quietly
multiplies its output by a constant: the fault the verdicts must catch.  The false-alarm
and detection figures in docs/lens.md come from these (benchmarks/lens_false_alarms.py;
tests/test_lens_verdicts.py asserts them at small sizes).
"""
from __future__ import annotations

import math

import numpy as np

import varlens as vl
from varlens import nn
from varlens.lens.compare import compare, flagged
from varlens.lens.probes import Lens

F = nn.functional


class Scaled(nn.Linear):
    """A Linear whose output is multiplied by ``factor`` (1.25: E[y^2] grows by 1.5625)."""

    def __init__(self, fan_in, fan_out, factor=1.25, bias=True):
        super().__init__(fan_in, fan_out, bias=bias)
        self.factor = factor

    def forward(self, x):
        return super().forward(x) * self.factor


def _he(layer, gen, gain=2.0):
    w = layer.weight
    fan_in = math.prod(w.shape[1:])
    layer.weight._data = (gen.standard_normal(w.shape) * math.sqrt(gain / fan_in)).astype(np.float32)
    if getattr(layer, "bias", None) is not None:
        layer.bias._data = np.zeros(layer.bias.shape, np.float32)
    return layer


class FunctionalMLP(nn.Module):
    """An MLP whose activations are F.relu calls inside forward (no activation modules)."""

    def __init__(self, width, depth, gen, fault_at=None, factor=1.25):
        super().__init__()
        self.layers = nn.ModuleList([
            _he(Scaled(width, width, factor) if i == fault_at else nn.Linear(width, width), gen)
            for i in range(depth)])

    def forward(self, x):
        for i, lin in enumerate(self.layers):
            x = lin(x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


class ResBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus the identity skip, then ReLU (He et al. 2016's basic block)."""

    def __init__(self, c, gen):
        super().__init__()
        self.conv1 = _he(nn.Conv2d(c, c, 3, padding=1, bias=False), gen)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = _he(nn.Conv2d(c, c, 3, padding=1, bias=False), gen)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x):
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + x)


class PreLNBlock(nn.Module):
    """x + attn(LN(x)), then x + MLP(LN(x)) with GELU (the pre-LN Transformer block)."""

    def __init__(self, d, heads, gen):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, batch_first=True)
        self.ln2 = nn.LayerNorm(d)
        self.fc1 = _he(nn.Linear(d, 4 * d), gen, 1.0)
        self.fc2 = _he(nn.Linear(4 * d, d), gen, 1.0)

    def forward(self, x):
        h = self.ln1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class PreLN(nn.Module):
    def __init__(self, d, depth, heads, gen):
        super().__init__()
        self.blocks = nn.ModuleList([PreLNBlock(d, heads, gen) for _ in range(depth)])
        self.ln_f = nn.LayerNorm(d)

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return self.ln_f(x)


def build(family, width=64, depth=4, seed=0, batch=32, fault_at=None, factor=1.25):
    """(model, input) of one family, He-initialised from ``seed`` (fault: ``Scaled`` at layer
    ``fault_at`` of the MLP families)."""
    gen = np.random.default_rng(seed)
    vl.manual_seed(seed)
    if family == "mlp":
        layers = []
        for i in range(depth):
            lin = Scaled(width, width, factor) if i == fault_at else nn.Linear(width, width)
            layers.append(_he(lin, gen))
            if i < depth - 1:
                layers.append(nn.ReLU())
        model = nn.Sequential(*layers)
        x = gen.standard_normal((batch, width))
    elif family == "functional":
        model = FunctionalMLP(width, depth, gen, fault_at, factor)
        x = gen.standard_normal((batch, width))
    elif family == "cnn":
        layers = [_he(nn.Conv2d(3, width, 3, padding=1), gen), nn.ReLU()]
        for _ in range(depth - 1):
            layers += [_he(nn.Conv2d(width, width, 3, padding=1), gen), nn.ReLU()]
        layers += [nn.AvgPool2d(2), nn.Flatten(), _he(nn.Linear(width * 16, 10), gen, 1.0)]
        model = nn.Sequential(*layers)
        x = gen.standard_normal((batch, 3, 8, 8))
    elif family == "resnet":
        model = nn.Sequential(_he(nn.Conv2d(3, width, 3, padding=1, bias=False), gen), nn.BatchNorm2d(width),
                              nn.ReLU(), *[ResBlock(width, gen) for _ in range(depth)],
                              nn.AdaptiveAvgPool2d(1), nn.Flatten(), _he(nn.Linear(width, 10), gen, 1.0))
        x = gen.standard_normal((batch, 3, 8, 8))
    elif family == "transformer":
        model = PreLN(width, depth, 4, gen)
        x = gen.standard_normal((batch, 16, width))
    else:
        raise ValueError(f"build: family must be mlp, functional, cnn, resnet or transformer, got {family!r}")
    return model, vl.tensor(x.astype(np.float32))


def run(model, x, steps=1, level="module", **lens_kw):
    """One forward/backward per step under a Lens, loss = sum(out * R)/rows with a fixed
    Gaussian R; returns (lens, rows)."""
    lens = Lens(model, **lens_kw)
    try:
        for s in range(steps):
            out = model(x)
            R = np.random.default_rng(1000 + s).standard_normal(tuple(out.shape)).astype(np.float32)
            loss = (out * vl.tensor(R)).sum() / out.shape[0]
            loss.backward()
            lens.step()
            model.zero_grad()
    finally:
        lens.detach()
    return lens, compare(lens, level=level)


def false_alarm_rate(family, seeds=(0, 1, 2), **kw):
    """(flagged rows, rows) over ``seeds`` for a healthy network of ``family``."""
    n_flag = n = 0
    for s in seeds:
        model, x = build(family, seed=s, **kw)
        _, rows = run(model, x)
        n_flag += len(flagged(rows))
        n += len(rows)
    return n_flag, n


def detects(seed, width=256, depth=10, fault_at=None, factor=1.25, family="mlp", batch=64):
    """True if a ``Scaled`` layer (at ``fault_at``, else a layer drawn from ``seed``) gets the
    verdict 'drift' in the forward pass; returns (caught, fault layer, its row)."""
    if fault_at is None:
        fault_at = int(np.random.default_rng(10_000 + seed).integers(depth))
    model, x = build(family, width, depth, seed, batch, fault_at, factor)
    _, rows = run(model, x)
    key = str(2 * fault_at) if family == "mlp" else f"layers.{fault_at}"
    row = next(r for r in rows if r.key == key and r.direction == "forward")
    return row.verdict == "drift", fault_at, row
