"""Helpers shared by the single-tensor optimiser updates of nadam.py, radam.py, adamax.py, asgd.py,
rprop.py and adafactor.py: the gradient an update uses (maximize, coupled or decoupled weight
decay), Adam's second moment rounded as PyTorch's, and the base class of Adam's variants.

Each of NAdam, RAdam, Adamax, ASGD, Rprop, Adafactor and Muon follows PyTorch's single-tensor
update (its argument names, defaults, state keys and order of floating-point operations), so
float64 trajectories agree with ``torch.optim`` to rounding (tests/test_optim_more.py runs 50 steps of each, with a save/load half-way).  As
in the rest of varlens.optim the updates run in place on the raw arrays, outside the graph,
and bump each parameter's version counter.

Notation in their docstrings: g is the gradient at step t (after ``maximize`` flips its sign and
coupled ``weight_decay`` adds ``wd * p``), m and v are Adam's running averages (seed 004 §B.1.4).

``foreach``, ``capturable`` and ``fused`` are accepted and ignored (one NumPy code path);
``differentiable=True`` is refused, as in the other varlens optimisers.
"""
from __future__ import annotations

from varlens.optim.optimizer import Optimizer, _check_adam_group, _zeros_state


def _betas(betas):
    return tuple(betas) if isinstance(betas, list) else betas


def _grad(p, maximize, wd=0.0, decoupled=False, lr=0.0):
    """The gradient the update uses: sign-flipped for maximize, plus coupled L2 decay (or the
    decoupled shrink of p, done here in place)."""
    g = p.grad._data
    if maximize:
        g = -g
    if wd != 0:
        if decoupled:
            p._data *= 1 - lr * wd
        else:
            g = g + wd * p._data
    return g


def _second_moment_(v, g, beta2):
    """v <- beta2 v + (1 - beta2) g^2 in place, rounded as PyTorch's addcmul ((value g) g)."""
    v *= beta2
    tmp = g * (1 - beta2)
    tmp *= g
    v += tmp
    return v


class _AdamFamily(Optimizer):
    """Adam's variants here: the checks Adam's hyperparameters get, and zeroed state arrays
    named by ``_state_keys`` (after the step counter)."""

    _state_keys = ("exp_avg", "exp_avg_sq")

    def _validate_group(self, group):
        super()._validate_group(group)
        _check_adam_group(type(self).__name__, group)

    def _init_param_state(self, st, w, group):
        _zeros_state(st, w, *self._state_keys)
