"""A simulated CUDA array library: CuPy's rules, NumPy's arithmetic (ground floor, varlens.core).

Machines without a GPU (these, and CI) cannot run CuPy, yet the GPU path of every op must stay
honest there.  This module is a stand-in array library with the same namespace as NumPy/CuPy
(``sim.exp``, ``sim.zeros``, ``sim.random``, ``sim.linalg``, ...) whose arrays, ``SimArray``,
live on a pretend device.  The numbers are NumPy's; what is simulated is the *boundary*:

* **Wrong library.**  A NumPy function given a device array raises ``WrongArrayLibrary``
  (``np.exp(a)``, ``np.sum(a)``, ``np.asarray(a)``, SciPy, numba all reach NumPy), so an op that
  computes with NumPy where its inputs live on the device fails in the tests instead of silently
  copying to the host.  Only a binary operator between a device array and a *scalar* passes
  (``np.float32(2) * a``), as it does with CuPy.
* **Mixed devices.**  A host ``ndarray`` given to a device function or operator raises TypeError,
  as CuPy does ("Unsupported type <class 'numpy.ndarray'>").  ``sim.asarray(host)`` is the copy
  to the device, as ``cupy.asarray``.
* **Host synchronisation.**  Reading a value on the host (``item()``, ``float(a)``, ``bool(a)``,
  ``tolist()``, ``get()``, ``sim.asnumpy``) is a synchronisation.  Each one is counted in
  ``host_syncs[0]``; inside ``forbid_host_sync()`` it raises ``HostSyncError``, so a training
  step can be checked to run without one (no ``.item()``, boolean-mask indexing, or host copy).
* **Only CuPy's names.**  The namespace, ``random``, ``linalg``, ``fft``, ``lib.stride_tricks``,
  ``special``, the device arrays' methods, the random Generator's and RandomState's methods and
  the ufuncs' methods (``add.at``, ``maximum.accumulate``, ...) are restricted to what CuPy v13
  offers (core/cupy_api.py, read from CuPy's source); keywords CuPy's functions do not take
  (``where=``, ``initial=``, ``mode=``, ``kind=`` on ``ndarray.argsort``) and Python lists given
  to a ufunc raise TypeError, so code that needs a NumPy-only name fails here as on a GPU.

Results keep CuPy's shapes: a full reduction gives a 0-d device array, never a host scalar.
``varlens.cuda.simulate()`` makes this library the ``cuda`` device (core/array.py).
"""
from __future__ import annotations

import contextlib
import types

import numpy as _np

from varlens.core import cupy_api as _api

host_syncs = [0]          # host synchronisations so far (item(), float(), tolist(), get(), ...)
_forbid = [0]             # > 0 inside forbid_host_sync()
allocated = [0, 0]        # [bytes now held by live device arrays (approximate), peak]


class WrongArrayLibrary(TypeError):
    """NumPy (or a library built on it) was handed a device array."""


class HostSyncError(RuntimeError):
    """A device value was read on the host where no synchronisation is allowed."""


@contextlib.contextmanager
def forbid_host_sync():
    """Inside this block any host synchronisation raises HostSyncError."""
    _forbid[0] += 1
    try:
        yield
    finally:
        _forbid[0] -= 1


def _sync(what):
    if _forbid[0]:
        raise HostSyncError(f"{what} on a CUDA (simulated) array synchronises with the host, which is "
                            "not allowed here (a training step should not read device values)")
    host_syncs[0] += 1


def _unwrap(x, where):
    """The NumPy array inside a device array; host arrays are refused (CuPy's rule)."""
    c = x.__class__
    if c is SimArray:
        return x._a
    if c is _np.ndarray:
        if x.ndim == 0:   # a 0-d host array acts as a scalar
            return x
        raise TypeError(f"Unsupported type {c} in {where}: a host (NumPy) array was mixed with a CUDA "
                        "array; move it to the device first (asarray / Tensor.to('cuda'))")
    if c is list or c is tuple:
        return c(_unwrap(e, where) for e in x)
    return x


