"""The PyTorch surface, built in one place: one table, ``SURFACE``, declares every Tensor method
and operator attached from outside varlens/core/tensor.py and the ``varlens.*`` functions that
go with them.  Each row is ``(name, function, method)``:

- ``function``: what ``varlens.NAME`` is (``None``: the table adds no ``varlens.NAME``);
- ``method``: what ``Tensor.NAME`` is (``SAME``: the function itself; ``None``: no method).

Each name appears once (checked when this module is imported, and by tests/test_layering.py),
so there is no precedence between tables: what runs for ``x.movedim(...)`` is the ``movedim``
row.  A row may not name an attribute that Tensor's class body (core/tensor.py) defines.

``install_methods()`` runs once, when varlens is imported (right after the ops), and sets each
method on Tensor; ``install_namespace(globals())`` runs once at the end of varlens/__init__.py and
binds the functions (a name varlens/__init__.py already bound must be the same object).  Both
pass through varlens/_torch_args.py, which wraps what needs torch's keyword aliases (``axis=``,
``keepdims=``, ``input=``, ``out=``, ...) from the signatures and from the ``@torch_args`` mark
each function carries at its definition (varlens/core/arg_rules.py).  Nothing else sets Tensor
attributes (tests/test_layering.py checks it).
"""
from __future__ import annotations

from varlens import _torch_args
from varlens.core import dtypes as DT
from varlens.core.arg_rules import torch_args
from varlens.core.dtypes import can_cast, promote_types
from varlens.core.tensor import Tensor
from varlens.ops import linalg as L
from varlens.ops.activation import relu
from varlens.ops.compare import (allclose, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, eq, equal, ge,
                                 greater_equal, gt, isclose, isfinite, isin, isinf, isnan, isneginf,
                                 isposinf, le, less_equal, logical_and, logical_not, logical_or, logical_xor,
                                 lt, ne, not_equal)
from varlens.ops.creation import (asarray, bartlett_window, blackman_window, fill, hamming_window,
                                  hann_window, kaiser_window, logspace, scalar_tensor)
from varlens.ops.device import tensor_cpu, tensor_cuda, tensor_is_pinned, tensor_pin_memory, tensor_to
from varlens.ops.index import (argwhere, combinations, diag, diag_embed, diagflat, diagonal,
                               diagonal_scatter, fill_diagonal, gather, getitem, index_add, index_copy,
                               index_fill, index_put, index_select, masked_fill, masked_scatter,
                               masked_select, nonzero, put, repeat_interleave, scatter, scatter_add,
                               scatter_reduce, select, select_scatter, slice_scatter, take, take_along_dim,
                               tril, triu)
from varlens.ops.linalg import (addbmm, addmm, addmv, addr, baddbmm, bmm, cdist, chain_matmul,
                                cholesky_inverse, cholesky_old, cholesky_solve, corrcoef, cov, cross, dist,
                                dot, geqrf, ger, inner, kron, lu_old, lu_solve_old, lu_unpack, matmul,
                                matrix_exp, matrix_power, mm, mv, norm, orgqr, ormqr, outer, pca_lowrank,
                                pinverse, qr_old, renorm, svd_lowrank, svd_old, tensordot, trace,
                                triangular_solve, vander, vdot)
from varlens.ops.order import (argsort, bincount, bucketize, histc, histogram, kthvalue, median, mode, msort,
                               nanmedian, nanquantile, quantile, searchsorted, sort, topk, unique, unique_consecutive)
from varlens.ops.pointwise import (_add, _sub, abs, acos, acosh, add, addcdiv, addcmul, arccos, arcsin,
                                   arctan, arctan2, asin, asinh, atan, atan2, atanh, bitwise_left_shift,
                                   bitwise_right_shift, ceil, clamp, clamp_max, clamp_min, copysign, cos,
                                   cosh, deg2rad, div, erf, erfc, exp, exp2, expm1, float_power, floor,
                                   floor_divide, fmax, fmin, fmod, frac, frexp, gcd, heaviside, hypot, lcm,
                                   ldexp, lerp, log, log1p, log2, log10, logaddexp, logaddexp2, logit,
                                   maximum, minimum, mul, nan_to_num, neg, nextafter, positive, pow, rad2deg,
                                   rdiv, reciprocal, remainder, round, rpow, rsqrt, rsub, sgn, sigmoid, sign,
                                   signbit, sin, sinc, sinh, sqrt, square, sub, tan, tanh, trunc, where)
from varlens.ops.queries import (get_device, is_complex, is_floating_point, is_nonzero, is_same_size,
                                 is_signed, result_type)
from varlens.ops.random import binomial, poisson, randint_like
from varlens.ops.reduce import (all, amax, amin, aminmax, any, argmax, argmin, count_nonzero, log_softmax,
                                logsumexp, max, mean, min, nanmean, nansum, prod, softmax, std, sum,
                                sum_to_size, var)
from varlens.ops.scan import (cummax, cummin, cumprod, cumsum, cumulative_trapezoid, diff, gradient, logcumsumexp,
                              trapezoid, trapz)
from varlens.ops.shape import (adjoint, as_strided, atleast_1d, atleast_2d, atleast_3d, block_diag, broadcast_shapes,
                               broadcast_tensors, broadcast_to, cartesian_prod, chunk, column_stack, dsplit,
                               dstack, expand, expand_as, flatten, flip, fliplr, flipud, hsplit, hstack,
                               moveaxis, movedim, narrow, narrow_copy, permute, ravel, repeat, reshape, reshape_as, roll,
                               rot90, row_stack, split, split_with_sizes, squeeze, swapdims, t, tensor_split,
                               tile, transpose, tril_indices, triu_indices, type_as, unbind, unflatten,
                               unfold, unravel_index, unsqueeze, view, view_as, vsplit, vstack)
