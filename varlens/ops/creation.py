"""Factory functions: zeros, ones, full, arange, linspace, eye, randn, rand, randint, *_like.

Each takes PyTorch's ``device=`` and makes its array directly with that device's library
(``B.namespace_of_device``: NumPy, or CuPy / the simulator on "cuda"), never on the host and
then copied; ``*_like`` keep the input's device unless ``device=`` is given.  Random draws on a
device come from that device's generator (varlens.random.generator_for)."""
from __future__ import annotations

from varlens.core.arg_rules import torch_args
from varlens.core import array as B
from varlens.core import dtypes as DT
from varlens.core.array import xp
from varlens.random import generator_for
from varlens.core.tensor import _LEGACY_TYPES, Tensor, _size
from varlens.ops._args import _tensor
from varlens.ops.pointwise import cast
from varlens.ops.pointwise import clone
from varlens.ops.shape import expand
import math
from varlens.ops.shape import reshape
from varlens.core.tensor import tensor
from varlens.ops.pointwise import torch_dtype_name


def _finish(arr, requires_grad):
    t = Tensor._make(arr)
    if requires_grad:
        t.requires_grad_(True)
    return t


def _dt(dtype, where):
    """A dtype argument as np.dtype (None stays None).  torch accepts only dtype objects, so a
    string such as 'float32' is refused as torch refuses it (write varlens.float32)."""
    if dtype is None:
        return None
    if isinstance(dtype, str):
        raise TypeError(f"{where}(): argument 'dtype' must be torch.dtype, not str ({dtype!r}; write "
                        f"varlens.{dtype.rsplit('.', 1)[-1]})")
    if isinstance(dtype, DT.UnsupportedDtype):
        return DT.to_dtype(dtype)   # a torch dtype NumPy lacks: its TypeError says why
    try:
        return DT.to_dtype(dtype)
    except TypeError:
        raise TypeError(f"{where}(): argument 'dtype' must be torch.dtype, not {type(dtype).__name__} "
                        f"({dtype!r})") from None


def _float_dtype(dtype, where="factory"):
    return _dt(dtype, where) or DT.get_default_dtype()


def _random_float_dtype(dtype, where):
    dt = _float_dtype(dtype, where)
    if dt.kind not in "fc":
        raise NotImplementedError(f"{where}: random floats are not implemented for '{torch_dtype_name(dt)}' "
                                  f"(dtype={dt}); expected a floating-point dtype such as varlens.float32, got {dt}")
    return dt


def _lib(device):
    """The array library of a ``device=`` argument (None: the CPU; an int: that CUDA index, as torch)."""
    if device.__class__ is int:
        device = f"cuda:{device}"
    return B.namespace_of_device(device)


def _like_lib(x, device):
    """``device`` given: its library; else the library of ``x``'s array (the input's device)."""
    if device is not None:
        return _lib(device)
    return B.namespace(x._data if isinstance(x, Tensor) else x)


def _int_arg(v, name, where):
    if isinstance(v, Tensor):
        v = v.item()
    if not isinstance(v, (int, xp.integer)) or isinstance(v, bool):
        raise TypeError(f"{where}(): argument '{name}' must be int, not {type(v).__name__} ({v!r})")
    return int(v)


def zeros(*size, dtype=None, requires_grad=False, device=None):
    return _finish(_lib(device).zeros(_size(size), dtype=_float_dtype(dtype, "zeros")), requires_grad)


def ones(*size, dtype=None, requires_grad=False, device=None):
    return _finish(_lib(device).ones(_size(size), dtype=_float_dtype(dtype, "ones")), requires_grad)


def empty(*size, dtype=None, requires_grad=False, device=None):
    return _finish(_lib(device).empty(_size(size), dtype=_float_dtype(dtype, "empty")), requires_grad)


def full(size, fill_value, dtype=None, requires_grad=False, device=None):
    if isinstance(fill_value, (str, bytes)) or fill_value is None:
        raise TypeError(f"full(): argument 'fill_value' (position 2) must be Number, not "
                        f"{type(fill_value).__name__} ({fill_value!r})")
    if dtype is None:
        dtype = (DT.bool_ if isinstance(fill_value, bool) else
                 DT.int64 if isinstance(fill_value, int) else DT.get_default_dtype())
    return _finish(_lib(device).full(_size((size,)), fill_value, dtype=_dt(dtype, "full")), requires_grad)


