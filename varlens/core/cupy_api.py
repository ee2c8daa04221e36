"""The names CuPy provides (data only): what the simulated CUDA library (core/simulated_cuda.py)
lets varlens reach, so that code calling a NumPy-only name fails on this machine as it would on a
GPU.

Taken from CuPy v13.6.0 (github.com/cupy/cupy, tag v13.6.0), module-level public names bound in:

* ``NAMESPACE``: cupy/__init__.py (imports, defs, assignments, both branches of its NumPy-version
  ``if``s), plus ``lib`` (the subpackage cupy/lib, bound on import by ``from cupy.lib... import``).
* ``RANDOM``: cupy/random/__init__.py (plus ``Generator``, served by its module ``__getattr__``).
* ``GENERATOR_METHODS``: ``Generator``'s public methods in cupy/random/_generator_api.pyx, and
  its ``bit_generator`` attribute.  (No ``normal``, ``permutation``, ``shuffle``, ``choice``;
  ``uniform`` only since v12.)
* ``RANDOM_STATE_METHODS``: ``RandomState``'s public methods in cupy/random/_generator.py, and
  its ``method`` attribute.
* ``LINALG``: cupy/linalg/__init__.py.  ``FFT``: cupy/fft/__init__.py.
* ``SPECIAL``: cupyx/scipy/special/__init__.py.  ``STRIDE_TRICKS``: cupy/lib/stride_tricks.py.
* ``NDARRAY``: ``ndarray``'s public methods, properties and readonly attributes in
  cupy/_core/core.pyx and core.pxd (no ``mT`` before v14, no ``itemset``/``resize``/``byteswap``).
* ``UFUNC_METHODS``: cupy/_core/_kernel.pyx ``ufunc``: ``outer`` works for every ufunc; ``at``
  only for the ufuncs created with a ``scatter_op`` (_routines_math.pyx, _routines_binary.pyx,
  _math/misc.py); ``reduce``/``accumulate`` only for add and multiply, ``reduceat`` only for add
  (the others raise NotImplementedError).
* ``REFUSED_KWARGS``: keyword arguments of NumPy that the CuPy function or ndarray method of
  that name does not take (signatures in cupy/_math/sumprod.py, _statistics/order.py,
  _statistics/meanvar.py, _logic/truth.py, _core/core.pyx): a short hand-checked list.

Regenerate by reading those files at a newer tag; names only ever get added in newer CuPy.
"""
CUPY_VERSION = "13.6.0"

