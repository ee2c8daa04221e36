"""Optimizer: the base class every varlens optimiser derives from (PyTorch's API and format).

An optimiser holds ``param_groups`` (a list of dicts: ``'params'`` plus that group's
hyperparameters, filled from ``defaults``) and ``state`` (a dict keyed by parameter holding
whatever the method keeps per weight: momentum buffers, running averages, step counts).

Updates run on the raw arrays (``p._data``) with in-place operations of the parameter's array
library (NumPy, or the CUDA device's: state arrays live on the parameter's device, and a step
reads no device value on the host), outside the autograd graph, and bump each parameter's version counter so a backward that saved the old
value refuses to run (as PyTorch does).  ``state_dict()`` uses PyTorch's layout: state keyed
by the parameter's integer position (counted across groups in order), groups with their
``'params'`` given as lists of those positions.
"""
from __future__ import annotations

import copy
import functools
import numbers
import warnings
from collections import defaultdict
from collections.abc import Callable
from itertools import chain

from varlens.core import array as B
from varlens.core import dtypes as DT
from varlens.core import grad_mode as _gm
from varlens.core.tensor import Tensor

__all__ = ["Optimizer", "required", "register_optimizer_step_pre_hook",
           "register_optimizer_step_post_hook"]


class _Required:
    """Marks a hyperparameter with no default (it must be given, in the constructor or the group)."""

    def __repr__(self):
        return "<required parameter>"


required = _Required()


def _check_range(owner, name, value, lo=None, hi=None, lo_open=False, hi_open=False, what=""):
    """Raise a ValueError naming ``owner``'s argument ``name`` unless lo <= value < hi (as asked)."""
    if isinstance(value, Tensor):
        value = value.item()
    if not isinstance(value, numbers.Real) or isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be a real number, got {type(value).__name__} ({value!r})")
    bad = value != value
    if lo is not None:
        bad = bad or (value <= lo if lo_open else value < lo)
    if hi is not None:
        bad = bad or (value >= hi if hi_open else value > hi)
    if bad:
        lo_s = "" if lo is None else f"{'>' if lo_open else '>='} {lo}"
        hi_s = "" if hi is None else f"{'<' if hi_open else '<='} {hi}"
        rng = " and ".join(s for s in (lo_s, hi_s) if s)
        raise ValueError(f"{owner}: {name} must be {rng}{what}, got {value!r}")


