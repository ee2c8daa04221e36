"""Saving and loading (varlens.save / varlens.load): files that cannot run code on load, whose
loading is bounded by their size, written so a crash never leaves a broken one.  Checkpoints
(varlens.train) use this format.  docs/serialization.md states the guarantees.

Format: a short header, then a standard ``.npz`` archive (an uncompressed zip of ``.npy``
arrays).  The header is the magic line ``VARLENS-CKPT 1`` and the SHA-256 of the archive in
hex, so any truncation or flipped bit anywhere in the file is refused with a clear error before
anything is parsed.  (``tail -c +81 FILE > x.npz`` gives the plain archive.)  Any nested
structure of dicts, lists, tuples, sets, numbers, strings, None, NumPy arrays and varlens Tensors
is split into

- the arrays, stored as ``a0, a1, ...`` entries, and
- a JSON description of everything else (``__meta__``, stored as a uint8 array), where an
  array is ``{"__array__": "a0"}`` (with ``"tensor": true`` for Tensors, plus
  ``"requires_grad"``/``"parameter"`` flags for tensors that require grad (they load as leaves) and
  ``nn.Parameter``s) and dicts keep their key types (an optimiser's integer parameter ids
  stay ints).  Arrays that are views of one C-contiguous buffer of their own dtype and are
  saved together store that buffer once plus ``"view": [byte offset, shape, strides]``,
  so they share memory again after loading (as torch.save keeps shared storages); other
  views (and views whose elements overlap, such as expanded ones) are saved as copies.
  A Tensor or Module saved twice is stored once (``"id"``) and referenced (``{"__ref__": id}``),
  so tied weights stay one object.  dtypes and devices are stored by name.  A tensor (or array)
  on the CUDA device is stored as its host copy plus ``"device": "cuda:0"``; ``load`` puts it back
  there, or where ``map_location`` says (see ``_placer``).

A whole ``nn.Module`` is stored as ``{"__module__": {"module", "qualname", "state"}}``: the
qualified name of its class and its attributes (parameters, buffers, sub-modules, plain
settings); functions it refers to (an activation) are ``{"__global__": ...}`` names.  Loading
one is PyTorch's ``weights_only`` contract without pickle: by default (``weights_only=True``)
it is refused unless its classes were allowed with :func:`add_safe_globals`; with
``weights_only=False`` the class is imported by its name (the file is trusted to name a class,
as in PyTorch) but only a subclass of ``varlens.nn.Module`` is accepted, and it is rebuilt with
``cls.__new__(cls)`` plus its stored attributes: nothing is called, no ``__init__``,
``__setstate__`` or ``__reduce__``.  Functions named in a module's attributes must live in
varlens or be allowed with :func:`add_safe_globals`.

Loading untrusted bytes (the checks, in order): the path must be a regular file (not a
directory, device or FIFO); the magic bytes are read first (16 bytes); then the file's own size
bounds every read; the checksum; every zip entry must be stored uncompressed with its declared
sizes inside the file (no entry can inflate); every ``.npy`` header is parsed by a bounded parser
that accepts only the dtypes in ``ALLOWED_DTYPES`` and shapes whose byte count equals the bytes
present; every view's offset and strides must stay inside its buffer without overlapping
elements; the JSON is at most ``MAX_DEPTH`` levels deep and every entry is checked for its
expected keys and types.  Any failure raises :class:`CheckpointError` (a ``RuntimeError`` and a
``pickle.UnpicklingError``, the types ``torch.load`` raises for bad files) naming the file and
the problem.  Memory used while loading stays below ``4 x file size + 1 MiB``
(tests/test_hostile_files.py measures it).

``f`` is a path or a binary file-like object.  Writing to a path is atomic: the bytes go to a
temporary file in the target's directory, which is flushed and fsync'ed, then ``os.replace``d
onto the final name, and the directory is fsync'ed so the rename itself survives a power cut.
A reader sees the old file or the new one, never half of one.
"""
from __future__ import annotations

import ast
import errno
import hashlib
import importlib
import io
import json
import os
import pickle
import re
import stat
import sys
import tempfile
import types
import zipfile
from collections import OrderedDict

import numpy as np

from varlens.core.arg_rules import torch_args
from varlens.core import array as B
from varlens.core.dtypes import to_dtype
from varlens.core.tensor import Tensor
from varlens.core.tensor import device as _device

__all__ = ["save", "load", "CheckpointError", "CheckpointNotFoundError", "add_safe_globals", "safe_globals",
           "get_safe_globals", "clear_safe_globals", "atomic_write_bytes", "ALLOWED_DTYPES", "MAX_DEPTH"]

FORMAT = "varlens-checkpoint"
VERSION = 1
MAX_DEPTH = 400                # JSON nesting levels in a file's description (saving refuses deeper)
MAX_NDIM = 64                  # NumPy's own limit on dimensions
ALLOWED_DTYPES = ("bool", "uint8", "int8", "int16", "int32", "int64", "uint16", "uint32", "uint64",
                  "float16", "float32", "float64", "complex64", "complex128")
ALLOWED_DEVICE_TYPES = ("cpu", "cuda", "mps", "meta", "xpu")


class CheckpointError(RuntimeError, pickle.UnpicklingError):
    """A file that is missing, truncated, corrupted, malformed or not a varlens checkpoint.

    Both a ``RuntimeError`` (what torch.load raises for a corrupted zip) and a
    ``pickle.UnpicklingError`` (what it raises for other bad bytes and for refused globals)."""


class CheckpointNotFoundError(CheckpointError, FileNotFoundError):
    """``load`` of a path that does not exist (both a CheckpointError and a FileNotFoundError)."""


# ---------------------------------------------------------------------- safe globals (torch.serialization's API)
_SAFE_GLOBALS: list = []


def _global_name(obj):
    return f"{getattr(obj, '__module__', None)}.{getattr(obj, '__qualname__', getattr(obj, '__name__', '?'))}"


