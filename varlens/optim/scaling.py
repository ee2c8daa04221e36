"""Learning-rate scaling with batch size: the linear rule and the square-root rule (seed 000).

A minibatch gradient is the mean of B per-example gradients.  If those have variance
sigma^2 (and are independent), the mean has variance sigma^2 / B: the gradient *noise*
shrinks like 1/sqrt(B) while its *expected value* does not change.

* **Square-root rule** (``rule="sqrt"``, eta proportional to sqrt(B)): keeps the noise of
  the update ``eta * g`` fixed, since its variance eta^2 sigma^2 / B is then constant.  It is
  the rule the variance argument gives, and the usual choice for adaptive optimisers (Adam).
* **Linear rule** (``rule="linear"``, eta proportional to B): reasons about the expected
  update instead: one step with B examples should move as far as B/B0 steps with B0 examples
  would.  Widely used for SGD with momentum on large-batch image training (with warm-up).

Both stop working once B exceeds the *gradient noise scale* (the batch size past which the
averaged gradient is nearly noiseless): beyond it a larger batch no longer buys a larger
stable step, and the lr is capped by the curvature of the loss (eta < 2/lambda_max on a
quadratic, seed 003 §4.2.2), so scaling further makes training diverge.
"""
from __future__ import annotations

import math
import numbers

__all__ = ["scale_lr", "linear_scaling", "sqrt_scaling", "update_noise_std"]

_RULES = ("linear", "sqrt")


def _positive(name, value, integral=False):
    ok = isinstance(value, numbers.Integral if integral else numbers.Real) and not isinstance(value, bool)
    if not ok or value <= 0 or value != value:
        kind = "a positive integer" if integral else "a positive number"
        raise ValueError(f"scale_lr: {name} must be {kind}, got {value!r}")


def scale_lr(lr, base_batch, new_batch, rule="linear", max_lr=None):
    """The learning rate for batch size ``new_batch`` given ``lr`` tuned at ``base_batch``.

    ``rule="linear"``: lr * new/base.  ``rule="sqrt"``: lr * sqrt(new/base).  ``max_lr``
    (optional) caps the result, e.g. at the curvature limit 2/lambda_max, since neither rule
    holds past the gradient noise scale.
    """
    _positive("lr", lr)
    _positive("base_batch", base_batch, integral=True)
    _positive("new_batch", new_batch, integral=True)
    if rule not in _RULES:
        raise ValueError(f"scale_lr: rule must be one of {_RULES}, got {rule!r}")
    ratio = new_batch / base_batch
    out = lr * (ratio if rule == "linear" else math.sqrt(ratio))
    if max_lr is not None:
        _positive("max_lr", max_lr)
        out = min(out, max_lr)
    return out


def linear_scaling(lr, base_batch, new_batch):
    """``scale_lr(..., rule="linear")``: eta proportional to B."""
    return scale_lr(lr, base_batch, new_batch, "linear")


def sqrt_scaling(lr, base_batch, new_batch):
    """``scale_lr(..., rule="sqrt")``: eta proportional to sqrt(B)."""
    return scale_lr(lr, base_batch, new_batch, "sqrt")


def update_noise_std(lr, grad_std, batch_size):
    """Standard deviation of the noise in one SGD update, ``lr * grad_std / sqrt(B)``
    (per coordinate, independent per-example gradients of standard deviation grad_std)."""
    _positive("lr", lr)
    _positive("batch_size", batch_size, integral=True)
    if not isinstance(grad_std, numbers.Real) or grad_std < 0:
        raise ValueError(f"update_noise_std: grad_std must be a number >= 0, got {grad_std!r}")
    return lr * grad_std / math.sqrt(batch_size)
