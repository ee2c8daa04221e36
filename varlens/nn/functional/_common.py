"""Helpers shared by the nn.functional families: torch-style argument errors, the non-Tensor
check, in-place variants and small shape utilities.
"""
from __future__ import annotations

import functools
import inspect
import numbers

from varlens.core import array as B
from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.nn.functional._errors import NotTensorError
from varlens.ops.pointwise import torch_dtype_name, type_name
from varlens.ops.tensor_methods import _inplace_from




def _arr(t):
    return t._data if isinstance(t, Tensor) else t


class IndexTypeError(TypeError, RuntimeError):
    """Non-integer indices for a lookup: a TypeError, and PyTorch's RuntimeError."""


class NotATensorError(TypeError, AttributeError):
    """A non-tensor (list, NumPy array, number) where a loss needs a Tensor.  A TypeError that
    names the argument; also an AttributeError, which is what PyTorch's elementwise losses
    raise for a list (``'list' object has no attribute 'size'``)."""


def _type_name(v):
    t = type(v)
    return t.__name__ if t.__module__ == "builtins" else f"{t.__module__}.{t.__qualname__}"


def _need_tensor(v, name, pos, op, cls=TypeError):
    """torch's argument-parser message for a non-Tensor ``v`` (one isinstance when it is one)."""
    if not isinstance(v, Tensor):
        raise cls(f"{op}(): argument '{name}' (position {pos}) must be Tensor, not {_type_name(v)}")


def _dtype_name(dtype):
    return torch_dtype_name(dtype)


def _shape(t):
    return tuple(t.shape)


def _require_tensor(x, name, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


def _const(a, like):
    """``a`` as a constant tensor of ``like``'s dtype, on ``like``'s device."""
    d = like._data
    ns = xp if d.__class__ is xp.ndarray else B.namespace(d)
    return Tensor._make(ns.asarray(a, dtype=like.dtype))


def _straight_through(t, value):
    """A tensor with ``value``'s numbers whose gradient is that of ``t`` (PyTorch's in-place
    clamps under no_grad: the value changes, the recorded derivative does not)."""
    return t + Tensor._make((value - t._data).astype(t._data.dtype, copy=False))


def _inplace(fn, name):
    """``name_(input, ...)``: the result written back into ``input`` (Tensor.relu_ and friends:
    an array update outside autograd, a re-pointed result inside it)."""
    method = _inplace_from(name, fn)

    def f(input, *args, **kwargs):
        kwargs.pop("inplace", None)
        return method(input, *args, **kwargs)
    f.__name__ = name + "_"
    f.__doc__ = f"In-place {name}: writes the result into ``input`` and returns it."
    return f


# ---------------------------------------------------------------- shuffles
def _check_int(v, name, op, minimum=1):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < minimum:
        raise ValueError(f"{op}: {name} must be an int >= {minimum}, got {v!r}")
    return int(v)


# ---------------------------------------------------------------- fold / unfold
def _int_pair(v, name, op, minimum):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (int(v), int(v))
    try:
        v = tuple(int(a) for a in v)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {v!r}") from None
    if len(v) != 2 or any(a < minimum for a in v):
        raise ValueError(f"{op}: {name} must be an int or a pair of ints >= {minimum}, got {v!r}")
    return v


# ---------------------------------------------------------------- pooling
def _one(v, name, op, minimum):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{op}: {name} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < minimum:
        raise ValueError(f"{op}: {name} must be an int >= {minimum}, got {v!r}")
    return int(v)


def _check_nd(input, nd, op):
    _require_tensor(input, "input", op)
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got shape "
                           f"{_shape(input)}")


# ---------------------------------------------------------------- N-d convolution and pooling
# Built from one gather of every window position (the input-gradient of a gather is a
# scatter-add, seed 003 §5.2's "each input pixel collects the gradients of the outputs it
# fed") and an einsum with the kernel.  Used for the 3-D layers and conv_transpose3d;
# the 1-D/2-D layers keep their fused ops.
def _ntup(v, n, name, op, minimum):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (int(v),) * n
    try:
        v = tuple(int(a) for a in v)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a tuple of {n} ints, got {v!r}") from None
    if len(v) != n or any(a < minimum for a in v):
        raise ValueError(f"{op}: {name} must be an int or a tuple of {n} ints >= {minimum}, got {v!r}")
    return v


def _tensor_args(*names, optional=()):
    """Declare which arguments of an nn.functional op must be Tensors: a list, NumPy array or
    number there raises torch's "fn(): argument 'weight' (position 2) must be Tensor, not list"
    (NotTensorError: a TypeError, and the AttributeError torch's Python-written ops raise) before
    the op reads ``.shape`` or ``._data`` from it.  Names in ``optional`` may also be None.  The
    positions are read from the signature once; a call pays one isinstance per named argument."""
    def mark(fn):
        params = list(inspect.signature(fn).parameters)
        spec = tuple((params.index(n), n, n in optional) for n in names)
        op = fn.__name__

        @functools.wraps(fn)
        def checked(*args, **kwargs):
            n = len(args)
            for i, name, opt in spec:
                if i < n:
                    v = args[i]
                elif name in kwargs:
                    v = kwargs[name]
                else:
                    continue
                if not isinstance(v, Tensor) and not (opt and v is None):
                    raise NotTensorError(f"{op}(): argument '{name}' (position {i + 1}) must be Tensor, "
                                         f"not {type_name(v)}")
            return fn(*args, **kwargs)
        return checked
    return mark


def _tensor_input(fn):
    """``fn``, refusing a non-Tensor ``input`` as torch does (these would otherwise compute on a list
    or a NumPy array silently, or fail deep inside); the error is both a TypeError and an
    AttributeError, the two types torch's ops raise for it."""
    name = fn.__name__
    shown = "log_sigmoid" if name == "logsigmoid" else name   # torch's own name for the op

    @functools.wraps(fn)
    def checked(input, *args, **kwargs):  # noqa: A002  (torch's argument name)
        if not isinstance(input, Tensor):
            raise NotTensorError(f"{shown}(): argument 'input' (position 1) must be Tensor, not "
                                 f"{type_name(input)}")
        return fn(input, *args, **kwargs)
    return checked
