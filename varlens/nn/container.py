"""Containers: Sequential, ModuleList, ModuleDict, ParameterList, ParameterDict."""
from __future__ import annotations

import operator
from collections import OrderedDict
from collections.abc import Mapping

from varlens.nn.module import Module
from varlens.nn.parameter import Parameter
from varlens.nn.module import _addindent


def _index(idx, n, what):
    idx = operator.index(idx)
    if not -n <= idx < n:
        raise IndexError(f"{what}: index {idx} is out of range for {n} modules")
    return idx % n


class Sequential(Module):
    """Modules applied one after another: ``Sequential(m0, m1, ...)`` or ``Sequential(OrderedDict(...))``."""

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], (OrderedDict, dict)):
            for k, m in args[0].items():
                self.add_module(k, m)
        else:
            for i, m in enumerate(args):
                self.add_module(str(i), m)

    def forward(self, input):
        for m in self._modules.values():
            input = m(input)
        return input

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return Sequential(OrderedDict(list(self._modules.items())[idx]))
        keys = list(self._modules)
        return self._modules[keys[_index(idx, len(keys), "Sequential")]]

    def __setitem__(self, idx, module):
        keys = list(self._modules)
        setattr(self, keys[_index(idx, len(keys), "Sequential")], module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        if isinstance(idx, slice):
            for k in keys[idx]:
                del self._modules[k]
        else:
            del self._modules[keys[_index(idx, len(keys), "Sequential")]]
        # renumber so indices stay 0..n-1, as PyTorch does
        items = list(self._modules.values())
        if all(k.isdigit() for k in self._modules):
            self._modules.clear()
            for i, m in enumerate(items):
                self._modules[str(i)] = m

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        n = len(items)
        if not -n <= index <= n:
            raise IndexError(f"Sequential.insert: index {index} out of range for {n} modules")
        items.insert(index % (n + 1) if index >= 0 else index + n, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m
        return self

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise TypeError("Sequential + expects another Sequential")
        return Sequential(*list(self), *list(other))


class ModuleList(Module):
    """A list of modules, registered so their parameters are found (no forward of its own)."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return ModuleList(list(self._modules.values())[idx])
        return self._modules[str(_index(idx, len(self), "ModuleList"))]

    def __setitem__(self, idx, module):
        setattr(self, str(_index(idx, len(self), "ModuleList")), module)

    def __delitem__(self, idx):
        items = list(self._modules.values())
        if isinstance(idx, slice):
            del items[idx]
        else:
            del items[_index(idx, len(items), "ModuleList")]
        self._modules.clear()
        for i, m in enumerate(items):
            self._modules[str(i)] = m

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        items = list(self._modules.values())
        items.insert(index, module)
        self._modules.clear()
        for i, m in enumerate(items):
            self.add_module(str(i), m)

    def __iadd__(self, modules):
        return self.extend(modules)

    def __repr__(self):
        """As PyTorch's: runs of identical children print once, as ``(0-2): 3 x Linear(...)``."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []                      # [first index, last index, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2) for a, b, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleList has no forward; iterate over it in your own forward")


class _DictOfTable:
    """The read side of a dict whose entries live in one of the Module's tables (``_table``
    names it): ModuleDict and ParameterDict share it; each sets how an entry is added."""

    _table = "_modules"

    def _entries(self):
        return self.__dict__[self._table]

    def __getitem__(self, key):
        return self._entries()[key]

    def __delitem__(self, key):
        del self._entries()[key]

    def __len__(self):
        return len(self._entries())

    def __iter__(self):
        return iter(self._entries())

    def __contains__(self, key):
        return key in self._entries()

    def keys(self):
        return self._entries().keys()

    def values(self):
        return self._entries().values()

    def items(self):
        return self._entries().items()

    def pop(self, key):
        return self._entries().pop(key)

    def clear(self):
        self._entries().clear()

    def update(self, entries):
        for k, v in (entries.items() if hasattr(entries, "items") else entries):
            self[k] = v


class ModuleDict(_DictOfTable, Module):
    """A dict of modules (insertion-ordered), registered under their keys."""

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def forward(self, *args, **kwargs):
        raise NotImplementedError("ModuleDict has no forward; index it in your own forward")


class ParameterList(Module):
    """A list of Parameters, registered under '0', '1', ..."""

    def __init__(self, values=None):
        super().__init__()
        for v in values or ():
            self.append(v)

    def __len__(self):
        return len(self._parameters)

    def __iter__(self):
        return iter(self._parameters.values())

    def __getitem__(self, idx):
        return self._parameters[str(_index(idx, len(self), "ParameterList"))]

    def __setitem__(self, idx, p):
        self.register_parameter(str(_index(idx, len(self), "ParameterList")), _as_param(p))

    def append(self, p):
        self.register_parameter(str(len(self)), _as_param(p))
        return self

    def extend(self, ps):
        for p in ps:
            self.append(p)
        return self

    def extra_repr(self):
        return _param_lines(self._parameters.items(), lambda p: f"varlens.{p.dtype}")


class ParameterDict(_DictOfTable, Module):
    """A dict of Parameters."""

    _table = "_parameters"

    def __init__(self, parameters=None):
        super().__init__()
        if parameters is not None:
            self.update(parameters)

    def __setitem__(self, key, p):
        self.register_parameter(key, _as_param(p))

    def update(self, parameters):
        """As PyTorch's: the entries of a plain dict are added in sorted key order (an OrderedDict,
        a ParameterDict or a sequence of pairs keeps its order), which fixes parameters() order."""
        if isinstance(parameters, Mapping) and not isinstance(parameters, (OrderedDict, ParameterDict)):
            parameters = sorted(parameters.items())
        super().update(parameters)

    def extra_repr(self):
        return _param_lines(self.items(), lambda p: _typename(p))


def _typename(p):
    """torch.typename's legacy tensor-type name, under varlens's prefix (varlens.FloatTensor...)."""
    return "varlens." + _LEGACY.get(str(p.dtype), str(p.dtype) + "Tensor")


_LEGACY = {"float32": "FloatTensor", "float64": "DoubleTensor", "float16": "HalfTensor", "int64": "LongTensor",
           "int32": "IntTensor", "int16": "ShortTensor", "int8": "CharTensor", "uint8": "ByteTensor",
           "bool": "BoolTensor"}


def _param_lines(items, type_of):
    """PyTorch's ParameterList/ParameterDict body: one '(key): Parameter containing: [...]' line each."""
    lines = []
    for k, p in items:
        kind = "Parameter" if isinstance(p, Parameter) else "Tensor"
        size = "x".join(str(d) for d in p.shape)
        lines.append(f"  ({k}): {kind} containing: [{type_of(p)} of size {size}]")
    return "\n".join(lines)


def _as_param(p):
    return p if isinstance(p, Parameter) else Parameter(p)
