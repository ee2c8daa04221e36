"""varlens.nn.functional: the stateless forms of every layer and loss (PyTorch's names,
argument names and defaults), so ``import varlens.nn.functional as F`` reads as in PyTorch.

The heavy lifting is in ``varlens.ops.nn_ops`` (fused ops with closed-form
backward) and ``varlens.ops`` (small differentiable ops).  See docs/conventions.md,
section "nn layers, init, losses", for where varlens and the notes differ.
"""
from __future__ import annotations

import math
import warnings

from varlens import ops as _ops
from varlens.backend import xp
from varlens.nn._errors import ArgNotImplementedError, ArgRuntimeError
from varlens.ops import nn_ops as _nn
from varlens.ops.index import one_hot  # noqa: F401
from varlens.ops.reduce import log_softmax, softmax  # noqa: F401
from varlens.random import _gen
from varlens.tensor import Tensor

def _arr(t):
    return t._data if isinstance(t, Tensor) else t


class IndexTypeError(TypeError, RuntimeError):
    """Non-integer indices for a lookup: a TypeError, and PyTorch's RuntimeError."""


class NotATensorError(TypeError, AttributeError):
    """A non-tensor (list, NumPy array, number) where a loss needs a Tensor.  A TypeError that
    names the argument; also an AttributeError, which is what PyTorch's elementwise losses
    raise for a list (``'list' object has no attribute 'size'``)."""


def _type_name(v):
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _need_tensor(v, name, pos, op, cls=TypeError):
    """torch's argument-parser message for a non-Tensor ``v`` (one isinstance when it is one)."""
    if not isinstance(v, Tensor):
        raise cls(f"{op}(): argument '{name}' (position {pos}) must be Tensor, not {_type_name(v)}")


def _loss_args(input, target, op):
    _need_tensor(input, "input", 1, op, NotATensorError)
    _need_tensor(target, "target", 2, op, NotATensorError)


def _dtype_name(dtype):
    from varlens.ops.elementwise import torch_dtype_name
    return torch_dtype_name(dtype)


def _check_class_target(tgt, op):
    """Class indices must be int64 or uint8 (PyTorch's 'Long or Byte')."""
    dt = tgt.dtype
    if dt != xp.int64 and dt != xp.uint8:
        raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_dtype_name(dt)} ({op}: "
                           f"class-index targets must be int64 or uint8, got {dt}; use target.long())")


def _check_batch(in_shape, tgt_shape, op):
    N = in_shape[0]
    if not tgt_shape or tgt_shape[0] != N:
        exp = (N,) + tuple(in_shape[2:])
        raise ValueError(f"Expected input batch_size ({N}) to match target batch_size "
                         f"({tgt_shape[0] if tgt_shape else 'none: a 0-d target'}). ({op}: for input of shape "
                         f"{tuple(in_shape)} the class-index target must have shape {exp}, got {tuple(tgt_shape)})")


def _as_tensor_like(v, like):
    if isinstance(v, Tensor) or v is None:
        return v
    return Tensor._make(xp.asarray(v, dtype=like.dtype))


# ---------------------------------------------------------------- linear layers
def linear(input, weight, bias=None):
    """y = x W^T + b, weight of shape (out_features, in_features)."""
    return _nn.linear(input, weight, bias)


def bilinear(input1, input2, weight, bias=None):
    """y_k = x1^T W_k x2 + b_k with weight of shape (out, in1, in2)."""
    if input1.shape[-1] != weight.shape[1] or input2.shape[-1] != weight.shape[2]:
        raise RuntimeError(f"bilinear: inputs of shapes {tuple(input1.shape)} and {tuple(input2.shape)} do not "
                           f"match the weight's (out, in1, in2) = {tuple(weight.shape)}")
    lead = tuple(input1.shape[:-1])
    a = _ops.reshape(input1, (-1, input1.shape[-1]))
    b = _ops.reshape(input2, (-1, input2.shape[-1]))
    y = _ops.reshape(_ops.einsum("bi,oij,bj->bo", a, weight, b), lead + (weight.shape[0],))
    return y + bias if bias is not None else y


# ---------------------------------------------------------------- activations
def relu(input, inplace=False):
    return _ops.relu(input)


