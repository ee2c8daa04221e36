"""PyTorch's hook-based reparametrisations: ``weight_norm`` (w = g v/|v|) and
``spectral_norm`` (w = W / sigma_max(W), sigma estimated by power iteration), with
``remove_weight_norm`` / ``remove_spectral_norm``.

Both recompute the weight from the stored pieces in a forward pre-hook, with ordinary
differentiable ops, so the gradient reaches g and v (or W) by the chain rule.  For
spectral norm, u and v of the power iteration are constants (updated without gradient
in training mode, as PyTorch); the gradient of sigma = u^T W v with respect to W is then
u v^T.
"""
from __future__ import annotations

from varlens import ops as _ops
from varlens.core.grad_mode import no_grad
from varlens.core import array as B
from varlens.core.array import xp
from varlens.nn.parameter import Parameter
from varlens.random import generator_for
from varlens.core.tensor import Tensor

__all__ = ["weight_norm", "remove_weight_norm", "spectral_norm", "remove_spectral_norm", "norm_except_dim",
           "WeightNorm", "SpectralNorm"]


def norm_except_dim(v, pow=2, dim=0):
    """The ``pow``-norm of v over every axis but ``dim``, keeping v's rank (dim = -1: one norm of
    the whole tensor, a 0-d result, as PyTorch's weight_norm)."""
    if dim == -1:
        return _ops.norm(v, pow)
    axes = tuple(a for a in range(v.ndim) if a != dim)
    return _ops.norm(v, pow, axes, keepdim=True) if axes else _ops.abs(v)


def _weight_norm(v, g, dim):
    """w = v * (g / |v|), the norm over every axis but dim."""
    return v * (g / norm_except_dim(v, 2, dim))


def _check_param(module, name, hook_cls, what):
    """The parameter ``name`` of ``module``, which must not carry a ``hook_cls`` hook yet."""
    for hook in module._forward_pre_hooks.values():
        if isinstance(hook, hook_cls) and hook.name == name:
            raise RuntimeError(f"{what}: cannot register two {what} hooks on the same parameter {name}")
    p = module._parameters.get(name) if hasattr(module, "_parameters") else None
    if p is None:
        raise ValueError(f"{what}: module {type(module).__name__} has no parameter named {name!r}")
    return p


class WeightNorm:
    """Forward pre-hook recomputing ``name`` from ``name_g`` and ``name_v``."""

    def __init__(self, name, dim):
        self.name, self.dim = name, -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        weight = _check_param(module, name, WeightNorm, "weight_norm")
        fn = WeightNorm(name, dim)
        if fn.dim != -1 and not -weight.ndim <= fn.dim < weight.ndim:
            raise IndexError(f"weight_norm: dim {dim} is out of range for a weight of shape {tuple(weight.shape)}")
        if fn.dim < -1:
            fn.dim += weight.ndim
        del module._parameters[name]
        with no_grad():
            g = norm_except_dim(weight.detach(), 2, fn.dim)
        module.register_parameter(name + "_g", Parameter(g._data.copy()))
        module.register_parameter(name + "_v", Parameter(weight._data.copy()))
        object.__setattr__(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module)
        object.__delattr__(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        module.register_parameter(self.name, Parameter(weight._data.copy()))

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """Replace ``module.<name>`` by g * v/|v| with new parameters ``<name>_g`` (the norms, one per
    slice along ``dim``; dim=None for one norm of the whole tensor) and ``<name>_v``."""
    WeightNorm.apply(module, name, dim)
    return module


def remove_weight_norm(module, name="weight"):
    return _remove_hook(module, name, WeightNorm, "weight_norm")


def _remove_hook(module, name, hook_cls, what):
    """Undo the ``hook_cls`` reparametrisation of ``name`` (a plain Parameter again)."""
    for k, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, hook_cls) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[k]
            return module
    raise ValueError(f"{what} of '{name}' not found in {type(module).__name__}")


def _normalize(a, eps):
    if a.__class__ is not xp.ndarray:      # on the device: no host read (PyTorch's F.normalize)
        lib = B.namespace(a)
        return a / lib.maximum(lib.linalg.norm(a), eps)
    return a / max(float(xp.linalg.norm(a)), eps)


class SpectralNorm:
    """Forward pre-hook computing ``name = name_orig / sigma`` (u, v in buffers ``name_u``, ``name_v``)."""

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError(f"spectral_norm: expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = _ops.permute(weight, (self.dim,) + tuple(d for d in range(weight.ndim) if d != self.dim))
        return _ops.reshape(weight, (weight.shape[0], -1))

    def compute_weight(self, module, do_power_iteration):
        weight = getattr(module, self.name + "_orig")
        u, v = getattr(module, self.name + "_u"), getattr(module, self.name + "_v")
        mat = self.reshape_weight_to_matrix(weight)
        if do_power_iteration:
            W = mat._data
            for _ in range(self.n_power_iterations):   # v <- W^T u / |.|, u <- W v / |.| (no gradient)
                v._data[...] = _normalize(W.T @ u._data, self.eps)
                u._data[...] = _normalize(W @ v._data, self.eps)
            u._version[0] += 1
            v._version[0] += 1
        uc, vc = Tensor._make(u._data.copy()), Tensor._make(v._data.copy())
        sigma = _ops.sum(uc * _ops.matmul(mat, vc))
        return weight / sigma

    def remove(self, module):
        with no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        object.__delattr__(module, self.name)
        del module._buffers[self.name + "_u"]
        del module._buffers[self.name + "_v"]
        del module._parameters[self.name + "_orig"]
        module.register_parameter(self.name, Parameter(weight._data.copy()))

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps, generator=None):
        weight = _check_param(module, name, SpectralNorm, "spectral_norm")
        if weight.ndim < 2:
            raise ValueError(f"spectral_norm: the weight must have at least 2 dimensions, got shape "
                             f"{tuple(weight.shape)}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        mat = fn.reshape_weight_to_matrix(weight.detach())._data
        h, w = mat.shape
        g = generator_for(B.namespace(mat), generator)   # u, v drawn on the weight's device
        u = _normalize(g.normal(0.0, 1.0, h).astype(mat.dtype), eps)
        v = _normalize(g.normal(0.0, 1.0, w).astype(mat.dtype), eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight)
        object.__setattr__(module, name, Tensor._make(weight._data.copy()))
        module.register_buffer(name + "_u", Tensor._make(u))
        module.register_buffer(name + "_v", Tensor._make(v))
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None, *, generator=None):
    """Divide ``module.<name>`` by its largest singular value, estimated with
    ``n_power_iterations`` power-iteration steps per training forward pass.  The weight is
    kept as ``<name>_orig``; u and v are the buffers ``<name>_u`` and ``<name>_v``."""
    if dim is None:
        dim = 1 if type(module).__name__.startswith("ConvTranspose") else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps, generator)
    return module


def remove_spectral_norm(module, name="weight"):
    return _remove_hook(module, name, SpectralNorm, "spectral_norm")
