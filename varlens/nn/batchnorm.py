"""Batch normalisation: BatchNorm1d/2d/3d, with their running statistics (SyncBatchNorm, which
reduces them across ranks, is in varlens/nn/syncbatchnorm.py).
"""
from __future__ import annotations

from varlens.core import dtypes as DT
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn import functional as F
from varlens.nn import init
from varlens.nn.functional._errors import ArgRuntimeError
from varlens.nn.module import Module
from varlens.nn.parameter import Parameter


def _dt(dtype):
    return DT.to_dtype(dtype) or DT.get_default_dtype()


def _affine_params(module, shape, dt, affine, bias=True):
    """Register ``weight`` (init 1) and ``bias`` (init 0) of ``shape`` on ``module``, or None
    for each one that is switched off (no affine at all, or bias=False)."""
    if affine:
        module.weight = Parameter(xp.ones(shape, dtype=dt))
        if bias:
            module.bias = Parameter(xp.zeros(shape, dtype=dt))
        else:
            module.register_parameter("bias", None)
    else:
        module.register_parameter("weight", None)
        module.register_parameter("bias", None)


def _reset_affine(module):
    """weight back to 1 and bias back to 0 (those that exist)."""
    if module.weight is not None:
        init.ones_(module.weight)
    if module.bias is not None:
        init.zeros_(module.bias)


class _NormBase(Module):
    """What batch and instance norm share: per-channel affine weight/bias and (with
    ``track_running_stats``) the buffers running_mean (init 0), running_var (init 1) and
    num_batches_tracked."""

    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        dt = _dt(dtype)
        _affine_params(self, num_features, dt, affine, bias)
        if track_running_stats:
            self.register_buffer("running_mean", Tensor._make(xp.zeros(num_features, dtype=dt)))
            self.register_buffer("running_var", Tensor._make(xp.ones(num_features, dtype=dt)))
            self.register_buffer("num_batches_tracked", Tensor._make(xp.zeros((), dtype=xp.int64)))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)

    def reset_running_stats(self):
        if self.track_running_stats:
            self.running_mean._data[...] = 0
            self.running_var._data[...] = 1
            self.num_batches_tracked._data[...] = 0

    def reset_parameters(self):
        self.reset_running_stats()
        _reset_affine(self)


class _BatchNorm(_NormBase):
    """Batch normalisation over the channel axis 1 (seed 001 §2, seed 003 §4.3.2, seed 004 §B.2).

    Training: normalise with the batch mean and the biased batch variance, eps inside the
    square root; update running_mean/running_var (unbiased) with ``momentum`` (0.1;
    None = cumulative average over the batches seen).  Eval: use the running statistics
    (unless track_running_stats=False).  Affine gamma (``weight``, init 1) and beta
    (``bias``, init 0).  ``eps_mode='std'`` selects seed 004's std + eps (varlens extra)."""

    _ndims = ()

    def __init__(self, num_features, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True,
                 device=None, dtype=None, *, bias=True, eps_mode="sqrt"):
        if eps_mode not in ("sqrt", "std"):
            raise ValueError(f"{type(self).__name__}: eps_mode must be 'sqrt' or 'std', got {eps_mode!r}")
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype, bias=bias)
        self.eps_mode = eps_mode
        self._has_bias = bool(bias)

    def _check_input_dim(self, input):
        if input.ndim not in self._ndims:
            want = " or ".join(f"{d}D" for d in self._ndims)
            raise ValueError(f"{type(self).__name__}: expected {want} input (got {input.ndim}D input of shape "
                             f"{tuple(input.shape)})")
        if input.shape[1] != self.num_features:
            c = input.shape[1]
            what = ("running_mean" if self.running_mean is not None else
                    "weight" if self.weight is not None else "bias" if self.bias is not None else None)
            if what is not None:  # with neither statistics nor affine parameters any C works (PyTorch)
                raise ArgRuntimeError(f"{what} should contain {c} elements not {self.num_features} "
                                      f"({type(self).__name__}({self.num_features}): expected {self.num_features} "
                                      f"channels in dim 1, got input of shape {tuple(input.shape)})")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats:
            self.num_batches_tracked._data += 1
            if self.momentum is None:   # cumulative average: 1 / batches seen
                nbt = self.num_batches_tracked._data
                # on the device the factor stays a 0-d device array (no host sync)
                factor = 1.0 / float(nbt) if nbt.__class__ is xp.ndarray else 1.0 / nbt
        bn_training = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias,
                            bn_training, factor, self.eps, eps_mode=self.eps_mode)

    def extra_repr(self):
        s = (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
             f"bias={self._has_bias and bool(self.affine)}, track_running_stats={self.track_running_stats}")
        return s + (", eps_mode='std'" if self.eps_mode != "sqrt" else "")


class BatchNorm1d(_BatchNorm):
    """Batch norm for (N, C) or (N, C, L) inputs."""
    _ndims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """Batch norm for (N, C, H, W) inputs (statistics over N, H, W per channel)."""
    _ndims = (4,)


class BatchNorm3d(_BatchNorm):
    _ndims = (5,)
