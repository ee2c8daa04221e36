"""The one small training loop: the steps every hand-written loop repeated, written once.

    losses = train_loop(model, loss_fn, batches, optimizer, clip_grad_norm=1.0)

For each batch drawn from ``batches`` (any iterable; a generator keeps the draws of batch
indices lazy, in the order a plain ``for`` loop would make them): set the learning rate from
``lr_at(step)`` if given, clear the gradients, ``loss = loss_fn(batch)``, back-propagate, clip
the global gradient norm if asked, take the optimiser step, then the scheduler's step if given.
``on_step(step, loss_value)`` is called after each step (logging, counting); the loop stops after
``max_steps`` steps without drawing another batch.  Returns the list of per-step losses as floats.

The Trainer (varlens.train.trainer) is the full-featured loop (validation, checkpoints,
callbacks, accumulation); this one is for experiments whose step is just the five lines above.
"""
from __future__ import annotations

from varlens.nn.utils import clip_grad_norm_


def train_loop(model, loss_fn, batches, optimizer, *, clip_grad_norm=None, lr_at=None, scheduler=None,
               max_steps=None, on_step=None):
    """Train ``model`` on ``batches``; ``loss_fn(batch)`` returns the scalar loss Tensor.

    ``clip_grad_norm``: max global L2 norm of the gradients (None or 0: no clipping);
    ``lr_at(step)``: the learning rate of every parameter group at step ``step`` (0-based);
    ``scheduler``: stepped after each optimiser step; ``max_steps``: stop after this many steps;
    ``on_step(step, loss)``: called with the 1-based step count and the step's loss (a float).
    """
    model.train()
    losses = []
    for batch in batches:
        step = len(losses)
        if lr_at is not None:
            lr = lr_at(step)
            for group in optimizer.param_groups:
                group["lr"] = lr
        optimizer.zero_grad()
        loss = loss_fn(batch)
        loss.backward()
        if clip_grad_norm:
            clip_grad_norm_(model.parameters(), clip_grad_norm)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        losses.append(float(loss))
        if on_step is not None:
            on_step(step + 1, losses[-1])
        if max_steps is not None and len(losses) >= max_steps:
            break
    return losses
