"""Keyword aliases that PyTorch's argument parser accepts, added at the API surface.

torch accepts NumPy's spellings ``axis=`` (for ``dim``) and ``keepdims=`` (for
``keepdim``), and names arguments that varlens functions spell differently or take as
``*args``: ``size=`` (zeros/ones/rand/...), ``shape=`` (reshape/view), ``dims=``
(permute), ``input=``/``other=``/``exponent=``/``condition=``.  ``wrap_namespace`` and
``wrap_methods`` (called once by varlens/_surface.py) wrap each public varlens function and
Tensor method whose signature differs from torch's in one of these ways.

This module is only the mechanism: it reads each function's signature and the rule declared at
its definition with ``@torch_args(...)`` (varlens/core/arg_rules.py: torch requires a Tensor
first, torch's names of the positions, or "bind as is").  It holds no list of function names
(tests/test_layering.py checks that).  The wrapper only looks at the keywords when some were
given, so a call without keywords costs one extra Python call and nothing else; operators
(``x + y``) are never wrapped.
"""
from __future__ import annotations

import builtins
import functools
import inspect

from varlens.core.arg_rules import ArgRule, rule_of

# varlens' generic names of a second operand, which take torch's other=/exponent=
_SECOND = ("b", "y", "o", "x2", "other_", "e")
# names torch gives to the *args of a variadic function
_VAR_NAMES = ("size", "shape", "dims", "sizes")
_NO_RULE = ArgRule()


def _type_name(v):
    from varlens.ops.pointwise import type_name
    return type_name(v)


def _bad_first(where, argname, v):
    raise TypeError(f"{where}(): argument '{argname}' (position 1) must be Tensor, not {_type_name(v)} "
                    f"(wrap data with varlens.tensor(...) or varlens.from_numpy(...) first)")


def _wrap_checked(fn, plan, name, argname):
    """Like _wrap, and the first argument must not be a list, tuple or ndarray (one type test)."""
    import numpy as np
    bad = (list, tuple, np.ndarray)
    first = _first_param(fn)
    inner = _wrap(fn, plan, f"varlens.{name}") if plan is not None else fn

    @functools.wraps(fn)
    def w(*args, **kwargs):
        if args:
            if args[0].__class__ in bad:
                _bad_first(name, argname, args[0])
            if not kwargs:
                return fn(*args)  # the common call: one wrapper level, one type test
        elif kwargs:
            v = kwargs.get(argname, kwargs.get(first))
            if v.__class__ in bad:
                _bad_first(name, argname, v)
        return inner(*args, **kwargs)
    w.__wrapped_torch_args__ = True
    return w


def _first_param(fn):
    try:
        ps = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    return ps[0] if ps else None


