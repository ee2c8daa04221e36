"""The PyTorch surface, built in one place: every Tensor method and operator attached from outside
varlens/core/tensor.py, and the ``varlens.*`` namespace functions beyond the ops package's own
names, with torch's keyword aliases (varlens/_torch_args.py).

``install_methods()`` runs once, when varlens is imported (right after the ops); it builds the
Tensor attributes in a fixed order, the first entry for a name winning over later ones (and
Tensor's own methods over all but the operator table):
  1. the operators and core methods (``_OPERATORS_AND_METHODS``) and the op-backed methods of
     varlens/ops/tensor_methods.py (in-place updates, ``to``, ``clone``, ``x[k] = v``);
  2. ``_extra_methods``: index_add/fill/copy, narrow, stride, the ``name_`` in-place variants;
  3. ``_more_methods``: the torch functions of ``_TORCH_FUNCTIONS_A`` that are also methods;
  4. ``_surface_methods``: those of ``_TORCH_FUNCTIONS_B``, properties (H, mH, itemsize, ...),
     comparison in-place variants;
  5. ``_linalg_methods``: cholesky, svd, qr, ... (torch's older names).
``install_namespace(globals())`` runs once at the end of varlens/__init__.py: it adds the
torch.* functions (first entry wins, a name already defined there wins), ``torch.abs_``-style
in-place functions, the nn.functional names torch also has at top level, then wraps the
namespace and the methods for keyword aliases.  Nothing else sets Tensor attributes
(tests/test_layering.py checks it).
"""
from __future__ import annotations

from varlens.core.tensor import Tensor
from varlens.ops.compare import (allclose, bitwise_and, bitwise_not, bitwise_or, eq, equal, ge, gt, le,
                                 logical_and, logical_not, logical_or, logical_xor, lt, ne, isfinite, isinf,
                                 isnan)
from varlens.ops.pointwise import (_add, _sub, abs, add, ceil, clamp, cos, div, erf, exp, expm1, floor,
                                   floor_divide, lerp, log, log10, log1p, log2, maximum, minimum, mul, neg,
                                   pow, rdiv, reciprocal, remainder, round, rpow, rsqrt, rsub, sigmoid, sign,
                                   sin, sqrt, square, sub, tanh, trunc, where)
from varlens.ops.activation import relu
from varlens.ops.index import (diag, diagonal, gather, getitem, index_select, masked_fill, nonzero,
                               repeat_interleave, scatter, scatter_add, tril, triu)
from varlens.ops.linalg import bmm, dot, matmul, mm, mv, norm, outer
from varlens.ops.reduce import (all, amax, amin, any, argmax, argmin, log_softmax, logsumexp, max, mean, min,
                                prod, softmax, std, sum, var)
from varlens.ops.scan import cumsum
from varlens.ops.order import argsort, sort, topk, unique
from varlens.ops.shape import (broadcast_to, chunk, expand, expand_as, flatten, flip, movedim, permute, repeat,
                               reshape, roll, split, squeeze, t, transpose, unbind, unflatten, unsqueeze, view,
                               view_as)