# *_like: the result is on x's device unless device= is given; layout and memory_format are
# torch's keywords: varlens has one layout (strided arrays), so they are accepted and change nothing
@torch_args(tensor_first=True)
def zeros_like(x, dtype=None, requires_grad=False, *, layout=None, device=None, memory_format=None):
    return _finish(_like_lib(x, device).zeros(x.shape, dtype=_dt(dtype, "zeros_like") or x.dtype), requires_grad)


@torch_args(tensor_first=True)
def ones_like(x, dtype=None, requires_grad=False, *, layout=None, device=None, memory_format=None):
    return _finish(_like_lib(x, device).ones(x.shape, dtype=_dt(dtype, "ones_like") or x.dtype), requires_grad)


@torch_args(tensor_first=True)
def empty_like(x, dtype=None, requires_grad=False, *, layout=None, device=None, memory_format=None):
    return _finish(_like_lib(x, device).empty(x.shape, dtype=_dt(dtype, "empty_like") or x.dtype), requires_grad)


@torch_args(tensor_first=True)
def full_like(x, fill_value, dtype=None, requires_grad=False, *, layout=None, device=None,
              memory_format=None):
    return _finish(_like_lib(x, device).full(x.shape, fill_value, dtype=_dt(dtype, "full_like") or x.dtype),
                   requires_grad)


def arange(start=0, end=None, step=1, dtype=None, requires_grad=False, device=None):
    if end is None:
        start, end = 0, start
    start, end, step = (v.item() if isinstance(v, Tensor) else v for v in (start, end, step))
    if step == 0:
        raise RuntimeError("arange: step must be nonzero (got step=0)")
    if (end - start) * step < 0:
        raise RuntimeError(f"arange: upper bound and larger bound inconsistent with step sign "
                           f"(start={start}, end={end}, step={step})")
    if dtype is None:
        ints = all(isinstance(v, int) for v in (start, end, step))
        dtype = DT.int64 if ints else DT.get_default_dtype()
    return _finish(_lib(device).arange(start, end, step, dtype=_dt(dtype, "arange")), requires_grad)


def linspace(start, end, steps, dtype=None, requires_grad=False, device=None):
    steps = _int_arg(steps, "steps", "linspace")
    if steps < 0:
        raise RuntimeError(f"linspace: number of steps must be non-negative, got steps={steps}")
    start, end = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    return _finish(_lib(device).linspace(start, end, steps, dtype=_float_dtype(dtype, "linspace")), requires_grad)


def eye(n, m=None, dtype=None, requires_grad=False, device=None):
    n = _int_arg(n, "n", "eye")
    if n < 0:
        raise RuntimeError(f"eye: n must be greater or equal to 0, got {n}")
    if m is not None:
        m = _int_arg(m, "m", "eye")
        if m < 0:
            raise RuntimeError(f"eye: m must be greater or equal to 0, got {m}")
    return _finish(_lib(device).eye(n, m, dtype=_float_dtype(dtype, "eye")), requires_grad)


def randn(*size, generator=None, dtype=None, requires_grad=False, device=None):
    g = generator_for(_lib(device), generator)
    return _finish(g.normal(0.0, 1.0, _size(size)).astype(_random_float_dtype(dtype, "randn")), requires_grad)


def rand(*size, generator=None, dtype=None, requires_grad=False, device=None):
    g = generator_for(_lib(device), generator)
    return _finish(g.random(_size(size)).astype(_random_float_dtype(dtype, "rand")), requires_grad)


def randint(low=0, high=None, size=None, generator=None, dtype=None, device=None, requires_grad=False):
    """Integers drawn uniformly from [low, high): randint(low, high, size) or randint(high, size)."""
    if size is None and isinstance(high, (tuple, list)):
        low, high, size = 0, low, high          # torch.randint(high, size)
    if high is None:
        low, high = 0, low
    if size is None:
        raise TypeError("randint: size must be given, e.g. randint(0, 10, (3,)) or randint(10, (3,))")
    low, high = (int(v.item()) if isinstance(v, Tensor) else v for v in (low, high))
    if not low < high:
        raise RuntimeError(f"randint: expects 'low' to be less than 'high', but got low={low} >= high={high}")
    if requires_grad:
        raise RuntimeError("randint: only floating-point tensors can require gradients (randint makes integers)")
    g = generator_for(_lib(device), generator)
    return _finish(g.integers(low, high, _size((size,))).astype(_dt(dtype, "randint") or DT.int64), False)


