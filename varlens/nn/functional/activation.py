"""Activation functions (torch.nn.functional's non-linear activations), their in-place forms
and softmax / log_softmax / softmin.
"""
from __future__ import annotations

from varlens import ops as _ops
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn.functional._common import _tensor_args, _const, _dtype_name, _inplace, _shape, _tensor_input
from varlens.random import generator_for
from varlens.core import array as B



@_tensor_input
def gelu(input, approximate="none"):
    return _ops.gelu(input, approximate=approximate)


@_tensor_input
def sigmoid(input):
    return _ops.sigmoid(input)


@_tensor_input
def logsigmoid(input):
    return -_ops.softplus(-input)


@_tensor_input
def tanh(input):
    return _ops.tanh(input)


@_tensor_input
def softplus(input, beta=1.0, threshold=20.0):
    return _ops.softplus(input, beta, threshold)


@_tensor_input
def softsign(input):
    return input / (_ops.abs(input) + 1)


def _check_prelu(input, weight, what):
    nd = input.ndim
    if nd == 0:
        raise RuntimeError(f"Not allow zero-dim input tensor. ({what}: expected an input with at least one "
                           f"dimension, got a 0-d tensor)")
    if input._data.dtype != weight._data.dtype:
        raise RuntimeError(f"prelu: Type promoting not supported. Got {_dtype_name(input._data.dtype)} and "
                           f"{_dtype_name(weight._data.dtype)} ({what}: input dtype {input._data.dtype}, weight "
                           f"dtype {weight._data.dtype})")
    n = weight.numel()
    if n != 1:
        c = input.shape[1] if nd >= 2 else 1
        if n != c:
            raise RuntimeError(f"Mismatch of parameter numbers and input channel size. Found parameter numbers "
                               f"= {n} and channel size = {c}. ({what}: expected {n} channels in dim 1, got "
                               f"input of shape {tuple(input.shape)})")


@_tensor_args("input", "weight")
def prelu(input, weight):
    _check_prelu(input, weight, "prelu")
    return _prelu(input, weight)


def _prelu(input, weight):
    w = weight
    if input.ndim >= 2 and weight.numel() > 1:
        w = _ops.reshape(weight, (-1,) + (1,) * (input.ndim - 2))
    return _ops.where(input > 0, input, input * w)


# ---------------------------------------------------------------- activations
def _hardsigmoid_out(input):
    """clamp(x/6 + 1/2, 0, 1); derivative 1/6 strictly inside (-3, 3), 0 outside (as PyTorch)."""
    x = input._data
    inside = (x > -3) & (x < 3)
    return _ops.where(inside, input / 6.0 + 0.5, _const(x >= 3, input))


def _hardswish_out(input):
    """x * hardsigmoid(x): 0 below -3, x above 3, x (x + 3)/6 between (derivative (2x + 3)/6)."""
    x = input._data
    mid = input * (input + 3.0) / 6.0
    return _ops.where(x < -3, 0.0, _ops.where(x > 3, input, mid))


@_tensor_input
def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0."""
    x = input._data
    return _ops.where((x > lambd) | (x < -lambd), input, 0.0)


@_tensor_input
def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambd must be greater or equal to 0, but found to be {lambd}")
    x = input._data
    return _ops.where(x > lambd, input - lambd, _ops.where(x < -lambd, input + lambd, 0.0))


@_tensor_input
def tanhshrink(input):
    return input - _ops.tanh(input)


@_tensor_input
def glu(input, dim=-1):
    """a * sigmoid(b) with (a, b) the two halves of ``input`` along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("glu: does not support scalars because halving size must be even")
    d = dim + input.ndim if dim < 0 else dim
    if not 0 <= d < input.ndim:
        raise IndexError(f"glu: dim {dim} is out of range for a tensor with {input.ndim} dimensions")
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {d} is size {n}")
    a = _ops.narrow(input, d, 0, n // 2)
    b = _ops.narrow(input, d, n // 2, n // 2)
    return a * _ops.sigmoid(b)


@_tensor_input
def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False, *, generator=None):
    """Randomised leaky ReLU: in training each negative entry is scaled by its own slope drawn
    from U(lower, upper); in evaluation the slope is (lower + upper)/2."""
    if lower > upper:
        raise ValueError(f"rrelu: lower bound must be <= upper bound, got lower={lower}, upper={upper}")
    if not training:
        return _ops.leaky_relu(input, (lower + upper) / 2)
    x = input._data
    ns = xp if x.__class__ is xp.ndarray else B.namespace(x)
    a = generator_for(ns, generator).uniform(lower, upper, x.shape)   # drawn on x's device
    slope = ns.where(x >= 0, 1.0, a).astype(x.dtype)
    return input * Tensor._make(slope)


def softmax2d(input):
    if input.ndim not in (3, 4):
        raise ValueError(f"Softmax2d: expected input of 3 or 4 dimensions (C, H, W) or (N, C, H, W), got "
                         f"shape {_shape(input)}")
    return _ops.softmax(input, -3)


@_tensor_args("logits")
def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1, *, generator=None):
    """softmax((logits + g)/tau) with g ~ Gumbel(0, 1); ``hard`` returns the one-hot argmax in
    the forward pass with the soft sample's gradient (straight-through)."""
    ns = B.namespace(logits._data)                              # the logits' device
    e = -ns.log1p(-generator_for(ns, generator).random(_shape(logits)))     # Exp(1) draws
    g = Tensor._make((-ns.log(e)).astype(logits.dtype))
    y = _ops.softmax((logits + g) / tau, dim)
    if not hard:
        return y
    idx = ns.expand_dims(ns.argmax(y._data, axis=dim), dim)
    d = dim % y.ndim
    pos = ns.arange(y.shape[d]).reshape((-1,) + (1,) * (y.ndim - 1 - d))
    onehot = (pos == idx).astype(y._data.dtype)   # (CuPy has no put_along_axis)
    return Tensor._make(onehot) - y.detach() + y