NAMESPACE = frozenset({
    "AxisError", "ComplexWarning", "DataSource", "ElementwiseKernel", "Inf", "Infinity",
    "ModuleDeprecationWarning", "NAN", "NINF", "NZERO", "NaN", "PINF",
    "PZERO", "RankWarning", "RawKernel", "RawModule", "ReductionKernel", "TooHardError",
    "VisibleDeprecationWarning", "abs", "absolute", "add", "all", "allclose",
    "alltrue", "amax", "amin", "angle", "any", "append",
    "apply_along_axis", "arange", "arccos", "arccosh", "arcsin", "arcsinh",
    "arctan", "arctan2", "arctanh", "argmax", "argmin", "argpartition",
    "argsort", "argwhere", "around", "array", "array2string", "array_equal",
    "array_equiv", "array_repr", "array_split", "array_str", "asanyarray", "asarray",
    "asarray_chkfinite", "ascontiguousarray", "asfarray", "asfortranarray", "asnumpy", "atleast_1d",
    "atleast_2d", "atleast_3d", "average", "bartlett", "base_repr", "binary_repr",
    "bincount", "bitwise_and", "bitwise_not", "bitwise_or", "bitwise_xor", "blackman",
    "bool_", "broadcast", "broadcast_arrays", "broadcast_shapes", "broadcast_to", "byte",
    "byte_bounds", "c_", "can_cast", "cbrt", "cdouble", "ceil",
    "cfloat", "choose", "clear_memo", "clip", "column_stack", "common_type",
    "complex128", "complex64", "complex_", "complexfloating", "compress", "concatenate",
    "conj", "conjugate", "convolve", "copy", "copysign", "copyto",
    "corrcoef", "correlate", "cos", "cosh", "count_nonzero", "cov",
    "cross", "csingle", "cuda", "cumprod", "cumproduct", "cumsum",
    "deg2rad", "degrees", "delete", "diag", "diag_indices", "diag_indices_from",
    "diagflat", "diagonal", "diff", "digitize", "disable_experimental_feature_warning", "disp",
    "divide", "divmod", "dot", "double", "dsplit", "dstack",
    "dtype", "e", "ediff1d", "einsum", "empty", "empty_like",
    "equal", "euler_gamma", "exp", "exp2", "expand_dims", "expm1",
    "extract", "eye", "fabs", "fft", "fill_diagonal", "find_common_type",
    "finfo", "fix", "flatiter", "flatnonzero", "flip", "fliplr",
    "flipud", "float16", "float32", "float64", "float_", "float_power",
    "floating", "floor", "floor_divide", "fmax", "fmin", "fmod",
    "format_float_positional", "format_float_scientific", "format_parser", "frexp", "fromDlpack", "from_dlpack",
    "frombuffer", "fromfile", "fromfunction", "fromiter", "fromstring", "full",
    "full_like", "fuse", "gcd", "generic", "genfromtxt", "get_array_module",
    "get_array_wrap", "get_default_memory_pool", "get_default_pinned_memory_pool", "get_printoptions", "gradient", "greater",
    "greater_equal", "half", "hamming", "hanning", "heaviside", "histogram",
    "histogram2d", "histogramdd", "hsplit", "hstack", "hypot", "i0",
    "identity", "iinfo", "imag", "in1d", "index_exp", "indices",
    "inexact", "inf", "infty", "inner", "int16", "int32",
    "int64", "int8", "int_", "intc", "integer", "interp",
    "intersect1d", "intp", "invert", "is_available", "isclose", "iscomplex",
    "iscomplexobj", "isfinite", "isfortran", "isin", "isinf", "isnan",
    "isneginf", "isposinf", "isreal", "isrealobj", "isscalar", "issctype",
    "issubclass_", "issubdtype", "issubsctype", "iterable", "ix_", "kaiser",
    "kron", "lcm", "ldexp", "left_shift", "less", "less_equal",
    "lexsort", "lib", "linalg", "linspace", "load", "loadtxt",
    "log", "log10", "log1p", "log2", "logaddexp", "logaddexp2",
    "logical_and", "logical_not", "logical_or", "logical_xor", "logspace", "longlong",
    "mask_indices", "matmul", "max", "maximum", "may_share_memory", "mean",
    "median", "memoize", "meshgrid", "mgrid", "min", "min_scalar_type",
    "minimum", "mintypecode", "mod", "modf", "moveaxis", "msort",
    "multiply", "nan", "nan_to_num", "nanargmax", "nanargmin", "nancumprod",
    "nancumsum", "nanmax", "nanmean", "nanmedian", "nanmin", "nanprod",
    "nanstd", "nansum", "nanvar", "ndarray", "ndim", "ndindex",
    "negative", "newaxis", "nextafter", "nonzero", "not_equal", "number",
    "obj2sctype", "ogrid", "ones", "ones_like", "outer", "packbits",
    "pad", "partition", "percentile", "pi", "piecewise", "place",
    "poly", "poly1d", "polyadd", "polyfit", "polymul", "polynomial",
    "polysub", "polyval", "positive", "power", "printoptions", "prod",
    "product", "promote_types", "ptp", "put", "putmask", "quantile",
    "r_", "rad2deg", "radians", "random", "ravel", "ravel_multi_index",
    "real", "real_if_close", "reciprocal", "remainder", "repeat", "require",
    "reshape", "resize", "result_type", "right_shift", "rint", "roll",
    "rollaxis", "roots", "rot90", "round", "round_", "row_stack",
    "s_", "safe_eval", "save", "savetxt", "savez", "savez_compressed",
    "sctype2char", "searchsorted", "select", "set_printoptions", "set_string_function", "setdiff1d",
    "setxor1d", "shape", "shares_memory", "short", "show_config", "sign",
    "signbit", "signedinteger", "sin", "sinc", "single", "singlecomplex",
    "sinh", "size", "sometrue", "sort", "sort_complex", "sparse",
    "split", "sqrt", "square", "squeeze", "stack", "std",
    "subtract", "sum", "swapaxes", "take", "take_along_axis", "tan",
    "tanh", "tensordot", "testing", "tile", "trace", "transpose",
    "trapz", "tri", "tril", "tril_indices", "tril_indices_from", "trim_zeros",
    "triu", "triu_indices", "triu_indices_from", "true_divide", "trunc", "typename",
    "ubyte", "ufunc", "uint", "uint16", "uint32", "uint64",
    "uint8", "uintc", "uintp", "ulonglong", "union1d", "unique",
    "unpackbits", "unravel_index", "unsignedinteger", "unwrap", "ushort", "vander",
    "var", "vdot", "vectorize", "vsplit", "vstack", "where",
    "who", "zeros", "zeros_like",
})