def randperm(n, generator=None, dtype=None, device=None):
    n = _int_arg(n, "n", "randperm")
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}] (randperm: expected "
                           f"n >= 0)")
    g = generator_for(_lib(device), generator)
    return _finish(g.permutation(n).astype(_dt(dtype, "randperm") or DT.int64), False)


def _like_device(x, device):
    return device if device is not None or not isinstance(x, Tensor) else x.device


@torch_args(tensor_first=True)
def randn_like(x, generator=None, dtype=None, requires_grad=False, *, layout=None, device=None,
              memory_format=None):
    _random_float_dtype(dtype or x.dtype, "randn_like")
    return randn(*x.shape, generator=generator, dtype=dtype or x.dtype, requires_grad=requires_grad,
                 device=_like_device(x, device))


@torch_args(tensor_first=True)
def rand_like(x, generator=None, dtype=None, requires_grad=False, *, layout=None, device=None,
              memory_format=None):
    _random_float_dtype(dtype or x.dtype, "rand_like")
    return rand(*x.shape, generator=generator, dtype=dtype or x.dtype, requires_grad=requires_grad,
                device=_like_device(x, device))


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, requires_grad=False, out=None,
           device=None):
    """Samples from N(mean, std^2), as torch.normal: mean and std may be numbers or tensors (the result
    takes their broadcast shape and the tensor's dtype); with two numbers, ``size`` is required."""
    if out is not None:
        raise TypeError("normal: out= is not supported in varlens")
    mt, st = isinstance(mean, Tensor), isinstance(std, Tensor)
    if mt or st:
        if size is not None:
            raise TypeError("normal: size= is only accepted when mean and std are both numbers")
        m = mean._data if mt else mean
        s = std._data if st else std
        lib = B.namespace(*(a for a in (m, s) if B.is_array(a)))   # the tensors' device (two: torch's error)
        if lib is xp:     # a value check reads the host: on a device it is skipped (docs/conventions.md)
            if bool((xp.asarray(s) < 0).any()):
                bad = float(xp.asarray(s).min())
                raise RuntimeError(f"normal expects std >= 0.0, but found std {bad:g}")
        for name, v in (("mean", mean), ("std", std)):
            if isinstance(v, Tensor) and v.dtype.kind != "f":
                raise RuntimeError(f"normal: {name} must be a floating-point tensor, got dtype {v.dtype}")
        ms, ss = tuple(getattr(m, "shape", ())), tuple(getattr(s, "shape", ()))
        try:
            shape = xp.broadcast_shapes(ms, ss)
        except ValueError:
            raise RuntimeError(f"normal: mean of shape {ms} and std of shape {ss} do not broadcast") from None
        dt = DT.to_dtype(dtype) or (mean.dtype if mt else std.dtype)
        g = generator_for(lib, generator)
        arr = (g.normal(0.0, 1.0, shape) * s + m).astype(dt)
        return _finish(arr, requires_grad)
    if size is None:
        raise TypeError("normal: size must be given when mean and std are numbers, e.g. normal(0., 1., size=(3,))")
    if std < 0:
        raise RuntimeError(f"normal expects std >= 0.0, but found std {std:g}")
    g = generator_for(_lib(device), generator)
    return _finish(g.normal(mean, std, _size((size,))).astype(_float_dtype(dtype)), requires_grad)


@torch_args(tensor_first=True)
def bernoulli(p, generator=None):
    """0/1 draws with probabilities ``p`` (p's dtype and device)."""
    pa = p._data
    g = generator_for(B.namespace(pa), generator)
    return _finish((g.random(pa.shape) < pa).astype(pa.dtype), False)


