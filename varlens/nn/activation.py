"""Activation modules (thin wrappers over varlens.nn.functional's activations).
"""
from __future__ import annotations

import warnings

from varlens.core import dtypes as DT
from varlens.core.array import xp
from varlens.nn import functional as F
from varlens.nn.functional._errors import ArgAssertionError as HardtanhArgError
from varlens.nn.functional.activation import _check_prelu, _prelu
from varlens.nn.module import Module
from varlens.nn.parameter import Parameter


class _Inplace(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace

    def extra_repr(self):
        return "inplace=True" if self.inplace else ""


class ReLU(_Inplace):
    """max(x, 0); derivative 1{x > 0} (0 at x = 0, as PyTorch)."""

    def forward(self, input):
        return F.relu(input)


class ReLU6(_Inplace):
    def forward(self, input):
        return F.relu6(input)


class LeakyReLU(Module):
    def __init__(self, negative_slope=0.01, inplace=False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self):
        return f"negative_slope={self.negative_slope}" + (", inplace=True" if self.inplace else "")


class ELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}" + (", inplace=True" if self.inplace else "")


class SELU(_Inplace):
    def forward(self, input):
        return F.selu(input)


class CELU(Module):
    def __init__(self, alpha=1.0, inplace=False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.celu(input, self.alpha)

    def extra_repr(self):
        return f"alpha={self.alpha}"


class GELU(Module):
    """x Phi(x) (approximate='none') or its tanh approximation (approximate='tanh')."""

    def __init__(self, approximate="none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self):
        return f"approximate={self.approximate!r}"


class SiLU(_Inplace):
    def forward(self, input):
        return F.silu(input)


class Mish(_Inplace):
    def forward(self, input):
        return F.mish(input)


class Sigmoid(Module):
    def forward(self, input):
        return F.sigmoid(input)


class LogSigmoid(Module):
    def forward(self, input):
        return F.logsigmoid(input)


class Tanh(Module):
    def forward(self, input):
        return F.tanh(input)


class Hardtanh(Module):
    def __init__(self, min_val=-1.0, max_val=1.0, inplace=False, min_value=None, max_value=None):
        super().__init__()
        if min_value is not None or max_value is not None:  # PyTorch's deprecated keyword names
            warnings.warn("keyword argument `min_value`/`max_value` is deprecated and renamed to "
                          "`min_val`/`max_val`", FutureWarning, stacklevel=2)
            min_val = min_val if min_value is None else min_value
            max_val = max_val if max_value is None else max_value
        if not max_val > min_val:
            raise HardtanhArgError(f"max_val ({max_val}) must be greater than min_val ({min_val}) "
                                   f"({type(self).__name__})")
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self):
        return f"min_val={self.min_val}, max_val={self.max_val}"


class Softplus(Module):
    def __init__(self, beta=1.0, threshold=20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self):
        return f"beta={self.beta}, threshold={self.threshold}"


class Softsign(Module):
    def forward(self, input):
        return F.softsign(input)


class Softmax(Module):
    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.softmax(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class Softmin(Softmax):
    def forward(self, input):
        return F.softmin(input, self.dim)


class LogSoftmax(Softmax):
    def forward(self, input):
        return F.log_softmax(input, self.dim)


class PReLU(Module):
    """max(0, x) + a min(0, x) with a learnable slope a (one, or one per channel), init 0.25."""

    def __init__(self, num_parameters=1, init=0.25, device=None, dtype=None):
        super().__init__()
        self.num_parameters = num_parameters
        self.weight = Parameter(xp.full((num_parameters,), init, dtype=DT.to_dtype(dtype) or DT.get_default_dtype()))

    def forward(self, input):
        _check_prelu(input, self.weight, f"PReLU(num_parameters={self.num_parameters})")
        return _prelu(input, self.weight)

    def extra_repr(self):
        return f"num_parameters={self.num_parameters}"


class Threshold(Module):
    def __init__(self, threshold, value, inplace=False):
        super().__init__()
        self.threshold, self.value = threshold, value

    def forward(self, input):
        return F.threshold(input, self.threshold, self.value)

    def extra_repr(self):
        return f"threshold={self.threshold}, value={self.value}"


# ---------------------------------------------------------------- activations
class _InplaceFlag(Module):
    def __init__(self, inplace=False):
        super().__init__()
        self.inplace = inplace


class Hardsigmoid(_InplaceFlag):
    """clamp(x/6 + 1/2, 0, 1)."""

    def forward(self, input):
        return F.hardsigmoid(input)


class Hardswish(_InplaceFlag):
    """x * hardsigmoid(x)."""

    def forward(self, input):
        return F.hardswish(input)


class Hardshrink(Module):
    def __init__(self, lambd=0.5):
        super().__init__()
        self.lambd = lambd

    def forward(self, input):
        return F.hardshrink(input, self.lambd)

    def extra_repr(self):
        return f"{self.lambd}"


class Softshrink(Hardshrink):
    def forward(self, input):
        return F.softshrink(input, self.lambd)


class Tanhshrink(Module):
    def forward(self, input):
        return F.tanhshrink(input)


class GLU(Module):
    """First half of ``dim`` times the sigmoid of the second half."""

    def __init__(self, dim=-1):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return F.glu(input, self.dim)

    def extra_repr(self):
        return f"dim={self.dim}"


class RReLU(Module):
    """Leaky ReLU with a random slope U(lower, upper) per negative entry in training and the
    mean slope (lower + upper)/2 in evaluation."""

    def __init__(self, lower=1.0 / 8, upper=1.0 / 3, inplace=False):
        super().__init__()
        self.lower, self.upper, self.inplace = lower, upper, inplace

    def forward(self, input):
        return F.rrelu(input, self.lower, self.upper, self.training)

    def extra_repr(self):
        return f"lower={self.lower}, upper={self.upper}" + (", inplace=True" if self.inplace else "")


class Softmax2d(Module):
    """Softmax over the channel axis of (N, C, H, W) or (C, H, W)."""

    def forward(self, input):
        return F.softmax2d(input)
