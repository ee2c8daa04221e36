"""Tensor methods that are ops: in-place updates (``add_``, ``mul_``, ``copy_``, ``x[k] = v``,
``normal_`` ...), dtype conversion (``to``), ``clone``/``contiguous`` and ``multinomial``.

They are written here, in the ops layer, because each one records (or bypasses) an op from
varlens/ops, and the Tensor class in varlens/core/tensor.py imports nothing above the core.
They reach Tensor only through the method table (``SURFACE`` in varlens/_surface.py, installed
with the rest of Tensor's methods), never by assignment from elsewhere.

In-place semantics: outside autograd the array is changed in place and the version counter
bumped (so a backward that saved it can refuse); a tensor in the graph is updated by recording
the out-of-place op and re-pointing the tensor at the result (``_commit``), views included.
"""
from __future__ import annotations

import numpy as _np

from varlens.core.arg_rules import torch_args
from varlens.core import grad_mode as _gm
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core.grad_mode import _enabled
from varlens.core.tensor import Tensor
from varlens.ops.creation import multinomial as _multinomial
from varlens.ops.pointwise import abs as _abs_op, add as _add_op, clamp as _clamp_op, clone as _clone_op, cos as _cos_op, div as _div_op, exp as _exp_op, log as _log_op, mul as _mul_op, neg as _neg_op, pow as _pow_op, sigmoid as _sigmoid_op, sin as _sin_op, sqrt as _sqrt_op, sub as _sub_op, tanh as _tanh_op
from varlens.ops.activation import relu as _relu_op
from varlens.ops.index import getitem as _getitem_op, index_key as _index_key_op, setitem as _setitem_op
from varlens.ops.index import _key_to, _ns, ints_first_key as _ints_first_key
from varlens.ops.shape import permute as _permute_op, reshape as _reshape_op
from varlens.random import generator_for
from varlens.ops import compare as _compare
from varlens.ops._args import _tensor
from varlens.ops.creation import bernoulli
from varlens.ops.pointwise import cast
from varlens.ops.pointwise import float_power
import math
from varlens.ops.pointwise import trunc

_UNARY = {"exp": _exp_op, "log": _log_op, "sqrt": _sqrt_op, "abs": _abs_op, "neg": _neg_op, "tanh": _tanh_op,
          "sin": _sin_op, "cos": _cos_op}


# ------------------------------------------------------------------ in-place machinery
def _inplace(self, result_fn, array_fn, other_rg=False):
    """Shared body of in-place ops.

    Outside autograd (no grad required, or no_grad) the array is changed in
    place and the version counter bumped, so a backward that saved it can
    refuse.  A tensor that requires grad (or takes a value that does, as
    ``buf += w``) is updated by recording the out-of-place op and re-pointing
    this tensor at the result; a leaf that requires grad is refused.
    """
    if "_view_of" in self.__dict__:
        _refresh(self, (self._rg or other_rg) and _enabled[0])
    if (self._rg or other_rg) and _enabled[0]:
        if self._rg and self._node is None:
            raise RuntimeError(
                "a leaf tensor that requires grad is being used in an in-place operation; "
                "wrap the update in varlens.no_grad() (as optimisers do) or clone() it first")
        # the old array stays as it was, but PyTorch's in-place op overwrites it: bump its
        # counter first, so a backward that saved this tensor refuses as PyTorch's does
        self._version[0] += 1
        res = result_fn()
        _commit(self, res)
        return self
    array_fn(self._data)
    self._version[0] += 1
    return self

def _binary_inplace(self, op, ufunc, other):
    if isinstance(other, Tensor):
        o, org = other._data, other._rg
    else:
        o, org = other, False

    def _arr(a):
        if not getattr(a.flags, "writeable", True):
            raise RuntimeError(f"{op.__name__}_: this tensor is a read-only broadcast view (from "
                               "expand/broadcast_to) and cannot be changed in place; clone() it first")
        try:
            (ufunc if a.__class__ is xp.ndarray else getattr(_ns(a), ufunc.__name__))(
                a, o, out=a, casting="same_kind")
        except ValueError:
            raise RuntimeError(f"{op.__name__}_: the value of shape {tuple(getattr(o, 'shape', ()))} "
                               f"cannot be broadcast to the tensor's shape {tuple(a.shape)}") from None
        except TypeError as e:  # numpy's UFuncTypeError: e.g. int tensor += float
            _check_same_device(a, o)
            raise RuntimeError(f"{op.__name__}_: result type cannot be stored in this {a.dtype} "
                               f"tensor in place ({e})") from None
    return _inplace(self, lambda: op(self, other), _arr, org)

