"""The device check shared by layer constructors (varlens's layers live on the CPU).
"""
from __future__ import annotations


def _check_device(device):
    if device is not None and not str(device).startswith("cpu"):
        raise RuntimeError(f"device {device!r} is not available; varlens runs on the CPU")
