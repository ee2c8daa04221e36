"""AdamW: Adam with decoupled weight decay (seed 003 Remark 4.2.5, eq. 4.2.5).

The decay shrinks the weights directly, ``p <- (1 - lr wd) p``, before the Adam step, so
it is not rescaled by the adaptive denominator as the coupled L2 term of Adam is.
PyTorch's default weight_decay here is 1e-2 (Adam's is 0).
"""
from __future__ import annotations

from varlens.optim.adam import Adam

__all__ = ["AdamW"]


class AdamW(Adam):
    """AdamW (PyTorch's defaults: lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2)."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None, eps_inside_sqrt=False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, foreach=foreach, maximize=maximize,
                         capturable=capturable, differentiable=differentiable, fused=fused,
                         decoupled_weight_decay=True, eps_inside_sqrt=eps_inside_sqrt)
