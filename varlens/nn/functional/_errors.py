"""Exception classes for nn argument errors that PyTorch reports with a different type than
the natural Python one.  Each is a subclass of both, so ``except ValueError`` (the varlens
convention for a bad argument) and ``except AssertionError`` / ``RuntimeError`` / ... (what
the same PyTorch call raises) both catch it."""
from __future__ import annotations


class ArgAssertionError(ValueError, AssertionError):
    """A bad argument that PyTorch rejects with an ``assert`` (Hardtanh's min_val/max_val,
    MultiheadAttention's embed_dim % num_heads, Embedding's padding_idx)."""


class ArgRuntimeError(ValueError, RuntimeError):
    """A bad argument or shape that PyTorch rejects with a RuntimeError (a negative layer size,
    a Conv2d kernel_size tuple of the wrong length, a loss's delta/beta/label_smoothing, a
    BatchNorm channel count)."""


class ShapeAssertionError(RuntimeError, AssertionError):
    """A shape mismatch that PyTorch reports with an ``assert`` (MultiheadAttention inputs)."""


class ArgTypeError(ValueError, TypeError):
    """An argument of the wrong type or dtype where PyTorch raises the other of the two (an RNN
    size given as a float: TypeError; an RNN input of the wrong dtype: ValueError)."""


class ArgNotImplementedError(ValueError, NotImplementedError):
    """An unknown mode name that PyTorch reports as NotImplementedError (F.pad's mode)."""


class ArgZeroDivisionError(ValueError, ZeroDivisionError):
    """A zero divisor given as an argument (GroupNorm(num_groups=0))."""


class NotTensorError(TypeError, AttributeError):
    """A list or NumPy array where an nn.functional op needs a Tensor: PyTorch raises TypeError
    from its C++ ops and AttributeError from those written in Python (input.sigmoid()...)."""