def _wrap(r):
    c = r.__class__
    if c is _np.ndarray:
        return SimArray(r)
    if isinstance(r, _np.generic):
        return SimArray(_np.asarray(r))
    if c is tuple or c is list:
        return c(_wrap(e) for e in r)
    if isinstance(r, tuple) and hasattr(r, "_fields"):   # NumPy's named results (linalg.qr, svd, ...)
        return c(*(_wrap(e) for e in r))
    return r


def _device_fn(fn, name, refused=None, accepted=None):
    """``fn`` on device arrays; keyword arguments in ``refused``, or outside ``accepted``, raise
    TypeError as CuPy's function would."""
    def f(*args, **kwargs):
        if kwargs and ((refused is not None and not refused.isdisjoint(kwargs))
                       or (accepted is not None and not accepted.issuperset(kwargs))):
            bad = sorted(set(kwargs) - accepted if accepted is not None else refused.intersection(kwargs))[0]
            raise TypeError(f"{name}() got an unexpected keyword argument {bad!r} (simulated: CuPy's {name} lacks it)")
        args = [_unwrap(a, name) for a in args]
        kwargs = {k: _unwrap(v, name) for k, v in kwargs.items()}
        return _wrap(fn(*args, **kwargs))
    f.__name__ = name
    f.__qualname__ = name
    f.__doc__ = f"The device version of numpy.{name} (simulated)."
    return f


_SCALAR_UFUNC_OK = {"add", "subtract", "multiply", "true_divide", "divide", "floor_divide", "power",
                    "remainder", "greater", "greater_equal", "less", "less_equal", "equal",
                    "not_equal", "maximum", "minimum", "logical_and", "logical_or", "bitwise_and",
                    "bitwise_or", "bitwise_xor"}


class SimArray:
    """An array on the simulated CUDA device.  It behaves like a ``cupy.ndarray``: methods and
    operators give device arrays, NumPy refuses it, reading a value on the host is counted."""

    __slots__ = ("_a", "__weakref__")
    __array_priority__ = 2000

    def __init__(self, a):
        if a.__class__ is not _np.ndarray:
            a = _np.asarray(a)      # NumPy gives scalars from 0-d math; CuPy keeps 0-d arrays
        self._a = a
        n = a.nbytes if a.base is None else 0
        if n:
            allocated[0] += n
            if allocated[0] > allocated[1]:
                allocated[1] = allocated[0]

    def __reduce__(self):
        """copy.deepcopy / pickle rebuild the array through __init__, so its bytes are counted."""
        return (SimArray, (self._a,))

    def __del__(self):
        try:
            if self._a.base is None:
                allocated[0] -= self._a.nbytes
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    # -- NumPy must not compute with it ------------------------------------------------
    def __array__(self, dtype=None, copy=None):
        raise WrongArrayLibrary("Implicit conversion to a NumPy array is not allowed: this array lives on "
                                "the CUDA (simulated) device. Use .get() or asnumpy() to copy it to the "
                                "host explicitly (in varlens: Tensor.cpu())")

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method == "__call__" and ufunc.__name__ in _SCALAR_UFUNC_OK and not kwargs and len(inputs) == 2:
            others = [i for i in inputs if i is not self]
            if all(isinstance(o, (int, float, complex, bool, _np.generic)) for o in others):
                return _wrap(ufunc(*[i._a if i.__class__ is SimArray else i for i in inputs]))
        raise WrongArrayLibrary(f"numpy.{ufunc.__name__} was called on a CUDA (simulated) array: the op "
                                "computes with NumPy where its inputs live on the device; use the array "
                                "namespace of the inputs (varlens.core.array.namespace)")

    def __array_function__(self, func, types, args, kwargs):
        raise WrongArrayLibrary(f"numpy.{func.__name__} was called on a CUDA (simulated) array: the op "
                                "computes with NumPy where its inputs live on the device; use the array "
                                "namespace of the inputs (varlens.core.array.namespace)")

    # -- attributes and methods: NumPy's, on the device --------------------------------
    shape = property(lambda self: self._a.shape)
    dtype = property(lambda self: self._a.dtype)
    ndim = property(lambda self: self._a.ndim)
    size = property(lambda self: self._a.size)
    itemsize = property(lambda self: self._a.itemsize)
    nbytes = property(lambda self: self._a.nbytes)
    strides = property(lambda self: self._a.strides)
    flags = property(lambda self: _Flags(self._a.flags))
    T = property(lambda self: SimArray(self._a.T))
    real = property(lambda self: SimArray(self._a.real))
    imag = property(lambda self: SimArray(self._a.imag))

    @property
    def base(self):
        b = self._a.base
        return None if b is None else SimArray(b) if isinstance(b, _np.ndarray) else b

    @property
    def device(self):
        return _DEVICE

    @property
    def mT(self):
        raise AttributeError("'cupy.ndarray' object has no attribute 'mT' (simulated: CuPy lacks it before v14)")

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in _api.NDARRAY:
            raise AttributeError(f"'cupy.ndarray' object has no attribute {name!r} (simulated: CuPy lacks it)")
        attr = getattr(self._a, name)
        if callable(attr):
            return _device_fn(attr, name, _api.NDARRAY_REFUSED_KWARGS.get(name))
        return _wrap(attr)

    def __len__(self):
        return len(self._a)

    def __iter__(self):
        return (SimArray(_np.asarray(e)) for e in self._a)

    def __getitem__(self, key):
        return _wrap(self._a[_index(key)])

    def __setitem__(self, key, value):
        self._a[_index(key)] = _unwrap(value, "__setitem__")

    def __repr__(self):
        return f"array({_np.array2string(self._a, separator=', ')}, device='cuda:0' (simulated))"

    # -- host reads: synchronisations --------------------------------------------------
    def get(self, stream=None, order="C", out=None):
        _sync("get()")
        return self._a.copy()

    def item(self, *args):
        _sync("item()")
        return self._a.item(*args)

    def tolist(self):
        _sync("tolist()")
        return self._a.tolist()

    def tobytes(self, order="C"):
        _sync("tobytes()")
        return self._a.tobytes(order)

    def __float__(self):
        _sync("float()")
        return float(self._a)

    def __int__(self):
        _sync("int()")
        return int(self._a)

    def __index__(self):
        _sync("index()")
        return self._a.__index__()

    def __complex__(self):
        _sync("complex()")
        return complex(self._a)

    def __bool__(self):
        _sync("bool()")
        return bool(self._a)

    def __format__(self, spec):
        _sync("format()")
        return self._a.__format__(spec)


