"""Flatten parameters into one vector and back (PyTorch's parameters_to_vector and
vector_to_parameters)."""
from __future__ import annotations

from varlens.core.tensor import Tensor
from varlens.ops import cat

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def parameters_to_vector(parameters):
    """One 1-D tensor holding every parameter, flattened and concatenated in order
    (differentiable, as in PyTorch)."""
    ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    if not ps:
        raise ValueError("parameters_to_vector: got no parameters")
    return cat([p.reshape(-1) for p in ps])


def vector_to_parameters(vec, parameters):
    """Copy consecutive slices of the 1-D ``vec`` into the parameters (values only; PyTorch
    makes the parameters views of ``vec``, varlens copies so they stay independent)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"vector_to_parameters: expected vec to be a Tensor, got {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters: vec must be 1-D, got shape {tuple(vec.shape)}")
    ps = [parameters] if isinstance(parameters, Tensor) else list(parameters)
    total = sum(p.numel() for p in ps)
    if total != vec.numel():
        raise ValueError(f"vector_to_parameters: vec has {vec.numel()} elements but the parameters "
                         f"hold {total}")
    i = 0
    for p in ps:
        n = p.numel()
        p._data = vec._data[i:i + n].reshape(p._data.shape).astype(p._data.dtype, copy=True)
        p._version[0] += 1
        i += n
