"""How a public function takes torch's arguments, declared at its definition.

``@torch_args(...)`` only sets one attribute on the function (``__torch_args__``); it adds no
wrapper and costs nothing per call.  varlens/_torch_args.py reads the mark (and the signature)
when the ``varlens.*`` namespace is built:

- ``tensor_first=True``: torch requires a Tensor as the first argument; a list, tuple or NumPy
  array there raises torch's TypeError ("argument 'input' (position 1) must be Tensor, not
  list") instead of being computed on.
- ``first``: torch's name of that first argument in the message (``where``: "condition").
- ``names``: torch's names of the positional arguments, in order, where they differ from the
  signature's (``None`` keeps a position's own name); the signature's generic
  ``input``/``other`` aliases are then not added.
- ``wrap=False``: the function is bound as it is, without the keyword-alias wrapper
  (``varlens.tensor``, ``varlens.load``, ...: called often, or with nothing to alias).

Aliases of one function object (``absolute = abs``) share its mark, as torch's aliases share
its argument rules.  Imports nothing.
"""
from __future__ import annotations


class ArgRule(tuple):
    """(tensor_first, first, names, wrap): the rule one ``@torch_args`` declares."""
    __slots__ = ()

    def __new__(cls, tensor_first=False, first="input", names=None, wrap=True):
        return tuple.__new__(cls, (bool(tensor_first), first, None if names is None else tuple(names), bool(wrap)))

    tensor_first = property(lambda r: r[0])
    first = property(lambda r: r[1])
    names = property(lambda r: r[2])
    wrap = property(lambda r: r[3])


def torch_args(*, tensor_first=False, first="input", names=None, wrap=True):
    """Mark a function with how torch takes its arguments (see the module docstring)."""
    rule = ArgRule(tensor_first, first, names, wrap)

    def mark(fn):
        fn.__torch_args__ = rule
        return fn
    return mark


def rule_of(fn):
    """The ArgRule a function was marked with, or None."""
    return getattr(fn, "__torch_args__", None)
