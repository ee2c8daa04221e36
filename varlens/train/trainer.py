"""The training loop, written once so you do not have to.

Per epoch: train over ``train_loader`` (forward, loss, backward, optional clipping, an
optimiser step every ``accumulate`` batches, a per-step scheduler if asked), evaluate
on ``val_loader``, step a per-epoch scheduler (ReduceLROnPlateau gets the validation
loss), log a record, save a checkpoint, and check early stopping.

Same seed, data and code give bit-identical runs: all randomness comes from the varlens
generators, and a checkpoint holds everything that changes (weights, optimiser, scheduler,
counters, data order, RNG states), so a run resumed from one continues exactly as if it
had never stopped.  A NaN or Inf loss stops the run before it touches the weights, naming
the step; the checkpoints written before it stay as they are.

On the CUDA device (``device="cuda"``, or a model already there) the model, the batches and
the loss stay on the device and a step reads nothing on the host: the loss, accuracy count
and NaN/Inf checks of each step are kept on the device (``_DeviceTally``) and read in one
copy every ``log_interval`` optimiser steps and at the end of an epoch.  A NaN/Inf loss or
gradient is then reported at that read, naming the step and parameter where it first
appeared, and the steps after it (at most ``log_interval``) have already been taken.
"""
from __future__ import annotations

import glob
import math
import os
import sys
import time

import numpy as np

from varlens.autograd import no_grad
from varlens.core import array as B
from varlens.core.tensor import Tensor
from varlens.nn.utils import clip_grad_norm_
from varlens.optim.lr_scheduler import ReduceLROnPlateau
from varlens.train import checkpoint as ckpt
from varlens.train import distributed as _dist  # under mpiexec: rank 0 logs, DDP (train/distributed.py)
from varlens.train.callbacks import EarlyStopping, JSONLinesLogger
from varlens.train.metrics import Average, correct_count, correct_count_array


class NonFiniteLossError(FloatingPointError):
    """The loss became NaN or Inf; the message names the step and the last good checkpoint."""


class NonFiniteGradientError(FloatingPointError):
    """A gradient held NaN or Inf at an optimiser step (check_finite_grads); the message names the
    parameter, the step and the last good checkpoint.  The step was not applied."""


def _is_plateau(scheduler):
    return isinstance(scheduler, ReduceLROnPlateau)