def _check_same_device(a, o):
    """torch's error for an in-place op between a CPU and a CUDA tensor (a 0-d CPU value is fine)."""
    if B.is_array(o) and o.__class__ is not a.__class__ and (o.ndim or B.is_device_array(o)):
        raise B.mixed_devices(B.namespace(a), B.namespace(o)) from None


def add_(self, other, *, alpha=1):
    if alpha != 1:
        other = other * alpha
    return _binary_inplace(self, _add_op, xp.add, other)

def sub_(self, other, *, alpha=1):
    if alpha != 1:
        other = other * alpha
    return _binary_inplace(self, _sub_op, xp.subtract, other)

def mul_(self, other):
    return _binary_inplace(self, _mul_op, xp.multiply, other)

def div_(self, other):
    return _binary_inplace(self, _div_op, xp.true_divide, other)

def pow_(self, other):
    return _binary_inplace(self, _pow_op, xp.power, other)


def addcmul_(self, t1, t2, value=1):
    return add_(self, t1 * t2 * value)

def addcdiv_(self, t1, t2, value=1):
    return add_(self, t1 / t2 * value)

def lerp_(self, end, weight):
    return add_(self, (end - self) * weight)

def _unary_(self, name, ufunc):
    fn = _UNARY[name]
    return _inplace(self, lambda: fn(self), lambda a: (ufunc if a.__class__ is xp.ndarray else
                                                       getattr(_ns(a), ufunc.__name__))(a, out=a))

def exp_(self):
    return _unary_(self, "exp", xp.exp)

def log_(self):
    return _unary_(self, "log", xp.log)

def sqrt_(self):
    return _unary_(self, "sqrt", xp.sqrt)

def abs_(self):
    return _unary_(self, "abs", xp.abs)

def neg_(self):
    return _unary_(self, "neg", xp.negative)

def tanh_(self):
    return _unary_(self, "tanh", xp.tanh)

def sin_(self):
    return _unary_(self, "sin", xp.sin)

def cos_(self):
    return _unary_(self, "cos", xp.cos)

def relu_(self):
    return _inplace(self, lambda: _relu_op(self), lambda a: _ns(a).maximum(a, 0, out=a))

def sigmoid_(self):
    def f(a):
        a[...] = 1.0 / (1.0 + _ns(a).exp(-a))
    return _inplace(self, lambda: _sigmoid_op(self), f)

def clamp_(self, min=None, max=None):  # noqa: A002
    return _inplace(self, lambda: _clamp_op(self, min, max),
                         lambda a: _ns(a).clip(a, min, max, out=a))


def zero_(self):
    return _inplace(self, lambda: _mul_op(self, 0), lambda a: a.fill(0))

def fill_(self, value):
    if isinstance(value, Tensor) and value._data.__class__ is not xp.ndarray:  # a CUDA value: no host read
        v = value

        def _fill(a):
            a[...] = B.to_namespace(value._data, _ns(a))
        return _inplace(self, lambda: _add_op(_mul_op(self, 0), v), _fill)
    v = value.item() if isinstance(value, Tensor) else value
    return _inplace(self, lambda: _add_op(_mul_op(self, 0), v), lambda a: a.fill(v))