from varlens.ops.tensor_methods import METHODS as _TENSOR_METHODS
from varlens.ops.device import METHODS as _DEVICE_METHODS
from varlens.core import dtypes as DT
from varlens.ops.compare import isclose
from varlens.ops.index import fill_diagonal, index_add, index_copy, index_fill
from varlens.ops.order import bincount, histc, median
from varlens.ops.pointwise import fmod, frac, logit, nan_to_num, round as _pointwise_round
from varlens.ops.reduce import count_nonzero
from varlens.ops.scan import diff
from varlens.ops.shape import fliplr, flipud, narrow, reshape_as, rot90, type_as, unfold
from varlens.ops.tensor_methods import _H, _bernoulli_method, _bfloat16_error, _cmp_cast, _float_power_, _inplace_from, _rand_fill, _random_fill, _reshaping_inplace, _torch_inplace
from varlens.ops import linalg as L
from varlens.ops.pointwise import acos
from varlens.ops.linalg import addmm
from varlens.ops.linalg import addmv
from varlens.ops.linalg import addr
from varlens.ops.reduce import aminmax
from varlens.ops.pointwise import arccos
from varlens.ops.pointwise import arcsin
from varlens.ops.pointwise import arctan
from varlens.ops.pointwise import arctan2
from varlens.ops.index import argwhere
from varlens.ops.pointwise import asin
from varlens.ops.pointwise import atan
from varlens.ops.pointwise import atan2
from varlens.ops.shape import atleast_1d
from varlens.ops.shape import atleast_2d
from varlens.ops.shape import atleast_3d
from varlens.ops.linalg import baddbmm
from varlens.ops.order import bucketize
from varlens.ops.linalg import cdist
from varlens.ops.pointwise import clamp_max
from varlens.ops.pointwise import clamp_min
from varlens.ops.shape import column_stack
from varlens.ops.pointwise import copysign
from varlens.ops.pointwise import cosh
from varlens.ops.linalg import cross
from varlens.ops.pointwise import deg2rad
from varlens.ops.special import digamma
from varlens.ops.shape import dstack
from varlens.ops.pointwise import erfc
from varlens.ops.special import erfinv
from varlens.ops.pointwise import exp2
from varlens.ops.pointwise import heaviside
from varlens.ops.shape import hstack
from varlens.ops.pointwise import hypot
from varlens.ops.linalg import kron
from varlens.ops.order import kthvalue
from varlens.ops.special import lgamma
from varlens.ops.pointwise import logaddexp
from varlens.ops.scan import logcumsumexp
from varlens.ops.index import masked_select
from varlens.ops.order import quantile
from varlens.ops.pointwise import rad2deg
from varlens.ops.shape import row_stack
from varlens.ops.order import searchsorted
from varlens.ops.pointwise import signbit
from varlens.ops.pointwise import sinh
from varlens.ops.shape import swapdims
from varlens.ops.index import take
from varlens.ops.index import take_along_dim
from varlens.ops.pointwise import tan
from varlens.ops.shape import tile
from varlens.ops.linalg import trace
from varlens.ops.shape import vstack
from varlens.ops.special import xlogy
from varlens.ops.tensor_methods import _identity
from varlens.ops.tensor_methods import _o_trunc
from varlens.ops.pointwise import acosh
from varlens.ops.linalg import addbmm
from varlens.ops.pointwise import addcdiv
from varlens.ops.pointwise import addcmul
from varlens.ops.shape import adjoint
from varlens.settings import are_deterministic_algorithms_enabled
from varlens.ops.creation import asarray
from varlens.ops.pointwise import asinh
from varlens.ops.pointwise import atanh
from varlens.ops.creation import bartlett_window
from varlens.ops.random import binomial
from varlens.ops.pointwise import bitwise_left_shift
from varlens.ops.pointwise import bitwise_right_shift
from varlens.ops.compare import bitwise_xor
from varlens.ops.creation import blackman_window
from varlens.ops.shape import block_diag
from varlens.ops.shape import broadcast_shapes
from varlens.ops.shape import broadcast_tensors
from varlens.core.dtypes import can_cast
from varlens.ops.shape import cartesian_prod
from varlens.ops.linalg import chain_matmul
from varlens.ops.shape import chunk
from varlens.ops.index import combinations
from varlens.settings import compile
from varlens.ops.linalg import corrcoef
from varlens.ops.linalg import cov
from varlens.ops.scan import cummax
from varlens.ops.scan import cummin
from varlens.ops.scan import cumprod
from varlens.ops.scan import cumulative_trapezoid
from varlens.ops.index import diag_embed
from varlens.ops.index import diagflat
from varlens.ops.index import diagonal_scatter
from varlens.ops.linalg import dist
from varlens.ops.shape import dsplit
from varlens.ops.creation import fill
from varlens.ops.pointwise import float_power
from varlens.ops.pointwise import fmax
from varlens.ops.pointwise import fmin
from varlens.ops.pointwise import frexp
from varlens.ops.pointwise import gcd
from varlens.ops.linalg import ger
from varlens.ops.queries import get_device
from varlens.settings import get_float32_matmul_precision
from varlens.settings import get_num_interop_threads
from varlens.ops.compare import greater_equal
from varlens.ops.creation import hamming_window
from varlens.ops.creation import hann_window
from varlens.ops.order import histogram
from varlens.ops.shape import hsplit
from varlens.ops.special import i0
from varlens.ops.special import igamma
from varlens.ops.special import igammac
from varlens.ops.index import index_put
from varlens.ops.linalg import inner
from varlens.ops.queries import is_complex
from varlens.settings import is_deterministic_algorithms_warn_only_enabled
from varlens.ops.queries import is_floating_point
from varlens.ops.queries import is_nonzero
from varlens.ops.queries import is_same_size
from varlens.ops.queries import is_signed
from varlens.ops.compare import isin
from varlens.ops.compare import isneginf
from varlens.ops.compare import isposinf
from varlens.ops.creation import kaiser_window
from varlens.ops.pointwise import lcm
from varlens.ops.pointwise import ldexp
from varlens.ops.compare import less_equal
from varlens.ops.pointwise import logaddexp2
from varlens.ops.creation import logspace
from varlens.ops.index import masked_scatter
from varlens.ops.order import mode
from varlens.ops.shape import moveaxis
from varlens.ops.shape import movedim
from varlens.ops.order import msort
from varlens.ops.special import mvlgamma
from varlens.ops.reduce import nanmean
from varlens.ops.order import nanmedian
from varlens.ops.reduce import nansum
from varlens.ops.pointwise import nextafter
from varlens.ops.compare import not_equal
from varlens.ops.random import poisson
from varlens.ops.special import polygamma
from varlens.ops.pointwise import positive
from varlens.core.dtypes import promote_types
from varlens.ops.index import put
from varlens.ops.random import randint_like
from varlens.ops.shape import ravel
from varlens.ops.linalg import renorm
from varlens.ops.queries import result_type
from varlens.ops.creation import scalar_tensor
from varlens.ops.index import scatter_reduce
from varlens.ops.index import select
from varlens.ops.index import select_scatter
from varlens.settings import set_float32_matmul_precision
from varlens.settings import set_flush_denormal
from varlens.settings import set_num_interop_threads
from varlens.ops.pointwise import sgn
from varlens.ops.pointwise import sinc
from varlens.ops.index import slice_scatter
from varlens.ops.shape import split
from varlens.ops.shape import split_with_sizes
from varlens.ops.reduce import sum_to_size
from varlens.ops.shape import tensor_split
from varlens.ops.linalg import tensordot
from varlens.ops.scan import trapezoid
from varlens.ops.scan import trapz
from varlens.ops.shape import tril_indices
from varlens.ops.shape import triu_indices
from varlens.ops.order import unique_consecutive
from varlens.ops.shape import unravel_index
from varlens.settings import use_deterministic_algorithms
from varlens.ops.linalg import vander
from varlens.ops.linalg import vdot
from varlens.ops.shape import vsplit
from varlens.ops.linalg import cholesky_inverse
from varlens.ops.linalg import cholesky_old
from varlens.ops.linalg import cholesky_solve
from varlens.ops.linalg import geqrf
from varlens.ops.linalg import lu_old
from varlens.ops.linalg import lu_solve_old
from varlens.ops.linalg import lu_unpack
from varlens.ops.linalg import matrix_exp
from varlens.ops.linalg import matrix_power
from varlens.ops.linalg import orgqr
from varlens.ops.linalg import ormqr
from varlens.ops.linalg import pca_lowrank
from varlens.ops.linalg import pinverse
from varlens.ops.linalg import qr_old
from varlens.ops.linalg import svd_lowrank
from varlens.ops.linalg import svd_old
from varlens.ops.linalg import triangular_solve