RANDOM = frozenset({
    "BitGenerator", "Generator", "MRG32k3a", "Philox4x3210", "RandomState", "XORWOW",
    "beta", "binomial", "bytes", "chisquare", "choice", "default_rng",
    "dirichlet", "exponential", "f", "gamma", "geometric", "get_random_state",
    "gumbel", "hypergeometric", "laplace", "logistic", "lognormal", "logseries",
    "multinomial", "multivariate_normal", "negative_binomial", "noncentral_chisquare", "noncentral_f", "normal",
    "pareto", "permutation", "poisson", "power", "rand", "randint",
    "randn", "random", "random_integers", "random_sample", "ranf", "rayleigh",
    "reset_states", "sample", "seed", "set_random_state", "shuffle", "standard_cauchy",
    "standard_exponential", "standard_gamma", "standard_normal", "standard_t", "triangular", "uniform",
    "vonmises", "wald", "weibull", "zipf",
})

GENERATOR_METHODS = frozenset({
    "beta", "binomial", "bit_generator", "chisquare", "dirichlet", "exponential",
    "f", "gamma", "geometric", "hypergeometric", "integers", "logseries",
    "poisson", "power", "random", "standard_exponential", "standard_gamma", "standard_normal",
    "uniform",
})

RANDOM_STATE_METHODS = frozenset({
    "beta", "binomial", "chisquare", "choice", "dirichlet", "exponential",
    "f", "gamma", "geometric", "gumbel", "hypergeometric", "laplace",
    "logistic", "lognormal", "logseries", "method", "multivariate_normal", "negative_binomial",
    "noncentral_chisquare", "noncentral_f", "normal", "pareto", "permutation", "poisson",
    "power", "rand", "randint", "randn", "random_sample", "rayleigh",
    "seed", "shuffle", "standard_cauchy", "standard_exponential", "standard_gamma", "standard_normal",
    "standard_t", "tomaxint", "triangular", "uniform", "vonmises", "wald",
    "weibull", "zipf",
})

LINALG = frozenset({
    "LinAlgError", "cholesky", "det", "eigh", "eigvalsh", "inv",
    "lstsq", "matrix_power", "matrix_rank", "norm", "pinv", "qr",
    "slogdet", "solve", "svd", "tensorinv", "tensorsolve",
})

FFT = frozenset({
    "config", "fft", "fft2", "fftfreq", "fftn", "fftshift",
    "hfft", "ifft", "ifft2", "ifftn", "ifftshift", "ihfft",
    "irfft", "irfft2", "irfftn", "rfft", "rfft2", "rfftfreq",
    "rfftn",
})