def copy_(self, src):
    s = src._data if isinstance(src, Tensor) else xp.asarray(src)
    cross = s.__class__ is not self._data.__class__   # a copy between devices (host <-> device)
    if s.shape != self._data.shape:
        try:
            if xp.broadcast_shapes(s.shape, self._data.shape) != self._data.shape:
                raise ValueError
        except ValueError:
            raise RuntimeError(f"copy_: source of shape {tuple(s.shape)} cannot be broadcast to "
                               f"{tuple(self._data.shape)}") from None
    src_rg = isinstance(src, Tensor) and src._rg
    if _enabled[0] and (self._rg or src_rg):
        srct = src if isinstance(src, Tensor) else Tensor._make(s)
        if cross:
            srct = srct.to(self.device)
        return _inplace(self, lambda: _add_op(_mul_op(self, 0), srct).to(self._data.dtype), None, True)

    if cross:
        s = B.to_namespace(s, _ns(self._data))   # host -> device, or device -> host (a sync)

    def _copy(a):
        a[...] = s
    with _gm.no_grad():
        return _inplace(self, None, _copy)

def _random_(self, sampler):
    with _gm.no_grad():
        def _fill(a):
            a[...] = sampler(a.shape).astype(a.dtype, copy=False)
        return _inplace(self, None, _fill)

def normal_(self, mean=0.0, std=1.0, *, generator=None):
    g = generator_for(_ns(self._data), generator)
    return _random_(self, lambda s: g.normal(mean, std, s))

def uniform_(self, a=0.0, b=1.0, *, generator=None):
    g = generator_for(_ns(self._data), generator)
    return _random_(self, lambda s: g.uniform(a, b, s))

def bernoulli_(self, p=0.5, *, generator=None):
    g = generator_for(_ns(self._data), generator)
    return _random_(self, lambda s: g.random(s) < p)

def apply_(self, callable):  # noqa: A002
    """Replace every element x by callable(x) (Python numbers in and out), in place; as
    torch, slow and outside autograd."""
    _cpu_only(self, "apply_")
    if self._rg and _enabled[0]:
        raise RuntimeError("apply_(): can't be used on a tensor that requires grad (it is not recorded "
                           "for autograd); use it under varlens.no_grad() or on a detached tensor")
    def f(a):
        flat = [callable(v) for v in a.ravel().tolist()]
        a[...] = _np.asarray(flat, dtype=a.dtype).reshape(a.shape)
    with _gm.no_grad():
        return _inplace(self, None, f)

def map_(self, tensor, callable):  # noqa: A002
    """self[i] = callable(self[i], tensor[i]) for every element (tensor broadcast to self), in place."""
    _cpu_only(self, "map_")
    if self._rg and _enabled[0]:
        raise RuntimeError("map_(): can't be used on a tensor that requires grad (it is not recorded "
                           "for autograd)")
    o = tensor._data if isinstance(tensor, Tensor) else _np.asarray(tensor)
    try:
        o = _np.broadcast_to(o, self._data.shape)
    except ValueError:
        raise RuntimeError(f"map_(): the tensor of shape {tuple(o.shape)} cannot be broadcast to "
                           f"{tuple(self._data.shape)}") from None
    def f(a):
        flat = [callable(x, y) for x, y in zip(a.ravel().tolist(), o.ravel().tolist())]
        a[...] = _np.asarray(flat, dtype=a.dtype).reshape(a.shape)
    with _gm.no_grad():
        return _inplace(self, None, f)

def _cpu_only(t, what):
    if t._data.__class__ is not xp.ndarray:
        raise TypeError(f"{what} is only implemented on CPU tensors (it calls a Python function per "
                        "element); move the tensor with .cpu() first")


def tensor_multinomial(self, num_samples, replacement=False, *, generator=None):
    """Category indices drawn with these weights (varlens.multinomial)."""
    return _multinomial(self, num_samples, replacement, generator=generator)

def __setitem__(self, key, value):
    key = _index_key_op(key)
    v = value._data if isinstance(value, Tensor) else value
    if self._data.__class__ is not xp.ndarray:   # a CUDA tensor: index arrays and plain values to the device
        lib = _ns(self._data)
        key = _key_to(key, lib)
        if not isinstance(value, Tensor) and not isinstance(value, (int, float, bool)):
            v = value = lib.asarray(B.to_host(value) if B.is_array(value) else value, dtype=self._data.dtype)
        elif isinstance(value, Tensor):
            _check_same_device(self._data, v)
    k2 = _ints_first_key(key, self._data)
    if k2 is not None:  # PyTorch's order for a key of ints and index arrays (x[0, :, [1, 3]] = v)
        key = k2
    if (self._rg or (isinstance(value, Tensor) and value._rg)) and _enabled[0]:
        return _inplace(self, lambda: _setitem_op(self, key, value), None, True)

    def _set(a):
        try:
            a[key] = v
        except ValueError as e:
            vs = tuple(getattr(v, "shape", ()))
            if "broadcast" in str(e):
                raise RuntimeError(f"setitem: the value of shape {vs} cannot be broadcast to the "
                                   f"indexed part of shape {tuple(a[key].shape)} of a tensor of shape "
                                   f"{tuple(a.shape)}") from None
            raise
    _inplace(self, None, _set)