@torch_args(tensor_first=True)
def multinomial(input, num_samples, replacement=False, *, generator=None, out=None):
    """Draw ``num_samples`` category indices per row of the non-negative weights ``input`` (1-D
    (C,) or 2-D (N, C); they need not sum to 1), as torch.multinomial.  With replacement:
    inverse-CDF sampling; without: the Gumbel-top-k trick (each draw removes its category).
    Same seed, same draws on every machine, but not PyTorch's draws."""
    if out is not None:
        raise TypeError("multinomial: out= is not supported in varlens")
    w = input._data if isinstance(input, Tensor) else xp.asarray(input)
    lib = B.namespace(w)
    if w.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: input must be 1-D or 2-D (categories last), got shape {tuple(w.shape)}")
    if w.dtype.kind != "f":
        raise RuntimeError(f"multinomial: input must be a floating-point tensor of weights, got dtype {w.dtype}")
    n = int(num_samples)
    if n <= 0:
        raise RuntimeError(f"multinomial: num_samples must be positive, got {num_samples}")
    w2 = w.reshape(1, -1) if w.ndim == 1 else w
    C = w2.shape[1]
    host = lib is xp      # the value checks read the host: on a device they are skipped (docs/conventions.md)
    # (one pass over the weights: w >= 0 is False for NaN, -inf and negatives; a +inf left makes
    # its row's float64 total inf)
    bad = host and not bool((w2 >= 0).all())
    tot = None if bad else w2.sum(axis=1, dtype=xp.float64)
    if bad or (host and not bool(xp.isfinite(tot).all())):
        raise RuntimeError("multinomial: probability tensor contains either inf, nan or element < 0")
    if host and bool((tot <= 0).any()):
        raise RuntimeError("multinomial: each row of input must have a positive sum (all weights were 0)")
    g = generator_for(lib, generator)
    if replacement:
        cdf = lib.cumsum(w2, axis=1, dtype=xp.float64) / tot[:, None]
        u = g.random((w2.shape[0], n))
        if host:
            idx = xp.stack([xp.searchsorted(c, r, side="right") for c, r in zip(cdf, u)])
        else:   # one search over all rows: row i's CDF shifted to [i, i + 1] keeps the whole sequence sorted
            off = lib.arange(w2.shape[0], dtype=xp.float64)[:, None]
            idx = lib.searchsorted((cdf + off).ravel(), (u + off).ravel(), side="right").reshape(u.shape)
            idx = idx - (off * C).astype(idx.dtype)
        idx = lib.minimum(idx, C - 1)  # rounding at the top of the CDF
    else:
        if n > C:
            raise RuntimeError(f"multinomial: cannot sample num_samples={n} > {C} categories without replacement")
        if host and n > 1 and bool(((w2 > 0).sum(axis=1) < n).any()):   # (n = 1: the sum check did it)
            raise RuntimeError("multinomial: invalid distribution (with replacement=False, not enough "
                               f"categories with non-zero weight to draw {n})")
        with lib.errstate(divide="ignore"):
            keys = lib.log(w2.astype(xp.float64)) - lib.log(-lib.log(g.random(w2.shape)))
        if n == 1:   # the first largest key, as the stable sort below would give it
            idx = keys.argmax(axis=1)[:, None]
        else:
            idx = lib.argsort(-keys, axis=1, kind="stable")[:, :n]
    idx = idx.astype(DT.int64)
    return _finish(idx[0] if w.ndim == 1 else idx, False)


def from_numpy(a):
    """Wrap a NumPy array without copying (they share memory, as torch.from_numpy)."""
    if not isinstance(a, xp.ndarray):
        raise TypeError(f"from_numpy(): expected np.ndarray (got {type(a).__name__})")
    return Tensor._make(xp.asarray(a))


def as_tensor(data, dtype=None, device=None):
    """``data`` as a tensor, sharing memory where it can (a tensor of the asked dtype and device is
    returned as is; a NumPy array is wrapped); on another device, a copy there (torch.as_tensor)."""
    dtype = _dt(dtype, "as_tensor")
    lib = None if device is None else _lib(device)
    if isinstance(data, Tensor):
        out = data
        if lib is not None and B.namespace(data._data) is not lib:
            out = data.to(device)
        if dtype is not None and DT.to_dtype(dtype) != out.dtype:
            out = out.to(dtype)
        return out
    arr = B.as_array(data, dtype)
    if lib is not None and B.namespace(arr) is not lib:
        arr = B.to_namespace(arr, lib)
    return Tensor._make(arr)