def add_safe_globals(safe_globals):
    """Allow these classes/functions in files loaded with ``weights_only=True`` (torch's API).

    Entries are objects, or ``(object, "module.qualname")`` pairs naming them as stored.  Here
    they gate which ``nn.Module`` classes (and functions referred to by a module) load."""
    if not isinstance(safe_globals, (list, tuple)):
        raise TypeError(f"add_safe_globals: expected a list of classes/functions, got {type(safe_globals).__name__}")
    for g in safe_globals:
        if isinstance(g, tuple):
            if len(g) != 2 or not isinstance(g[1], str):
                raise TypeError(f"add_safe_globals: expected (object, 'module.name') pairs, got {g!r}")
        elif not callable(g):
            raise TypeError(f"add_safe_globals: expected classes or functions, got {type(g).__name__}")
        _SAFE_GLOBALS.append(g)


def get_safe_globals():
    """The user-allowed globals (a new list)."""
    return list(_SAFE_GLOBALS)


def clear_safe_globals():
    """Forget every allowed global."""
    _SAFE_GLOBALS.clear()


class safe_globals:
    """Context manager: ``add_safe_globals(globals)`` inside the block only (torch's)."""

    def __init__(self, safe_globals):
        self.safe_globals = safe_globals

    def __enter__(self):
        self._saved = list(_SAFE_GLOBALS)
        add_safe_globals(self.safe_globals)

    def __exit__(self, *exc):
        _SAFE_GLOBALS[:] = self._saved
        return False


def _allowed_globals():
    out = {}
    for g in _SAFE_GLOBALS:
        obj, name = (g if isinstance(g, tuple) else (g, _global_name(g)))
        out[name] = obj
    return out


def _module_class():
    from varlens.nn.module import Module   # lazy: nn sits above this module
    return Module


