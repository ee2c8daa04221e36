"""Adagrad: per-weight step sizes from the running *sum* of squared gradients.

Seed 004 §B.1.3 describes it in words (sum the squared gradients instead of averaging
them; the sum keeps growing so the steps keep shrinking).  The update, as PyTorch's:

    clr = lr / (1 + (t - 1) lr_decay)
    G  <- G + g^2                (G starts at initial_accumulator_value)
    p  <- p - clr g / (sqrt(G) + eps)
"""
from __future__ import annotations

from varlens.optim.optimizer import (Optimizer, _check_range, _new_step, _no_differentiable,
                                     _step_count, _xp)
from varlens.core.tensor import Tensor

__all__ = ["Adagrad"]


class Adagrad(Optimizer):
    """Adagrad (PyTorch's defaults: lr=1e-2, lr_decay=0, weight_decay=0,
    initial_accumulator_value=0, eps=1e-10).  State is created at construction, as PyTorch."""

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _no_differentiable("Adagrad", differentiable)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, foreach=foreach,
                        maximize=maximize, differentiable=differentiable, fused=fused)
        super().__init__(params, defaults)

    def add_param_group(self, param_group):
        super().add_param_group(param_group)
        self._init_state(self.param_groups[-1])   # PyTorch's Adagrad makes its state up front

    def share_memory(self):
        """PyTorch moves the sums into shared memory for multi-process training; varlens runs
        in one process, so this does nothing."""

    def _init_state(self, group):
        v = group["initial_accumulator_value"]
        for p in group["params"]:
            st = self.state[p]
            if not st:
                st["step"] = _new_step()
                st["sum"] = Tensor._make(_xp(p._data).full_like(p._data, v))

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_range("Adagrad", "lr_decay", group["lr_decay"], 0.0)
        _check_range("Adagrad", "weight_decay", group["weight_decay"], 0.0)
        _check_range("Adagrad", "initial_accumulator_value", group["initial_accumulator_value"], 0.0)
        _check_range("Adagrad", "eps", group["eps"], 0.0)

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, lr_decay, wd, eps = group["lr"], group["lr_decay"], group["weight_decay"], group["eps"]
            maximize = group["maximize"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                st = self.state[p]
                if not st:
                    self._init_state(group)
                g = p.grad._data
                w = p._data
                t = _step_count(st)
                if maximize:
                    g = -g
                if wd != 0:
                    g = g + wd * w
                clr = lr / (1 + (t - 1) * lr_decay)
                s = st["sum"]._data
                s += g * g
                std = _xp(s).sqrt(s)
                std += eps
                w -= clr * g / std
                p._version[0] += 1
        return loss
