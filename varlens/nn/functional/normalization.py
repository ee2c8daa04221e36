"""Normalisation: batch_norm, layer_norm, rms_norm, group_norm, instance_norm,
local_response_norm, normalize.
"""
from __future__ import annotations

from varlens import ops as _ops
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn.functional._common import _tensor_args, _dtype_name, _require_tensor, _shape, _tensor_input
from varlens.ops.nn import norm as _nn_norm_mod



# ---------------------------------------------------------------- normalisation
@_tensor_args("input", "running_mean", "running_var", "weight", "bias", optional=("running_mean", "running_var", "weight", "bias"))
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-05, *, eps_mode="sqrt"):
    """Batch normalisation over every axis but the channel axis 1 of (N, C, ...).

    training=True: normalise with the batch mean and the biased batch variance and,
    if running buffers are given, update them in place: running = (1 - momentum) *
    running + momentum * batch, with the unbiased variance for running_var (PyTorch).
    training=False: normalise with the running statistics.  ``eps_mode='sqrt'`` puts
    eps inside the square root (PyTorch, seeds 001 §2 and 003 §4.3.2); ``'std'`` uses
    std + eps (seed 004 Definition 17).
    """
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected an input of shape (N, C, ...) with at least 2 dimensions, "
                         f"got shape {tuple(input.shape)}")
    if eps_mode not in ("sqrt", "std"):
        raise ValueError(f"batch_norm: eps_mode must be 'sqrt' (sqrt(var + eps)) or 'std' (std + eps), "
                         f"got {eps_mode!r}")
    C = input.shape[1]
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"batch_norm" not implemented for \'{_dtype_name(input._data.dtype)}\' '
                                  f"(batch_norm: expected a floating-point input, got dtype {input._data.dtype}; "
                                  f"convert it with .float())")
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and tuple(t.shape) != (C,):
            raise RuntimeError(f"batch_norm: {name} must have shape ({C},) for an input with {C} channels "
                               f"(shape {tuple(input.shape)}), got {tuple(t.shape)}")
    x = input._data
    if x.__class__ is not xp.ndarray:   # a device input: running buffers elsewhere raise torch's error
        B.namespace(x, *(t._data for t in (running_mean, running_var) if t is not None))
    axes = (0,) + tuple(range(2, x.ndim))
    pshape = (1, C) + (1,) * (x.ndim - 2)
    if training:
        n = x.size // C if C else 0
        if n <= 1:
            if x.size == 0:  # an empty batch: an empty output, running statistics untouched (PyTorch)
                return _channel_affine(input * 0.0, weight, bias)
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{tuple(input.shape)} (batch_norm: the batch variance needs at least 2 values)")
        mean, xc, var = _nn_norm_mod.batch_stats(x)
        if running_mean is not None or running_var is not None:
            mom = momentum if momentum is not None else 0.0
            if running_mean is not None:
                rm = running_mean._data
                rm *= 1 - mom
                rm += mom * mean.reshape(C).astype(rm.dtype)
                running_mean._version[0] += 1
            if running_var is not None:
                rv = running_var._data
                rv *= 1 - mom
                rv += mom * (var.reshape(C) * (n / (n - 1))).astype(rv.dtype)
                running_var._version[0] += 1
        return _nn_norm_mod.BatchNorm.apply(input, weight, bias, axes=axes, pshape=pshape, mean=mean, var=var,
                                   eps=eps, batch_stats=True, eps_mode=eps_mode, centered=xc)
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var are required when training=False")
    mean = running_mean._data.reshape(pshape)
    var = running_var._data.reshape(pshape).astype(x.dtype, copy=False)
    return _nn_norm_mod.BatchNorm.apply(input, weight, bias, axes=axes, pshape=pshape, mean=mean.copy(),
                               var=var, eps=eps, batch_stats=False, eps_mode=eps_mode)


def _norm_shape(normalized_shape):
    if isinstance(normalized_shape, int):
        return (normalized_shape,)
    return tuple(int(s) for s in normalized_shape)


def _check_norm_input(input, shape, what, *params):
    nd = len(shape)
    s = input._data.shape
    if len(s) < nd or s[len(s) - nd:] != shape:
        raise RuntimeError(f"{what}: normalized_shape={list(shape)} expects an input whose last {nd} "
                           f"dimension(s) are {shape}, got input of shape {tuple(s)}")
    for name, p in params:
        if p is not None and p._data.shape != shape:
            raise RuntimeError(f"{what}: {name} must have the normalized shape {shape}, got {tuple(p._data.shape)}")


@_tensor_args("input", "weight", "bias", optional=("weight", "bias"))
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-05):
    """Normalise each example over its last len(normalized_shape) axes (seed 003 §4.3.3)."""
    shape = _norm_shape(normalized_shape)
    _check_norm_input(input, shape, "layer_norm", ("weight", weight), ("bias", bias))
    if input._data.dtype.kind != "f":
        raise NotImplementedError(f'"LayerNormKernelImpl" not implemented for \'{_dtype_name(input._data.dtype)}\' '
                                  f"(layer_norm: expected a floating-point input, got dtype {input._data.dtype})")
    if input._data.size == 0:  # nothing to normalise: an empty output, zero gradients (PyTorch)
        y = input * 0.0
        if weight is not None:
            y = y * weight
        return y + bias if bias is not None else y
    return _nn_norm_mod.LayerNorm.apply(input, weight, bias, nd=len(shape), eps=eps)


