"""torch.autograd.function's face: ``Function`` (custom ops with forward and backward side by
side) and ``once_differentiable``.  Both are defined in varlens/core/function.py (the ground
floor); this module exists because PyTorch programs import them from this path."""
from varlens.core.function import Function, once_differentiable  # noqa: F401

__all__ = ["Function", "once_differentiable"]
