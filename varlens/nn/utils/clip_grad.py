"""Gradient clipping: rescale all gradients together by their norm, or clamp each entry.

``clip_grad_norm_`` treats the gradients of all parameters as one long vector g, computes
its p-norm ``|g|`` and, when it exceeds ``max_norm``, multiplies every gradient by
``max_norm / (|g| + 1e-6)`` (PyTorch's formula, 1e-6 included), so the direction of the
step is kept and its length capped.  ``clip_grad_value_`` clamps each entry to
``[-clip_value, clip_value]``, which changes the direction.

These act on ``.grad`` arrays in place between ``backward()`` and ``optimizer.step()``.
On a CUDA device everything stays there: the norm is a 0-d device tensor and the gradients are
scaled by a device-side factor, with no host read (``error_if_nonfinite=True`` reads the norm
on the host, the one synchronisation, as in PyTorch).
"""
from __future__ import annotations

import math
import numbers

from varlens.core import array as B
from varlens.core import dtypes as DT
from varlens.core.tensor import Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _as_list(name, parameters):
    if isinstance(parameters, Tensor):
        return [parameters]
    try:
        ps = list(parameters)
    except TypeError:
        raise TypeError(f"{name}: parameters must be a Tensor or an iterable of Tensors, got "
                        f"{type(parameters).__name__}") from None
    for i, p in enumerate(ps):
        if not isinstance(p, Tensor):
            raise TypeError(f"{name}: parameters[{i}] must be a Tensor, got {type(p).__name__}")
    return ps


def _norm_type(name, norm_type):
    if isinstance(norm_type, str) and norm_type.lower() == "inf":
        return math.inf
    if not isinstance(norm_type, numbers.Real) or isinstance(norm_type, bool) or norm_type != norm_type:
        raise TypeError(f"{name}: norm_type must be a number or 'inf', got {norm_type!r}")
    return float(norm_type)


def _vector_norm(a, p):
    """The p-norm of an array seen as one vector (p = inf, -inf, 0 and any real p)."""
    xp = B.namespace(a)
    if a.size == 0:
        return xp.zeros((), dtype=a.dtype)
    if p == 2:  # (before |a|: the dot product needs no copy)
        return xp.sqrt(xp.vdot(a.ravel(), a.ravel())).astype(a.dtype)
    if p == 0:
        return xp.asarray(xp.count_nonzero(a), dtype=a.dtype)
    absa = xp.abs(a)
    if p == math.inf:
        return absa.max()
    if p == -math.inf:
        return absa.min()
    if p == 1:
        return absa.sum(dtype=a.dtype)
    return (absa ** p).sum(dtype=a.dtype) ** (1.0 / p)


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """The p-norm of the given tensors taken together (a 0-d Tensor); ``tensors`` are usually
    the gradients themselves."""
    ts = _as_list("get_total_norm", tensors)
    p = _norm_type("get_total_norm", norm_type)
    if not ts:
        return Tensor._make(B.xp.zeros((), dtype=DT.get_default_dtype()))
    xp = B.namespace(ts[0]._data)     # (tensors on several devices: their norms meet on the first's)
    norms = xp.stack([B.to_namespace(_vector_norm(t._data, p), xp) for t in ts])
    total = _vector_norm(norms, p)
    if error_if_nonfinite and not bool(xp.isfinite(total)):   # the one host read, only when asked
        raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is "
                           "non-finite, so it cannot be clipped. To disable this error and scale the "
                           "gradients by the non-finite norm anyway, set `error_if_nonfinite=False`")
    return Tensor._make(xp.asarray(total))


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    """Scale the gradients by ``min(1, max_norm / (total_norm + 1e-6))`` in place."""
    ps = _as_list("clip_grads_with_norm_", parameters)
    _check_max(max_norm)
    tn = total_norm._data if isinstance(total_norm, Tensor) else B.xp.asarray(total_norm)
    coef = max_norm / (tn + 1e-6)
    coef = B.namespace(coef).minimum(coef, 1.0).astype(tn.dtype)
    # under max_norm x * 1 is x exactly, so the host skips the pass; a device multiplies anyway
    # (deciding would read the norm on the host, a synchronisation)
    scale = B.is_device_array(coef) or not (coef == 1.0)
    with B.xp.errstate(invalid="ignore"):       # a non-finite norm gives NaNs, as in PyTorch
        for p in ps:
            g = p.grad
            if g is not None:
                if scale:
                    g._data *= coef.astype(g._data.dtype)
                g._version[0] += 1


def _check_max(max_norm):
    if isinstance(max_norm, Tensor):
        max_norm = max_norm.item()
    if not isinstance(max_norm, numbers.Real) or isinstance(max_norm, bool) or max_norm != max_norm:
        raise TypeError(f"clip_grad_norm_: max_norm must be a number, got {max_norm!r}")
    if max_norm < 0:
        raise ValueError(f"clip_grad_norm_: max_norm must be >= 0, got {max_norm}")


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Clip the gradients of ``parameters`` so their joint ``norm_type``-norm is at most
    ``max_norm``; returns the norm *before* clipping as a 0-d Tensor (as PyTorch)."""
    ps = _as_list("clip_grad_norm_", parameters)
    _check_max(max_norm)
    grads = [p.grad for p in ps if p.grad is not None]
    if not grads:
        return Tensor._make(B.xp.zeros((), dtype=DT.get_default_dtype()))
    total = get_total_norm(grads, norm_type, error_if_nonfinite)
    clip_grads_with_norm_(ps, float(max_norm), total)
    return total


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamp every gradient entry to ``[-clip_value, clip_value]`` in place."""
    ps = _as_list("clip_grad_value_", parameters)
    if not isinstance(clip_value, numbers.Real) or isinstance(clip_value, bool) or clip_value != clip_value:
        raise TypeError(f"clip_grad_value_: clip_value must be a number, got {clip_value!r}")
    if clip_value < 0:
        raise ValueError(f"clip_grad_value_: clip_value must be >= 0, got {clip_value}")
    c = float(clip_value)
    for p in ps:
        g = p.grad
        if g is not None:
            B.namespace(g._data).clip(g._data, -c, c, out=g._data)
            g._version[0] += 1
