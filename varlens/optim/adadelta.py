"""Adadelta as Zeiler (2012) defined it, and as PyTorch implements it.

Two running averages with the same decay rho: of squared gradients, ``E[g^2]``, and of
squared updates, ``E[dx^2]``.  The step is ``dx = sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) * g``
(the ratio of the two RMS values gives the step the units of the parameter), then
``E[dx^2] <- rho E[dx^2] + (1 - rho) dx^2`` and ``p <- p - lr dx`` (lr = 1 by default).

Naming note: what seed 004 §B.1.2 (Definition 11) calls "Adadelta" -- one running average
of squared gradients with eps inside the root, ``p <- p - lr g / sqrt(G + eps)`` -- is
RMSprop with eps inside the root (``varlens.optim.RMSprop(..., eps_inside_sqrt=True)``); it
has no second running average.
"""
from __future__ import annotations

from varlens.ops.kernels import optim as _KO
from varlens.optim.optimizer import (Optimizer, _check_range, _new_step, _no_differentiable,
                                     _step_count, _xp)
from varlens.core.tensor import Tensor

__all__ = ["Adadelta"]


class Adadelta(Optimizer):
    """Adadelta (PyTorch's defaults: lr=1.0, rho=0.9, eps=1e-6, weight_decay=0)."""

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _no_differentiable("Adadelta", differentiable)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize,
                        capturable=capturable, foreach=foreach, differentiable=differentiable)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_range("Adadelta", "rho", group["rho"], 0.0, 1.0)
        _check_range("Adadelta", "eps", group["eps"], 0.0)
        _check_range("Adadelta", "weight_decay", group["weight_decay"], 0.0)

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, rho, eps, wd = group["lr"], group["rho"], group["eps"], group["weight_decay"]
            maximize = group["maximize"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                w = p._data
                xp = _xp(w)
                st = self.state[p]
                if not st:
                    st["step"] = _new_step()
                    st["square_avg"] = Tensor._make(xp.zeros_like(w))
                    st["acc_delta"] = Tensor._make(xp.zeros_like(w))
                _step_count(st)
                g = p.grad._data
                if maximize:
                    g = -g
                if wd != 0:
                    g = g + wd * w
                sq = st["square_avg"]._data
                acc = st["acc_delta"]._data
                if _KO.adadelta_step(w, p.grad._data, sq, acc, lr, rho, eps, wd, maximize):
                    p._version[0] += 1  # float32: one compiled pass (ops/kernels/optim.py)
                    continue
                sq *= rho
                sq += (1 - rho) * g * g
                std = xp.sqrt(sq + eps)
                delta = xp.sqrt(acc + eps)
                delta /= std
                delta *= g
                acc *= rho
                acc += (1 - rho) * delta * delta
                w -= lr * delta
                p._version[0] += 1
        return loss
