"""Learning-rate schedules (PyTorch's ``torch.optim.lr_scheduler``, same names and step semantics).

Step semantics, as PyTorch 2.x:

* Building a scheduler records each group's starting lr as ``group['initial_lr']`` (these are
  ``base_lrs``) and performs one initial step, so ``last_epoch`` becomes 0 and the lr for
  epoch 0 is set (for most schedules it is unchanged; LinearLR multiplies it by start_factor).
* Call ``scheduler.step()`` once per epoch (or iteration) *after* ``optimizer.step()``; it
  increments ``last_epoch`` and writes the new lr into every group.
* The schedules are "chainable": each step multiplies or moves the group's *current* lr
  (the recursive form), so two schedulers on one optimiser compose.  For CosineAnnealingLR this
  recursive form gives the closed form ``eta_min + (base - eta_min)(1 + cos(pi t/T_max))/2``
  up to rounding; varlens uses the recursion so values match PyTorch.
* ``get_last_lr()`` is the list of lrs the last step set; ``state_dict()`` holds every
  attribute except the optimiser.

ReduceLROnPlateau is the adaptive schedule of seed 003 §1.5.2 (start at 0.1, multiply by 0.1
when the validation loss stops improving): ``step(metric)`` each epoch.

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
import types
import warnings
from bisect import bisect_right
from collections import Counter

from varlens.optim.optimizer import Optimizer

__all__ = ["LRScheduler", "LambdaLR", "MultiplicativeLR", "StepLR", "MultiStepLR", "ConstantLR",
           "LinearLR", "ExponentialLR", "SequentialLR", "CosineAnnealingLR", "PolynomialLR",
           "ReduceLROnPlateau", "OneCycleLR"]


def _check_optimizer(name, optimizer):
    if not isinstance(optimizer, Optimizer):
        raise TypeError(f"{name}: optimizer must be a varlens.optim.Optimizer, got "
                        f"{type(optimizer).__name__}")


def _check_num(name, arg, value, lo=None, hi=None, lo_open=False, hi_open=False):
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{name}: {arg} must be a number, got {type(value).__name__} ({value!r})")
    bad = (lo is not None and (value <= lo if lo_open else value < lo)) or \
          (hi is not None and (value >= hi if hi_open else value > hi))
    if bad:
        lo_s = "" if lo is None else f"{'>' if lo_open else '>='} {lo}"
        hi_s = "" if hi is None else f"{'<' if hi_open else '<='} {hi}"
        raise ValueError(f"{name}: {arg} must be {' and '.join(s for s in (lo_s, hi_s) if s)}, "
                         f"got {value!r}")


def _check_int(name, arg, value, lo):
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < lo:
        raise ValueError(f"{name}: {arg} must be an integer >= {lo}, got {value!r}")


class LRScheduler:
    """Base class: subclasses give ``get_lr()`` (the recursive, chainable form) and may give
    ``_get_closed_form_lr()`` (used by ``step(epoch)`` and by SequentialLR at a milestone)."""

    _is_initial = False

    def __init__(self, optimizer, last_epoch=-1):
        _check_optimizer(type(self).__name__, optimizer)
        self.optimizer = optimizer
        if last_epoch == -1:
            for group in optimizer.param_groups:
                group.setdefault("initial_lr", group["lr"])
        else:
            for i, group in enumerate(optimizer.param_groups):
                if "initial_lr" not in group:
                    raise KeyError(f"{type(self).__name__}: param 'initial_lr' is not specified in "
                                   f"param_groups[{i}] when resuming with last_epoch={last_epoch} "
                                   "(load the optimiser's state first, or leave last_epoch=-1)")
        self.base_lrs = [group["initial_lr"] for group in optimizer.param_groups]
        self.last_epoch = last_epoch
        self._initial_step()

    def _initial_step(self):
        self._step_count = 0
        self._is_initial = True
        try:
            self.step()
        finally:
            self._is_initial = False

    def get_lr(self):
        raise NotImplementedError

    def get_last_lr(self):
        """The learning rates (one per group) set by the last step."""
        return self._last_lr

    def step(self, epoch=None):
        """Advance one epoch (``epoch=`` jumps there using the closed form, as PyTorch's
        deprecated argument does)."""
        if self._step_count == 1 and not getattr(self.optimizer, "_opt_called", True):
            warnings.warn("lr_scheduler.step() was called before optimizer.step(): call them in "
                          "the order optimizer.step(), then scheduler.step(), or the first value "
                          "of the schedule is skipped", UserWarning, stacklevel=2)
        self._step_count += 1
        self._update_lr(epoch)

    def _update_lr(self, epoch=None):
        if epoch is None:
            self.last_epoch += 1
            values = self.get_lr()
        else:
            self.last_epoch = epoch
            values = self._get_closed_form_lr() if hasattr(self, "_get_closed_form_lr") else self.get_lr()
        for group, lr in zip(self.optimizer.param_groups, values):
            group["lr"] = lr
        self._last_lr = [group["lr"] for group in self.optimizer.param_groups]

    def _current(self):
        return [group["lr"] for group in self.optimizer.param_groups]

    def state_dict(self):
        """Every attribute except the optimiser."""
        return {k: v for k, v in self.__dict__.items() if k != "optimizer"}

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)

    def _state_dict_with(self, key, saved):
        """``state_dict()`` with the attribute ``key`` kept in its own saved form, ``saved``."""
        sd = LRScheduler.state_dict(self)
        sd[key] = saved
        return sd

    def _load_state_dict_but(self, state_dict, key):
        """Load every entry but ``key`` and return that one (saved in the subclass's own form)."""
        state_dict = dict(state_dict)
        saved = state_dict.pop(key)
        self.__dict__.update(state_dict)
        return saved


_LRScheduler = LRScheduler


def _callable_state(f):
    """What a state_dict keeps of a schedule function: nothing for a function or lambda (as
    PyTorch), the attributes of a callable object."""
    return None if f is None or isinstance(f, types.FunctionType) else dict(f.__dict__)


def _load_callable_state(f, saved):
    if saved is not None and f is not None:
        f.__dict__.update(saved)


def _per_group(name, arg, value, optimizer):
    if isinstance(value, (list, tuple)):
        if len(value) != len(optimizer.param_groups):
            raise ValueError(f"{name}: expected {len(optimizer.param_groups)} {arg} (one per "
                             f"parameter group), got {len(value)}")
        return list(value)
    return [value] * len(optimizer.param_groups)


def _set_momentum(group, value, use_beta1):
    """Set a group's momentum, or Adam's beta1 (``betas[0]``) when ``use_beta1``."""
    if use_beta1:
        group["betas"] = (value, *group["betas"][1:])
    else:
        group["momentum"] = value


def _momentum_cycling(name, optimizer, base_momentum, max_momentum, last_epoch):
    """Momentum cycling's set-up (CyclicLR, OneCycleLR): the optimiser must have a momentum or
    betas; base and max momentum are spread over the groups and, on a fresh start
    (``last_epoch == -1``), each group starts at its max momentum and records both.
    Returns ``(use_beta1, base_momentums, max_momentums)``."""
    d = optimizer.defaults
    if "momentum" not in d and "betas" not in d:
        raise ValueError(f"{name}: optimizer must support momentum or beta1 (betas) with "
                         f"cycle_momentum=True ({type(optimizer).__name__} has neither)")
    use_beta1 = "betas" in d
    bms = _per_group(name, "base_momentum", base_momentum, optimizer)
    mms = _per_group(name, "max_momentum", max_momentum, optimizer)
    if last_epoch == -1:
        for mm, bm, g in zip(mms, bms, optimizer.param_groups):
            _set_momentum(g, mm, use_beta1)
            g["max_momentum"] = mm
            g["base_momentum"] = bm
    return use_beta1, bms, mms


class LambdaLR(LRScheduler):
    """lr = base_lr * lr_lambda(epoch); ``lr_lambda`` is one function or one per group."""

    def __init__(self, optimizer, lr_lambda, last_epoch=-1):
        _check_optimizer("LambdaLR", optimizer)
        self.optimizer = optimizer
        self.lr_lambdas = _per_group("LambdaLR", "lr_lambdas", lr_lambda, optimizer)
        for f in self.lr_lambdas:
            if not callable(f):
                raise TypeError(f"LambdaLR: lr_lambda must be callable, got {type(f).__name__}")
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        return [base * f(self.last_epoch) for f, base in zip(self.lr_lambdas, self.base_lrs)]

    def state_dict(self):
        return self._state_dict_with("lr_lambdas", [_callable_state(f) for f in self.lr_lambdas])

    def load_state_dict(self, state_dict):
        for f, d in zip(self.lr_lambdas, self._load_state_dict_but(state_dict, "lr_lambdas")):
            _load_callable_state(f, d)


class MultiplicativeLR(LambdaLR):
    """lr <- lr * lr_lambda(epoch) at every step after the first."""

    def get_lr(self):
        if self.last_epoch > 0:
            return [g["lr"] * f(self.last_epoch)
                    for f, g in zip(self.lr_lambdas, self.optimizer.param_groups)]
        return self._current()


class StepLR(LRScheduler):
    """Multiply the lr by ``gamma`` every ``step_size`` epochs."""

    def __init__(self, optimizer, step_size, gamma=0.1, last_epoch=-1):
        if isinstance(step_size, float) and step_size.is_integer():
            step_size = int(step_size)       # torch accepts StepLR(opt, 1.0, ...) (its tutorials pass one)
        _check_int("StepLR", "step_size", step_size, 1)
        _check_num("StepLR", "gamma", gamma, 0.0)
        self.step_size, self.gamma = step_size, gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0 or self.last_epoch % self.step_size != 0:
            return self._current()
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** (self.last_epoch // self.step_size) for b in self.base_lrs]


class MultiStepLR(LRScheduler):
    """Multiply the lr by ``gamma`` at each epoch listed in ``milestones``."""

    def __init__(self, optimizer, milestones, gamma=0.1, last_epoch=-1):
        ms = list(milestones)
        for m in ms:
            _check_int("MultiStepLR", "milestones[i]", m, 0)
        _check_num("MultiStepLR", "gamma", gamma, 0.0)
        self.milestones = Counter(ms)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch not in self.milestones:
            return self._current()
        return [g["lr"] * self.gamma ** self.milestones[self.last_epoch]
                for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        ms = sorted(self.milestones.elements())
        return [b * self.gamma ** bisect_right(ms, self.last_epoch) for b in self.base_lrs]


class ConstantLR(LRScheduler):
    """lr = base_lr * factor until epoch ``total_iters``, then base_lr."""

    def __init__(self, optimizer, factor=1.0 / 3, total_iters=5, last_epoch=-1):
        _check_num("ConstantLR", "factor", factor, 0.0, 1.0)
        _check_int("ConstantLR", "total_iters", total_iters, 0)
        self.factor, self.total_iters = factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [g["lr"] * self.factor for g in self.optimizer.param_groups]
        if self.last_epoch != self.total_iters:
            return self._current()
        return [g["lr"] * (1.0 / self.factor) for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [b * (self.factor + (self.last_epoch >= self.total_iters) * (1 - self.factor))
                for b in self.base_lrs]


class LinearLR(LRScheduler):
    """Linear warm-up (or decay): the factor goes from ``start_factor`` to ``end_factor`` over
    ``total_iters`` steps, then stays."""

    def __init__(self, optimizer, start_factor=1.0 / 3, end_factor=1.0, total_iters=5, last_epoch=-1):
        _check_num("LinearLR", "start_factor", start_factor, 0.0, 1.0, lo_open=True)
        _check_num("LinearLR", "end_factor", end_factor, 0.0, 1.0)
        _check_int("LinearLR", "total_iters", total_iters, 1)
        self.start_factor, self.end_factor, self.total_iters = start_factor, end_factor, total_iters
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self.last_epoch == 0:
            return [g["lr"] * self.start_factor for g in self.optimizer.param_groups]
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        s, e = self.start_factor, self.end_factor
        return [g["lr"] * (1.0 + (e - s) / (self.total_iters * s + (self.last_epoch - 1) * (e - s)))
                for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        s, e = self.start_factor, self.end_factor
        return [b * (s + (e - s) * min(self.total_iters, self.last_epoch) / self.total_iters)
                for b in self.base_lrs]


class ExponentialLR(LRScheduler):
    """Multiply the lr by ``gamma`` every epoch."""

    def __init__(self, optimizer, gamma, last_epoch=-1):
        _check_num("ExponentialLR", "gamma", gamma, 0.0)
        self.gamma = gamma
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial:
            return self._current()
        return [g["lr"] * self.gamma for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [b * self.gamma ** self.last_epoch for b in self.base_lrs]


class PolynomialLR(LRScheduler):
    """lr = base_lr (1 - t/total_iters)^power for t <= total_iters, then 0."""

    def __init__(self, optimizer, total_iters=5, power=1.0, last_epoch=-1):
        _check_int("PolynomialLR", "total_iters", total_iters, 1)
        self.total_iters, self.power = total_iters, power
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        if self._is_initial or self.last_epoch > self.total_iters:
            return self._current()
        f = ((1.0 - self.last_epoch / self.total_iters)
             / (1.0 - (self.last_epoch - 1) / self.total_iters)) ** self.power
        return [g["lr"] * f for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        return [b * (1.0 - min(self.total_iters, self.last_epoch) / self.total_iters) ** self.power
                for b in self.base_lrs]


class CosineAnnealingLR(LRScheduler):
    """Cosine annealing from base_lr down to ``eta_min`` over ``T_max`` epochs (then back up,
    periodically), computed by PyTorch's recursion so values match it."""

    def __init__(self, optimizer, T_max, eta_min=0.0, last_epoch=-1):
        _check_int("CosineAnnealingLR", "T_max", T_max, 1)
        _check_num("CosineAnnealingLR", "eta_min", eta_min, 0.0)
        self.T_max, self.eta_min = T_max, eta_min
        super().__init__(optimizer, last_epoch)

    def get_lr(self):
        T, lo = self.T_max, self.eta_min
        if self._is_initial:
            return self._current()
        if self._step_count == 1 and self.last_epoch > 0:
            return [lo + (b - lo) * (1 + math.cos(self.last_epoch * math.pi / T)) / 2
                    for b in self.base_lrs]
        if (self.last_epoch - 1 - T) % (2 * T) == 0:
            return [g["lr"] + (b - lo) * (1 - math.cos(math.pi / T)) / 2
                    for b, g in zip(self.base_lrs, self.optimizer.param_groups)]
        return [(1 + math.cos(math.pi * self.last_epoch / T))
                / (1 + math.cos(math.pi * (self.last_epoch - 1) / T)) * (g["lr"] - lo) + lo
                for g in self.optimizer.param_groups]

    def _get_closed_form_lr(self):
        T, lo = self.T_max, self.eta_min
        return [lo + (b - lo) * (1 + math.cos(math.pi * self.last_epoch / T)) / 2 for b in self.base_lrs]


class _SchedulerList(LRScheduler):
    """Base of the schedulers that drive others (``self._schedulers``): their state_dict holds
    each inner scheduler's state_dict in place of the scheduler."""

    def state_dict(self):
        return self._state_dict_with("_schedulers", [s.state_dict() for s in self._schedulers])

    def load_state_dict(self, state_dict):
        for s, d in zip(self._schedulers, self._load_state_dict_but(state_dict, "_schedulers")):
            s.load_state_dict(d)


class SequentialLR(_SchedulerList):
    """Run ``schedulers[i]`` until ``milestones[i]``, then the next (e.g. warm-up, then cosine)."""

    def __init__(self, optimizer, schedulers, milestones, last_epoch=-1):
        _check_optimizer("SequentialLR", optimizer)
        schedulers, milestones = list(schedulers), list(milestones)
        if len(schedulers) < 1:
            raise ValueError("SequentialLR: expects at least one scheduler, got none")
        for i, s in enumerate(schedulers):
            if isinstance(s, ReduceLROnPlateau):
                raise ValueError(f"SequentialLR: schedulers[{i}] is a ReduceLROnPlateau, which needs a "
                                 "metric at each step and cannot be sequenced")
            if not isinstance(s, LRScheduler):
                raise TypeError(f"SequentialLR: schedulers[{i}] must be an LRScheduler, got "
                                f"{type(s).__name__}")
            if s.optimizer is not optimizer:
                raise ValueError(f"SequentialLR: schedulers[{i}] ({type(s).__name__}) belongs to a "
                                 "different optimizer; all must share the one given")
        if len(milestones) != len(schedulers) - 1:
            raise ValueError(f"SequentialLR: expects one milestone fewer than schedulers, got "
                             f"{len(schedulers)} schedulers and {len(milestones)} milestones")
        self._schedulers = schedulers
        self._milestones = milestones
        self.last_epoch = last_epoch + 1
        self.optimizer = optimizer
        for g in optimizer.param_groups:
            g["lr"] = g["initial_lr"]
        self.recursive_undo()                     # undo the initial step each one took
        idx = bisect_right(milestones, 0)
        schedulers[idx]._initial_step()
        self._last_lr = schedulers[idx].get_last_lr()

    def recursive_undo(self, sched=None):
        """Step back every scheduler inside (through nested Chained/Sequential ones) by one."""
        sched = self if sched is None else sched
        if hasattr(sched, "_schedulers"):
            for s in sched._schedulers:
                self.recursive_undo(s)
        elif hasattr(sched, "last_epoch"):
            sched.last_epoch -= 1

    def step(self):
        self.last_epoch += 1
        idx = bisect_right(self._milestones, self.last_epoch)
        s = self._schedulers[idx]
        if idx > 0 and self._milestones[idx - 1] == self.last_epoch:
            s._update_lr(0)
        else:
            s.step()
        self._last_lr = s.get_last_lr()


class ReduceLROnPlateau(LRScheduler):
    """Multiply the lr by ``factor`` once the monitored metric has not improved for more than
    ``patience`` epochs (seed 003 §1.5.2's "decrease by 0.1 when the validation loss flattens").

    "Improved" means below ``best * (1 - threshold)`` (threshold_mode "rel") or
    ``best - threshold`` ("abs") in mode "min"; the mirror image in mode "max".  After a
    reduction, ``cooldown`` epochs pass before bad epochs count again; the lr never goes
    below ``min_lr``, and a change smaller than ``eps`` is skipped.
    """

    def __init__(self, optimizer, mode="min", factor=0.1, patience=10, threshold=1e-4,
                 threshold_mode="rel", cooldown=0, min_lr=0, eps=1e-8):
        _check_optimizer("ReduceLROnPlateau", optimizer)
        _check_num("ReduceLROnPlateau", "factor", factor, 0.0, 1.0, hi_open=True)
        _check_int("ReduceLROnPlateau", "patience", patience, 0)
        _check_int("ReduceLROnPlateau", "cooldown", cooldown, 0)
        self.factor = factor
        self.optimizer = optimizer
        if isinstance(min_lr, (list, tuple)):
            if len(min_lr) != len(optimizer.param_groups):
                raise ValueError(f"ReduceLROnPlateau: expected {len(optimizer.param_groups)} min_lrs "
                                 f"(one per parameter group), got {len(min_lr)}")
            self.default_min_lr = None
            self.min_lrs = list(min_lr)
        else:
            self.default_min_lr = min_lr
            self.min_lrs = [min_lr] * len(optimizer.param_groups)
        self.patience, self.cooldown, self.eps = patience, cooldown, eps
        self.last_epoch = 0
        self._last_lr = self._current()
        self._init_is_better(mode, threshold, threshold_mode)
        self._reset()

    def _reset(self):
        self.best = self.mode_worse
        self.cooldown_counter = 0
        self.num_bad_epochs = 0

    def step(self, metrics, epoch=None):
        """Record this epoch's metric (e.g. the validation loss) and reduce the lr if due."""
        current = float(metrics)
        self.last_epoch = self.last_epoch + 1 if epoch is None else epoch
        if self._is_better(current, self.best):
            self.best = current
            self.num_bad_epochs = 0
        else:
            self.num_bad_epochs += 1
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.num_bad_epochs = 0
        if self.num_bad_epochs > self.patience:
            self._reduce_lr()
            self.cooldown_counter = self.cooldown
            self.num_bad_epochs = 0
        self._last_lr = self._current()

    def _reduce_lr(self):
        if len(self.optimizer.param_groups) != len(self.min_lrs):
            if self.default_min_lr is None:
                raise RuntimeError(f"ReduceLROnPlateau: the optimizer now has "
                                   f"{len(self.optimizer.param_groups)} parameter groups but "
                                   f"{len(self.min_lrs)} min_lrs were given; update min_lrs")
            self.min_lrs = [self.default_min_lr] * len(self.optimizer.param_groups)
        for i, g in enumerate(self.optimizer.param_groups):
            old = float(g["lr"])
            new = max(old * self.factor, self.min_lrs[i])
            if old - new > self.eps:
                g["lr"] = new

    @property
    def in_cooldown(self):
        return self.cooldown_counter > 0

    def _is_better(self, a, best):
        if self.mode == "min" and self.threshold_mode == "rel":
            return a < best * (1.0 - self.threshold)
        if self.mode == "min":
            return a < best - self.threshold
        if self.threshold_mode == "rel":
            return a > best * (self.threshold + 1.0)
        return a > best + self.threshold

    def _init_is_better(self, mode, threshold, threshold_mode):
        if mode not in ("min", "max"):
            raise ValueError(f"ReduceLROnPlateau: mode must be 'min' or 'max', got {mode!r}")
        if threshold_mode not in ("rel", "abs"):
            raise ValueError(f"ReduceLROnPlateau: threshold_mode must be 'rel' or 'abs', got "
                             f"{threshold_mode!r}")
        self.mode_worse = math.inf if mode == "min" else -math.inf
        self.mode, self.threshold, self.threshold_mode = mode, threshold, threshold_mode

    def load_state_dict(self, state_dict):
        self.__dict__.update(state_dict)
        self._init_is_better(self.mode, self.threshold, self.threshold_mode)


class OneCycleLR(LRScheduler):
    """The 1cycle policy: warm up from ``max_lr/div_factor`` to ``max_lr`` over ``pct_start`` of
    the steps, then anneal to ``max_lr/(div_factor*final_div_factor)`` (cosine or linear).
    Momentum cycling (``cycle_momentum``) adjusts ``momentum`` or ``betas[0]`` as PyTorch does.
    """

    def __init__(self, optimizer, max_lr, total_steps=None, epochs=None, steps_per_epoch=None,
                 pct_start=0.3, anneal_strategy="cos", cycle_momentum=True, base_momentum=0.85,
                 max_momentum=0.95, div_factor=25.0, final_div_factor=1e4, three_phase=False,
                 last_epoch=-1):
        _check_optimizer("OneCycleLR", optimizer)
        self.optimizer = optimizer
        if total_steps is not None:
            _check_int("OneCycleLR", "total_steps", total_steps, 1)
            self.total_steps = total_steps
        elif epochs is not None and steps_per_epoch is not None:
            _check_int("OneCycleLR", "epochs", epochs, 1)
            _check_int("OneCycleLR", "steps_per_epoch", steps_per_epoch, 1)
            self.total_steps = epochs * steps_per_epoch
        else:
            raise ValueError("OneCycleLR: give total_steps, or both epochs and steps_per_epoch")
        _check_num("OneCycleLR", "pct_start", pct_start, 0.0, 1.0)
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"OneCycleLR: anneal_strategy must be 'cos' or 'linear', got "
                             f"{anneal_strategy!r}")
        self._anneal_func_type = anneal_strategy
        n = self.total_steps
        if three_phase:
            self._schedule_phases = [
                dict(end_step=float(pct_start * n) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=float(2 * pct_start * n) - 2, start_lr="max_lr", end_lr="initial_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum"),
                dict(end_step=n - 1, start_lr="initial_lr", end_lr="min_lr",
                     start_momentum="max_momentum", end_momentum="max_momentum")]
        else:
            self._schedule_phases = [
                dict(end_step=float(pct_start * n) - 1, start_lr="initial_lr", end_lr="max_lr",
                     start_momentum="max_momentum", end_momentum="base_momentum"),
                dict(end_step=n - 1, start_lr="max_lr", end_lr="min_lr",
                     start_momentum="base_momentum", end_momentum="max_momentum")]
        max_lrs = _per_group("OneCycleLR", "max_lr", max_lr, optimizer)
        if last_epoch == -1:
            for lr, g in zip(max_lrs, optimizer.param_groups):
                g["initial_lr"] = lr / div_factor
                g["max_lr"] = lr
                g["min_lr"] = g["initial_lr"] / final_div_factor
        self.cycle_momentum = cycle_momentum
        if cycle_momentum:
            self.use_beta1 = _momentum_cycling("OneCycleLR", optimizer, base_momentum,
                                               max_momentum, last_epoch)[0]
        super().__init__(optimizer, last_epoch)

    @staticmethod
    def _annealing_cos(start, end, pct):
        return end + (start - end) / 2.0 * (math.cos(math.pi * pct) + 1)

    @staticmethod
    def _annealing_linear(start, end, pct):
        return (end - start) * pct + start

    def get_lr(self):
        lrs = []
        step_num = self.last_epoch
        if step_num > self.total_steps:
            raise ValueError(f"OneCycleLR: tried to step {step_num} times; total_steps is "
                             f"{self.total_steps}")
        anneal = self._annealing_cos if self._anneal_func_type == "cos" else self._annealing_linear
        for g in self.optimizer.param_groups:
            start_step = 0.0
            lr = mom = None
            for i, phase in enumerate(self._schedule_phases):
                end_step = phase["end_step"]
                if step_num <= end_step or i == len(self._schedule_phases) - 1:
                    pct = (step_num - start_step) / (end_step - start_step)
                    lr = anneal(g[phase["start_lr"]], g[phase["end_lr"]], pct)
                    if self.cycle_momentum:
                        mom = anneal(g[phase["start_momentum"]], g[phase["end_momentum"]], pct)
                    break
                start_step = phase["end_step"]
            lrs.append(lr)
            if self.cycle_momentum:
                _set_momentum(g, mom, self.use_beta1)
        return lrs


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


__all__ += ["ChainedScheduler", "CyclicLR", "CosineAnnealingWarmRestarts"]