def tensor_contiguous(self, memory_format=None):
    if self._data.flags.c_contiguous:
        return self
    out = _clone_op(self)      # Clone copies in C order
    if not out._data.flags.c_contiguous:
        out._data = _ns(out._data).ascontiguousarray(out._data)
    return out

def tensor_clone(self, *, memory_format=None):
    return _clone_op(self)


def _commit(t, res):
    """Make tensor ``t`` hold the recorded result ``res`` of an in-place op.

    If ``t`` is a basic-slice view (``y[1:]``) of a tensor in the graph, the base is
    updated as well, as torch's CopySlices does: the base becomes index_put(base, key,
    res) (recorded, so the gradient of the overwritten part flows through res only) and
    ``t`` becomes the slice of the new base.  Views of views update the chain upwards.
    """
    vo = t.__dict__.get("_view_of")
    if vo is None:
        # the tensor now holds a new array: it takes that array's version counter (the old
        # array is unchanged; _inplace bumped its counter so a backward that saved it refuses)
        t._data, t._node, t._rg, t._version = res._data, res._node, res._rg, res._version
        return
    base, kind, arg, _ = vo
    if base._rg and base._node is None:
        raise RuntimeError("a view of a leaf tensor that requires grad is being used in an in-place "
                           "operation; wrap it in varlens.no_grad() or clone() the leaf first")
    if kind == "index":
        new_base = _setitem_op(base, arg, res)
    elif kind == "reshape":
        new_base = _reshape_op(res, tuple(base.shape))
    else:  # permute: undo the axis order
        inv = [0] * len(arg)
        for i, a in enumerate(arg):
            inv[a] = i
        new_base = _permute_op(res, tuple(inv))
    _commit(base, new_base)
    _rebind_view(t, base, kind, arg)


def _rebind_view(t, base, kind, arg):
    nv = (_getitem_op(base, arg) if kind == "index" else
          _reshape_op(base, arg) if kind == "reshape" else _permute_op(base, arg))
    t._data, t._node, t._rg = nv._data, nv._node, nv._rg
    t._version = base._version
    t.__dict__["_view_of"] = (base, kind, arg, base._data) if nv._data.base is not None else None


def _refresh(t, record):
    """A view whose base was replaced by a recorded in-place op (the base re-pointed at a new
    array) is re-derived from the base before it is changed in place, so the change starts
    from the base's current values (as torch's shared storage would)."""
    vo = t.__dict__.get("_view_of")
    if vo is None:
        return
    base, kind, arg, arr = vo
    _refresh(base, record)
    if base._data is arr:
        return
    if record:
        _rebind_view(t, base, kind, arg)
    else:   # outside autograd: only the array, so the NumPy write reaches the base
        b = base._data
        t._data = b[arg] if kind == "index" else b.reshape(arg) if kind == "reshape" else b.transpose(arg)
        t._version = base._version
        t.__dict__["_view_of"] = (base, kind, arg, b)


