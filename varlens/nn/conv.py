"""Convolution layers: Conv1d/2d/3d and ConvTranspose1d/2d/3d (PyTorch's arguments, weight layouts and
default initialisation).  The math and its derivatives live in varlens.ops.nn.conv (seed 003 §5.2) and
varlens.nn.functional.conv.
"""
from __future__ import annotations

import math
import numbers

from varlens.core import dtypes as DT
from varlens.core.array import xp
from varlens.nn import functional as F
from varlens.nn import init
from varlens.nn.functional._errors import ArgRuntimeError
from varlens.nn.module import Module
from varlens.nn.parameter import Parameter
from varlens.ops.nn.conv import _tuple
from varlens.nn._device import _check_device


_PADDING_MODES = {"zeros", "reflect", "replicate", "circular"}


class _ConvNd(Module):
    """Shared constructor: weight (out, in/groups, *k) or, transposed, (in, out/groups, *k)."""

    _n = 2
    _transposed = False

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", output_padding=0, device=None, dtype=None):
        super().__init__()
        name = type(self).__name__
        _check_device(device)
        n = self._n
        for arg, v in (("in_channels", in_channels), ("out_channels", out_channels), ("groups", groups)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"{name}: {arg} must be a positive int, got {v!r} ({type(v).__name__})")
            if v < 1:
                raise ArgRuntimeError(f"{name}: {arg} must be a positive int, got {v!r}")
        if in_channels % groups:
            raise ValueError(f"{name}: in_channels ({in_channels}) must be divisible by groups ({groups})")
        if out_channels % groups:
            raise ValueError(f"{name}: out_channels ({out_channels}) must be divisible by groups ({groups})")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"{name}: padding_mode must be one of {sorted(_PADDING_MODES)}, got {padding_mode!r}")
        if padding_mode != "zeros" and self._transposed:
            raise ValueError(f'Only "zeros" padding mode is supported for {name}')
        self.in_channels, self.out_channels, self.groups = in_channels, out_channels, groups
        if hasattr(kernel_size, "__len__") and len(kernel_size) != n:
            # PyTorch keeps such a tuple, builds a weight with the wrong number of dims and fails
            # at the first forward (RuntimeError); varlens refuses it here
            raise ArgRuntimeError(f"{name}: kernel_size must be an int or a tuple of {n} ints, got "
                                  f"{tuple(kernel_size)!r} ({len(kernel_size)} element(s)); a {n}-d "
                                  f"convolution needs {n} kernel sizes")
        self.kernel_size = _tuple(kernel_size, n, "kernel_size", name, minimum=1)
        self.stride = _tuple(stride, n, "stride", name, minimum=1)
        self.dilation = _tuple(dilation, n, "dilation", name, minimum=1)
        if isinstance(padding, str):
            if padding not in ("same", "valid") or self._transposed:
                allowed = "" if self._transposed else ", 'same' or 'valid'"
                raise ValueError(f"{name}: padding must be an int, a tuple of {n} ints{allowed}, "
                                 f"got {padding!r}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError(f"{name}: padding='same' needs stride 1, got stride {self.stride}")
            self.padding = padding
        else:
            self.padding = _tuple(padding, n, "padding", name, minimum=0)
        self.output_padding = _tuple(output_padding, n, "output_padding", name, minimum=0)
        self.padding_mode = padding_mode
        # F.pad's (last dim first, before/after) widths for the non-zeros modes, as PyTorch keeps them
        if self.padding == "valid":
            widths = [(0, 0)] * n
        elif self.padding == "same":
            widths = [(d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)
                      for d, k in zip(self.dilation, self.kernel_size)]
        else:
            widths = [(p, p) for p in self.padding]
        self._reversed_padding_repeated_twice = [w for pair in reversed(widths) for w in pair]
        dt = DT.to_dtype(dtype) or DT.get_default_dtype()
        if self._transposed:
            shape = (in_channels, out_channels // groups) + self.kernel_size
        else:
            shape = (out_channels, in_channels // groups) + self.kernel_size
        self.weight = Parameter(xp.empty(shape, dtype=dt))
        if bias:
            self.bias = Parameter(xp.empty((out_channels,), dtype=dt))
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        """PyTorch's default: kaiming_uniform_(a=sqrt(5)) = U(+-1/sqrt(fan_in)) for the weight,
        U(+-1/sqrt(fan_in)) for the bias, fan_in = weight.shape[1] * prod(kernel_size)
        (for the transposed layer that is out_channels/groups * prod(kernel), as PyTorch)."""
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.weight.shape[1] * math.prod(self.kernel_size)
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def _padded(self, input):
        """(input, padding) for the convolution: with a non-zeros padding_mode the input is padded
        by F.pad in that mode and the convolution itself pads nothing (as PyTorch)."""
        if self.padding_mode == "zeros":
            return input, self.padding
        return F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode), 0

    def extra_repr(self):
        s = f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, stride={self.stride}"
        if self.padding != (0,) * self._n:
            s += f", padding={self.padding}"
        if self.dilation != (1,) * self._n:
            s += f", dilation={self.dilation}"
        if self.output_padding != (0,) * self._n:
            s += f", output_padding={self.output_padding}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.bias is None:
            s += ", bias=False"
        if self.padding_mode != "zeros":
            s += f", padding_mode={self.padding_mode}"
        return s


class _Conv(_ConvNd):
    """Conv1d/2d/3d: PyTorch's constructor (no output_padding) and one forward that pads in the
    chosen padding_mode and calls ``F.conv{n}d``."""

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, 0, device, dtype)

    def forward(self, input):
        x, pad = self._padded(input)
        return self._conv(x, self.weight, self.bias, self.stride, pad, self.dilation, self.groups)


class Conv1d(_Conv):
    """1-D convolution over (N, C_in, L): weight (C_out, C_in/groups, k)."""

    _n = 1
    _conv = staticmethod(F.conv1d)


class Conv2d(_Conv):
    """2-D convolution (cross-correlation) over (N, C_in, H, W): weight (C_out, C_in/groups, kh, kw).

    padding: int, pair, 'same' (stride 1; an even kernel pads one more at the bottom/right)
    or 'valid'.  Output size floor((H + 2p - d(k - 1) - 1)/s) + 1 (seed 003 §5.2.6).
    """

    _conv = staticmethod(F.conv2d)


class ConvTranspose2d(_ConvNd):
    """Transposed 2-D convolution (the input-gradient of Conv2d as a layer): weight
    (C_in, C_out/groups, kh, kw); output (H - 1)s - 2p + d(k - 1) + output_padding + 1."""

    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype)

    def forward(self, input, output_size=None):
        op = self.output_padding
        if output_size is not None:
            # choose output_padding so the output has the requested spatial size (as PyTorch)
            size = tuple(output_size)[-2:]
            H, W = input.shape[-2:]
            op = tuple(int(s) - ((L - 1) * st - 2 * p + d * (k - 1) + 1) for s, L, st, p, d, k in
                       zip(size, (H, W), self.stride, self.padding, self.dilation, self.kernel_size))
        return F.conv_transpose2d(input, self.weight, self.bias, self.stride, self.padding, op,
                                  self.groups, self.dilation)


