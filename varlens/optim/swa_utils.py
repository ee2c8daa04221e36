"""Weight averaging (PyTorch's ``torch.optim.swa_utils``): SWA, EMA, SWALR and update_bn.

* ``AveragedModel(model)`` keeps a deep copy of ``model`` whose parameters are a running
  average of the model's: ``update_parameters(model)`` copies them the first time and then
  applies ``avg_fn(averaged, current, n_averaged)``.  The default is the equal-weight mean
  of all the snapshots (stochastic weight averaging, Izmailov et al. 2018):
  ``a <- a + (p - a)/(n + 1)``.  ``get_ema_avg_fn(decay)`` gives an exponential moving
  average ``a <- decay a + (1 - decay) p`` instead -- the same running average as momentum's
  (seed 004 §B.1.1), applied to the weights rather than to the gradients.  Buffers are
  copied from the model unless ``use_buffers=True``, which averages them too.
* ``SWALR(optimizer, swa_lr)`` anneals each group's lr to ``swa_lr`` over
  ``anneal_epochs`` steps (cosine or linear) and then holds it.
* ``update_bn(loader, model)`` recomputes the batch-norm running statistics with one pass
  over the data, as a cumulative average (momentum=None), since the averaged weights never
  saw their own activations.

The ``multi_avg_fn`` variants (``get_ema_multi_avg_fn``, ``get_swa_multi_avg_fn``) update
lists of tensors in place, as PyTorch's foreach versions do.
"""
from __future__ import annotations

import itertools
import math
import numbers
from copy import deepcopy

from varlens.core import array as B
from varlens.core import grad_mode as _gm
from varlens.nn.module import Module
from varlens.nn.batchnorm import _BatchNorm
from varlens.optim.lr_scheduler import LRScheduler, _per_group
from varlens.optim.optimizer import _lerp_
from varlens.core.tensor import Tensor

__all__ = ["AveragedModel", "update_bn", "SWALR", "get_ema_multi_avg_fn", "get_swa_multi_avg_fn",
           "get_ema_avg_fn", "get_swa_avg_fn"]


def _check_decay(decay):
    if not isinstance(decay, numbers.Real) or isinstance(decay, bool) or not 0.0 <= decay <= 1.0:
        raise ValueError(f"decay must be a number in [0, 1], got {decay!r}")


def _arr(t):
    return t._data if isinstance(t, Tensor) else B.xp.asarray(t)


def get_ema_multi_avg_fn(decay=0.999):
    """In-place EMA of lists of tensors: ``a <- a + (1 - decay)(p - a)``."""
    _check_decay(decay)

    def ema_update(ema_param_list, current_param_list, _):
        for a, p in zip(ema_param_list, current_param_list):
            x, y = a._data, _arr(p)
            if x.dtype.kind in "fc":
                _lerp_(x, y, 1 - decay)
            else:
                x[...] = x * decay + y * (1 - decay)
            a._version[0] += 1
    return ema_update


def get_swa_multi_avg_fn():
    """In-place equal-weight running mean of lists of tensors: ``a <- a + (p - a)/(n + 1)``."""
    def swa_update(averaged_param_list, current_param_list, num_averaged):
        n = float(_arr(num_averaged))
        w = 1.0 / (n + 1)
        if isinstance(num_averaged, Tensor) and num_averaged._data.dtype.kind in "iu":
            w = float(B.xp.float32(w))    # PyTorch's int tensor / int is a float32 weight
        for a, p in zip(averaged_param_list, current_param_list):
            x, y = a._data, _arr(p)
            if x.dtype.kind in "fc":
                _lerp_(x, y, w)
            else:
                x += ((y - x) / (n + 1)).astype(x.dtype)
            a._version[0] += 1
    return swa_update


def get_ema_avg_fn(decay=0.999):
    """``avg_fn`` for AveragedModel: returns ``decay a + (1 - decay) p``."""
    _check_decay(decay)

    def ema_update(ema_param, current_param, num_averaged):
        with _gm.no_grad():
            return decay * ema_param + (1 - decay) * current_param
    return ema_update


def get_swa_avg_fn():
    """``avg_fn`` for AveragedModel: returns ``a + (p - a)/(n + 1)``."""
    def swa_update(averaged_param, current_param, num_averaged):
        with _gm.no_grad():
            return averaged_param + (current_param - averaged_param) / (num_averaged + 1)
    return swa_update


