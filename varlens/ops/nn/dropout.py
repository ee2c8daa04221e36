"""Dropout as one op: out = x * m with a precomputed mask m (0 or 1/(1-p));  d/dx = m."""
from __future__ import annotations
from varlens.core.function import Function


# ---------------------------------------------------------------- dropout, embedding, padding
class MaskMul(Function):
    """out = x * m for a constant (already scaled) dropout mask m;  dL/dx = g * m.
    Inverted dropout: m = Bernoulli(1 - p) / (1 - p) (seed 001 §1.1, seed 003 §4.1.2)."""

    def forward(self, x, m):
        self.m = m
        return x * m

    def backward(self, g):
        return g * self.m, None
