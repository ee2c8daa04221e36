"""The Distribution base class (torch.distributions.Distribution's contract) and shared helpers."""
from __future__ import annotations

import math

import varlens as _vl
from varlens.core.array import xp
from varlens.distributions import constraints
from varlens.random import _gen
from varlens.core.tensor import Size, Tensor

__all__ = ["Distribution"]


class lazy_property:
    """Computed on first access and cached in the instance (probs from logits and back)."""

    def __init__(self, fn):
        self.fn, self.__doc__, self.name = fn, fn.__doc__, fn.__name__

    def __get__(self, obj, cls=None):
        if obj is None:
            return self
        v = self.fn(obj)
        obj.__dict__[self.name] = v
        return v


class ParamShapeError(ValueError, RuntimeError):
    """Parameters that do not broadcast together (torch raises RuntimeError from broadcast_tensors;
    this is both, so either except clause catches it)."""


def broadcast_all(*values):
    """Tensors (numbers become tensors of the first tensor's float dtype, else the default dtype)
    broadcast to one shape, differentiably."""
    dtype = next((v.dtype for v in values if isinstance(v, Tensor) and v.dtype.kind == "f"), None)
    out = []
    for v in values:
        if not isinstance(v, Tensor):
            v = _vl.tensor(v, dtype=dtype) if dtype is not None else _vl.tensor(
                float(v) if isinstance(v, (int, float)) else v)
            if v.dtype.kind != "f":
                v = v.to(_vl.get_default_dtype())
        out.append(v)
    shapes = [tuple(v.shape) for v in out]
    try:
        shape = xp.broadcast_shapes(*shapes)
    except ValueError:
        raise ParamShapeError("distribution parameters must broadcast to one batch shape, got shapes "
                              + " and ".join(str(s) for s in shapes)) from None
    return [v if tuple(v.shape) == shape else _vl.broadcast_to(v, shape) for v in out]


def as_float(v):
    v = v if isinstance(v, Tensor) else _vl.tensor(v)
    return v if v.dtype.kind == "f" else v.to(_vl.get_default_dtype())


def sum_rightmost(x, n):
    return x.sum(tuple(range(-n, 0))) if n > 0 else x


def clamp_probs(p):
    eps = float(xp.finfo(p.dtype).eps)
    return _vl.clamp(p, eps, 1 - eps)


def probs_to_logits(probs, is_binary=False):
    ps = clamp_probs(probs)
    return _vl.log(ps) - _vl.log1p(-ps) if is_binary else _vl.log(ps)


def logits_to_probs(logits, is_binary=False):
    return _vl.sigmoid(logits) if is_binary else _vl.softmax(logits, -1)


def shape_of(sample_shape):
    if isinstance(sample_shape, int):
        return (sample_shape,)
    return tuple(int(s) for s in sample_shape)


def rng(generator):
    return _gen(generator).rng