# ---------------------------------------------------------------------- structure <-> (json, arrays)
def _c(a):
    """C-contiguous, keeping 0-d arrays 0-d (np.ascontiguousarray would make them 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


def _non_overlapping(shape, strides, itemsize):
    """True when no two elements of the view share bytes (sufficient test: sorted by stride,
    each stride covers the whole extent of the smaller ones)."""
    dims = sorted((abs(s), n) for n, s in zip(shape, strides) if n > 1)
    extent = itemsize
    for s, n in dims:
        if s < extent:
            return False
        extent = s * (n - 1) + extent
    return True


def _root(a):
    """The array that owns ``a``'s memory, when views of it can be rebuilt from it (a C-contiguous
    owner of ``a``'s dtype, of a kind we save, with ``a``'s elements not overlapping); else None."""
    r = a
    while isinstance(r.base, np.ndarray):
        r = r.base
    if r.base is not None or not r.flags.c_contiguous or r.dtype != a.dtype or a.dtype.kind not in "biufc":
        return None
    if not _non_overlapping(a.shape, a.strides, a.itemsize):
        return None
    return r


class _Packer:
    """Walks the structure; arrays that are views of one buffer (and saved together) are stored
    once, as that buffer plus (offset, shape, strides), so they share memory again on load."""

    def __init__(self, shared_roots):
        self.arrays = {}
        self.roots = {}                 # id(root) -> name of the stored root
        self.shared_roots = shared_roots
        self.memo = {}                  # id(Tensor or Module) -> reference number
        self.keep = []                  # objects in memo, kept alive so ids stay unique

    def array(self, a):
        r = _root(a)
        if r is not None and id(r) in self.shared_roots:
            name = self.roots.get(id(r))
            if name is None:
                name = self.roots[id(r)] = f"a{len(self.arrays)}"
                self.arrays[name] = r
            off = a.__array_interface__["data"][0] - r.__array_interface__["data"][0]
            return {"__array__": name, "view": [off, list(a.shape), list(a.strides)]}
        name = f"a{len(self.arrays)}"
        self.arrays[name] = _c(a)
        return {"__array__": name}

    def _remember(self, obj):
        k = self.memo[id(obj)] = len(self.memo)
        self.keep.append(obj)
        return k

    def device_array(self, a):
        """A CUDA array: its host copy, marked with the device it came from."""
        d = self.array(B.to_host(a))
        d["device"] = "cuda:0"
        return d

    def pack(self, obj, where="obj"):
        if isinstance(obj, Tensor):
            if id(obj) in self.memo:
                return {"__ref__": self.memo[id(obj)]}
            a = obj._data
            d = self.array(a) if a.__class__ is np.ndarray else self.device_array(a)
            d["tensor"] = True
            d["id"] = self._remember(obj)
            if obj.requires_grad:
                d["requires_grad"] = True
            if type(obj).__name__ == "Parameter":
                d["parameter"] = True
            return d
        if isinstance(obj, np.ndarray):
            if obj.dtype.kind not in "biufc" or obj.dtype.name not in ALLOWED_DTYPES:
                raise TypeError(f"checkpoint: {where}: arrays of dtype {obj.dtype} cannot be saved (only "
                                f"{', '.join(ALLOWED_DTYPES)}); object arrays would need pickle")
            return self.array(obj)
        if isinstance(obj, np.generic):
            return obj.item()
        if B.is_device_array(obj):
            return self.device_array(obj)
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return obj
        if isinstance(obj, dict):
            d = {"__dict__": [[self.pack(k, f"{where} key"), self.pack(v, f"{where}[{k!r}]")]
                              for k, v in obj.items()]}
            if isinstance(obj, OrderedDict):
                d["ordered"] = True
            return d
        if isinstance(obj, tuple):
            return {"__tuple__": [self.pack(v, f"{where}[{i}]") for i, v in enumerate(obj)]}
        if isinstance(obj, list):
            return [self.pack(v, f"{where}[{i}]") for i, v in enumerate(obj)]
        if isinstance(obj, (set, frozenset)):
            return {"__set__": [self.pack(v, f"{where} element") for v in obj], "frozen": isinstance(obj, frozenset)}
        if isinstance(obj, np.dtype) or (isinstance(obj, type) and issubclass(obj, np.generic)) \
                or type(obj).__name__.lower().endswith("dtype"):
            return {"__dtype__": to_dtype(obj).name}
        if isinstance(obj, _device):
            return {"__device__": str(obj)}
        if isinstance(obj, _module_class()):
            return self.module(obj, where)
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType, type)) and where != "obj":
            return self.global_ref(obj, where)
        if callable(getattr(obj, "state_dict", None)):
            kind = type(obj).__name__
            raise TypeError(f"checkpoint: cannot save a whole {kind} object: varlens files hold no pickled "
                            f"code (they are safe to load). Save its state instead, e.g. "
                            f"varlens.save(optimizer.state_dict(), path), and restore it into a freshly built "
                            f"{kind} with .load_state_dict(varlens.load(path))")
        raise TypeError(f"checkpoint: {where}: cannot save an object of type {type(obj).__name__}; expected "
                        "dicts, lists, tuples, sets, numbers, strings, None, dtypes, devices, NumPy arrays, "
                        "Tensors or nn.Modules")

    def global_ref(self, obj, where):
        mod, qual = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
        if not mod or not qual or "<" in qual or _resolve(mod, qual, import_=False) is not obj:
            raise TypeError(f"checkpoint: {where}: cannot save {obj!r}: only functions and classes that can be "
                            "found again by their module and name (not lambdas or local functions)")
        return {"__global__": [mod, qual]}

    def module(self, m, where):
        if id(m) in self.memo:
            return {"__ref__": self.memo[id(m)]}
        cls = type(m)
        if "<" in cls.__qualname__:
            raise TypeError(f"checkpoint: {where}: cannot save a module of class {cls.__qualname__} defined "
                            "inside a function; define the class at module level (PyTorch needs that too)")
        k = self._remember(m)
        state = {}
        for name, v in vars(m).items():
            if name.endswith("hooks") and isinstance(v, dict):
                if v:
                    raise TypeError(f"checkpoint: {where}.{name}: cannot save a module with hooks registered "
                                    "(hooks are code); remove them before saving, or save the state_dict()")
            elif name == "_hook_flags":
                continue
            state[name] = v
        return {"__module__": {"module": cls.__module__, "qualname": cls.__qualname__, "id": k,
                               "state": self.pack(state, f"{where}({cls.__name__})")}}


def _shared_roots(obj):
    """ids of the buffers that two or more saved Tensors/arrays use (the same array twice, or
    views of one buffer): those are stored once.  Only the simple case is handled (see _root);
    other views are saved as independent copies."""
    count, stack, seen = {}, [obj], set()
    Module = _module_class()
    while stack:
        o = stack.pop()
        if isinstance(o, Tensor):
            if id(o) in seen:
                continue
            seen.add(id(o))
            o = o._data
        if isinstance(o, np.ndarray):
            r = _root(o)
            if r is not None:
                count[id(r)] = count.get(id(r), 0) + 1
        elif isinstance(o, dict):
            stack.extend(o.keys())
            stack.extend(o.values())
        elif isinstance(o, (list, tuple, set, frozenset)):
            stack.extend(o)
        elif isinstance(o, Module) and id(o) not in seen:
            seen.add(id(o))
            stack.extend(vars(o).values())
    return {k for k, n in count.items() if n > 1}


def _pack(obj, arrays):
    """Split ``obj`` into a JSON-able description and the ``arrays`` dict (filled in place)."""
    p = _Packer(_shared_roots(obj))
    p.arrays = arrays
    return p.pack(obj)


def _resolve(module, qualname, import_):
    """The object named ``module.qualname`` (importing ``module`` only when ``import_``); None if absent."""
    mod = sys.modules.get(module)
    if mod is None and import_:
        try:
            mod = importlib.import_module(module)
        except Exception:   # noqa: BLE001 - any failure to import means "not found"
            return None
    obj = mod
    for part in qualname.split("."):
        if obj is None or part.startswith("__"):
            return None
        obj = getattr(obj, part, None)
    return obj


# ---------------------------------------------------------------------- (json, arrays) -> structure
class _Unpacker:
    """Rebuilds the structure from the JSON description, checking every entry's shape and type;
    anything unexpected raises CheckpointError naming the file."""

    def __init__(self, arrays, where, place, weights_only):
        self.arrays, self.where, self.place, self.weights_only = arrays, where, place, weights_only
        self.memo = {}

    def bad(self, msg):
        return CheckpointError(f"checkpoint {self.where} is malformed and was refused: {msg}")

    def keys(self, obj, required, optional=()):
        extra = set(obj) - set(required) - set(optional)
        missing = set(required) - set(obj)
        if extra or missing:
            raise self.bad(f"entry {sorted(obj)[:5]} has unexpected keys {sorted(extra)[:5]} or lacks {sorted(missing)}")

    def flag(self, obj, key):
        v = obj.get(key, False)
        if not isinstance(v, bool):
            raise self.bad(f"{key!r} must be true or false, got {type(v).__name__}")
        return v

    def register(self, obj, value):
        k = obj.get("id")
        if k is None:
            return
        if type(k) is not int or k in self.memo:
            raise self.bad(f"bad or repeated object id {k!r}")
        self.memo[k] = value

    def array(self, obj):
        self.keys(obj, ["__array__"], ["view", "tensor", "requires_grad", "parameter", "id", "device"])
        name = obj["__array__"]
        if not isinstance(name, str) or name not in self.arrays:
            raise self.bad(f"it refers to an array {str(name)[:40]!r} that the file does not hold")
        a = self.arrays[name]
        if "view" in obj:
            a = self.view(a, obj["view"])
        loc = "cpu"
        if "device" in obj:
            loc = str(self.device(obj["device"]))
            if loc != "cuda:0":
                raise self.bad(f"an array's device must be 'cuda:0' (the only one varlens saves from), got {loc!r}")
        if not self.flag(obj, "tensor"):
            if any(k in obj for k in ("requires_grad", "parameter", "id")):
                raise self.bad("tensor flags on an entry that is not a tensor")
            return a if self.place is None else self.place.array(a, loc)
        rg, param = self.flag(obj, "requires_grad"), self.flag(obj, "parameter")
        if rg and a.dtype.kind not in "fc":
            raise self.bad(f"a tensor of dtype {a.dtype} cannot require grad")
        if param:
            from varlens.nn.parameter import Parameter   # lazy: nn sits above this module
            t = Parameter(Tensor._make(a), requires_grad=rg)
        else:
            t = Tensor._make(a)
            if rg:
                t.requires_grad_(True)
        t = t if self.place is None else self.place(t, loc)
        self.register(obj, t)
        return t

    def view(self, base, v):
        ok = (isinstance(v, list) and len(v) == 3 and type(v[0]) is int and isinstance(v[1], list)
              and isinstance(v[2], list) and len(v[1]) == len(v[2]) <= MAX_NDIM
              and all(type(n) is int and 0 <= n < 2 ** 62 for n in v[1])
              and all(type(s) is int and abs(s) < 2 ** 62 for s in v[2]))
        if not ok:
            raise self.bad(f"a view must be [offset, shape, strides] of ints, got {str(v)[:80]}")
        off, shape, strides = v
        item, nbytes = base.itemsize, base.nbytes
        extent = item
        for n in shape:
            extent *= max(n, 1)
        if extent >= 2 ** 62:
            raise self.bad(f"view shape {shape} is too large")
        if off % item or any(s % item for s in strides):
            raise self.bad(f"view offset {off} / strides {strides} are not multiples of the item size {item}")
        if 0 in shape:
            lo = hi = off
        else:
            lo = off + sum(s * (n - 1) for n, s in zip(shape, strides) if s < 0)
            hi = off + sum(s * (n - 1) for n, s in zip(shape, strides) if s > 0) + item
        if not (0 <= off <= nbytes and lo >= 0 and hi <= nbytes):
            raise self.bad(f"view (offset {off}, shape {shape}, strides {strides}) reaches bytes [{lo}, {hi}) "
                           f"outside its {nbytes}-byte buffer")
        if not _non_overlapping(shape, strides, item):
            raise self.bad(f"view (shape {shape}, strides {strides}) has overlapping elements (a zero or too "
                           "small stride); varlens never writes such views")
        return np.ndarray(tuple(shape), base.dtype, buffer=base, offset=off, strides=tuple(strides))

    def unpack(self, obj):
        if isinstance(obj, list):
            return [self.unpack(v) for v in obj]
        if not isinstance(obj, dict):
            return obj       # JSON scalars: None, bool, int, float, str
        if "__array__" in obj:
            return self.array(obj)
        if "__ref__" in obj:
            self.keys(obj, ["__ref__"])
            k = obj["__ref__"]
            if type(k) is not int or k not in self.memo:
                raise self.bad(f"reference {str(k)[:20]} to an object not defined before it")
            return self.memo[k]
        if "__dict__" in obj:
            self.keys(obj, ["__dict__"], ["ordered"])
            pairs = obj["__dict__"]
            if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 for p in pairs):
                raise self.bad("a dict must be a list of [key, value] pairs")
            out = OrderedDict() if self.flag(obj, "ordered") else {}
            for k, v in pairs:
                k = self.unpack(k)
                try:
                    hash(k)
                except TypeError:
                    raise self.bad(f"a dict key of type {type(k).__name__} (unhashable)") from None
                out[k] = self.unpack(v)
            return out
        if "__tuple__" in obj:
            self.keys(obj, ["__tuple__"])
            if not isinstance(obj["__tuple__"], list):
                raise self.bad("a tuple must be a list of items")
            return tuple(self.unpack(v) for v in obj["__tuple__"])
        if "__set__" in obj:
            self.keys(obj, ["__set__"], ["frozen"])
            if not isinstance(obj["__set__"], list):
                raise self.bad("a set must be a list of items")
            items = [self.unpack(v) for v in obj["__set__"]]
            try:
                return frozenset(items) if self.flag(obj, "frozen") else set(items)
            except TypeError:
                raise self.bad("a set holds unhashable items") from None
        if "__dtype__" in obj:
            self.keys(obj, ["__dtype__"])
            name = obj["__dtype__"]
            if name not in ALLOWED_DTYPES:
                raise self.bad(f"dtype {str(name)[:40]!r} is not one of {', '.join(ALLOWED_DTYPES)}")
            return np.dtype(name)
        if "__device__" in obj:
            self.keys(obj, ["__device__"])
            return self.device(obj["__device__"])
        if "__module__" in obj:
            self.keys(obj, ["__module__"])
            return self.module(obj["__module__"])
        if "__global__" in obj:
            self.keys(obj, ["__global__"])
            return self.global_ref(obj["__global__"], module_only=False)
        raise self.bad(f"unknown entry with keys {[str(k)[:30] for k in list(obj)[:5]]}")

    def device(self, name):
        m = re.fullmatch(r"([a-z]+)(?::(\d{1,4}))?", name) if isinstance(name, str) else None
        if m is None or m.group(1) not in ALLOWED_DEVICE_TYPES:
            raise self.bad(f"device {str(name)[:40]!r} is not one of {', '.join(ALLOWED_DEVICE_TYPES)}[:index]")
        return _device(name)

    def global_ref(self, ref, module_only):
        if not (isinstance(ref, list) and len(ref) == 2 and all(isinstance(s, str) for s in ref)
                and re.fullmatch(r"[A-Za-z_][\w.]*", ref[0]) and re.fullmatch(r"[A-Za-z_][\w.]*", ref[1])):
            raise self.bad(f"a class or function name must be [module, qualname], got {str(ref)[:80]}")
        module, qual = ref
        name = f"{module}.{qual}"
        allowed = _allowed_globals()
        if name in allowed:
            obj = allowed[name]
        elif self.weights_only:
            raise CheckpointError(
                f"Weights only load failed for {self.where}: it holds a whole {qual} object (a pickled module in "
                f"PyTorch's terms). Re-running varlens.load with weights_only=False will load it, importing "
                f"the class by its name; do it only if you trust the file's source. Alternatively, "
                f"Unsupported global: GLOBAL {name} was not an allowed global by default. Please use "
                f"`varlens.serialization.add_safe_globals([{qual}])` or the "
                f"`varlens.serialization.safe_globals([{qual}])` context manager to allowlist this global if "
                f"you trust this class/function. (Or save model.state_dict() and load it into a freshly "
                f"built model.)")
        else:
            if not module_only and not (module == "varlens" or module.startswith("varlens.")):
                raise self.bad(f"it names the function {name}; functions outside varlens load only when allowed "
                               "with varlens.serialization.add_safe_globals")
            obj = _resolve(module, qual, import_=True)
            if obj is None:
                raise self.bad(f"it names {name}, which cannot be imported here")
        Module = _module_class()
        if module_only and not (isinstance(obj, type) and issubclass(obj, Module)):
            raise self.bad(f"it names {name} as a module class, but that is not a subclass of varlens.nn.Module")
        if not module_only and not (isinstance(obj, type) and issubclass(obj, Module)
                                    or isinstance(obj, (types.FunctionType, types.BuiltinFunctionType))
                                    or callable(obj) and name in allowed):
            raise self.bad(f"it names {name}, which is not a function or a varlens.nn.Module class")
        return obj

    def module(self, spec):
        if not isinstance(spec, dict):
            raise self.bad("a module entry must be an object")
        self.keys(spec, ["module", "qualname", "state", "id"])
        cls = self.global_ref([spec["module"], spec["qualname"]], module_only=True)
        m = cls.__new__(cls)          # no __init__, no __setstate__: nothing of the class runs
        self.register(spec, m)
        state = self.unpack(spec["state"])
        if not isinstance(state, dict) or not all(isinstance(k, str) for k in state):
            raise self.bad(f"the state of a {spec['qualname']} module must be a dict with string keys")
        d = m.__dict__
        d.update(state)
        for hooks in ("_forward_pre_hooks", "_forward_hooks", "_backward_hooks", "_backward_pre_hooks"):
            d.setdefault(hooks, OrderedDict())
        return m


# ---------------------------------------------------------------------- atomic write
def atomic_write_bytes(path, data):
    """Write ``data`` to ``path`` atomically (temp file, flush, fsync, rename, fsync dir).

    The temporary file is ``.NAME.XXXX.tmp`` next to ``path``; on any failure (a full disk, a
    file-size limit) it is removed and the error re-raised, and ``path`` is left as it was.  A
    symbolic link is followed (its target is replaced, the link stays); an existing device or
    FIFO (``/dev/null``) is written to directly, never replaced; a directory raises
    IsADirectoryError."""
    path = os.fspath(path)
    if os.path.islink(path):
        path = os.path.realpath(path)
    try:
        mode = os.stat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "Is a directory", path)
    if mode is not None and not stat.S_ISREG(mode):
        with open(path, "wb") as f:
            f.write(data)
        return
    d = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(d):
        raise RuntimeError(f"Parent directory {d} does not exist (cannot write {path!r}; create it first, "
                           "e.g. os.makedirs(dirname, exist_ok=True))")
    fd, tmp = tempfile.mkstemp(dir=d, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    try:
        dfd = os.open(d, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def remove_stale_temp_files(directory):
    """Remove ``.*.tmp`` files that an interrupted :func:`atomic_write_bytes` left in ``directory``
    (a kill between creating and renaming them).  Returns the removed paths."""
    removed = []
    try:
        names = os.listdir(directory)
    except OSError:
        return removed
    for n in names:
        if n.startswith(".") and n.endswith(".tmp"):
            p = os.path.join(directory, n)
            try:
                if stat.S_ISREG(os.lstat(p).st_mode):
                    os.unlink(p)
                    removed.append(p)
            except OSError:
                pass
    return removed


MAGIC = b"VARLENS-CKPT 1\n"
_HEADER = len(MAGIC) + 64 + 1


def _is_path(f):
    return isinstance(f, (str, os.PathLike))


def _json_depth(meta):
    """Maximum nesting depth of a JSON text (brackets outside strings), without parsing it;
    scanned in 16 KiB chunks so the count itself needs little memory."""
    s = re.sub(rb'"(?:[^"\\]|\\.)*"', b"", meta)
    depth = deepest = 0
    for i in range(0, len(s), 1 << 14):
        b = np.frombuffer(s, dtype=np.uint8, count=min(1 << 14, len(s) - i), offset=i)
        step = (b == 91).view(np.int8) + (b == 123).view(np.int8) - (b == 93).view(np.int8) \
            - (b == 125).view(np.int8)
        c = np.cumsum(step, dtype=np.int64) + depth
        deepest = max(deepest, int(c.max()))
        depth = int(c[-1])
    return deepest


@torch_args(wrap=False)
def save(obj, f, pickle_module=None, pickle_protocol=2, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False):
    """Save a nested structure (state dicts, tensors, arrays, numbers, strings...) or a whole
    ``nn.Module`` to ``f``.

    ``f`` is a path (``str`` or ``os.PathLike``; written atomically, and its parent directory
    must exist, as in PyTorch) or a binary file-like object with ``write`` (``io.BytesIO``,
    ``open(path, 'wb')``).  The format holds no pickle, so ``pickle_module`` and
    ``pickle_protocol`` are accepted for compatibility and have no effect.  Parameters and
    tensors that require grad load back the same way (as leaves); Tensors that are views of one
    buffer share memory again after loading.  A whole module loads back with
    ``load(f, weights_only=False)`` (see the module docstring).  Returns None (as torch.save).
    """
    if not (_is_path(f) or callable(getattr(f, "write", None))):
        raise AttributeError(f"save: expected 'f' to be a string, path, or a file-like object with a "
                             f"'write' attribute, got {type(f).__name__}")
    arrays = {}
    body = _pack(obj, arrays)
    meta = json.dumps({"format": FORMAT, "version": VERSION, "body": body},
                      allow_nan=True, separators=(",", ":")).encode()
    if _json_depth(meta) > MAX_DEPTH:
        raise ValueError(f"save: the structure is nested more than {MAX_DEPTH} levels deep in the file's "
                         "description; load would refuse it")
    buf = io.BytesIO()
    np.savez(buf, __meta__=np.frombuffer(meta, dtype=np.uint8), **arrays)
    payload = buf.getvalue()
    digest = hashlib.sha256(payload).hexdigest().encode()
    data = MAGIC + digest + b"\n" + payload
    if _is_path(f):
        atomic_write_bytes(f, data)
    else:
        f.write(data)
        if callable(getattr(f, "flush", None)):
            f.flush()


def _no_cuda(what):
    """The error for a CUDA target on a machine without CUDA (torch.load's advice: map to the CPU)."""
    return RuntimeError(f"load: {what}: device 'cuda' is not available; varlens runs on the CPU here "
                        "(varlens.cuda.is_available() is False: no CuPy or no GPU). Load with "
                        "map_location='cpu' (or map_location=varlens.device('cpu')) to put the tensors on the CPU")


def _device_name(dev, what):
    """A map_location target as a device name ('cpu', 'cuda:0'); an unavailable device raises."""
    name = str(dev)
    try:
        d = _device(name)
    except ValueError:
        raise RuntimeError(f"load: {what}: {name!r} is not a device name (expected 'cpu' or 'cuda')") from None
    if d.type == "cpu":
        return "cpu"
    if d.type != "cuda":
        raise RuntimeError(f"load: {what}: device {d.type!r} is not available; varlens runs on the CPU and, "
                           "with CuPy, on CUDA. Load with map_location='cpu'")
    if B.cuda_namespace(required=False) is None:
        raise _no_cuda(what)
    B.namespace_of_device(name)      # an index that is not there raises
    return "cuda:0"


class _Placer:
    """Where each loaded tensor goes for ``map_location`` (torch.load's forms):

    * None: back to the device it was saved from ('cpu' or 'cuda:0'); a CUDA tensor on a machine
      without CUDA raises, naming map_location='cpu' as the way out (as torch.load);
    * a device name or device object: every tensor goes there;
    * a dict {saved location: target}: locations not in it stay where they were saved;
    * a callable ``f(storage, location)``: called with the loaded (CPU) tensor and its saved
      location; a tensor returned is used, None means the default (the saved location).

    A tensor is moved by giving it the target device's array, so Parameters stay Parameters
    and leaves stay leaves."""

    def __init__(self, map_location):
        self.fixed = self.table = self.fn = None
        if map_location is None:
            pass
        elif isinstance(map_location, dict):
            self.table = {}
            for k, v in map_location.items():
                if not isinstance(k, (str, _device)) and not hasattr(k, "type"):
                    raise TypeError(f"load: map_location dict keys must be device names, got {type(k).__name__}")
                self.table[_canonical(str(k))] = v
        elif isinstance(map_location, (str, _device)) or hasattr(map_location, "type") and not callable(map_location):
            self.fixed = _device_name(map_location, f"map_location={str(map_location)!r}")
        elif callable(map_location):
            self.fn = map_location
        else:
            raise TypeError(f"load: map_location must be None, a string such as 'cpu', a device, a dict or a "
                            f"callable(storage, location); got {type(map_location).__name__}")

    def target(self, loc):
        if self.fixed is not None:
            return self.fixed
        if self.table is not None and loc in self.table:
            return _device_name(self.table[loc], f"map_location[{loc!r}]={str(self.table[loc])!r}")
        if loc == "cpu":
            return "cpu"
        if B.cuda_namespace(required=False) is None:
            raise RuntimeError("load: attempting to deserialize a tensor saved on a CUDA device, but "
                               "varlens.cuda.is_available() is False (no CuPy or no GPU). If you are running "
                               "on a CPU-only machine, load with map_location='cpu' (or "
                               "map_location=varlens.device('cpu')) to put the tensors on the CPU")
        return "cuda:0"

    def array(self, a, loc):
        where = self.target(loc)
        return a if where == "cpu" else B.to_namespace(a, B.namespace_of_device(where))

    def __call__(self, t, loc):
        if self.fn is not None:
            out = self.fn(t, loc)
            if isinstance(out, Tensor) and out is not t:   # keep the loaded object (a Parameter, a leaf)
                t._data = out._data
                return t
            if out is not None:
                return out
            if self.table is None and self.fixed is None and loc == "cpu":
                return t
        where = self.target(loc)
        if where != "cpu":
            t._data = B.to_namespace(t._data, B.namespace_of_device(where))
        return t


def _canonical(name):
    """'cuda' and 'cuda:0' are the same saved location (varlens saves from cuda:0)."""
    return "cuda:0" if name == "cuda" else name


def _placer(map_location):
    """The _Placer for ``map_location``, or None when every tensor simply stays on the CPU."""
    return _Placer(map_location)


_FILE_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISCHR, "a character device"),
               (stat.S_ISBLK, "a block device"), (stat.S_ISFIFO, "a named pipe (FIFO)"),
               (stat.S_ISSOCK, "a socket"))


