"""Dropout: dropout, dropout1d/2d/3d (channel dropout), alpha_dropout, feature_alpha_dropout.
"""
from __future__ import annotations

import warnings

from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn.functional._common import _dtype_name, _inplace, _shape, _tensor_input
from varlens.ops.nn import dropout as _nn_dropout_mod
from varlens.core import array as B
from varlens.random import generator_for



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


def _dropout_mask(shape, p, dtype, generator, like=None):
    """Keep-mask scaled by 1/(1 - p), drawn on the device of the array ``like`` (its generator)."""
    keep = 1.0 - p
    ns = xp if like is None or like.__class__ is xp.ndarray else B.namespace(like)
    if keep == 0.0:
        return ns.zeros(shape, dtype=dtype)
    m = (generator_for(ns, generator).random(shape) < keep).astype(dtype)
    m *= xp.dtype(dtype).type(1.0 / keep)
    return m


def _bernoulli_keep(shape, keep, dtype, generator, like):
    """1 where a uniform draw on ``like``'s device is below ``keep``, else 0 (in ``dtype``)."""
    ns = xp if like.__class__ is xp.ndarray else B.namespace(like)
    return (generator_for(ns, generator).random(shape) < keep).astype(dtype)


def _dropout_dtype(input, p, what):
    """Dropout in training scales the survivors by 1/(1 - p), a float: PyTorch refuses an integer or
    bool input (except with p = 1, where everything is zeroed)."""
    dt = input._data.dtype
    if dt.kind in "iub" and not (p == 1.0 and dt.kind != "b"):
        raise RuntimeError(f"result type Float can't be cast to the desired output type {_dtype_name(dt)} "
                           f"({what}: in training the kept entries are scaled by 1/(1-p), so the input must be "
                           f"floating point; got dtype {dt}; convert it with .float())")


@_tensor_input
def dropout1d(input, p=0.5, training=True, inplace=False, *, generator=None):
    """Channel-wise dropout for (N, C, L) or unbatched (C, L): whole channels are zeroed.
    Any other rank is a RuntimeError (in eval mode too), as in PyTorch."""
    _check_p(p, "dropout1d")
    nd = input.ndim
    if nd not in (2, 3):
        raise RuntimeError(f"dropout1d: expected a 2-D (C, L) or 3-D (N, C, L) input, got a {nd}-D input of shape "
                           f"{tuple(input.shape)} (dropout1d zeroes whole channels of inputs with one spatial "
                           "dimension; use dropout for elementwise dropout)")
    return _channel_dropout(input, p, training, 1 if nd == 2 else 2, "dropout1d", generator)


def _rank_warning(what, nd, ok):
    warnings.warn(f"{what}: a {nd}-D input is deprecated by PyTorch and will become an error there; {what} "
                  f"zeroes whole channels of {ok} inputs (use dropout for elementwise dropout)",
                  UserWarning, stacklevel=3)


@_tensor_input
def dropout2d(input, p=0.5, training=True, inplace=False, *, generator=None):
    """Channel-wise dropout for (N, C, H, W): whole feature maps are zeroed.  Other ranks follow
    PyTorch 2.13 exactly: a 3-D input is taken as (N, C, L) (channel-wise 1-D dropout, with a
    warning; PyTorch does not treat it as an unbatched (C, H, W) image); other ranks warn that
    they are deprecated and drop per (dim 0, dim 1) entry, so a 2-D input gets elementwise
    dropout; a 1-D input is an error in training."""
    _check_p(p, "dropout2d")
    nd = input.ndim
    if nd not in (3, 4):
        _rank_warning("dropout2d", nd, "3-D or 4-D")
    if nd == 3:
        warnings.warn("dropout2d: a 3-D input is taken as (N, C, L), as PyTorch does, and whole (n, c) rows are "
                      "zeroed (channel-wise 1-D dropout): use dropout1d for that, or unsqueeze(0) an unbatched "
                      "(C, H, W) image to drop its channels", UserWarning, stacklevel=2)
    return _channel_dropout(input, p, training, 2, "dropout2d", generator)


@_tensor_input
def dropout3d(input, p=0.5, training=True, inplace=False, *, generator=None):
    """Channel-wise dropout for (N, C, D, H, W) or unbatched (C, D, H, W).  Other ranks warn that
    they are deprecated and are taken as unbatched, as PyTorch 2.13 does: entries of dim 0 are
    dropped whole (a 1-D input elementwise)."""
    _check_p(p, "dropout3d")
    nd = input.ndim
    if nd not in (4, 5):
        _rank_warning("dropout3d", nd, "4-D or 5-D")
    return _channel_dropout(input, p, training, 2 if nd == 5 else 1, "dropout3d", generator)


def _channel_dropout(input, p, training, lead, what, generator):
    """Dropout with one mask entry per index of the first ``lead`` dimensions (shared along the rest)."""
    if not training or p == 0.0:
        return input
    if input.ndim < lead or input.ndim == 0:
        raise RuntimeError(f"{what}: feature dropout needs at least {max(lead, 1)} dimension(s) in the input, "
                           f"got shape {tuple(input.shape)}")
    if input._data.dtype.kind != "f":
        _dropout_dtype(input, p, what)
    shape = tuple(input.shape[:lead]) + (1,) * (input.ndim - lead)
    return _nn_dropout_mod.MaskMul.apply(input, _dropout_mask(shape, p, input.dtype, generator, input._data))


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
    m = _bernoulli_keep(tuple(input.shape), keep, input.dtype, generator, input._data)
    return _nn_dropout_mod.MaskMul.apply(input, m * a) + Tensor._make(((1 - m) * alpha_p * a + b).astype(input.dtype))


@_tensor_input
def feature_alpha_dropout(input, p=0.5, training=False, inplace=False, *, generator=None):
    """Alpha dropout of whole channels (N, C, *): a dropped channel takes SELU's saturation value,
    then the affine correction of alpha_dropout keeps mean 0 and variance 1."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"feature_alpha_dropout: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if input.ndim < 2:
        raise RuntimeError(f"feature_alpha_dropout: feature dropout needs at least 2 dimensions (N, C, *) in the "
                           f"input, got shape {tuple(input.shape)}")
    if p == 1.0:
        return input * 0.0
    alpha_p = -1.7580993408473766
    keep = 1.0 - p
    a = (keep + alpha_p ** 2 * keep * p) ** -0.5
    b = -a * alpha_p * p
    shape = _shape(input)[:2] + (1,) * (input.ndim - 2)
    m = _bernoulli_keep(shape, keep, input.dtype, generator, input._data)
    return input * Tensor._make(m * a) + Tensor._make(((1 - m) * alpha_p * a + b).astype(input.dtype))


def _dropout(input, p=0.5, training=True, keep_prob=None, generator=None):
    p = _keep_to_drop(p, keep_prob, "dropout")
    _check_p(p, "dropout")
    if not training or p == 0.0:
        return input
    if input._data.dtype.kind != "f":
        _dropout_dtype(input, p, "dropout")
    return _nn_dropout_mod.MaskMul.apply(input, _dropout_mask(_shape(input), p, input.dtype, generator,
                                                              input._data))


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
