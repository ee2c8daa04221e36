"""Dropout layers: inverted dropout (p = drop probability, as PyTorch and seed 001 §1.1), channel
dropout, alpha dropout.
"""
from __future__ import annotations

from varlens.nn import functional as F
from varlens.nn.module import Module


class _DropoutNd(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
            raise ValueError(f"{type(self).__name__}: dropout probability has to be between 0 and 1, but got {p!r}")
        self.p, self.inplace = float(p), inplace

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"


class Dropout(_DropoutNd):
    """In training, zero each element with probability ``p`` and scale survivors by 1/(1-p)
    (inverted dropout: E[output] = input, so eval mode is the identity).

    ``p`` is the DROP probability (PyTorch, seed 001 §1.1).  Seed 003 §4.1.2 writes p for the
    KEEP probability; pass ``keep_prob=`` to use that convention (p = 1 - keep_prob)."""

    def __init__(self, p=0.5, inplace=False, *, keep_prob=None):
        if keep_prob is not None:
            if p != 0.5:
                raise ValueError("Dropout: give either p (drop probability) or keep_prob, not both")
            if not 0.0 <= keep_prob <= 1.0:
                raise ValueError(f"Dropout: keep_prob must be in [0, 1], got {keep_prob!r}")
            p = 1.0 - keep_prob
        super().__init__(p, inplace)

    def forward(self, input):
        return F.dropout(input, self.p, self.training)


class Dropout1d(_DropoutNd):
    def forward(self, input):
        return F.dropout1d(input, self.p, self.training)


class Dropout2d(_DropoutNd):
    """Zeroes whole channels of (N, C, H, W) inputs with probability p (scaled by 1/(1-p))."""

    def forward(self, input):
        return F.dropout2d(input, self.p, self.training)


class Dropout3d(_DropoutNd):
    def forward(self, input):
        return F.dropout3d(input, self.p, self.training)


class AlphaDropout(_DropoutNd):
    """Dropout for SELU networks (keeps mean 0 and variance 1)."""

    def forward(self, input):
        return F.alpha_dropout(input, self.p, self.training)


class FeatureAlphaDropout(Module):
    def __init__(self, p=0.5, inplace=False):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"FeatureAlphaDropout: dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.feature_alpha_dropout(input, self.p, self.training)

    def extra_repr(self):
        return f"p={self.p}, inplace={self.inplace}"