def relu6(input, inplace=False):
    return _ops.clamp(input, 0.0, 6.0)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _ops.leaky_relu(input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    return _ops.elu(input, alpha)


def selu(input, inplace=False):
    return _ops.elu(input, 1.6732632423543772848170429916717) * 1.0507009873554804934193349852946


def celu(input, alpha=1.0, inplace=False):
    return _ops.elu(input / alpha, 1.0) * alpha if alpha != 1.0 else _ops.elu(input, 1.0)


def gelu(input, approximate="none"):
    return _ops.gelu(input, approximate=approximate)


def silu(input, inplace=False):
    return _ops.silu(input)


def mish(input, inplace=False):
    return input * _ops.tanh(_ops.softplus(input))


def sigmoid(input):
    return _ops.sigmoid(input)


def logsigmoid(input):
    return -_ops.softplus(-input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _ops.clamp(input, min_val, max_val)


def tanh(input):
    return _ops.tanh(input)


def softplus(input, beta=1.0, threshold=20.0):
    return _ops.softplus(input, beta, threshold)


def softsign(input):
    return input / (_ops.abs(input) + 1)


def softmin(input, dim=None, dtype=None):
    return softmax(-input, dim, dtype)


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


def prelu(input, weight):
    _check_prelu(input, weight, "prelu")
    return _prelu(input, weight)


def _prelu(input, weight):
    w = weight
    if input.ndim >= 2 and weight.numel() > 1:
        w = _ops.reshape(weight, (-1,) + (1,) * (input.ndim - 2))
    return _ops.where(input > 0, input, input * w)


def threshold(input, threshold, value, inplace=False):
    return _ops.where(input > threshold, input, value)


# ---------------------------------------------------------------- dropout
def _check_p(p, what):
    if not (isinstance(p, (int, float)) and 0.0 <= p <= 1.0):
        raise ValueError(f"{what}: p is the probability of dropping a unit and must be in [0, 1], got {p!r}")


def _keep_to_drop(p, keep_prob, what):
    if keep_prob is not None:
        if p is not None and p != 0.5:
            raise ValueError(f"{what}: give either p (drop probability, PyTorch) or keep_prob "
                             f"(the keep probability of seed 003 §4.1.2), not both")
        if not 0.0 <= keep_prob <= 1.0:
            raise ValueError(f"{what}: keep_prob must be in [0, 1], got {keep_prob!r}")
        return 1.0 - keep_prob
    return 0.5 if p is None else p


def _dropout_mask(shape, p, dtype, generator):
    keep = 1.0 - p
    if keep == 0.0:
        return xp.zeros(shape, dtype=dtype)
    return (_gen(generator).random(shape) < keep).astype(dtype) * xp.asarray(1.0 / keep, dtype=dtype)


def dropout(input, p=0.5, training=True, inplace=False, *, keep_prob=None, generator=None):
    """Inverted dropout: in training each element is zeroed with probability ``p`` (the drop
    probability, as PyTorch and seed 001 §1.1) and survivors are scaled by 1/(1-p), so the
    expectation is unchanged and evaluation needs no rescaling.  ``keep_prob`` is the
    keep-probability convention of seed 003 §4.1.2 (keep_prob = 1 - p)."""
    p = _keep_to_drop(p, keep_prob, "dropout")
    _check_p(p, "dropout")
    if not training or p == 0.0:
        return input
    if input._data.dtype.kind != "f":
        _dropout_dtype(input, p, "dropout")
    return _nn.MaskMul.apply(input, _dropout_mask(input.shape, p, input.dtype, generator))


def _dropout_dtype(input, p, what):
    """Dropout in training scales the survivors by 1/(1 - p), a float: PyTorch refuses an integer or
    bool input (except with p = 1, where everything is zeroed)."""
    dt = input._data.dtype
    if dt.kind in "iub" and not (p == 1.0 and dt.kind != "b"):
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_dtype_name(dt)} "
                           f"({what}: in training the kept entries are scaled by 1/(1-p), so the input must be "
                           f"floating point; got dtype {dt}; convert it with .float())")


def dropout1d(input, p=0.5, training=True, inplace=False, *, generator=None):
    return _channel_dropout(input, p, training, 3, "dropout1d", generator)


def dropout2d(input, p=0.5, training=True, inplace=False, *, generator=None):
    """Channel-wise dropout for (N, C, H, W) or (C, H, W): whole feature maps are zeroed."""
    return _channel_dropout(input, p, training, 4, "dropout2d", generator)


def dropout3d(input, p=0.5, training=True, inplace=False, *, generator=None):
    return _channel_dropout(input, p, training, 5, "dropout3d", generator)