class _Staging:
    """Tensor's attributes as the table builds them: the class's own, then the entries so far."""

    def __init__(self):
        self.added = {}

    def has(self, name):
        return name in self.added or hasattr(Tensor, name)

    def get(self, name, default=None):
        return self.added[name] if name in self.added else getattr(Tensor, name, default)

    def set(self, name, value):
        self.added[name] = value


_S = _Staging()

def _r(fn):
    """Reflected operator: other OP self."""
    return lambda self, other: fn(self, other)


def _size_args(fn):
    def m(self, *shape):
        return fn(self, *shape)
    return m


_OPERATORS_AND_METHODS = {
    # operators
    "__add__": _add, "__radd__": _add, "__sub__": _sub, "__rsub__": rsub, "__mul__": mul,
    "__rmul__": mul, "__truediv__": div, "__rtruediv__": rdiv, "__neg__": neg, "__pow__": pow,
    "__rpow__": rpow, "__matmul__": matmul, "__rmatmul__": lambda s, o: matmul(o, s),
    "__getitem__": getitem, "__abs__": abs, "__pos__": lambda s: s,
    "__eq__": eq, "__ne__": ne, "__lt__": lt, "__le__": le, "__gt__": gt, "__ge__": ge,
    "__and__": bitwise_and, "__or__": bitwise_or, "__invert__": bitwise_not,
    "__floordiv__": floor_divide, "__mod__": remainder, "__xor__": logical_xor,
    "__rfloordiv__": lambda s, o: floor_divide(o, s), "__rmod__": lambda s, o: remainder(o, s),
    # arithmetic and math
    "add": add, "sub": sub, "subtract": sub, "mul": mul, "multiply": mul, "div": div,
    "divide": div, "true_divide": div, "neg": neg, "negative": neg, "pow": pow, "exp": exp,
    "log": log, "log1p": log1p, "expm1": expm1, "log2": log2, "log10": log10, "sqrt": sqrt,
    "rsqrt": rsqrt, "square": square, "abs": abs, "absolute": abs, "sign": sign, "sin": sin,
    "cos": cos, "erf": erf, "tanh": tanh, "sigmoid": sigmoid, "relu": relu, "clamp": clamp,
    "clip": clamp, "maximum": maximum, "minimum": minimum, "reciprocal": reciprocal,
    "lerp": lerp, "floor": floor, "ceil": ceil, "round": round, "trunc": trunc,
    "remainder": remainder, "isnan": isnan, "isinf": isinf, "isfinite": isfinite,
    "eq": eq, "ne": ne, "lt": lt, "le": le, "gt": gt, "ge": ge,
    "logical_and": logical_and, "logical_or": logical_or, "logical_not": logical_not,
    "logical_xor": logical_xor, "masked_fill": masked_fill, "where": lambda s, c, o: where(c, s, o),
    "matmul": matmul, "mm": mm, "bmm": bmm, "dot": dot, "mv": mv, "outer": outer,
    # reductions
    "sum": sum, "mean": mean, "var": var, "std": std, "max": max, "min": min, "amax": amax,
    "amin": amin, "argmax": argmax, "argmin": argmin, "logsumexp": logsumexp, "prod": prod,
    "softmax": softmax, "log_softmax": log_softmax, "cumsum": cumsum, "norm": norm,
    "all": all, "any": any, "sort": sort, "argsort": argsort, "topk": topk,
    "tril": tril, "triu": triu, "diag": diag, "diagonal": diagonal, "roll": roll,
    "repeat_interleave": repeat_interleave, "nonzero": nonzero, "unique": unique,
    # shapes
    "reshape": _size_args(reshape), "view": _size_args(view), "view_as": view_as,
    "permute": _size_args(permute), "transpose": transpose, "swapaxes": transpose, "t": t,
    "squeeze": squeeze, "unsqueeze": unsqueeze, "flatten": flatten, "unflatten": unflatten,
    "expand": _size_args(expand), "expand_as": expand_as, "broadcast_to": broadcast_to,
    "flip": flip, "split": split, "chunk": chunk, "unbind": unbind, "movedim": movedim,
    "repeat": _size_args(repeat),
    # indexing
    "gather": gather, "scatter_add": scatter_add, "scatter": scatter, "index_select": index_select,
    "allclose": allclose, "equal": equal,
}


