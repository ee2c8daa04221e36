"""Normalisation layers over features: LayerNorm, RMSNorm, GroupNorm, LocalResponseNorm.
"""
from __future__ import annotations

from varlens.core.array import xp
from varlens.nn import functional as F
from varlens.nn import init
from varlens.nn.functional._errors import ArgZeroDivisionError
from varlens.nn.functional.normalization import _check_group_norm
from varlens.nn.functional.normalization import _group_norm
from varlens.nn.functional.normalization import _norm_shape
from varlens.nn.module import Module
from varlens.nn.parameter import Parameter
from varlens.nn.batchnorm import _affine_params, _dt, _reset_affine


class LayerNorm(Module):
    """Normalise each example over its last dims ``normalized_shape`` (seed 003 §4.3.3);
    elementwise affine weight (init 1) and bias (init 0) of that shape."""

    def __init__(self, normalized_shape, eps=1e-05, elementwise_affine=True, bias=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _norm_shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        self._has_bias = bool(bias) and bool(elementwise_affine)
        _affine_params(self, self.normalized_shape, _dt(dtype), elementwise_affine, bias)

    reset_parameters = _reset_affine

    def forward(self, input):
        # the parameter table read directly (see Linear.forward); an attribute set another way
        # (weight=None without affine, a re-set plain attribute) is found by the ordinary lookup
        p = self._parameters
        w = p.get("weight")
        b = p.get("bias")
        return F.layer_norm(input, self.normalized_shape, self.weight if w is None else w,
                            self.bias if b is None else b, self.eps)

    def extra_repr(self):
        return (f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}, "
                f"bias={self._has_bias}")


class RMSNorm(Module):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last dims; eps=None means the dtype's
    machine epsilon (PyTorch 2.4+)."""

    def __init__(self, normalized_shape, eps=None, elementwise_affine=True, device=None, dtype=None):
        super().__init__()
        self.normalized_shape = _norm_shape(normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            self.weight = Parameter(xp.ones(self.normalized_shape, dtype=_dt(dtype)))
        else:
            self.register_parameter("weight", None)

    def reset_parameters(self):
        if self.weight is not None:
            init.ones_(self.weight)

    def forward(self, input):
        return F.rms_norm(input, self.normalized_shape, self.weight, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}, elementwise_affine={self.elementwise_affine}"


class GroupNorm(Module):
    """Normalise each example over groups of channels; per-channel affine (init 1 and 0)."""

    def __init__(self, num_groups, num_channels, eps=1e-05, affine=True, device=None, dtype=None, *, bias=True):
        super().__init__()
        if num_groups == 0:
            raise ArgZeroDivisionError("GroupNorm: num_groups must be positive, got 0")
        if num_channels % num_groups:
            raise ValueError(f"num_channels must be divisible by num_groups (GroupNorm: num_channels="
                             f"{num_channels} is not a multiple of num_groups={num_groups})")
        self.num_groups, self.num_channels, self.eps, self.affine = num_groups, num_channels, eps, affine
        self._has_bias = bool(bias)
        _affine_params(self, num_channels, _dt(dtype), affine, bias)

    reset_parameters = _reset_affine

    def forward(self, input):
        _check_group_norm(input, self.num_groups, self.weight, self.bias,
                            f"GroupNorm({self.num_groups}, {self.num_channels})")
        return _group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self):
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}, bias={self._has_bias and bool(self.affine)}"


# ---------------------------------------------------------------- normalisation
class LocalResponseNorm(Module):
    def __init__(self, size, alpha=1e-4, beta=0.75, k=1.0):
        super().__init__()
        self.size, self.alpha, self.beta, self.k = size, alpha, beta, k

    def forward(self, input):
        return F.local_response_norm(input, self.size, self.alpha, self.beta, self.k)

    def extra_repr(self):
        return f"{self.size}, alpha={self.alpha}, beta={self.beta}, k={self.k}"
