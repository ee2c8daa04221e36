"""torch.nn.utils.parametrize: make ``module.<name>`` the output of a module applied to stored
original tensors (PyTorch's design: the module's class is swapped for a subclass with a
property ``<name>``; the originals live in ``module.parametrizations[<name>]``).

Reading the property runs the parametrizations forward with ordinary differentiable ops,
so the gradient reaches the originals by the chain rule.  Assigning to it runs each
parametrization's ``right_inverse`` (in reverse order) and copies the result into the
originals.
"""
from __future__ import annotations

import contextlib

from varlens.core.grad_mode import no_grad
from varlens.nn.container import ModuleDict, ModuleList
from varlens.nn.module import Module
from varlens.nn.parameter import Parameter
from varlens.core.tensor import Tensor

__all__ = ["ParametrizationList", "register_parametrization", "remove_parametrizations", "is_parametrized",
           "type_before_parametrizations", "cached", "transfer_parametrizations_and_params"]

_cache_enabled = 0
_cache = {}


@contextlib.contextmanager
def cached():
    """Within this context each parametrized tensor is computed once and reused."""
    global _cache_enabled
    _cache_enabled += 1
    try:
        yield
    finally:
        _cache_enabled -= 1
        if not _cache_enabled:
            _cache.clear()


def _set_original(orig, value):
    """Copy ``value`` into the original tensor in place (PyTorch's ``set_``: the shape may change)."""
    v = value._data if isinstance(value, Tensor) else value
    if orig._data.shape == v.shape:
        orig._data[...] = v
    else:
        orig._data = v.astype(orig._data.dtype, copy=True)
    orig._version[0] += 1


class ParametrizationList(ModuleList):
    """The parametrizations of one tensor, applied in order, and the original tensor(s):
    ``original`` or ``original0``, ``original1``, ... when the first right_inverse returns several."""

    def __init__(self, modules, original, unsafe=False):
        if len(modules) == 0:
            raise ValueError("ParametrizationList requires one or more modules")
        super().__init__(modules)
        self.unsafe = unsafe
        with no_grad():
            new = original
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    new = m.right_inverse(new)
        as_param = isinstance(original, Parameter)
        rg = original.requires_grad
        if isinstance(new, Tensor):
            self.is_tensor, self.ntensors = True, 1
            _set_original(original, new)
            self._register("original", original, as_param)
        else:
            new = tuple(new)
            self.is_tensor, self.ntensors = False, len(new)
            for i, t in enumerate(new):
                arr = t._data.copy()
                self._register(f"original{i}", Parameter(arr, requires_grad=rg) if as_param else Tensor._make(arr),
                               as_param)
        if not unsafe:
            z = self()
            if not isinstance(z, Tensor):
                raise ValueError(f"A parametrization must return a tensor. Got {type(z).__name__}.")
            if tuple(z.shape) != tuple(original.shape) or z.dtype != original.dtype:
                raise ValueError(f"Registering a parametrization may not change the shape or dtype of the tensor "
                                 f"(unsafe=False): unparametrized {tuple(original.shape)} {original.dtype}, "
                                 f"parametrized {tuple(z.shape)} {z.dtype}")

    def _register(self, name, t, as_param):
        if as_param:
            self.register_parameter(name, t)
        else:
            self.register_buffer(name, t)

    def right_inverse(self, value):
        """Set the originals so that this list's output is ``value``."""
        with no_grad():
            for m in reversed(list(self)):
                if hasattr(m, "right_inverse"):
                    value = m.right_inverse(value)
                elif not self.unsafe:
                    raise RuntimeError(f"parametrization {type(m).__name__} does not implement right_inverse")
            if self.is_tensor:
                if not isinstance(value, Tensor):
                    raise ValueError(f"`right_inverse` should return a tensor. Got {type(value).__name__}")
                _set_original(self.original, value)
            else:
                value = tuple(value)
                if len(value) != self.ntensors:
                    raise ValueError(f"'right_inverse' must return a sequence of tensors of length {self.ntensors}, "
                                     f"got {len(value)}")
                for i, t in enumerate(value):
                    _set_original(getattr(self, f"original{i}"), t)

    def forward(self):
        mods = list(self)
        if self.is_tensor:
            x = mods[0](self.original)
        else:
            x = mods[0](*(getattr(self, f"original{i}") for i in range(self.ntensors)))
        for m in mods[1:]:
            x = m(x)
        return x


def _get_parametrized(module, name):
    plist = module.parametrizations[name]
    if _cache_enabled:
        key = (id(module), name)
        t = _cache.get(key)
        if t is None:
            t = _cache[key] = plist()
        return t
    return plist()


def _inject_new_class(module):
    cls = module.__class__

    def __setattr__(self, name, value):
        p = self.__dict__.get("_modules", {}).get("parametrizations")
        if p is not None and name in p._modules:
            p._modules[name].right_inverse(value)
            return
        cls.__setattr__(self, name, value)

    def __getstate__(self):
        raise RuntimeError("Serialization of parametrized modules is only supported through state_dict().")

    module.__class__ = type(f"Parametrized{cls.__name__}", (cls,),
                            {"__setattr__": __setattr__, "__getstate__": __getstate__, "__module__": cls.__module__})


