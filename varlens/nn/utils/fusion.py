"""Fold an eval-mode BatchNorm into the preceding Conv or Linear (PyTorch's fuse_* helpers).

BN(y) = gamma (y - mu)/sqrt(var + eps) + beta with y = W x + b is again affine:
W' = W * s (s = gamma/sqrt(var + eps) per output channel), b' = (b - mu) s + beta.
"""
from __future__ import annotations

import copy

from varlens.core import array as B
from varlens.core.array import xp
from varlens.nn.parameter import Parameter
from varlens.core.tensor import Tensor
from varlens.nn.utils.clip_grad import clip_grad_norm_

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights",
           "convert_conv2d_weight_memory_format", "convert_conv3d_weight_memory_format", "skip_init",
           "clip_grad_norm"]


def _a(t):
    return None if t is None else (t._data if isinstance(t, Tensor) else xp.asarray(t))


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """(fused weight, fused bias) as Parameters."""
    w, rm, rv = _a(conv_w), _a(bn_rm), _a(bn_rv)
    lib = B.namespace(w, rm)           # the module's device
    b = lib.zeros_like(rm) if conv_b is None else _a(conv_b)
    g = lib.ones_like(rm) if bn_w is None else _a(bn_w)
    beta = lib.zeros_like(rm) if bn_b is None else _a(bn_b)
    s = g / lib.sqrt(rv + bn_eps)
    shape = ((1, -1) if transpose else (-1, 1)) + (1,) * (w.ndim - 2)
    fw = (w * s.reshape(shape)).astype(w.dtype)
    fb = ((b - rm) * s + beta).astype(w.dtype)
    rg_b = conv_b.requires_grad if isinstance(conv_b, Tensor) else False
    return Parameter(fw, requires_grad=conv_w.requires_grad), Parameter(fb, requires_grad=rg_b)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of ``conv`` computing bn(conv(x)) (both must be in eval mode)."""
    if conv.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    fused = copy.deepcopy(conv)
    if bn.running_mean is None or bn.running_var is None:
        raise ValueError("fuse_conv_bn_eval: the batch norm needs running statistics (track_running_stats=True)")
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    w, rm, rv = _a(linear_w), _a(bn_rm), _a(bn_rv)
    lib = B.namespace(w, rm)
    b = lib.zeros_like(rm) if linear_b is None else _a(linear_b)
    s = _a(bn_w) / lib.sqrt(rv + bn_eps)
    fw = (w * s[:, None]).astype(w.dtype)
    fb = ((b - rm) * s + _a(bn_b)).astype(w.dtype)
    rg_b = linear_b.requires_grad if isinstance(linear_b, Tensor) else False
    return Parameter(fw, requires_grad=linear_w.requires_grad), Parameter(fb, requires_grad=rg_b)


def fuse_linear_bn_eval(linear, bn):
    """A copy of ``linear`` computing bn(linear(x)) (both in eval mode)."""
    if linear.training or bn.training:
        raise AssertionError("Fusion only for eval!")
    if not (linear.out_features == bn.num_features or bn.num_features == 1):
        raise AssertionError("To fuse, linear.out_features must equal bn.num_features or bn.num_features must be 1")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused


def convert_conv2d_weight_memory_format(module, memory_format):
    """Accepted for compatibility: varlens has one memory layout, the module is returned as is."""
    return module


convert_conv3d_weight_memory_format = convert_conv2d_weight_memory_format


def skip_init(module_cls, *args, **kwargs):
    """Build the module (varlens always initialises; PyTorch skips it here)."""
    kwargs.pop("device", None)
    return module_cls(*args, **kwargs)


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated alias of clip_grad_norm_ (as PyTorch)."""
    import warnings
    warnings.warn("`nn.utils.clip_grad_norm` is now deprecated in favor of `nn.utils.clip_grad_norm_`.",
                  FutureWarning, stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)
