"""Keyword aliases that PyTorch's argument parser accepts, added at the API surface.

torch accepts NumPy's spellings ``axis=`` (for ``dim``) and ``keepdims=`` (for
``keepdim``), and names arguments that varlens functions spell differently or take as
``*args``: ``size=`` (zeros/ones/rand/...), ``shape=`` (reshape/view), ``dims=``
(permute), ``input=``/``other=``/``exponent=``/``condition=``.  ``install`` wraps each
public varlens function and Tensor method whose signature differs from torch's in one of
these ways.  The wrapper only looks at the keywords when some were given, so a call
without keywords costs one extra Python call and nothing else; operators (``x + y``)
are never wrapped.
"""
from __future__ import annotations

import builtins
import functools
import inspect

# torch's names for where's arguments, by position (function / method)
_OVERRIDE_FN = {"where": ("condition", "input", "other")}
_OVERRIDE_METHOD = {"where": (None, "condition", "other")}
_SECOND = ("b", "y", "o", "x2", "other_", "e")
# names torch gives to the *args of a variadic function
_VAR_NAMES = ("size", "shape", "dims", "sizes")
_SKIP = {"tensor", "Tensor", "Size", "device", "Generator", "load", "save", "compile", "set_default_dtype",
         "get_default_dtype", "manual_seed", "seed", "initial_seed", "is_tensor", "set_printoptions"}


