"""varlens.ops: every differentiable op as a Function (forward + backward side by side),
grouped by family, plus the functions users call.  The table at the bottom
installs the Tensor methods and operators, so ``x.sum(1)`` and ``x + y`` land here."""
from __future__ import annotations

from varlens.ops.nn.attention import scaled_dot_product_attention
from varlens.ops.pointwise import floor_divide, remainder
from varlens.ops.compare import allclose, bitwise_and, bitwise_not, bitwise_or, eq, equal, ge, gt, isclose, isfinite, isinf, isnan, le, logical_and, logical_not, logical_or, logical_xor, lt, ne
from varlens.ops.pointwise import ceil, floor, round, trunc
from varlens.ops.einsum import einsum
from varlens.ops.pointwise import _add, _sub  # noqa: F401  (operator fast paths)
from varlens.ops.pointwise import abs, add, cast, clamp, clone, cos, div, erf, exp, log, maximum, minimum, mul, neg, pow, rdiv, rpow, rsqrt, rsub, sigmoid, sign, sin, sqrt, square, sub, tanh, where
from varlens.ops.activation import elu, gelu, leaky_relu, relu, silu, softplus
from varlens.ops.index import (gather, getitem, index_key, setitem, index_scatter, index_select,
                               masked_fill, one_hot, scatter, scatter_add)
from varlens.ops.linalg import bmm, dot, matmul, mm, outer
from varlens.ops.reduce import all, amax, amin, any, argmax, argmin, logsumexp, max, mean, min, prod, softmax, log_softmax, std, std_mean, sum, var, var_mean
from varlens.ops.linalg import norm
from varlens.ops.scan import cumsum
from varlens.ops.order import argsort, sort, topk
from varlens.ops.order import unique
from varlens.ops.index import nonzero
from varlens.ops.shape import meshgrid, roll
from varlens.ops.index import diag, diagonal, repeat_interleave, tril, triu
from varlens.ops.shape import (broadcast_to, cat, chunk, concat, concatenate, expand, expand_as,
                               flatten, flip, movedim, permute, repeat, reshape, split, squeeze,
                               stack, swapaxes, t, transpose, unbind, unflatten, unsqueeze, view,
                               view_as)
from varlens.core.tensor import Tensor


from varlens.ops.pointwise import expm1, log1p  # noqa: E402,F401  (one op each: accurate near 0)
from varlens.ops.pointwise import absolute, clip, divide, lerp, log10, log2, multiply, negative, reciprocal, subtract, true_divide  # noqa: E402,F401
from varlens.ops.compare import greater, less  # noqa: E402,F401
from varlens.ops.linalg import mv  # noqa: E402,F401


def _r(fn):
    """Reflected operator: other OP self."""
    return lambda self, other: fn(self, other)


def _size_args(fn):
    def m(self, *shape):
        return fn(self, *shape)
    return m


_METHODS = {
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

from varlens.ops.tensor_methods import METHODS as _TENSOR_METHODS  # noqa: E402  (add_, to, clone, x[k] = v, ...)

_METHODS.update(_TENSOR_METHODS)
for _name, _fn in _METHODS.items():
    setattr(Tensor, _name, _fn)
del _name, _fn

# more of PyTorch's Tensor API, composed from the ops above (varlens/ops/extra.py)
from varlens.ops.extra import fmod
from varlens.ops.shape import fliplr, flipud, narrow, rot90
from varlens.ops.order import bincount, histc, median
from varlens.ops.scan import diff
from varlens.ops.reduce import count_nonzero
from varlens.ops.pointwise import frac, logit, nan_to_num
from varlens.ops.index import index_add, index_copy, index_fill
from varlens.ops import extra as _extra  # noqa: E402

_extra.install()
from varlens.ops import more as _more  # noqa: E402

globals().update({k: v for k, v in _more.FUNCTIONS.items() if k not in globals()})
_more.install()
from varlens.ops import surface as _surface  # noqa: E402  (cumprod, cummax, tensordot, cov, ... : varlens/ops/surface.py)

globals().update({k: v for k, v in _surface.FUNCTIONS.items() if k not in globals()})
_surface.install()
