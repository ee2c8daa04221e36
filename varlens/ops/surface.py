"""More of the torch.* / Tensor.* function surface that model and training code reaches for.

Functions of their own (derivative written beside the forward): cumprod (exact gradient when the
input has zeros), sinc, asinh/acosh/atanh.  Everything else is composed from checked ops, so its
gradient is those ops' gradient: cummax/cummin/mode/nanmedian (values gathered at the returned
indices), block_diag, cartesian_prod, combinations, float_power, masked_scatter, index_put with
accumulate, put, trapezoid/cumulative_trapezoid, cov/corrcoef, renorm, diag_embed/diagflat,
tensordot/inner/vdot, chain_matmul, addcmul/addcdiv/addbmm, dist, nansum/nanmean, vander,
fmax/fmin, logaddexp2, ldexp, scatter_reduce, select/slice/diagonal_scatter, the split family.
Non-differentiable: nextafter, isin, histogram, logspace, tril/triu_indices, unique_consecutive,
unravel_index, gcd/lcm, frexp, bit shifts.  ``install`` puts the methods (and in-place variants)
on Tensor; ``FUNCTIONS`` is what varlens.ops adds to the namespace.
"""
from __future__ import annotations

import itertools
import math
from collections import namedtuple

from varlens.core.array import xp
from varlens.core.tensor import Tensor
from varlens.ops import compare as _compare
from varlens.ops.shape import chunk, split
from varlens.ops.compare import greater_equal, less_equal, not_equal
from varlens.ops.tensor_methods import _random_
from varlens.ops.compare import bitwise_and, bitwise_not, bitwise_or, gt, isclose, lt
from varlens.ops.pointwise import cast, floor_divide, trunc
from varlens.ops.shape import transpose
from varlens.ops._args import _tensor
from varlens.ops.shape import movedim
from varlens.ops.pointwise import bitwise_left_shift, bitwise_right_shift, gcd, lcm, acosh, addcdiv, addcmul, asinh, atanh, float_power, fmax, fmin, frexp, ldexp, logaddexp2, nextafter, positive, sgn, sinc
from varlens.ops.special import i0, igamma, igammac, mvlgamma, polygamma
from varlens.ops.scan import cummax, cummin, cumprod, cumulative_trapezoid, trapezoid, trapz
from varlens.ops.order import histogram, mode, msort, nanmedian, unique_consecutive
from varlens.ops.reduce import nanmean, nansum, sum_to_size
from varlens.ops.linalg import dist
from varlens.ops.shape import adjoint, block_diag, broadcast_shapes, broadcast_tensors, cartesian_prod, dsplit, hsplit, moveaxis, ravel, split_with_sizes, tensor_split, tril_indices, triu_indices, unravel_index, vsplit
from varlens.ops.index import combinations, diag_embed, diagflat
from varlens.ops.linalg import addbmm, chain_matmul, corrcoef, cov, ger, inner, renorm, tensordot, vander, vdot
from varlens.ops.index import diagonal_scatter, fill_diagonal, index_put, masked_scatter, put, scatter_reduce, select, select_scatter, slice_scatter
from varlens.ops.compare import bitwise_xor, isin, isneginf, isposinf
from varlens.ops.random import binomial, poisson, randint_like
from varlens.ops.creation import asarray, bartlett_window, blackman_window, fill, hamming_window, hann_window, kaiser_window, logspace, scalar_tensor
from varlens.ops.queries import get_device, is_complex, is_floating_point, is_nonzero, is_same_size, is_signed, result_type


# ---------------------------------------------------------------- running extremes, mode, nan-reductions
from varlens.ops.return_types import cummax as _CumMax, cummin as _CumMin  # noqa: E402
from varlens.ops.return_types import mode as _Mode, nanmedian as _NanMedian  # noqa: E402
from varlens.ops.creation import bernoulli
from varlens.ops.extra import _inplace_from
from varlens.random import _gen


def _identity(input):  # noqa: A002
    """resolve_conj / resolve_neg / conj: real tensors have no lazy conjugate or negation bit."""
    return input


from varlens.core.dtypes import _RANK, can_cast, promote_types  # noqa: E402  (the dtype rules live in core)


# ---------------------------------------------------------------- runtime switches training scripts call
_SETTINGS = {"matmul_precision": "highest", "deterministic": False, "warn_only": False, "interop_threads": 1}


def set_float32_matmul_precision(precision):
    """Accepted for compatibility: NumPy's float32 matmul is always full precision."""
    if precision not in ("highest", "high", "medium"):
        raise RuntimeError(f"set_float32_matmul_precision: precision must be 'highest', 'high' or 'medium', "
                           f"got {precision!r}")
    _SETTINGS["matmul_precision"] = precision