relu_ = _tensor_input(_inplace(lambda x: _ops.relu(x), "relu"))


elu_ = _tensor_input(_inplace(lambda x, alpha=1.0: _ops.elu(x, alpha), "elu"))


leaky_relu_ = _tensor_input(_inplace(lambda x, negative_slope=0.01: _ops.leaky_relu(x, negative_slope), "leaky_relu"))


hardtanh_ = _tensor_input(_inplace(lambda x, min_val=-1.0, max_val=1.0: _ops.clamp(x, min_val, max_val), "hardtanh"))


rrelu_ = _tensor_input(_inplace(lambda x, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None:
                  rrelu(x, lower, upper, training, generator=generator), "rrelu"))


# ---------------------------------------------------------------- softmax family with torch's signatures
def _implicit_dim(name, ndim):
    import warnings
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x_i) / sum_j exp(x_j) along dim (PyTorch's signature: the third positional is _stacklevel)."""
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim)
    return _ops.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim)
    return _ops.log_softmax(input, dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _implicit_dim("softmin", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return _ops.softmax(-input, dim)


# ---------------------------------------------------------------- inplace=True, as PyTorch
# With inplace=True the result is written back into ``input`` (and ``input`` returned), so code that
# relies on the side effect behaves as in PyTorch; a leaf that requires grad is refused, as there.
_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _selu(x):
    return _ops.elu(x, _SELU_ALPHA) * _SELU_SCALE


def _celu(x, alpha=1.0):
    return _ops.elu(x / alpha, 1.0) * alpha if alpha != 1.0 else _ops.elu(x, 1.0)


def _threshold(x, threshold, value):
    return _ops.where(x > threshold, x, value)


def _mish(x):
    return x * _ops.tanh(_ops.softplus(x))


selu_ = _tensor_input(_inplace(_selu, "selu"))


celu_ = _tensor_input(_inplace(_celu, "celu"))


threshold_ = _tensor_input(_inplace(_threshold, "threshold"))


relu6_ = _tensor_input(_inplace(lambda x: _ops.clamp(x, 0.0, 6.0), "relu6"))


silu_ = _tensor_input(_inplace(lambda x: _ops.silu(x), "silu"))


mish_ = _tensor_input(_inplace(_mish, "mish"))


hardswish_ = _tensor_input(_inplace(lambda x: _hardswish_out(x), "hardswish"))


hardsigmoid_ = _tensor_input(_inplace(lambda x: _hardsigmoid_out(x), "hardsigmoid"))


def relu(input, inplace=False):
    return relu_(input) if inplace else _ops.relu(input)


@_tensor_input
def relu6(input, inplace=False):
    lo, hi = (0, 6) if input.dtype.kind in "iu" else (0.0, 6.0)  # an integer input stays integer (torch)
    if inplace:
        return relu6_(input)
    return _ops.clamp(input, lo, hi) if input.dtype.kind in "iu" else _ops.hardtanh(input, lo, hi)


@_tensor_input
def leaky_relu(input, negative_slope=0.01, inplace=False):
    return leaky_relu_(input, negative_slope) if inplace else _ops.leaky_relu(input, negative_slope)


@_tensor_input
def elu(input, alpha=1.0, inplace=False):
    return elu_(input, alpha) if inplace else _ops.elu(input, alpha)


@_tensor_input
def selu(input, inplace=False):
    return selu_(input) if inplace else _selu(input)


@_tensor_input
def celu(input, alpha=1.0, inplace=False):
    return celu_(input, alpha) if inplace else _celu(input, alpha)


@_tensor_input
def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val cannot be greater than max_val, got min_val={min_val}, max_val={max_val}")
    if input.dtype.kind in "iu":     # integer input keeps its dtype (the bounds are truncated), as torch
        min_val, max_val = int(min_val), int(max_val)
    if inplace:
        return hardtanh_(input, min_val, max_val)
    # integer input: no gradient, clamp keeps the dtype; float: the strict-mask backward of torch's hardtanh
    return _ops.clamp(input, min_val, max_val) if input.dtype.kind in "iu" else _ops.hardtanh(input, min_val, max_val)


def threshold(input, threshold, value, inplace=False):
    return threshold_(input, threshold, value) if inplace else _threshold(input, threshold, value)


@_tensor_input
def silu(input, inplace=False):
    return silu_(input) if inplace else _ops.silu(input)


@_tensor_input
def mish(input, inplace=False):
    return mish_(input) if inplace else _mish(input)


@_tensor_input
def hardswish(input, inplace=False):  # noqa: F811
    return hardswish_(input) if inplace else _hardswish_out(input)


@_tensor_input
def hardsigmoid(input, inplace=False):  # noqa: F811
    return hardsigmoid_(input) if inplace else _hardsigmoid_out(input)
