"""Padding layers: constant, zero, reflection, replication and circular padding in 1-3 dimensions.
"""
from __future__ import annotations

from varlens.nn import functional as F
from varlens.nn.module import Module
from varlens.nn.conv import _ntuple


# ---------------------------------------------------------------- padding
class _PadNd(Module):
    nd = 1
    mode = "constant"

    def __init__(self, padding):
        super().__init__()
        self.padding = _ntuple(padding, 2 * self.nd, "padding", type(self).__name__)

    def _check(self, input):
        if self.mode != "constant" and input.ndim not in (self.nd + 1, self.nd + 2):
            raise ValueError(f"{type(self).__name__}: expected a {self.nd + 1}-D (unbatched) or "
                             f"{self.nd + 2}-D (batched) input, got shape {tuple(input.shape)}")

    def forward(self, input):
        self._check(input)
        return F.pad(input, self.padding, self.mode)

    def extra_repr(self):
        return f"{self.padding}"


class _ConstantPadNd(_PadNd):
    def __init__(self, padding, value):
        super().__init__(padding)
        self.value = value

    def forward(self, input):
        return F.pad(input, self.padding, "constant", self.value)

    def extra_repr(self):
        return f"padding={self.padding}, value={self.value}"


class ConstantPad1d(_ConstantPadNd):
    nd = 1


class ConstantPad2d(_ConstantPadNd):
    nd = 2


class ConstantPad3d(_ConstantPadNd):
    nd = 3


class _ZeroPadNd(_ConstantPadNd):
    def __init__(self, padding):
        super().__init__(padding, 0.0)

    def extra_repr(self):
        return f"{self.padding}"


class ZeroPad1d(_ZeroPadNd):
    nd = 1


class ZeroPad2d(_ZeroPadNd):
    nd = 2


class ZeroPad3d(_ZeroPadNd):
    nd = 3


def _pad_class(name, nd, mode):
    return type(name, (_PadNd,), {"nd": nd, "mode": mode, "__module__": __name__,
                                  "__doc__": f"{mode.capitalize()} padding of the last {nd} dimension(s)."})


ReflectionPad1d = _pad_class("ReflectionPad1d", 1, "reflect")


ReflectionPad2d = _pad_class("ReflectionPad2d", 2, "reflect")


ReflectionPad3d = _pad_class("ReflectionPad3d", 3, "reflect")


ReplicationPad1d = _pad_class("ReplicationPad1d", 1, "replicate")


ReplicationPad2d = _pad_class("ReplicationPad2d", 2, "replicate")


ReplicationPad3d = _pad_class("ReplicationPad3d", 3, "replicate")


CircularPad1d = _pad_class("CircularPad1d", 1, "circular")


CircularPad2d = _pad_class("CircularPad2d", 2, "circular")


CircularPad3d = _pad_class("CircularPad3d", 3, "circular")
