"""Moving tensors between devices: ``to(device)``, ``cuda()``, ``cpu()`` (ops layer).

A tensor lives where its array lives: a NumPy ndarray on the CPU, a CuPy (or simulated) array
on "cuda" (varlens/core/array.py).  The copy is an op in the graph, so a loss computed on the
GPU from a tensor that was moved there sends its gradient back to the CPU leaf.
"""
from __future__ import annotations

from varlens.core import array as B
from varlens.core.dtypes import to_dtype
from varlens.core.function import Function
from varlens.core.tensor import Tensor, parse_to
from varlens.ops.pointwise import cast, clone


class ToDevice(Function):
    """out = x copied to another device;  d/dx = 1, so the gradient is copied back to x's device
    (PyTorch's ToCopyBackward0)."""

    def forward(self, x, lib):
        self.src = B.namespace(x)
        return B.to_namespace(x, lib)

    def backward(self, g):
        if isinstance(g, Tensor):
            return ToDevice.apply(g, self.src)
        return B.to_namespace(g, self.src)


def to_device(t, dev, non_blocking=False):
    """``t`` on device ``dev`` (a name or a device); the same tensor when it is already there."""
    lib = B.namespace_of_device(dev)
    if B.namespace(t._data) is lib:
        return t
    return ToDevice.apply(t, lib)


def tensor_cuda(self, device=None, non_blocking=False, memory_format=None):
    """A copy on the CUDA device (this tensor when already there)."""
    return to_device(self, "cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))


def tensor_cpu(self, memory_format=None):
    """A copy in CPU memory (this tensor when already there)."""
    return to_device(self, "cpu")


def tensor_to(self, *args, non_blocking=False, copy=False, **kwargs):
    """``to(dtype)``, ``to(device)``, ``to(device, dtype)``, ``to(other)``: converted and moved
    (the same tensor when nothing changes and copy is False)."""
    dtype, dev = parse_to(args, kwargs)
    out = self
    if dev is not None:
        out = to_device(out, dev)
    if dtype is not None:
        dtype = to_dtype(dtype)
        if dtype != out._data.dtype:
            out = cast(out, dtype)
    if copy and out is self:
        out = clone(self)
    return out


def tensor_pin_memory(self, device=None):
    """A copy of this CPU tensor in page-locked ("pinned") host memory, from which copies to the GPU
    can run asynchronously (``to('cuda', non_blocking=True)``): CuPy's pinned memory pool; on the
    simulated device an ordinary copy marked pinned.  Without CUDA, the tensor itself (nothing to
    pin for).  A CUDA tensor raises, as torch."""
    if B.is_device_array(self._data):
        raise RuntimeError(f"cannot pin a CUDA tensor ({self.dtype}, {self.device}): only dense CPU tensors "
                           "can be pinned")
    lib = B.cuda_namespace(required=False)
    if lib is None or self.__dict__.get("_pinned", False):
        return self
    out = clone(self)
    if not getattr(lib, "simulated", False):
        import cupyx   # pinned host memory is CuPy's (cupyx.empty_pinned gives a NumPy array on it)
        arr = cupyx.empty_pinned(out._data.shape, out._data.dtype)
        arr[...] = out._data
        out._data = arr
    out._pinned = True
    return out


def tensor_is_pinned(self, device=None):
    """True for a tensor made by pin_memory() (page-locked host memory)."""
    return self.__dict__.get("_pinned", False)
