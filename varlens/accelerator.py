"""torch.accelerator, answered for varlens: there is no accelerator (varlens computes on the CPU
through NumPy), so the answers are those of a CPU-only PyTorch build.

``is_available()`` is False, ``device_count()`` 0 and ``current_accelerator()`` None, which sends
the usual ``device = torch.accelerator.current_accelerator() if torch.accelerator.is_available()
else torch.device('cpu')`` to the CPU branch.  The calls that need a device (current device index,
synchronize, streams, memory statistics) raise PyTorch's RuntimeError, as a CPU-only PyTorch does.
"""
from __future__ import annotations

import contextlib

__all__ = ["current_accelerator", "current_device_idx", "current_device_index", "current_stream",
           "device_count", "device_index", "empty_cache", "get_memory_info", "is_available",
           "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
           "memory_stats", "reset_accumulated_memory_stats", "reset_peak_memory_stats",
           "set_device_idx", "set_device_index", "set_stream", "synchronize"]


def _no_accelerator(*_args, **_kwargs):
    raise RuntimeError("Cannot access accelerator device when none is available. "
                       "(varlens computes on the CPU through NumPy; it has no accelerator)")


def is_available():
    """False: varlens has no accelerator."""
    return False


def device_count():
    """0: varlens has no accelerator devices."""
    return 0


def current_accelerator(check_available=False):
    """None: there is no accelerator (PyTorch's answer on a CPU-only build)."""
    return None


current_device_index = current_device_idx = _no_accelerator
set_device_index = set_device_idx = _no_accelerator
current_stream = set_stream = synchronize = _no_accelerator
empty_cache = get_memory_info = memory_stats = _no_accelerator
memory_allocated = max_memory_allocated = memory_reserved = max_memory_reserved = _no_accelerator
reset_accumulated_memory_stats = reset_peak_memory_stats = _no_accelerator


@contextlib.contextmanager
def device_index(device, /):
    """``with torch.accelerator.device_index(None):`` is a no-op, any other index has no device."""
    if device is not None:
        _no_accelerator()
    yield