class Trainer:
    """Fit a model with validation, metrics, early stopping, checkpoints and a progress bar.

    Arguments:
      model, optimizer, loss_fn: a varlens Module, Optimizer and loss (``loss_fn(output, target)``).
      scheduler: an lr scheduler or None; ``scheduler_interval`` is "epoch" (default) or "step".
      grad_clip: max global gradient norm (None: no clipping).
      accumulate: optimiser step every this many batches (gradient accumulation); the loss
        is divided by it so the step matches one batch ``accumulate`` times larger.
      early_stopping: patience in epochs on ``monitor`` (None: off).  ``restore_best``: at the
        end of fit, load the weights of the epoch with the best ``monitor`` value.
      out_dir: run folder for metrics.jsonl, curves.png and checkpoints/ (None: write nothing).
      checkpoint_every: also checkpoint every this many optimiser steps (default: each epoch only).
      keep_checkpoints: how many of the newest checkpoints to keep.
      progress: show a tqdm bar with live loss and samples/s (default: only when stderr is a
        terminal), redrawn at most every ``progress_interval`` s; quiet: print nothing.
      config: JSON-safe dict saved in each checkpoint (how to rebuild the run).
      check_finite_grads: refuse an optimiser step whose gradients hold NaN or Inf, raising
        NonFiniteGradientError naming the parameter (default True; the loss is always checked).
      device: move the model (and its optimiser's state) there and each batch there before the
        forward pass ("cpu", "cuda", a varlens.device; None: leave everything where it is).
      log_interval: on a CUDA device, read the running loss and the NaN/Inf checks every this
        many optimiser steps (default 50; see the module docstring).  Unused on the CPU.
    """

    def __init__(self, model, optimizer, loss_fn, *, scheduler=None, scheduler_interval="epoch",
                 grad_clip=None, accumulate=1, early_stopping=None, monitor="val_loss", mode="min",
                 restore_best=False, out_dir=None, checkpoint_every=None, keep_checkpoints=3,
                 progress=None, progress_interval=0.1, quiet=False, callbacks=(), config=None,
                 extra_state=None, check_finite_grads=True, device=None, log_interval=50):
        if scheduler_interval not in ("epoch", "step"):
            raise ValueError(f"Trainer: scheduler_interval must be 'epoch' or 'step', got {scheduler_interval!r}")
        if not isinstance(accumulate, int) or accumulate < 1:
            raise ValueError(f"Trainer: accumulate must be a positive int, got {accumulate!r}")
        if grad_clip is not None and not grad_clip > 0:
            raise ValueError(f"Trainer: grad_clip must be a positive number or None, got {grad_clip!r}")
        if not isinstance(log_interval, int) or isinstance(log_interval, bool) or log_interval < 1:
            raise ValueError(f"Trainer: log_interval must be a positive int, got {log_interval!r}")
        if device is not None:
            lib = B.namespace_of_device(device)   # a clear error when the device is not there
            model.to(device)
            _move_optimizer_state(optimizer, lib)
        self.device, self.log_interval = device, log_interval
        self.model, self.optimizer, self.loss_fn = model, optimizer, loss_fn
        self.scheduler, self.scheduler_interval = scheduler, scheduler_interval
        self.grad_clip, self.accumulate = grad_clip, accumulate
        self.monitor, self.mode, self.restore_best = monitor, mode, restore_best
        self.early = EarlyStopping(monitor, early_stopping, mode=mode) if early_stopping is not None else None
        self.best_tracker = EarlyStopping(monitor, 0, mode=mode)
        self.out_dir = out_dir
        self.checkpoint_every = checkpoint_every
        self.keep_checkpoints = keep_checkpoints
        self.is_main = _dist.is_main()  # under mpiexec -n N only rank 0 prints, plots and checkpoints
        quiet = quiet or not self.is_main
        self.quiet = quiet
        self.progress_interval = progress_interval
        self.progress = (not quiet and sys.stderr.isatty()) if progress is None else (progress and not quiet)
        self.callbacks = list(callbacks)
        if out_dir is not None and self.is_main:
            self.callbacks.insert(0, JSONLinesLogger(os.path.join(out_dir, "metrics.jsonl")))
        self.config = config or {}
        self.extra_state = extra_state or {}
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.check_finite_grads = check_finite_grads   # refuse steps with NaN/Inf gradients
        # counters and records (all saved in checkpoints)
        self.epoch = 0                  # finished epochs
        self.step = 0                   # optimiser steps taken
        self.history = []               # one record per finished epoch
        self.best_state = None          # weights at the best monitored value
        self.should_stop, self.stop_reason = False, None
        self.last_checkpoint = None
        self._running = Average()       # the epoch in progress (for mid-epoch checkpoints)
        self._epoch_time = 0.0

    # ------------------------------------------------------------------ one batch
    def _forward(self, batch):
        if isinstance(batch, dict):
            raise TypeError("Trainer: batches must be (input, target) pairs; got a dict")
        x, y = batch[0], batch[1]
        if self.device is not None:
            x, y = _to_device(x, self.device), _to_device(y, self.device)
        out = self.model(x)
        return out, y, self.loss_fn(out, y)

    def _check_finite(self, value, epoch, batch_idx):
        if not math.isfinite(value):
            where = (f"the last good checkpoint is {self.last_checkpoint}" if self.last_checkpoint
                     else "no checkpoint was written before it")
            raise NonFiniteLossError(
                f"training stopped: the loss became {value} at step {self.step + 1} (epoch {epoch + 1}, batch "
                f"{batch_idx + 1}); the weights were not updated with it and {where}. Lower the learning "
                "rate, clip gradients (--grad-clip) or check the data for NaN/Inf.")

    def _check_finite_grads(self):
        """Raise NonFiniteGradientError naming the first parameter whose gradient is NaN or Inf
        (before the optimiser step, so the weights stay as they were)."""
        for p in self.params:
            if p.grad is not None and not bool(p.grad.isfinite().all()):
                names = {id(q): n for n, q in self.model.named_parameters()}
                where = (f"the last good checkpoint is {self.last_checkpoint}" if self.last_checkpoint
                         else "no checkpoint was written before it")
                self.optimizer.zero_grad()
                raise NonFiniteGradientError(
                    f"training stopped: the gradient of parameter {names.get(id(p), '?')!r} holds NaN or Inf at "
                    f"step {self.step + 1}; the step was not applied and {where}. Lower the learning rate, clip "
                    "gradients (--grad-clip), check the data, or pass check_finite_grads=False to allow it.")

    def _on_device(self):
        return bool(self.params) and B.is_device_array(self.params[0]._data)

    def _optimizer_step(self, tally=None):
        if tally is not None:
            if self.check_finite_grads:
                tally.add_grad_flags(self.params)   # read at the next flush (no host read now)
        elif self.check_finite_grads:
            self._check_finite_grads()
        if self.grad_clip is not None:
            clip_grad_norm_(self.params, self.grad_clip)
        self.optimizer.step()
        for cb in self.callbacks:      # per-step callbacks see the update and this step's gradients
            cb.on_step_end(self)
        self.optimizer.zero_grad()
        self.step += 1
        if self.scheduler is not None and self.scheduler_interval == "step":
            self.scheduler.step()

    def train_epoch(self, loader, epoch):
        """One pass over ``loader``; returns the running Average of loss and accuracy."""
        if hasattr(self.model, "train"):
            self.model.train()
        run = self._running
        bar = None
        if self.progress:
            from tqdm import tqdm
            bar = tqdm(total=len(loader), desc=f"epoch {epoch + 1}", leave=False, unit="batch",
                       dynamic_ncols=True, mininterval=self.progress_interval)
            bar.update(getattr(loader, "_skip", 0))
        t0 = t_bar = time.perf_counter()
        n_seen = 0
        micro = 0
        _dist.set_epoch(loader, epoch)  # a DistributedSampler's shuffle changes each epoch
        self.optimizer.zero_grad()
        tally = _DeviceTally() if self._on_device() else None
        for bi, batch in enumerate(loader, start=getattr(loader, "_skip", 0)):
            out, y, loss = self._forward(batch)
            bs = len(y)
            if tally is None:
                value = loss.item()
                self._check_finite(value, epoch, bi)
            else:      # on the device: summed there, read every log_interval steps
                tally.add_loss(loss._data, bs, correct_count_array(out, y), (self.step, epoch, bi))
            (loss / self.accumulate if self.accumulate > 1 else loss).backward()
            if tally is None:
                run.update(value, bs, correct_count(out, y))
            n_seen += bs
            micro += 1
            if micro == self.accumulate:
                micro = 0
                self._optimizer_step(tally)
                if tally is not None and self.step % self.log_interval == 0:
                    self._flush(tally, run)
                if self.checkpoint_every and self.step % self.checkpoint_every == 0 and self.out_dir and self.is_main:
                    if tally is not None:
                        self._flush(tally, run)
                    self._epoch_time += time.perf_counter() - t0
                    t0 = time.perf_counter()
                    self.save_checkpoint(loader)
            if bar is not None:
                bar.update(1)
                rate = n_seen / max(time.perf_counter() - t_bar, 1e-9)
                bar.set_postfix(loss=f"{run.loss:.4f}", samples_s=f"{rate:.0f}", refresh=False)
        if micro:  # leftover micro-batches at the end of the epoch: step with what was accumulated
            self._optimizer_step(tally)
        if tally is not None:
            self._flush(tally, run)
        if bar is not None:
            bar.close()
        self._epoch_time += time.perf_counter() - t0
        return run

    @no_grad()
    def evaluate(self, loader):
        """Mean loss and accuracy over ``loader`` in eval mode, without recording gradients."""
        was_training = getattr(self.model, "training", False)
        if hasattr(self.model, "eval"):
            self.model.eval()
        avg = Average()
        tally = _DeviceTally() if self._on_device() else None
        for batch in loader:
            out, y, loss = self._forward(batch)
            if tally is None:
                avg.update(loss.item(), len(y), correct_count(out, y))
            else:
                tally.add_loss(loss._data, len(y), correct_count_array(out, y), None)
        if tally is not None:
            tally.read_into(avg)     # one host read for the whole evaluation
        if was_training:
            self.model.train()
        return {"loss": avg.loss, "accuracy": avg.accuracy}

    def _flush(self, tally, run):
        """Read the device tally (one copy to the host) into ``run``; raise for a NaN/Inf loss
        or gradient seen since the last read, naming where it first appeared."""
        bad_loss, bad_grad = tally.read_into(run)
        if bad_loss is not None or bad_grad is not None:
            (lstep, lepoch, lbatch) = bad_loss if bad_loss is not None else (None, None, None)
            gstep, gparam = bad_grad if bad_grad is not None else (None, None)
            where = (f"the last good checkpoint is {self.last_checkpoint}" if self.last_checkpoint
                     else "no checkpoint was written before it")
            late = (f"; on the CUDA device the checks are read every log_interval={self.log_interval} "
                    f"optimizer steps, so the weights were updated up to step {self.step}")
            self.optimizer.zero_grad()
            if bad_loss is not None and (bad_grad is None or lstep <= gstep):
                raise NonFiniteLossError(
                    f"training stopped: the loss became NaN or Inf at step {lstep + 1} (epoch {lepoch + 1}, "
                    f"batch {lbatch + 1}){late}, and {where}. Lower the learning rate, clip gradients "
                    "(--grad-clip) or check the data for NaN/Inf.")
            names = {id(q): n for n, q in self.model.named_parameters()}
            raise NonFiniteGradientError(
                f"training stopped: the gradient of parameter {names.get(id(self.params[gparam]), '?')!r} "
                f"held NaN or Inf at step {gstep + 1}{late}, and {where}. Lower the learning rate, clip "
                "gradients (--grad-clip), check the data, or pass check_finite_grads=False to allow it.")

    # ------------------------------------------------------------------ the loop
    def fit(self, train_loader, val_loader=None, epochs=10, resume=None):
        """Train until ``epochs`` epochs are finished (or early stopping); returns the history."""
        if not isinstance(epochs, int) or epochs < 1:
            raise ValueError(f"fit: epochs must be a positive int, got {epochs!r}")
        if resume is not None:
            self.load_checkpoint(resume, train_loader)
        if _dist.world_size() > 1 and not self.quiet:
            print(_dist.scale_line(train_loader, self.accumulate, self.optimizer), flush=True)
        for cb in self.callbacks:
            cb.on_fit_start(self)
        try:
            while self.epoch < epochs and not self.should_stop:
                self._run_epoch(train_loader, val_loader)
        finally:
            if self.out_dir is not None and self.history and self.is_main:
                self.plot(os.path.join(self.out_dir, "curves.png"))
        if self.restore_best and self.best_state is not None:
            _dist.unwrap(self.model).load_state_dict(self.best_state)
        for cb in self.callbacks:
            cb.on_fit_end(self)
        return self.history

    def _run_epoch(self, train_loader, val_loader):
        epoch = self.epoch
        run = _dist.reduce_average(self.train_epoch(train_loader, epoch))  # over all ranks
        record = {"epoch": epoch + 1, "step": self.step, "train_loss": run.loss, "train_acc": run.accuracy}
        train_time = self._epoch_time
        if val_loader is not None:
            v = self.evaluate(val_loader)
            record.update(val_loss=v["loss"], val_acc=v["accuracy"])
        record["lr"] = float(self.optimizer.param_groups[0]["lr"])
        record["time_s"] = round(train_time, 4)
        record["samples_per_s"] = round(run.n / train_time, 1) if train_time > 0 else None
        if self.scheduler is not None and self.scheduler_interval == "epoch":
            if _is_plateau(self.scheduler):
                if "val_loss" not in record:
                    raise ValueError("Trainer: ReduceLROnPlateau needs a val_loader (it steps on the val loss)")
                self.scheduler.step(record["val_loss"])
            else:
                self.scheduler.step()
        self.epoch += 1
        self._running = Average()
        self._epoch_time = 0.0
        self.history.append(record)
        if record.get(self.monitor) is not None:
            if self.best_tracker.improved(record[self.monitor]):
                self.best_tracker.best = record[self.monitor]
                self.best_state = {k: v.detach().clone() for k, v in _dist.unwrap(self.model).state_dict().items()}
        if self.early is not None:
            self.early.on_epoch_end(self, record)
        for cb in self.callbacks:
            cb.on_epoch_end(self, record)
        if not self.quiet:
            print(self.format_record(record), flush=True)
        if self.out_dir is not None and self.is_main:
            self.save_checkpoint(train_loader)
        if self.should_stop and not self.quiet and self.stop_reason:
            print(self.stop_reason, flush=True)

    @staticmethod
    def format_record(r):
        parts = [f"epoch {r['epoch']:3d}", f"train loss {r['train_loss']:.4f}"]
        if r.get("train_acc") is not None:
            parts.append(f"acc {r['train_acc']:.4f}")
        if r.get("val_loss") is not None:
            parts.append(f"| val loss {r['val_loss']:.4f}")
        if r.get("val_acc") is not None:
            parts.append(f"acc {r['val_acc']:.4f}")
        parts.append(f"| lr {r['lr']:.3g}")
        if r.get("samples_per_s"):
            parts.append(f"| {r['samples_per_s']:.0f} samples/s")
        return "  ".join(parts)

    def plot(self, path):
        from varlens.train.plots import plot_curves
        return plot_curves(self.history, path, title=self.config.get("recipe"))

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, train_loader=None):
        """Everything a resumed run needs, as a nested structure ``checkpoint.save`` accepts."""
        return {
            "model": _dist.unwrap(self.model).state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler is not None else None,
            "trainer": {"epoch": self.epoch, "step": self.step, "history": self.history,
                        "running": self._running.state_dict(), "epoch_time": self._epoch_time,
                        "early": self.early.state_dict() if self.early is not None else None,
                        "best": self.best_tracker.state_dict(), "best_state": self.best_state,
                        "should_stop": self.should_stop, "stop_reason": self.stop_reason},
            "data": train_loader.state_dict() if train_loader is not None else None,
            "rng": ckpt.rng_state(),
            "config": self.config,
            "extra": self.extra_state,
        }

    def save_checkpoint(self, train_loader=None, path=None):
        """Write a checkpoint (atomically) and prune old ones; returns its path."""
        if path is None:
            if self.out_dir is None:
                raise ValueError("save_checkpoint: give a path or build the Trainer with out_dir")
            path = os.path.join(self.out_dir, "checkpoints", f"step-{self.step:08d}.ckpt")
        # varlens.save (like torch.save) wants the folder to exist; a run creates its own
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        ckpt.save(self.state_dict(train_loader), path)
        self.last_checkpoint = path
        if self.out_dir is not None and self.keep_checkpoints:
            # prune the oldest of this run's line; files from a later step (another run) are left alone
            mine = [c for c in list_checkpoints(self.out_dir) if _step_of(c) <= self.step]
            for old in mine[:-self.keep_checkpoints]:
                os.unlink(old)
        return path

    def load_checkpoint(self, path, train_loader=None):
        """Restore a run from ``path`` (model, optimiser, scheduler, counters, data order, RNG)."""
        s = ckpt.load(path)
        if self.config and s.get("config"):
            diff = sorted(k for k in set(self.config) | set(s["config"])
                          if k != "epochs" and self.config.get(k) != s["config"].get(k))
            if diff:
                raise ckpt.CheckpointError(
                    f"checkpoint {path!r} was written by a run with other settings ("
                    + ", ".join(f"{k}: {s['config'].get(k)!r} there, {self.config.get(k)!r} here" for k in diff)
                    + "); resume with the same settings (only --epochs may change)")
        _dist.unwrap(self.model).load_state_dict(s["model"])
        self.optimizer.load_state_dict(s["optimizer"])
        if self.scheduler is not None:
            if s["scheduler"] is None:
                raise ckpt.CheckpointError(f"checkpoint {path!r} has no scheduler state but this run has a scheduler")
            self.scheduler.load_state_dict(s["scheduler"])
        t = s["trainer"]
        self.epoch, self.step, self.history = t["epoch"], t["step"], t["history"]
        self._running = Average()
        self._running.load_state_dict(t["running"])
        self._epoch_time = t["epoch_time"]
        if self.early is not None and t["early"] is not None:
            self.early.load_state_dict(t["early"])
        self.best_tracker.load_state_dict(t["best"])
        self.best_state = t["best_state"]
        self.should_stop, self.stop_reason = t["should_stop"], t["stop_reason"]
        if train_loader is not None and s["data"] is not None:
            train_loader.load_state_dict(s["data"])
        ckpt.set_rng_state(s["rng"])
        self.last_checkpoint = path
        return s


