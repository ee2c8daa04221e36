"""More of PyTorch's learning-rate schedules: ChainedScheduler, CyclicLR and
CosineAnnealingWarmRestarts (re-exported by ``varlens.optim.lr_scheduler``).

Same step semantics as the others (see lr_scheduler.py): building one takes an initial
step, ``step()`` goes after ``optimizer.step()``, ``state_dict()`` holds every attribute but
the optimiser.

* ChainedScheduler steps several chainable schedulers of one optimiser in one call, so
  their factors multiply (e.g. a constant warm-up factor times an exponential decay).
* CyclicLR (Smith 2017) moves the lr linearly between ``base_lr`` and ``max_lr`` and back,
  ``step_size_up`` steps up then ``step_size_down`` steps down (call it every batch).  The
  peak is scaled by 1 ("triangular"), halved each cycle ("triangular2"), by ``gamma^t``
  ("exp_range"), or by a custom ``scale_fn`` of the cycle number or iteration
  (``scale_mode``).  With ``cycle_momentum`` the momentum (or Adam's beta1) moves the
  opposite way, between ``max_momentum`` and ``base_momentum``.
* CosineAnnealingWarmRestarts (SGDR, Loshchilov & Hutter 2017):
  ``eta_min + (base_lr - eta_min)(1 + cos(pi T_cur / T_i))/2``, where ``T_cur`` counts the
  steps since the last restart and the period ``T_i`` starts at ``T_0`` and is multiplied by
  ``T_mult`` at every restart.  ``step(epoch)`` accepts a fractional epoch (e.g.
  ``epoch + i / iters`` inside an epoch).
"""
from __future__ import annotations

import math
import numbers

from varlens.optim.lr_scheduler import (LRScheduler, ReduceLROnPlateau, _callable_state,
                                        _check_num, _check_optimizer, _load_callable_state,
                                        _momentum_cycling, _per_group, _SchedulerList,
                                        _set_momentum)

__all__ = ["ChainedScheduler", "CyclicLR", "CosineAnnealingWarmRestarts"]


class ChainedScheduler(_SchedulerList):
    """Call ``step()`` of every scheduler in ``schedulers`` (all on one optimiser) in order."""

    def __init__(self, schedulers, optimizer=None):
        schedulers = list(schedulers)
        if len(schedulers) < 1:
            raise ValueError("ChainedScheduler: schedulers must hold at least one scheduler, got none")
        optimizer = optimizer if optimizer is not None else getattr(schedulers[0], "optimizer", None)
        for i, s in enumerate(schedulers):
            if not hasattr(s, "optimizer"):
                raise TypeError(f"ChainedScheduler: schedulers[{i}] must be a learning-rate "
                                f"scheduler (with an optimizer), got {type(s).__name__}")
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(f"ChainedScheduler: schedulers[{i}] is a ReduceLROnPlateau, which "
                                 "needs a metric at each step and cannot be chained")
            if s.optimizer is not optimizer:
                raise ValueError(f"ChainedScheduler: schedulers[{i}] ({type(s).__name__}) belongs "
                                 "to a different optimizer; all must share one")
        self._schedulers = schedulers
        self.optimizer = optimizer
        self._last_lr = [g["lr"] for g in schedulers[-1].optimizer.param_groups]

    def step(self):
        for s in self._schedulers:
            s.step()
        self._last_lr = [g["lr"] for g in self._schedulers[-1].optimizer.param_groups]