def _check_betas(owner, betas):
    if not isinstance(betas, (tuple, list)) or len(betas) != 2:
        raise ValueError(f"{owner}: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, b in enumerate(betas):
        _check_range(owner, f"betas[{i}]", b, 0.0, 1.0, hi_open=True)


def _check_adam_group(owner, group):
    """The checks Adam and its variants share: betas in [0, 1), eps >= 0, weight_decay >= 0."""
    _check_betas(owner, group["betas"])
    _check_range(owner, "eps", group["eps"], 0.0)
    _check_range(owner, "weight_decay", group["weight_decay"], 0.0)


def _no_differentiable(owner, differentiable):
    """Refuse ``differentiable=True``: varlens's updates run on raw arrays outside the graph."""
    if differentiable:
        raise ValueError(f"{owner}: differentiable=True is not supported in varlens (updates run "
                         "on raw arrays outside the graph)")


class _MissingParamsError(ValueError, KeyError):
    """A parameter group without 'params': a ValueError, and the KeyError PyTorch raises."""

    def __str__(self):  # the message itself, not KeyError's quoted repr
        return str(self.args[0]) if self.args else ""


class Optimizer:
    """Base class of all optimisers.

    Args:
        params: an iterable of Tensors (usually ``model.parameters()``), or an iterable of
            dicts, each a parameter group: ``{'params': [...], 'lr': 0.1, ...}``; a key left
            out of a group takes its value from ``defaults``.
        defaults: the default hyperparameters of every group.

    Subclasses implement ``step``; one that loops with ``_params_with_grad`` fills a new
    parameter's state in ``_init_param_state``.
    """

    # per-parameter state arrays have the parameter's shape (checked on load); LBFGS's don't
    _state_like_params = True
    # _params_with_grad keeps a step count in state['step'] (Muon's state has none)
    _counts_steps = True
    # hyperparameters that _validate_group checks are >= 0 (after lr), in this order
    _nonnegative = ()
    # PyTorch's type aliases for step hooks: hook(optimizer, args, kwargs)
    OptimizerPreHook = OptimizerPostHook = Callable

    @staticmethod
    def profile_hook_step(func):
        """PyTorch decorates ``step`` with this; varlens runs the hooks around every subclass's
        ``step`` already, so it returns ``func`` unchanged."""
        return func

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        if "step" in cls.__dict__:
            cls.step = _with_hooks(cls.__dict__["step"])

    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        self._step_pre_hooks = {}
        self._step_post_hooks = {}
        self._opt_called = False
        name = type(self).__name__
        if isinstance(params, Tensor):
            raise TypeError(
                f"{name}: params must be an iterable of Tensors or of dicts (parameter groups), "
                "got a single Tensor; wrap it in a list: [tensor]")
        if isinstance(params, (set, frozenset)) or isinstance(params, dict):
            raise TypeError(
                f"{name}: params must be an ordered collection (a list, a tuple or a generator), "
                f"got a {type(params).__name__}; its order would change between runs and so would "
                "the meaning of a saved state_dict")
        try:
            params = iter(params)
        except TypeError:
            raise TypeError(f"{name}: params must be an iterable of Tensors or of dicts (parameter "
                            f"groups), e.g. model.parameters(), got {type(params).__name__}") from None
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError(f"{name}: optimizer got an empty parameter list (params=[]); pass the "
                             "tensors to optimise, e.g. model.parameters()")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for group in param_groups:
            self.add_param_group(group)

    # ------------------------------------------------------------------ groups
    def add_param_group(self, param_group):
        """Add a group of parameters (a dict with ``'params'`` and optional hyperparameters)."""
        name = type(self).__name__
        if not isinstance(param_group, dict):
            raise TypeError(f"{name}.add_param_group: param_group must be a dict, "
                            f"got {type(param_group).__name__}")
        if "params" not in param_group:
            raise _MissingParamsError(f"'params' ({name}.add_param_group: the group has no 'params' key; "
                                      f"keys: {sorted(param_group)})")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise TypeError(f"{name}: parameters in a group must be an ordered collection (list or "
                            "tuple), got a set")
        else:
            params = list(params)
        names = None
        if params and isinstance(params[0], tuple) and len(params[0]) == 2:
            names = [n for n, _ in params]          # named parameters, as model.named_parameters()
            params = [p for _, p in params]
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise TypeError(f"{name}: can only optimize Tensors, but params[{i}] is a "
                                f"{type(p).__name__}")
            if p._node is not None:
                raise ValueError(f"{name}: can't optimize a non-leaf Tensor (params[{i}] has grad_fn="
                                 f"{type(p._node).__name__}); optimise the leaf it was computed from, "
                                 "or call .detach().requires_grad_() on it")
            if p._data.dtype.kind != "f":
                raise TypeError(f"{name}: can only optimize floating-point Tensors, but params[{i}] has "
                                f"dtype {p._data.dtype}")
        group = dict(param_group)
        group["params"] = params
        if names is not None:
            group["param_names"] = names
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise ValueError(f"{name}: parameter group didn't specify a value of required "
                                 f"optimization parameter {k}")
            group.setdefault(k, v)
        seen = set()
        for g in self.param_groups:
            seen.update(id(p) for p in g["params"])
        if len({id(p) for p in params}) != len(params):
            # PyTorch warns and keeps both entries (each is stepped); some scripts rely on it
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in future, this will "
                          f"cause an error ({name}: a parameter appears more than once in the same group)",
                          UserWarning, stacklevel=3)
        if any(id(p) in seen for p in params):
            raise ValueError(f"{name}: some parameters appear in more than one parameter group")
        self._validate_group(group)
        self.param_groups.append(group)

    def _validate_group(self, group):
        """Check a group's hyperparameters (subclasses extend; the base checks lr and the
        names in ``_nonnegative``)."""
        name = type(self).__name__
        lr = group.get("lr")
        if isinstance(lr, Tensor):               # a 0-d tensor lr is kept as a Python float
            lr = group["lr"] = lr.item()
        if lr is not None and lr is not required:
            _check_range(name, "lr (learning rate)", lr, 0.0)
        for key in self._nonnegative:
            _check_range(name, key, group[key], 0.0)

    # ------------------------------------------------------------------ gradients
    def zero_grad(self, set_to_none=True):
        """Reset the gradients: drop them (default, as PyTorch) or fill them with zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    g = p.grad
                    if g._node is not None:
                        g._node = None
                    g._rg = False
                    g._data.fill(0)

    def step(self, closure=None):
        raise NotImplementedError(f"{type(self).__name__}.step is not implemented")

    def register_step_pre_hook(self, hook):
        """Call ``hook(optimizer, args, kwargs)`` before every step; it may return
        ``(new_args, new_kwargs)``.  Returns a handle with ``remove()``."""
        return _Handle(self._step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """Call ``hook(optimizer, args, kwargs)`` after every step.  Returns a handle."""
        return _Handle(self._step_post_hooks, hook)

    def _hook_table(self, name):
        return self.__dict__.setdefault(name, {})

    def register_state_dict_pre_hook(self, hook, prepend=False):
        """Call ``hook(optimizer)`` at the start of ``state_dict()``.  Returns a handle."""
        return _Handle(self._hook_table("_sd_pre_hooks"), hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        """Call ``hook(optimizer, state_dict)`` at the end of ``state_dict()``; a dict it
        returns replaces the result.  Returns a handle."""
        return _Handle(self._hook_table("_sd_post_hooks"), hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        """Call ``hook(optimizer, state_dict)`` before loading; a dict it returns is loaded
        instead.  Returns a handle."""
        return _Handle(self._hook_table("_load_pre_hooks"), hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        """Call ``hook(optimizer)`` after ``load_state_dict()``.  Returns a handle."""
        return _Handle(self._hook_table("_load_post_hooks"), hook, prepend)

    def _params_with_grad(self, group):
        """Yield ``(p, state, t)`` for each parameter of ``group`` that has a gradient, ``t`` its
        step count after this step (None unless ``_counts_steps``).  A parameter's first step
        creates its state: the step counter, then what ``_init_param_state(state, p._data,
        group)`` adds."""
        state, counts = self.state, self._counts_steps
        for p in group["params"]:
            if p.grad is None:
                continue
            st = state[p]
            if not st:
                if counts:
                    st["step"] = _new_step()
                self._init_param_state(st, p._data, group)
            yield p, st, (_step_count(st) if counts else None)

    def _init_param_state(self, st, w, group):
        """Fill a new parameter's state (after its step counter); for ``_params_with_grad``."""

    def _closure(self, closure):
        if closure is None:
            return None
        with _gm.enable_grad():
            return closure()

    # ------------------------------------------------------------------ state dict
    def state_dict(self):
        """The optimiser's state in PyTorch's layout.

        ``{'state': {index: {...}}, 'param_groups': [{..., 'params': [indices]}]}``.  Unlike
        PyTorch (which returns references that later steps keep changing), the arrays in the
        returned state are copies, so a saved dict stays what it was when saved.
        """
        for h in list(self.__dict__.get("_sd_pre_hooks", {}).values()):
            h(self)
        index, groups, start = {}, [], 0
        for g in self.param_groups:
            ids = list(range(start, start + len(g["params"])))
            for p, i in zip(g["params"], ids):
                index.setdefault(id(p), i)
            start += len(ids)
            packed = {k: v for k, v in g.items() if k != "params"}
            packed["params"] = ids
            groups.append(packed)
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                st = self.state.get(p)
                if st:
                    state[index[id(p)]] = {k: _copy_value(v) for k, v in st.items()}
        out = {"state": state, "param_groups": groups}
        for h in list(self.__dict__.get("_sd_post_hooks", {}).values()):
            r = h(self, out)
            if r is not None:
                out = r
        return out

    def load_state_dict(self, state_dict):
        """Load a dict made by ``state_dict()``: the groups must match in number and sizes."""
        name = type(self).__name__
        for h in list(self.__dict__.get("_load_pre_hooks", {}).values()):
            r = h(self, state_dict)
            if r is not None:
                state_dict = r
        if not isinstance(state_dict, dict) or "state" not in state_dict or "param_groups" not in state_dict:
            raise ValueError(f"{name}.load_state_dict: expected a dict with keys 'state' and "
                             f"'param_groups' (from state_dict()), got {type(state_dict).__name__}"
                             + (f" with keys {sorted(state_dict)}" if isinstance(state_dict, dict) else ""))
        groups = self.param_groups
        saved_groups = copy.deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError(f"{name}.load_state_dict: loaded state dict has a different number of "
                             f"parameter groups ({len(saved_groups)}) than the optimizer "
                             f"({len(groups)})")
        for i, (g, s) in enumerate(zip(groups, saved_groups)):
            if len(g["params"]) != len(s["params"]):
                raise ValueError(f"{name}.load_state_dict: loaded state dict contains a parameter "
                                 f"group that doesn't match the size of optimizer's group: group {i} "
                                 f"has {len(s['params'])} parameters saved and {len(g['params'])} here")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k not in id_map:
                continue
            p = id_map[k]
            entry = {}
            for key, val in v.items():
                if key == "step":
                    entry[key] = (Tensor._make(B.to_host(val._data).copy()) if isinstance(val, Tensor)
                                  else copy.deepcopy(val))   # counts live on the host (_new_step)
                elif isinstance(val, Tensor):
                    # 0-d entries are per-parameter scalars (NAdam's mu_product, ASGD's eta);
                    # like PyTorch they are cast to the parameter's dtype on load
                    if (val._data.ndim and self._state_like_params
                            and tuple(val._data.shape) != tuple(p._data.shape)):
                        raise ValueError(f"{name}.load_state_dict: state[{k}][{key!r}] has shape "
                                         f"{tuple(val._data.shape)} but parameter {k} has shape "
                                         f"{tuple(p._data.shape)}")
                    arr = val._data.astype(p._data.dtype, copy=True) \
                        if val._data.dtype.kind == "f" else val._data.copy()
                    # to the parameter's device, as PyTorch; 0-d per-parameter scalars (step
                    # counts, NAdam's mu_product, ASGD's eta) live on the host, read without a sync
                    arr = B.to_namespace(arr, _xp(p._data)) if arr.ndim else B.to_host(arr)
                    entry[key] = Tensor._make(arr)
                else:
                    entry[key] = copy.deepcopy(val)
            state[p] = entry
        new_groups = []
        for g, s in zip(groups, saved_groups):
            s["params"] = g["params"]
            if "param_names" in g and "param_names" not in s:
                s["param_names"] = g["param_names"]
            new_groups.append(s)
        self.state = state
        self.param_groups = new_groups
        for h in list(self.__dict__.get("_load_post_hooks", {}).values()):
            h(self)

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups,
                "_step_pre_hooks": {}, "_step_post_hooks": {}, "_opt_called": False}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        lines = [type(self).__name__ + " ("]
        for i, g in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for k in sorted(g):
                if k not in ("params", "param_names"):
                    lines.append(f"    {k}: {g[k]}")
        lines.append(")")
        return "\n".join(lines)


