"""A multilayer perceptron: Linear layers with an activation between them (seed 003 §1.4).

``MLP(in_features, hidden, out_features)`` builds in -> hidden[0] -> ... -> out, each
hidden layer followed by the activation and, if asked, BatchNorm1d (before the
activation) and Dropout (after it).  The last layer has no activation: it gives logits
for CrossEntropyLoss.

``init`` picks the weight initialisation:
  "pytorch": nn.Linear's own default (uniform, bound 1/sqrt(fan_in)) - the default;
  "he":      N(0, 2/fan_in), the variance-preserving choice for ReLU (seed 001 §3.3);
  "xavier":  N(0, 2/(fan_in + fan_out)) (Glorot);
  "lecun":   N(0, 1/fan_in) (seed 002: where 1/sqrt(d) comes from).
Biases start at zero for every init except "pytorch".
"""
from __future__ import annotations

import math

from varlens import nn
from varlens.autograd import no_grad

INITS = ("pytorch", "he", "xavier", "lecun")
ACTIVATIONS = {"relu": "ReLU", "tanh": "Tanh", "gelu": "GELU", "sigmoid": "Sigmoid"}


def init_linear_(layer, init, generator=None):
    """Re-initialise one Linear layer in place with the named scheme."""
    if init not in INITS:
        raise ValueError(f"init must be one of {INITS}, got {init!r}")
    if init == "pytorch":
        return layer
    fan_out, fan_in = layer.weight.shape
    var = {"he": 2.0 / fan_in, "xavier": 2.0 / (fan_in + fan_out), "lecun": 1.0 / fan_in}[init]
    with no_grad():
        layer.weight.normal_(0.0, math.sqrt(var), generator=generator)
        if layer.bias is not None:
            layer.bias.zero_()
    return layer


class MLP(nn.Module):
    """Fully connected network; input (N, in_features) or (N, ...) flattened, output (N, out_features)."""

    def __init__(self, in_features, hidden=(128,), out_features=10, activation="relu", dropout=0.0,
                 batchnorm=False, init="pytorch", bias=True):
        super().__init__()
        hidden = tuple(int(h) for h in hidden)
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(v, int) or v <= 0:
                raise ValueError(f"MLP: {name} must be a positive int, got {v!r}")
        if any(h <= 0 for h in hidden):
            raise ValueError(f"MLP: hidden sizes must be positive, got {hidden}")
        if activation not in ACTIVATIONS:
            raise ValueError(f"MLP: activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"MLP: dropout must be in [0, 1), got {dropout!r}")
        if init not in INITS:
            raise ValueError(f"MLP: init must be one of {INITS}, got {init!r}")
        self.in_features, self.out_features, self.hidden = in_features, out_features, hidden
        layers = []
        width = in_features
        for h in hidden:
            layers.append(init_linear_(nn.Linear(width, h, bias=bias), init))
            if batchnorm:
                layers.append(nn.BatchNorm1d(h))
            layers.append(getattr(nn, ACTIVATIONS[activation])())
            if dropout:
                layers.append(nn.Dropout(dropout))
            width = h
        layers.append(init_linear_(nn.Linear(width, out_features, bias=bias), init))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        if x.ndim > 2:
            x = x.reshape(x.shape[0], -1)
        return self.net(x)
