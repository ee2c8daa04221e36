"""Binary cross-entropy on probabilities as one op, with PyTorch's boundary behaviour.

Forward: -w [y max(log x, -100) + (1 - y) max(log(1 - x), -100)] (PyTorch clamps each log at
-100, so p = 0 or 1 gives a finite loss).

Backward: PyTorch does not differentiate the clamped expression (whose derivative at x = 0 is
0 * inf = NaN); it uses the closed form d/dx = w (x - y) / max(x (1 - x), 1e-12), which is the
derivative of the unclamped loss, -y/x + (1 - y)/(1 - x) = (x - y) / (x (1 - x)), with the
denominator kept away from 0.  So a correct prediction at the boundary (x = y = 0 or 1) gets
gradient 0 and a wrong one a large finite value (1e12).  d/dy = w [log(1 - x) - log x]
(unclamped, as PyTorch).  Second derivatives go through ``composite`` (the clamped expression).
"""
from __future__ import annotations

from varlens.core.array import xp
from varlens.core.function import Function
from varlens.ops.pointwise import clamp, log

EPSILON = 1e-12     # PyTorch's floor on x (1 - x) in the gradient


def _logs(x, xp=xp):
    with xp.errstate(divide="ignore"):
        return xp.maximum(xp.log(x), -100.0), xp.maximum(xp.log1p(-x), -100.0)


class BinaryCrossEntropy(Function):
    """Elementwise binary cross-entropy of probabilities ``x`` against targets ``y`` (times ``w``)."""

    differentiable_backward = False

    def forward(self, x, y, w=None):
        lx, l1x = _logs(x, self.xp)
        out = -(y * lx + (1 - y) * l1x)
        if w is not None:
            out = out * w
        self.save_for_backward(x, y, w)
        return out.astype(x.dtype, copy=False)

    def backward(self, g):
        """d/dx = w (x - y) / max(x (1 - x), 1e-12) (PyTorch's form, finite at x = 0 and 1);
        d/dy = w (log(1 - x) - log x)."""
        xp = self.xp
        x, y, w = self.saved
        gx = gy = None
        if self.next[0] is not None:
            gx = g * (x - y) / xp.maximum(x * (1 - x), EPSILON)
            if w is not None:
                gx = gx * w
        if self.next[1] is not None:
            with xp.errstate(divide="ignore"):
                gy = g * (xp.log1p(-x) - xp.log(x))     # unclamped, as PyTorch's target gradient
            if w is not None:
                gy = gy * w
        return gx, gy, None

    @staticmethod
    def composite(x, y, w=None):
        out = -(y * clamp(log(x), min=-100.0) + (1 - y) * clamp(log(1 - x), min=-100.0))
        return out if w is None else out * w
