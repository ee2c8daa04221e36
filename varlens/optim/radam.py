"""RAdam, as torch.optim.RAdam (PyTorch's single-tensor update; what the optimisers of this
kind share, and the notation below, is in varlens/optim/_single_tensor.py).

RAdam (Liu et al. 2019): Adam whose adaptive denominator is switched on only once the
variance of the running average v is tractable.  With ``rho_inf = 2/(1 - beta2) - 1`` and
``rho_t = rho_inf - 2 t beta2^t / (1 - beta2^t)``: while ``rho_t <= 5`` the step is plain
momentum SGD with bias-corrected m; afterwards it is Adam's step times the rectifier
``r_t = sqrt((rho_t - 4)(rho_t - 2) rho_inf / ((rho_inf - 4)(rho_inf - 2) rho_t))``.
"""
from __future__ import annotations

from varlens.optim._single_tensor import _AdamFamily, _betas, _grad, _second_moment_
from varlens.optim.optimizer import _lerp_, _no_differentiable, _xp


class RAdam(_AdamFamily):
    """RAdam (PyTorch's defaults: lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    decoupled_weight_decay=False); the adaptive term is used once ``rho_t > 5``."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, foreach=None, maximize=False,
                 capturable=False, differentiable=False):
        _no_differentiable("RAdam", differentiable)
        defaults = dict(lr=lr, betas=_betas(betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize, foreach=foreach, capturable=capturable,
                        decoupled_weight_decay=decoupled_weight_decay,
                        differentiable=differentiable)
        super().__init__(params, defaults)

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, decoupled, maximize = (group["weight_decay"], group["decoupled_weight_decay"],
                                       group["maximize"])
            rho_inf = 2 / (1 - beta2) - 1
            for p, st, t in self._params_with_grad(group):
                g = _grad(p, maximize, wd, decoupled, lr)
                m = _lerp_(st["exp_avg"]._data, g, 1 - beta1)
                v = _second_moment_(st["exp_avg_sq"]._data, g, beta2)
                bc1 = 1 - beta1 ** t
                bc2 = 1 - beta2 ** t
                upd = m / bc1
                upd *= lr
                rho_t = rho_inf - 2 * t * (beta2 ** t) / bc2
                if rho_t > 5.0:
                    rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                            / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
                    root = _xp(v).sqrt(v)
                    root += eps
                    upd *= (bc2 ** 0.5) / root
                    upd *= rect
                p._data -= upd
                p._version[0] += 1
        return loss