class _DeviceTally:
    """A training step's loss, accuracy count and NaN/Inf flags kept on the CUDA device, so the
    step reads nothing on the host; ``read_into`` copies them all to the host at once."""

    def __init__(self):
        self._reset()

    def _reset(self):
        self.loss = self.correct = None
        self.n = self.n_acc = 0
        self.loss_ok, self.loss_where = [], []     # per batch: finite flag, (step, epoch, batch)
        self.grad_ok, self.grad_step = [], []      # per optimiser step: flags per parameter

    def add_loss(self, loss, bs, correct, where):
        xp = B.namespace(loss)
        term = loss.astype(np.float64) * bs        # float64 sums, as Average's on the host
        self.loss = term if self.loss is None else self.loss + term
        self.n += bs
        if correct is not None:
            self.correct = correct if self.correct is None else self.correct + correct
            self.n_acc += bs
        if where is not None:
            self.loss_ok.append(xp.isfinite(loss))
            self.loss_where.append(where)

    def add_grad_flags(self, params):
        flags = [p.grad._data for p in params if p.grad is not None]
        if not flags:
            return
        xp = B.namespace(flags[0])
        idx = [i for i, p in enumerate(params) if p.grad is not None]
        self.grad_ok.append((xp.stack([xp.isfinite(g).all() for g in flags]), idx))
        self.grad_step.append(self.loss_where[-1][0] if self.loss_where else 0)

    def read_into(self, avg):
        """Add the sums to ``avg`` (an Average); returns (first bad loss's (step, epoch, batch)
        or None, first bad gradient's (step, parameter index) or None)."""
        if self.loss is None:
            self._reset()
            return None, None
        xp = B.namespace(self.loss)
        parts = [self.loss.reshape(1),
                 (self.correct if self.correct is not None else xp.zeros((), np.int64)).astype(np.float64).reshape(1)]
        parts += [f.astype(np.float64).reshape(1) for f in self.loss_ok]
        parts += [f.astype(np.float64).reshape(-1) for f, _ in self.grad_ok]
        host = B.to_host(xp.concatenate(parts))        # the one host read
        avg.add(host[0], self.n, host[1] if self.correct is not None else None, self.n_acc)
        bad_loss = bad_grad = None
        k = 2
        for ok, where in zip(host[k:k + len(self.loss_ok)], self.loss_where):
            if not ok:
                bad_loss = where
                break
        k += len(self.loss_ok)
        for (f, idx), step in zip(self.grad_ok, self.grad_step):
            vals = host[k:k + len(idx)]
            k += len(idx)
            if bad_grad is None and not vals.all():
                bad_grad = (step, idx[int(np.argmin(vals))])
        self._reset()
        return bad_loss, bad_grad