def _index(key):
    """An index for a device array: device arrays unwrapped; a boolean mask is a synchronisation
    (the result's size depends on the values), as on a GPU."""
    if key.__class__ is tuple:
        return tuple(_index(k) for k in key)
    if key.__class__ is SimArray:
        if key._a.dtype == _np.bool_ and key._a.ndim:
            _sync("boolean-mask indexing")
        return key._a
    return key


def _binop(name):
    op = getattr(_np.ndarray, name)

    def f(self, other):
        o = _unwrap(other, name)
        if isinstance(o, _np.ndarray) and o.ndim and other.__class__ is not SimArray:
            return NotImplemented
        r = op(self._a, o)
        return r if r is NotImplemented else _wrap(r)
    f.__name__ = name
    return f


for _n in ("add", "radd", "sub", "rsub", "mul", "rmul", "truediv", "rtruediv", "floordiv", "rfloordiv",
           "mod", "rmod", "pow", "rpow", "matmul", "rmatmul", "and", "rand", "or", "ror", "xor", "rxor",
           "lshift", "rlshift", "rshift", "rrshift", "lt", "le", "gt", "ge", "eq", "ne",
           "iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor"):
    _dn = f"__{_n}__"
    if _n.startswith("i"):
        def _inplace(self, other, _op=getattr(_np.ndarray, _dn)):
            _op(self._a, _unwrap(other, "in-place operator"))
            return self
        setattr(SimArray, _dn, _inplace)
    else:
        setattr(SimArray, _dn, _binop(_dn))

for _n in ("neg", "pos", "abs", "invert"):
    setattr(SimArray, f"__{_n}__", lambda self, _op=getattr(_np.ndarray, f"__{_n}__"): SimArray(_op(self._a)))

