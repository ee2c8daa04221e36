"""torch.nn.utils.parametrizations: weight_norm and spectral_norm as parametrizations
(registered with varlens.nn.utils.parametrize, state_dict keys as PyTorch's:
``parametrizations.weight.original0/1`` for weight norm, ``parametrizations.weight.original``
plus ``parametrizations.weight.0._u/_v`` for spectral norm).  ``orthogonal`` is not provided.
"""
from __future__ import annotations

from varlens import ops as _ops
from varlens.core.grad_mode import no_grad
from varlens.nn.module import Module
from varlens.nn.utils.parametrize import register_parametrization
from varlens.nn.utils.weight_norm import _normalize, _weight_norm, norm_except_dim
from varlens.random import _gen
from varlens.core.tensor import Tensor
from varlens.nn import functional as F

__all__ = ["weight_norm", "spectral_norm"]


class _WeightNorm(Module):
    """w = v g/|v| (norm over every axis but dim); right_inverse splits w into (g, v) = (|w|, w)."""

    def __init__(self, dim=0):
        super().__init__()
        self.dim = -1 if dim is None else dim

    def forward(self, weight_g, weight_v):
        return _weight_norm(weight_v, weight_g, self.dim)

    def right_inverse(self, weight):
        with no_grad():
            g = norm_except_dim(weight, 2, self.dim)
        return g, weight


def weight_norm(module, name="weight", dim=0):
    """``module.<name>`` becomes g * v/|v| with originals g (``original0``) and v (``original1``)."""
    w = getattr(module, name, None)
    if not isinstance(w, Tensor):
        raise ValueError(f"weight_norm: module {type(module).__name__} has no tensor named {name!r}")
    d = -1 if dim is None else dim
    if d != -1 and not -w.ndim <= d < w.ndim:
        raise IndexError(f"weight_norm: dim {dim} is out of range for a weight of shape {tuple(w.shape)}")
    if d < -1:
        d += w.ndim
    register_parametrization(module, name, _WeightNorm(d), unsafe=True)
    return module


class _SpectralNorm(Module):
    """w / sigma with sigma = u^T W v from power iteration on the (dim-first, flattened) matrix W;
    u and v are updated without gradient in training mode (15 steps at construction)."""

    def __init__(self, weight, n_power_iterations=1, dim=0, eps=1e-12, generator=None):
        super().__init__()
        ndim = weight.ndim
        if dim >= ndim or dim < -ndim:
            raise IndexError(f"spectral_norm: dim must be in [-{ndim}, {ndim - 1}], got {dim}")
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.dim = dim if dim >= 0 else dim + ndim
        self.eps = eps
        if ndim > 1:
            self.n_power_iterations = n_power_iterations
            mat = self._reshape_weight_to_matrix(weight.detach())._data
            h, w = mat.shape
            g = _gen(generator)
            self.register_buffer("_u", Tensor._make(_normalize(g.normal(0.0, 1.0, h).astype(mat.dtype), eps)))
            self.register_buffer("_v", Tensor._make(_normalize(g.normal(0.0, 1.0, w).astype(mat.dtype), eps)))
            self._power_method(mat, 15)

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = _ops.permute(weight, (self.dim,) + tuple(d for d in range(weight.ndim) if d != self.dim))
        return _ops.reshape(weight, (weight.shape[0], -1))

    def _power_method(self, W, n):
        u, v = self._u, self._v
        for _ in range(n):   # u <- W v/|.|, v <- W^T u/|.| (constants for autograd)
            u._data[...] = _normalize(W @ v._data, self.eps)
            v._data[...] = _normalize(W.T @ u._data, self.eps)
        u._version[0] += 1
        v._version[0] += 1

    def forward(self, weight):
        if weight.ndim == 1:
            return F.normalize(weight, dim=0, eps=self.eps)
        mat = self._reshape_weight_to_matrix(weight)
        if self.training:
            self._power_method(mat._data, self.n_power_iterations)
        u, v = Tensor._make(self._u._data.copy()), Tensor._make(self._v._data.copy())
        sigma = _ops.sum(u * _ops.matmul(mat, v))
        return weight / sigma

    def right_inverse(self, value):
        return value


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None, *, generator=None):
    """``module.<name>`` becomes W / sigma_max(W) (power-iteration estimate)."""
    w = getattr(module, name, None)
    if not isinstance(w, Tensor):
        raise ValueError(f"Module '{type(module).__name__}' has no parameter or buffer with name '{name}'")
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    register_parametrization(module, name, _SpectralNorm(w, n_power_iterations, dim, eps, generator))
    return module