def _special_kind(mode):
    for test, kind in _FILE_KINDS:
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a regular file"


def open_regular_file(path, what="file"):
    """Open ``path`` for reading in binary mode, refusing directories, devices (/dev/zero),
    FIFOs and sockets with a ValueError naming the kind; returns (file object, size in bytes)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise
    kind = _special_kind(st.st_mode)
    if kind is not None:
        raise ValueError(f"{what} {os.fspath(path)!r} is {kind}, not a regular file")
    fh = open(path, "rb")
    st = os.fstat(fh.fileno())           # the file actually opened (it may have been swapped)
    kind = _special_kind(st.st_mode)
    if kind is not None:
        fh.close()
        raise ValueError(f"{what} {os.fspath(path)!r} is {kind}, not a regular file")
    return fh, st.st_size


def _check_magic(head, where):
    if head == MAGIC:
        return
    if head.startswith(MAGIC[:8]):
        raise CheckpointError(f"checkpoint {where} is truncated or corrupted (bad header) and was refused; "
                              "use an earlier checkpoint")
    hint = ""
    if head.startswith(b"PK\x03\x04"):
        hint = " (it is a zip archive, e.g. written by torch.save: PyTorch's pickle-based files cannot be read)"
    elif head[:1] == b"\x80":
        hint = " (it looks like a pickle: pickles can run code and are never read)"
    raise CheckpointError(f"{where} is not a varlens checkpoint (it does not start with {MAGIC[:-1]!r}){hint}")


def _read_bytes(f, mmap):
    """(raw bytes, description of the source): magic bytes first, then at most the file's size."""
    if _is_path(f):
        path = os.fspath(f)
        where = repr(path)
        try:
            fh, size = open_regular_file(path, "checkpoint")
        except FileNotFoundError:
            raise CheckpointNotFoundError(
                f"checkpoint {path!r} does not exist (no such file or directory; current directory "
                f"{os.getcwd()!r})") from None
        except ValueError as e:      # a directory, device, FIFO or socket (PermissionError propagates)
            raise CheckpointError(f"{e}; it was refused") from None
        with fh:
            _check_magic(fh.read(len(MAGIC)), where)
            fh.seek(0)
            raw = fh.read(size)
        return raw, where
    if callable(getattr(f, "read", None)):
        if mmap:
            raise ValueError("load: mmap=True needs 'f' to be a file path, got a file-like object")
        where = f"the {type(f).__name__} object"
        head = f.read(len(MAGIC))
        if not head:
            raise CheckpointError(f"load: {where} is empty at its current position; after writing to it, "
                                  "call .seek(0) before loading")
        if not isinstance(head, bytes):
            raise CheckpointError(f"load: {where} returned {type(head).__name__}, not bytes; open the file in "
                                  "binary mode ('rb')")
        _check_magic(head, where)
        return head + f.read(), where
    raise AttributeError(f"load: expected 'f' to be a string, path, or a file-like object with a 'read' "
                         f"attribute, got {type(f).__name__}")


