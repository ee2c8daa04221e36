"""torch.nn.utils.stateless.functional_call: run a module with some parameters/buffers replaced
by given tensors (the module's own are put back afterwards), so gradients flow to the given
tensors."""
from __future__ import annotations

from varlens.core.tensor import Tensor

__all__ = ["functional_call"]


def _owner(module, name):
    *path, leaf = name.split(".")
    m = module
    for p in path:
        sub = m._modules.get(p)
        if sub is None:
            raise AttributeError(f"functional_call: {type(m).__name__} has no submodule {p!r} (in {name!r})")
        m = sub
    return m, leaf


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True,
                    strict=False):
    dicts = parameters_and_buffers
    if isinstance(dicts, dict):
        dicts = (dicts,)
    merged = {}
    for d in dicts:
        for k, v in d.items():
            if k in merged:
                raise ValueError(f"functional_call: {k!r} appeared in multiple dictionaries")
            merged[k] = v
    if strict:
        names = {n for n, _ in module.named_parameters()} | {n for n, _ in module.named_buffers()}
        missing, unexpected = sorted(names - set(merged)), sorted(set(merged) - names)
        if missing or unexpected:
            raise RuntimeError(f"functional_call: strict=True and missing keys {missing}, unexpected keys "
                               f"{unexpected}")
    saved = []
    try:
        for name, value in merged.items():
            if not isinstance(value, Tensor):
                raise TypeError(f"functional_call: {name!r} must be a Tensor, got {type(value).__name__}")
            m, leaf = _owner(module, name)
            for store in ("_parameters", "_buffers"):
                table = m.__dict__[store]
                if leaf in table:
                    saved.append((table, leaf, table[leaf]))
                    table[leaf] = value
                    break
            else:
                raise AttributeError(f"functional_call: {type(m).__name__} has no parameter or buffer {leaf!r} "
                                     f"(in {name!r})")
        if args is None:
            args = ()
        elif not isinstance(args, tuple):
            args = (args,)
        return module(*args, **(kwargs or {}))
    finally:
        for table, leaf, old in reversed(saved):
            table[leaf] = old