def get_float32_matmul_precision():
    return _SETTINGS["matmul_precision"]


def use_deterministic_algorithms(mode, *, warn_only=False):
    """Accepted for compatibility: every varlens op is already deterministic on CPU."""
    if not isinstance(mode, bool):
        raise TypeError(f"use_deterministic_algorithms: mode must be a bool, got {type(mode).__name__}")
    _SETTINGS["deterministic"], _SETTINGS["warn_only"] = mode, bool(warn_only)


def are_deterministic_algorithms_enabled():
    return _SETTINGS["deterministic"]


def is_deterministic_algorithms_warn_only_enabled():
    return _SETTINGS["warn_only"]


def set_num_interop_threads(num):
    if not isinstance(num, int) or num < 1:
        raise RuntimeError(f"set_num_interop_threads: expected a positive int, got {num!r}")
    _SETTINGS["interop_threads"] = num


def get_num_interop_threads():
    return _SETTINGS["interop_threads"]


def compile(model=None, **kwargs):  # noqa: A001
    """torch.compile stand-in: varlens runs eagerly, so the model (or function) comes back as is;
    used as a decorator with options (``@compile(mode=...)``) it returns the identity decorator."""
    if model is None:
        return lambda m: m
    return model


def set_flush_denormal(mode):
    """Returns False: flushing denormals is not supported (NumPy keeps them)."""
    return False


def _bfloat16_error(*_a, **_k):
    raise RuntimeError("bfloat16 is not supported: NumPy has no bfloat16 dtype, so varlens has none "
                       "(use .float() for float32 or .half() for float16)")


def _H(self):
    if self.ndim != 2:
        raise RuntimeError(f"tensor.H is only supported on matrices (2-D tensors), got a {self.ndim}-D tensor; "
                           "for batches of matrices use tensor.mH")
    return self.T


def _o_trunc(input):  # noqa: A002
    return trunc(input)


# ---------------------------------------------------------------- registration
FUNCTIONS = {
    "polygamma": polygamma, "i0": i0, "special_i0": i0, "igamma": igamma, "igammac": igammac,
    "poisson": poisson, "binomial": binomial,
    "cumprod": cumprod, "cummax": cummax, "cummin": cummin, "mode": mode,
    "nansum": nansum, "nanmean": nanmean, "nanmedian": nanmedian,
    "sinc": sinc, "asinh": asinh, "arcsinh": asinh, "acosh": acosh, "arccosh": acosh,
    "atanh": atanh, "arctanh": atanh,
    "block_diag": block_diag, "cartesian_prod": cartesian_prod, "combinations": combinations,
    "diag_embed": diag_embed, "diagflat": diagflat, "vander": vander,
    "tensordot": tensordot, "inner": inner, "vdot": vdot, "ger": ger, "chain_matmul": chain_matmul,
    "addcmul": addcmul, "addcdiv": addcdiv, "addbmm": addbmm, "dist": dist,
    "float_power": float_power, "nextafter": nextafter, "fmax": fmax, "fmin": fmin,
    "logaddexp2": logaddexp2, "ldexp": ldexp, "frexp": frexp, "sgn": sgn, "mvlgamma": mvlgamma,
    "isposinf": isposinf, "isneginf": isneginf, "adjoint": adjoint,
    "gcd": gcd, "lcm": lcm, "bitwise_xor": bitwise_xor, "bitwise_left_shift": bitwise_left_shift,
    "bitwise_right_shift": bitwise_right_shift, "isin": isin,
    "greater_equal": greater_equal, "less_equal": less_equal, "not_equal": not_equal,
    "put": put, "masked_scatter": masked_scatter, "select": select, "select_scatter": select_scatter,
    "slice_scatter": slice_scatter, "diagonal_scatter": diagonal_scatter, "scatter_reduce": scatter_reduce,
    "trapezoid": trapezoid, "trapz": trapz, "cumulative_trapezoid": cumulative_trapezoid,
    "cov": cov, "corrcoef": corrcoef, "renorm": renorm, "histogram": histogram, "logspace": logspace,
    "tril_indices": tril_indices, "triu_indices": triu_indices, "unique_consecutive": unique_consecutive,
    "unravel_index": unravel_index, "broadcast_shapes": broadcast_shapes,
    "broadcast_tensors": broadcast_tensors, "tensor_split": tensor_split, "hsplit": hsplit,
    "vsplit": vsplit, "dsplit": dsplit, "split_with_sizes": split_with_sizes, "msort": msort,
    "ravel": ravel, "moveaxis": moveaxis, "asarray": asarray, "scalar_tensor": scalar_tensor,
    "randint_like": randint_like, "fill": fill,
    "hann_window": hann_window, "hamming_window": hamming_window, "bartlett_window": bartlett_window,
    "blackman_window": blackman_window, "kaiser_window": kaiser_window,
    "is_floating_point": is_floating_point, "is_complex": is_complex, "is_signed": is_signed,
    "is_nonzero": is_nonzero, "is_same_size": is_same_size, "positive": positive, "fix": _o_trunc,
    "resolve_conj": _identity, "resolve_neg": _identity, "conj": _identity, "conj_physical": _identity,
    "get_device": get_device, "result_type": result_type, "promote_types": promote_types,
    "can_cast": can_cast, "sum_to_size": sum_to_size,
    "set_float32_matmul_precision": set_float32_matmul_precision,
    "get_float32_matmul_precision": get_float32_matmul_precision,
    "use_deterministic_algorithms": use_deterministic_algorithms,
    "are_deterministic_algorithms_enabled": are_deterministic_algorithms_enabled,
    "is_deterministic_algorithms_warn_only_enabled": is_deterministic_algorithms_warn_only_enabled,
    "set_num_interop_threads": set_num_interop_threads, "get_num_interop_threads": get_num_interop_threads,
    "compile": compile, "set_flush_denormal": set_flush_denormal,
    "unsafe_chunk": lambda input, chunks, dim=0: chunk(input, chunks, dim),  # noqa: A006
    "unsafe_split": lambda input, split_size, dim=0: split(input, split_size, dim),  # noqa: A006
}
# names varlens.ops already has with a narrower signature: these replace them at the top level
OVERRIDES = {"index_put": index_put, "movedim": movedim}

