"""RMSprop: divide the step by the root of a running average of squared gradients.

Seed 003 §4.2.3 (eq. 4.2.3): ``r <- alpha r + (1 - alpha) g^2`` and
``p <- p - lr g / (sqrt(r) + eps)`` with ``r_0 = 0`` (the notes call alpha beta).  PyTorch's
RMSprop, which varlens follows, adds ``centered`` (subtract the squared running mean of g,
so the denominator estimates a standard deviation) and a ``momentum`` buffer on the
normalised step.

``bias_correction=True`` (varlens only, seed 003 Remark 4.2.4): since r starts at 0 it is
too small by the factor ``1 - alpha^t`` early on, so divide it (and the centred mean) by
that factor before taking the root, as Adam does.

``eps_inside_sqrt=True`` (varlens only) divides by ``sqrt(r + eps)`` instead of
``sqrt(r) + eps``: with it, RMSprop is exactly the method seed 004 §B.1.2 (Definition 11)
calls "Adadelta" (G = r, gamma = alpha).
"""
from __future__ import annotations

from varlens.optim.optimizer import (Optimizer, _check_range, _lerp_, _new_step,
                                     _no_differentiable, _step_count, _xp)
from varlens.core.tensor import Tensor

__all__ = ["RMSprop"]


class RMSprop(Optimizer):
    """RMSprop (PyTorch's defaults: lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
    centered=False); ``bias_correction`` and ``eps_inside_sqrt`` are the notes' options
    (both off by default, as PyTorch)."""

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False, *, bias_correction=False, eps_inside_sqrt=False):
        _no_differentiable("RMSprop", differentiable)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, capturable=capturable, foreach=foreach,
                        maximize=maximize, differentiable=differentiable)
        # the notes' variants are stored only when used: the keys stay exactly PyTorch's
        if bias_correction:
            defaults["bias_correction"] = True
        if eps_inside_sqrt:
            defaults["eps_inside_sqrt"] = True
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_range("RMSprop", "alpha", group["alpha"], 0.0, 1.0)
        _check_range("RMSprop", "eps", group["eps"], 0.0)
        _check_range("RMSprop", "momentum", group["momentum"], 0.0, 1.0, hi_open=True)
        _check_range("RMSprop", "weight_decay", group["weight_decay"], 0.0)

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
            wd, mu, centered = group["weight_decay"], group["momentum"], group["centered"]
            maximize, bc = group["maximize"], group.get("bias_correction", False)
            inside = group.get("eps_inside_sqrt", False)
            for p in group["params"]:
                if p.grad is None:
                    continue
                w = p._data
                xp = _xp(w)
                root = (lambda a: xp.sqrt(a + eps)) if inside else xp.sqrt
                st = self.state[p]
                if not st:
                    st["step"] = _new_step()
                    st["square_avg"] = Tensor._make(xp.zeros_like(w))
                    if mu > 0:
                        st["momentum_buffer"] = Tensor._make(xp.zeros_like(w))
                    if centered:
                        st["grad_avg"] = Tensor._make(xp.zeros_like(w))
                t = _step_count(st)
                g = p.grad._data
                if maximize:
                    g = -g
                if wd != 0:
                    g = g + wd * w
                sq = st["square_avg"]._data
                sq *= alpha
                sq += (1 - alpha) * g * g     # addcmul's rounding: (value t1) t2
                corr = (1 - alpha ** t) if bc else 1.0
                if centered:
                    ga = _lerp_(st["grad_avg"]._data, g, 1 - alpha)
                    if bc:
                        gh = ga / corr
                        avg = root(sq / corr - gh * gh)
                    else:
                        avg = root(sq - ga * ga)
                else:
                    avg = root(sq / corr) if bc else root(sq)
                if not inside:
                    avg += eps
                if mu > 0:
                    buf = st["momentum_buffer"]._data
                    buf *= mu
                    buf += g / avg
                    w -= lr * buf
                else:
                    w -= lr * g / avg
                p._version[0] += 1
        return loss