def _ntuple(v, n, name, what):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        return (int(v),) * n
    v = tuple(v)
    if len(v) != n:
        raise ValueError(f"{what}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    return tuple(int(a) for a in v)


class Conv3d(_Conv):
    """3-D convolution over (N, C_in, D, H, W): weight (C_out, C_in/groups, kd, kh, kw)."""

    _n = 3
    _conv = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    _transposed = True

    def __init__(self, in_channels, out_channels, kernel_size, stride=1, padding=0, output_padding=0,
                 groups=1, bias=True, dilation=1, padding_mode="zeros", device=None, dtype=None):
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation, groups, bias,
                         padding_mode, output_padding, device, dtype)

    def _output_padding(self, input, output_size):
        if output_size is None:
            return self.output_padding
        n = self._n
        size = tuple(int(s) for s in output_size)[-n:]
        ins = tuple(input.shape[-n:])
        op = tuple(s - ((L - 1) * st - 2 * p + d * (k - 1) + 1) for s, L, st, p, d, k in
                   zip(size, ins, self.stride, self.padding, self.dilation, self.kernel_size))
        if any(o < 0 or o >= max(st, d) for o, st, d in zip(op, self.stride, self.dilation)):
            raise ValueError(f"{type(self).__name__}: requested an output size of {size}, but valid sizes for an "
                             f"input of spatial size {ins} differ from the default by less than the stride")
        return op


class ConvTranspose1d(_ConvTransposeNd):
    """Transposed 1-D convolution: weight (C_in, C_out/groups, k)."""

    _n = 1

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        return F.conv_transpose1d(input, self.weight, self.bias, self.stride[0], self.padding[0], op[0],
                                  self.groups, self.dilation[0])


class ConvTranspose3d(_ConvTransposeNd):
    """Transposed 3-D convolution: weight (C_in, C_out/groups, kd, kh, kw)."""

    _n = 3

    def forward(self, input, output_size=None):
        op = self._output_padding(input, output_size)
        return F.conv_transpose3d(input, self.weight, self.bias, self.stride, self.padding, op, self.groups,
                                  self.dilation)
