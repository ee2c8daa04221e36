"""ASGD, as torch.optim.ASGD (PyTorch's single-tensor update; what the optimisers of this
kind share, and the notation below, is in varlens/optim/_single_tensor.py).

ASGD (Polyak & Juditsky 1992, as PyTorch): SGD with a decaying step
``eta_t = lr / (1 + lambd lr t)^alpha`` and a weight decay ``p *= 1 - lambd eta``; it keeps a
running average ``ax`` of the iterates (the average starts once ``t > t0``), stored in
``optimizer.state[p]['ax']``.  ``eta`` and ``mu`` are float32 scalars, as in PyTorch.
"""
from __future__ import annotations

from varlens.core import array as B
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor
from varlens.optim._single_tensor import _grad
from varlens.optim.optimizer import Optimizer, _check_range, _no_differentiable, _zeros_state


class ASGD(Optimizer):
    """Averaged SGD (PyTorch's defaults: lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6,
    weight_decay=0).  The averaged weights are ``optimizer.state[p]['ax']``."""

    _nonnegative = ("weight_decay", "lambd", "alpha")

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0,
                 foreach=None, maximize=False, differentiable=False, capturable=False):
        _no_differentiable("ASGD", differentiable)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        foreach=foreach, maximize=maximize, differentiable=differentiable,
                        capturable=capturable)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_range("ASGD", "t0", group["t0"])

    def _init_param_state(self, st, w, group):
        st["eta"] = Tensor._make(B.xp.asarray(group["lr"], dtype=DT.float32))
        st["mu"] = Tensor._make(B.xp.ones((), dtype=DT.float32))
        _zeros_state(st, w, "ax")

    def step(self, closure=None):
        loss = self._closure(closure)
        f32 = DT.float32
        for group in self.param_groups:
            lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
            wd, maximize = group["weight_decay"], group["maximize"]
            for p, st, t in self._params_with_grad(group):
                g = _grad(p, maximize, wd)
                eta = float(st["eta"]._data)
                mu = float(st["mu"]._data)
                w = p._data
                w *= 1 - lambd * eta
                w += (-eta) * g
                ax = st["ax"]._data
                if mu != 1:
                    ax += (w - ax) * mu
                else:
                    ax[...] = w
                # PyTorch rounds both to float32 even after a load made the state float64
                st["eta"]._data[...] = f32.type(lr / ((1 + lambd * lr * t) ** alpha))
                st["mu"]._data[...] = f32.type(1 / max(1, t - t0))
                p._version[0] += 1
        return loss