_TORCH_FUNCTIONS_A = {
    "atan": atan, "arctan": arctan, "asin": asin, "arcsin": arcsin, "acos": acos, "arccos": arccos,
    "atan2": atan2, "arctan2": arctan2, "erfinv": erfinv, "lgamma": lgamma, "digamma": digamma,
    "tan": tan, "sinh": sinh, "cosh": cosh, "hypot": hypot, "logaddexp": logaddexp, "xlogy": xlogy,
    "exp2": exp2, "erfc": erfc, "deg2rad": deg2rad, "rad2deg": rad2deg, "copysign": copysign,
    "signbit": signbit, "heaviside": heaviside, "addmm": addmm, "baddbmm": baddbmm, "addmv": addmv,
    "addr": addr, "trace": trace, "cross": cross, "kron": kron, "cdist": cdist,
    "atleast_1d": atleast_1d, "atleast_2d": atleast_2d, "atleast_3d": atleast_3d, "vstack": vstack,
    "row_stack": row_stack, "hstack": hstack, "dstack": dstack, "column_stack": column_stack,
    "tile": tile, "swapdims": swapdims, "masked_select": masked_select, "take": take,
    "take_along_dim": take_along_dim, "argwhere": argwhere, "searchsorted": searchsorted,
    "bucketize": bucketize, "kthvalue": kthvalue, "quantile": quantile, "logcumsumexp": logcumsumexp,
    "aminmax": aminmax, "clamp_min": clamp_min, "clamp_max": clamp_max,
}