_NOT_METHODS = {"hann_window", "hamming_window", "bartlett_window", "blackman_window", "kaiser_window",
                "result_type", "promote_types", "can_cast", "set_float32_matmul_precision",
                "get_float32_matmul_precision", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
                "is_deterministic_algorithms_warn_only_enabled", "set_num_interop_threads",
                "get_num_interop_threads", "compile", "set_flush_denormal", "block_diag", "cartesian_prod",
                "chain_matmul", "logspace", "tril_indices", "triu_indices",
                "unravel_index", "broadcast_shapes", "broadcast_tensors", "asarray", "scalar_tensor",
                "randint_like", "fill", "trapezoid", "trapz", "cumulative_trapezoid", "isin",
                "combinations", "vander", "poisson", "binomial", "special_i0"}

# Tensor in-place variants: name_ computes the out-of-place op and writes it back
_INPLACE = ("acos", "arccos", "asin", "arcsin", "atan", "arctan", "atan2", "arctan2", "acosh", "arccosh",
            "asinh", "arcsinh", "atanh", "arctanh", "cosh", "sinh", "tan", "erf", "erfc", "erfinv",
            "exp2", "digamma", "lgamma", "deg2rad", "rad2deg", "copysign", "hypot", "xlogy", "heaviside",
            "logit", "sinc", "sgn", "mvlgamma", "cumprod", "cumsum", "addmm", "addmv", "addr", "baddbmm",
            "addbmm", "tril", "triu", "i0", "igamma", "igammac", "polygamma", "renorm", "nextafter", "ldexp",
            "gcd", "lcm", "divide",
            "true_divide", "multiply", "subtract", "negative", "floor_divide", "index_put", "put",
            "masked_scatter", "scatter_reduce", "bitwise_and", "bitwise_or", "bitwise_xor",
            "bitwise_not", "bitwise_left_shift", "bitwise_right_shift", "logical_and", "logical_or",
            "logical_xor", "logical_not", "clamp", "clip")
_CMP_BASE = {"greater": "gt", "less": "lt", "greater_equal": "ge", "less_equal": "le", "not_equal": "ne"}
_CMP_INPLACE = ("eq", "ne", "lt", "le", "gt", "ge", "greater", "greater_equal", "less", "less_equal",
                "not_equal")
# torch.NAME_(x, ...) functions: the Tensor method called on x
_TORCH_INPLACE = ("abs", "acos", "arccos", "asin", "arcsin", "atan", "arctan", "acosh", "arccosh", "asinh",
                  "arcsinh", "atanh", "arctanh", "ceil", "clamp", "clamp_max", "clamp_min", "clip", "cos",
                  "cosh", "deg2rad", "rad2deg", "erf", "erfc", "exp", "exp2", "expm1", "fill", "floor",
                  "frac", "gcd", "i0", "lcm", "ldexp", "log", "log10", "log1p", "log2", "logit", "nan_to_num",
                  "neg", "negative", "reciprocal", "relu", "round", "rsqrt", "sigmoid", "sin", "sinc",
                  "sinh", "sqrt", "square", "tan", "tanh", "trunc", "xlogy", "zero", "index_put", "addmv")