from varlens.ops.special import digamma, erfinv, i0, igamma, igammac, lgamma, mvlgamma, polygamma, xlogy
from varlens.ops.tensor_methods import (_H, __setitem__, _bernoulli_method, _bfloat16_error, _cmp_cast,
                                        _float_power_, _identity, _inplace_from, _o_trunc, _rand_fill,
                                        _random_fill, _reshaping_inplace, _torch_inplace, abs_, add_,
                                        addcdiv_, addcmul_, apply_, bernoulli_, clamp_, copy_, cos_, div_,
                                        exp_, fill_, lerp_, log_, map_, mul_, neg_, normal_, pow_, relu_,
                                        sigmoid_, sin_, sqrt_, sub_, tanh_, tensor_clone, tensor_contiguous,
                                        tensor_multinomial, uniform_, zero_)
from varlens.settings import (are_deterministic_algorithms_enabled, compile, get_default_device,
                              get_float32_matmul_precision, get_num_interop_threads,
                              is_deterministic_algorithms_warn_only_enabled, set_default_device,
                              set_float32_matmul_precision, set_flush_denormal, set_num_interop_threads,
                              use_deterministic_algorithms)

_REDUCTIONS = ("none", "mean", "sum")   # torch's at::Reduction codes 0, 1, 2


def _reduction(name, reduction):
    """torch's top-level losses take the reduction as an int code (0 none, 1 mean, 2 sum)."""
    if isinstance(reduction, bool) or not isinstance(reduction, int):
        raise TypeError(f"{name}(): argument 'reduction' must be int, not {type(reduction).__name__}")
    if reduction not in (0, 1, 2):
        raise ValueError(f"{name}(): argument 'reduction' must be 0 (none), 1 (mean) or 2 (sum), got {reduction}")
    return _REDUCTIONS[reduction]


def _F():
    import varlens.nn.functional as F  # loaded before any varlens.* function can be called
    return F


# torch.NAME_loss at the top level: nn.functional's loss with torch's native signature, where the
# reduction is an int code and (as torch 2.13 binds it) defaults to 0, no reduction
@torch_args(tensor_first=True, first="input1", names=("input1", "input2", "target"))
def _torch_cosine_embedding_loss(input1, input2, target, margin=0.0, reduction=0):
    return _F().cosine_embedding_loss(input1, input2, target, margin=margin,
                                      reduction=_reduction("cosine_embedding_loss", reduction))


@torch_args(tensor_first=True, first="input1", names=("input1", "input2", "target"))
def _torch_margin_ranking_loss(input1, input2, target, margin=0.0, reduction=0):
    return _F().margin_ranking_loss(input1, input2, target, margin=margin,
                                    reduction=_reduction("margin_ranking_loss", reduction))


@torch_args(tensor_first=True)
def _torch_hinge_embedding_loss(input, target, margin=1.0, reduction=0):  # noqa: A002
    return _F().hinge_embedding_loss(input, target, margin=margin,
                                     reduction=_reduction("hinge_embedding_loss", reduction))


@torch_args(tensor_first=True, first="anchor", names=("anchor", "positive", "negative"))
def _torch_triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False, reduction=0):
    return _F().triplet_margin_loss(anchor, positive, negative, margin=margin, p=p, eps=eps, swap=swap,
                                    reduction=_reduction("triplet_margin_loss", reduction))


@torch_args(tensor_first=True)
def _torch_poisson_nll_loss(input, target, log_input, full, eps, reduction):  # noqa: A002
    return _F().poisson_nll_loss(input, target, log_input=log_input, full=full, eps=eps,
                                 reduction=_reduction("poisson_nll_loss", reduction))


SAME = "same"  # the method column of a row whose method is its function


class _functional:
    """A row's function that is torch.nn.functional's (``varlens.conv2d is F.conv2d``); looked
    up when the namespace is installed, since nn.functional is imported after the ops."""
    __slots__ = ("name",)

    def __init__(self, name):
        self.name = name


def _where_method(self, condition, other):
    """Tensor.where(condition, other): ``self`` where condition holds, else other."""
    return where(condition, self, other)


@torch_args(tensor_first=True)
def _unsafe_chunk(input, chunks, dim=0):
    """torch.unsafe_chunk: chunk (varlens has no view-aliasing checks for it to skip)."""
    return chunk(input, chunks, dim)


@torch_args(tensor_first=True)
def _unsafe_split(input, split_size, dim=0):
    """torch.unsafe_split: split (varlens has no view-aliasing checks for it to skip)."""
    return split(input, split_size, dim)


def _fill_diagonal_(self, fill_value, wrap=False):
    """Tensor.fill_diagonal_(fill_value, wrap=False): in place, as the other NAME_ methods."""
    return _inplace_from("fill_diagonal", lambda t: fill_diagonal(t, fill_value, wrap))(self)


_transpose_ = _reshaping_inplace("transpose", transpose)  # also swapaxes_ and swapdims_


