"""Module: the base class of every layer and model (PyTorch's ``nn.Module`` API).

Assigning a ``Parameter`` or a ``Module`` to an attribute registers it; buffers are
registered with ``register_buffer``.  ``__call__`` runs forward pre-hooks, ``forward``,
forward hooks, and wires full backward hooks through tensor hooks (see
``_BackwardHookState``), so tools such as the variance lens can watch every layer's
activations and gradients without changing the model.
"""
from __future__ import annotations

import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

from varlens.core import array as B
from varlens.core import dtypes as DT
from varlens.core import grad_mode as _gm
from varlens.nn.parameter import Parameter
from varlens.core.tensor import Tensor, parse_to
from varlens.ops.nn.hooks import _HookIdentity

class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """load_state_dict's result, printed as PyTorch prints it."""
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__
_hook_ids = itertools.count()


class RemovableHandle:
    """Returned by the register_*_hook methods; ``remove()`` unregisters the hook."""

    def __init__(self, store, key):
        self._store, self.id = store, key

    def remove(self):
        self._store.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


class _BackwardHookState:
    """One per module call: collects dL/d(outputs) and dL/d(inputs) through tensor hooks and
    calls the module's full backward (pre-)hooks once, as PyTorch does.

    Inputs that require grad are passed through an identity node whose hook receives the
    total gradient of that input; outputs likewise.  The module's hooks fire when the last
    input gradient arrives (or, if no input requires grad, when the last output gradient
    arrives), with None for inputs that need no gradient.  A hook returning a new
    grad_input replaces the gradients not yet passed on (with one differentiable input,
    the common case, that is all of them).  Each call has its own state, so a module
    used twice in a forward pass fires its hooks twice, once per use.
    """

    __slots__ = ("module", "n_in", "in_grads", "in_pending", "n_out", "out_grads", "out_pending", "fired",
                 "in_req", "out_req")

    def __init__(self, module, n_in, n_out):
        self.module = module
        self.n_in, self.n_out = n_in, n_out
        self.in_grads = [None] * n_in
        self.out_grads = [None] * n_out
        self.in_pending = self.in_req = 0
        self.out_pending = self.out_req = 0
        self.fired = False

    def wrap_inputs(self, args):
        out = list(args)
        for i, a in enumerate(args):
            if isinstance(a, Tensor) and a.requires_grad:
                w = _HookIdentity.apply(a)
                w.register_hook(self._in_hook(i))
                self.in_pending += 1
                self.in_req += 1
                out[i] = w
        return tuple(out)

    def wrap_outputs(self, result):
        flat = []
        res = _map_tensors(result, lambda t: self._wrap_out(t, flat))
        self.n_out = len(flat)
        self.out_grads = [None] * self.n_out
        return res

    def _wrap_out(self, t, flat):
        k = len(flat)
        flat.append(k)
        if not t.requires_grad:
            return t
        w = _HookIdentity.apply(t)
        w.register_hook(self._out_hook(k))
        self.out_pending += 1
        self.out_req += 1
        return w

    def _out_hook(self, k):
        def hook(g):
            self.out_grads[k] = g
            self.out_pending -= 1
            if self.out_pending == 0:
                pre = self.module._backward_pre_hooks
                if pre:
                    go = tuple(self.out_grads)
                    for h in list(pre.values()):
                        r = h(self.module, go)
                        if r is not None:
                            go = tuple(r) if isinstance(r, (tuple, list)) else (r,)
                    changed = go[k] is not self.out_grads[k]
                    self.out_grads = list(go)
                    if self.in_pending == 0:
                        self._fire()
                    return go[k] if changed else None
                if self.in_pending == 0:
                    self._fire()
            return None
        return hook

    def _in_hook(self, i):
        def hook(g):
            self.in_grads[i] = g
            self.in_pending -= 1
            if self.in_pending == 0:
                new = self._fire()
                if new is not None and new[i] is not g:
                    return new[i]
            return None
        return hook

    def _fire(self):
        if self.fired:
            return None
        self.fired = True
        gi, go = tuple(self.in_grads), tuple(self.out_grads)
        # ready for another backward through the same graph (retain_graph=True)
        self.in_grads, self.out_grads = [None] * self.n_in, [None] * self.n_out
        self.in_pending, self.out_pending, self.fired = self.in_req, self.out_req, False
        for h in list(self.module._backward_hooks.values()):
            r = h(self.module, gi, go)
            if r is not None:
                gi = tuple(r) if isinstance(r, (tuple, list)) else (r,)
                if len(gi) != self.n_in:
                    raise RuntimeError(f"backward hook on {type(self.module).__name__} returned {len(gi)} "
                                       f"gradients but the module has {self.n_in} inputs")
        return gi