def _torch_inplace(name):
    def f(input, *args, **kwargs):  # noqa: A002
        return getattr(_tensor(input, f"{name}_: input"), name + "_")(*args, **kwargs)
    f.__name__ = name + "_"
    return f


def _cmp_cast(name):
    def f(self, other):
        return cast(getattr(_compare, name)(self, other), self.dtype)
    return f


def _float_power_(self, exponent):
    if self.dtype != xp.dtype("float64"):
        raise RuntimeError(f"float_power_: the base has dtype {self.dtype} but the result is float64; "
                           "in-place float_power_ needs a float64 tensor (call .double() first)")
    return _inplace_from("float_power", float_power)(self, exponent)


def _bernoulli_method(self, p=None, *, generator=None):
    if p is None:
        return bernoulli(self, generator=generator)
    return Tensor._make((_gen(generator).random(tuple(self.shape)) < p).astype(self.dtype))


def _rand_fill(kind):
    def method(self, *args, generator=None):
        g = _gen(generator)
        if kind == "cauchy":
            med, sig = (list(args) + [0.0, 1.0][len(args):])[:2]
            return _random_(self, lambda s: med + sig * xp.tan(math.pi * (g.random(s) - 0.5)))
        if kind == "log_normal":
            mean, std = (list(args) + [1.0, 2.0][len(args):])[:2]
            return _random_(self, lambda s: xp.exp(g.normal(mean, std, s)))
        p = args[0] if args else 0.5
        if not 0 < p <= 1:
            raise RuntimeError(f"geometric_: p must be in (0, 1], got {p}")
        return _random_(self, lambda s: xp.floor(xp.log1p(-g.random(s)) / math.log1p(-p)) + 1 if p < 1
                             else xp.ones(s))
    method.__name__ = kind + "_"
    return method


def install():
    """Attach the methods (those Tensor does not have yet) and the in-place variants."""
    methods = {k: v for k, v in FUNCTIONS.items() if k not in _NOT_METHODS}
    methods.update({
        "index_put": index_put, "movedim": movedim, "fill_diagonal_": None,
        "bitwise_and": bitwise_and, "bitwise_or": bitwise_or, "bitwise_not": bitwise_not,
        "greater": gt, "less": lt, "floor_divide": floor_divide, "isclose": isclose,
        "ndimension": lambda s: s.ndim, "const_data_ptr": lambda s: s._data.ctypes.data,
        "bernoulli": _bernoulli_method, "bfloat16": _bfloat16_error,
        "cauchy_": _rand_fill("cauchy"), "log_normal_": _rand_fill("log_normal"),
        "geometric_": _rand_fill("geometric"),
    })
    methods["fill_diagonal_"] = lambda s, fill_value, wrap=False: _inplace_from(
        "fill_diagonal", lambda t: fill_diagonal(t, fill_value, wrap))(s)
    methods["polygamma"] = lambda s, n: polygamma(n, s)  # Tensor.polygamma(n): the tensor is the input
    methods["absolute_"] = lambda s: s.abs_()
    methods["is_inference"] = lambda s: False
    methods["is_shared"] = lambda s: False
    methods["is_pinned"] = lambda s: False
    # these replace methods whose signature was narrower
    for name in ("index_put", "movedim"):
        setattr(Tensor, name, methods.pop(name))
    for name, fn in methods.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for name in _INPLACE + ("fix",):
        fn = getattr(Tensor, name, None)
        if fn is not None and not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _inplace_from(name, fn))
    for name in _CMP_INPLACE:
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _inplace_from(name, _cmp_cast(_CMP_BASE.get(name, name))))
    props = {"H": _H,
             "mH": lambda s: transpose(s, -2, -1), "itemsize": lambda s: s._data.itemsize,
             "is_sparse": lambda s: False, "is_quantized": lambda s: False, "is_meta": lambda s: False,
             "is_mkldnn": lambda s: False, "is_cpu": lambda s: True,
             # device/layout predicates PyTorch code reads on any tensor: a varlens tensor is a dense
             # CPU array, so every other device and layout answers False
             **{k: (lambda s: False) for k in ("is_xpu", "is_mps", "is_xla", "is_ipu", "is_hpu", "is_maia",
                                                "is_mtia", "is_vulkan", "is_nested", "is_sparse_csr")}}
    for name, fn in props.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, property(fn))
    if not hasattr(Tensor, "float_power_"):
        Tensor.float_power_ = _float_power_
    for name in ("swapaxes", "swapdims"):
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", Tensor.transpose_)


def torch_inplace_functions():
    """torch.NAME_ functions (for the varlens namespace), for names that have a Tensor.NAME_."""
    return {n + "_": _torch_inplace(n) for n in _TORCH_INPLACE if hasattr(Tensor, n + "_")}