# functions whose first argument torch requires to be a Tensor: a list, tuple or NumPy array there
# raises torch's TypeError instead of being computed on (or failing with AttributeError '_data').
# The list is the names for which torch.<name>([1., 2.], ...) raises "must be Tensor, not list".
_TENSOR_FIRST = frozenset((
    "abs", "abs_", "absolute", "acos", "acos_", "acosh", "acosh_", "adaptive_avg_pool1d", "add", "addbmm",
    "addcdiv", "addcmul", "addmm", "addmv", "addmv_", "addr", "adjoint", "all", "allclose", "amax", "amin",
    "aminmax", "any", "arccos", "arccos_", "arccosh", "arccosh_", "arcsin", "arcsin_", "arcsinh", "arcsinh_",
    "arctan", "arctan2", "arctan_", "arctanh", "arctanh_", "argmax", "argmin", "argsort", "argwhere", "asin",
    "asin_", "asinh", "asinh_", "atan", "atan2", "atan_", "atanh", "atanh_", "avg_pool1d", "baddbmm",
    "bernoulli", "bilinear", "bincount", "binomial", "bitwise_and", "bitwise_left_shift", "bitwise_not",
    "bitwise_or", "bitwise_right_shift", "bitwise_xor", "bmm", "broadcast_to", "bucketize", "cdist", "ceil",
    "ceil_", "celu", "channel_shuffle", "cholesky", "cholesky_inverse", "cholesky_solve", "chunk", "clamp",
    "clamp_", "clamp_max", "clamp_max_", "clamp_min", "clamp_min_", "clip", "clip_", "clone", "combinations",
    "conj", "conj_physical", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
    "conv_transpose3d", "copysign", "corrcoef", "cos", "cos_", "cosh", "cosh_", "cosine_similarity",
    "count_nonzero", "cov", "cross", "cummax", "cummin", "cumprod", "cumsum", "cumulative_trapezoid",
    "deg2rad", "deg2rad_", "det", "diag", "diag_embed", "diagflat", "diagonal", "diagonal_scatter", "diff",
    "digamma", "dist", "div", "divide", "dot", "dropout", "dsplit", "empty_like", "eq", "equal", "erf", "erf_",
    "erfc", "erfc_", "erfinv", "exp", "exp2", "exp2_", "exp_", "expm1", "expm1_", "fill", "fill_", "fix",
    "flatten", "flip", "fliplr", "flipud", "float_power", "floor", "floor_", "floor_divide", "fmax", "fmin",
    "fmod", "frac", "frac_", "frexp", "full_like", "gather", "gcd", "gcd_", "ge", "geqrf", "ger", "get_device",
    "greater", "greater_equal", "group_norm", "gt", "hardshrink", "heaviside", "histc", "histogram", "hsplit",
    "hypot", "i0", "i0_", "igamma", "igammac", "index_add", "index_copy", "index_fill", "index_put",
    "index_put_", "index_select", "inner", "inverse", "is_complex", "is_floating_point", "is_nonzero",
    "is_same_size", "is_signed", "isclose", "isfinite", "isin", "isinf", "isnan", "isneginf", "isposinf",
    "kron", "kthvalue", "layer_norm", "lcm", "lcm_", "ldexp", "ldexp_", "le", "lerp", "less", "less_equal",
    "lgamma", "log", "log10", "log10_", "log1p", "log1p_", "log2", "log2_", "log_", "log_softmax", "logaddexp",
    "logaddexp2", "logcumsumexp", "logdet", "logical_and", "logical_not", "logical_or", "logical_xor", "logit",
    "logit_", "logsumexp", "lt", "lu", "lu_solve", "lu_unpack", "masked_fill", "masked_scatter",
    "masked_select", "matmul", "matrix_exp", "matrix_power", "max", "max_pool1d", "max_pool2d", "max_pool3d",
    "maximum", "mean", "median", "min", "minimum", "mm", "mode", "moveaxis", "movedim", "msort", "mul",
    "multinomial", "multiply", "mv", "mvlgamma", "nan_to_num", "nan_to_num_", "nanmean", "nanmedian", "nansum",
    "narrow", "ne", "neg", "neg_", "negative", "negative_", "nextafter", "nonzero", "not_equal", "numel",
    "ones_like", "orgqr", "ormqr", "outer", "pairwise_distance", "pdist", "permute", "pinverse",
    "pixel_shuffle", "pixel_unshuffle", "poisson", "positive", "pow", "prelu", "prod", "put", "qr", "quantile",
    "rad2deg", "rad2deg_", "rand_like", "randint_like", "randn_like", "ravel", "reciprocal", "reciprocal_",
    "relu", "relu_", "remainder", "renorm", "repeat_interleave", "reshape", "resolve_conj", "resolve_neg",
    "result_type", "rms_norm", "roll", "rot90", "round", "round_", "rrelu", "rsqrt", "rsqrt_", "rsub",
    "scatter", "scatter_add", "scatter_reduce", "searchsorted", "select", "select_scatter", "selu", "sgn",
    "sigmoid", "sigmoid_", "sign", "signbit", "sin", "sin_", "sinc", "sinc_", "sinh", "sinh_", "slice_scatter",
    "slogdet", "softmax", "sort", "split_with_sizes", "sqrt", "sqrt_", "square", "square_", "squeeze", "std",
    "std_mean", "sub", "subtract", "sum", "svd", "swapaxes", "swapdims", "t", "take", "take_along_dim", "tan",
    "tan_", "tanh", "tanh_", "tensor_split", "threshold", "tile", "topk", "trace", "transpose", "trapezoid",
    "trapz", "triangular_solve", "tril", "triu", "true_divide", "trunc", "trunc_", "unbind", "unflatten",
    "unique", "unique_consecutive", "unsafe_chunk", "unsafe_split", "unsqueeze", "vander", "var", "var_mean",
    "vdot", "vsplit", "where", "xlogy", "xlogy_", "zero_", "zeros_like",
))
_FIRST_NAME = {"where": "condition"}


def _type_name(v):
    from varlens.ops.pointwise import type_name
    return type_name(v)


def _bad_first(where, argname, v):
    raise TypeError(f"{where}(): argument '{argname}' (position 1) must be Tensor, not {_type_name(v)} "
                    f"(wrap data with varlens.tensor(...) or varlens.from_numpy(...) first)")