class _LegacyType(type):
    """Metaclass of the legacy constructors (torch.FloatTensor, ..., and torch.cuda.FloatTensor, ...):
    calling one builds a tensor of that dtype on that device type from data or sizes;
    isinstance(t, FloatTensor) checks the dtype and the device type (a CUDA float tensor is a
    cuda.FloatTensor, not a FloatTensor, as in torch)."""

    def __call__(cls, *args, **kwargs):
        device = kwargs.pop("device", None)
        if device is not None and _device_type(device) != cls._device_type:
            raise RuntimeError(f"legacy constructor expects device type: {cls._device_type} but device type: "
                               f"{_device_type(device)} was passed")
        if cls._device_type != "cpu":
            if B.cuda_namespace(required=False) is None:
                raise TypeError(f"type {cls._torch_name} not available. Torch not compiled with CUDA enabled. "
                                "(varlens computes on CUDA through CuPy: varlens.cuda.is_available() is False)")
            device = cls._device_type
        lib = _lib(device)
        if kwargs:
            raise TypeError(f"{cls.__name__}: unexpected keyword arguments {sorted(kwargs)}")
        dt = DT.to_dtype(cls._dtype)
        if not args:
            return Tensor._make(lib.zeros((0,), dtype=dt))
        if all(isinstance(a, int) and not isinstance(a, bool) for a in args) or (
                len(args) == 1 and type(args[0]).__name__ == "Size"):
            return Tensor._make(lib.zeros(_size(args), dtype=dt))  # torch leaves them uninitialised
        if len(args) != 1:
            raise TypeError(f"{cls.__name__}: expected a sequence of numbers or integer sizes, got {args!r}")
        return tensor(args[0], dtype=dt, device=device)

    def __instancecheck__(cls, obj):
        return (isinstance(obj, Tensor) and obj.dtype == DT.to_dtype(cls._dtype)
                and obj.device.type == cls._device_type)


def _device_type(device):
    return "cuda" if device.__class__ is int else str(getattr(device, "type", device)).partition(":")[0]


def _legacy(name, dtype, device_type="cpu"):
    """The legacy constructor ``name`` (torch.FloatTensor, or with device_type 'cuda' torch.cuda.FloatTensor)."""
    torch_name = f"torch.{name}" if device_type == "cpu" else f"torch.{device_type}.{name}"
    return _LegacyType(name, (), {"_dtype": dtype, "_device_type": device_type, "_torch_name": torch_name,
                                  "__doc__": f"Legacy constructor: {name}(data) or {name}(*sizes) makes a {dtype} "
                                             f"tensor on the {device_type} device (as {torch_name})."})


FloatTensor = _legacy("FloatTensor", _LEGACY_TYPES["FloatTensor"])
DoubleTensor = _legacy("DoubleTensor", _LEGACY_TYPES["DoubleTensor"])
HalfTensor = _legacy("HalfTensor", _LEGACY_TYPES["HalfTensor"])
LongTensor = _legacy("LongTensor", _LEGACY_TYPES["LongTensor"])
IntTensor = _legacy("IntTensor", _LEGACY_TYPES["IntTensor"])
ShortTensor = _legacy("ShortTensor", _LEGACY_TYPES["ShortTensor"])
CharTensor = _legacy("CharTensor", _LEGACY_TYPES["CharTensor"])
ByteTensor = _legacy("ByteTensor", _LEGACY_TYPES["ByteTensor"])
BoolTensor = _legacy("BoolTensor", _LEGACY_TYPES["BoolTensor"])


def logspace(start, end, steps, base=10.0, *, dtype=None, requires_grad=False, device=None):
    """``steps`` points base**t for t evenly spaced from start to end (float32 by default)."""
    if not isinstance(steps, int) or steps < 0:
        raise RuntimeError(f"logspace: steps must be a non-negative int, got {steps!r}")
    dt = DT.get_default_dtype() if dtype is None else DT.to_dtype(dtype)
    s, e = (v.item() if isinstance(v, Tensor) else v for v in (start, end))
    lib = _lib(device)
    t = lib.linspace(float(s), float(e), steps, dtype=xp.float64)
    out = lib.power(float(base), t)
    if dt.kind in "iu":
        out = lib.trunc(out)
    r = Tensor._make(out.astype(dt))
    if requires_grad:
        r.requires_grad_(True)
    return r