# ---------------------------------------------------------------- in place
def _inplace_from(name, fn):
    """``name_``: the out-of-place ``fn`` written back into this tensor (as the in-place ops
    in tensor.py: an array update outside autograd, a re-pointed result inside it)."""
    def method(self, *args, **kwargs):
        other_rg = any(isinstance(a, Tensor) and a._rg for a in args) or \
            any(isinstance(v, Tensor) and v._rg for v in kwargs.values())

        def arr(a):
            if not getattr(a.flags, "writeable", True):
                raise RuntimeError(f"{name}_: this tensor is a read-only view and cannot be changed in "
                                   "place; clone() it first")
            with _gm.no_grad():
                r = fn(Tensor._make(a), *args, **kwargs)
            if r._data.shape != a.shape:
                raise RuntimeError(f"{name}_: the result has shape {tuple(r._data.shape)}, not the "
                                   f"tensor's {tuple(a.shape)}")
            a[...] = r._data
        return _inplace(self, lambda: fn(self, *args, **kwargs), arr, other_rg)
    method.__name__ = name + "_"
    method.__doc__ = f"In-place {name}."
    return method


def _reshaping_inplace(name, fn):
    """``unsqueeze_``, ``t_``...: the tensor takes the new shape (a view of the same data)."""
    def method(self, *args):
        if self._node is None:  # a leaf stays a leaf: only its array takes the new shape
            with _gm.no_grad():
                self._data = fn(self, *args)._data
            return self
        res = fn(self, *args)
        self._data, self._node = res._data, res._node
        return self
    method.__name__ = name + "_"
    return method


def _random_fill(kind):
    def method(self, *args, generator=None):
        xp = _ns(self._data)
        g = generator_for(xp, generator)
        if kind == "exponential":
            lam = args[0] if args else 1.0
            return _random_(self, lambda s: -xp.log1p(-g.random(s)) / lam)
        lo, hi = (0, args[0]) if len(args) == 1 else ((args[0], args[1]) if args else (0, 2 ** 24))
        return _random_(self, lambda s: g.integers(lo, hi, s))
    method.__name__ = kind + "_"
    return method


@torch_args(tensor_first=True)
def _identity(input):  # noqa: A002
    """resolve_conj / resolve_neg / conj: real tensors have no lazy conjugate or negation bit."""
    return input


def _bfloat16_error(*_a, **_k):
    raise RuntimeError("bfloat16 is not supported: NumPy has no bfloat16 dtype, so varlens has none "
                       "(use .float() for float32 or .half() for float16)")


def _H(self):
    if self.ndim != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors), got a {self.ndim}-D tensor; "
                           "for batches of matrices use tensor.mH")
    return self.T


@torch_args(tensor_first=True)
def _o_trunc(input):  # noqa: A002
    return trunc(input)


def _torch_inplace(name):
    @torch_args(tensor_first=True)
    def f(input, *args, **kwargs):  # noqa: A002
        return getattr(_tensor(input, f"{name}_: input"), name + "_")(*args, **kwargs)
    f.__name__ = name + "_"
    return f


def _cmp_cast(name):
    def f(self, other):
        return cast(getattr(_compare, name)(self, other), self.dtype)
    return f


def _float_power_(self, exponent):
    if self.dtype != xp.dtype("float64"):
        raise RuntimeError(f"float_power_: the base has dtype {self.dtype} but the result is float64; "
                           "in-place float_power_ needs a float64 tensor (call .double() first)")
    return _inplace_from("float_power", float_power)(self, exponent)


def _bernoulli_method(self, p=None, *, generator=None):
    if p is None:
        return bernoulli(self, generator=generator)
    return Tensor._make((generator_for(_ns(self._data), generator).random(tuple(self.shape)) < p).astype(self.dtype))


def _rand_fill(kind):
    def method(self, *args, generator=None):
        xp = _ns(self._data)
        g = generator_for(xp, generator)
        if kind == "cauchy":
            med, sig = (list(args) + [0.0, 1.0][len(args):])[:2]
            return _random_(self, lambda s: med + sig * xp.tan(math.pi * (g.random(s) - 0.5)))
        if kind == "log_normal":
            mean, std = (list(args) + [1.0, 2.0][len(args):])[:2]
            return _random_(self, lambda s: xp.exp(g.normal(mean, std, s)))
        p = args[0] if args else 0.5
        if not 0 < p <= 1:
            raise RuntimeError(f"geometric_: p must be in (0, 1], got {p}")
        return _random_(self, lambda s: xp.floor(xp.log1p(-g.random(s)) / math.log1p(-p)) + 1 if p < 1
                             else xp.ones(s))
    method.__name__ = kind + "_"
    return method