def _with_hooks(step):
    """Wrap a subclass's ``step`` so the registered pre/post hooks run around it."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        self._opt_called = True
        if self._step_pre_hooks or _GLOBAL_PRE:
            for h in list(_GLOBAL_PRE.values()) + list(self._step_pre_hooks.values()):
                r = h(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError(f"a step pre-hook must return None or (args, kwargs), "
                                           f"got {r!r}")
                    args, kwargs = r
        out = step(self, *args, **kwargs)
        if self._step_post_hooks or _GLOBAL_POST:
            for h in list(self._step_post_hooks.values()) + list(_GLOBAL_POST.values()):
                h(self, args, kwargs)
        return out
    return wrapper


# hooks run around the step of every optimiser (global ones first before, last after)
_GLOBAL_PRE, _GLOBAL_POST = {}, {}


def register_optimizer_step_pre_hook(hook):
    """Call ``hook(optimizer, args, kwargs)`` before the step of every optimiser."""
    return _Handle(_GLOBAL_PRE, hook)


def register_optimizer_step_post_hook(hook):
    """Call ``hook(optimizer, args, kwargs)`` after the step of every optimiser."""
    return _Handle(_GLOBAL_POST, hook)


class _Handle:
    _next = [0]

    def __init__(self, table, hook, prepend=False):
        self._table = table
        self.id = _Handle._next[0]
        _Handle._next[0] += 1
        table[self.id] = hook
        if prepend:                       # run before the hooks already there
            for k in [k for k in table if k != self.id]:
                table[k] = table.pop(k)   # move each older hook behind the new one

    def remove(self):
        self._table.pop(self.id, None)


def _copy_value(v):
    if isinstance(v, Tensor):
        return Tensor._make(v._data.copy())
    return copy.deepcopy(v)


# ---------------------------------------------------------------------- shared helpers
def _lerp_(a, b, w):
    """a <- a + w (b - a) in place, rounded as PyTorch's lerp (two forms split at w = 1/2)."""
    if w < 0.5:
        a += w * (b - a)
    else:
        t = b - a
        t *= (1.0 - w)
        _xp(a).subtract(b, t, out=a)
    return a


def _xp(a):
    """The array library of ``a`` (NumPy for host arrays, the device's for CUDA arrays): the
    updates compute with it, so state and temporaries stay on the parameter's device."""
    return B.xp if a.__class__ is B.ndarray else B.namespace(a)


def _step_count(state):
    """Advance and return the per-parameter step count kept as a float32 0-d tensor (as PyTorch)."""
    s = state["step"]
    s._data += 1
    return float(s._data)


def _new_step():
    """A parameter's step counter: a float32 0-d tensor on the host, whatever the parameter's
    device (PyTorch keeps ``state['step']`` on the CPU unless ``capturable``/``fused``), so
    reading it is never a device synchronisation."""
    return Tensor._make(B.xp.zeros((), dtype=DT.float32))


def _zeros_state(st, w, *keys):
    """``st[key] = zeros like w`` for each key, in order (the order PyTorch's state has)."""
    for k in keys:
        st[k] = Tensor._make(_xp(w).zeros_like(w))