def _map_tensors(obj, fn):
    if isinstance(obj, Tensor):
        return fn(obj)
    if isinstance(obj, tuple):
        vals = [_map_tensors(o, fn) for o in obj]
        return type(obj)(*vals) if hasattr(obj, "_fields") else tuple(vals)
    if isinstance(obj, list):
        return [_map_tensors(o, fn) for o in obj]
    if isinstance(obj, dict):
        return type(obj)((k, _map_tensors(v, fn)) for k, v in obj.items())
    return obj


def _count(n):
    return f"{n:,}".replace(",", "_") if n >= 10000 else str(n)


class Module:
    """Base class for all layers and models: subclass it, create sub-modules and Parameters in
    ``__init__`` (they are registered automatically) and write ``forward``."""

    training: bool
    _version = 1
    call_super_init = False


    def __init_subclass__(cls, **kwargs):
        """A layer whose constructor takes ``device=`` (torch's factory keyword) is built on the
        CPU and then moved there, once, at the end of its own __init__."""
        super().__init_subclass__(**kwargs)
        init = cls.__dict__.get("__init__")
        if init is None or getattr(init, "_moves_to_device", False):
            return
        import inspect
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            return
        if "device" not in params:
            return
        import functools

        @functools.wraps(init)
        def __init__(self, *args, **kw):
            init(self, *args, **kw)
            dev = kw.get("device")
            if dev is None:
                names = list(params)[1:]
                if "device" in names and len(args) > names.index("device"):
                    dev = args[names.index("device")]
            if dev is not None and str(dev) != "cpu":
                self.to(dev)
        __init__._moves_to_device = True
        cls.__init__ = __init__
    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments {args} {kwargs}")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = OrderedDict()
        d["_forward_hooks"] = OrderedDict()
        d["_backward_hooks"] = OrderedDict()
        d["_backward_pre_hooks"] = OrderedDict()

    # ------------------------------------------------------------------ forward
    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required "forward" function')

    def __call__(self, *args, **kwargs):
        d = self.__dict__
        if not (d["_forward_pre_hooks"] or d["_forward_hooks"] or d["_backward_hooks"]
                or d["_backward_pre_hooks"]):
            return self.forward(*args, **kwargs)
        return self._call_with_hooks(args, kwargs)

    _call_impl = __call__

    def _call_with_hooks(self, args, kwargs):
        flags = self.__dict__.get("_hook_flags", _NO_FLAGS)   # hook id -> (with_kwargs, always_call)
        for k, h in list(self._forward_pre_hooks.items()):
            if flags.get(k, _PLAIN)[0]:
                r = h(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of (new_args, new_kwargs), "
                                           f"but got {r}.")
                    args, kwargs = r
                    args = args if isinstance(args, tuple) else (args,)
                continue
            r = h(self, args)
            if r is not None:
                args = r if isinstance(r, tuple) else (r,)
        state = None
        if (self._backward_hooks or self._backward_pre_hooks) and _gm._enabled[0]:
            state = _BackwardHookState(self, len(args), 0)
            args = state.wrap_inputs(args)
        try:
            result = self.forward(*args, **kwargs)
        except Exception:
            # hooks registered with always_call=True run even when forward raised (output None)
            for k, h in list(self._forward_hooks.items()):
                f = flags.get(k, _PLAIN)
                if f[1]:
                    try:
                        h(self, args, kwargs, None) if f[0] else h(self, args, None)
                    except Exception:
                        pass
            raise
        for k, h in list(self._forward_hooks.items()):
            f = flags.get(k, _PLAIN) if flags else _PLAIN
            r = h(self, args, kwargs, result) if f[0] else h(self, args, result)
            if r is not None:
                result = r
        if state is not None:
            result = state.wrap_outputs(result)
        return result

    # ------------------------------------------------------------------ registration
    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")
        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            _remove_from(d, name, "_buffers", "_modules")
            d.pop(name, None)
            params[name] = value
            return
        if params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as parameter '{name}' "
                                "(varlens.nn.Parameter or None expected)")
            params[name] = None
            return
        modules = d.get("_modules")
        if isinstance(value, Module):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            _remove_from(d, name, "_parameters", "_buffers")
            d.pop(name, None)
            modules[name] = value
            return
        if modules is not None and name in modules:
            if value is not None:
                raise TypeError(f"cannot assign '{type(value).__name__}' as child module '{name}' "
                                "(varlens.nn.Module or None expected)")
            modules[name] = None
            return
        buffers = d.get("_buffers")
        if buffers is not None and name in buffers:
            if value is not None and not isinstance(value, Tensor):
                raise TypeError(f"cannot assign '{type(value).__name__}' as buffer '{name}' "
                                "(varlens.Tensor or None expected)")
            buffers[name] = value
            return
        object.__setattr__(self, name, value)

    def __getattr__(self, name):
        # (unrolled: every self.weight / self.layer in a forward comes through here)
        d = self.__dict__
        s = d.get("_parameters")
        if s is not None and name in s:
            return s[name]
        s = d.get("_buffers")
        if s is not None and name in s:
            return s[name]
        s = d.get("_modules")
        if s is not None and name in s:
            return s[name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if name in d.get(store, ()):
                del d[store][name]
                d["_non_persistent_buffers_set"].discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) | set(self._modules))

    def __setstate__(self, state):
        self.__dict__.update(state)
        for k in ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks"):
            self.__dict__.setdefault(k, OrderedDict())

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        _check_name(self, name, "parameter")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"register_parameter: cannot assign '{type(param).__name__}' as parameter '{name}' "
                            "(varlens.nn.Parameter or None expected)")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"register_parameter: attribute '{name}' already exists")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        """Register a non-learnable tensor (running statistics, masks) that moves with the module
        and, if ``persistent``, is saved in ``state_dict``."""
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        _check_name(self, name, "buffer")
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"register_buffer: cannot assign '{type(tensor).__name__}' as buffer '{name}' "
                            "(varlens.Tensor or None expected)")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"register_buffer: attribute '{name}' already exists")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"add_module: {type(module).__name__} is not a Module subclass")
        _check_name(self, name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"add_module: attribute '{name}' already exists")
        self._modules[name] = module

    register_module = add_module

    def get_submodule(self, target):
        if target == "":
            return self
        mod = self
        for item in target.split("."):
            if item not in mod._modules:
                raise AttributeError(f"{type(mod).__name__} has no submodule `{item}` (looking up '{target}')")
            mod = mod._modules[item]
        return mod

    def get_parameter(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._parameters:
            raise AttributeError(f"{type(mod).__name__} has no parameter `{name}`")
        return mod._parameters[name]

    def get_buffer(self, target):
        mod_path, _, name = target.rpartition(".")
        mod = self.get_submodule(mod_path)
        if name not in mod._buffers:
            raise AttributeError(f"{type(mod).__name__} has no buffer `{name}`")
        return mod._buffers[name]

    # ------------------------------------------------------------------ iteration
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name, remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def _all_modules(self):
        """Every module in the tree, each once, in breadth-first order: the fast path behind
        zero_grad() and train(), where the order does not matter."""
        out, seen, i = [self], {id(self)}, 0
        while i < len(out):
            for c in out[i]._modules.values():
                if c is not None and id(c) not in seen:
                    seen.add(id(c))
                    out.append(c)
            i += 1
        return out

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and id(m) not in seen:
                seen.add(id(m))
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, store, prefix, recurse, remove_duplicate=True):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) if recurse else [(prefix, self)]
        for mp, m in mods:
            for k, v in getattr(m, store).items():
                if v is None or (remove_duplicate and id(v) in seen):
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield (mp + "." if mp else "") + k, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def num_parameters(self, trainable_only=False):
        """Total number of parameter entries (varlens extra)."""
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)

    # ------------------------------------------------------------------ modes and grads
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError(f"train: mode is expected to be a bool, got {type(mode).__name__}")
        for m in self._all_modules():
            m.__dict__["training"] = mode
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none=True):
        for m in self._all_modules():
            for p in m._parameters.values():
                if p is None or p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                p.grad._data[...] = 0
                p.grad._node = None
                p.grad._rg = False

    def apply(self, fn):
        """Call ``fn`` on every sub-module (children first) and then on this module."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ------------------------------------------------------------------ dtype
    def _apply(self, fn):
        for m in self.modules():
            for store in (m._parameters, m._buffers):
                for t in store.values():
                    if t is None:
                        continue
                    t._data = fn(t._data)
                    if t.grad is not None:
                        t.grad._data = fn(t.grad._data)
        return self

    def to(self, *args, non_blocking=False, **kwargs):
        """Move parameters and buffers to a device and/or convert the floating-point ones to a
        dtype, in place: the same Parameter objects hold the new arrays (so an optimiser built
        before the move still holds them), as torch's Module.to."""
        dtype, dev = parse_to(args, kwargs)
        dt = None
        if dtype is not None:
            dt = DT.to_dtype(dtype)
            if dt.kind != "f":
                raise TypeError(f"Module.to() only accepts floating point dtypes, but got desired dtype={dt}")
        lib = None if dev is None else B.namespace_of_device(dev)

        def fn(a):
            if dt is not None and a.dtype.kind == "f" and a.dtype != dt:
                a = a.astype(dt)
            if lib is not None:
                a = B.to_namespace(a, lib)
            return a
        if dt is None and lib is None:
            return self
        return self._apply(fn)

    def float(self):
        return self.to(DT.float32)

    def double(self):
        return self.to(DT.float64)

    def half(self):
        return self.to(DT.float16)

    def type(self, dst_type):
        return self.to(dst_type)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else (f"cuda:{device}" if isinstance(device, int) else device))

    # ------------------------------------------------------------------ state dict
    def state_dict(self, *args, destination=None, prefix="", keep_vars=False):
        """An ordered dict name -> tensor of every parameter and persistent buffer (shared data)."""
        if destination is None:
            destination = OrderedDict()
        for mp, m in self.named_modules(prefix=prefix.rstrip("."), remove_duplicate=False):
            pre = mp + "." if mp else ""
            for k, p in m._parameters.items():
                if p is not None:
                    destination[pre + k] = p if keep_vars else p.detach()
            for k, b in m._buffers.items():
                if b is not None and k not in m._non_persistent_buffers_set:
                    destination[pre + k] = b if keep_vars else b.detach()
        return destination

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy values from ``state_dict`` into this module's parameters and buffers.

        Every problem is collected first: keys missing from ``state_dict``, keys this module
        does not have (both only errors when ``strict``), and values whose shape differs
        (always an error); one RuntimeError lists them all with shapes.  Values may be
        varlens tensors, NumPy arrays or PyTorch tensors.  Returns (missing_keys,
        unexpected_keys)."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        own = self.state_dict(keep_vars=True)
        missing = [k for k in own if k not in state_dict]
        unexpected = [k for k in state_dict if k not in own]
        mismatched, todo = [], []
        for k, t in own.items():
            if k not in state_dict:
                continue
            v = state_dict[k]
            if not _tensor_like(v):
                mismatched.append(f'While copying the parameter named "{k}", expected torch.Tensor or Tensor-like '
                                  f"object from checkpoint but received {type(v)}")
                continue
            arr = _to_array(v)
            if tuple(arr.shape) != tuple(t.shape):
                mismatched.append(f"size mismatch for {k}: copying a param with shape {tuple(arr.shape)} from "
                                  f"checkpoint, the shape in current model is {tuple(t.shape)}.")
            else:
                todo.append((t, arr))
        errors = []
        if strict and unexpected:
            errors.append("Unexpected key(s) in state_dict: " + ", ".join(f'"{k}"' for k in unexpected) + ".")
        if strict and missing:
            errors.append("Missing key(s) in state_dict: " + ", ".join(f'"{k}"' for k in missing) + ".")
        errors.extend(mismatched)
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t" + "\n\t".join(errors))
        for t, arr in todo:
            if assign:
                t._data = arr.astype(t.dtype, copy=True)
            else:   # the parameter keeps its device: values from another device are copied onto it
                t._data[...] = B.to_namespace(arr, B.namespace(t._data))
            t._version[0] += 1
        return _IncompatibleKeys(missing, unexpected)

    # ------------------------------------------------------------------ hooks
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """``hook(module, args)`` before forward; a non-None return replaces the positional args.
        With ``with_kwargs=True``: ``hook(module, args, kwargs)`` returning None or (args, kwargs)."""
        handle = _add_hook(self._forward_pre_hooks, hook, prepend)
        if with_kwargs:
            self.__dict__.setdefault("_hook_flags", {})[handle.id] = (True, False)
        return handle

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False, always_call=False):
        """``hook(module, args, output)`` after forward; a non-None return replaces the output.
        ``with_kwargs=True``: ``hook(module, args, kwargs, output)``; ``always_call=True``: the
        hook also runs (with output None) when forward raises, before the error propagates."""
        handle = _add_hook(self._forward_hooks, hook, prepend)
        if with_kwargs or always_call:
            self.__dict__.setdefault("_hook_flags", {})[handle.id] = (bool(with_kwargs), bool(always_call))
        return handle

    def register_full_backward_hook(self, hook, prepend=False):
        """``hook(module, grad_input, grad_output)`` once the gradients with respect to the
        module's positional tensor inputs are known (None for inputs not requiring grad);
        a non-None return (a tuple like grad_input) replaces grad_input."""
        return _add_hook(self._backward_hooks, hook, prepend)

    register_backward_hook = register_full_backward_hook

    def register_full_backward_pre_hook(self, hook, prepend=False):
        """``hook(module, grad_output)`` when the output gradients are known, before the module's
        own backward; a non-None return replaces grad_output."""
        return _add_hook(self._backward_pre_hooks, hook, prepend)

    # ------------------------------------------------------------------ repr
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        """PyTorch's layout exactly: ``Name(extra)`` for a leaf, children indented below."""
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(m), 2) for key, m in self._modules.items()]
        return _layout(self._get_name(), extra_lines, child_lines)

    def summary(self):
        """The repr with parameter counts: each module's own on its line, each container's
        total on its first line (varlens addition; ``print(model.summary())``)."""
        return "\n".join(self._summary_lines())

    def _summary_lines(self):
        extra = self.extra_repr()
        own = sum(p.numel() for p in self._parameters.values() if p is not None)
        total = sum(p.numel() for p in self.parameters())
        if not self._modules and "\n" not in extra:
            line = f"{self._get_name()}({extra})"
            if own:
                line += f"  # {_count(own)} params"
            return [line]
        head = f"{self._get_name()}("
        if total:
            head += f"  # {_count(total)} params"
        lines = [head]
        if extra:
            for e in extra.split("\n"):
                lines.append("  " + e)
        for name, m in self._modules.items():
            sub = m._summary_lines() if m is not None else ["None"]
            lines.append(f"  ({name}): " + sub[0])
            lines.extend("  " + s for s in sub[1:])
        lines.append(")")
        return lines