class Distribution:
    """batch_shape / event_shape, validate_args, sample (rsample under no_grad), expand, ...

    ``validate_args`` defaults to True as in torch: bad parameters raise a ValueError naming the
    parameter and the constraint, and log_prob/cdf reject values outside the support."""

    has_rsample = False
    has_enumerate_support = False
    _validate_args = True
    arg_constraints: dict = {}
    support = None
    _event_dims: dict = {}  # parameter name -> its number of trailing (event) dims, for expand()
    _no_expand = ("temperature",)  # tensors kept as they are by expand()

    @staticmethod
    def set_default_validate_args(value):
        if value not in (True, False):
            raise ValueError(f"set_default_validate_args: value must be True or False, got {value!r}")
        Distribution._validate_args = value

    def __init__(self, batch_shape=Size(), event_shape=Size(), validate_args=None):
        self._batch_shape = Size(tuple(batch_shape))
        self._event_shape = Size(tuple(event_shape))
        if validate_args is not None:
            self._validate_args = bool(validate_args)
        if self._validate_args:
            for param, constraint in self.arg_constraints.items():
                if constraints.is_dependent(constraint):
                    continue
                if param not in self.__dict__ and isinstance(getattr(type(self), param, None), lazy_property):
                    continue  # probs given, logits not computed (and vice versa), as torch
                value = getattr(self, param)
                if not bool(constraint.check(value)._data.all()):
                    raise ValueError(
                        f"Expected parameter {param} ({type(value).__name__} of shape {tuple(value.shape)}) "
                        f"of distribution {self!r} to satisfy the constraint {constraint!r}, "
                        f"but found invalid values:\n{value}")

    def _init_params(self, validate_args, **params):
        """Broadcast the named parameters together (broadcast_all), store each as an attribute of
        that name, and initialise with their common shape as the batch shape."""
        values = broadcast_all(*params.values())
        for name, v in zip(params, values):
            setattr(self, name, v)
        Distribution.__init__(self, values[0].shape, validate_args=validate_args)

    @property
    def batch_shape(self):
        return self._batch_shape

    @property
    def event_shape(self):
        return self._event_shape

    def _extended_shape(self, sample_shape=Size()):
        return Size(shape_of(sample_shape) + tuple(self._batch_shape) + tuple(self._event_shape))

    def sample(self, sample_shape=Size(), generator=None):
        with _vl.no_grad():
            if self.has_rsample:
                return self.rsample(sample_shape, generator=generator).detach()
            return self._sample(shape_of(sample_shape), generator)

    def sample_n(self, n):
        return self.sample((n,))

    def rsample(self, sample_shape=Size(), generator=None):
        raise NotImplementedError(f"{type(self).__name__} has no reparametrised sample (rsample); "
                                  "use sample() (no gradient) or a score-function estimator")

    def _sample(self, sample_shape, generator):
        raise NotImplementedError

    def log_prob(self, value):
        raise NotImplementedError

    def cdf(self, value):
        raise NotImplementedError

    def icdf(self, value):
        raise NotImplementedError

    def entropy(self):
        raise NotImplementedError

    def enumerate_support(self, expand=True):
        raise NotImplementedError

    def perplexity(self):
        return _vl.exp(self.entropy())

    @property
    def mean(self):
        raise NotImplementedError

    @property
    def mode(self):
        raise NotImplementedError(f"{type(self).__name__} does not implement mode")

    @property
    def variance(self):
        raise NotImplementedError

    @property
    def stddev(self):
        return _vl.sqrt(self.variance)

    def expand(self, batch_shape, _instance=None):
        """A view with a larger batch_shape (parameters broadcast, no copy of the data)."""
        batch_shape = Size(tuple(batch_shape))
        new = object.__new__(type(self))
        new.__dict__.update(self.__dict__)
        for name, v in self.__dict__.items():
            if isinstance(v, Tensor) and not name.startswith("_") and name not in self._no_expand:
                k = self._event_dims.get(name, 0)
                extra = tuple(v.shape[v.ndim - k:]) if k else ()
                if v.ndim - k > len(batch_shape):
                    raise ValueError(f"expand: batch_shape {tuple(batch_shape)} has fewer dims than the "
                                     f"current batch_shape {tuple(self._batch_shape)}")
                new.__dict__[name] = _vl.broadcast_to(v, tuple(batch_shape) + extra)
            elif isinstance(v, Distribution) and name != "base_dist":
                new.__dict__[name] = v.expand(batch_shape)
        new._expand_extra(self, batch_shape)
        new._batch_shape = batch_shape
        return new

    def _expand_extra(self, old, batch_shape):
        pass

    def _validate_sample(self, value):
        if not isinstance(value, Tensor):
            raise ValueError("The value argument to log_prob must be a Tensor")
        ev = len(self._event_shape)
        if tuple(value.shape[value.ndim - ev:] if ev else ()) != tuple(self._event_shape):
            raise ValueError(f"The right-most size of value must match event_shape: {tuple(value.shape)} vs "
                             f"{tuple(self._event_shape)}.")
        try:
            xp.broadcast_shapes(tuple(value.shape[:value.ndim - ev]), tuple(self._batch_shape))
        except ValueError:
            raise ValueError(f"Value is not broadcastable with batch_shape+event_shape: {tuple(value.shape)} vs "
                             f"{tuple(self._batch_shape + self._event_shape)}.") from None
        support = self.support
        if support is None or constraints.is_dependent(support):
            return
        if not bool(support.check(value)._data.all()):
            raise ValueError(f"Expected value argument ({type(value).__name__} of shape {tuple(value.shape)}) "
                             f"to be within the support ({support!r}) of the distribution {self!r}, "
                             f"but found invalid values:\n{value}")

    def _value(self, value, like):
        """log_prob/cdf input: validated if validate_args, cast to the parameters' float dtype."""
        if self._validate_args:
            self._validate_sample(value)
        value = value if isinstance(value, Tensor) else _vl.tensor(value)
        return value.to(like.dtype) if value.dtype.kind != "f" or value.dtype != like.dtype and \
            xp.dtype(value.dtype).itemsize < xp.dtype(like.dtype).itemsize else value

    def __repr__(self):
        names = [k for k in self.arg_constraints if k in self.__dict__]
        args = ", ".join(f"{k}: {self.__dict__[k].item() if self.__dict__[k].numel() == 1 else self.__dict__[k].size()}"
                         for k in names if isinstance(self.__dict__[k], Tensor))
        return f"{type(self).__name__}({args})"


def nan_like(shape, dtype):
    return _vl.full(tuple(shape), math.nan, dtype=dtype)
