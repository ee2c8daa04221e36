"""torch.accelerator for varlens: the accelerator is the CUDA device (CuPy on a GPU, or the
simulated device after ``varlens.cuda.simulate()``); without one the answers are those of a
CPU-only PyTorch build.

Without CUDA: ``is_available()`` is False, ``device_count()`` 0 and ``current_accelerator()``
None, which sends the usual ``device = torch.accelerator.current_accelerator() if
torch.accelerator.is_available() else torch.device('cpu')`` to the CPU branch; the calls that
need a device (current device index, synchronize, streams, memory statistics) raise PyTorch's
RuntimeError.  With CUDA they answer for cuda:0 through varlens.cuda.
"""
from __future__ import annotations

import contextlib

from varlens import cuda as _cuda
from varlens.core.tensor import device as _device

__all__ = ["current_accelerator", "current_device_idx", "current_device_index", "current_stream",
           "device_count", "device_index", "empty_cache", "get_memory_info", "is_available",
           "max_memory_allocated", "max_memory_reserved", "memory_allocated", "memory_reserved",
           "memory_stats", "reset_accumulated_memory_stats", "reset_peak_memory_stats",
           "set_device_idx", "set_device_index", "set_stream", "synchronize"]


def _need():
    if not _cuda.is_available():
        raise RuntimeError("Cannot access accelerator device when none is available. "
                           "(varlens computes on the CPU through NumPy; CUDA needs CuPy and a GPU: "
                           "varlens.cuda.is_available() is False)")


def is_available():
    """True when the CUDA device is there (CuPy and a GPU, or the simulator)."""
    return _cuda.is_available()


def device_count():
    return _cuda.device_count()


def current_accelerator(check_available=False):
    """device('cuda') when there is one; None otherwise (PyTorch's answer on a CPU-only build)."""
    return _device("cuda") if _cuda.is_available() else None


def current_device_index():
    _need()
    return _cuda.current_device()


current_device_idx = current_device_index


def set_device_index(device, /):
    _need()
    _cuda.set_device(device)


set_device_idx = set_device_index


def current_stream(device=None, /):
    _need()
    return _cuda.current_stream(device)


def set_stream(stream):
    _need()
    if not isinstance(stream, _cuda.Stream):
        raise TypeError(f"set_stream: expected a varlens.cuda.Stream, got {type(stream).__name__}")
    stream.__enter__()


def synchronize(device=None, /):
    _need()
    _cuda.synchronize(device)


def empty_cache():
    _need()
    _cuda.empty_cache()


def _stat(fn):
    def f(device_index=None, /):
        _need()
        return fn(device_index)
    f.__name__ = fn.__name__
    f.__doc__ = fn.__doc__
    return f


memory_allocated = _stat(_cuda.memory_allocated)
max_memory_allocated = _stat(_cuda.max_memory_allocated)
memory_reserved = _stat(_cuda.memory_reserved)
max_memory_reserved = _stat(_cuda.max_memory_reserved)
reset_peak_memory_stats = reset_accumulated_memory_stats = _stat(_cuda.reset_peak_memory_stats)


def memory_stats(device_index=None, /):
    """The figures varlens keeps: allocated and reserved bytes, current and peak."""
    _need()
    return _cuda.memory_stats(device_index)


def get_memory_info(device_index=None, /):
    """(free, total) bytes of the device (varlens.cuda.mem_get_info)."""
    _need()
    return _cuda.mem_get_info(device_index)


@contextlib.contextmanager
def device_index(device, /):
    """``with torch.accelerator.device_index(i):``: None is a no-op; an index needs the device."""
    if device is not None:
        _need()
        with _cuda.device(device):
            yield
        return
    yield
