"""Fused optimiser updates: one compiled pass over a parameter and its state.

``adadelta_step(w, g, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize)`` updates
w, square_avg and acc_delta in place as PyTorch's Adadelta does, entry by entry:
E[g^2] <- rho E[g^2] + (1 - rho) g^2;  dx = sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) * g;
E[dx^2] <- rho E[dx^2] + (1 - rho) dx^2;  w <- w - lr dx  (g += wd w first when wd != 0).
NumPy needs about twelve passes over memory for the same (the fallback, in the optimiser).
Returns False (doing nothing) when the compiled path does not apply: the caller then runs
its NumPy code.
"""
from __future__ import annotations

import numpy as np

from varlens.ops.kernels import usable

_K = {}


def _kernels():
    if not _K:
        from varlens.ops.kernels import compiled as c
        _K.update(adadelta_step=c.adadelta_step)
    return _K


def adadelta_step(w, g, sq, acc, lr, rho, eps, wd, maximize):
    """One Adadelta update in place (see the module docstring); False if not applicable."""
    if not (w.shape == g.shape == sq.shape == acc.shape and usable(w, g, sq, acc)):
        return False
    f = np.float32
    _kernels()["adadelta_step"](w.reshape(-1), g.reshape(-1), sq.reshape(-1), acc.reshape(-1),
                                f(lr), f(rho), f(eps), f(wd), bool(maximize))
    return True