_ENTRY = re.compile(r"(__meta__|a\d{1,9})\.npy")
_DESCR = re.compile(r"[<>|=]?[biufc]\d{1,2}")


def _npy(data, name, bad, as_bytes=False):
    """The array of one ``.npy`` entry, checked (header, dtype, shape against the bytes present)
    before anything is allocated; the result owns its memory.  ``as_bytes``: the data bytes of a
    1-d uint8 entry (the description) instead."""
    if data[:6] != b"\x93NUMPY" or len(data) < 10:
        raise bad(f"entry {name} is not a .npy array")
    major = data[6]
    if major == 1:
        hlen, start = int.from_bytes(data[8:10], "little"), 10
    elif major in (2, 3) and len(data) >= 12:
        hlen, start = int.from_bytes(data[8:12], "little"), 12
    else:
        raise bad(f"entry {name} has .npy version {major}")
    if hlen > 4096 or start + hlen > len(data):
        raise bad(f"entry {name} declares a {hlen}-byte header; the entry holds {len(data)} bytes")
    try:
        header = ast.literal_eval(data[start:start + hlen].decode("latin1" if major < 3 else "utf-8"))
    except Exception as e:   # noqa: BLE001 - any parse failure of a hostile header is a refusal
        raise bad(f"entry {name} has an unreadable .npy header ({type(e).__name__})") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise bad(f"entry {name}: a .npy header must hold exactly descr, fortran_order and shape")
    descr, fortran, shape = header["descr"], header["fortran_order"], header["shape"]
    if not isinstance(descr, str) or not _DESCR.fullmatch(descr):
        raise bad(f"entry {name}: dtype {str(descr)[:40]!r} is not allowed (only {', '.join(ALLOWED_DTYPES)})")
    dt = np.dtype(descr)
    if dt.name not in ALLOWED_DTYPES:
        raise bad(f"entry {name}: dtype {dt} is not allowed (only {', '.join(ALLOWED_DTYPES)})")
    if not isinstance(fortran, bool):
        raise bad(f"entry {name}: fortran_order must be True or False")
    if not (isinstance(shape, tuple) and len(shape) <= MAX_NDIM
            and all(type(n) is int and n >= 0 for n in shape)):
        raise bad(f"entry {name}: shape {str(shape)[:80]} is not a tuple of at most {MAX_NDIM} non-negative ints")
    count, extent = 1, dt.itemsize
    for n in shape:
        count *= n
        extent *= max(n, 1)
    if extent >= 2 ** 62:        # NumPy refuses such shapes even with no elements
        raise bad(f"entry {name}: shape {shape} is too large")
    present = len(data) - start - hlen
    if count * dt.itemsize != present:
        raise bad(f"entry {name} declares shape {shape} of {dt} ({count * dt.itemsize} bytes) but holds "
                  f"{present} bytes")
    if as_bytes:
        if dt != np.uint8 or len(shape) != 1:
            raise bad(f"entry {name} is not a 1-d uint8 array")
        return data[start + hlen:]
    a = np.frombuffer(data, dtype=dt, count=count, offset=start + hlen)
    a = a.reshape(shape, order="F" if fortran else "C")
    if not dt.isnative:
        return a.astype(dt.newbyteorder("="), order="C")
    return a.copy(order="C")


