"""Training metrics computed on detached arrays (no autograd): accuracy and running means."""
from __future__ import annotations

import numpy as np

from varlens.core.tensor import Tensor


def _arr(x):
    return x._data if isinstance(x, Tensor) else np.asarray(x)


def correct_count(output, target):
    """Number of rows whose arg-max class equals the integer target; None if not a classification."""
    c = correct_count_array(output, target)
    return None if c is None else int(c)


def correct_count_array(output, target):
    """``correct_count`` as a 0-d array on the output's device (no host read); None if not a
    classification."""
    out, tgt = _arr(output), _arr(target)
    if out.ndim != 2 or tgt.ndim != 1 or tgt.dtype.kind not in "iu" or len(out) != len(tgt):
        return None
    return (out.argmax(axis=1) == tgt).sum()


def accuracy(output, target):
    """Fraction of rows whose arg-max class equals the target (``output`` (N, C), ``target`` (N,))."""
    c = correct_count(output, target)
    if c is None:
        raise ValueError(f"accuracy: expected output of shape (N, C) and integer target of shape (N,), got "
                         f"{tuple(_arr(output).shape)} and {tuple(_arr(target).shape)} "
                         f"({_arr(target).dtype})")
    return c / len(_arr(target))


class Average:
    """Sample-weighted running mean of a loss plus an accuracy count, summed in float64."""

    __slots__ = ("loss_sum", "correct", "n", "n_acc")

    def __init__(self):
        self.loss_sum, self.correct, self.n, self.n_acc = 0.0, 0, 0, 0

    def update(self, loss_value, batch_size, correct=None):
        self.loss_sum += float(loss_value) * batch_size
        self.n += batch_size
        if correct is not None:
            self.correct += correct
            self.n_acc += batch_size

    def add(self, loss_sum, n, correct=None, n_acc=0):
        """Add sums made elsewhere (the Trainer's device tally): sum of loss x batch size over
        ``n`` samples, and ``correct`` of ``n_acc`` classified rows."""
        self.loss_sum += float(loss_sum)
        self.n += n
        if correct is not None and n_acc:
            self.correct += int(correct)
            self.n_acc += n_acc

    @property
    def loss(self):
        return self.loss_sum / self.n if self.n else float("nan")

    @property
    def accuracy(self):
        return self.correct / self.n_acc if self.n_acc else None

    def state_dict(self):
        return {"loss_sum": self.loss_sum, "correct": self.correct, "n": self.n, "n_acc": self.n_acc}

    def load_state_dict(self, s):
        self.loss_sum, self.correct, self.n, self.n_acc = s["loss_sum"], s["correct"], s["n"], s["n_acc"]