# ---------------------------------------------------------------- creation helpers
def asarray(obj, *, dtype=None, device=None, copy=None, requires_grad=False):
    same_dev = device is None or not isinstance(obj, Tensor) or B.namespace(obj._data) is _lib(device)
    if isinstance(obj, Tensor) and not copy and same_dev and (dtype is None or DT.to_dtype(dtype) == obj.dtype):
        out = obj
    else:
        out = as_tensor(obj, dtype=dtype, device=device)
        if copy:
            out = Tensor._make(out._data.copy())
    if requires_grad:
        out.requires_grad_(True)
    return out


def scalar_tensor(s, *, dtype=None, device=None, requires_grad=False):
    dt = DT.get_default_dtype() if dtype is None else DT.to_dtype(dtype)
    out = Tensor._make(_lib(device).asarray(s.item() if isinstance(s, Tensor) else s, dtype=dt))
    if requires_grad:
        out.requires_grad_(True)
    return out


@torch_args(tensor_first=True)
def fill(input, value):  # noqa: A002
    """A new tensor of input's shape and dtype filled with ``value`` (torch.fill)."""
    x = _tensor(input, "fill: input")
    if isinstance(value, Tensor):
        if value.ndim:
            raise RuntimeError(f"fill: value must be a number or a 0-d tensor, got shape {tuple(value.shape)}")
        if value.requires_grad:  # the gradient reaches the value: every element is a copy of it
            v = reshape(cast(value, x.dtype), (1,) * x.ndim)
            return clone(expand(v, tuple(x.shape)))
        return Tensor._make(B.namespace(x._data).full(tuple(x.shape), value.item(), dtype=x.dtype))
    return Tensor._make(B.namespace(x._data).full(tuple(x.shape), value, dtype=x.dtype))


# ---------------------------------------------------------------- windows (signal helpers)
def _window(what, n, periodic, dtype, fn, device=None, requires_grad=False):
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise RuntimeError(f"{what}: window_length must be a non-negative int, got {n!r}")
    dt = DT.get_default_dtype() if dtype is None else DT.to_dtype(dtype)
    if dt.kind != "f":
        raise RuntimeError(f"{what}: expected a floating point dtype, got {dt}")
    lib = _lib(device)
    if n <= 1:
        return _finish(lib.ones((n,), dtype=dt), requires_grad)
    m = n + 1 if periodic else n  # a periodic window is the symmetric one of length n + 1, cut to n
    k = lib.arange(n, dtype=xp.float64)
    return _finish(fn(lib, k, m - 1).astype(dt), requires_grad)


def hann_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    return _window("hann_window", window_length, periodic, dtype,
                   lambda lib, k, L: 0.5 - 0.5 * lib.cos(2 * math.pi * k / L), device, requires_grad)


def hamming_window(window_length, periodic=True, alpha=0.54, beta=0.46, *, dtype=None, device=None,
                   requires_grad=False):
    return _window("hamming_window", window_length, periodic, dtype,
                   lambda lib, k, L: alpha - beta * lib.cos(2 * math.pi * k / L), device, requires_grad)


def bartlett_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    return _window("bartlett_window", window_length, periodic, dtype,
                   lambda lib, k, L: 1 - lib.abs(2 * k / L - 1), device, requires_grad)


def blackman_window(window_length, periodic=True, *, dtype=None, device=None, requires_grad=False):
    return _window("blackman_window", window_length, periodic, dtype,
                   lambda lib, k, L: 0.42 - 0.5 * lib.cos(2 * math.pi * k / L) + 0.08 * lib.cos(4 * math.pi * k / L),
                   device, requires_grad)


def kaiser_window(window_length, periodic=True, beta=12.0, *, dtype=None, device=None, requires_grad=False):
    return _window("kaiser_window", window_length, periodic, dtype,
                   lambda lib, k, L: lib.i0(beta * lib.sqrt(lib.clip(1 - (2 * k / L - 1) ** 2, 0, None))) / xp.i0(beta),
                   device, requires_grad)