def _read_archive(raw, where):
    """(arrays by name, meta bytes) of the zip archive after the header, every entry checked."""
    def bad(msg):
        return CheckpointError(f"checkpoint {where} has a valid checksum but is malformed and was refused: {msg}")
    try:
        zf = zipfile.ZipFile(io.BytesIO(raw))      # the 80-byte header before the zip is allowed for
    except Exception as e:   # noqa: BLE001 - zipfile raises many types for hostile bytes
        raise bad(f"not a readable zip archive ({type(e).__name__}: {str(e)[:200]})") from None
    with zf:
        infos = zf.infolist()
        total, names = 0, set()
        for zi in infos:
            name = zi.filename
            if not _ENTRY.fullmatch(name):
                raise bad(f"unexpected entry {name[:60]!r} (expected __meta__.npy, a0.npy, a1.npy, ...)")
            if name in names:
                raise bad(f"entry {name} appears twice")
            names.add(name)
            if zi.flag_bits & 0x1:
                raise bad(f"entry {name} is encrypted")
            if zi.compress_type != zipfile.ZIP_STORED:
                raise bad(f"entry {name} is compressed (method {zi.compress_type}); varlens writes and reads "
                          "only stored (uncompressed) entries, so no entry can inflate beyond the file")
            if zi.file_size != zi.compress_size:
                raise bad(f"entry {name} declares {zi.file_size} bytes but stores {zi.compress_size}")
            total += zi.compress_size
            if zi.header_offset + zi.compress_size > len(raw) or total > len(raw):
                raise bad(f"entry {name} declares {zi.compress_size} bytes at offset {zi.header_offset}, beyond "
                          f"the file's {len(raw)} bytes")
        if "__meta__.npy" not in names:
            raise bad("it has no __meta__ entry")
        arrays = {}
        for zi in infos:
            try:
                data = zf.read(zi)
            except Exception as e:   # noqa: BLE001 - bad local headers, CRC errors, ...
                raise bad(f"entry {zi.filename} cannot be read ({type(e).__name__}: {str(e)[:200]})") from None
            arrays[zi.filename[:-4]] = _npy(data, zi.filename, bad, as_bytes=zi.filename == "__meta__.npy")
            del data
    return arrays, arrays.pop("__meta__"), bad