SimArray.__hash__ = None


# ---------------------------------------------------------------- the namespace

class _Namespace(types.ModuleType):
    """``sim``: NumPy's functions, taking and giving device arrays; dtypes and constants as NumPy's.
    Only the names CuPy's module ``label`` has (``allowed``) are served."""

    def __init__(self, name, source, label="cupy", allowed=_api.NAMESPACE):
        super().__init__(name)
        self._source, self._label, self._allowed = source, label, allowed

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        if name not in self._allowed:
            raise AttributeError(f"module {self._label!r} has no attribute {name!r} (simulated: CuPy lacks it)")
        attr = getattr(self._source, name)
        if isinstance(attr, (type, _np.dtype, int, float, types.ModuleType)) or attr is None:
            if isinstance(attr, types.ModuleType):
                sub = f"{self._label}.{name}"
                attr = _Namespace(f"{self.__name__}.{name}", attr, sub, _SUBMODULES.get(sub, frozenset()))
            elif attr is _np.ndarray:
                attr = SimArray
            setattr(self, name, attr)
            return attr
        if isinstance(attr, _np.ufunc):
            f = _Ufunc(attr)
        elif callable(attr):
            key = name if self._label == "cupy" else f"{self._label[5:]}.{name}"
            f = _device_fn(attr, name, accepted=_api.KEYWORDS.get(key))
        else:
            return attr
        setattr(self, name, f)
        return f


class _Ufunc:
    """A NumPy ufunc on device arrays, with its methods (``add.at``, ``maximum.reduce``, ...)."""

    def __init__(self, uf):
        self._uf = uf
        self.__name__ = uf.__name__
        self.__call__ = _device_fn(uf, uf.__name__)
        for m in ("at", "reduce", "accumulate", "outer", "reduceat"):
            ok = _api.UFUNC_METHODS[m]
            if ok is None or uf.__name__ in ok:
                setattr(self, m, _device_fn(getattr(uf, m), f"{uf.__name__}.{m}"))
            else:
                setattr(self, m, _unsupported(f"{uf.__name__}.{m}"))
        self.nin, self.nout = uf.nin, uf.nout

    def __call__(self, *args, **kwargs):
        for a in args:
            if a.__class__ is list or a.__class__ is tuple:   # CuPy's ufuncs take arrays and scalars only
                raise TypeError(f"Unsupported type {a.__class__} (simulated: CuPy's ufunc {self.__name__} "
                                "takes no Python sequence; make it an array first)")
        return self.__dict__["__call__"](*args, **kwargs)


def _unsupported(what):
    def f(*args, **kwargs):
        raise NotImplementedError(f"`{what}` is not supported yet (simulated: CuPy raises this)")
    return f


_SUBMODULES = {"cupy.random": _api.RANDOM, "cupy.linalg": _api.LINALG, "cupy.fft": _api.FFT,
               "cupy.lib": frozenset({"stride_tricks"}), "cupy.lib.stride_tricks": _api.STRIDE_TRICKS}


class _Flags:
    """CuPy's flags: contiguity and ownership only (no ``writeable``)."""

    def __init__(self, f):
        self.c_contiguous, self.f_contiguous, self.owndata = f.c_contiguous, f.f_contiguous, f.owndata

    def __getitem__(self, k):
        return getattr(self, {"C_CONTIGUOUS": "c_contiguous", "F_CONTIGUOUS": "f_contiguous",
                              "OWNDATA": "owndata"}[k])


sim = _Namespace("varlens_simulated_cuda", _np)
sim.ndarray = SimArray
sim.simulated = True
sim.errstate = _np.errstate     # not CuPy's: core/array.py adds it to CuPy too


def _asarray(a, dtype=None, order=None, **_):
    """Copy host data to the device (cupy.asarray); a device array stays (cast if asked)."""
    if a.__class__ is SimArray:
        return a if dtype is None or a.dtype == dtype else SimArray(a._a.astype(dtype))
    return SimArray(_np.array(a, dtype=dtype, order=order or "K", copy=True))


def _array(a, dtype=None, copy=True, **_):
    if a.__class__ is SimArray:
        return SimArray(a._a.astype(dtype or a.dtype, copy=True))
    return SimArray(_np.array(a, dtype=dtype, copy=True))