def _channel_dropout(input, p, training, nd, what, generator):
    _check_p(p, what)
    if input.ndim not in (nd - 1, nd):
        raise RuntimeError(f"{what}: expected a {nd - 1}-D (unbatched) or {nd}-D (batched) input, got shape "
                           f"{tuple(input.shape)}")
    if not training or p == 0.0:
        return input
    if input._data.dtype.kind != "f":
        _dropout_dtype(input, p, what)
    lead = 2 if input.ndim == nd else 1
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    return _nn.MaskMul.apply(input, _dropout_mask(shape, p, input.dtype, generator))


def alpha_dropout(input, p=0.5, training=False, inplace=False, *, generator=None):
    """Dropout for SELU networks: dropped units take SELU's negative saturation value and an
    affine correction keeps zero mean and unit variance (Klambauer et al. 2017)."""
    _check_p(p, "alpha_dropout")
    if not training or p == 0.0:
        return input
    if input._data.dtype.kind != "f":
        _dropout_dtype(input, 0.5, "alpha_dropout")
    if p == 1.0:
        return input * 0.0
    alpha_p = -1.7580993408473766  # -lambda * alpha of SELU
    keep = 1.0 - p
    a = (keep + alpha_p ** 2 * keep * p) ** -0.5
    b = -a * alpha_p * p
    m = (_gen(generator).random(tuple(input.shape)) < keep).astype(input.dtype)
    return _nn.MaskMul.apply(input, m * a) + Tensor._make(((1 - m) * alpha_p * a + b).astype(input.dtype))