_PLAIN = (False, False)
_NO_FLAGS = {}


def _addindent(text, n):
    """Indent every line of ``text`` but the first by ``n`` spaces (nested reprs)."""
    first, *rest = text.split("\n")
    return "\n".join([first] + [" " * n + line for line in rest])


def _layout(name, extra_lines, child_lines):
    lines = extra_lines + child_lines
    out = name + "("
    if lines:
        if len(extra_lines) == 1 and not child_lines:
            out += extra_lines[0]
        else:
            out += "\n  " + "\n  ".join(lines) + "\n"
    return out + ")"


def _add_hook(store, hook, prepend):
    key = next(_hook_ids)
    store[key] = hook
    if prepend:
        store.move_to_end(key, last=False)
    return RemovableHandle(store, key)


def _remove_from(d, name, *stores):
    for s in stores:
        st = d.get(s)
        if st is not None and name in st:
            del st[name]
    if name in d.get("_non_persistent_buffers_set", ()):
        d["_non_persistent_buffers_set"].discard(name)


def _check_name(mod, name, what):
    if not isinstance(name, str):
        raise TypeError(f"{what} name should be a string, got {type(name).__name__}")
    if "." in name or name == "":
        raise KeyError(f"{what} name can't contain \".\" or be empty, got {name!r}")


def _tensor_like(v):
    """A checkpoint value load_state_dict accepts: a varlens or PyTorch tensor, or a NumPy array
    or scalar (varlens' own npz checkpoints hold arrays).  Lists, numbers and None are refused,
    as in PyTorch."""
    return isinstance(v, (Tensor, B.xp.ndarray, B.xp.generic)) or (hasattr(v, "detach") and hasattr(v, "numpy"))


def _to_array(v):
    if isinstance(v, Tensor):
        return v._data
    if hasattr(v, "detach") and hasattr(v, "numpy"):  # a PyTorch tensor
        return v.detach().cpu().numpy()
    return B.xp.asarray(v)
