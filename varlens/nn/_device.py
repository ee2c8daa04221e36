"""The device check shared by layer constructors (varlens's layers live on the CPU).
"""
from __future__ import annotations

from varlens.core.tensor import _no_device   # the message and type shared with Tensor.to


def _check_device(device):
    if device is not None and not str(device).startswith("cpu"):
        raise _no_device("layer construction", str(device))
