"""Linear layers: Identity, Linear, LazyLinear, Bilinear.
"""
from __future__ import annotations

import math

from varlens.core import dtypes as DT
from varlens.core import array as B
from varlens.core.array import xp
from varlens.nn import functional as F
from varlens.nn import init
from varlens.nn.functional._errors import ArgRuntimeError
from varlens.nn.functional._common import _type_name
from varlens.nn.module import Module
from varlens.nn.parameter import Parameter
from varlens.ops.nn import linear as _nn
from varlens.nn._device import _check_device


def _empty(*shape, dtype=None):
    return Parameter(xp.empty(shape, dtype=DT.to_dtype(dtype) or DT.get_default_dtype()))


class Identity(Module):
    """Returns its input unchanged (any constructor arguments are ignored, as PyTorch)."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b with weight (out_features, in_features) and bias (out_features,).

    Initialisation is PyTorch's: kaiming_uniform_(W, a=sqrt(5)), i.e. U(-1/sqrt(fan_in),
    1/sqrt(fan_in)), and the bias U(-1/sqrt(fan_in), 1/sqrt(fan_in)).  For the He
    initialisation of the notes call ``init.kaiming_normal_(layer.weight, nonlinearity='relu')``
    (see docs/conventions.md)."""

    def __init__(self, in_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        _check_device(device)
        for name, v in (("in_features", in_features), ("out_features", out_features)):
            if not isinstance(v, int) or isinstance(v, bool):
                raise TypeError(f"Linear: {name} must be an int, got {v!r} ({type(v).__name__})")
            if v < 0:
                raise ArgRuntimeError(f"Trying to create tensor with negative dimension {v}: [{out_features}, "
                                      f"{in_features}] (Linear: {name} must be >= 0, got {v})")
        self.in_features = in_features
        self.out_features = out_features
        self.weight = _empty(out_features, in_features, dtype=dtype)
        if bias:
            self.bias = _empty(out_features, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        init.kaiming_uniform_(self.weight, a=math.sqrt(5))
        if self.bias is not None:
            fan_in = self.in_features
            bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input):
        # direct table reads (see CrossEntropyLoss.forward); a weight re-set as a plain
        # attribute (weight-norm style) is still found through the ordinary lookup
        p = self._parameters
        w = p.get("weight")
        if w is None:
            w = self.weight
        try:
            s = input._data.shape
        except AttributeError:
            raise TypeError(f"linear(): argument 'input' (position 1) must be Tensor, not "
                            f"{_type_name(input)}") from None
        ws = w._data.shape
        if not s or len(ws) != 2 or s[-1] != ws[1]:  # checked against the weight: it may have been replaced
            _nn.linear_shape_error(s, ws, f"Linear(in_features={self.in_features}, "
                                          f"out_features={self.out_features})")
        return _nn.Linear.apply(input, w, p["bias"] if "bias" in p else self.bias)

    def extra_repr(self):
        return f"in_features={self.in_features}, out_features={self.out_features}, bias={self.bias is not None}"


class LazyLinear(Linear):
    """A Linear whose in_features comes from its first input (torch.nn.LazyLinear).

    Until the first call the weight and bias are empty placeholders (shape (0,)); the first
    forward gives them their shapes in place (the same Parameter objects, so an optimiser made
    earlier keeps working), initialises them as Linear does, and the module becomes a Linear."""

    def __init__(self, out_features, bias=True, device=None, dtype=None):
        Module.__init__(self)
        _check_device(device)
        if not isinstance(out_features, int) or isinstance(out_features, bool) or out_features < 0:
            raise ValueError(f"LazyLinear: out_features must be a non-negative int, got {out_features!r}")
        self.in_features = 0
        self.out_features = out_features
        self.weight = _empty(0, dtype=dtype)
        if bias:
            self.bias = _empty(0, dtype=dtype)
        else:
            self.register_parameter("bias", None)

    def has_uninitialized_params(self):
        return True

    def initialize_parameters(self, input):
        """Shape the parameters from ``input``'s last dimension and initialise them."""
        s = input.shape
        if not s:
            raise RuntimeError(f"LazyLinear: expected an input with at least one dimension, got shape {tuple(s)}")
        self.in_features = int(s[-1])
        dt = self.weight._data.dtype
        ns = B.namespace(self.weight._data)   # on the device the uninitialised weight is on
        self.weight._data = ns.empty((self.out_features, self.in_features), dtype=dt)
        if self.bias is not None:
            self.bias._data = ns.empty((self.out_features,), dtype=dt)
        self.reset_parameters()
        self.__class__ = Linear

    def forward(self, input):
        self.initialize_parameters(input)
        return Linear.forward(self, input)


class Bilinear(Module):
    """y_k = x1^T W_k x2 + b_k, weight (out, in1, in2); init U(-1/sqrt(in1), 1/sqrt(in1)) as PyTorch."""

    def __init__(self, in1_features, in2_features, out_features, bias=True, device=None, dtype=None):
        super().__init__()
        _check_device(device)
        self.in1_features, self.in2_features, self.out_features = in1_features, in2_features, out_features
        self.weight = _empty(out_features, in1_features, in2_features, dtype=dtype)
        if bias:
            self.bias = _empty(out_features, dtype=dtype)
        else:
            self.register_parameter("bias", None)
        self.reset_parameters()

    def reset_parameters(self):
        bound = 1 / math.sqrt(self.weight.shape[1])
        init.uniform_(self.weight, -bound, bound)
        if self.bias is not None:
            init.uniform_(self.bias, -bound, bound)

    def forward(self, input1, input2):
        return F.bilinear(input1, input2, self.weight, self.bias)

    def extra_repr(self):
        return (f"in1_features={self.in1_features}, in2_features={self.in2_features}, "
                f"out_features={self.out_features}, bias={self.bias is not None}")
