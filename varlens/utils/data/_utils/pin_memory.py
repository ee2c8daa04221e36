"""Pinning a batch (torch.utils.data._utils.pin_memory.pin_memory): every tensor in a nested
structure of dicts, lists, tuples and named tuples is replaced by its ``pin_memory()`` copy, so
the training loop's ``batch.to("cuda", non_blocking=True)`` copies from page-locked memory."""
from __future__ import annotations

from collections.abc import Mapping, Sequence

from varlens.core.tensor import Tensor


def pin_memory(data, device=None):
    """``data`` with its tensors pinned (objects with their own ``pin_memory()`` method use it;
    strings and other values are returned as they are)."""
    if isinstance(data, Tensor):
        return data.pin_memory()
    if isinstance(data, (str, bytes)):
        return data
    if isinstance(data, Mapping):
        out = {k: pin_memory(v, device) for k, v in data.items()}
        try:
            return type(data)(out)
        except TypeError:       # a mapping type that cannot be built from a dict
            return out
    if isinstance(data, tuple) and hasattr(data, "_fields"):      # a named tuple
        return type(data)(*(pin_memory(v, device) for v in data))
    if isinstance(data, tuple):
        return tuple(pin_memory(v, device) for v in data)
    if isinstance(data, Sequence):
        out = [pin_memory(v, device) for v in data]
        try:
            return type(data)(out)
        except TypeError:
            return out
    if callable(getattr(data, "pin_memory", None)):
        return data.pin_memory()
    return data
