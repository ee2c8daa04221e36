"""Tensor: an array, its gradient, and the edge to the op that made it.

A Tensor wraps one backend array (``_data``).  If it was produced by a recorded
op, ``_node`` is that op's Function instance (``grad_fn``); leaves have no node.
Methods and operators are thin: each calls one op from ``varlens.ops``.
"""
from __future__ import annotations

import builtins

import numpy as _np

from varlens.core.arg_rules import torch_args
from varlens.core import array as B
from varlens.core import graph_nodes as _graph_nodes
from varlens.core import dtypes as DT
from varlens.core import grad_mode as _gm

_enabled = _gm._enabled
xp = B.xp
_F32 = xp.dtype("float32")
_I64 = xp.dtype("int64")


class Tensor:
    """A multi-dimensional array that can record operations for automatic differentiation.

    Build one with ``varlens.tensor(data)``; ``Tensor(data)`` also works and, as in
    PyTorch, makes a floating tensor of the default dtype.
    """

    __slots__ = ("_data", "grad", "_rg", "_node", "_version", "hooks_", "__weakref__", "__dict__")
    # NumPy: ``ndarray + Tensor`` defers to our reflected operators because of the high
    # __array_priority__ (NumPy's legacy binop rule); ufuncs (np.exp(t)) read the array
    # through __array__ and __array_wrap__ gives a Tensor back, as with torch.
    __array_priority__ = 1000

    def __init__(self, data=None, *sizes, dtype=None, requires_grad=False):
        if data is None:
            data = []
        if sizes or (isinstance(data, (builtins.int, _np.integer)) and not isinstance(data, builtins.bool)):
            # torch.Tensor(2, 3): an (uninitialised in torch, zero here) tensor of that size
            data = xp.zeros(_size((data,) + sizes), dtype=DT.to_dtype(dtype) or DT.get_default_dtype())
        if isinstance(data, Tensor):
            data = data._data
        arr = B.as_array(data, dtype)
        if dtype is None and arr.dtype.kind in "iub" and not isinstance(data, _np.ndarray):
            arr = arr.astype(DT.get_default_dtype())  # torch.Tensor([1, 2]) is a float tensor
        self._data = arr
        self.grad = None
        self._node = None
        self._version = [0]
        self.hooks_ = None
        self._rg = False
        if requires_grad:
            self.requires_grad_(True)

    @classmethod
    def _make(cls, data, node=None):
        """Fast internal constructor: wrap an array (with the node that made it, if any).
        Function.apply (core/function.py) sets the same fields inline: keep the two in step."""
        t = object.__new__(Tensor)
        t._data = data
        t.grad = None
        t._node = node
        t._rg = node is not None
        t._version = [0]
        t.hooks_ = None
        return t

    # ------------------------------------------------------------------ attributes
    @property
    def shape(self):
        return Size(self._data.shape)

    def size(self, dim=None):
        if dim is None:
            return Size(self._data.shape)
        try:
            return self._data.shape[dim]
        except (IndexError, TypeError):
            nd = max(self._data.ndim, 1)
            if not isinstance(dim, builtins.int) or isinstance(dim, builtins.bool):
                raise TypeError(f"size(): argument 'dim' must be int, not {type(dim).__name__} ({dim!r})") from None
            if self._data.ndim == 0 and dim in (0, -1):
                raise RuntimeError("size(): a 0-d tensor has no dimensions (dim specified for a scalar)") from None
            raise IndexError(f"size(): Dimension out of range (expected to be in range of [{-nd}, {nd - 1}], "
                             f"but got {dim})") from None

    @property
    def ndim(self):
        return self._data.ndim

    def dim(self):
        return self._data.ndim

    def numel(self):
        return int(self._data.size)

    nelement = numel

    @property
    def dtype(self):
        return self._data.dtype

    @property
    def device(self):
        return _CPU if self._data.__class__ is _np.ndarray else _device_of(self._data)

    @property
    def is_cuda(self):
        return self.device.type == "cuda"

    @property
    def is_cpu(self):
        return self.device.type == "cpu"

    def get_device(self):
        """The CUDA device index, or -1 for a CPU tensor (as torch)."""
        d = self.device
        return -1 if d.type == "cpu" else (d.index or 0)

    @property
    def requires_grad(self):
        return self._rg

    @requires_grad.setter
    def requires_grad(self, value):
        self.requires_grad_(value)

    def requires_grad_(self, requires_grad=True):
        if requires_grad and self._data.dtype.kind not in "fc":
            raise RuntimeError(
                f"requires_grad: only floating-point tensors can require gradients; this tensor has "
                f"dtype {self._data.dtype} (integer and bool tensors hold indices and masks, which "
                f"have no derivative). Convert it first, e.g. x.float()")
        if not requires_grad and self._node is not None:
            raise RuntimeError("requires_grad_(False) is only valid on leaf tensors; use detach()")
        self._rg = bool(requires_grad)
        return self

    @property
    def is_leaf(self):
        return self._node is None

    @property
    def grad_fn(self):
        return self._node

    @property
    def data(self):
        """A tensor sharing this one's array but outside the graph (as torch's .data)."""
        t = Tensor._make(self._data)
        t._version = self._version
        return t

    @data.setter
    def data(self, value):
        arr = value._data if isinstance(value, Tensor) else B.as_array(value)
        self._data = arr

    @property
    def T(self):
        return self.permute(*range(self.ndim - 1, -1, -1))

    @property
    def mT(self):
        return self.transpose(-2, -1)

    # ------------------------------------------------------------------ conversion
    def numpy(self, *, force=False):
        if self._rg and not force:
            raise RuntimeError("numpy(): can't call numpy() on a tensor that requires grad; "
                               "use tensor.detach().numpy()")
        if self._data.__class__ is not _np.ndarray and B.is_device_array(self._data):
            if force:
                return B.to_host(self._data)
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
                            "copy the tensor to host memory first.")
        return self._data

    def item(self):
        if self._data.size != 1:
            raise RuntimeError(f"a Tensor with {self._data.size} elements cannot be converted to Scalar "
                               f"(item() needs exactly one element; shape {tuple(self.shape)})")
        return self._data.reshape(()).item()

    def __format__(self, spec):
        """A 0-d tensor formats as its Python number (f"{loss:.4f}"), as in torch; others as str()."""
        if self._data.ndim == 0:
            return self._data.item().__format__(spec)
        return object.__format__(self, spec)

    def tolist(self):
        return self._data.tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __index__(self):
        if self._data.dtype.kind not in "iu" or self._data.size != 1:
            raise TypeError("only integer tensors of a single element can be converted to an index")
        return int(self.item())

    def __bool__(self):
        if self._data.size != 1:
            raise RuntimeError(f"Boolean value of a tensor with {self._data.size} elements is ambiguous "
                               "(use .any() or .all())")
        return bool(self._data.reshape(()).item())

    def __len__(self):
        if self._data.ndim == 0:
            raise TypeError("len() of a 0-d tensor")
        return self._data.shape[0]

    def __iter__(self):
        if self._data.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self._data.shape[0]))

    __hash__ = object.__hash__  # identity (C-level: tensors key optimiser state and hook tables)

    def __array__(self, dtype=None, copy=None):
        if self._rg:
            raise RuntimeError("Can't call numpy() on Tensor that requires grad. "
                               "Use tensor.detach().numpy() instead.")
        if self._data.__class__ is not _np.ndarray and B.is_device_array(self._data):
            raise TypeError(f"can't convert {self.device} device type tensor to numpy. Use Tensor.cpu() to "
                            "copy the tensor to host memory first.")
        a = self._data if dtype is None else self._data.astype(dtype)
        return a.copy() if copy else a

    def __array_wrap__(self, arr, context=None, return_scalar=False):
        return Tensor._make(_np.asarray(arr))

    def __repr__(self):
        d = self._data
        extras = []
        if d.__class__ is not _np.ndarray and B.is_device_array(d):
            d = B.to_host(d)   # printing reads the values: a copy to the host, as torch's
            extras.append(f"device='{self.device}'")
        if d.size == 0:
            body = "[]"
            if d.shape != (0,):
                extras.append(f"size={tuple(d.shape)}")
        else:
            body = _tensor_body(d, _PRINT)
        # (an empty tensor names every dtype but the default float one, as torch's repr)
        if d.dtype != DT.get_default_dtype() and (d.size == 0 or d.dtype not in (DT.int64, DT.bool_)):
            extras.append(f"dtype=varlens.{d.dtype}")
        if self._node is not None:
            extras.append(f"grad_fn=<{_graph_nodes.node_name(self._node)}>")
        elif self._rg:
            extras.append("requires_grad=True")
        out = "tensor(" + body
        last = len(out) - out.rfind("\n") + 1 if "\n" in out else len(out) + 1
        for e in extras:  # a suffix that would overflow the line goes on its own line (as torch)
            if last + len(e) + 2 > _PRINT["linewidth"]:
                out += ",\n       " + e
                last = 7 + len(e)
            else:
                out += ", " + e
                last += len(e) + 2
        return out + ")"

    __str__ = __repr__

    # ------------------------------------------------------------------ autograd
    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        """Accumulate the gradient of this tensor into the ``.grad`` of every leaf it depends on."""
        # The one call from the core's ground floor up to the engine (which imports this module
        # for the Tensor class): imported here, at call time, so the import graph has no cycle.
        from varlens.core import engine
        engine.backward([self], [gradient], retain_graph, create_graph, inputs)

    def detach(self):
        t = Tensor._make(self._data)
        t._version = self._version
        return t

    def detach_(self):
        if self._node is not None:
            self._node = None
        self._rg = False
        return self

    def retain_grad(self):
        """Keep ``.grad`` on a non-leaf tensor after backward (a second call changes nothing)."""
        if self._node is None or self.__dict__.get("_retains"):
            return
        self.__dict__["_retains"] = True
        import weakref
        ref = weakref.ref(self)

        def _keep(g):
            t = ref()
            if t is not None:
                t.grad = g.detach() if t.grad is None else t.grad + g.detach()
        self.register_hook(_keep)

    @property
    def retains_grad(self):
        """True for a non-leaf tensor whose ``.grad`` is kept (``retain_grad()`` was called)."""
        return self._node is not None and bool(self.__dict__.get("_retains"))

    def register_hook(self, hook):
        """Call ``hook(grad)`` when this tensor's gradient is computed; a return value replaces it."""
        if not self._rg:
            raise RuntimeError("register_hook: cannot register a hook on a tensor that doesn't require grad")
        if self._node is not None:
            if self._node.hooks is None:
                self._node.hooks = []
            self._node.hooks.append(hook)
            lst = self._node.hooks
        else:
            if self.hooks_ is None:
                self.hooks_ = []
            self.hooks_.append(hook)
            lst = self.hooks_
        return _HookHandle(lst, hook)

    def register_post_accumulate_grad_hook(self, hook):
        """Call ``hook(tensor)`` after a gradient has been added into this leaf's ``.grad``.
        varlens calls it once per gradient delivered to the leaf (once per backward for a
        leaf used once; torch sums a leaf's contributions first and calls it once)."""
        if self._node is not None:
            raise RuntimeError("post accumulate grad hooks cannot be registered on non-leaf tensors")
        if not self._rg:
            raise RuntimeError("register_post_accumulate_grad_hook: cannot register a hook on a tensor "
                               "that doesn't require grad")
        if self.hooks_ is None:
            self.hooks_ = []  # a list, even empty, routes this leaf through the engine's hook path
        lst = self.__dict__.setdefault("_post_accumulate_grad_hooks", [])
        lst.append(hook)
        return _HookHandle(lst, hook)

    def storage_offset(self):
        """How many elements into the underlying buffer this tensor starts (a slice's offset)."""
        a = self._data
        root = a
        while isinstance(root.base, _np.ndarray):
            root = root.base
        off = a.__array_interface__["data"][0] - root.__array_interface__["data"][0]
        return builtins.int(off // a.itemsize) if a.itemsize else 0

    # ------------------------------------------------------------------ dtype / device
    def type(self, dtype=None):
        if dtype is None:
            return f"varlens.{self.dtype}"
        if isinstance(dtype, str):
            name = dtype.rsplit(".", 1)[-1]
            dt = _LEGACY_TYPES.get(name, name if name in _DTYPE_NAMES else None)
            if dt is None:
                raise ValueError(f"invalid type: {dtype!r} (type(): expected a dtype, a dtype name or a legacy "
                                 f"tensor type name such as 'torch.FloatTensor')")
            dtype = getattr(DT, "bool_" if dt == "bool" else dt)
        return self.to(dtype)

    def float(self):
        # already float32 (the common call in user code): the tensor itself, as to() returns it
        return self if self._data.dtype is _F32 else self.to(DT.float32)

    def double(self):
        return self.to(DT.float64)

    def half(self):
        return self.to(DT.float16)

    def long(self):
        return self if self._data.dtype is _I64 else self.to(DT.int64)

    def int(self):
        return self.to(DT.int32)

    def bool(self):
        return self.to(DT.bool_)

    def is_floating_point(self):
        return self._data.dtype.kind == "f"

    def is_contiguous(self):
        return bool(self._data.flags.c_contiguous)

    def element_size(self):
        return self._data.itemsize

    def new_tensor(self, data, dtype=None, device=None, requires_grad=False):
        return tensor(data, dtype=dtype or self.dtype, requires_grad=requires_grad,
                      device=self.device if device is None else device)

    def _new_lib(self, device):
        return B.namespace(self._data) if device is None else B.namespace_of_device(device)

    def new_zeros(self, *size, dtype=None, device=None, requires_grad=False):
        t = Tensor._make(self._new_lib(device).zeros(_size(size), dtype=DT.to_dtype(dtype) or self.dtype))
        return t.requires_grad_(requires_grad)

    def new_ones(self, *size, dtype=None, device=None, requires_grad=False):
        t = Tensor._make(self._new_lib(device).ones(_size(size), dtype=DT.to_dtype(dtype) or self.dtype))
        return t.requires_grad_(requires_grad)

    def new_full(self, size, fill_value, dtype=None, device=None, requires_grad=False):
        t = Tensor._make(self._new_lib(device).full(_size((size,)), fill_value,
                                                    dtype=DT.to_dtype(dtype) or self.dtype))
        return t.requires_grad_(requires_grad)

    def new_empty(self, *size, dtype=None, device=None, requires_grad=False):
        t = Tensor._make(self._new_lib(device).empty(_size(size), dtype=DT.to_dtype(dtype) or self.dtype))
        return t.requires_grad_(requires_grad)


_LEGACY_TYPES = {"FloatTensor": "float32", "DoubleTensor": "float64", "HalfTensor": "float16",
                 "LongTensor": "int64", "IntTensor": "int32", "ShortTensor": "int16", "CharTensor": "int8",
                 "ByteTensor": "uint8", "BoolTensor": "bool"}
_DTYPE_NAMES = {"float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8", "bool",
                "half", "float", "double", "short", "int", "long"}


DeviceUnavailableError = B.DeviceUnavailableError


def _no_device(what, name):
    return DeviceUnavailableError(f"Torch not compiled with CUDA enabled: {what}: device {name!r} is not available; "
                                  "varlens runs on the CPU through NumPy (only 'cpu' is accepted)")


class device:
    """A device name (torch.device).  Only ``device('cpu')`` can hold tensors; other names
    can be built (so ``device('cuda' if cuda.is_available() else 'cpu')`` runs) but moving a
    tensor there raises a clear error."""

    def __init__(self, type="cpu", index=None):  # noqa: A002
        if isinstance(type, device):
            type, index = type.type, type.index
        t = str(type)
        if ":" in t:
            t, i = t.split(":", 1)
            index = int(i)
        self.type, self.index = t, index

    def __str__(self):
        return self.type if self.index is None else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type={self.type!r}" + ("" if self.index is None else f", index={self.index}") + ")"

    def __eq__(self, other):
        return str(self) == str(other)

    def __hash__(self):
        return hash(str(self))