def asnumpy(a, stream=None, out=None):
    """Copy a device array to the host (cupy.asnumpy): a synchronisation."""
    if a.__class__ is SimArray:
        _sync("asnumpy()")
        return a._a.copy()
    return _np.asarray(a)


def get_array_module(*arrays):
    return sim if any(a.__class__ is SimArray for a in arrays) else _np


def _syncing(name):
    f = _device_fn(getattr(_np, name), name)

    def g(*args, **kwargs):
        _sync(f"{name}() (its result's size depends on the values)")
        return f(*args, **kwargs)
    g.__name__ = name
    return g


for _n in ("nonzero", "flatnonzero", "argwhere", "unique", "extract", "compress"):
    setattr(sim, _n, _syncing(_n))

sim.asarray = _asarray
sim.ascontiguousarray = lambda a, dtype=None: SimArray(_np.ascontiguousarray(_unwrap(_asarray(a), "ascontiguousarray"), dtype=dtype))
sim.array = _array
sim.asnumpy = asnumpy
sim.get_array_module = get_array_module


class _Generator:
    """A device random generator (cupy.random.Generator): draws on the device.  The stream is
    NumPy's PCG64 under another seed offset, so a seed gives device draws that differ from the
    CPU's, as in PyTorch (CPU and CUDA generators are separate)."""

    def __init__(self, seed=None):
        self._g = _np.random.default_rng(None if seed is None else [int(seed), 0x0C0DA])

    def __getattr__(self, name):
        if name not in _api.GENERATOR_METHODS:
            raise AttributeError(f"'cupy.random.Generator' object has no attribute {name!r} "
                                 "(simulated: CuPy lacks it)")
        f = _device_fn(getattr(self._g, name), name)
        if name in ("random", "standard_normal", "uniform"):
            def f(*args, _f=f, dtype=_np.float64, **kwargs):
                if _np.dtype(dtype).char not in "fd":
                    raise TypeError(f"cupy.random.Generator.{name}: dtype must be float32 or float64, got {dtype}")
                if name == "uniform":      # (NumPy's uniform has no dtype)
                    return _f(*args, **kwargs).astype(dtype, copy=False)
                return _f(*args, dtype=dtype, **kwargs)
        return f


class _RandomState:
    """cupy.random.RandomState (the legacy, stable API): NumPy's RandomState under another seed
    offset; its draws take ``dtype`` as CuPy's do."""

    def __init__(self, seed=None, method=None):
        self._r = _np.random.RandomState(None if seed is None else (int(seed) + 0x0C0DA) % 2 ** 32)
        self.method = method

    def __getattr__(self, name):
        if name not in _api.RANDOM_STATE_METHODS:
            raise AttributeError(f"'cupy.random.RandomState' object has no attribute {name!r} "
                                 "(simulated: CuPy lacks it)")
        f = _device_fn(getattr(self._r, name), name)

        def g(*args, dtype=None, **kwargs):
            r = f(*args, **kwargs)
            return r if dtype is None else r.astype(dtype, copy=False)
        return g


def _default_rng(seed=None):
    return _Generator(seed)


sim.random = _Namespace("varlens_simulated_cuda.random", _np.random, "cupy.random", _api.RANDOM)
sim.random.default_rng = _default_rng
sim.random.Generator = _Generator
sim.random.RandomState = _RandomState


class _Special(types.ModuleType):
    """``cupyx.scipy.special``'s stand-in: SciPy's functions on device arrays."""

    def __getattr__(self, name):
        if name not in _api.SPECIAL:
            raise AttributeError(f"module 'cupyx.scipy.special' has no attribute {name!r} (simulated: CuPy lacks it)")
        import scipy.special as sp
        f = _device_fn(getattr(sp, name), name)
        setattr(self, name, f)
        return f


sim.special = _Special("varlens_simulated_cuda.special")


class _Device:
    id = 0

    def __repr__(self):
        return "<CUDA Device 0 (simulated)>"

    def synchronize(self):
        pass


_DEVICE = _Device()
