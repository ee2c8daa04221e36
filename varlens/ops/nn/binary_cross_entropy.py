"""Binary cross-entropy on probabilities as one op, with PyTorch's boundary behaviour.

Forward: -w [y max(log x, -100) + (1 - y) max(log(1 - x), -100)] (PyTorch clamps each log at
-100, so p = 0 or 1 gives a finite loss).

Backward: PyTorch does not differentiate the clamped expression (whose derivative at x = 0 is
0 * inf = NaN); it uses the closed form d/dx = w (x - y) / max(x (1 - x), 1e-12), which is the
derivative of the unclamped loss, -y/x + (1 - y)/(1 - x) = (x - y) / (x (1 - x)), with the
denominator kept away from 0.  So a correct prediction at the boundary (x = y = 0 or 1) gets
gradient 0 and a wrong one a large finite value (1e12).  d/dy = w [log(1 - x) - log x]
(unclamped, as PyTorch).  The reduction is folded into the same node (PyTorch's
BinaryCrossEntropyBackward0), and backward is built from the saved inputs with operators, a
clamp and logs, so create_graph records it: its derivative in x is PyTorch's double backward,
d/dx [(x - y) / x (1 - x)] = (x^2 - 2 x y + y) / (x (1 - x))^2 inside the clamp.
"""
from __future__ import annotations

from varlens.core.array import xp
from varlens.core.function import Function
from varlens.core.tensor import Tensor
from varlens.ops.nn.loss import loss_grad_scale, reduce_loss
from varlens.ops.pointwise import clamp, log

EPSILON = 1e-12     # PyTorch's floor on x (1 - x) in the gradient


def _logs(x, xp=xp):
    with xp.errstate(divide="ignore"):
        return xp.maximum(xp.log(x), -100.0), xp.maximum(xp.log1p(-x), -100.0)


class BinaryCrossEntropy(Function):
    """Binary cross-entropy of probabilities ``x`` against targets ``y`` (times the constant
    weight array ``w``, broadcast), reduced by ``reduction``."""

    def forward(self, x, y, w=None, reduction="mean"):
        lx, l1x = _logs(x, self.xp)
        out = -(y * lx + (1 - y) * l1x)
        if w is not None:
            out = out * w
        self.save_for_backward(x, y)
        self.w = w
        return reduce_loss(self, out.astype(x.dtype, copy=False), reduction)

    def backward(self, g):
        """d/dx = w (x - y) / max(x (1 - x), 1e-12) (PyTorch's form, finite at x = 0 and 1);
        d/dy = w (log(1 - x) - log x); each times g (g / n for 'mean')."""
        xp = self.xp
        x, y = self.saved
        w = self.w
        g = loss_grad_scale(self, g)
        graph = isinstance(x, Tensor)     # create_graph: Tensors in, recorded ops
        gx = gy = None
        if self.next[0] is not None:
            den = x * (1 - x)
            den = clamp(den, min=EPSILON) if graph else xp.maximum(den, EPSILON)
            gx = g * (x - y) / den
            if w is not None:
                gx = gx * w
        if self.next[1] is not None:
            if graph:
                gy = g * (log(1 - x) - log(x))
            else:
                with xp.errstate(divide="ignore"):
                    gy = g * (xp.log1p(-x) - xp.log(x))     # unclamped, as PyTorch's target gradient
            if w is not None:
                gy = gy * w
        return gx, gy, None
