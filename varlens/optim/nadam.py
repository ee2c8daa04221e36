"""NAdam, as torch.optim.NAdam (PyTorch's single-tensor update; what the optimisers of this
kind share, and the notation below, is in varlens/optim/_single_tensor.py).

NAdam (Dozat 2016): Adam whose momentum looks one step ahead.  The momentum coefficient
itself warms up, ``mu_t = beta1 (1 - 0.5 * 0.96^(t * momentum_decay))``, and the step
combines the current gradient and the running mean with the products of the mu's:
``p -= lr (1 - mu_t) / (1 - prod_{i<=t} mu_i) * g / d + lr mu_{t+1} / (1 - prod_{i<=t+1} mu_i) * m / d``
with ``d = sqrt(v / (1 - beta2^t)) + eps``.  PyTorch keeps the product ``mu_product`` in a
float32 scalar; varlens does too, so the step sizes agree bit for bit.
"""
from __future__ import annotations

from varlens.core import array as B
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.optim._single_tensor import _AdamFamily, _betas, _grad, _second_moment_
from varlens.optim.optimizer import _check_range, _lerp_, _no_differentiable, _xp


class NAdam(_AdamFamily):
    """NAdam (PyTorch's defaults: lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
    momentum_decay=4e-3, decoupled_weight_decay=False).  ``decoupled_weight_decay=True`` is
    NAdamW: the weights shrink by ``1 - lr wd`` before the step instead of adding ``wd p`` to g."""

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, foreach=None,
                 maximize=False, capturable=False, differentiable=False):
        _no_differentiable("NAdam", differentiable)
        defaults = dict(lr=lr, betas=_betas(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize,
                        foreach=foreach, capturable=capturable, differentiable=differentiable)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_range("NAdam", "momentum_decay", group["momentum_decay"], 0.0)

    def _init_param_state(self, st, w, group):
        st["mu_product"] = Tensor._make(B.xp.ones((), dtype=DT.float32))
        super()._init_param_state(st, w, group)

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
            wd, psi = group["weight_decay"], group["momentum_decay"]
            decoupled, maximize = group["decoupled_weight_decay"], group["maximize"]
            for p, st, t in self._params_with_grad(group):
                g = _grad(p, maximize, wd, decoupled, lr)
                mu = beta1 * (1.0 - 0.5 * 0.96 ** (t * psi))
                mu_next = beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * psi))
                prod = st["mu_product"]._data
                prod *= mu                          # float32 arithmetic, as PyTorch's state
                prod_t = float(prod)
                m = _lerp_(st["exp_avg"]._data, g, 1 - beta1)
                v = _second_moment_(st["exp_avg_sq"]._data, g, beta2)
                denom = _xp(v).sqrt(v / (1 - beta2 ** t))
                denom += eps
                w = p._data
                w += (-lr * (1.0 - mu) / (1.0 - prod_t)) * (g / denom)
                w += ((-lr * mu_next) / (1.0 - prod_t * mu_next)) * (m / denom)
                p._version[0] += 1
        return loss
