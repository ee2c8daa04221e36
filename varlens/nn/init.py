"""varlens.nn.init: in-place weight initialisers (PyTorch's names and formulas, plus LeCun and
the variance-preserving ReLU rule of seed 003 Exercise 4.3.1).

Every function fills its tensor in place outside autograd and returns it; the random
ones take an optional ``generator`` (a ``varlens.Generator``).  Variances, with
fan_in = size(1) * receptive field and fan_out = size(0) * receptive field:

=====================  ====================================================  ================
initialiser            variance of each entry                                 notes
=====================  ====================================================  ================
lecun_normal_/uniform  1 / fan_in                                             seed 000, 002
xavier_normal_/uniform gain^2 * 2 / (fan_in + fan_out)                        seed 002, 000
kaiming_normal_/unif.  gain^2 / fan (gain^2 = 2 for ReLU -> 2 / fan_in)       seeds 001 §3.3, 002,
                                                                              003 §4.3.1
variance_preserving_   1 / (fan (1/2 - 1/(2 pi)))                             seed 003 Ex. 4.3.1
relu_
=====================  ====================================================  ================

A uniform U(-b, b) has variance b^2 / 3, so each uniform variant uses b = sqrt(3) * std.
``lecun_*`` and ``variance_preserving_relu_`` are not in PyTorch.

A tensor on the CUDA device is filled there: the draws come from that device's generator
(``varlens.random.generator_for``; a ``generator`` given must be of the tensor's device, as
in PyTorch), so initialising a device model copies nothing from the host.
"""
from __future__ import annotations

import math

from varlens.core import array as B
from varlens.core.grad_mode import no_grad
from varlens.random import generator_for

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_", "zeros_",
           "eye_", "dirac_", "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "lecun_uniform_", "lecun_normal_", "orthogonal_", "sparse_", "variance_preserving_relu_"]

_LINEAR = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "conv_transpose3d", "sigmoid")


def calculate_gain(nonlinearity, param=None):
    """The factor g so that std = g / sqrt(fan) keeps activations' scale (PyTorch's table):
    linear/conv/sigmoid 1, tanh 5/3, relu sqrt(2), leaky_relu sqrt(2 / (1 + slope^2)), selu 3/4."""
    if nonlinearity in _LINEAR:
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"calculate_gain: negative_slope {param!r} is not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"calculate_gain: unsupported nonlinearity {nonlinearity!r}; expected one of "
                     f"{_LINEAR + ('tanh', 'relu', 'leaky_relu', 'selu')}")


def _xp(tensor):
    """The array library of the tensor's device."""
    a = tensor._data
    return B.xp if a.__class__ is B.ndarray else B.namespace(a)


def _gen(tensor, generator):
    """The generator to draw ``tensor``'s values with: of the tensor's device."""
    return generator_for(_xp(tensor), generator)


def _fill(tensor, arr):
    with no_grad():
        tensor._data[...] = arr
        tensor._version[0] += 1
    return tensor


def _calculate_fan_in_and_fan_out(tensor):
    if tensor.ndim < 2:
        raise ValueError(f"Fan in and fan out can not be computed for tensor with fewer than 2 dimensions "
                         f"(got shape {tuple(tensor.shape)})")
    rf = 1
    for s in tensor.shape[2:]:
        rf *= s
    return tensor.shape[1] * rf, tensor.shape[0] * rf


def _calculate_correct_fan(tensor, mode):
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"mode {mode!r} not supported, please use one of 'fan_in', 'fan_out'")
    fi, fo = _calculate_fan_in_and_fan_out(tensor)
    return fi if mode == "fan_in" else fo


def uniform_(tensor, a=0.0, b=1.0, generator=None):
    return _fill(tensor, _gen(tensor, generator).uniform(a, b, tuple(tensor.shape)))


def normal_(tensor, mean=0.0, std=1.0, generator=None):
    return _fill(tensor, _gen(tensor, generator).normal(mean, std, tuple(tensor.shape)))


def trunc_normal_(tensor, mean=0.0, std=1.0, a=-2.0, b=2.0, generator=None):
    """Normal(mean, std) conditioned on [a, b] (inverse-CDF sampling, as PyTorch)."""
    xp = _xp(tensor)

    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0
    lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
    u = _gen(tensor, generator).uniform(2 * lo - 1, 2 * hi - 1, tuple(tensor.shape))
    x = B.special(xp).erfinv(u) * std * math.sqrt(2.0) + mean
    return _fill(tensor, xp.clip(x, a, b))


def constant_(tensor, val):
    return _fill(tensor, val)


def ones_(tensor):
    return _fill(tensor, 1)


def zeros_(tensor):
    return _fill(tensor, 0)


def eye_(tensor):
    if tensor.ndim != 2:
        raise ValueError(f"eye_: only 2-D tensors are supported, got shape {tuple(tensor.shape)}")
    return _fill(tensor, _xp(tensor).eye(*tensor.shape))