class AveragedModel(Module):
    """A running average of a model's weights (SWA by default; EMA with get_ema_avg_fn).

    Args (PyTorch's): model, device (the averaged copy and its counter live there; None: where
    ``model`` is, the counter on the CPU, as PyTorch), avg_fn (one tensor
    at a time, returns the new average), multi_avg_fn (lists, in place), use_buffers
    (average the buffers too; default False copies them).
    """

    def __init__(self, model, device=None, avg_fn=None, multi_avg_fn=None, use_buffers=False):
        super().__init__()
        if not isinstance(model, Module):
            raise TypeError(f"AveragedModel: model must be a varlens.nn.Module, got "
                            f"{type(model).__name__}")
        if avg_fn is not None and multi_avg_fn is not None:
            raise ValueError("AveragedModel: give only one of avg_fn and multi_avg_fn")
        self.module = deepcopy(model)
        xp = B.xp
        if device is not None:
            xp = B.namespace_of_device(device)
            self.module.to(device)
        self.register_buffer("n_averaged", Tensor._make(xp.zeros((), dtype=B.xp.int64)))
        self.avg_fn = avg_fn
        self.multi_avg_fn = multi_avg_fn
        self.use_buffers = use_buffers

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def update_parameters(self, model):
        """Fold ``model``'s current weights into the average."""
        if self.use_buffers:
            mine = list(itertools.chain(self.module.parameters(), self.module.buffers()))
            theirs = list(itertools.chain(model.parameters(), model.buffers()))
        else:
            mine, theirs = list(self.parameters()), list(model.parameters())
        if len(mine) != len(theirs):
            raise ValueError(f"AveragedModel.update_parameters: model has {len(theirs)} tensors to "
                             f"average, the averaged copy {len(mine)}; pass the same architecture")
        n = int(self.n_averaged._data)     # (on a device: a host read, as PyTorch's == 0 test)
        if n == 0:
            for a, p in zip(mine, theirs):
                a._data[...] = p._data
                a._version[0] += 1
        else:
            if self.multi_avg_fn is not None:
                self.multi_avg_fn(mine, theirs, Tensor._make(self.n_averaged._data.copy()))
            elif self.avg_fn is None:
                # PyTorch's CPU path: a <- a + (p - a)/(n + 1)
                for a, p in zip(mine, theirs):
                    x = a._data
                    if x.dtype.kind in "fc":
                        x += (p._data - x) / (n + 1)
                    else:
                        x[...] = x + (p._data - x) / (n + 1)   # truncated, as copy_ does
                    a._version[0] += 1
            else:
                for a, p in zip(mine, theirs):
                    new = self.avg_fn(Tensor._make(a._data.copy()), Tensor._make(p._data),
                                      Tensor._make(self.n_averaged._data.copy()))
                    a._data[...] = _arr(new)
                    a._version[0] += 1
        if not self.use_buffers:
            for b_avg, b in zip(self.module.buffers(), model.buffers()):
                b_avg._data[...] = b._data
        self.n_averaged._data += 1


def update_bn(loader, model, device=None):
    """Recompute every batch-norm layer's running mean and variance with one pass over
    ``loader`` (batches are tensors, or lists/tuples whose first item is the input)."""
    momenta = {}
    for m in model.modules():
        if isinstance(m, _BatchNorm):
            m.reset_running_stats()
            momenta[m] = m.momentum
    if not momenta:
        return
    was_training = model.training
    model.train()
    for m in momenta:
        m.momentum = None
    try:
        with _gm.no_grad():
            for batch in loader:
                if isinstance(batch, (list, tuple)):
                    batch = batch[0]
                model(batch)
    finally:
        for m, mom in momenta.items():
            m.momentum = mom
        model.train(was_training)


class SWALR(LRScheduler):
    """Anneal each group's lr to ``swa_lr`` over ``anneal_epochs`` steps, then hold it
    (PyTorch's defaults: anneal_epochs=10, anneal_strategy="cos")."""

    def __init__(self, optimizer, swa_lr, anneal_epochs=10, anneal_strategy="cos", last_epoch=-1):
        swa_lrs = _per_group("SWALR", "swa_lr", swa_lr, optimizer)
        for i, v in enumerate(swa_lrs):
            if not isinstance(v, numbers.Real) or isinstance(v, bool) or v < 0:
                raise ValueError(f"SWALR: swa_lr must be a number >= 0, got {v!r}")
        if anneal_strategy not in ("cos", "linear"):
            raise ValueError(f"SWALR: anneal_strategy must be 'cos' or 'linear', got {anneal_strategy!r}")
        if not isinstance(anneal_epochs, int) or isinstance(anneal_epochs, bool) or anneal_epochs < 0:
            raise ValueError(f"SWALR: anneal_epochs must be an integer >= 0, got {anneal_epochs!r}")
        for v, g in zip(swa_lrs, optimizer.param_groups):
            g["swa_lr"] = v
        self._anneal_strategy = anneal_strategy
        self.anneal_epochs = anneal_epochs
        super().__init__(optimizer, last_epoch)

    def anneal_func(self, t):
        if self._anneal_strategy == "cos":
            return (1 - math.cos(math.pi * t)) / 2
        return t

    @staticmethod
    def _get_initial_lr(lr, swa_lr, alpha):
        # the lr the annealing started from, recovered from the current one
        if alpha == 1:
            return swa_lr
        return (lr - alpha * swa_lr) / (1 - alpha)

    def get_lr(self):
        step = self._step_count - 1
        if self.anneal_epochs == 0:
            step = max(1, step)
        prev_alpha = self.anneal_func(max(0, min(1, (step - 1) / max(1, self.anneal_epochs))))
        starts = [self._get_initial_lr(g["lr"], g["swa_lr"], prev_alpha)
                  for g in self.optimizer.param_groups]
        alpha = self.anneal_func(max(0, min(1, step / max(1, self.anneal_epochs))))
        return [g["swa_lr"] * alpha + lr * (1 - alpha)
                for g, lr in zip(self.optimizer.param_groups, starts)]