class CyclicLR(LRScheduler):
    """Cyclical learning rate (PyTorch's defaults: step_size_up=2000, step_size_down=None
    (= step_size_up), mode="triangular", gamma=1.0, scale_mode="cycle", cycle_momentum=True,
    base_momentum=0.8, max_momentum=0.9)."""

    def __init__(self, optimizer, base_lr, max_lr, step_size_up=2000, step_size_down=None,
                 mode="triangular", gamma=1.0, scale_fn=None, scale_mode="cycle",
                 cycle_momentum=True, base_momentum=0.8, max_momentum=0.9, last_epoch=-1):
        _check_optimizer("CyclicLR", optimizer)
        self.optimizer = optimizer
        base_lrs = _per_group("CyclicLR", "base_lr", base_lr, optimizer)
        for i, v in enumerate(base_lrs):
            _check_num("CyclicLR", f"base_lr[{i}]", v, 0.0)
        self.max_lrs = _per_group("CyclicLR", "max_lr", max_lr, optimizer)
        for i, v in enumerate(self.max_lrs):
            _check_num("CyclicLR", f"max_lr[{i}]", v, 0.0)
        _check_num("CyclicLR", "step_size_up", step_size_up, 0.0, lo_open=True)
        if step_size_down is not None:
            _check_num("CyclicLR", "step_size_down", step_size_down, 0.0)
        if last_epoch == -1:
            for lr, g in zip(base_lrs, optimizer.param_groups):
                g["lr"] = lr
        up = float(step_size_up)
        down = float(step_size_down) if step_size_down is not None else up
        self.total_size = up + down
        self.step_ratio = up / self.total_size
        if mode not in ("triangular", "triangular2", "exp_range") and scale_fn is None:
            raise ValueError("CyclicLR: mode must be 'triangular', 'triangular2' or 'exp_range' "
                             f"(or give scale_fn), got {mode!r}")
        if scale_fn is not None and not callable(scale_fn):
            raise TypeError(f"CyclicLR: scale_fn must be callable, got {type(scale_fn).__name__}")
        if scale_mode not in ("cycle", "iterations"):
            raise ValueError(f"CyclicLR: scale_mode must be 'cycle' or 'iterations', got {scale_mode!r}")
        self.mode, self.gamma = mode, gamma
        self._scale_fn_custom = scale_fn
        self.scale_mode = scale_mode
        self._init_scale_fn()
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1, self.base_momentums, self.max_momentums = _momentum_cycling(
                "CyclicLR", optimizer, base_momentum, max_momentum, last_epoch)
        super().__init__(optimizer, last_epoch)
        self.base_lrs = base_lrs

    def _init_scale_fn(self):
        if self._scale_fn_custom is not None:
            return
        # the built-in modes fix scale_mode, as in PyTorch
        self.scale_mode = "iterations" if self.mode == "exp_range" else "cycle"

    def scale_fn(self, x):
        """The factor on the cycle's amplitude at cycle number (or iteration) x."""
        if self._scale_fn_custom is not None:
            return self._scale_fn_custom(x)
        if self.mode == "triangular":
            return 1.0
        if self.mode == "triangular2":
            return 1 / (2.0 ** (x - 1))
        return self.gamma ** x

    def get_lr(self):
        cycle = math.floor(1 + self.last_epoch / self.total_size)
        x = 1.0 + self.last_epoch / self.total_size - cycle      # position in the cycle, [0, 1)
        if x <= self.step_ratio:
            frac = x / self.step_ratio
        else:
            frac = (x - 1) / (self.step_ratio - 1)
        arg = cycle if self.scale_mode == "cycle" else self.last_epoch
        scale = self.scale_fn(arg)
        lrs = [b + (m - b) * frac * scale for b, m in zip(self.base_lrs, self.max_lrs)]
        if self.cycle_momentum:
            for g, bm, mm in zip(self.optimizer.param_groups, self.base_momentums,
                                 self.max_momentums):
                _set_momentum(g, mm - (mm - bm) * frac * scale, self.use_beta1)
        return lrs

    def state_dict(self):
        return self._state_dict_with("_scale_fn_custom", _callable_state(self._scale_fn_custom))

    def load_state_dict(self, state_dict):
        saved = self._load_state_dict_but(state_dict, "_scale_fn_custom")
        _load_callable_state(self._scale_fn_custom, saved)
        self._init_scale_fn()


class CosineAnnealingWarmRestarts(LRScheduler):
    """SGDR: cosine annealing restarted every ``T_i`` steps (``T_0`` first, times ``T_mult``
    after each restart), down to ``eta_min`` (PyTorch's defaults: T_mult=1, eta_min=0)."""

    def __init__(self, optimizer, T_0, T_mult=1, eta_min=0.0, last_epoch=-1):
        if not isinstance(T_0, numbers.Integral) or isinstance(T_0, bool) or T_0 <= 0:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_0 must be a positive integer, got {T_0!r}")
        if not isinstance(T_mult, numbers.Integral) or isinstance(T_mult, bool) or T_mult < 1:
            raise ValueError(f"CosineAnnealingWarmRestarts: T_mult must be an integer >= 1, got "
                             f"{T_mult!r}")
        if not isinstance(eta_min, numbers.Real) or isinstance(eta_min, bool):
            raise ValueError(f"CosineAnnealingWarmRestarts: eta_min must be a number, got "
                             f"{type(eta_min).__name__} ({eta_min!r})")
        self.T_0 = self.T_i = int(T_0)
        self.T_mult = int(T_mult)
        self.eta_min = eta_min
        self.T_cur = last_epoch
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        lo = self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * self.T_cur / self.T_i)) / 2
                for b in self.base_lrs]

    def step(self, epoch=None):
        """Advance one step, or jump to ``epoch`` (which may be fractional)."""
        if epoch is None and self.last_epoch < 0:
            epoch = 0
        if epoch is None:
            epoch = self.last_epoch + 1
            self.T_cur += 1
            if self.T_cur >= self.T_i:
                self.T_cur = self.T_cur % self.T_i
                self.T_i *= self.T_mult
        else:
            if epoch < 0:
                raise ValueError(f"CosineAnnealingWarmRestarts.step: epoch must be >= 0, got {epoch}")
            if epoch >= self.T_0:
                if self.T_mult == 1:
                    self.T_cur = epoch % self.T_0
                else:
                    # which period epoch falls in: T_0 (T_mult^n - 1)/(T_mult - 1) <= epoch
                    n = int(math.log(epoch / self.T_0 * (self.T_mult - 1) + 1, self.T_mult))
                    self.T_cur = epoch - self.T_0 * (self.T_mult ** n - 1) / (self.T_mult - 1)
                    self.T_i = self.T_0 * self.T_mult ** n
            else:
                self.T_i = self.T_0
                self.T_cur = epoch
        self.last_epoch = math.floor(epoch)
        for g, lr in zip(self.optimizer.param_groups, self.get_lr()):
            g["lr"] = lr
        self._last_lr = [g["lr"] for g in self.optimizer.param_groups]