@_tensor_args("input", "weight", optional=("weight",))
def rms_norm(input, normalized_shape, weight=None, eps=None):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last axes; eps=None uses the dtype's
    machine epsilon (PyTorch 2.4+)."""
    shape = _norm_shape(normalized_shape)
    _check_norm_input(input, shape, "rms_norm", ("weight", weight))
    if eps is None:
        eps = float(xp.finfo(input.dtype).eps)
    return _nn_norm_mod.RMSNorm.apply(input, weight, nd=len(shape), eps=eps)


@_tensor_args("input", "weight", "bias", optional=("weight", "bias"))
def group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    """Normalise each example over groups of channels (and all spatial positions)."""
    _check_group_norm(input, num_groups, weight, bias, "group_norm")
    return _group_norm(input, num_groups, weight, bias, eps)


def _check_group_norm(input, num_groups, weight, bias, what):
    s = tuple(input.shape)
    if len(s) < 2:
        raise RuntimeError(f"Expected at least 2 dimensions for input tensor but received {len(s)} ({what}: "
                           f"expected an input of shape (N, C, *), got {s})")
    C = s[1]
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and p._data.shape != (C,):
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in "
                               f"input, but got {name} of shape {list(p._data.shape)} and input of shape "
                               f"{list(s)} ({what}: expected {p._data.shape[0] if p._data.ndim == 1 else '?'} "
                               f"channels in dim 1, got {C})")
    if C % num_groups:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input "
                           f"of shape {list(s)} and num_groups={num_groups} ({what})")
    if input._data.dtype.kind != "f":
        raise RuntimeError(f"mixed dtype (CPU): all inputs must share same datatype. ({what}: expected a "
                           f"floating-point input, got dtype {input._data.dtype})")


def _group_norm(input, num_groups, weight=None, bias=None, eps=1e-05):
    N = input.shape[0]
    if input._data.size == 0:
        return _channel_affine(input * 0.0, weight, bias)
    x = _ops.reshape(input, (N, num_groups, -1))
    y = _ops.reshape(_nn_norm_mod.LayerNorm.apply(x, None, None, nd=1, eps=eps), tuple(input.shape))
    return _channel_affine(y, weight, bias)


def _channel_affine(y, weight=None, bias=None):
    """y * weight + bias with a (C,) weight and bias along dim 1 of y (N, C, *); either may be None."""
    pshape = (1, y.shape[1]) + (1,) * (y.ndim - 2)
    if weight is not None:
        y = y * _ops.reshape(weight, pshape)
    if bias is not None:
        y = y + _ops.reshape(bias, pshape)
    return y


@_tensor_input
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """x / max(||x||_p, eps) along dim."""
    n = _ops.norm(input, p, dim, keepdim=True)
    return input / _ops.clamp(n, min=eps)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha/size * sum of x^2 over `size` neighbouring channels)^beta (the window is
    zero-padded by size//2 before and (size - 1)//2 after the channel)."""
    op = "local_response_norm"
    _require_tensor(input, "input", op)
    if input.ndim < 3:
        raise ValueError(f"{op}: expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    sq = input * input
    C = input.shape[1]
    lo, hi = size // 2, (size - 1) // 2
    zshape = list(_shape(input))
    xp = B.namespace(input._data)
    parts = []
    if lo:
        zshape[1] = lo
        parts.append(Tensor._make(xp.zeros(zshape, dtype=input.dtype)))
    parts.append(sq)
    if hi:
        zshape[1] = hi
        parts.append(Tensor._make(xp.zeros(zshape, dtype=input.dtype)))
    padded = _ops.cat(parts, 1) if len(parts) > 1 else sq
    acc = _ops.narrow(padded, 1, 0, C)
    for j in range(1, size):
        acc = acc + _ops.narrow(padded, 1, j, C)
    div = (acc * (alpha / size) + k) ** beta
    return input / div


@_tensor_args("input", "running_mean", "running_var", "weight", "bias", optional=("running_mean", "running_var", "weight", "bias"))
def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    """Normalise each (example, channel) over its spatial positions.  With running buffers and
    ``use_input_stats`` the batch statistics (averaged over the examples) update them in place,
    as PyTorch; ``use_input_stats=False`` normalises with the running statistics."""
    op = "instance_norm"
    _require_tensor(input, "input", op)
    if input.ndim < 3:
        raise ValueError(f"{op}: expected an input of shape (N, C, *) with at least 3 dimensions, got shape "
                         f"{_shape(input)}")
    N, C = input.shape[0], input.shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and _shape(t) != (C,):
            raise RuntimeError(f"{op}: {name} must have shape ({C},) for an input with {C} channels, got "
                               f"{_shape(t)}")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError(f"{op}: expected running_mean and running_var to be defined when "
                             "use_input_stats is false")
        return batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if input.numel() // (N * C) <= 1:
        raise ValueError(f"{op}: expected more than 1 spatial element when training, got input size "
                         f"{_shape(input)}")
    x = _ops.reshape(input, (1, N * C) + _shape(input)[2:])
    rm = rv = None
    xp = B.namespace(input._data)
    if running_mean is not None:
        rm = Tensor._make(xp.tile(running_mean._data, N))
    if running_var is not None:
        rv = Tensor._make(xp.tile(running_var._data, N))
    y = batch_norm(x, rm, rv, None, None, True, momentum, eps)
    if rm is not None:
        running_mean._data[...] = rm._data.reshape(N, C).mean(0)
        running_mean._version[0] += 1
    if rv is not None:
        running_var._data[...] = rv._data.reshape(N, C).mean(0)
        running_var._version[0] += 1
    return _channel_affine(_ops.reshape(y, _shape(input)), weight, bias)