class Size(tuple):
    """Shape of a tensor: a tuple (as torch.Size).  Slicing it, or adding a tuple, gives a Size."""

    __slots__ = ()   # (no per-instance dict: one is made for every x.shape / x.size())

    def __getitem__(self, key):
        if key.__class__ is slice:
            return Size(tuple.__getitem__(self, key))
        return tuple.__getitem__(self, key)

    def __add__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(self) + tuple(other))

    def __radd__(self, other):
        if not isinstance(other, tuple):
            return NotImplemented
        return Size(tuple(other) + tuple(self))

    def numel(self):
        n = 1
        for s in self:
            n *= s
        return n

    def __repr__(self):
        return f"varlens.Size({list(self)})"


class _HookHandle:
    def __init__(self, lst, hook):
        self._lst, self._hook = lst, hook

    def remove(self):
        if self._hook in self._lst:
            self._lst.remove(self._hook)


_CPU = device("cpu")
_CUDA0 = device("cuda", 0)


def _device_of(a):
    """The device an array lives on (a device array is on cuda:0; varlens drives one GPU per process)."""
    return _CUDA0 if B.is_device_array(a) else _CPU


def parse_to(args, kwargs):
    """The (dtype, device) asked for by ``.to(...)`` arguments (Tensor.to and Module.to); either
    is None when not asked.  Accepts dtypes, dtype names, a tensor (its dtype and device), and
    devices (names, indices or ``device`` objects); a device that is not available raises."""
    dtype = kwargs.get("dtype")
    dev = kwargs.get("device")
    for a in args:
        if isinstance(a, Tensor):
            dtype, dev = a.dtype, a.device
        elif isinstance(a, str) and a.rsplit(".", 1)[-1] in _DTYPE_NAMES:
            name = a.rsplit(".", 1)[-1]
            dtype = getattr(DT, "bool_" if name == "bool" else name)
        elif isinstance(a, (str, device)):
            dev = a
        elif a is None:
            continue
        elif isinstance(a, (builtins.int, _np.integer)) and not isinstance(a, builtins.bool):
            if B.cuda_namespace(required=False) is None:
                raise RuntimeError(f"to(): an int argument ({a}) is read as a CUDA device index, and no CUDA "
                                   "device is available; pass a dtype (varlens.float32, ...), a device "
                                   "('cpu') or a Tensor")
            dev = f"cuda:{int(a)}"   # an int is an accelerator index, as in torch
        elif isinstance(a, builtins.bool) or not (isinstance(a, (_np.dtype, type)) or hasattr(a, "is_floating_point")
                                                  or type(a).__module__.startswith("torch")):
            raise TypeError(f"to() received an invalid combination of arguments - got ({type(a).__name__}): "
                            f"expected a dtype (varlens.float32, ...), a device ('cpu', 'cuda') or a Tensor, "
                            f"got {a!r}")
        else:
            dtype = a
    if dev is not None:
        B.namespace_of_device(dev)   # raises for a device that is not there
    return dtype, dev


