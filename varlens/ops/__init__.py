"""varlens.ops: every differentiable op as a Function (forward + backward side by side), one
module per family (pointwise, activation, special, compare, reduce, scan, order, shape, index,
linalg, einsum, random, creation; nn/ for the fused layer ops), plus the functions users call.
This package re-exports the common ones by name; the Tensor methods and the varlens namespace
are built from these in one place, varlens/_surface.py."""
from __future__ import annotations

from varlens.ops.nn.attention import scaled_dot_product_attention
from varlens.ops.pointwise import floor_divide, remainder
from varlens.ops.compare import allclose, bitwise_and, bitwise_not, bitwise_or, eq, equal, ge, gt, isclose, isfinite, isinf, isnan, le, logical_and, logical_not, logical_or, logical_xor, lt, ne
from varlens.ops.pointwise import ceil, floor, round, trunc
from varlens.ops.einsum import einsum
from varlens.ops.pointwise import _add, _sub  # noqa: F401  (operator fast paths)
from varlens.ops.pointwise import abs, add, cast, clamp, clone, cos, div, erf, exp, log, maximum, minimum, mul, neg, pow, rdiv, rpow, rsqrt, rsub, sigmoid, sign, sin, sqrt, square, sub, tanh, where
from varlens.ops.activation import elu, gelu, hardtanh, leaky_relu, relu, silu, softplus
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



# more of PyTorch's Tensor API (methods too: varlens/_surface.py)
from varlens.ops.pointwise import fmod
from varlens.ops.shape import fliplr, flipud, narrow, rot90
from varlens.ops.order import bincount, histc, median
from varlens.ops.scan import diff
from varlens.ops.reduce import count_nonzero
from varlens.ops.pointwise import frac, logit, nan_to_num
from varlens.ops.index import index_add, index_copy, index_fill


def _public_names():
    """What ``from varlens.ops import *`` gives: the functions and classes above, never the family
    submodules (``varlens.ops.device`` must not shadow ``varlens.device``)."""
    import types
    return sorted(n for n, v in globals().items()
                  if not n.startswith("_") and n != "annotations" and not isinstance(v, types.ModuleType))


__all__ = _public_names()