def _linalg():
    return {"inverse": L.inv, "det": L.det, "logdet": L.logdet, "slogdet": L.slogdet}


_TORCH_FUNCTIONS_A.update(_linalg())


_NOT_METHODS_A = {"atleast_1d", "atleast_2d", "atleast_3d", "vstack", "row_stack", "hstack", "dstack",
                "column_stack", "searchsorted", "bucketize", "cdist"}


# ---------------------------------------------------------------- registration
_TORCH_FUNCTIONS_B = {
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
_OVERRIDES = {"index_put": index_put, "movedim": movedim}


_NOT_METHODS_B = {"hann_window", "hamming_window", "bartlett_window", "blackman_window", "kaiser_window",
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


# ---------------------------------------------------------------- registration
# top-level torch names (varlens.cholesky, ...) and Tensor methods
_LINALG_FUNCTIONS = {
    "cholesky": cholesky_old, "cholesky_solve": cholesky_solve, "cholesky_inverse": cholesky_inverse,
    "qr": qr_old, "svd": svd_old, "pinverse": pinverse, "matrix_power": matrix_power,
    "matrix_exp": matrix_exp, "triangular_solve": triangular_solve, "geqrf": geqrf, "orgqr": orgqr,
    "ormqr": ormqr, "lu": lu_old, "lu_solve": lu_solve_old, "lu_unpack": lu_unpack,
    "svd_lowrank": svd_lowrank, "pca_lowrank": pca_lowrank,
}


_LINALG_METHODS = {
    "cholesky": cholesky_old, "cholesky_solve": cholesky_solve, "cholesky_inverse": cholesky_inverse,
    "qr": qr_old, "svd": svd_old, "pinverse": pinverse, "matrix_power": matrix_power,
    "matrix_exp": matrix_exp, "triangular_solve": triangular_solve, "geqrf": geqrf, "orgqr": orgqr,
    "ormqr": ormqr, "lu": lu_old, "lu_solve": lu_solve_old,
}


def _extra_methods():
    methods = {
        "index_add": index_add, "index_copy": index_copy, "index_fill": index_fill,
        "fmod": fmod, "frac": frac, "logit": logit, "nan_to_num": nan_to_num,
        "count_nonzero": count_nonzero, "diff": diff, "median": median, "bincount": bincount,
        "histc": histc, "narrow": narrow, "rot90": rot90, "fliplr": fliplr, "flipud": flipud,
        "type_as": type_as, "reshape_as": reshape_as, "unfold": unfold,
        "byte": lambda s: s.to(DT.uint8), "char": lambda s: s.to(DT.int8), "short": lambda s: s.to(DT.int16),
        "stride": lambda s, dim=None: (tuple(st // s._data.itemsize for st in s._data.strides) if dim is None
                                       else s._data.strides[dim] // s._data.itemsize),
        "element_size": lambda s: s._data.itemsize,
        "data_ptr": lambda s: s._data.ctypes.data,
        "share_memory_": lambda s: s,
        "exponential_": _random_fill("exponential"), "random_": _random_fill("random"),
    }
    for name, fn in methods.items():
        if not _S.has(name):
            _S.set(name, fn)
    if not _S.has("nbytes"):
        _S.set("nbytes", property(lambda s: s._data.nbytes))
    inplace = {
        "scatter": scatter, "scatter_add": scatter_add, "masked_fill": masked_fill,
        "index_add": index_add, "index_copy": index_copy, "index_fill": index_fill,
        "clamp_min": lambda s, v: clamp(s, v, None), "clamp_max": lambda s, v: clamp(s, None, v),
        "floor": floor, "ceil": ceil, "round": _pointwise_round, "trunc": trunc, "sign": sign,
        "reciprocal": reciprocal, "square": square, "log1p": log1p, "expm1": expm1,
        "nan_to_num": nan_to_num, "fmod": fmod, "remainder": remainder, "frac": frac,
        "sigmoid": sigmoid, "relu": relu, "log2": log2, "log10": log10, "rsqrt": rsqrt,
        "where": lambda s, c, other: where(c, s, other),
    }
    for name, fn in inplace.items():
        if not _S.has(name + "_"):
            _S.set(name + "_", _inplace_from(name, fn))
    for name, fn in {"unsqueeze": unsqueeze, "squeeze": squeeze, "t": t,
                     "transpose": transpose}.items():
        if not _S.has(name + "_"):
            _S.set(name + "_", _reshaping_inplace(name, fn))


def _more_methods():
    for name, fn in _TORCH_FUNCTIONS_A.items():
        if name not in _NOT_METHODS_A and not _S.has(name):
            _S.set(name, fn)


def _surface_methods():
    """Attach the methods (those Tensor does not have yet) and the in-place variants."""
    methods = {k: v for k, v in _TORCH_FUNCTIONS_B.items() if k not in _NOT_METHODS_B}
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
    # these replace methods whose signature was narrower
    for name in ("index_put", "movedim"):
        _S.set(name, methods.pop(name))
    for name, fn in methods.items():
        if not _S.has(name):
            _S.set(name, fn)
    for name in _INPLACE + ("fix",):
        fn = _S.get(name, None)
        if fn is not None and not _S.has(name + "_"):
            _S.set(name + "_", _inplace_from(name, fn))
    for name in _CMP_INPLACE:
        if not _S.has(name + "_"):
            _S.set(name + "_", _inplace_from(name, _cmp_cast(_CMP_BASE.get(name, name))))
    props = {"H": _H,
             "mH": lambda s: transpose(s, -2, -1), "itemsize": lambda s: s._data.itemsize,
             "is_sparse": lambda s: False, "is_quantized": lambda s: False, "is_meta": lambda s: False,
             "is_mkldnn": lambda s: False, "is_cpu": lambda s: True,
             # device/layout predicates PyTorch code reads on any tensor: a varlens tensor is a dense
             # CPU array, so every other device and layout answers False
             **{k: (lambda s: False) for k in ("is_xpu", "is_mps", "is_xla", "is_ipu", "is_hpu", "is_maia",
                                                "is_mtia", "is_vulkan", "is_nested", "is_sparse_csr")}}
    for name, fn in props.items():
        if not _S.has(name):
            _S.set(name, property(fn))
    if not _S.has("float_power_"):
        _S.set("float_power_", _float_power_)
    for name in ("swapaxes", "swapdims"):
        if not _S.has(name + "_"):
            _S.set(name + "_", _S.get("transpose_"))


def _linalg_methods():
    """Set the Tensor methods (x.cholesky(), x.svd(), ...) and return the top-level functions."""
    for name, f in _LINALG_METHODS.items():
        if not _S.has(name):
            _S.set(name, f)


def _torch_inplace_functions():
    """torch.NAME_ functions (for the varlens namespace), for names that have a Tensor.NAME_."""
    return {n + "_": _torch_inplace(n) for n in _TORCH_INPLACE if _S.has(n + "_")}


def install_methods():
    """Attach every Tensor method and operator defined outside varlens/core/tensor.py (once)."""
    for name, fn in _OPERATORS_AND_METHODS.items():
        _S.set(name, fn)
    for name, fn in _TENSOR_METHODS.items():
        _S.set(name, fn)
    for name, fn in _DEVICE_METHODS.items():
        _S.set(name, fn)
    _extra_methods()
    _more_methods()
    _surface_methods()
    _linalg_methods()
    for name, value in _S.added.items():
        setattr(Tensor, name, value)


def install_namespace(namespace):
    """Add the torch.* functions to ``namespace`` (varlens/__init__.py's globals, once, at its end)
    and wrap it and the Tensor methods for torch's keyword aliases."""
    import varlens.nn.functional as F  # noqa: E402  (loaded by then; the namespace re-exports some of it)
    from varlens import _torch_args
    for table in (_TORCH_FUNCTIONS_A, _TORCH_FUNCTIONS_B):
        for name, fn in table.items():
            namespace.setdefault(name, fn)
    namespace.update(_OVERRIDES)  # torch.index_put(input, indices, values, accumulate), movedim with sequences
    for name, fn in _torch_inplace_functions().items():  # torch.abs_(x), torch.exp_(x), ...
        namespace.setdefault(name, fn)
    for name, fn in _LINALG_FUNCTIONS.items():  # torch.cholesky, torch.svd, ...
        namespace.setdefault(name, fn)
    # torch.NAME for functional ops whose torch.* signature is the same as torch.nn.functional's
    for name in _FUNCTIONAL_AT_TOP_LEVEL:
        if hasattr(F, name):
            namespace.setdefault(name, getattr(F, name))
    _torch_args.wrap_namespace(namespace)
    for name, fn in _torch_args.wrap_methods(dict(vars(Tensor))).items():
        setattr(Tensor, name, fn)


_FUNCTIONAL_AT_TOP_LEVEL = (
    "cosine_similarity", "pairwise_distance", "pdist", "rms_norm", "layer_norm", "group_norm", "conv1d",
    "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "max_pool1d",
    "max_pool2d", "max_pool3d", "avg_pool1d", "adaptive_avg_pool1d", "pixel_shuffle", "pixel_unshuffle",
    "channel_shuffle", "selu", "celu", "prelu", "rrelu", "threshold", "hardshrink", "bilinear")