def _wrap_checked(fn, plan, name):
    """Like _wrap, and the first argument must not be a list, tuple or ndarray (one type test)."""
    import numpy as np
    bad = (list, tuple, np.ndarray)
    argname = _FIRST_NAME.get(name, "input")
    first = _first_param(fn)
    inner = _wrap(fn, plan, f"varlens.{name}") if plan is not None else fn

    @functools.wraps(fn)
    def w(*args, **kwargs):
        if args:
            if args[0].__class__ in bad:
                _bad_first(name, argname, args[0])
            if not kwargs:
                return fn(*args)  # the common call: one wrapper level, one type test
        elif kwargs:
            v = kwargs.get(argname, kwargs.get(first))
            if v.__class__ in bad:
                _bad_first(name, argname, v)
        return inner(*args, **kwargs)
    w.__wrapped_torch_args__ = True
    return w


def _first_param(fn):
    try:
        ps = list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return None
    return ps[0] if ps else None


def _plan(fn, method, name=""):
    """(renames, var_name, n_before_var, names before *args, takes_out) for fn, or None when
    no alias applies."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    names = [p.name for p in params]
    pos = [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    kw_ok = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    var = next((p for p in params if p.kind == p.VAR_POSITIONAL), None)
    ren = {}
    if "dim" in kw_ok and "axis" not in names:
        ren["axis"] = "dim"
    if "keepdim" in kw_ok and "keepdims" not in names:
        ren["keepdims"] = "keepdim"
    over = (_OVERRIDE_METHOD if method else _OVERRIDE_FN).get(name)
    if over is not None:
        for alias, p in zip(over, pos):
            if alias is not None and alias != p and alias not in names and p in kw_ok:
                ren[alias] = p
    else:
        # function: input is the first argument; function and method: other/exponent the second
        if not method and pos and pos[0] != "input" and "input" not in names and pos[0] in kw_ok:
            ren["input"] = pos[0]
        if len(pos) > 1 and pos[1] in kw_ok:  # only varlens' generic names of a second operand
            if "other" not in names and pos[1] in _SECOND:
                ren["other"] = pos[1]
            if "exponent" not in names and pos[1] in ("e", "exp"):
                ren["exponent"] = pos[1]
    var_name = None
    n_before = 0
    if var is not None:
        n_before = [p.kind for p in params].index(var.kind)
        var_name = var.name
    takes_out = "out" in names or any(p.kind == p.VAR_KEYWORD for p in params)
    if not ren and var is None and (method or takes_out):
        return None
    return ren, var_name, n_before, names[:n_before], takes_out or method


def _wrap(fn, plan, where):
    ren, var_name, n_before, before_names, takes_out = plan

    @functools.wraps(fn)
    def w(*args, **kwargs):
        if kwargs:
            if not takes_out and "out" in kwargs:
                out = kwargs.pop("out")
                if out is not None:
                    args, kwargs = _fix(args, kwargs, ren, var_name, n_before, before_names, where)
                    return _write_out(where, fn, args, kwargs, out)
            args, kwargs = _fix(args, kwargs, ren, var_name, n_before, before_names, where)
        return fn(*args, **kwargs)
    w.__wrapped_torch_args__ = True
    return w


def _fix(args, kwargs, ren, var_name, n_before, before_names, where):
    for k in [k for k in kwargs if k in ren]:
        tgt = ren[k]
        if tgt in kwargs:
            raise TypeError(f"{where}() got both {k!r} and {tgt!r} (aliases of the same argument)")
        kwargs[tgt] = kwargs.pop(k)
    d = kwargs.get("dim")
    if d is not None and isinstance(d, builtins.float):
        raise TypeError(f"{where}(): argument 'dim' must be an int or a tuple of ints, not float ({d!r})")
    if var_name is not None:
        given = [k for k in dict.fromkeys(_VAR_NAMES + (var_name,)) if k in kwargs]
        if given or any(n in kwargs for n in before_names):
            args = list(args)
            for i in range(len(args), n_before):  # parameters before *args given by keyword
                n = before_names[i]
                if n not in kwargs:
                    raise TypeError(f"{where}() missing required argument {n!r}")
                args.append(kwargs.pop(n))
            if given:
                if len(given) > 1 or len(args) > n_before:
                    raise TypeError(f"{where}() got {given[0]!r} both by keyword and positionally")
                v = kwargs.pop(given[0])
                args.append(v if isinstance(v, (tuple, list)) else (v,))
            args = tuple(args)
    return args, kwargs


def _write_out(where, fn, args, kwargs, out):
    """torch's out=: compute, then store the result in the given tensor(s) and return them."""
    from varlens.core.grad_mode import is_grad_enabled, no_grad
    from varlens.core.tensor import Tensor
    import numpy as np
    outs = out if isinstance(out, (tuple, list)) else (out,)
    for o in outs:
        if not isinstance(o, Tensor):
            raise TypeError(f"{where}(): argument 'out' must be a Tensor (or a tuple of Tensors), "
                            f"not {type(o).__name__}")
    res = fn(*args, **kwargs)
    ress = tuple(res) if isinstance(out, (tuple, list)) else (res,)
    if len(ress) != len(outs):
        raise TypeError(f"{where}(): out= got {len(outs)} tensors for {len(ress)} results")
    if is_grad_enabled() and any(isinstance(r, Tensor) and r.requires_grad for r in ress) or \
            any(o.requires_grad for o in outs) and is_grad_enabled():
        raise RuntimeError(f"{where}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")
    with no_grad():
        for o, r in zip(outs, ress):
            a = r._data if isinstance(r, Tensor) else np.asarray(r)
            if not np.can_cast(a.dtype, o._data.dtype, casting="same_kind"):
                raise RuntimeError(f"{where}(): result type {a.dtype} can't be cast to the desired output "
                                   f"type {o._data.dtype} (out=)")
            if a.shape == o._data.shape and o._data.flags.writeable:
                o._data[...] = a
                o._version[0] += 1
            else:  # torch resizes out to the result's shape
                o._data = a.astype(o._data.dtype, copy=True)
    return out


