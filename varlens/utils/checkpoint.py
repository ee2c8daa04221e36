"""torch.utils.checkpoint: activation checkpointing, API only.

``checkpoint(function, *args, **kwargs)`` returns ``function(*args, **kwargs)``: varlens keeps
every activation the backward pass needs (it does not recompute segments), so the result and
the gradients are exactly those of an ordinary call; only the memory saving is absent.
``checkpoint_sequential(functions, segments, input)`` runs the modules one after another.
"""
from __future__ import annotations


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default",
               debug=False, preserve_rng_state=True, **kwargs):
    if not callable(function):
        raise TypeError(f"checkpoint: function must be callable, got {type(function).__name__}")
    return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    if not isinstance(segments, int) or isinstance(segments, bool) or segments < 1:
        raise ValueError(f"checkpoint_sequential: segments must be a positive int, got {segments!r}")
    mods = list(functions.children()) if hasattr(functions, "children") else list(functions)
    for m in mods:
        input = m(input)
    return input
