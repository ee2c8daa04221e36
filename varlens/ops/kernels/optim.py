"""Fused optimiser updates: one compiled pass over a parameter and its state.

``adadelta_step(w, g, square_avg, acc_delta, lr, rho, eps, weight_decay, maximize)`` updates
w, square_avg and acc_delta in place as PyTorch's Adadelta does, entry by entry:
E[g^2] <- rho E[g^2] + (1 - rho) g^2;  dx = sqrt(E[dx^2] + eps) / sqrt(E[g^2] + eps) * g;
E[dx^2] <- rho E[dx^2] + (1 - rho) dx^2;  w <- w - lr dx  (g += wd w first when wd != 0).
NumPy needs about twelve passes over memory for the same (the fallback, in the optimiser).

``adam_step(w, g, m, v, lr, beta1, beta2, eps, t, wd, decoupled, maximize)``: PyTorch's Adam
(AdamW with ``decoupled``) at step t without amsgrad, entry by entry: w <- (1 - lr wd) w
(AdamW; Adam instead adds wd w to g), m <- lerp(m, g, 1 - beta1),
v <- beta2 v + ((1 - beta2) g) g, w <- w - lr / (1 - beta1^t) * m / (sqrt(v) / sqrt(1 - beta2^t)
+ eps): one pass where NumPy needs about twelve.

``sgd_momentum_step(w, g, buf, lr, momentum)``: heavy-ball SGD, buf <- momentum buf + g,
w <- w - lr buf, in one pass (NumPy: four, and a temporary the size of the parameter).

Each returns False (doing nothing) when the compiled path does not apply: the caller then
runs its NumPy code.
"""
from __future__ import annotations

import numpy as np

from varlens.ops.kernels import usable

_K = {}


def _kernels():
    if not _K:
        from varlens.ops.kernels import compiled as c
        _K.update(adadelta_step=c.adadelta_step, adam_step=c.adam_step,
                  sgd_momentum_step=c.sgd_momentum_step)
    return _K


def adadelta_step(w, g, sq, acc, lr, rho, eps, wd, maximize):
    """One Adadelta update in place (see the module docstring); False if not applicable."""
    if not (w.shape == g.shape == sq.shape == acc.shape and usable(w, g, sq, acc)):
        return False
    f = np.float32
    _kernels()["adadelta_step"](w.reshape(-1), g.reshape(-1), sq.reshape(-1), acc.reshape(-1),
                                f(lr), f(rho), f(eps), f(wd), bool(maximize))
    return True


def adam_step(w, g, m, v, lr, beta1, beta2, eps, t, wd, decoupled, maximize):
    """One Adam / AdamW update in place (see the module docstring); False if not applicable."""
    if not (w.shape == g.shape == m.shape == v.shape and usable(w, g, m, v)):
        return False
    f = np.float32
    bc1 = 1 - beta1 ** t
    bc2_sqrt = (1 - beta2 ** t) ** 0.5
    decay, wd_g = (1 - lr * wd, 0.0) if decoupled else (1.0, wd)
    # the scalars as the NumPy update rounds them: Python floats cast to float32
    _kernels()["adam_step"](w.reshape(-1), g.reshape(-1), m.reshape(-1), v.reshape(-1), f(1 - beta1),
                            f(1.0 - (1 - beta1)), f(beta2), f(1 - beta2), f(lr / bc1), f(bc2_sqrt), f(eps),
                            f(wd_g), f(decay), bool(maximize))
    return True


def sgd_momentum_step(w, g, buf, lr, momentum):
    """One heavy-ball SGD update in place (see the module docstring); False if not applicable."""
    if not (w.shape == g.shape == buf.shape and usable(w, g, buf)):
        return False
    f = np.float32
    _kernels()["sgd_momentum_step"](w.reshape(-1), g.reshape(-1), buf.reshape(-1), f(lr), f(momentum))
    return True