SURFACE = (
    # (name, varlens.NAME, Tensor.NAME)
    # -- operators and the core methods
    ("__add__", None, _add),
    ("__radd__", None, _add),
    ("__sub__", None, _sub),
    ("__rsub__", None, rsub),
    ("__mul__", None, mul),
    ("__rmul__", None, mul),
    ("__truediv__", None, div),
    ("__rtruediv__", None, rdiv),
    ("__neg__", None, neg),
    ("__pow__", None, pow),
    ("__rpow__", None, rpow),
    ("__matmul__", None, matmul),
    ("__rmatmul__", None, lambda s, o: matmul(o, s)),
    ("__getitem__", None, getitem),
    ("__abs__", None, abs),
    ("__pos__", None, lambda s: s),
    ("__eq__", None, eq),
    ("__ne__", None, ne),
    ("__lt__", None, lt),
    ("__le__", None, le),
    ("__gt__", None, gt),
    ("__ge__", None, ge),
    ("__and__", None, bitwise_and),
    ("__or__", None, bitwise_or),
    ("__invert__", None, bitwise_not),
    ("__floordiv__", None, floor_divide),
    ("__mod__", None, remainder),
    ("__xor__", None, logical_xor),
    ("__rfloordiv__", None, lambda s, o: floor_divide(o, s)),
    ("__rmod__", None, lambda s, o: remainder(o, s)),
    ("add", add, SAME),
    ("sub", sub, SAME),
    ("subtract", sub, SAME),
    ("mul", mul, SAME),
    ("multiply", mul, SAME),
    ("div", div, SAME),
    ("divide", div, SAME),
    ("true_divide", div, SAME),
    ("neg", neg, SAME),
    ("negative", neg, SAME),
    ("pow", pow, SAME),
    ("exp", exp, SAME),
    ("log", log, SAME),
    ("log1p", log1p, SAME),
    ("expm1", expm1, SAME),
    ("log2", log2, SAME),
    ("log10", log10, SAME),
    ("sqrt", sqrt, SAME),
    ("rsqrt", rsqrt, SAME),
    ("square", square, SAME),
    ("abs", abs, SAME),
    ("absolute", abs, SAME),
    ("sign", sign, SAME),
    ("sin", sin, SAME),
    ("cos", cos, SAME),
    ("erf", erf, SAME),
    ("tanh", tanh, SAME),
    ("sigmoid", sigmoid, SAME),
    ("relu", relu, SAME),
    ("clamp", clamp, SAME),
    ("clip", clamp, SAME),
    ("maximum", maximum, SAME),
    ("minimum", minimum, SAME),
    ("reciprocal", reciprocal, SAME),
    ("lerp", lerp, SAME),
    ("floor", floor, SAME),
    ("ceil", ceil, SAME),
    ("round", round, SAME),
    ("trunc", trunc, SAME),
    ("remainder", remainder, SAME),
    ("isnan", isnan, SAME),
    ("isinf", isinf, SAME),
    ("isfinite", isfinite, SAME),
    ("eq", eq, SAME),
    ("ne", ne, SAME),
    ("lt", lt, SAME),
    ("le", le, SAME),
    ("gt", gt, SAME),
    ("ge", ge, SAME),
    ("logical_and", logical_and, SAME),
    ("logical_or", logical_or, SAME),
    ("logical_not", logical_not, SAME),
    ("logical_xor", logical_xor, SAME),
    ("masked_fill", masked_fill, SAME),
    ("where", where, _where_method),
    ("matmul", matmul, SAME),
    ("mm", mm, SAME),
    ("bmm", bmm, SAME),
    ("dot", dot, SAME),
    ("mv", mv, SAME),
    ("outer", outer, SAME),
    ("sum", sum, SAME),
    ("mean", mean, SAME),
    ("var", var, SAME),
    ("std", std, SAME),
    ("max", max, SAME),
    ("min", min, SAME),
    ("amax", amax, SAME),
    ("amin", amin, SAME),
    ("argmax", argmax, SAME),
    ("argmin", argmin, SAME),
    ("logsumexp", logsumexp, SAME),
    ("prod", prod, SAME),
    ("softmax", softmax, SAME),
    ("log_softmax", log_softmax, SAME),
    ("cumsum", cumsum, SAME),
    ("norm", norm, SAME),
    ("all", all, SAME),
    ("any", any, SAME),
    ("sort", sort, SAME),
    ("argsort", argsort, SAME),
    ("topk", topk, SAME),
    ("tril", tril, SAME),
    ("triu", triu, SAME),
    ("diag", diag, SAME),
    ("diagonal", diagonal, SAME),
    ("roll", roll, SAME),
    ("repeat_interleave", repeat_interleave, SAME),
    ("nonzero", nonzero, SAME),
    ("unique", unique, SAME),
    ("reshape", reshape, SAME),
    ("view", view, SAME),
    ("view_as", view_as, SAME),
    ("permute", permute, SAME),
    ("transpose", transpose, SAME),
    ("swapaxes", transpose, SAME),
    ("t", t, SAME),
    ("squeeze", squeeze, SAME),
    ("unsqueeze", unsqueeze, SAME),
    ("flatten", flatten, SAME),
    ("unflatten", unflatten, SAME),
    ("expand", expand, SAME),
    ("expand_as", expand_as, SAME),
    ("broadcast_to", broadcast_to, SAME),
    ("flip", flip, SAME),
    ("split", split, SAME),
    ("chunk", chunk, SAME),
    ("unbind", unbind, SAME),
    ("repeat", repeat, SAME),
    ("gather", gather, SAME),
    ("scatter_add", scatter_add, SAME),
    ("scatter", scatter, SAME),
    ("index_select", index_select, SAME),
    ("allclose", allclose, SAME),
    ("equal", equal, SAME),
    # -- in-place updates, x[k] = v, copy/clone/contiguous (varlens/ops/tensor_methods.py)
    ("add_", None, add_),
    ("sub_", None, sub_),
    ("mul_", None, mul_),
    ("div_", None, div_),
    ("pow_", None, pow_),
    ("addcmul_", None, addcmul_),
    ("addcdiv_", None, addcdiv_),
    ("lerp_", None, lerp_),
    ("exp_", _torch_inplace("exp"), exp_),
    ("log_", _torch_inplace("log"), log_),
    ("sqrt_", _torch_inplace("sqrt"), sqrt_),
    ("abs_", _torch_inplace("abs"), abs_),
    ("neg_", _torch_inplace("neg"), neg_),
    ("tanh_", _torch_inplace("tanh"), tanh_),
    ("sin_", _torch_inplace("sin"), sin_),
    ("cos_", _torch_inplace("cos"), cos_),
    ("relu_", _torch_inplace("relu"), relu_),
    ("sigmoid_", _torch_inplace("sigmoid"), sigmoid_),
    ("clamp_", _torch_inplace("clamp"), clamp_),
    ("zero_", _torch_inplace("zero"), zero_),
    ("fill_", _torch_inplace("fill"), fill_),
    ("copy_", None, copy_),
    ("normal_", None, normal_),
    ("uniform_", None, uniform_),
    ("bernoulli_", None, bernoulli_),
    ("apply_", None, apply_),
    ("map_", None, map_),
    ("multinomial", None, tensor_multinomial),
    ("__setitem__", None, __setitem__),
    ("contiguous", None, tensor_contiguous),
    ("clone", None, tensor_clone),
    ("__iadd__", None, add_),
    ("__isub__", None, sub_),
    ("__imul__", None, mul_),
    ("__itruediv__", None, div_),
    ("clip_", _torch_inplace("clip"), clamp_),
    # -- devices (varlens/ops/device.py)
    ("cuda", None, tensor_cuda),
    ("cpu", None, tensor_cpu),
    ("to", None, tensor_to),
    ("pin_memory", None, tensor_pin_memory),
    ("is_pinned", None, tensor_is_pinned),
    # -- index_add/copy/fill, narrow, strides, dtype shortcuts, and their in-place variants
    ("index_add", index_add, SAME),
    ("index_copy", index_copy, SAME),
    ("index_fill", index_fill, SAME),
    ("fmod", fmod, SAME),
    ("frac", frac, SAME),
    ("logit", logit, SAME),
    ("nan_to_num", nan_to_num, SAME),
    ("count_nonzero", count_nonzero, SAME),
    ("diff", diff, SAME),
    ("median", median, SAME),
    ("bincount", bincount, SAME),
    ("histc", histc, SAME),
    ("narrow", narrow, SAME),
    ("narrow_copy", narrow_copy, SAME),
    ("gradient", gradient, None),
    ("as_strided", as_strided, SAME),
    ("rot90", rot90, SAME),
    ("fliplr", fliplr, SAME),
    ("flipud", flipud, SAME),
    ("type_as", None, type_as),
    ("reshape_as", None, reshape_as),
    ("unfold", None, unfold),
    ("byte", None, lambda s: s.to(DT.uint8)),
    ("char", None, lambda s: s.to(DT.int8)),
    ("short", None, lambda s: s.to(DT.int16)),
    ("stride", None, lambda s, dim=None: (tuple(st // s._data.itemsize for st in s._data.strides) if dim is None
                                       else s._data.strides[dim] // s._data.itemsize)),
    ("data_ptr", None, lambda s: s._data.ctypes.data),
    ("share_memory_", None, lambda s: s),
    ("exponential_", None, _random_fill("exponential")),
    ("random_", None, _random_fill("random")),
    ("nbytes", None, property(lambda s: s._data.nbytes)),
    ("scatter_", None, _inplace_from("scatter", scatter)),
    ("scatter_add_", None, _inplace_from("scatter_add", scatter_add)),
    ("masked_fill_", None, _inplace_from("masked_fill", masked_fill)),
    ("index_add_", None, _inplace_from("index_add", index_add)),
    ("index_copy_", None, _inplace_from("index_copy", index_copy)),
    ("index_fill_", None, _inplace_from("index_fill", index_fill)),
    ("clamp_min_", _torch_inplace("clamp_min"), _inplace_from("clamp_min", lambda s, v: clamp(s, v, None))),
    ("clamp_max_", _torch_inplace("clamp_max"), _inplace_from("clamp_max", lambda s, v: clamp(s, None, v))),
    ("floor_", _torch_inplace("floor"), _inplace_from("floor", floor)),
    ("ceil_", _torch_inplace("ceil"), _inplace_from("ceil", ceil)),
    ("round_", _torch_inplace("round"), _inplace_from("round", round)),
    ("trunc_", _torch_inplace("trunc"), _inplace_from("trunc", trunc)),
    ("sign_", None, _inplace_from("sign", sign)),
    ("reciprocal_", _torch_inplace("reciprocal"), _inplace_from("reciprocal", reciprocal)),
    ("square_", _torch_inplace("square"), _inplace_from("square", square)),
    ("log1p_", _torch_inplace("log1p"), _inplace_from("log1p", log1p)),
    ("expm1_", _torch_inplace("expm1"), _inplace_from("expm1", expm1)),
    ("nan_to_num_", _torch_inplace("nan_to_num"), _inplace_from("nan_to_num", nan_to_num)),
    ("fmod_", None, _inplace_from("fmod", fmod)),
    ("remainder_", None, _inplace_from("remainder", remainder)),
    ("frac_", _torch_inplace("frac"), _inplace_from("frac", frac)),
    ("log2_", _torch_inplace("log2"), _inplace_from("log2", log2)),
    ("log10_", _torch_inplace("log10"), _inplace_from("log10", log10)),
    ("rsqrt_", _torch_inplace("rsqrt"), _inplace_from("rsqrt", rsqrt)),
    ("where_", None, _inplace_from("where", lambda s, c, other: where(c, s, other))),
    ("unsqueeze_", None, _reshaping_inplace("unsqueeze", unsqueeze)),
    ("squeeze_", None, _reshaping_inplace("squeeze", squeeze)),
    ("t_", None, _reshaping_inplace("t", t)),
    ("transpose_", None, _transpose_),
    # -- more of torch's functions, methods too (trigonometry, addmm/baddbmm, take, quantile, ...)
    ("atan", atan, SAME),
    ("arctan", arctan, SAME),
    ("asin", asin, SAME),
    ("arcsin", arcsin, SAME),
    ("acos", acos, SAME),
    ("arccos", arccos, SAME),
    ("atan2", atan2, SAME),
    ("arctan2", arctan2, SAME),
    ("erfinv", erfinv, SAME),
    ("lgamma", lgamma, SAME),
    ("digamma", digamma, SAME),
    ("tan", tan, SAME),
    ("sinh", sinh, SAME),
    ("cosh", cosh, SAME),
    ("hypot", hypot, SAME),
    ("logaddexp", logaddexp, SAME),
    ("xlogy", xlogy, SAME),
    ("exp2", exp2, SAME),
    ("erfc", erfc, SAME),
    ("deg2rad", deg2rad, SAME),
    ("rad2deg", rad2deg, SAME),
    ("copysign", copysign, SAME),
    ("signbit", signbit, SAME),
    ("heaviside", heaviside, SAME),
    ("addmm", addmm, SAME),
    ("baddbmm", baddbmm, SAME),
    ("addmv", addmv, SAME),
    ("addr", addr, SAME),
    ("trace", trace, SAME),
    ("cross", cross, SAME),
    ("kron", kron, SAME),
    ("tile", tile, SAME),
    ("swapdims", swapdims, SAME),
    ("masked_select", masked_select, SAME),
    ("take", take, SAME),
    ("take_along_dim", take_along_dim, SAME),
    ("argwhere", argwhere, SAME),
    ("kthvalue", kthvalue, SAME),
    ("quantile", quantile, SAME),
    ("nanquantile", nanquantile, SAME),
    ("logcumsumexp", logcumsumexp, SAME),
    ("aminmax", aminmax, SAME),
    ("clamp_min", clamp_min, SAME),
    ("clamp_max", clamp_max, SAME),
    ("inverse", L.inv, SAME),
    ("det", L.det, SAME),
    ("logdet", L.logdet, SAME),
    ("slogdet", L.slogdet, SAME),
    # -- more of torch's functions, methods too (special functions, scans, nan-reductions, scatter, ...)
    ("movedim", movedim, SAME),
    ("index_put", index_put, SAME),
    ("polygamma", polygamma, lambda s, n: polygamma(n, s)),
    ("i0", i0, SAME),
    ("igamma", igamma, SAME),
    ("igammac", igammac, SAME),
    ("cumprod", cumprod, SAME),
    ("cummax", cummax, SAME),
    ("cummin", cummin, SAME),
    ("mode", mode, SAME),
    ("nansum", nansum, SAME),
    ("nanmean", nanmean, SAME),
    ("nanmedian", nanmedian, SAME),
    ("sinc", sinc, SAME),
    ("asinh", asinh, SAME),
    ("arcsinh", asinh, SAME),
    ("acosh", acosh, SAME),
    ("arccosh", acosh, SAME),
    ("atanh", atanh, SAME),
    ("arctanh", atanh, SAME),
    ("diag_embed", diag_embed, SAME),
    ("diagflat", diagflat, SAME),
    ("tensordot", tensordot, SAME),
    ("inner", inner, SAME),
    ("vdot", vdot, SAME),
    ("ger", ger, SAME),
    ("addcmul", addcmul, SAME),
    ("addcdiv", addcdiv, SAME),
    ("addbmm", addbmm, SAME),
    ("dist", dist, SAME),
    ("float_power", float_power, SAME),
    ("nextafter", nextafter, SAME),
    ("fmax", fmax, SAME),
    ("fmin", fmin, SAME),
    ("logaddexp2", logaddexp2, SAME),
    ("ldexp", ldexp, SAME),
    ("frexp", frexp, SAME),
    ("sgn", sgn, SAME),
    ("mvlgamma", mvlgamma, SAME),
    ("isposinf", isposinf, SAME),
    ("isneginf", isneginf, SAME),
    ("adjoint", adjoint, SAME),
    ("gcd", gcd, SAME),
    ("lcm", lcm, SAME),
    ("bitwise_xor", bitwise_xor, SAME),
    ("bitwise_left_shift", bitwise_left_shift, SAME),
    ("bitwise_right_shift", bitwise_right_shift, SAME),
    ("greater_equal", greater_equal, SAME),
    ("less_equal", less_equal, SAME),
    ("not_equal", not_equal, SAME),
    ("put", put, SAME),
    ("masked_scatter", masked_scatter, SAME),
    ("select", select, SAME),
    ("select_scatter", select_scatter, SAME),
    ("slice_scatter", slice_scatter, SAME),
    ("diagonal_scatter", diagonal_scatter, SAME),
    ("scatter_reduce", scatter_reduce, SAME),
    ("cov", cov, SAME),
    ("corrcoef", corrcoef, SAME),
    ("renorm", renorm, SAME),
    ("histogram", histogram, SAME),
    ("unique_consecutive", unique_consecutive, SAME),
    ("tensor_split", tensor_split, SAME),
    ("hsplit", hsplit, SAME),
    ("vsplit", vsplit, SAME),
    ("dsplit", dsplit, SAME),
    ("split_with_sizes", split_with_sizes, SAME),
    ("msort", msort, SAME),
    ("ravel", ravel, SAME),
    ("moveaxis", moveaxis, SAME),
    ("is_complex", is_complex, SAME),
    ("is_signed", is_signed, SAME),
    ("is_nonzero", is_nonzero, SAME),
    ("is_same_size", is_same_size, SAME),
    ("positive", positive, SAME),
    ("fix", _o_trunc, SAME),
    ("resolve_conj", _identity, SAME),
    ("resolve_neg", _identity, SAME),
    ("conj", _identity, SAME),
    ("conj_physical", _identity, SAME),
    ("sum_to_size", sum_to_size, SAME),
    ("unsafe_chunk", _unsafe_chunk, SAME),
    ("unsafe_split", _unsafe_split, SAME),
    ("fill_diagonal_", None, _fill_diagonal_),
    ("bitwise_and", bitwise_and, SAME),
    ("bitwise_or", bitwise_or, SAME),
    ("bitwise_not", bitwise_not, SAME),
    ("greater", gt, SAME),
    ("less", lt, SAME),
    ("floor_divide", floor_divide, SAME),
    ("isclose", isclose, SAME),
    ("ndimension", None, lambda s: s.ndim),
    ("const_data_ptr", None, lambda s: s._data.ctypes.data),
    ("bernoulli", None, _bernoulli_method),
    ("bfloat16", None, _bfloat16_error),
    ("cauchy_", None, _rand_fill("cauchy")),
    ("log_normal_", None, _rand_fill("log_normal")),
    ("geometric_", None, _rand_fill("geometric")),
    ("absolute_", None, lambda s: s.abs_()),
    ("is_inference", None, lambda s: False),
    ("is_shared", None, lambda s: False),
    # -- in-place variants NAME_: the out-of-place op written back
    ("acos_", _torch_inplace("acos"), _inplace_from("acos", acos)),
    ("arccos_", _torch_inplace("arccos"), _inplace_from("arccos", arccos)),
    ("asin_", _torch_inplace("asin"), _inplace_from("asin", asin)),
    ("arcsin_", _torch_inplace("arcsin"), _inplace_from("arcsin", arcsin)),
    ("atan_", _torch_inplace("atan"), _inplace_from("atan", atan)),
    ("arctan_", _torch_inplace("arctan"), _inplace_from("arctan", arctan)),
    ("atan2_", None, _inplace_from("atan2", atan2)),
    ("arctan2_", None, _inplace_from("arctan2", arctan2)),
    ("acosh_", _torch_inplace("acosh"), _inplace_from("acosh", acosh)),
    ("arccosh_", _torch_inplace("arccosh"), _inplace_from("arccosh", acosh)),
    ("asinh_", _torch_inplace("asinh"), _inplace_from("asinh", asinh)),
    ("arcsinh_", _torch_inplace("arcsinh"), _inplace_from("arcsinh", asinh)),
    ("atanh_", _torch_inplace("atanh"), _inplace_from("atanh", atanh)),
    ("arctanh_", _torch_inplace("arctanh"), _inplace_from("arctanh", atanh)),
    ("cosh_", _torch_inplace("cosh"), _inplace_from("cosh", cosh)),
    ("sinh_", _torch_inplace("sinh"), _inplace_from("sinh", sinh)),
    ("tan_", _torch_inplace("tan"), _inplace_from("tan", tan)),
    ("erf_", _torch_inplace("erf"), _inplace_from("erf", erf)),
    ("erfc_", _torch_inplace("erfc"), _inplace_from("erfc", erfc)),
    ("erfinv_", None, _inplace_from("erfinv", erfinv)),
    ("exp2_", _torch_inplace("exp2"), _inplace_from("exp2", exp2)),
    ("digamma_", None, _inplace_from("digamma", digamma)),
    ("lgamma_", None, _inplace_from("lgamma", lgamma)),
    ("deg2rad_", _torch_inplace("deg2rad"), _inplace_from("deg2rad", deg2rad)),
    ("rad2deg_", _torch_inplace("rad2deg"), _inplace_from("rad2deg", rad2deg)),
    ("copysign_", None, _inplace_from("copysign", copysign)),
    ("hypot_", None, _inplace_from("hypot", hypot)),
    ("xlogy_", _torch_inplace("xlogy"), _inplace_from("xlogy", xlogy)),
    ("heaviside_", None, _inplace_from("heaviside", heaviside)),
    ("logit_", _torch_inplace("logit"), _inplace_from("logit", logit)),
    ("sinc_", _torch_inplace("sinc"), _inplace_from("sinc", sinc)),
    ("sgn_", None, _inplace_from("sgn", sgn)),
    ("mvlgamma_", None, _inplace_from("mvlgamma", mvlgamma)),
    ("cumprod_", None, _inplace_from("cumprod", cumprod)),
    ("cumsum_", None, _inplace_from("cumsum", cumsum)),
    ("addmm_", None, _inplace_from("addmm", addmm)),
    ("addmv_", _torch_inplace("addmv"), _inplace_from("addmv", addmv)),
    ("addr_", None, _inplace_from("addr", addr)),
    ("baddbmm_", None, _inplace_from("baddbmm", baddbmm)),
    ("addbmm_", None, _inplace_from("addbmm", addbmm)),
    ("tril_", None, _inplace_from("tril", tril)),
    ("triu_", None, _inplace_from("triu", triu)),
    ("i0_", _torch_inplace("i0"), _inplace_from("i0", i0)),
    ("igamma_", None, _inplace_from("igamma", igamma)),
    ("igammac_", None, _inplace_from("igammac", igammac)),
    ("polygamma_", None, _inplace_from("polygamma", lambda s, n: polygamma(n, s))),
    ("renorm_", None, _inplace_from("renorm", renorm)),
    ("nextafter_", None, _inplace_from("nextafter", nextafter)),
    ("ldexp_", _torch_inplace("ldexp"), _inplace_from("ldexp", ldexp)),
    ("gcd_", _torch_inplace("gcd"), _inplace_from("gcd", gcd)),
    ("lcm_", _torch_inplace("lcm"), _inplace_from("lcm", lcm)),
    ("divide_", None, _inplace_from("divide", div)),
    ("true_divide_", None, _inplace_from("true_divide", div)),
    ("multiply_", None, _inplace_from("multiply", mul)),
    ("subtract_", None, _inplace_from("subtract", sub)),
    ("negative_", _torch_inplace("negative"), _inplace_from("negative", neg)),
    ("floor_divide_", None, _inplace_from("floor_divide", floor_divide)),
    ("index_put_", _torch_inplace("index_put"), _inplace_from("index_put", index_put)),
    ("put_", None, _inplace_from("put", put)),
    ("masked_scatter_", None, _inplace_from("masked_scatter", masked_scatter)),
    ("scatter_reduce_", None, _inplace_from("scatter_reduce", scatter_reduce)),
    ("bitwise_and_", None, _inplace_from("bitwise_and", bitwise_and)),
    ("bitwise_or_", None, _inplace_from("bitwise_or", bitwise_or)),
    ("bitwise_xor_", None, _inplace_from("bitwise_xor", bitwise_xor)),
    ("bitwise_not_", None, _inplace_from("bitwise_not", bitwise_not)),
    ("bitwise_left_shift_", None, _inplace_from("bitwise_left_shift", bitwise_left_shift)),
    ("bitwise_right_shift_", None, _inplace_from("bitwise_right_shift", bitwise_right_shift)),
    ("logical_and_", None, _inplace_from("logical_and", logical_and)),
    ("logical_or_", None, _inplace_from("logical_or", logical_or)),
    ("logical_xor_", None, _inplace_from("logical_xor", logical_xor)),
    ("logical_not_", None, _inplace_from("logical_not", logical_not)),
    ("fix_", None, _inplace_from("fix", _o_trunc)),
    ("eq_", None, _inplace_from("eq", _cmp_cast("eq"))),
    ("ne_", None, _inplace_from("ne", _cmp_cast("ne"))),
    ("lt_", None, _inplace_from("lt", _cmp_cast("lt"))),
    ("le_", None, _inplace_from("le", _cmp_cast("le"))),
    ("gt_", None, _inplace_from("gt", _cmp_cast("gt"))),
    ("ge_", None, _inplace_from("ge", _cmp_cast("ge"))),
    ("greater_", None, _inplace_from("greater", _cmp_cast("gt"))),
    ("greater_equal_", None, _inplace_from("greater_equal", _cmp_cast("ge"))),
    ("less_", None, _inplace_from("less", _cmp_cast("lt"))),
    ("less_equal_", None, _inplace_from("less_equal", _cmp_cast("le"))),
    ("not_equal_", None, _inplace_from("not_equal", _cmp_cast("ne"))),
    ("float_power_", None, _float_power_),
    ("swapaxes_", None, _transpose_),
    ("swapdims_", None, _transpose_),
    # -- properties
    ("H", None, property(_H)),
    ("mH", None, property(lambda s: transpose(s, -2, -1))),
    ("itemsize", None, property(lambda s: s._data.itemsize)),
    ("is_sparse", None, property(lambda s: False)),
    ("is_quantized", None, property(lambda s: False)),
    ("is_meta", None, property(lambda s: False)),
    ("is_mkldnn", None, property(lambda s: False)),
    ("is_xpu", None, property(lambda s: False)),
    ("is_mps", None, property(lambda s: False)),
    ("is_xla", None, property(lambda s: False)),
    ("is_ipu", None, property(lambda s: False)),
    ("is_hpu", None, property(lambda s: False)),
    ("is_maia", None, property(lambda s: False)),
    ("is_mtia", None, property(lambda s: False)),
    ("is_vulkan", None, property(lambda s: False)),
    ("is_nested", None, property(lambda s: False)),
    ("is_sparse_csr", None, property(lambda s: False)),
    # -- torch's older linalg names (torch.cholesky, torch.svd, ...)
    ("cholesky", cholesky_old, SAME),
    ("cholesky_solve", cholesky_solve, SAME),
    ("cholesky_inverse", cholesky_inverse, SAME),
    ("qr", qr_old, SAME),
    ("svd", svd_old, SAME),
    ("pinverse", pinverse, SAME),
    ("matrix_power", matrix_power, SAME),
    ("matrix_exp", matrix_exp, SAME),
    ("triangular_solve", triangular_solve, SAME),
    ("geqrf", geqrf, SAME),
    ("orgqr", orgqr, SAME),
    ("ormqr", ormqr, SAME),
    ("lu", lu_old, SAME),
    ("lu_solve", lu_solve_old, SAME),
    # -- functions only (varlens.NAME, no Tensor method)
    ("cdist", cdist, None),
    ("atleast_1d", atleast_1d, None),
    ("atleast_2d", atleast_2d, None),
    ("atleast_3d", atleast_3d, None),
    ("vstack", vstack, None),
    ("row_stack", row_stack, None),
    ("hstack", hstack, None),
    ("dstack", dstack, None),
    ("column_stack", column_stack, None),
    ("searchsorted", searchsorted, None),
    ("bucketize", bucketize, None),
    ("special_i0", i0, None),
    ("poisson", poisson, None),
    ("binomial", binomial, None),
    ("block_diag", block_diag, None),
    ("cartesian_prod", cartesian_prod, None),
    ("combinations", combinations, None),
    ("vander", vander, None),
    ("chain_matmul", chain_matmul, None),
    ("isin", isin, None),
    ("trapezoid", trapezoid, None),
    ("trapz", trapz, None),
    ("cumulative_trapezoid", cumulative_trapezoid, None),
    ("logspace", logspace, None),
    ("tril_indices", tril_indices, None),
    ("triu_indices", triu_indices, None),
    ("unravel_index", unravel_index, None),
    ("broadcast_shapes", broadcast_shapes, None),
    ("broadcast_tensors", broadcast_tensors, None),
    ("asarray", asarray, None),
    ("scalar_tensor", scalar_tensor, None),
    ("randint_like", randint_like, None),
    ("fill", fill, None),
    ("hann_window", hann_window, None),
    ("hamming_window", hamming_window, None),
    ("bartlett_window", bartlett_window, None),
    ("blackman_window", blackman_window, None),
    ("kaiser_window", kaiser_window, None),
    ("is_floating_point", is_floating_point, None),
    ("get_device", get_device, None),
    ("result_type", result_type, None),
    ("promote_types", promote_types, None),
    ("can_cast", can_cast, None),
    ("set_float32_matmul_precision", set_float32_matmul_precision, None),
    ("get_float32_matmul_precision", get_float32_matmul_precision, None),
    ("use_deterministic_algorithms", use_deterministic_algorithms, None),
    ("are_deterministic_algorithms_enabled", are_deterministic_algorithms_enabled, None),
    ("is_deterministic_algorithms_warn_only_enabled", is_deterministic_algorithms_warn_only_enabled, None),
    ("set_num_interop_threads", set_num_interop_threads, None),
    ("get_num_interop_threads", get_num_interop_threads, None),
    ("compile", compile, None),
    ("set_default_device", set_default_device, None),
    ("get_default_device", get_default_device, None),
    ("set_flush_denormal", set_flush_denormal, None),
    ("lu_unpack", lu_unpack, None),
    ("svd_lowrank", svd_lowrank, None),
    ("pca_lowrank", pca_lowrank, None),
    ("cosine_similarity", _functional("cosine_similarity"), None),
    ("pairwise_distance", _functional("pairwise_distance"), None),
    ("pdist", _functional("pdist"), None),
    ("cosine_embedding_loss", _torch_cosine_embedding_loss, None),
    ("hinge_embedding_loss", _torch_hinge_embedding_loss, None),
    ("margin_ranking_loss", _torch_margin_ranking_loss, None),
    ("triplet_margin_loss", _torch_triplet_margin_loss, None),
    ("poisson_nll_loss", _torch_poisson_nll_loss, None),
    ("rms_norm", _functional("rms_norm"), None),
    ("layer_norm", _functional("layer_norm"), None),
    ("group_norm", _functional("group_norm"), None),
    ("conv1d", _functional("conv1d"), None),
    ("conv2d", _functional("conv2d"), None),
    ("conv3d", _functional("conv3d"), None),
    ("conv_transpose1d", _functional("conv_transpose1d"), None),
    ("conv_transpose2d", _functional("conv_transpose2d"), None),
    ("conv_transpose3d", _functional("conv_transpose3d"), None),
    ("max_pool1d", _functional("max_pool1d"), None),
    ("max_pool2d", _functional("max_pool2d"), None),
    ("max_pool3d", _functional("max_pool3d"), None),
    ("avg_pool1d", _functional("avg_pool1d"), None),
    ("adaptive_avg_pool1d", _functional("adaptive_avg_pool1d"), None),
    ("pixel_shuffle", _functional("pixel_shuffle"), None),
    ("pixel_unshuffle", _functional("pixel_unshuffle"), None),
    ("channel_shuffle", _functional("channel_shuffle"), None),
    ("selu", _functional("selu"), None),
    ("celu", _functional("celu"), None),
    ("prelu", _functional("prelu"), None),
    ("rrelu", _functional("rrelu"), None),
    ("threshold", _functional("threshold"), None),
    ("hardshrink", _functional("hardshrink"), None),
    ("bilinear", _functional("bilinear"), None),
)


def _check_unique(rows):
    seen = set()
    twice = sorted({r[0] for r in rows if r[0] in seen or seen.add(r[0])})
    if twice:
        raise RuntimeError(f"varlens/_surface.py: SURFACE names {twice} more than once")
    own = sorted(r[0] for r in rows if r[2] is not None and r[0] in vars(Tensor))
    if own:
        raise RuntimeError(f"varlens/_surface.py: SURFACE rows {own} name methods core/tensor.py defines")


_check_unique(SURFACE)


def install_methods():
    """Set every method of the table on Tensor (once), wrapped for torch's keyword aliases where
    its signature needs it; Tensor's own methods that need the aliases are wrapped too."""
    methods = {name: (fn if method is SAME else method) for name, fn, method in SURFACE if method is not None}
    wrapped = _torch_args.wrap_methods({**vars(Tensor), **methods})
    for name, value in {**methods, **wrapped}.items():
        setattr(Tensor, name, value)


def install_namespace(namespace):
    """Bind the table's functions in ``namespace`` (varlens/__init__.py's globals, once, at its
    end) and wrap the namespace for torch's keyword aliases."""
    import varlens.nn.functional as F  # loaded by then (see _functional)
    for name, fn, _method in SURFACE:
        if fn is None:
            continue
        if isinstance(fn, _functional):
            fn = getattr(F, fn.name)
        have = namespace.setdefault(name, fn)
        if have is not fn:
            raise RuntimeError(f"varlens.{name} is bound twice: by varlens/__init__.py ({have!r}) and by "
                               f"varlens/_surface.py ({fn!r})")
    _torch_args.wrap_namespace(namespace)
