"""A Trainer callback that writes the run to TensorBoard (``varlens train RECIPE --tensorboard``).

Per epoch: every number of the epoch record (train/val loss and accuracy, learning rate, time)
as a scalar under ``epoch/<key>``, and, every ``histogram_every`` epochs, a histogram of each
parameter and of its last gradient.  The run's configuration goes in as text at the start.
Other parts of varlens write to the same writer through ``trainer.tensorboard`` (the lens's
per-step history does, when the lens is on).
"""
from __future__ import annotations

import json
import math
import numbers

from varlens.train.callbacks import Callback


class TensorBoardLogger(Callback):
    """Write epoch records, parameter/gradient histograms and the config to ``log_dir``."""

    def __init__(self, log_dir, histogram_every=1, histograms=True):
        if not isinstance(histogram_every, int) or histogram_every < 1:
            raise ValueError(f"TensorBoardLogger: histogram_every must be a positive int, got {histogram_every!r}")
        self.log_dir = str(log_dir)
        self.histogram_every, self.histograms = histogram_every, histograms
        self.writer = None

    def on_fit_start(self, trainer):
        from varlens.utils.tensorboard import SummaryWriter
        self.writer = SummaryWriter(self.log_dir)
        trainer.tensorboard = self.writer
        cfg = getattr(trainer, "config", None)
        if cfg:
            self.writer.add_text("config", "```\n" + json.dumps(cfg, indent=1, default=str) + "\n```", 0)

    def on_epoch_end(self, trainer, record):
        if self.writer is None:
            return
        epoch = int(record.get("epoch", getattr(trainer, "epoch", 0)))
        for key, value in record.items():
            if key == "epoch" or isinstance(value, bool) or not isinstance(value, numbers.Real):
                continue
            if math.isfinite(float(value)):
                self.writer.add_scalar(f"epoch/{key}", float(value), epoch)
        if self.histograms and epoch % self.histogram_every == 0:
            model = getattr(trainer.model, "module", trainer.model)   # DDP wraps the model
            for name, p in model.named_parameters():
                data = p.detach().numpy()
                if data.size and all(math.isfinite(v) for v in (float(data.min()), float(data.max()))):
                    self.writer.add_histogram(f"weights/{name}", data, epoch)
                if p.grad is not None:
                    g = p.grad.numpy()
                    if g.size and math.isfinite(float(abs(g).max())):
                        self.writer.add_histogram(f"grads/{name}", g, epoch)
        self.writer.flush()

    def on_fit_end(self, trainer):
        if self.writer is not None:
            self.writer.close()
            self.writer = None