@torch_args(wrap=False)
def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, **pickle_load_args):
    """Load what ``save`` wrote, from a path or a binary file-like object with ``read``.

    Refuses truncated, altered, malformed or foreign files with ``CheckpointError`` naming the
    file and the problem (memory used stays below 4 x the file size + 1 MiB; see the module
    docstring for the checks); a missing path raises ``CheckpointNotFoundError``, a
    ``FileNotFoundError``.  Returns tensors, arrays and plain data only; nothing in the file is
    executed.  ``weights_only`` (default True, as torch 2.6+): a file holding a whole
    ``nn.Module`` is refused unless its classes are allowed (:func:`add_safe_globals`);
    ``weights_only=False`` loads it by importing its class by name (trust the file first).
    ``map_location``: as torch.load (see ``_Placer``): None puts each tensor back on the device it
    was saved from, a device (or name) puts every tensor there, a dict maps saved locations, a
    callable(storage, location) decides per tensor.  ``mmap`` is accepted for
    paths and ignored (the file is read into memory); ``pickle_module`` and extra pickle
    arguments are accepted and ignored.
    """
    if weights_only not in (None, True, False):
        raise TypeError(f"load: weights_only must be None, True or False, got {weights_only!r}")
    place = _placer(map_location)
    raw, where = _read_bytes(f, mmap)
    if len(raw) < _HEADER or raw[_HEADER - 1:_HEADER] != b"\n":
        raise CheckpointError(f"checkpoint {where} is truncated or corrupted (bad header) and was refused; "
                              "use an earlier checkpoint")
    if hashlib.sha256(memoryview(raw)[_HEADER:]).hexdigest().encode() != raw[len(MAGIC):_HEADER - 1]:
        raise CheckpointError(f"checkpoint {where} is truncated or corrupted: its SHA-256 checksum does not "
                              f"match ({len(raw)} bytes read); it was refused, use an earlier checkpoint")
    arrays, meta_bytes, bad = _read_archive(raw, where)
    del raw
    try:
        meta_bytes.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("its description is not UTF-8 text") from None
    depth = _json_depth(meta_bytes)
    if depth > MAX_DEPTH:
        raise bad(f"its description is nested {depth} levels deep (at most {MAX_DEPTH})")
    try:
        meta = json.loads(meta_bytes)
    except (ValueError, RecursionError) as e:
        raise bad(f"its description is not valid JSON ({type(e).__name__}: {str(e)[:200]})") from None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        fmt = meta.get("format") if isinstance(meta, dict) else None
        raise CheckpointError(f"{where} is not a varlens checkpoint (format {str(fmt)[:40]!r})")
    version = meta.get("version", 0)
    if type(version) is not int:
        raise bad(f"its format version {str(version)[:20]!r} is not an integer")
    if version > VERSION:
        raise CheckpointError(f"checkpoint {where} has format version {version}; this varlens "
                              f"reads up to {VERSION}")
    if "body" not in meta:
        raise bad("its description has no body")
    u = _Unpacker(arrays, where, place, weights_only is not False)
    try:
        return u.unpack(meta["body"])
    except RecursionError:
        raise bad("it is nested too deeply") from None