def dirac_(tensor, groups=1):
    """Identity-preserving conv kernels: out channel i copies in channel i at the centre tap."""
    nd = tensor.ndim
    if nd not in (3, 4, 5):
        raise ValueError(f"dirac_: only 3, 4 or 5-D tensors are supported, got shape {tuple(tensor.shape)}")
    if tensor.shape[0] % groups:
        raise ValueError(f"dirac_: dim 0 ({tensor.shape[0]}) must be divisible by groups={groups}")
    out_g = tensor.shape[0] // groups
    m = min(out_g, tensor.shape[1])
    arr = _xp(tensor).zeros(tuple(tensor.shape))
    centre = tuple(s // 2 for s in tensor.shape[2:])
    for g in range(groups):
        for d in range(m):
            arr[(g * out_g + d, d) + centre] = 1
    return _fill(tensor, arr)


def xavier_uniform_(tensor, gain=1.0, generator=None):
    """U(-b, b), b = gain * sqrt(6 / (fan_in + fan_out)) (Glorot & Bengio 2010)."""
    fi, fo = _calculate_fan_in_and_fan_out(tensor)
    std = gain * math.sqrt(2.0 / float(fi + fo))
    b = math.sqrt(3.0) * std
    return uniform_(tensor, -b, b, generator)


def xavier_normal_(tensor, gain=1.0, generator=None):
    """N(0, gain^2 * 2 / (fan_in + fan_out))."""
    fi, fo = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fi + fo)), generator)


def kaiming_uniform_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """U(-b, b), b = sqrt(3) * gain / sqrt(fan) with gain = calculate_gain(nonlinearity, a).
    With the defaults (leaky_relu, a=0) gain^2 = 2: the He rule Var = 2 / fan_in."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    b = math.sqrt(3.0) * std
    return uniform_(tensor, -b, b, generator)


def kaiming_normal_(tensor, a=0, mode="fan_in", nonlinearity="leaky_relu", generator=None):
    """N(0, gain^2 / fan): for ReLU Var = 2 / fan_in (seed 001 §3.3, seed 002, seed 003 §4.3.1)."""
    if 0 in tensor.shape:
        return tensor
    fan = _calculate_correct_fan(tensor, mode)
    std = calculate_gain(nonlinearity, a) / math.sqrt(fan)
    return normal_(tensor, 0.0, std, generator)


def lecun_normal_(tensor, mode="fan_in", generator=None):
    """N(0, 1 / fan_in): unit output variance for a linear layer with unit-variance inputs
    (seed 000, seed 002).  Not in PyTorch."""
    fan = _calculate_correct_fan(tensor, mode)
    return normal_(tensor, 0.0, 1.0 / math.sqrt(fan), generator)


def lecun_uniform_(tensor, mode="fan_in", generator=None):
    """U(-b, b), b = sqrt(3 / fan_in), the same variance 1 / fan_in.  Not in PyTorch."""
    fan = _calculate_correct_fan(tensor, mode)
    b = math.sqrt(3.0 / fan)
    return uniform_(tensor, -b, b, generator)


def variance_preserving_relu_(tensor, mode="fan_in", generator=None):
    """N(0, sigma^2) with sigma^2 = 1 / (n (1/2 - 1/(2 pi))), n = fan_in (seed 003 Exercise 4.3.1).

    He initialisation keeps the *second moment* of ReLU pre-activations fixed from layer to
    layer; this keeps the *variance* fixed instead: for z ~ N(0, s^2),
    Var[ReLU(z)] = s^2 (1/2 - 1/(2 pi)), so n sigma^2 (1/2 - 1/(2 pi)) = 1.
    Not in PyTorch (and not used in practice, as the notes say)."""
    fan = _calculate_correct_fan(tensor, mode)
    std = 1.0 / math.sqrt(fan * (0.5 - 1.0 / (2.0 * math.pi)))
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor, gain=1.0, generator=None):
    """A (semi-)orthogonal matrix from the QR decomposition of a Gaussian matrix (Saxe et al.),
    signs fixed so the distribution is Haar; higher-dimensional tensors are flattened after dim 0."""
    if tensor.ndim < 2:
        raise ValueError(f"orthogonal_: only tensors with 2 or more dimensions are supported, got shape "
                         f"{tuple(tensor.shape)}")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    xp = _xp(tensor)
    flat = _gen(tensor, generator).normal(0.0, 1.0, (rows, cols))
    if rows < cols:
        flat = flat.T
    q, r = xp.linalg.qr(flat)
    q = q * xp.sign(xp.diag(r))
    if rows < cols:
        q = q.T
    return _fill(tensor, (gain * q).reshape(tuple(tensor.shape)))


def sparse_(tensor, sparsity, std=0.01, generator=None):
    """Each column gets ceil(sparsity * rows) zeros; the rest N(0, std^2)."""
    if tensor.ndim != 2:
        raise ValueError(f"sparse_: only 2-D tensors are supported, got shape {tuple(tensor.shape)}")
    rows, cols = tensor.shape
    g = _gen(tensor, generator)
    arr = g.normal(0.0, std, (rows, cols))
    nz = int(math.ceil(sparsity * rows))
    for c in range(cols):
        arr[g.permutation(rows)[:nz], c] = 0
    return _fill(tensor, arr)


def _deprecated(fn):
    """PyTorch's old names without the trailing underscore: same function, with a warning."""
    old = fn.__name__[:-1]

    def f(*args, **kwargs):
        import warnings
        warnings.warn(f"`nn.init.{old}` is now deprecated in favor of `nn.init.{fn.__name__}`.", FutureWarning,
                      stacklevel=2)
        return fn(*args, **kwargs)
    f.__name__, f.__doc__ = old, f"Deprecated alias of {fn.__name__}."
    return f


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
