"""The device check shared by layer constructors: ``device=`` must name an available device
(the layer is built on the CPU and moved there by Module's constructor wrapper, nn/module.py).
"""
from __future__ import annotations

from varlens.core import array as B


def _check_device(device):
    if device is not None:
        B.namespace_of_device(device)   # raises for a device that is not available