def _inject_property(module, name):
    setattr(module.__class__, name, property(lambda self: _get_parametrized(self, name)))


def is_parametrized(module, tensor_name=None):
    """True if ``module`` has a parametrization (on ``tensor_name``, if given)."""
    p = module.__dict__.get("_modules", {}).get("parametrizations")
    if p is None or not isinstance(p, ModuleDict):
        return False
    return len(p) > 0 if tensor_name is None else tensor_name in p._modules


def type_before_parametrizations(module):
    return module.__class__.__bases__[0] if is_parametrized(module) else type(module)


def register_parametrization(module, tensor_name, parametrization, *, unsafe=False):
    """Make ``module.<tensor_name>`` equal ``parametrization(original)``; a second call on the same
    name chains the new parametrization after the first."""
    if not isinstance(parametrization, Module):
        raise TypeError(f"register_parametrization: parametrization must be an nn.Module, got "
                        f"{type(parametrization).__name__}")
    parametrization.train(module.training)
    if is_parametrized(module, tensor_name):
        plist = module.parametrizations[tensor_name]
        if not unsafe:
            y = getattr(module, tensor_name)
            x = parametrization(y)
            if tuple(x.shape) != tuple(y.shape) or x.dtype != y.dtype:
                raise ValueError(f"Registering a parametrization may not change the shape or dtype of the tensor "
                                 f"(unsafe=False): {tuple(y.shape)} {y.dtype} became {tuple(x.shape)} {x.dtype}")
        plist.append(parametrization)
        plist.unsafe |= unsafe
    elif tensor_name in module._parameters or tensor_name in module._buffers:
        original = module._parameters.get(tensor_name)
        if original is None:
            original = module._buffers.get(tensor_name)
        if original is None:
            raise ValueError(f"register_parametrization: {tensor_name!r} is None in {type(module).__name__}")
        plist = ParametrizationList([parametrization], original, unsafe=unsafe)
        delattr(module, tensor_name)
        if not is_parametrized(module):
            _inject_new_class(module)
            module.parametrizations = ModuleDict()
        _inject_property(module, tensor_name)
        module.parametrizations[tensor_name] = plist
    else:
        raise ValueError(f"Module '{type(module).__name__}' does not have a parameter, a buffer, or a parametrized "
                         f"element with name '{tensor_name}'")
    return module


def remove_parametrizations(module, tensor_name, leave_parametrized=True):
    """Undo register_parametrization: ``<tensor_name>`` becomes a plain parameter again, holding the
    current parametrized value (``leave_parametrized=True``) or the original."""
    if not is_parametrized(module, tensor_name):
        raise ValueError(f"Module {type(module).__name__} does not have a parametrization on {tensor_name}")
    plist = module.parametrizations[tensor_name]
    if plist.is_tensor:
        original = plist.original
        if leave_parametrized:
            with no_grad():
                t = getattr(module, tensor_name)
            _set_original(original, t)
    else:
        if not leave_parametrized:
            raise ValueError("Cannot leave unparametrized (`leave_parametrized=False`) a tensor that is "
                             "parametrized in terms of a sequence of tensors.")
        with no_grad():
            t = getattr(module, tensor_name)
        was_param = isinstance(plist.original0, Parameter)
        original = Parameter(t._data.copy(), requires_grad=plist.original0.requires_grad) if was_param else \
            Tensor._make(t._data.copy())
    delattr(module.__class__, tensor_name)
    del module.parametrizations[tensor_name]
    if isinstance(original, Parameter):
        module.register_parameter(tensor_name, original)
    else:
        module.register_buffer(tensor_name, original)
    if not is_parametrized(module):
        del module._modules["parametrizations"]
        module.__class__ = module.__class__.__bases__[0]
    return module


def transfer_parametrizations_and_params(from_module, to_module, tensor_name=None):
    """Copy the parametrizations (and their originals) of ``from_module`` onto ``to_module``."""
    if not is_parametrized(from_module):
        raise ValueError(f"transfer_parametrizations_and_params: {type(from_module).__name__} is not parametrized")
    names = list(from_module.parametrizations._modules) if tensor_name is None else [tensor_name]
    for name in names:
        src = from_module.parametrizations[name]
        if not is_parametrized(to_module, name):
            if name not in to_module._parameters and name not in to_module._buffers:
                to_module.register_parameter(name, Parameter(getattr(from_module, name)._data.copy()))
            for m in src:
                register_parametrization(to_module, name, m, unsafe=True)
        dst = to_module.parametrizations[name]
        for k in ("original",) + tuple(f"original{i}" for i in range(src.ntensors)):
            if hasattr(src, k) and hasattr(dst, k) and getattr(src, k) is not None:
                _set_original(getattr(dst, k), getattr(src, k))
    return to_module