def _plan(fn, method, rule=_NO_RULE):
    """(renames, var_name, n_before_var, names before *args, takes_out) for fn, or None when
    no alias applies.  ``rule``: the function's @torch_args mark (varlens/core/arg_rules.py)."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    names = [p.name for p in params]
    pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kw_ok = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    var = next((p for p in params if p.kind == p.VAR_POSITIONAL), None)
    ren = {}
    if "dim" in kw_ok and "axis" not in names:
        ren["axis"] = "dim"
    if "keepdim" in kw_ok and "keepdims" not in names:
        ren["keepdims"] = "keepdim"
    over = rule.names
    if over is not None:
        for alias, p in zip(over, pos):
            if alias is not None and alias != p and alias not in names and p in kw_ok:
                ren[alias] = p
    else:
        # function: input is the first argument; function and method: other/exponent the second
        if not method and pos and pos[0] != "input" and "input" not in names and pos[0] in kw_ok:
            ren["input"] = pos[0]
        if len(pos) > 1 and pos[1] in kw_ok:  # only varlens' generic names of a second operand
            if "other" not in names and pos[1] in _SECOND:
                ren["other"] = pos[1]
            if "exponent" not in names and pos[1] in ("e", "exp"):
                ren["exponent"] = pos[1]
    var_name = None
    n_before = 0
    if var is not None:
        n_before = [p.kind for p in params].index(var.kind)
        var_name = var.name
    takes_out = "out" in names or any(p.kind == p.VAR_KEYWORD for p in params)
    if not ren and var is None and (method or takes_out):
        return None
    return ren, var_name, n_before, names[:n_before], takes_out or method


def _wrap(fn, plan, where):
    ren, var_name, n_before, before_names, takes_out = plan
    # the keywords that need work (an alias to rename, out= the function does not take, a
    # variadic's name or a parameter before *args): a call whose keywords are all outside this
    # set (split(128, dim=2), multinomial(p, num_samples=1)) goes straight through
    special = frozenset(ren) | ({"out"} if not takes_out else set())
    if var_name is not None:
        special |= frozenset(_VAR_NAMES + (var_name,) + tuple(before_names))

    @functools.wraps(fn)
    def w(*args, **kwargs):
        if kwargs:
            if special.isdisjoint(kwargs):
                d = kwargs.get("dim")
                if d is not None and d.__class__ is not int and isinstance(d, builtins.float):
                    _float_dim(where, d)
                return fn(*args, **kwargs)
            if not takes_out and "out" in kwargs:
                out = kwargs.pop("out")
                if out is not None:
                    args, kwargs = _fix(args, kwargs, ren, var_name, n_before, before_names, where)
                    return _write_out(where, fn, args, kwargs, out)
            args, kwargs = _fix(args, kwargs, ren, var_name, n_before, before_names, where)
        return fn(*args, **kwargs)
    w.__wrapped_torch_args__ = True
    return w


def _float_dim(where, d):
    raise TypeError(f"{where}(): argument 'dim' must be an int or a tuple of ints, not float ({d!r})")


def _fix(args, kwargs, ren, var_name, n_before, before_names, where):
    for k in [k for k in kwargs if k in ren]:
        tgt = ren[k]
        if tgt in kwargs:
            raise TypeError(f"{where}() got both {k!r} and {tgt!r} (aliases of the same argument)")
        kwargs[tgt] = kwargs.pop(k)
    d = kwargs.get("dim")
    if d is not None and isinstance(d, builtins.float):
        _float_dim(where, d)
    if var_name is not None:
        given = [k for k in dict.fromkeys(_VAR_NAMES + (var_name,)) if k in kwargs]
        if given or any(n in kwargs for n in before_names):
            args = list(args)
            for i in range(len(args), n_before):  # parameters before *args given by keyword
                n = before_names[i]
                if n not in kwargs:
                    raise TypeError(f"{where}() missing required argument {n!r}")
                args.append(kwargs.pop(n))
            if given:
                if len(given) > 1 or len(args) > n_before:
                    raise TypeError(f"{where}() got {given[0]!r} both by keyword and positionally")
                v = kwargs.pop(given[0])
                args.append(v if isinstance(v, (tuple, list)) else (v,))
            args = tuple(args)
    return args, kwargs


def _write_out(where, fn, args, kwargs, out):
    """torch's out=: compute, then store the result in the given tensor(s) and return them."""
    import numpy as np

    from varlens.core.grad_mode import is_grad_enabled, no_grad
    from varlens.core.tensor import Tensor
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"{where}(): argument 'out' must be a Tensor (or a tuple of Tensors), "
                            f"not {type(o).__name__}")
    res = fn(*args, **kwargs)
    ress = tuple(res) if isinstance(out, (tuple, list)) else (res,)
    if len(ress) != len(outs):
        raise TypeError(f"{where}(): out= got {len(outs)} tensors for {len(ress)} results")
    if is_grad_enabled() and any(isinstance(r, Tensor) and r.requires_grad for r in ress) or \
            any(o.requires_grad for o in outs) and is_grad_enabled():
        raise RuntimeError(f"{where}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    with no_grad():
        for o, r in zip(outs, ress):
            a = r._data if isinstance(r, Tensor) else np.asarray(r)
            if not np.can_cast(a.dtype, o._data.dtype, casting="same_kind"):
                raise RuntimeError(f"{where}(): result type {a.dtype} can't be cast to the desired output "
                                   f"type {o._data.dtype} (out=)")
            if a.shape == o._data.shape and o._data.flags.writeable:
                o._data[...] = a
                o._version[0] += 1
            else:  # torch resizes out to the result's shape
                o._data = a.astype(o._data.dtype, copy=True)
    return out


def wrap_namespace(namespace, names=None):
    """Wrap the functions of ``namespace`` (a module dict) in place: torch's keyword names
    (axis=, keepdims=, input=, other=, ...) are accepted, and a function marked
    ``@torch_args(tensor_first=True)`` refuses a list/tuple/ndarray first argument.  A function
    marked ``wrap=False`` is left as it is.  Returns how many were wrapped."""
    count = 0
    import varlens.nn.functional as F  # called at the end of varlens/__init__.py: F is loaded by then
    keep = {id(v) for v in vars(F).values() if inspect.isfunction(v)}  # varlens.conv2d is F.conv2d
    for name in list(names if names is not None else namespace):
        if name.startswith("_"):
            continue
        fn = namespace.get(name)
        if not inspect.isfunction(fn) or getattr(fn, "__wrapped_torch_args__", False):
            continue
        if (fn.__module__ or "").startswith("varlens.nn") or id(fn) in keep:
            continue  # re-exported nn.functional ops stay the same objects (varlens.conv2d is F.conv2d)
        rule = rule_of(fn) or _NO_RULE
        if not rule.wrap:
            continue
        plan = _plan(fn, method=False, rule=rule)
        if rule.tensor_first:
            namespace[name] = _wrap_checked(fn, plan, name, rule.first)
            count += 1
        elif plan is not None:
            namespace[name] = _wrap(fn, plan, f"varlens.{name}")
            count += 1
    return count


def wrap_methods(methods):
    """The Tensor methods among ``methods`` (name -> attribute) that take keyword aliases, wrapped;
    the method table (varlens/_surface.py) attaches them."""
    out = {}
    for name, fn in methods.items():
        if name.startswith("_") or not inspect.isfunction(fn) or getattr(fn, "__wrapped_torch_args__", False):
            continue
        rule = rule_of(fn) or _NO_RULE
        plan = _plan(fn, method=True, rule=rule) if rule.wrap else None
        if plan is not None:
            out[name] = _wrap(fn, plan, f"Tensor.{name}")
    return out