# ---------------------------------------------------------------- normalisation
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
    axes = (0,) + tuple(range(2, x.ndim))
    pshape = (1, C) + (1,) * (x.ndim - 2)
    if training:
        n = x.size // C if C else 0
        if n <= 1:
            if x.size == 0:  # an empty batch: an empty output, running statistics untouched (PyTorch)
                return _channel_affine(input * 0.0, weight, bias)
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{tuple(input.shape)} (batch_norm: the batch variance needs at least 2 values)")
        mean, xc, var = _nn.batch_stats(x)
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
        return _nn.BatchNorm.apply(input, weight, bias, axes=axes, pshape=pshape, mean=mean, var=var,
                                   eps=eps, batch_stats=True, eps_mode=eps_mode, centered=xc)
    if running_mean is None or running_var is None:
        raise ValueError("batch_norm: running_mean and running_var are required when training=False")
    mean = running_mean._data.reshape(pshape)
    var = running_var._data.reshape(pshape).astype(x.dtype, copy=False)
    return _nn.BatchNorm.apply(input, weight, bias, axes=axes, pshape=pshape, mean=mean.copy(),
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
    return _nn.LayerNorm.apply(input, weight, bias, nd=len(shape), eps=eps)


def rms_norm(input, normalized_shape, weight=None, eps=None):
    """y = x / sqrt(mean(x^2) + eps) * weight over the last axes; eps=None uses the dtype's
    machine epsilon (PyTorch 2.4+)."""
    shape = _norm_shape(normalized_shape)
    _check_norm_input(input, shape, "rms_norm", ("weight", weight))
    if eps is None:
        eps = float(xp.finfo(input.dtype).eps)
    return _nn.RMSNorm.apply(input, weight, nd=len(shape), eps=eps)


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
    y = _ops.reshape(_nn.LayerNorm.apply(x, None, None, nd=1, eps=eps), tuple(input.shape))
    return _channel_affine(y, weight, bias)


def _channel_affine(y, weight=None, bias=None):
    """y * weight + bias with a (C,) weight and bias along dim 1 of y (N, C, *); either may be None."""
    pshape = (1, y.shape[1]) + (1,) * (y.ndim - 2)
    if weight is not None:
        y = y * _ops.reshape(weight, pshape)
    if bias is not None:
        y = y + _ops.reshape(bias, pshape)
    return y


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """x / max(||x||_p, eps) along dim."""
    n = _ops.norm(input, p, dim, keepdim=True)
    return input / _ops.clamp(n, min=eps)


def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    """sum(x1 * x2) / (max(||x1||, eps) * max(||x2||, eps)) along dim."""
    n1 = _ops.clamp(_ops.norm(x1, 2, dim, keepdim=True), min=eps)
    n2 = _ops.clamp(_ops.norm(x2, 2, dim, keepdim=True), min=eps)
    return _ops.sum((x1 / n1) * (x2 / n2), dim)


def pairwise_distance(x1, x2, p=2.0, eps=1e-06, keepdim=False):
    return _ops.norm(x1 - x2 + eps, p, -1, keepdim)


# ---------------------------------------------------------------- embedding, padding
def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    """Rows of ``weight`` picked by integer ``input``; gradients of repeated rows accumulate,
    the ``padding_idx`` row gets none."""
    idx = _arr(input)
    if not hasattr(idx, "dtype") or idx.dtype.kind not in "iu":
        raise IndexTypeError(f"Expected tensor for argument #1 'indices' to have one of the following scalar types: "
                             f"Long, Int; but got {getattr(idx, 'dtype', type(idx).__name__)} instead (embedding: "
                             f"input must hold integer indices (int64))")
    V = weight.shape[0]
    if idx.size and (idx.min() < 0 or idx.max() >= V):
        bad = int(idx.max()) if idx.max() >= V else int(idx.min())
        raise IndexError(f"embedding: index {bad} is out of range for an embedding table with {V} rows "
                         f"(valid 0..{V - 1})")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += V
    if max_norm is not None:
        _renorm_rows(weight, idx, max_norm, norm_type)
    if scale_grad_by_freq or sparse:
        raise NotImplementedError("embedding: scale_grad_by_freq and sparse gradients are not supported")
    return _nn.Embedding.apply(weight, idx, padding_idx)


def _renorm_rows(weight, idx, max_norm, norm_type):
    """In place (outside autograd), as PyTorch: rows looked up with norm > max_norm are rescaled."""
    w = weight._data
    rows = xp.unique(idx)
    norms = xp.linalg.norm(w[rows], ord=norm_type, axis=1)
    big = norms > max_norm
    w[rows[big]] *= (max_norm / (norms[big] + 1e-7))[:, None]
    weight._version[0] += 1


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad)//2 axes; ``pad`` = (left_last, right_last, left_prev, right_prev, ...).
    Modes: 'constant' (negative pads crop), 'reflect', 'replicate', 'circular'."""
    if len(pad) % 2:
        raise ArgRuntimeError(f"Padding length must be divisible by 2 (pad: the padding tuple must have an even "
                              f"length, got {pad!r})")
    k = len(pad) // 2
    if k > input.ndim:
        raise ArgRuntimeError(f"Padding length should be less than or equal to two times the input dimension (pad: "
                              f"padding {pad!r} covers {k} dimensions but the input has {input.ndim})")
    pads = [(0, 0)] * input.ndim
    for i in range(k):
        pads[input.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    if mode == "constant":
        return _nn.ConstantPad.apply(input, tuple(pads), 0.0 if value is None else value)
    npmode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode)
    if npmode is None:
        raise ArgNotImplementedError(f"Unrecognised padding mode {mode} (pad: mode must be 'constant', 'reflect', "
                                     f"'replicate' or 'circular', got {mode!r})")
    out = input
    for d, (lo, hi) in enumerate(pads):
        if lo == 0 and hi == 0:
            continue
        n = input.shape[d]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ValueError(f"pad: reflect padding ({lo}, {hi}) must be smaller than the dimension size {n}")
        idx = xp.pad(xp.arange(n), (lo, hi), mode=npmode)
        out = _ops.index_select(out, d, Tensor._make(idx))
    return out


# ---------------------------------------------------------------- losses
_REDUCTIONS = ("mean", "sum", "none")
_INT64 = xp.dtype("int64")


def _legacy_reduction(size_average, reduce, reduction):
    if size_average is None and reduce is None:
        return reduction
    sa = True if size_average is None else size_average
    rd = True if reduce is None else reduce
    return "none" if not rd else ("mean" if sa else "sum")


def _check_reduction(reduction, what, extra=()):
    if reduction not in _REDUCTIONS + tuple(extra):
        raise ValueError(f"{what}: reduction must be one of {_REDUCTIONS + tuple(extra)}, got {reduction!r}")


def _reduce(loss, reduction):
    if reduction == "mean":
        return _ops.mean(loss)
    if reduction == "sum":
        return _ops.sum(loss)
    return loss


def _pair(input, target, what):
    _loss_args(input, target, what)
    if tuple(target.shape) != tuple(input.shape):
        try:
            xp.broadcast_shapes(tuple(input.shape), tuple(target.shape))
        except ValueError:
            raise ArgRuntimeError(f"{what}: input of shape {tuple(input.shape)} and target of shape "
                                  f"{tuple(target.shape)} cannot be broadcast together (the size of each "
                                  f"dimension must match or be 1)") from None
        warnings.warn(f"{what}: using a target size {tuple(target.shape)} that is different to the input size "
                      f"{tuple(input.shape)}; they will be broadcast, which is probably not what you want",
                      stacklevel=3)
    return target


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    """mean((x - y)^2).  Its gradient is 2 (x - y) / n; seed 003 Example 1.6.6 writes z - y,
    the gradient of half the squared error (see docs/conventions.md)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "mse_loss")
    target = _pair(input, target, "mse_loss")
    if input._data.dtype.kind in "biu" and target._data.dtype.kind in "biu":
        raise NotImplementedError(f'"mse_cpu" not implemented for \'{_dtype_name(input._data.dtype)}\' (mse_loss: '
                                  f"input and target are both integer tensors; convert them with .float())")
    d = input - target
    loss = d * d
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "l1_loss")
    target = _pair(input, target, "l1_loss")
    loss = _ops.abs(input - target)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta (|d| - delta/2)."""
    _check_reduction(reduction, "huber_loss")
    if delta <= 0:
        raise ArgRuntimeError(f"huber_loss does not support non-positive values for delta (got delta={delta})")
    target = _pair(input, target, "huber_loss")
    d = input - target
    ad = _ops.abs(d)
    loss = _ops.where((ad < delta)._data, 0.5 * d * d, delta * (ad - 0.5 * delta))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - beta/2 (L1 for beta = 0)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "smooth_l1_loss")
    if beta < 0:
        raise ArgRuntimeError(f"smooth_l1_loss does not support negative values for beta (got beta={beta})")
    target = _pair(input, target, "smooth_l1_loss")
    d = input - target
    ad = _ops.abs(d)
    if beta == 0:
        return _reduce(ad, reduction)
    loss = _ops.where((ad < beta)._data, (0.5 / beta) * d * d, ad - 0.5 * beta)
    return _reduce(loss, reduction)


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy of logits ``input`` (N, C) / (N, C, d1, ...) / (C,) against class
    indices (N,) / (N, d1, ...) / () or class probabilities (same shape as input).
    One fused op; its gradient with respect to the logits is softmax(z) - y (seed 001 §3.1,
    seed 003 Example 1.6.6), per row and before the reduction."""
    if size_average is not None or reduce is not None:
        reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in _REDUCTIONS:
        _check_reduction(reduction, "cross_entropy")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ArgRuntimeError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing} (cross_entropy)")
    if not isinstance(input, Tensor):
        _need_tensor(input, "input", 1, "cross_entropy")
    if not isinstance(target, Tensor):
        _need_tensor(target, "target", 2, "cross_entropy")
    zs = input._data.shape
    if not zs:
        raise ArgRuntimeError("cross_entropy: input must have a class dimension (shape (C,), (N, C) or "
                              "(N, C, d1, ...)), got a 0-d tensor")
    C = zs[1] if len(zs) > 1 else zs[0]
    w = None
    if weight is not None:
        _need_tensor(weight, "weight", 3, "cross_entropy")
        w = _arr(weight).astype(input.dtype, copy=False)
        if w.shape != (C,):
            raise ArgRuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                                  f"weight tensor of shape: {list(w.shape)} (cross_entropy: weight must have shape "
                                  f"({C},), one per class)")
    tgt = target._data
    dt = tgt.dtype
    if dt.kind == "f":
        if tgt.shape != zs:
            raise RuntimeError(f"expected target dtype to be Long or Byte, but got {_dtype_name(dt)} "
                               f"(cross_entropy: a floating-point target holds class probabilities and must "
                               f"have the input's shape {tuple(zs)}, got {tuple(tgt.shape)})")
        return _nn.CrossEntropy.apply(input, target, weight=w, label_smoothing=label_smoothing,
                                      reduction=reduction, probs=True)
    if dt is not _INT64:
        _check_class_target(tgt, "cross_entropy")
    exp_shape = () if len(zs) == 1 else (zs[0],) + zs[2:]
    if len(zs) == 1 and tgt.shape == (1,):  # a 1-element target for one example works too (PyTorch)
        tgt = tgt.reshape(())
    if tgt.shape != exp_shape:
        if len(zs) == 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: "
                             f"{tgt.shape[0] if tgt.ndim else 0} (cross_entropy: input of shape {tuple(zs)} "
                             f"takes a 0-d class-index target)")
        if not tgt.shape or tgt.shape[0] != zs[0]:
            _check_batch(zs, tgt.shape, "cross_entropy")
        head = ("0D or 1D target tensor expected, multi-target not supported" if len(zs) == 2 else
                f"Expected target size {list(exp_shape)}, got {list(tgt.shape)}")
        raise ArgRuntimeError(f"{head} (cross_entropy: for input of shape {tuple(zs)} the class-index target "
                              f"must have shape {exp_shape}, got {tuple(tgt.shape)})")
    real = _nn.cross_entropy_check(tgt, C, ignore_index)
    return _nn.CrossEntropy.apply(input, tgt, weight=w, ignore_index=ignore_index,
                                  label_smoothing=label_smoothing, reduction=reduction, probs=False,
                                  all_real=real)


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """-w[y] * input[y] for log-probabilities ``input`` (N, C, ...); 'mean' divides by the
    summed weights of the (non-ignored) targets."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "nll_loss")
    _need_tensor(input, "input", 1, "nll_loss")
    _need_tensor(target, "target", 2, "nll_loss")
    if input.ndim == 0:
        raise ValueError("nll_loss: input must have a class dimension, got a 0-d tensor")
    C = input.shape[1] if input.ndim > 1 else input.shape[0]
    tgt = target._data
    _check_class_target(tgt, "nll_loss")
    if input.ndim == 1:
        if tgt.ndim > 1 or tgt.size != 1:
            raise ValueError(f"For 1D input, 1D target must have size 1, but got target size: {tgt.size} "
                             f"(nll_loss: input of shape {tuple(input.shape)})")
    else:
        if tgt.ndim != input.ndim - 1 and input.ndim == 2:
            raise RuntimeError(f"0D or 1D target tensor expected, multi-target not supported (nll_loss: input "
                               f"of shape {tuple(input.shape)} takes a target of shape ({input.shape[0]},), got "
                               f"{tuple(tgt.shape)})")
        _check_batch(tuple(input.shape), tgt.shape, "nll_loss")
        exp_shape = (input.shape[0],) + tuple(input.shape[2:])
        if tgt.shape != exp_shape:
            raise RuntimeError(f"nll_loss: expected target of shape {exp_shape} for input of shape "
                               f"{tuple(input.shape)}, got {tuple(tgt.shape)}")
    _nn.cross_entropy_check(tgt, C, ignore_index, "nll_loss")
    x = input if input.ndim > 1 else _ops.reshape(input, (1, C))
    t = tgt if input.ndim > 1 else tgt.reshape(1)
    valid = t != ignore_index
    tt = xp.where(valid, t, 0)
    picked = _ops.squeeze(_ops.gather(x, 1, Tensor._make(xp.expand_dims(tt, 1))), 1)
    if weight is not None:
        _need_tensor(weight, "weight", 3, "nll_loss")
        if weight._data.shape != (C,):
            raise ArgRuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got "
                                  f"weight tensor of shape: {list(weight._data.shape)} (nll_loss: weight must have "
                                  f"shape ({C},), one per class)")
    w = xp.ones(C, dtype=input.dtype) if weight is None else _arr(weight).astype(input.dtype)
    wy = (w[tt] * valid).astype(input.dtype)
    loss = -picked * wy
    if reduction == "mean":
        d = float(wy.sum())
        if d == 0:  # every target ignored: loss NaN and gradient 0, as PyTorch (no 0/0 warning)
            return _ops.sum(loss) * 0.0 + float("nan")
        return _ops.sum(loss) / d
    if reduction == "sum":
        return _ops.sum(loss)
    return loss if input.ndim > 1 else _ops.reshape(loss, ())


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w (y log x + (1 - y) log(1 - x)) on probabilities x, each log clamped at -100 (PyTorch)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "binary_cross_entropy")
    _loss_args(input, target, "binary_cross_entropy")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"binary_cross_entropy: target of shape {tuple(target.shape)} must match the input's "
                         f"shape {tuple(input.shape)}")
    x = input._data
    if target._data.dtype != x.dtype:
        raise RuntimeError(f"Found dtype {_dtype_name(target._data.dtype)} but expected {_dtype_name(x.dtype)} "
                           f"(binary_cross_entropy: target must have the input's dtype {x.dtype}, got "
                           f"{target._data.dtype}; convert it with target.to(input.dtype))")
    if x.dtype.kind != "f":
        raise NotImplementedError(f'"binary_cross_entropy" not implemented for \'{_dtype_name(x.dtype)}\' '
                                  f"(the input holds probabilities and must be floating point)")
    # one pass each for min and max; a NaN makes both comparisons False, so it is refused too
    if x.size and not (x.min() >= 0 and x.max() <= 1):
        raise RuntimeError("all elements of input should be between 0 and 1 (binary_cross_entropy: input "
                           "holds probabilities; got values outside [0, 1] or NaN; for logits use "
                           "binary_cross_entropy_with_logits)")
    if weight is not None:
        _need_tensor(weight, "weight", 3, "binary_cross_entropy", NotATensorError)
    lx = _ops.clamp(_ops.log(input), min=-100.0)
    l1x = _ops.clamp(_ops.log(1 - input), min=-100.0)
    loss = -(target * lx + (1 - target) * l1x)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction)


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    """Sigmoid + binary cross-entropy in one stable op; gradient w (sigmoid(x) - y) without
    pos_weight.  ``pos_weight`` multiplies the positive term (broadcast over the class axis)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    _loss_args(input, target, "binary_cross_entropy_with_logits")
    if target._data.dtype.kind != "f" and input._data.dtype.kind == "f":
        raise RuntimeError(f"result type {_dtype_name(input._data.dtype)} can't be cast to the desired output "
                           f"type {_dtype_name(target._data.dtype)} (binary_cross_entropy_with_logits: target "
                           f"must be floating point, got dtype {target._data.dtype}; use target.float())")
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"binary_cross_entropy_with_logits: target of shape {tuple(target.shape)} must match "
                         f"the input's shape {tuple(input.shape)}")
    w = None if weight is None else _arr(weight).astype(input.dtype, copy=False)
    pw = None if pos_weight is None else _arr(pos_weight).astype(input.dtype, copy=False)
    loss = _nn.BCEWithLogits.apply(input, target, w, pw)
    return _reduce(loss, reduction)


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """KL(target || model) pointwise: target (log target - input) for log-probabilities ``input``.
    reduction='batchmean' divides the sum by the batch size (the mathematical KL per example)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    _check_reduction(reduction, "kl_div", ("batchmean",))
    if reduction == "mean":
        warnings.warn("kl_div: reduction='mean' divides the total by the number of elements (batch size "
                      "times support size); 'batchmean' divides by the batch size only, which is the "
                      "mathematical KL divergence per example", stacklevel=2)
    _need_tensor(input, "input", 1, "kl_div")
    _need_tensor(target, "target", 2, "kl_div")
    if log_target:
        loss = _ops.exp(target) * (target - input)
    else:
        t = target._data
        pos = t > 0
        safe = Tensor._make(xp.where(pos, t, 1).astype(t.dtype)) if not target.requires_grad else \
            _ops.where(pos, target, 1.0)
        loss = _ops.where(pos, target * _ops.log(safe), 0.0) - target * input
    if reduction == "batchmean":
        n = input.shape[0] if input.ndim else 1
        return _ops.sum(loss) / n
    return _reduce(loss, reduction)


def gaussian_nll_loss(input, target, var, full=False, eps=1e-06, reduction="mean"):
    """0.5 (log max(var, eps) + (input - target)^2 / max(var, eps)) (+ 0.5 log 2 pi if full).
    The clamp is not differentiated through (as PyTorch)."""
    _check_reduction(reduction, "gaussian_nll_loss")
    _loss_args(input, target, "gaussian_nll_loss")
    if not isinstance(var, (Tensor, int, float)) or isinstance(var, bool):
        _need_tensor(var, "var", 3, "gaussian_nll_loss")
    var = _as_tensor_like(var, input)
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = _ops.unsqueeze(var, -1)
        elif not (tuple(input.shape[:-1]) == tuple(var.shape[:-1]) and var.shape[-1] == 1):
            raise ValueError(f"gaussian_nll_loss: var of shape {tuple(var.shape)} must match the input's shape "
                             f"{tuple(input.shape)}, or drop/size-1 its last dimension")
    if bool((var._data < 0).any()):
        raise ValueError("gaussian_nll_loss: var has negative entries; variances must be >= 0")
    clamped = xp.maximum(var._data, eps)
    v = var + Tensor._make(clamped - var._data) if var.requires_grad else Tensor._make(clamped)
    d = input - target
    loss = 0.5 * (_ops.log(v) + d * d / v)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-08,
                     reduce=None, reduction="mean"):
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if log_input:
        loss = _ops.exp(input) - target * input
    else:
        loss = input - target * _ops.log(input + eps)
    if full:
        t = _arr(target)
        ts = xp.where(t > 1, t, 1)  # Stirling's term t log t - t + log(2 pi t)/2, for targets > 1
        st = xp.where(t > 1, ts * xp.log(ts) - ts + 0.5 * xp.log(2 * math.pi * ts), 0)
        loss = loss + Tensor._make(st.astype(input.dtype))
    return _reduce(loss, reduction)


# ---------------------------------------------------------------- penalties (seed 003 §4.1.1)
def _tensors(params):
    if isinstance(params, Tensor):
        return [params]
    if hasattr(params, "parameters") and callable(params.parameters):
        return list(params.parameters())
    return list(params)


def l2_penalty(params, weight_decay=1.0):
    """weight_decay * sum of squared entries of every tensor in ``params`` (a Tensor, an iterable
    of Tensors, or a Module: all its parameters) -- the L2 term lambda ||W||_2^2 of seed 003
    §4.1.1.  Its gradient is 2 lambda W (seed 003 Remark 4.1.1, sign corrected)."""
    ts = _tensors(params)
    if not ts:
        raise ValueError("l2_penalty: no tensors given")
    total = _ops.sum(ts[0] * ts[0])
    for t in ts[1:]:
        total = total + _ops.sum(t * t)
    return total * weight_decay if weight_decay != 1.0 else total


def l1_penalty(params, weight_decay=1.0):
    """weight_decay * sum of absolute entries (the L1 term lambda |W|_1 of seed 003 §4.1.1)."""
    ts = _tensors(params)
    if not ts:
        raise ValueError("l1_penalty: no tensors given")
    total = _ops.sum(_ops.abs(ts[0]))
    for t in ts[1:]:
        total = total + _ops.sum(_ops.abs(t))
    return total * weight_decay if weight_decay != 1.0 else total


from varlens.ops.conv import (adaptive_avg_pool2d, avg_pool2d, conv1d, conv2d,  # noqa: E402,F401
                              conv_transpose2d, interpolate, max_pool2d, upsample)

from varlens.ops.attention import scaled_dot_product_attention  # noqa: E402,F401

# more of torch.nn.functional (activations, shuffles, fold/unfold, every interpolate mode, 1-D and
# adaptive max pooling, margin losses, embedding_bag...); replaces interpolate/upsample/cosine_similarity
from varlens.nn.functional_extra import *  # noqa: E402,F401,F403


def _tensor_input(fn, name):
    """fn, refusing a non-Tensor ``input`` as torch does (these would otherwise compute on a list
    or a NumPy array silently, or fail deep inside); the error is both a TypeError and an
    AttributeError, the two types torch's ops raise for it."""
    import functools

    from varlens.nn._errors import NotTensorError
    from varlens.ops.elementwise import type_name
    shown = "log_sigmoid" if name == "logsigmoid" else name   # torch's own name for the op

    @functools.wraps(fn)
    def checked(input, *args, **kwargs):  # noqa: A002  (torch's argument name)
        if not isinstance(input, Tensor):
            raise NotTensorError(f"{shown}(): argument 'input' (position 1) must be Tensor, not "
                                 f"{type_name(input)}")
        return fn(input, *args, **kwargs)
    return checked


for _n in ("alpha_dropout", "celu", "celu_", "dropout", "dropout2d", "dropout3d", "elu", "elu_",
           "feature_alpha_dropout", "gelu", "glu", "hardshrink", "hardsigmoid", "hardsigmoid_", "hardswish",
           "hardswish_", "hardtanh", "hardtanh_", "leaky_relu", "leaky_relu_", "logsigmoid", "mish", "mish_",
           "normalize", "relu6", "relu6_", "relu_", "rrelu", "rrelu_", "selu", "selu_", "sigmoid", "silu",
           "silu_", "softplus", "softshrink", "softsign", "tanh", "tanhshrink", "threshold_"):
    if _n in globals():
        globals()[_n] = _tensor_input(globals()[_n], _n)
del _n