def wrap_namespace(namespace, names=None):
    """Wrap the functions of ``namespace`` (a module dict) in place: torch's keyword names
    (axis=, keepdims=, input=, other=, ...) are accepted.  Returns how many were wrapped."""
    count = 0
    import varlens.nn.functional as F  # noqa: E402  (called at the end of varlens/__init__.py: F is loaded)
    keep = {id(v) for v in vars(F).values() if inspect.isfunction(v)}  # varlens.conv2d is F.conv2d
    for name in list(names if names is not None else namespace):
        if name.startswith("_") or name in _SKIP:
            continue
        fn = namespace.get(name)
        if not inspect.isfunction(fn) or getattr(fn, "__wrapped_torch_args__", False):
            continue
        if (fn.__module__ or "").startswith("varlens.nn") or id(fn) in keep:
            continue  # re-exported nn.functional ops stay the same objects (varlens.conv2d is F.conv2d)
        plan = _plan(fn, method=False, name=name)
        if name in _TENSOR_FIRST:
            namespace[name] = _wrap_checked(fn, plan, name)
            count += 1
        elif plan is not None:
            namespace[name] = _wrap(fn, plan, f"varlens.{name}")
            count += 1
    return count


def wrap_methods(methods):
    """The Tensor methods among ``methods`` (name -> attribute) that take keyword aliases, wrapped;
    the method table (varlens/_surface.py) attaches them."""
    out = {}
    for name, fn in methods.items():
        if name.startswith("_") or not inspect.isfunction(fn) or getattr(fn, "__wrapped_torch_args__", False):
            continue
        plan = _plan(fn, method=True, name=name)
        if plan is not None:
            out[name] = _wrap(fn, plan, f"Tensor.{name}")
    return out
