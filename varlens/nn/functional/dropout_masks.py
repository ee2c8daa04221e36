"""Dropout: dropout, dropout1d/2d/3d (channel dropout), alpha_dropout, feature_alpha_dropout.
"""
from __future__ import annotations

from varlens.core.array import xp
from varlens.ops import nn_ops as _nn
from varlens.random import _gen
from varlens.core.tensor import Tensor
from varlens.nn.functional._common import _dtype_name, _inplace, _shape, _tensor_input



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


@_tensor_input
def dropout2d(input, p=0.5, training=True, inplace=False, *, generator=None):
    """Channel-wise dropout for (N, C, H, W) or (C, H, W): whole feature maps are zeroed."""
    return _channel_dropout(input, p, training, 4, "dropout2d", generator)


@_tensor_input
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


@_tensor_input
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


@_tensor_input
def feature_alpha_dropout(input, p=0.5, training=False, inplace=False, *, generator=None):
    """Alpha dropout of whole channels (N, C, *): a dropped channel takes SELU's saturation value,
    then the affine correction of alpha_dropout keeps mean 0 and variance 1."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"feature_alpha_dropout: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    alpha_p = -1.7580993408473766
    keep = 1.0 - p
    a = (keep + alpha_p ** 2 * keep * p) ** -0.5
    b = -a * alpha_p * p
    shape = _shape(input)[:2] + (1,) * (input.ndim - 2)
    m = (_gen(generator).random(shape) < keep).astype(input.dtype)
    return input * Tensor._make(m * a) + Tensor._make(((1 - m) * alpha_p * a + b).astype(input.dtype))


def _dropout(input, p=0.5, training=True, keep_prob=None, generator=None):
    p = _keep_to_drop(p, keep_prob, "dropout")
    _check_p(p, "dropout")
    if not training or p == 0.0:
        return input
    if input._data.dtype.kind != "f":
        _dropout_dtype(input, p, "dropout")
    from varlens.ops import nn_ops
    return nn_ops.MaskMul.apply(input, _dropout_mask(_shape(input), p, input.dtype, generator))


_dropout_ = _inplace(lambda x, p, training, generator: _dropout(x, p, training, generator=generator), "dropout")


@_tensor_input
def dropout(input, p=0.5, training=True, inplace=False, *, keep_prob=None, generator=None):
    """Inverted dropout: each element zeroed with probability ``p`` (the drop probability, PyTorch
    and seed 001 §1.1), survivors scaled by 1/(1 - p); ``keep_prob`` is seed 003 §4.1.2's keep
    probability (p = 1 - keep_prob).  ``inplace=True`` writes the result into ``input``."""
    if inplace and training:
        p = _keep_to_drop(p, keep_prob, "dropout")
        _check_p(p, "dropout")
        return _dropout_(input, p, training, generator)
    return _dropout(input, p, training, keep_prob=keep_prob, generator=generator)
