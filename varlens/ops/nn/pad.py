"""Constant padding as one op: the cotangent of the padded output is cropped back."""
from __future__ import annotations
from varlens.core import primitives as D
from varlens.core.function import Function


class ConstantPad(Function):
    """out = x placed in a block of ``value`` (negative pads crop);  dL/dx = g read back at x's
    place (the constant border does not depend on x, so its cotangent is dropped)."""

    def forward(self, x, pads, value=0.0):
        src, dst, shape = [], [], []
        for n, (lo, hi) in zip(x.shape, pads):
            a, b = max(-lo, 0), n - max(-hi, 0)
            ln = max(b - a, 0)
            shape.append(max(n + lo + hi, 0))
            src.append(slice(a, a + ln))
            dst.append(slice(max(lo, 0), max(lo, 0) + ln))
        self.src, self.dst, self.in_shape = tuple(src), tuple(dst), x.shape
        out = self.xp.full(tuple(shape), value, dtype=x.dtype)
        out[self.dst] = x[self.src]
        return out

    def backward(self, g):
        return D.index_scatter(g[self.dst], self.src, self.in_shape)
