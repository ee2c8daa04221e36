"""Pieces the Trainer uses each epoch: early stopping, the JSON-lines metrics log, and a hook
base class for your own (``on_epoch_end(trainer, record)``; set ``trainer.should_stop``)."""
from __future__ import annotations

import json
import math
import os


class Callback:
    """Override any of these; the Trainer calls them in order."""

    def on_fit_start(self, trainer):
        pass

    def on_step_end(self, trainer):
        """After each optimiser step (before the gradients are cleared)."""

    def on_epoch_end(self, trainer, record):
        pass

    def on_fit_end(self, trainer):
        pass


class EarlyStopping(Callback):
    """Stop when the monitored value has not improved for ``patience`` epochs (seed 003 §1.7:
    stop when the validation loss levels off, even while the training loss still falls).

    An improvement means beating the best value so far by more than ``min_delta``.
    """

    def __init__(self, monitor="val_loss", patience=5, min_delta=0.0, mode="min"):
        if mode not in ("min", "max"):
            raise ValueError(f"EarlyStopping: mode must be 'min' or 'max', got {mode!r}")
        if not isinstance(patience, int) or patience < 0:
            raise ValueError(f"EarlyStopping: patience must be a non-negative int, got {patience!r}")
        self.monitor, self.patience, self.min_delta, self.mode = monitor, patience, float(min_delta), mode
        self.best = None
        self.bad_epochs = 0

    def improved(self, value):
        if value is None or math.isnan(value):
            return False
        if self.best is None:
            return True
        return value < self.best - self.min_delta if self.mode == "min" else value > self.best + self.min_delta

    def on_epoch_end(self, trainer, record):
        value = record.get(self.monitor)
        if value is None:
            raise KeyError(f"EarlyStopping: monitored value {self.monitor!r} is not in the epoch record "
                           f"(keys: {sorted(record)}); give the Trainer a val_loader or change monitor")
        if self.improved(value):
            self.best, self.bad_epochs = value, 0
        else:
            self.bad_epochs += 1
            if self.bad_epochs >= self.patience:
                trainer.should_stop = True
                trainer.stop_reason = (f"early stopping: {self.monitor} has not improved on {self.best:.6g} "
                                       f"for {self.bad_epochs} epochs (patience {self.patience})")

    def state_dict(self):
        return {"best": self.best, "bad_epochs": self.bad_epochs}

    def load_state_dict(self, s):
        self.best, self.bad_epochs = s["best"], s["bad_epochs"]


class JSONLinesLogger(Callback):
    """Append one JSON object per epoch to ``path`` (the metrics log)."""

    def __init__(self, path):
        self.path = path

    def on_fit_start(self, trainer):
        os.makedirs(os.path.dirname(os.path.abspath(self.path)), exist_ok=True)
        # a resumed run rewrites the log from its restored history, so it never has duplicates
        with open(self.path, "w") as f:
            for r in trainer.history:
                f.write(json.dumps(r) + "\n")

    def on_epoch_end(self, trainer, record):
        with open(self.path, "a") as f:
            f.write(json.dumps(record) + "\n")