def _size(size):
    """Accept f(2, 3), f((2, 3)) and f([2, 3]) like PyTorch factory functions."""
    if len(size) == 1 and isinstance(size[0], (tuple, list, Size)):
        size = tuple(size[0])
    out = []
    for s in size:
        if isinstance(s, Tensor):
            s = int(s)
        if not isinstance(s, (builtins.int, _np.integer)) or isinstance(s, builtins.bool):
            raise TypeError(f"size: expected integers, got {type(s).__name__} ({s!r})")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)} (size: "
                               f"expected non-negative dimensions)")
        out.append(builtins.int(s))
    return tuple(out)


@torch_args(wrap=False)
def tensor(data, dtype=None, requires_grad=False, device=None):
    """Build a tensor from Python data or an array (copies, as torch.tensor does).

    Python floats become the default float dtype (float32), integers int64, bools bool.
    """
    lib = B.namespace_of_device(device)
    if lib is not _np:
        t = tensor(data, dtype=dtype)
        t._data = B.to_namespace(t._data, lib)
        return t.requires_grad_(requires_grad) if requires_grad else t
    if isinstance(dtype, str):
        raise TypeError(f"tensor(): argument 'dtype' must be torch.dtype, not str ({dtype!r}; write "
                        f"varlens.{dtype.rsplit('.', 1)[-1]})")
    if isinstance(data, Tensor):
        arr = data._data.astype(DT.to_dtype(dtype) or data._data.dtype, copy=True)
    elif isinstance(data, (list, tuple)) and any(isinstance(x, Tensor) for x in _flat(data)):
        flat = list(_flat(data))
        if dtype is None and all(isinstance(x, Tensor) for x in flat):
            dts = {x._data.dtype for x in flat}
            dtype = dts.pop() if len(dts) == 1 else None  # a list of float64 tensors stays float64
        arr = B.as_array(_untensor(data), dtype)
    else:
        try:
            arr = B.as_array(data, dtype)
        except ValueError as e:
            if isinstance(data, (list, tuple)):
                _check_ragged(data, 0)
            raise ValueError(f"tensor(): could not convert data of type {type(data).__name__} ({e})") from None
        if arr is data:
            arr = arr.copy()
    t = Tensor._make(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _check_ragged(seq, dim):
    """Raise torch's error for nested lists whose rows differ in length (``[[1, 2], [3]]``)."""
    lens = [len(x) if isinstance(x, (list, tuple)) else None for x in seq]
    if not seq:
        return
    first = lens[0]
    for x, n in zip(seq, lens):
        if n != first:
            raise ValueError(f"tensor(): expected sequence of length {first} at dim {dim + 1} (got {n}); "
                             "nested lists must be rectangular" if first is not None and n is not None else
                             f"tensor(): nested lists must be rectangular: at dim {dim + 1} some entries are "
                             "sequences and some are numbers")
    if first is not None:
        for x in seq:
            _check_ragged(x, dim + 1)


def _untensor(x):
    """Nested lists with Tensors replaced by Python numbers/lists (so default dtypes apply)."""
    if isinstance(x, Tensor):
        return x._data.tolist()
    if isinstance(x, (list, tuple)):
        return [_untensor(y) for y in x]
    return x


def _flat(x):
    for y in x:
        if isinstance(y, (list, tuple)):
            yield from _flat(y)
        else:
            yield y

_PRINT_DEFAULT = {"precision": 4, "threshold": 1000, "edgeitems": 3, "linewidth": 80, "sci_mode": None}
_PRINT = dict(_PRINT_DEFAULT)


def _tensor_body(d, po):
    """The bracketed numbers of a tensor repr, laid out as torch does: one width for every
    entry, as many entries per line as fit in ``linewidth``, the middle elided with '...'
    when there are more than ``threshold`` elements."""
    summarize = d.size > po["threshold"]
    e = po["edgeitems"]
    if d.dtype.kind == "f":
        fmt = _float_formatter(d, po)
    else:
        a = d
        if summarize and a.ndim:
            idx = [_np.r_[0:e, n - e:n] if n > 2 * e else _np.arange(n) for n in a.shape]
            a = a[_np.ix_(*idx)]
        w = max((len(str(v)) for v in a.ravel().tolist()), default=1)

        def fmt(x):
            return str(x).rjust(w)
        fmt.width = w
    width = fmt.width

    def vec(v, indent):
        per_line = max(1, (po["linewidth"] - indent) // (width + 2))
        n = v.shape[0]
        if summarize and n > 2 * e:
            items = [fmt(x) for x in v[:e].tolist()] + [" ..."] + [fmt(x) for x in v[n - e:].tolist()]
        else:
            items = [fmt(x) for x in v.tolist()]
        lines = [", ".join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"

    def rec(a, indent):
        if a.ndim == 0:
            return fmt(a.item())
        if a.ndim == 1:
            return vec(a, indent)
        n = a.shape[0]
        if summarize and n > 2 * e:
            parts = [rec(a[i], indent + 1) for i in range(e)] + ["..."] + \
                    [rec(a[i], indent + 1) for i in range(n - e, n)]
        else:
            parts = [rec(a[i], indent + 1) for i in range(n)]
        return "[" + ("," + "\n" * (a.ndim - 1) + " " * (indent + 1)).join(parts) + "]"
    return rec(d, 7)


def _float_formatter(d, po):
    """Number formatting of float tensors as torch prints them: one width for all entries;
    whole numbers as '2.'; otherwise ``precision`` decimals ('0.2500'), or scientific
    notation when the non-zero magnitudes span more than 1e3, exceed 1e8 or go below 1e-4."""
    p, e = po["precision"], po["edgeitems"]
    a = d
    if a.size > po["threshold"] and a.ndim:  # only the printed corners decide the layout
        idx = [_np.r_[0:e, n - e:n] if n > 2 * e else _np.arange(n) for n in a.shape]
        a = a[_np.ix_(*idx)]
    v = a[_np.isfinite(a) & (a != 0)].astype(_np.float64).ravel()
    int_mode, sci, width = True, False, 1
    if v.size:
        av = _np.abs(v)
        lo, hi = float(av.min()), float(av.max())
        int_mode = bool((v == _np.ceil(v)).all())
        sci = hi / lo > 1000.0 or hi > 1.0e8 or (not int_mode and lo < 1.0e-4)
        if po["sci_mode"] is not None:
            sci = bool(po["sci_mode"])
        if sci:
            width = max(len(f"{x:.{p}e}") for x in v.tolist())
        elif int_mode:
            width = max(len(f"{x:.0f}") + 1 for x in v.tolist())
        else:
            width = max(len(f"{x:.{p}f}") for x in v.tolist())
    elif po["sci_mode"] is not None:
        sci = bool(po["sci_mode"])

    def fmt(x):
        x = float(x)
        if sci:
            r = f"{x:.{p}e}"
        elif int_mode:
            r = f"{x:.0f}" + ("." if _np.isfinite(x) else "")
        else:
            r = f"{x:.{p}f}"
        return r.rjust(width)
    fmt.width = width
    return fmt


@torch_args(wrap=False)
def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """torch.set_printoptions: digits, summarisation threshold, edge items and line width of
    tensor reprs.  profile is 'default', 'short' (2 digits) or 'full' (no summarising).
    The numbers are laid out by NumPy, so the spacing can differ from torch's."""
    if profile is not None:
        if profile not in ("default", "short", "full"):
            raise ValueError(f"set_printoptions: profile must be 'default', 'short' or 'full', got {profile!r}")
        _PRINT.update(_PRINT_DEFAULT)
        if profile == "short":
            _PRINT.update(precision=2, threshold=1000, edgeitems=2)
        elif profile == "full":
            _PRINT.update(threshold=_np.iinfo(_np.int64).max)
    for k, v in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                 ("linewidth", linewidth)):
        if v is not None:
            if not isinstance(v, (builtins.int, _np.integer)) or v < 0:
                raise ValueError(f"set_printoptions: {k} must be a non-negative int, got {v!r}")
            _PRINT[k] = builtins.int(v)
    _PRINT["sci_mode"] = sci_mode


def get_printoptions():
    return dict(_PRINT)
