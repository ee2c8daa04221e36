"""Adamax, as torch.optim.Adamax (PyTorch's single-tensor update; what the optimisers of this
kind share, and the notation below, is in varlens/optim/_single_tensor.py).

Adamax (Kingma & Ba 2015, §7.1): Adam with the L2 norm of the second moment replaced by
an infinity norm, ``u <- max(beta2 u, |g| + eps)``, ``p -= lr / (1 - beta1^t) * m / u``.
"""
from __future__ import annotations

from varlens.optim._single_tensor import _AdamFamily, _betas, _grad
from varlens.optim.optimizer import _lerp_, _no_differentiable, _xp


class Adamax(_AdamFamily):
    """Adamax (PyTorch's defaults: lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0)."""

    _state_keys = ("exp_avg", "exp_inf")

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 foreach=None, *, maximize=False, differentiable=False, capturable=False):
        _no_differentiable("Adamax", differentiable)
        defaults = dict(lr=lr, betas=_betas(betas), eps=eps, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, maximize = group["weight_decay"], group["maximize"]
            for p, st, t in self._params_with_grad(group):
                g = _grad(p, maximize, wd)
                m = _lerp_(st["exp_avg"]._data, g, 1 - beta1)
                u = st["exp_inf"]._data
                u *= beta2
                a = abs(g)
                a += eps
                _xp(u).maximum(u, a, out=u)
                clr = lr / (1 - beta1 ** t)
                p._data += (-clr) * (m / u)
                p._version[0] += 1
        return loss