def _to_device(t, device):
    """A batch element on ``device`` (tensors and lists/tuples of them; anything else as is)."""
    if isinstance(t, Tensor):
        return t.to(device)
    if isinstance(t, (list, tuple)):
        return type(t)(_to_device(e, device) for e in t)
    return t


def _move_optimizer_state(optimizer, lib):
    """Move an optimiser's per-parameter state arrays to the array library ``lib`` (after the
    model moved there); 0-d scalars such as step counts stay on the host (optim.optimizer)."""
    for st in getattr(optimizer, "state", {}).values():
        for k, v in st.items():
            if isinstance(v, Tensor) and v._data.ndim:
                v._data = B.to_namespace(v._data, lib)


def _step_of(path):
    name = os.path.basename(path)
    try:
        return int(name[len("step-"):-len(".ckpt")])
    except ValueError:
        return -1


def list_checkpoints(out_dir):
    """Checkpoint files of a run folder, oldest first."""
    return sorted(glob.glob(os.path.join(out_dir, "checkpoints", "step-*.ckpt")))


def latest_checkpoint(out_dir):
    """The newest checkpoint of a run folder (None if there is none)."""
    c = list_checkpoints(out_dir)
    return c[-1] if c else None


def fit(model, optimizer, loss_fn, train_loader, val_loader=None, epochs=10, **options):
    """``Trainer(model, optimizer, loss_fn, **options).fit(train_loader, val_loader, epochs)``;
    returns the Trainer (its ``history`` holds one record per epoch)."""
    resume = options.pop("resume", None)
    tr = Trainer(model, optimizer, loss_fn, **options)
    tr.fit(train_loader, val_loader, epochs, resume=resume)
    return tr
