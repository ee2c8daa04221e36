"""Rprop, as torch.optim.Rprop (PyTorch's single-tensor update; what the optimisers of this
kind share, and the notation below, is in varlens/optim/_single_tensor.py).

Rprop (Riedmiller & Braun 1993): only the sign of g is used.  Each weight has its own step
size, multiplied by ``etaplus`` when g kept its sign, by ``etaminus`` when it flipped (and
that step then skipped), clipped to ``step_sizes``; ``p -= sign(g) * step_size``.
"""
from __future__ import annotations

from varlens.core.tensor import Tensor
from varlens.optim._single_tensor import _betas, _grad
from varlens.optim.optimizer import Optimizer, _check_range, _no_differentiable, _xp, _zeros_state


class Rprop(Optimizer):
    """Resilient backpropagation (PyTorch's defaults: lr=1e-2, etas=(0.5, 1.2),
    step_sizes=(1e-6, 50)); ``lr`` is the starting step size of every weight."""

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable=False, foreach=None, maximize=False, differentiable=False):
        _no_differentiable("Rprop", differentiable)
        defaults = dict(lr=lr, etas=_betas(etas), step_sizes=_betas(step_sizes), foreach=foreach,
                        maximize=maximize, differentiable=differentiable, capturable=capturable)
        super().__init__(params, defaults)

    def _validate_group(self, group):
        super()._validate_group(group)
        etas, sizes = group["etas"], group["step_sizes"]
        if not isinstance(etas, (tuple, list)) or len(etas) != 2:
            raise ValueError(f"Rprop: etas must be a pair (etaminus, etaplus), got {etas!r}")
        _check_range("Rprop", "etas[0] (etaminus)", etas[0], 0.0, 1.0, lo_open=True, hi_open=True)
        _check_range("Rprop", "etas[1] (etaplus)", etas[1], 1.0, lo_open=True)
        if not isinstance(sizes, (tuple, list)) or len(sizes) != 2:
            raise ValueError(f"Rprop: step_sizes must be a pair (min, max), got {sizes!r}")
        _check_range("Rprop", "step_sizes[0] (min)", sizes[0], 0.0)
        _check_range("Rprop", "step_sizes[1] (max)", sizes[1], sizes[0],
                     what=" (step_sizes[0])")

    def _init_param_state(self, st, w, group):
        _zeros_state(st, w, "prev")
        st["step_size"] = Tensor._make(_xp(w).full_like(w, group["lr"]))

    def step(self, closure=None):
        loss = self._closure(closure)
        for group in self.param_groups:
            (etaminus, etaplus), (smin, smax) = group["etas"], group["step_sizes"]
            maximize = group["maximize"]
            for p, st, _ in self._params_with_grad(group):
                g = _grad(p, maximize)
                prev = st["prev"]._data
                xp = _xp(prev)
                size = st["step_size"]._data
                s = xp.sign(g * prev)
                factor = xp.where(s > 0, etaplus, xp.where(s < 0, etaminus, 1.0)).astype(
                    size.dtype, copy=False)
                size *= factor
                xp.clip(size, smin, smax, out=size)
                g = xp.where(s < 0, 0.0, g).astype(g.dtype, copy=False)   # a flipped sign skips
                p._data -= xp.sign(g) * size
                prev[...] = g
                p._version[0] += 1
        return loss