SPECIAL = frozenset({
    "bdtr", "bdtrc", "bdtri", "beta", "betainc", "betaincinv",
    "betaln", "binom", "boxcox", "boxcox1p", "btdtr", "btdtri",
    "cbrt", "chdtr", "chdtrc", "chdtri", "cosdg", "cosm1",
    "cotdg", "digamma", "ellipj", "ellipk", "ellipkm1", "entr",
    "erf", "erfc", "erfcinv", "erfcx", "erfinv", "exp1",
    "exp10", "exp2", "expi", "expit", "expm1", "expn",
    "exprel", "fdtr", "fdtrc", "fdtri", "gamma", "gammainc",
    "gammaincc", "gammainccinv", "gammaincinv", "gammaln", "gammasgn", "gdtr",
    "gdtrc", "huber", "i0", "i0e", "i1", "i1e",
    "inv_boxcox", "inv_boxcox1p", "j0", "j1", "k0", "k0e",
    "k1", "k1e", "kl_div", "log1p", "log_expit", "log_ndtr",
    "log_softmax", "loggamma", "logit", "logsumexp", "lpmv", "multigammaln",
    "nbdtr", "nbdtrc", "nbdtri", "ndtr", "ndtri", "pdtr",
    "pdtrc", "pdtri", "poch", "polygamma", "pseudo_huber", "psi",
    "radian", "rel_entr", "rgamma", "round", "sinc", "sindg",
    "softmax", "sph_harm", "spherical_yn", "tandg", "xlog1py", "xlogy",
    "y0", "y1", "yn", "zeta", "zetac",
})

STRIDE_TRICKS = frozenset({
    "as_strided", "sliding_window_view",
})

NDARRAY = frozenset({
    "T", "all", "any", "argmax", "argmin", "argpartition",
    "argsort", "astype", "base", "choose", "clip", "compress",
    "conj", "conjugate", "copy", "cstruct", "cumprod", "cumsum",
    "data", "device", "diagonal", "dot", "dtype", "dump",
    "dumps", "fill", "flags", "flat", "flatten", "get",
    "imag", "item", "itemsize", "max", "mean", "min",
    "nbytes", "ndim", "nonzero", "partition", "prod", "ptp",
    "put", "ravel", "real", "reduced_view", "repeat", "reshape",
    "round", "scatter_add", "scatter_max", "scatter_min", "searchsorted", "set",
    "shape", "size", "sort", "squeeze", "std", "strides",
    "sum", "swapaxes", "take", "toDlpack", "tobytes", "tofile",
    "tolist", "trace", "transpose", "var", "view",
})

UFUNC_METHODS = {
    "outer": None,                        # None: every ufunc
    "at": frozenset({"add", "subtract", "maximum", "minimum", "bitwise_and", "bitwise_or", "bitwise_xor"}),
    "reduce": frozenset({"add", "multiply"}),
    "accumulate": frozenset({"add", "multiply"}),
    "reduceat": frozenset({"add"}),
}

_NO_WHERE_INITIAL = frozenset({"where", "initial"})
_NO_WHERE = frozenset({"where", "correction", "mean"})

REFUSED_KWARGS = {           # cupy.<function>: NumPy keyword arguments it does not take
    "sum": _NO_WHERE_INITIAL, "prod": _NO_WHERE_INITIAL, "nansum": _NO_WHERE_INITIAL,
    "nanprod": _NO_WHERE_INITIAL, "max": _NO_WHERE_INITIAL, "min": _NO_WHERE_INITIAL,
    "amax": _NO_WHERE_INITIAL, "amin": _NO_WHERE_INITIAL, "nanmax": _NO_WHERE_INITIAL,
    "nanmin": _NO_WHERE_INITIAL, "mean": _NO_WHERE, "var": _NO_WHERE, "std": _NO_WHERE,
    "any": _NO_WHERE, "all": _NO_WHERE,
    "clip": frozenset({"min", "max"}),            # clip(a, a_min, a_max, out=None)
    "cumsum": frozenset({"include_initial"}), "cumprod": frozenset({"include_initial"}),
    "sort": frozenset({"order", "stable"}), "argsort": frozenset({"order", "stable"}),
}

NDARRAY_REFUSED_KWARGS = {   # cupy.ndarray.<method>: NumPy keyword arguments it does not take
    "sum": _NO_WHERE_INITIAL, "prod": _NO_WHERE_INITIAL, "max": _NO_WHERE_INITIAL,
    "min": _NO_WHERE_INITIAL, "mean": _NO_WHERE, "var": _NO_WHERE, "std": _NO_WHERE,
    "any": _NO_WHERE, "all": _NO_WHERE,
    "sort": frozenset({"kind", "order", "stable"}),       # sort(self, int axis=-1)
    "argsort": frozenset({"kind", "order", "stable"}),    # argsort(self, axis=-1)
}
