"""More of torch.nn.functional: activations, shuffles, fold/unfold, every interpolate mode,
1-D/adaptive/LP/unpooling, distances, margin losses, embedding_bag, local_response_norm and
instance_norm with running statistics.

Everything here is composed from checked differentiable ops (varlens.ops and
varlens.nn.functional), so each gradient is the chain rule through those ops' backwards
(seed 001 §2, backprop through a composition) and second derivatives work too.  Where
PyTorch makes an exception to the plain chain rule (a clamp applied under no_grad in
cosine_similarity, the value routed to one index in max pooling) the same exception is
built in and commented.  Re-exported by varlens.nn.functional.
"""
from __future__ import annotations

import math
import numbers

from varlens import ops as _ops
from varlens.backend import xp
from varlens.random import _gen
from varlens.tensor import Tensor

__all__ = [
    "hardsigmoid", "hardswish", "hardshrink", "softshrink", "tanhshrink", "glu", "rrelu", "rrelu_",
    "relu_", "elu_", "selu_", "celu_", "leaky_relu_", "hardtanh_", "threshold_", "gumbel_softmax",
    "softmax2d",
    "pixel_shuffle", "pixel_unshuffle", "channel_shuffle", "native_channel_shuffle", "unfold", "fold",
    "interpolate", "upsample", "upsample_nearest", "upsample_bilinear",
    "max_pool1d", "max_pool1d_with_indices", "max_pool2d_with_indices", "avg_pool1d",
    "adaptive_avg_pool1d", "adaptive_avg_pool3d", "adaptive_max_pool1d", "adaptive_max_pool2d",
    "adaptive_max_pool1d_with_indices", "adaptive_max_pool2d_with_indices",
    "lp_pool1d", "lp_pool2d", "max_unpool1d", "max_unpool2d",
    "cosine_similarity", "pdist", "local_response_norm", "instance_norm", "feature_alpha_dropout",
    "margin_ranking_loss", "hinge_embedding_loss", "soft_margin_loss", "multilabel_soft_margin_loss",
    "cosine_embedding_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
    "multi_margin_loss", "multilabel_margin_loss", "poisson_nll_loss", "embedding_bag",
]


def _F():
    from varlens.nn import functional
    return functional


def _shape(t):
    return tuple(t.shape)


def _need_tensor(x, name, op):
    if not isinstance(x, Tensor):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")


def _const(a, like):
    return Tensor._make(xp.asarray(a, dtype=like.dtype))


def _straight_through(t, value):
    """A tensor with ``value``'s numbers whose gradient is that of ``t`` (PyTorch's in-place
    clamps under no_grad: the value changes, the recorded derivative does not)."""
    return t + Tensor._make((value - t._data).astype(t._data.dtype, copy=False))


# ---------------------------------------------------------------- activations
def hardsigmoid(input, inplace=False):
    """clamp(x/6 + 1/2, 0, 1); derivative 1/6 strictly inside (-3, 3), 0 outside (as PyTorch)."""
    x = input._data
    inside = (x > -3) & (x < 3)
    return _ops.where(inside, input / 6.0 + 0.5, _const(x >= 3, input))


def hardswish(input, inplace=False):
    """x * hardsigmoid(x): 0 below -3, x above 3, x (x + 3)/6 between (derivative (2x + 3)/6)."""
    x = input._data
    mid = input * (input + 3.0) / 6.0
    return _ops.where(x < -3, 0.0, _ops.where(x > 3, input, mid))


def hardshrink(input, lambd=0.5):
    """x where |x| > lambd, else 0."""
    x = input._data
    return _ops.where((x > lambd) | (x < -lambd), input, 0.0)


def softshrink(input, lambd=0.5):
    """x - lambd above lambd, x + lambd below -lambd, 0 between."""
    if lambd < 0:
        raise RuntimeError(f"softshrink: lambd must be greater or equal to 0, but found to be {lambd}")
    x = input._data
    return _ops.where(x > lambd, input - lambd, _ops.where(x < -lambd, input + lambd, 0.0))


def tanhshrink(input):
    return input - _ops.tanh(input)


def glu(input, dim=-1):
    """a * sigmoid(b) with (a, b) the two halves of ``input`` along ``dim``."""
    if input.ndim == 0:
        raise RuntimeError("glu: does not support scalars because halving size must be even")
    d = dim + input.ndim if dim < 0 else dim
    if not 0 <= d < input.ndim:
        raise IndexError(f"glu: dim {dim} is out of range for a tensor with {input.ndim} dimensions")
    n = input.shape[d]
    if n % 2:
        raise RuntimeError(f"glu: Halving dimension must be even, but dimension {d} is size {n}")
    a = _ops.narrow(input, d, 0, n // 2)
    b = _ops.narrow(input, d, n // 2, n // 2)
    return a * _ops.sigmoid(b)


def rrelu(input, lower=1.0 / 8, upper=1.0 / 3, training=False, inplace=False, *, generator=None):
    """Randomised leaky ReLU: in training each negative entry is scaled by its own slope drawn
    from U(lower, upper); in evaluation the slope is (lower + upper)/2."""
    if lower > upper:
        raise ValueError(f"rrelu: lower bound must be <= upper bound, got lower={lower}, upper={upper}")
    if not training:
        return _ops.leaky_relu(input, (lower + upper) / 2)
    x = input._data
    a = _gen(generator).uniform(lower, upper, x.shape)
    slope = xp.where(x >= 0, 1.0, a).astype(x.dtype)
    return input * Tensor._make(slope)


def softmax2d(input):
    if input.ndim not in (3, 4):
        raise ValueError(f"Softmax2d: expected input of 3 or 4 dimensions (C, H, W) or (N, C, H, W), got "
                         f"shape {_shape(input)}")
    return _ops.softmax(input, -3)


def gumbel_softmax(logits, tau=1.0, hard=False, eps=1e-10, dim=-1, *, generator=None):
    """softmax((logits + g)/tau) with g ~ Gumbel(0, 1); ``hard`` returns the one-hot argmax in
    the forward pass with the soft sample's gradient (straight-through)."""
    e = -xp.log1p(-_gen(generator).random(_shape(logits)))     # Exp(1) draws
    g = Tensor._make((-xp.log(e)).astype(logits.dtype))
    y = _ops.softmax((logits + g) / tau, dim)
    if not hard:
        return y
    idx = xp.expand_dims(xp.argmax(y._data, axis=dim), dim)
    onehot = xp.zeros_like(y._data)
    xp.put_along_axis(onehot, idx, 1.0, axis=dim)
    return Tensor._make(onehot) - y.detach() + y


def _inplace(fn, name):
    """``name_(input, ...)``: the result written back into ``input`` (Tensor.relu_ and friends:
    an array update outside autograd, a re-pointed result inside it)."""
    from varlens.ops.extra import _inplace_from
    method = _inplace_from(name, fn)

    def f(input, *args, **kwargs):
        kwargs.pop("inplace", None)
        return method(input, *args, **kwargs)
    f.__name__ = name + "_"
    f.__doc__ = f"In-place {name}: writes the result into ``input`` and returns it."
    return f


relu_ = _inplace(lambda x: _ops.relu(x), "relu")
elu_ = _inplace(lambda x, alpha=1.0: _ops.elu(x, alpha), "elu")
leaky_relu_ = _inplace(lambda x, negative_slope=0.01: _ops.leaky_relu(x, negative_slope), "leaky_relu")
hardtanh_ = _inplace(lambda x, min_val=-1.0, max_val=1.0: _ops.clamp(x, min_val, max_val), "hardtanh")
rrelu_ = _inplace(lambda x, lower=1.0 / 8, upper=1.0 / 3, training=False, generator=None:
                  rrelu(x, lower, upper, training, generator=generator), "rrelu")


# ---------------------------------------------------------------- shuffles
def _check_int(v, name, op, minimum=1):
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < minimum:
        raise ValueError(f"{op}: {name} must be an int >= {minimum}, got {v!r}")
    return int(v)


def _check_shuffle(input, factor, name, op, layout):
    """The int ``factor`` (>= 1) of a shuffle whose input needs at least 3 dims (``layout``)."""
    r = _check_int(factor, name, op)
    if input.ndim < 3:
        raise RuntimeError(f"{op}: expected an input with at least 3 dimensions ({layout}), got shape "
                           f"{_shape(input)}")
    return r


def pixel_shuffle(input, upscale_factor):
    """(*, C r^2, H, W) -> (*, C, H r, W r): channel c r^2 + i r + j goes to pixel (h r + i, w r + j)."""
    op = "pixel_shuffle"
    r = _check_shuffle(input, upscale_factor, "upscale_factor", op, "*, C, H, W")
    *lead, C, H, W = _shape(input)
    if C % (r * r):
        raise RuntimeError(f"{op}: expects its input's 'channel' dimension to be divisible by the square of "
                           f"upscale_factor, but input.size(-3)={C} is not divisible by {r * r}")
    n = len(lead)
    x = _ops.reshape(input, tuple(lead) + (C // (r * r), r, r, H, W))
    x = _ops.permute(x, tuple(range(n)) + (n, n + 3, n + 1, n + 4, n + 2))
    return _ops.reshape(x, tuple(lead) + (C // (r * r), H * r, W * r))


def pixel_unshuffle(input, downscale_factor):
    """The inverse of pixel_shuffle: (*, C, H r, W r) -> (*, C r^2, H, W)."""
    op = "pixel_unshuffle"
    r = _check_shuffle(input, downscale_factor, "downscale_factor", op, "*, C, H, W")
    *lead, C, H, W = _shape(input)
    if H % r or W % r:
        raise RuntimeError(f"{op}: expects height and width to be divisible by downscale_factor={r}, got "
                           f"input of shape {_shape(input)}")
    n = len(lead)
    x = _ops.reshape(input, tuple(lead) + (C, H // r, r, W // r, r))
    x = _ops.permute(x, tuple(range(n)) + (n, n + 2, n + 4, n + 1, n + 3))
    return _ops.reshape(x, tuple(lead) + (C * r * r, H // r, W // r))


def channel_shuffle(input, groups):
    """(N, C, *) with C = g k: channel i k + j moves to position j g + i."""
    op = "channel_shuffle"
    g = _check_shuffle(input, groups, "groups", op, "N, C, *")
    N, C, *rest = _shape(input)
    if C % g:
        raise RuntimeError(f"{op}: number of channels must be divisible by groups. Got {C} channels and "
                           f"{g} groups")
    x = _ops.reshape(input, (N, g, C // g) + tuple(rest))
    return _ops.reshape(_ops.transpose(x, 1, 2), (N, C) + tuple(rest))


native_channel_shuffle = channel_shuffle


# ---------------------------------------------------------------- fold / unfold
def _pair(v, name, op, minimum):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (int(v), int(v))
    try:
        v = tuple(int(a) for a in v)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {v!r}") from None
    if len(v) != 2 or any(a < minimum for a in v):
        raise ValueError(f"{op}: {name} must be an int or a pair of ints >= {minimum}, got {v!r}")
    return v


def _block_args(kernel_size, dilation, padding, stride, op):
    """fold/unfold's kernel_size, dilation, padding, stride as pairs (padding >= 0, the rest >= 1)."""
    return (_pair(kernel_size, "kernel_size", op, 1), _pair(dilation, "dilation", op, 1),
            _pair(padding, "padding", op, 0), _pair(stride, "stride", op, 1))


def _blocks(H, W, k, d, p, s, op):
    Ho = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    Wo = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if Ho < 1 or Wo < 1:
        raise RuntimeError(f"{op}: kernel_size={k}, dilation={d}, padding={p}, stride={s} give "
                           f"{Ho} x {Wo} blocks for a spatial size of ({H}, {W}); it is too small")
    ih = (xp.arange(k[0])[:, None] * d[0] + xp.arange(Ho)[None, :] * s[0])   # (kh, Ho)
    iw = (xp.arange(k[1])[:, None] * d[1] + xp.arange(Wo)[None, :] * s[1])   # (kw, Wo)
    key = (slice(None), slice(None), ih[:, None, :, None], iw[None, :, None, :])
    return Ho, Wo, key


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C kh kw, L), column l holding the l-th sliding block
    (row-major over block positions), rows ordered (c, i, j)."""
    op = "unfold"
    _need_tensor(input, "input", op)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{op}: expected a 3-D (unbatched) or 4-D (batched) input, got shape {_shape(input)}")
    k, d, p, s = _block_args(kernel_size, dilation, padding, stride, op)
    unb = input.ndim == 3
    x = _ops.unsqueeze(input, 0) if unb else input
    N, C, H, W = _shape(x)
    Ho, Wo, key = _blocks(H, W, k, d, p, s, op)
    if p != (0, 0):
        x = _F().pad(x, (p[1], p[1], p[0], p[0]))
    cols = _ops.reshape(_ops.getitem(x, key), (N, C * k[0] * k[1], Ho * Wo))
    return _ops.squeeze(cols, 0) if unb else cols


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: (N, C kh kw, L) -> (N, C, H, W), overlapping block
    entries summed."""
    op = "fold"
    _need_tensor(input, "input", op)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a 2-D (unbatched) or 3-D (batched) input, got shape {_shape(input)}")
    o = _pair(output_size, "output_size", op, 1)
    k, d, p, s = _block_args(kernel_size, dilation, padding, stride, op)
    unb = input.ndim == 2
    x = _ops.unsqueeze(input, 0) if unb else input
    N, CK, L = _shape(x)
    if CK % (k[0] * k[1]):
        raise RuntimeError(f"{op}: expected size of input's dimension 1 to be divisible by the product of "
                           f"kernel_size, but got input.size(1)={CK} and kernel_size={k}")
    Ho, Wo, key = _blocks(o[0], o[1], k, d, p, s, op)
    if Ho * Wo != L:
        raise RuntimeError(f"{op}: given output_size={o}, kernel_size={k}, dilation={d}, padding={p}, "
                           f"stride={s}, expected size of input's dimension 2 to match the calculated number "
                           f"of sliding blocks {Ho} * {Wo} = {Ho * Wo}, but got input.size(2)={L}")
    C = CK // (k[0] * k[1])
    blocks = _ops.reshape(x, (N, C, k[0], k[1], Ho, Wo))
    full = (N, C, o[0] + 2 * p[0], o[1] + 2 * p[1])
    out = _ops.index_scatter(blocks, key, full)
    if p != (0, 0):
        out = _ops.getitem(out, (slice(None), slice(None), slice(p[0], p[0] + o[0]), slice(p[1], p[1] + o[1])))
    return _ops.squeeze(out, 0) if unb else out


# ---------------------------------------------------------------- interpolate
_SPATIAL_MODES = {"linear": 1, "bilinear": 2, "bicubic": 2, "trilinear": 3}


def _linear_matrix(L, Lo, scale, align_corners):
    """(Lo, L) weights of linear interpolation (PyTorch's source-index rule)."""
    A = xp.zeros((Lo, L))
    i = xp.arange(Lo, dtype=xp.float64)
    if align_corners:
        src = i * ((L - 1) / (Lo - 1) if Lo > 1 else 0.0)
    else:
        src = xp.maximum(scale * (i + 0.5) - 0.5, 0.0)
    i0 = xp.minimum(xp.floor(src).astype(xp.int64), L - 1)
    i1 = xp.minimum(i0 + 1, L - 1)
    w1 = src - i0
    rows = xp.arange(Lo)
    xp.add.at(A, (rows, i0), 1.0 - w1)
    xp.add.at(A, (rows, i1), w1)
    return A


def _cubic_matrix(L, Lo, scale, align_corners, a=-0.75):
    """(Lo, L) weights of Keys' cubic convolution (a = -0.75), indices clamped at the border."""
    A = xp.zeros((Lo, L))
    i = xp.arange(Lo, dtype=xp.float64)
    if align_corners:
        src = i * ((L - 1) / (Lo - 1) if Lo > 1 else 0.0)
    else:
        src = scale * (i + 0.5) - 0.5
    i0 = xp.floor(src).astype(xp.int64)
    t = src - i0

    def near(x):   # |x| <= 1
        return ((a + 2) * x - (a + 3)) * x * x + 1

    def far(x):    # 1 < |x| < 2
        return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a
    ws = (far(t + 1), near(t), near(1 - t), far(2 - t))
    rows = xp.arange(Lo)
    for j, w in enumerate(ws):
        xp.add.at(A, (rows, xp.clip(i0 - 1 + j, 0, L - 1)), w)
    return A


def _adaptive_matrix(L, Lo):
    A = xp.zeros((Lo, L))
    for i in range(Lo):
        a, b = (i * L) // Lo, -((-(i + 1) * L) // Lo)
        A[i, a:b] = 1.0 / (b - a)
    return A


def _apply_matrices(x, mats):
    """Contract each of the last len(mats) axes of x with its (Lo, L) matrix."""
    nd = len(mats)
    for j, A in enumerate(mats):
        ax = x.ndim - nd + j
        if A is None:
            continue
        xm = _ops.movedim(x, ax, -1) if ax != x.ndim - 1 else x
        y = _ops.matmul(xm, Tensor._make(xp.ascontiguousarray(A.T).astype(x.dtype)))
        x = _ops.movedim(y, -1, ax) if ax != x.ndim - 1 else y
    return x


def _nearest_index(L, Lo, scale, exact):
    i = xp.arange(Lo, dtype=xp.float32)
    off = xp.float32(0.5) if exact else xp.float32(0.0)
    return xp.minimum(xp.floor((i + off) * xp.float32(scale)).astype(xp.int64), L - 1)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """Resize (N, C, L) / (N, C, H, W) / (N, C, D, H, W) input, PyTorch's modes and index rules.

    'nearest' reads input index floor(i * scale), 'nearest-exact' floor((i + 1/2) * scale)
    (scale = 1/scale_factor when a factor is given, else in/out); 'linear', 'bilinear',
    'trilinear' and 'bicubic' are separable weightings (one (out, in) matrix per spatial axis),
    with source coordinate i * (in - 1)/(out - 1) when ``align_corners`` else
    (i + 1/2) * scale - 1/2; 'area' is adaptive average pooling.  The gradient of each matrix
    product is the transposed matrix applied to the cotangent."""
    op = "interpolate"
    _need_tensor(input, "input", op)
    modes = ("nearest", "nearest-exact", "linear", "bilinear", "bicubic", "trilinear", "area")
    if mode not in modes:
        raise NotImplementedError(f"{op}: mode must be one of {modes}, got {mode!r}")
    if input.ndim not in (3, 4, 5):
        raise NotImplementedError(f"{op}: input must be 3-D, 4-D or 5-D (N, C, spatial...), got shape "
                                  f"{_shape(input)}")
    nd = input.ndim - 2
    if mode in _SPATIAL_MODES and _SPATIAL_MODES[mode] != nd:
        raise NotImplementedError(f"{op}: got {input.ndim}D input, but {mode} mode needs "
                                  f"{_SPATIAL_MODES[mode] + 2}D input")
    if align_corners is not None and mode not in _SPATIAL_MODES:
        raise ValueError(f"{op}: align_corners option can only be set with the interpolating modes: "
                         f"linear | bilinear | bicubic | trilinear, got mode={mode!r}")
    if antialias:
        raise NotImplementedError(f"{op}: antialias=True is not supported")
    if (size is None) == (scale_factor is None):
        raise ValueError(f"{op}: only one of size or scale_factor should be defined, got size={size!r}, "
                         f"scale_factor={scale_factor!r}")
    ins = _shape(input)[2:]
    if size is not None:
        outs = (size,) * nd if isinstance(size, numbers.Integral) else tuple(size)
        if len(outs) != nd or any(int(o) < 1 for o in outs):
            raise ValueError(f"{op}: size must be a positive int or a tuple of {nd} positive ints for a "
                             f"{input.ndim}-D input, got {size!r}")
        outs = tuple(int(o) for o in outs)
        scales = tuple(i / o for i, o in zip(ins, outs))
    else:
        sf = (scale_factor,) * nd if isinstance(scale_factor, numbers.Real) else tuple(scale_factor)
        if len(sf) != nd or any(f <= 0 for f in sf):
            raise ValueError(f"{op}: scale_factor must be a positive number or a tuple of {nd} for a "
                             f"{input.ndim}-D input, got {scale_factor!r}")
        outs = tuple(int(math.floor(i * float(f))) for i, f in zip(ins, sf))
        if any(o < 1 for o in outs):
            raise ValueError(f"{op}: scale_factor {scale_factor!r} gives an empty output for input size {ins}")
        scales = tuple(i / o for i, o in zip(ins, outs)) if recompute_scale_factor else \
            tuple(1.0 / float(f) for f in sf)
    if mode == "nearest" and nd == 2:
        from varlens.ops.conv import interpolate as _nearest2d
        return _nearest2d(input, size, scale_factor, mode, None, recompute_scale_factor)
    if mode in ("nearest", "nearest-exact"):
        out = input
        for j, (L, Lo, sc) in enumerate(zip(ins, outs, scales)):
            idx = _nearest_index(L, Lo, sc, mode == "nearest-exact")
            out = _ops.index_select(out, 2 + j, Tensor._make(idx))
        return out
    if mode == "area":
        mats = [None if L == Lo else _adaptive_matrix(L, Lo) for L, Lo in zip(ins, outs)]
    elif mode == "bicubic":
        mats = [_cubic_matrix(L, Lo, sc, bool(align_corners)) for L, Lo, sc in zip(ins, outs, scales)]
    else:
        mats = [_linear_matrix(L, Lo, sc, bool(align_corners)) for L, Lo, sc in zip(ins, outs, scales)]
    return _apply_matrices(input, mats)


def upsample(input, size=None, scale_factor=None, mode="nearest", align_corners=None):
    return interpolate(input, size, scale_factor, mode, align_corners)


def upsample_nearest(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="nearest")


def upsample_bilinear(input, size=None, scale_factor=None):
    return interpolate(input, size, scale_factor, mode="bilinear", align_corners=True)


# ---------------------------------------------------------------- pooling
def _one(v, name, op, minimum):
    if isinstance(v, (tuple, list)):
        if len(v) != 1:
            raise ValueError(f"{op}: {name} must be an int or a 1-tuple, got {v!r}")
        v = v[0]
    if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < minimum:
        raise ValueError(f"{op}: {name} must be an int >= {minimum}, got {v!r}")
    return int(v)


def _check_nd(input, nd, op):
    _need_tensor(input, "input", op)
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got shape "
                           f"{_shape(input)}")


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    op = "max_pool1d"
    _check_nd(input, 1, op)
    k = _one(kernel_size, "kernel_size", op, 1)
    s = k if stride is None or stride == () else _one(stride, "stride", op, 1)
    p = _one(padding, "padding", op, 0)
    d = _one(dilation, "dilation", op, 1)
    x = _ops.unsqueeze(input, -2)
    res = _F().max_pool2d(x, (1, k), (1, s), (0, p), (1, d), ceil_mode, return_indices)
    if return_indices:
        return _ops.squeeze(res[0], -2), _ops.squeeze(res[1], -2)
    return _ops.squeeze(res, -2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over windows of the last axis of (N, C, L) or (C, L); stride defaults to kernel_size."""
    return max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return _F().max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    op = "avg_pool1d"
    _check_nd(input, 1, op)
    k = _one(kernel_size, "kernel_size", op, 1)
    s = k if stride is None or stride == () else _one(stride, "stride", op, 1)
    p = _one(padding, "padding", op, 0)
    x = _ops.unsqueeze(input, -2)
    return _ops.squeeze(_F().avg_pool2d(x, (1, k), (1, s), (0, p), ceil_mode, count_include_pad), -2)


def _out_sizes(output_size, ins, op):
    nd = len(ins)
    if output_size is None or isinstance(output_size, numbers.Integral):
        output_size = (output_size,) * nd
    output_size = tuple(output_size)
    if len(output_size) != nd:
        raise ValueError(f"{op}: output_size must be an int or a tuple of {nd}, got {output_size!r}")
    outs = tuple(L if o is None else int(o) for o, L in zip(output_size, ins))
    if any(o < 0 for o in outs):  # 0 is allowed: an empty output, as PyTorch
        raise RuntimeError(f"{op}: elements of output_size must be greater than or equal to 0 but received "
                           f"{output_size!r}")
    return outs


def _adaptive_sizes(input, output_size, nd, op):
    """Check an (N, C, *nd) or (C, *nd) input; the output sizes of adaptive pooling (None: keep)."""
    _check_nd(input, nd, op)
    return _out_sizes(output_size, _shape(input)[-nd:], op)


def _adaptive_avg(input, output_size, nd, op):
    """Adaptive average pooling: one averaging matrix per spatial axis."""
    outs = _adaptive_sizes(input, output_size, nd, op)
    return _apply_matrices(input, [_adaptive_matrix(L, Lo) for L, Lo in zip(_shape(input)[-nd:], outs)])


def adaptive_avg_pool1d(input, output_size):
    return _adaptive_avg(input, output_size, 1, "adaptive_avg_pool1d")


def adaptive_avg_pool3d(input, output_size):
    return _adaptive_avg(input, output_size, 3, "adaptive_avg_pool3d")


def _bins(L, Lo):
    return [((i * L) // Lo, -((-(i + 1) * L) // Lo)) for i in range(Lo)]


def _adaptive_max(input, outs, op, return_indices):
    """Each output cell takes the max of its adaptive bin; the value is read with a gather at
    the winning flat index, so the gradient goes to that one entry (PyTorch: first maximum,
    a NaN wins)."""
    nd = len(outs)
    ins = _shape(input)[-nd:]
    lead = _shape(input)[:-nd]
    x = input._data.reshape((-1,) + ins)
    M = x.shape[0]
    flat = xp.arange(int(xp.prod(ins))).reshape(ins)
    idx = xp.empty((M,) + outs, dtype=xp.int64)
    grids = [_bins(L, Lo) for L, Lo in zip(ins, outs)]
    for cell in xp.ndindex(*outs):
        sl = tuple(slice(*grids[j][c]) for j, c in enumerate(cell))
        w = x[(slice(None),) + sl].reshape(M, -1)
        pos = flat[sl].reshape(-1)
        nan = xp.isnan(w)
        win = xp.argmax(w, axis=1)
        if nan.any():
            last_nan = w.shape[1] - 1 - xp.argmax(nan[:, ::-1], axis=1)
            win = xp.where(nan.any(axis=1), last_nan, win)
        idx[(slice(None),) + cell] = pos[win]
    idx = idx.reshape(lead + outs)
    src = _ops.reshape(input, lead + (-1,))
    out = _ops.reshape(_ops.gather(src, len(lead), Tensor._make(idx.reshape(lead + (-1,)))), lead + outs)
    return (out, Tensor._make(idx)) if return_indices else out


def adaptive_max_pool1d(input, output_size, return_indices=False):
    op = "adaptive_max_pool1d"
    return _adaptive_max(input, _adaptive_sizes(input, output_size, 1, op), op, return_indices)


def adaptive_max_pool2d(input, output_size, return_indices=False):
    op = "adaptive_max_pool2d"
    return _adaptive_max(input, _adaptive_sizes(input, output_size, 2, op), op, return_indices)


def adaptive_max_pool1d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool1d(input, output_size, True)


def adaptive_max_pool2d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool2d(input, output_size, True)


def _lp_finish(out, norm_type, kprod):
    # PyTorch's form: (sign(s) relu(|s|) * k)^(1/p) with s the window mean of x^p
    return (_ops.sign(out) * _ops.relu(_ops.abs(out)) * float(kprod)) ** (1.0 / norm_type)


def lp_pool1d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p)."""
    k = _one(kernel_size, "kernel_size", "lp_pool1d", 1)
    out = avg_pool1d(input ** norm_type, k, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, k)


def lp_pool2d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each window of x^p)^(1/p)."""
    k = _pair(kernel_size, "kernel_size", "lp_pool2d", 1)
    _check_nd(input, 2, "lp_pool2d")
    out = _F().avg_pool2d(input ** norm_type, k, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, k[0] * k[1])


def _unpool(input, indices, outs, op):
    if not isinstance(indices, Tensor) or indices.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be an int64 Tensor (from max_pool with return_indices=True), got "
                        f"{getattr(indices, 'dtype', type(indices).__name__)}")
    if _shape(indices) != _shape(input):
        raise RuntimeError(f"{op}: expected shape of indices to be the same as that of the input tensor "
                           f"({_shape(input)}) but got indices tensor with shape {_shape(indices)}")
    nd = len(outs)
    lead = _shape(input)[:-nd]
    n = int(math.prod(outs))
    idx = indices._data.reshape(lead + (-1,))
    if idx.size and (idx.min() < 0 or idx.max() >= n):
        raise RuntimeError(f"{op}: found an invalid max index {int(idx.max() if idx.max() >= n else idx.min())} "
                           f"for an output of size {outs}")
    zeros = Tensor._make(xp.zeros(lead + (n,), dtype=input.dtype))
    out = _ops.scatter(zeros, len(lead), Tensor._make(idx), _ops.reshape(input, lead + (-1,)))
    return _ops.reshape(out, lead + tuple(outs))


def _unpool_size(ins, k, s, p, output_size, op):
    default = tuple((L - 1) * si - 2 * pi + ki for L, ki, si, pi in zip(ins, k, s, p))
    if output_size is None:
        return default
    o = tuple(int(v) for v in output_size)[-len(ins):]
    for oi, di, si in zip(o, default, s):
        if not di - si < oi < di + si:
            raise ValueError(f"{op}: invalid output_size {tuple(output_size)} (dim must be between "
                             f"{tuple(d - s_ + 1 for d, s_ in zip(default, s))} and "
                             f"{tuple(d + s_ - 1 for d, s_ in zip(default, s))})")
    return o


def _max_unpool(input, indices, kernel_size, stride, padding, output_size, nd, op, parse):
    """max_unpool{nd}d: ``parse(v, name, op, minimum)`` turns kernel_size/stride/padding into
    nd-tuples (stride defaults to kernel_size); values go to their flat indices in zeros."""
    _check_nd(input, nd, op)
    k = parse(kernel_size, "kernel_size", op, 1)
    s = k if stride is None else parse(stride, "stride", op, 1)
    p = parse(padding, "padding", op, 0)
    outs = _unpool_size(_shape(input)[-nd:], k, s, p, output_size, op)
    return _unpool(input, indices, outs, op)


def max_unpool1d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Place each value at its index (from max_pool1d(return_indices=True)) in zeros."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 1, "max_unpool1d",
                       lambda v, name, op, minimum: (_one(v, name, op, minimum),))


def max_unpool2d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Place each value at its flat index h W + w (from max_pool2d(return_indices=True)) in zeros."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d", _pair)


# ---------------------------------------------------------------- distances, normalisation
def cosine_similarity(x1, x2, dim=1, eps=1e-08):
    """sum((x1/|x1|) (x2/|x2|)) along dim, each norm clamped below at eps.  As PyTorch, the
    clamp changes the value only: the derivative is taken as if the norm were unclamped."""
    if _shape(x1) != _shape(x2):
        try:
            shape = xp.broadcast_shapes(_shape(x1), _shape(x2))
        except ValueError:
            raise RuntimeError(f"cosine_similarity: x1 of shape {_shape(x1)} and x2 of shape {_shape(x2)} "
                               "cannot be broadcast together") from None
        x1, x2 = _ops.expand(x1, shape), _ops.expand(x2, shape)
    n1 = _ops.norm(x1, 2, dim, keepdim=True)
    n2 = _ops.norm(x2, 2, dim, keepdim=True)
    n1 = _straight_through(n1, xp.maximum(n1._data, eps))
    n2 = _straight_through(n2, xp.maximum(n2._data, eps))
    return _ops.sum((x1 / n1) * (x2 / n2), dim)


def pdist(input, p=2):
    """Distances ||x_i - x_j||_p between the rows of (N, M) input for i < j, row-major."""
    op = "pdist"
    _need_tensor(input, "input", op)
    if input.ndim != 2:
        raise RuntimeError(f"{op}: only supports 2D tensors, got: {input.ndim}D (shape {_shape(input)})")
    if p < 0:
        raise RuntimeError(f"{op}: only supports non-negative p values, got {p}")
    i, j = xp.triu_indices(input.shape[0], 1)
    d = _ops.index_select(input, 0, Tensor._make(i)) - _ops.index_select(input, 0, Tensor._make(j))
    return _ops.norm(d, p, 1)


def local_response_norm(input, size, alpha=1e-4, beta=0.75, k=1.0):
    """x / (k + alpha/size * sum of x^2 over `size` neighbouring channels)^beta (the window is
    zero-padded by size//2 before and (size - 1)//2 after the channel)."""
    op = "local_response_norm"
    _need_tensor(input, "input", op)
    if input.ndim < 3:
        raise ValueError(f"{op}: expected 3D or higher dimensionality input (got {input.ndim} dimensions)")
    if input.numel() == 0:
        return input
    sq = input * input
    C = input.shape[1]
    lo, hi = size // 2, (size - 1) // 2
    zshape = list(_shape(input))
    parts = []
    if lo:
        zshape[1] = lo
        parts.append(Tensor._make(xp.zeros(zshape, dtype=input.dtype)))
    parts.append(sq)
    if hi:
        zshape[1] = hi
        parts.append(Tensor._make(xp.zeros(zshape, dtype=input.dtype)))
    padded = _ops.cat(parts, 1) if len(parts) > 1 else sq
    acc = _ops.narrow(padded, 1, 0, C)
    for j in range(1, size):
        acc = acc + _ops.narrow(padded, 1, j, C)
    div = (acc * (alpha / size) + k) ** beta
    return input / div


def instance_norm(input, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-05):
    """Normalise each (example, channel) over its spatial positions.  With running buffers and
    ``use_input_stats`` the batch statistics (averaged over the examples) update them in place,
    as PyTorch; ``use_input_stats=False`` normalises with the running statistics."""
    op = "instance_norm"
    _need_tensor(input, "input", op)
    if input.ndim < 3:
        raise ValueError(f"{op}: expected an input of shape (N, C, *) with at least 3 dimensions, got shape "
                         f"{_shape(input)}")
    N, C = input.shape[0], input.shape[1]
    for name, t in (("weight", weight), ("bias", bias), ("running_mean", running_mean),
                    ("running_var", running_var)):
        if t is not None and _shape(t) != (C,):
            raise RuntimeError(f"{op}: {name} must have shape ({C},) for an input with {C} channels, got "
                               f"{_shape(t)}")
    if not use_input_stats:
        if running_mean is None or running_var is None:
            raise ValueError(f"{op}: expected running_mean and running_var to be defined when "
                             "use_input_stats is false")
        return _F().batch_norm(input, running_mean, running_var, weight, bias, False, momentum, eps)
    if input.numel() // (N * C) <= 1:
        raise ValueError(f"{op}: expected more than 1 spatial element when training, got input size "
                         f"{_shape(input)}")
    x = _ops.reshape(input, (1, N * C) + _shape(input)[2:])
    rm = rv = None
    if running_mean is not None:
        rm = Tensor._make(xp.tile(running_mean._data, N))
    if running_var is not None:
        rv = Tensor._make(xp.tile(running_var._data, N))
    y = _F().batch_norm(x, rm, rv, None, None, True, momentum, eps)
    if rm is not None:
        running_mean._data[...] = rm._data.reshape(N, C).mean(0)
        running_mean._version[0] += 1
    if rv is not None:
        running_var._data[...] = rv._data.reshape(N, C).mean(0)
        running_var._version[0] += 1
    return _F()._channel_affine(_ops.reshape(y, _shape(input)), weight, bias)


def feature_alpha_dropout(input, p=0.5, training=False, inplace=False, *, generator=None):
    """Alpha dropout of whole channels (N, C, *): a dropped channel takes SELU's saturation value,
    then the affine correction of alpha_dropout keeps mean 0 and variance 1."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"feature_alpha_dropout: dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        return input * 0.0
    alpha_p = -1.7580993408473766
    keep = 1.0 - p
    a = (keep + alpha_p ** 2 * keep * p) ** -0.5
    b = -a * alpha_p * p
    shape = _shape(input)[:2] + (1,) * (input.ndim - 2)
    m = (_gen(generator).random(shape) < keep).astype(input.dtype)
    return input * Tensor._make(m * a) + Tensor._make(((1 - m) * alpha_p * a + b).astype(input.dtype))


# ---------------------------------------------------------------- losses
def _red(size_average, reduce, reduction, op, extra=()):
    F = _F()
    r = F._legacy_reduction(size_average, reduce, reduction)
    F._check_reduction(r, op, extra)
    return r


def _same(a, b, op, an="input", bn="target"):
    if _shape(a) != _shape(b):
        raise ValueError(f"{op}: {bn} of shape {_shape(b)} must have the same shape as {an} {_shape(a)}")


def _as_t(v, like):
    return v if isinstance(v, Tensor) else _const(v, like)


def _loss_tensors(op, *named):
    """A TypeError naming the first non-Tensor argument, as PyTorch's argument parser
    (``named``: (value, name) pairs in positional order)."""
    for pos, (v, name) in enumerate(named, 1):
        if not isinstance(v, Tensor):
            _F()._need_tensor(v, name, pos, op, _F().NotATensorError)


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -y (x1 - x2) + margin) for y in {1, -1}."""
    op = "margin_ranking_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input1, "input1"), (input2, "input2"), (target, "target"))
    if not (_shape(input1) == _shape(input2) == _shape(target)):
        raise RuntimeError(f"{op}: all input tensors should have the same size, got input1 {_shape(input1)}, "
                           f"input2 {_shape(input2)}, target {_shape(target)}")
    return _F()._reduce(_ops.relu(-target * (input1 - input2) + margin), r)


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """x where y = 1, max(0, margin - x) where y = -1 (PyTorch's form: both terms where y is
    neither)."""
    op = "hinge_embedding_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    t = target._data if isinstance(target, Tensor) else xp.asarray(target)
    if t.shape != _shape(input):
        raise ValueError(f"{op}: target of shape {t.shape} must have the same shape as input {_shape(input)}")
    m = _ops.where(t != 1, _ops.relu(margin - input), 0.0)
    s = _ops.where(t != -1, input, 0.0)
    return _F()._reduce(m + s, r)


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-y x)) (a softplus, stable for large |x|)."""
    op = "soft_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    _same(input, target, op)
    return _F()._reduce(_ops.softplus(-target * input), r)


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-(1/C) sum_c w_c [y_c log sigmoid(x_c) + (1 - y_c) log sigmoid(-x_c)] per example."""
    op = "multilabel_soft_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    _same(input, target, op)
    F = _F()
    loss = -(target * F.logsigmoid(input) + (1 - target) * F.logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    C = input.shape[-1] if input.ndim else 1
    loss = _ops.sum(loss, -1) / C if input.ndim else loss
    return F._reduce(loss, r)


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(x1, x2) where y = 1, max(0, cos(x1, x2) - margin) where y = -1; cos along the last
    dim with 1e-12 added to each squared norm (PyTorch's form)."""
    op = "cosine_embedding_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input1, "input1"), (input2, "input2"), (target, "target"))
    if _shape(input1) != _shape(input2) or input1.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected input1 and input2 of the same 1-D or 2-D shape, got "
                           f"{_shape(input1)} and {_shape(input2)}")
    t = target._data if isinstance(target, Tensor) else xp.asarray(target)
    if t.shape != _shape(input1)[:-1]:
        raise RuntimeError(f"{op}: expected target of shape {_shape(input1)[:-1]}, got {t.shape}")
    eps = 1e-12
    prod = _ops.sum(input1 * input2, -1)
    m1 = _ops.sum(input1 * input1, -1) + eps
    m2 = _ops.sum(input2 * input2, -1) + eps
    cos = prod / _ops.sqrt(m1 * m2)
    pos = _ops.where(t == 1, 1 - cos, 0.0)
    neg = _ops.where(t == -1, _ops.relu(cos - margin), 0.0)
    return _F()._reduce(pos + neg, r)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-06, swap=False,
                        size_average=None, reduce=None, reduction="mean"):
    """max(0, margin + d(a, p) - d(a, n)) with d = pairwise_distance(., ., p, eps); ``swap``
    uses min(d(a, n), d(p, n)) for the negative distance."""
    op = "triplet_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    if not (anchor.ndim == positive.ndim == negative.ndim):
        raise RuntimeError(f"{op}: the anchor, positive, and negative tensors are expected to have the same "
                           f"number of dimensions, but got: anchor {anchor.ndim}D, positive {positive.ndim}D, "
                           f"and negative {negative.ndim}D inputs")
    F = _F()
    dp = F.pairwise_distance(anchor, positive, p, eps)
    dn = F.pairwise_distance(anchor, negative, p, eps)
    if swap:
        dn = _ops.minimum(dn, F.pairwise_distance(positive, negative, p, eps))
    return F._reduce(_ops.relu(margin + dp - dn), r)


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0,
                                      swap=False, reduction="mean"):
    op = "triplet_margin_with_distance_loss"
    r = _red(None, None, reduction, op)
    if margin <= 0:
        raise ValueError(f"{op}: margin must be greater than 0, got {margin}")
    F = _F()
    dist = distance_function if distance_function is not None else F.pairwise_distance
    dp = dist(anchor, positive)
    dn = dist(anchor, negative)
    if swap:
        dn = _ops.minimum(dn, dist(positive, negative))
    return F._reduce(_ops.relu(margin + dp - dn), r)


def _class_targets(input, target, op):
    t = target._data if isinstance(target, Tensor) else xp.asarray(target)
    if t.dtype.kind not in "iu":
        raise TypeError(f"{op}: target must hold class indices (int64), got dtype {t.dtype}")
    if input.ndim not in (1, 2):
        raise ValueError(f"{op}: expected a 1-D (C,) or 2-D (N, C) input, got shape {_shape(input)}")
    return t


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """(1/C) sum_{i != y} w_y max(0, margin - x_y + x_i)^p per example, p in {1, 2}."""
    op = "multi_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    if p not in (1, 2):
        raise ValueError(f"{op}: only p == 1 and p == 2 supported, got {p}")
    t = _class_targets(input, target, op)
    x = input if input.ndim == 2 else _ops.unsqueeze(input, 0)
    t2 = t.reshape(-1)
    N, C = _shape(x)
    if t2.shape != (N,):
        raise ValueError(f"{op}: expected target of shape ({N},) for input of shape {_shape(input)}, got {t.shape}")
    if t2.size and (t2.min() < 0 or t2.max() >= C):
        raise IndexError(f"{op}: target {int(t2.max() if t2.max() >= C else t2.min())} is out of bounds for "
                         f"{C} classes")
    xy = _ops.gather(x, 1, Tensor._make(t2[:, None]))
    z = _ops.relu(margin - xy + x)
    if p == 2:
        z = z * z
    notself = xp.ones((N, C), dtype=input.dtype)
    notself[xp.arange(N), t2] = 0
    z = z * Tensor._make(notself)
    if weight is not None:
        w = weight._data if isinstance(weight, Tensor) else xp.asarray(weight)
        if w.shape != (C,):
            raise ValueError(f"{op}: weight must have shape ({C},), got {tuple(w.shape)}")
        z = z * Tensor._make(w[t2][:, None].astype(input.dtype))
    loss = _ops.sum(z, 1) / C
    if input.ndim == 1:
        loss = _ops.reshape(loss, ())
    return _F()._reduce(loss, r)


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """(1/C) sum over target classes j and non-target classes i of max(0, 1 - (x_j - x_i)); the
    target row lists class indices and ends at the first -1."""
    op = "multilabel_margin_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    t = _class_targets(input, target, op)
    if t.shape != _shape(input):
        raise ValueError(f"{op}: target of shape {t.shape} must have the input's shape {_shape(input)}")
    x = input if input.ndim == 2 else _ops.unsqueeze(input, 0)
    t2 = t.reshape(x.shape)
    N, C = _shape(x)
    count = xp.zeros((N, C))
    for n in range(N):
        for c in t2[n]:
            if c < 0:
                break
            if c >= C:
                raise IndexError(f"{op}: target {int(c)} is out of bounds for {C} classes")
            count[n, c] += 1
    is_t = count > 0
    mask = count[:, :, None] * (~is_t)[:, None, :]            # (N, j target, i non-target)
    z = _ops.relu(1 - _ops.unsqueeze(x, 2) + _ops.unsqueeze(x, 1)) * Tensor._make(mask.astype(input.dtype))
    loss = _ops.sum(z, (1, 2)) / C
    if input.ndim == 1:
        loss = _ops.reshape(loss, ())
    return _F()._reduce(loss, r)


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-08,
                     reduce=None, reduction="mean"):
    """exp(x) - y x (log_input) or x - y log(x + eps); ``full`` adds Stirling's term
    y log y - y + log(2 pi y)/2 where y > 1 (differentiable in y too, as PyTorch)."""
    op = "poisson_nll_loss"
    r = _red(size_average, reduce, reduction, op)
    _loss_tensors(op, (input, "input"), (target, "target"))
    if log_input:
        loss = _ops.exp(input) - target * input
    else:
        loss = input - target * _ops.log(input + eps)
    if full:
        t = target._data
        big = t > 1
        ts = _ops.where(big, target, 1.0)
        st = ts * _ops.log(ts) - ts + 0.5 * _ops.log(2 * math.pi * ts)
        loss = loss + _ops.where(big, st, 0.0)
    return _F()._reduce(loss, r)


# ---------------------------------------------------------------- embedding_bag
def embedding_bag(input, weight, offsets=None, max_norm=None, norm_type=2, scale_grad_by_freq=False,
                  mode="mean", sparse=False, per_sample_weights=None, include_last_offset=False,
                  padding_idx=None):
    """Sum, mean or max of the embedding rows in each bag.  Bags are the rows of a 2-D input,
    or the slices input[offsets[b]:offsets[b+1]] of a 1-D input.  ``padding_idx`` entries are
    left out of their bag (and of the mean's count); an empty bag gives zeros."""
    op = "embedding_bag"
    _need_tensor(weight, "weight", op)
    if mode not in ("sum", "mean", "max"):
        raise ValueError(f"{op}: mode has to be one of sum, mean or max, got {mode!r}")
    if scale_grad_by_freq or sparse:
        raise NotImplementedError(f"{op}: scale_grad_by_freq and sparse gradients are not supported")
    idx = input._data if isinstance(input, Tensor) else xp.asarray(input)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{op}: input must hold integer indices (int64), got {idx.dtype}")
    if per_sample_weights is not None:
        if mode != "sum":
            raise NotImplementedError(f"{op}: per_sample_weights was not None. per_sample_weights is only "
                                      f"supported for mode='sum' (got mode='{mode}')")
        if _shape(per_sample_weights) != idx.shape:
            raise ValueError(f"{op}: per_sample_weights of shape {_shape(per_sample_weights)} must have the "
                             f"input's shape {idx.shape}")
    if idx.ndim == 2:
        if offsets is not None:
            raise ValueError(f"{op}: if input is 2D, then offsets has to be None, as input is treated as a "
                             "mini-batch of fixed length sequences")
        B, n = idx.shape
        starts = xp.arange(B) * n
        flat = idx.reshape(-1)
        ends = starts + n
    elif idx.ndim == 1:
        if offsets is None:
            raise ValueError(f"{op}: offsets has to be a 1D Tensor but got None")
        off = offsets._data if isinstance(offsets, Tensor) else xp.asarray(offsets)
        if off.ndim != 1:
            raise ValueError(f"{op}: offsets has to be a 1D Tensor, got shape {off.shape}")
        off = off.astype(xp.int64)
        flat = idx
        if include_last_offset:
            starts, ends = off[:-1], off[1:]
        else:
            starts, ends = off, xp.append(off[1:], idx.size)
        B = starts.size
        if B and (starts[0] != 0):
            raise ValueError(f"{op}: offsets[0] has to be 0, i.e., the first sequence in the mini-batch has "
                             f"to start from position 0. However, got {int(starts[0])}")
        if xp.any(ends < starts) or (ends.size and ends[-1] > idx.size):
            raise ValueError(f"{op}: offsets must be non-decreasing and at most the input length {idx.size}, "
                             f"got {off.tolist()}")
    else:
        raise ValueError(f"{op}: input has to be 1D or 2D Tensor, but got Tensor of dimension {idx.ndim}")
    V, D = _shape(weight)
    if padding_idx is not None and padding_idx < 0:
        padding_idx += V
    emb = _F().embedding(Tensor._make(flat), weight, None, max_norm, norm_type)
    bag = xp.repeat(xp.arange(B), ends - starts)
    keep = xp.ones(flat.size, dtype=bool) if padding_idx is None else flat != padding_idx
    if per_sample_weights is not None:
        emb = emb * _ops.unsqueeze(_ops.reshape(per_sample_weights, (-1,)), 1)
    if mode == "max":
        # scatter each bag into rows of a (B, longest, D) block filled with -inf, take the max
        # along the row (gradient to the arg max); empty bags give 0
        counts = xp.bincount(bag[keep], minlength=B)
        Lmax = max(int(counts.max()) if B else 0, 1)
        pos = xp.zeros(flat.size, dtype=xp.int64)
        k = xp.flatnonzero(keep)
        kb = bag[k]
        first = xp.searchsorted(kb, kb, side="left")
        pos[k] = xp.arange(k.size) - first
        block = Tensor._make(xp.full((B, Lmax, D), -xp.inf, dtype=weight.dtype))
        block = _ops.index_put(block, (kb, pos[k]), _ops.index_select(emb, 0, Tensor._make(k)))
        m = _ops.max(block, 1).values
        empty = counts == 0
        return _ops.where(empty[:, None], 0.0, m) if empty.any() else m
    w = keep.astype(weight.dtype)
    if mode == "mean":
        counts = xp.bincount(bag, weights=w, minlength=B)
        w = w / xp.maximum(counts, 1)[bag]
    emb = emb * Tensor._make(w[:, None].astype(weight.dtype))
    zeros = Tensor._make(xp.zeros((B, D), dtype=weight.dtype))
    return _ops.index_add(zeros, 0, Tensor._make(bag), emb)


# ---------------------------------------------------------------- N-d convolution and pooling
# Built from one gather of every window position (the input-gradient of a gather is a
# scatter-add, seed 003 §5.2's "each input pixel collects the gradients of the outputs it
# fed") and an einsum with the kernel.  Used for the 3-D layers and conv_transpose3d;
# the 1-D/2-D layers keep their fused ops.
def _ntup(v, n, name, op, minimum):
    if isinstance(v, numbers.Integral) and not isinstance(v, bool):
        v = (int(v),) * n
    try:
        v = tuple(int(a) for a in v)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a tuple of {n} ints, got {v!r}") from None
    if len(v) != n or any(a < minimum for a in v):
        raise ValueError(f"{op}: {name} must be an int or a tuple of {n} ints >= {minimum}, got {v!r}")
    return v


def _window_key(k, d, s, outs, lead=2):
    """Index arrays picking x[..., o_j s_j + i_j d_j, ...] with result dims (O..., K...)."""
    n = len(k)
    key = [slice(None)] * lead
    for j in range(n):
        idx = (xp.arange(outs[j]) * s[j])[:, None] + (xp.arange(k[j]) * d[j])[None, :]   # (O_j, k_j)
        shape = [1] * (2 * n)
        shape[j], shape[n + j] = outs[j], k[j]
        key.append(idx.reshape(shape))
    return tuple(key)


def _pad_nd(x, pads, value):
    """Constant padding of the last len(pads) axes by (before, after) pairs."""
    flat = []
    for lo, hi in reversed(pads):
        flat += [lo, hi]
    if not any(flat):
        return x
    return _F().pad(x, tuple(flat), "constant", value)


def _conv_nd(input, weight, bias, stride, padding, dilation, groups, nd, op):
    _need_tensor(input, "input", op)
    _need_tensor(weight, "weight", op)
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got shape "
                           f"{_shape(input)}")
    unb = input.ndim == nd + 1
    x = _ops.unsqueeze(input, 0) if unb else input
    if weight.ndim != nd + 2:
        raise RuntimeError(f"{op}: weight must have {nd + 2} dimensions (out, in/groups, *kernel), got shape "
                           f"{_shape(weight)}")
    N, C = x.shape[0], x.shape[1]
    O = weight.shape[0]
    if isinstance(groups, bool) or not isinstance(groups, numbers.Integral) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    if C % groups or O % groups or weight.shape[1] * groups != C:
        raise RuntimeError(f"{op}: weight of shape {_shape(weight)} with groups={groups} expects "
                           f"{weight.shape[1] * groups} input channels, but the input has {C} (shape {_shape(input)})")
    if bias is not None and _shape(bias) != (O,):
        raise RuntimeError(f"{op}: bias must have shape ({O},), got {_shape(bias)}")
    k = _shape(weight)[2:]
    s = _ntup(stride, nd, "stride", op, 1)
    d = _ntup(dilation, nd, "dilation", op, 1)
    if isinstance(padding, str):
        if padding == "valid":
            pads = ((0, 0),) * nd
        elif padding == "same":
            if any(v != 1 for v in s):
                raise ValueError(f"{op}: padding='same' needs stride 1, got stride {s}")
            pads = tuple((di * (ki - 1) // 2, di * (ki - 1) - di * (ki - 1) // 2) for ki, di in zip(k, d))
        else:
            raise ValueError(f"{op}: padding must be an int, a tuple of {nd} ints, 'same' or 'valid', got {padding!r}")
    else:
        pads = tuple((p, p) for p in _ntup(padding, nd, "padding", op, 0))
    ins = _shape(x)[2:]
    outs = tuple((L + lo + hi - di * (ki - 1) - 1) // si + 1 for L, (lo, hi), ki, di, si in zip(ins, pads, k, d, s))
    if any(o < 1 for o in outs):
        raise RuntimeError(f"{op}: the kernel {k} (dilation {d}) is larger than the padded input {ins} + {pads}")
    xpad = _pad_nd(x, pads, 0.0)
    cols = _ops.getitem(xpad, _window_key(k, d, s, outs))            # (N, C, O..., K...)
    K, L = int(math.prod(k)), int(math.prod(outs))
    g = groups
    cols = _ops.reshape(cols, (N, g, C // g, L, K))
    w = _ops.reshape(weight, (g, O // g, C // g, K))
    y = _ops.reshape(_ops.einsum("ngclk,gock->ngol", cols, w), (N, O) + outs)
    if bias is not None:
        y = y + _ops.reshape(bias, (1, O) + (1,) * nd)
    return _ops.squeeze(y, 0) if unb else y


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """3-D cross-correlation over (N, C, D, H, W) or (C, D, H, W); weight (out, in/groups, kd, kh, kw)."""
    return _conv_nd(input, weight, bias, stride, padding, dilation, groups, 3, "conv3d")


def _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, nd, op):
    _need_tensor(input, "input", op)
    _need_tensor(weight, "weight", op)
    if input.ndim not in (nd + 1, nd + 2):
        raise RuntimeError(f"{op}: expected a {nd + 1}-D (unbatched) or {nd + 2}-D (batched) input, got shape "
                           f"{_shape(input)}")
    if weight.ndim != nd + 2:
        raise RuntimeError(f"{op}: weight must have {nd + 2} dimensions (in, out/groups, *kernel), got shape "
                           f"{_shape(weight)}")
    unb = input.ndim == nd + 1
    x = _ops.unsqueeze(input, 0) if unb else input
    N, C = x.shape[0], x.shape[1]
    g = groups
    if weight.shape[0] != C or C % g:
        raise RuntimeError(f"{op}: weight of shape {_shape(weight)} expects {weight.shape[0]} input channels "
                           f"(weight.shape[0]) divisible by groups={g}, but the input has {C} (shape {_shape(input)})")
    O = weight.shape[1] * g
    if bias is not None and _shape(bias) != (O,):
        raise RuntimeError(f"{op}: bias must have shape ({O},), got {_shape(bias)}")
    k = _shape(weight)[2:]
    s = _ntup(stride, nd, "stride", op, 1)
    p = _ntup(padding, nd, "padding", op, 0)
    opad = _ntup(output_padding, nd, "output_padding", op, 0)
    d = _ntup(dilation, nd, "dilation", op, 1)
    for a, si, di in zip(opad, s, d):
        if a >= max(si, di):
            raise ValueError(f"{op}: output_padding must be smaller than stride or dilation, got "
                             f"output_padding={opad}, stride={s}, dilation={d}")
    ins = _shape(x)[2:]
    full = tuple((L - 1) * si + di * (ki - 1) + 1 + a for L, si, di, ki, a in zip(ins, s, d, k, opad))
    outs = tuple(f - 2 * pi for f, pi in zip(full, p))
    if any(o < 1 for o in outs):
        raise RuntimeError(f"{op}: the output size {outs} is not positive (padding {p} too large)")
    K, L = int(math.prod(k)), int(math.prod(ins))
    xg = _ops.reshape(x, (N, g, C // g, L))
    wg = _ops.reshape(weight, (g, C // g, O // g, K))
    contrib = _ops.reshape(_ops.einsum("ngcl,gcok->ngolk", xg, wg), (N, O) + ins + k)   # (N, O, I..., K...)
    y = _ops.index_scatter(contrib, _window_key(k, d, s, ins), (N, O) + full)
    crop = (slice(None), slice(None)) + tuple(slice(pi, pi + o) for pi, o in zip(p, outs))
    y = _ops.getitem(y, crop)
    if bias is not None:
        y = y + _ops.reshape(bias, (1, O) + (1,) * nd)
    return _ops.squeeze(y, 0) if unb else y


def conv_transpose3d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 3-D convolution; weight (in, out/groups, kd, kh, kw); output size per axis
    (L - 1) s - 2 p + d (k - 1) + output_padding + 1."""
    return _conv_transpose_nd(input, weight, bias, stride, padding, output_padding, groups, dilation, 3,
                              "conv_transpose3d")


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1):
    """Transposed 1-D convolution over (N, C, L) or (C, L); weight (in, out/groups, k).  Runs as the
    2-D op over a height-1 image."""
    op = "conv_transpose1d"
    _need_tensor(input, "input", op)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a 2-D (unbatched) or 3-D (batched) input, got shape {_shape(input)}")
    if not isinstance(weight, Tensor) or weight.ndim != 3:
        raise RuntimeError(f"{op}: weight must be a 3-D tensor (in, out/groups, k), got "
                           f"{_shape(weight) if isinstance(weight, Tensor) else type(weight).__name__}")
    s, p, a, d = (_one(v, n, op, m) for v, n, m in ((stride, "stride", 1), (padding, "padding", 0),
                                                    (output_padding, "output_padding", 0), (dilation, "dilation", 1)))
    y = _F().conv_transpose2d(_ops.unsqueeze(input, -2), _ops.unsqueeze(weight, 2), bias, (1, s), (0, p), (0, a),
                              groups, (1, d))
    return _ops.squeeze(y, -2)


def _pool_geometry(ins, k, s, p, d, ceil_mode, op):
    outs = []
    for L, ki, si, pi, di in zip(ins, k, s, p, d):
        if pi > ki // 2:
            from varlens.ops.conv import _PadError
            raise _PadError(f"{op}: pad should be at most half of effective kernel size, but got pad={pi}, "
                            f"kernel_size={ki}")
        span = L + 2 * pi - di * (ki - 1) - 1
        o = (-(-span // si) if ceil_mode else span // si) + 1
        if ceil_mode and (o - 1) * si >= L + pi:
            o -= 1
        if o < 1:
            raise RuntimeError(f"{op}: output size is too small for input {tuple(ins)} with kernel {k}")
        outs.append(o)
    # padding at the end that ceil_mode windows may reach
    ends = tuple(max(0, (o - 1) * si + di * (ki - 1) + 1 - (L + 2 * pi))
                 for o, L, ki, si, pi, di in zip(outs, ins, k, s, p, d))
    return tuple(outs), tuple((pi, pi + e) for pi, e in zip(p, ends))


def _pool_args_nd(kernel_size, stride, padding, dilation, nd, op):
    k = _ntup(kernel_size, nd, "kernel_size", op, 1)
    s = k if stride is None or (isinstance(stride, (tuple, list)) and len(stride) == 0) else \
        _ntup(stride, nd, "stride", op, 1)
    return k, s, _ntup(padding, nd, "padding", op, 0), _ntup(dilation, nd, "dilation", op, 1)


def _max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, nd, op):
    _check_nd(input, nd, op)
    k, s, p, d = _pool_args_nd(kernel_size, stride, padding, dilation, nd, op)
    ins = _shape(input)[-nd:]
    lead = _shape(input)[:-nd]
    outs, pads = _pool_geometry(ins, k, s, p, d, ceil_mode, op)
    x = input._data.reshape((-1,) + ins)
    xpd = xp.pad(x, ((0, 0),) + pads, constant_values=-xp.inf)
    win = xpd[_window_key(k, d, s, outs, lead=1)].reshape((x.shape[0],) + outs + (-1,))
    nan = xp.isnan(win)
    best = xp.argmax(win, axis=-1)
    if nan.any():                       # PyTorch: a NaN wins, the last one in the window
        last = win.shape[-1] - 1 - xp.argmax(nan[..., ::-1], axis=-1)
        best = xp.where(nan.any(axis=-1), last, best)
    kidx = xp.unravel_index(best, k)
    flat = xp.zeros(best.shape, dtype=xp.int64)
    for j in range(nd):
        o = xp.arange(outs[j]).reshape((1,) + tuple(outs[j] if i == j else 1 for i in range(nd)))
        pos = o * s[j] - p[j] + kidx[j] * d[j]
        flat = flat * ins[j] + pos
    idx = flat.reshape(lead + outs)
    src = _ops.reshape(input, lead + (-1,))
    out = _ops.reshape(_ops.gather(src, len(lead), Tensor._make(idx.reshape(lead + (-1,)))), lead + outs)
    return (out, Tensor._make(idx)) if return_indices else out


def max_pool3d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over (kd, kh, kw) windows of (N, C, D, H, W) or (C, D, H, W); the gradient goes to the
    first maximum of each window (indices are flat d H W + h W + w positions)."""
    return _max_pool_nd(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices, 3, "max_pool3d")


def max_pool3d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool3d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def _avg_divisor(L, k, s, p, outs_j):
    o = xp.arange(outs_j)
    start = o * s - p
    end = xp.minimum(start + k, L + p)
    full = end - start
    inner = xp.minimum(end, L) - xp.maximum(start, 0)
    return full, inner


def avg_pool3d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Mean over (kd, kh, kw) windows; the divisor follows count_include_pad / divisor_override as
    PyTorch (ceil_mode windows are clipped to the padded input)."""
    op = "avg_pool3d"
    nd = 3
    _check_nd(input, nd, op)
    if input.dtype.kind != "f":
        from varlens.ops.conv import int_avg_pool
        return int_avg_pool(input, op, lambda t: avg_pool3d(t, kernel_size, stride, padding, ceil_mode,
                                                           count_include_pad, divisor_override))
    k, s, p, _ = _pool_args_nd(kernel_size, stride, padding, 1, nd, op)
    ins = _shape(input)[-nd:]
    outs, pads = _pool_geometry(ins, k, s, p, (1,) * nd, ceil_mode, op)
    lead = _shape(input)[:-nd]
    x = _ops.reshape(input, (-1,) + ins)
    xpd = _pad_nd(x, pads, 0.0)
    win = _ops.getitem(xpd, _window_key(k, (1,) * nd, s, outs, lead=1))
    tot = _ops.sum(_ops.reshape(win, (win.shape[0],) + outs + (-1,)), -1)
    if divisor_override is not None:
        if isinstance(divisor_override, bool) or int(divisor_override) < 1:
            raise ValueError(f"{op}: divisor_override must be a positive int or None, got {divisor_override!r}")
        div = xp.full(outs, float(divisor_override))
    else:
        div = xp.ones(outs)
        for j in range(nd):
            full, inner = _avg_divisor(ins[j], k[j], s[j], p[j], outs[j])
            shape = tuple(outs[j] if i == j else 1 for i in range(nd))
            div = div * (full if count_include_pad else inner).reshape(shape)
    out = tot / Tensor._make(div.astype(input.dtype))
    return _ops.reshape(out, lead + outs)


def adaptive_max_pool3d(input, output_size, return_indices=False):
    op = "adaptive_max_pool3d"
    return _adaptive_max(input, _adaptive_sizes(input, output_size, 3, op), op, return_indices)


def adaptive_max_pool3d_with_indices(input, output_size, return_indices=True):
    return adaptive_max_pool3d(input, output_size, True)


def lp_pool3d(input, norm_type, kernel_size, stride=None, ceil_mode=False):
    """(sum over each (kd, kh, kw) window of x^p)^(1/p)."""
    k = _ntup(kernel_size, 3, "kernel_size", "lp_pool3d", 1)
    out = avg_pool3d(input ** norm_type, k, stride, 0, ceil_mode)
    return _lp_finish(out, norm_type, k[0] * k[1] * k[2])


def max_unpool3d(input, indices, kernel_size, stride=None, padding=0, output_size=None):
    """Place each value at its flat index (from max_pool3d(return_indices=True)) in zeros."""
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 3, "max_unpool3d",
                       lambda v, name, op, minimum: _ntup(v, 3, name, op, minimum))


__all__ += ["conv3d", "conv_transpose1d", "conv_transpose3d", "max_pool3d", "max_pool3d_with_indices",
            "avg_pool3d", "adaptive_max_pool3d", "adaptive_max_pool3d_with_indices", "lp_pool3d", "max_unpool3d"]


# ---------------------------------------------------------------- CTC loss
_NEG = -1e30   # "log 0" that keeps logsumexp's gradient finite (exp(-1e30 - m) is exactly 0)


def _lengths(v, n, name, op):
    a = v._data if isinstance(v, Tensor) else xp.asarray(v)
    a = xp.atleast_1d(a)
    if a.dtype.kind not in "iu" or a.shape != (n,):
        raise RuntimeError(f"{op}: {name} must be {n} integer length(s), got {a.dtype} array of shape {a.shape}")
    return a.astype(xp.int64)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean", zero_infinity=False):
    """Connectionist temporal classification: -log of the total probability of all alignments of
    each target (blanks between and around labels, repeats merged), by the forward recursion
    alpha_t(s) = logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1), alpha_{t-1}(s-2)) + log y_t(l'_s)
    on the blank-extended target l' (the s-2 term only between two different labels).
    ``log_probs`` (T, N, C) or (T, C) are log-softmax outputs; ``targets`` (N, S) padded or
    1-D concatenated.  'mean' divides each loss by its target length, then averages.

    The gradient is the chain rule through that recursion, i.e. the exact derivative with
    respect to ``log_probs`` (-(occupation probability) per (t, c)).  PyTorch returns
    exp(log_probs) minus the occupation instead; the two agree after log_softmax (the extra
    term is removed by log_softmax's backward), which is how CTC is used."""
    op = "ctc_loss"
    _need_tensor(log_probs, "log_probs", op)
    _red(None, None, reduction, op)
    if log_probs.ndim not in (2, 3):
        raise RuntimeError(f"{op}: log_probs must be (T, N, C) or (T, C), got shape {_shape(log_probs)}")
    unb = log_probs.ndim == 2
    lp = _ops.unsqueeze(log_probs, 1) if unb else log_probs
    T, N, C = _shape(lp)
    if not 0 <= blank < C:
        raise RuntimeError(f"{op}: blank must be in label range [0, {C}), got {blank}")
    tgt = targets._data if isinstance(targets, Tensor) else xp.asarray(targets)
    if tgt.dtype.kind not in "iu":
        raise RuntimeError(f"{op}: targets must hold integer class indices, got dtype {tgt.dtype}")
    il = _lengths(input_lengths, N, "input_lengths", op)
    tl = _lengths(target_lengths, N, "target_lengths", op)
    if (il > T).any() or (il < 0).any():
        raise RuntimeError(f"{op}: input_lengths must be in [0, {T}], got {il.tolist()}")
    if unb:
        tgt = tgt.reshape(1, -1)
    if tgt.ndim == 2:
        if tgt.shape[0] != N or (tl > tgt.shape[1]).any():
            raise RuntimeError(f"{op}: padded targets of shape {tgt.shape} do not fit {N} sequences of lengths "
                               f"{tl.tolist()}")
        rows = [tgt[n, :tl[n]] for n in range(N)]
    elif tgt.ndim == 1:
        if tgt.size != tl.sum():
            raise RuntimeError(f"{op}: concatenated targets hold {tgt.size} labels but target_lengths sum to "
                               f"{int(tl.sum())}")
        ends = xp.cumsum(tl)
        rows = [tgt[e - n:e] for e, n in zip(ends, tl)]
    else:
        raise RuntimeError(f"{op}: targets must be (N, S) padded or 1-D concatenated, got shape {tgt.shape}")
    for r in rows:
        if r.size and (r.min() < 0 or r.max() >= C or (r == blank).any()):
            raise RuntimeError(f"{op}: target labels must be in [0, {C}) and differ from blank={blank}, got "
                               f"{r.tolist()}")
    Smax = int(tl.max()) if N else 0
    Sx = 2 * Smax + 1
    ext = xp.full((N, Sx), blank, dtype=xp.int64)
    skip = xp.zeros((N, Sx), dtype=bool)        # may come from s - 2
    need = xp.zeros(N, dtype=xp.int64)          # shortest alignment length
    for n, r in enumerate(rows):
        ext[n, 1:2 * r.size:2] = r
        if r.size > 1:
            skip[n, 3:2 * r.size:2] = r[1:] != r[:-1]
        need[n] = r.size + (int((r[1:] == r[:-1]).sum()) if r.size > 1 else 0)
    valid = xp.arange(Sx)[None, :] < (2 * tl + 1)[:, None]
    neg = Tensor._make(xp.full((N, 1), _NEG, dtype=lp.dtype))
    neg2 = Tensor._make(xp.full((N, 2), _NEG, dtype=lp.dtype))
    idx = Tensor._make(ext)

    def emit(t):
        return _ops.gather(_ops.getitem(lp, t), 1, idx)         # (N, Sx): log y_t(l'_s)

    init = xp.full((N, Sx), _NEG)
    init[:, 0] = 0.0
    init[:, 1] = xp.where(tl > 0, 0.0, _NEG)
    alpha = Tensor._make(init.astype(lp.dtype)) + emit(0)
    alpha = _ops.where(valid, alpha, _NEG)
    for t in range(1, T):
        a1 = _ops.cat([neg, _ops.narrow(alpha, 1, 0, Sx - 1)], 1)
        a2 = _ops.where(skip, _ops.cat([neg2, _ops.narrow(alpha, 1, 0, Sx - 2)], 1) if Sx > 2 else alpha, _NEG)
        new = _ops.logsumexp(_ops.stack([alpha, a1, a2]), 0) + emit(t)
        new = _ops.where(valid, new, _NEG)
        alpha = _ops.where((t < il)[:, None], new, alpha)
    last = Tensor._make((2 * tl)[:, None])
    prev = Tensor._make(xp.maximum(2 * tl - 1, 0)[:, None])
    end1 = _ops.gather(alpha, 1, last)
    end2 = _ops.where((tl > 0)[:, None], _ops.gather(alpha, 1, prev), _NEG)
    loss = -_ops.reshape(_ops.logsumexp(_ops.cat([end1, end2], 1), 1), (N,))
    bad = (il < need) | (il == 0)
    if bad.any():
        loss = _ops.where(bad, 0.0 if zero_infinity else xp.inf, loss)
    if reduction == "mean":
        loss = _ops.mean(loss / Tensor._make(xp.maximum(tl, 1).astype(lp.dtype)))
    elif reduction == "sum":
        loss = _ops.sum(loss)
    elif unb:
        loss = _ops.reshape(loss, ())
    return loss


__all__ += ["ctc_loss"]


# ---------------------------------------------------------------- affine_grid, grid_sample
def _base_coords(n, align_corners, dtype):
    if align_corners:
        return xp.linspace(-1.0, 1.0, n, dtype=dtype) if n > 1 else xp.zeros(1, dtype=dtype)
    return ((xp.arange(n, dtype=dtype) * 2 + 1) / n - 1).astype(dtype)


def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of theta @ (x, y, 1) over the output's
    normalised pixel centres (corners with ``align_corners``); linear in theta."""
    op = "affine_grid"
    _need_tensor(theta, "theta", op)
    ac = bool(align_corners)
    size = tuple(int(v) for v in size)
    if len(size) == 4:
        if _shape(theta) != (size[0], 2, 3):
            raise ValueError(f"{op}: expected a batch of 2D affine matrices of shape Nx2x3 for size {size}, got "
                             f"{_shape(theta)}")
        N, _, H, W = size
        xs, ys = _base_coords(W, ac, theta.dtype), _base_coords(H, ac, theta.dtype)
        base = xp.stack(xp.broadcast_arrays(xs[None, :], ys[:, None], xp.ones((H, W), dtype=theta.dtype)), -1)
        out_shape = (N, H, W, 2)
    elif len(size) == 5:
        if _shape(theta) != (size[0], 3, 4):
            raise ValueError(f"{op}: expected a batch of 3D affine matrices of shape Nx3x4 for size {size}, got "
                             f"{_shape(theta)}")
        N, _, D, H, W = size
        xs, ys, zs = (_base_coords(W, ac, theta.dtype), _base_coords(H, ac, theta.dtype),
                      _base_coords(D, ac, theta.dtype))
        base = xp.stack(xp.broadcast_arrays(xs[None, None, :], ys[None, :, None], zs[:, None, None],
                                            xp.ones((D, H, W), dtype=theta.dtype)), -1)
        out_shape = (N, D, H, W, 3)
    else:
        raise NotImplementedError(f"{op}: affine_grid only supports 4D and 5D sizes, got {size}")
    if min(size) <= 0:
        raise ValueError(f"{op}: expected non-zero, positive output size, got {size}")
    b = Tensor._make(base.reshape(-1, base.shape[-1]).astype(theta.dtype))
    grid = _ops.matmul(b, _ops.transpose(theta, 1, 2))          # (N, P, 2|3)
    return _ops.reshape(grid, out_shape)


def _unnormalize(c, n, align_corners):
    return (c + 1) * ((n - 1) / 2) if align_corners else ((c + 1) * n - 1) / 2


def _reflect(c, lo2, hi2):
    if lo2 == hi2:
        return c * 0.0
    mn, span = lo2 / 2, (hi2 - lo2) / 2
    a = _ops.abs(c - mn)
    flips = xp.floor(a._data / span)
    extra = a - Tensor._make((flips * span).astype(a.dtype))
    return _ops.where(flips % 2 == 0, extra + mn, span - extra + mn)


def _source_coord(c, n, padding_mode, align_corners):
    x = _unnormalize(c, n, align_corners)
    if padding_mode == "border":
        x = _ops.clamp(x, 0.0, float(n - 1))
    elif padding_mode == "reflection":
        x = _reflect(x, 0, 2 * (n - 1)) if align_corners else _reflect(x, -1, 2 * n - 1)
        x = _ops.clamp(x, 0.0, float(n - 1))
    return x


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample (N, C, H, W) ``input`` at the normalised (x, y) locations of ``grid`` (N, Ho, Wo, 2):
    -1/+1 are the outer edges of the corner pixels (their centres with ``align_corners``).
    'bilinear' weights the four neighbours (gradient to the input through the gather, to the
    grid through the weights); 'nearest' rounds half to even (no gradient to the grid).
    padding_mode 'zeros', 'border' or 'reflection'.  4-D input only."""
    op = "grid_sample"
    _need_tensor(input, "input", op)
    _need_tensor(grid, "grid", op)
    if mode not in ("bilinear", "nearest"):
        raise NotImplementedError(f"{op}: mode must be 'bilinear' or 'nearest' ('bicubic' is not supported), "
                                  f"got {mode!r}")
    if padding_mode not in ("zeros", "border", "reflection"):
        raise ValueError(f"{op}: padding_mode must be 'zeros', 'border' or 'reflection', got {padding_mode!r}")
    if input.ndim != 4:
        raise NotImplementedError(f"{op}: only 4-D (N, C, H, W) input is supported, got shape {_shape(input)}")
    if grid.ndim != 4 or grid.shape[-1] != 2 or grid.shape[0] != input.shape[0]:
        raise RuntimeError(f"{op}: grid must have shape (N, H_out, W_out, 2) with N = {input.shape[0]}, got "
                           f"{_shape(grid)}")
    ac = bool(align_corners)
    N, C, H, W = _shape(input)
    Ho, Wo = grid.shape[1], grid.shape[2]
    gx = _source_coord(_ops.getitem(grid, (Ellipsis, 0)), W, padding_mode, ac)    # (N, Ho, Wo)
    gy = _source_coord(_ops.getitem(grid, (Ellipsis, 1)), H, padding_mode, ac)
    flat = _ops.reshape(input, (N, C, H * W))

    def tap(ix, iy):
        inside = (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)
        pos = (xp.clip(iy, 0, H - 1) * W + xp.clip(ix, 0, W - 1)).reshape(N, 1, Ho * Wo)
        v = _ops.gather(flat, 2, Tensor._make(xp.broadcast_to(pos, (N, C, Ho * Wo)).copy()))
        v = _ops.reshape(v, (N, C, Ho, Wo))
        return _ops.where(inside[:, None], v, 0.0)

    if mode == "nearest":
        ix = xp.round(gx._data).astype(xp.int64)     # round half to even, as nearbyint
        iy = xp.round(gy._data).astype(xp.int64)
        # the grid gets a zero gradient (as PyTorch) rather than none
        zero = _ops.unsqueeze(Tensor._make(xp.zeros(gx.shape, dtype=gx.dtype)) * (gx + gy), 1)
        return tap(ix, iy) + zero
    x0 = xp.floor(gx._data)
    y0 = xp.floor(gy._data)
    wx1 = _ops.unsqueeze(gx - Tensor._make(x0), 1)
    wy1 = _ops.unsqueeze(gy - Tensor._make(y0), 1)
    wx0, wy0 = 1 - wx1, 1 - wy1
    x0i, y0i = x0.astype(xp.int64), y0.astype(xp.int64)
    return (tap(x0i, y0i) * (wx0 * wy0) + tap(x0i + 1, y0i) * (wx1 * wy0) +
            tap(x0i, y0i + 1) * (wx0 * wy1) + tap(x0i + 1, y0i + 1) * (wx1 * wy1))


__all__ += ["affine_grid", "grid_sample"]


# ---------------------------------------------------------------- softmax family with torch's signatures
def _implicit_dim(name, ndim):
    import warnings
    warnings.warn(f"Implicit dimension choice for {name} has been deprecated. Change the call to include dim=X "
                  "as an argument.", stacklevel=3)
    return 0 if ndim in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    """exp(x_i) / sum_j exp(x_j) along dim (PyTorch's signature: the third positional is _stacklevel)."""
    if dim is None:
        dim = _implicit_dim("softmax", input.ndim)
    return _ops.softmax(input, dim, dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _implicit_dim("log_softmax", input.ndim)
    return _ops.log_softmax(input, dim, dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _implicit_dim("softmin", input.ndim)
    if dtype is not None:
        input = input.to(dtype)
    return _ops.softmax(-input, dim)


__all__ += ["softmax", "log_softmax", "softmin"]


# ---------------------------------------------------------------- inplace=True, as PyTorch
# With inplace=True the result is written back into ``input`` (and ``input`` returned), so code that
# relies on the side effect behaves as in PyTorch; a leaf that requires grad is refused, as there.
_SELU_ALPHA, _SELU_SCALE = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946


def _selu(x):
    return _ops.elu(x, _SELU_ALPHA) * _SELU_SCALE


def _celu(x, alpha=1.0):
    return _ops.elu(x / alpha, 1.0) * alpha if alpha != 1.0 else _ops.elu(x, 1.0)


def _threshold(x, threshold, value):
    return _ops.where(x > threshold, x, value)


def _mish(x):
    return x * _ops.tanh(_ops.softplus(x))


def _dropout(input, p=0.5, training=True, keep_prob=None, generator=None):
    F = _F()
    p = F._keep_to_drop(p, keep_prob, "dropout")
    F._check_p(p, "dropout")
    if not training or p == 0.0:
        return input
    if input._data.dtype.kind != "f":
        F._dropout_dtype(input, p, "dropout")
    from varlens.ops import nn_ops
    return nn_ops.MaskMul.apply(input, F._dropout_mask(_shape(input), p, input.dtype, generator))


selu_ = _inplace(_selu, "selu")
celu_ = _inplace(_celu, "celu")
threshold_ = _inplace(_threshold, "threshold")
relu6_ = _inplace(lambda x: _ops.clamp(x, 0.0, 6.0), "relu6")
silu_ = _inplace(lambda x: _ops.silu(x), "silu")
mish_ = _inplace(_mish, "mish")
hardswish_ = _inplace(lambda x: _hardswish_out(x), "hardswish")
hardsigmoid_ = _inplace(lambda x: _hardsigmoid_out(x), "hardsigmoid")
_dropout_ = _inplace(lambda x, p, training, generator: _dropout(x, p, training, generator=generator), "dropout")


def relu(input, inplace=False):
    return relu_(input) if inplace else _ops.relu(input)


def relu6(input, inplace=False):
    lo, hi = (0, 6) if input.dtype.kind in "iu" else (0.0, 6.0)  # an integer input stays integer (torch)
    return relu6_(input) if inplace else _ops.clamp(input, lo, hi)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return leaky_relu_(input, negative_slope) if inplace else _ops.leaky_relu(input, negative_slope)


def elu(input, alpha=1.0, inplace=False):
    return elu_(input, alpha) if inplace else _ops.elu(input, alpha)


def selu(input, inplace=False):
    return selu_(input) if inplace else _selu(input)


def celu(input, alpha=1.0, inplace=False):
    return celu_(input, alpha) if inplace else _celu(input, alpha)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    if min_val > max_val:
        raise ValueError(f"hardtanh: min_val cannot be greater than max_val, got min_val={min_val}, max_val={max_val}")
    if input.dtype.kind in "iu":     # integer input keeps its dtype (the bounds are truncated), as torch
        min_val, max_val = int(min_val), int(max_val)
    return hardtanh_(input, min_val, max_val) if inplace else _ops.clamp(input, min_val, max_val)


def threshold(input, threshold, value, inplace=False):
    return threshold_(input, threshold, value) if inplace else _threshold(input, threshold, value)


def silu(input, inplace=False):
    return silu_(input) if inplace else _ops.silu(input)


def mish(input, inplace=False):
    return mish_(input) if inplace else _mish(input)


def dropout(input, p=0.5, training=True, inplace=False, *, keep_prob=None, generator=None):
    """Inverted dropout: each element zeroed with probability ``p`` (the drop probability, PyTorch
    and seed 001 §1.1), survivors scaled by 1/(1 - p); ``keep_prob`` is seed 003 §4.1.2's keep
    probability (p = 1 - keep_prob).  ``inplace=True`` writes the result into ``input``."""
    if inplace and training:
        F = _F()
        p = F._keep_to_drop(p, keep_prob, "dropout")
        F._check_p(p, "dropout")
        return _dropout_(input, p, training, generator)
    return _dropout(input, p, training, keep_prob=keep_prob, generator=generator)


_hardswish_out, _hardsigmoid_out = hardswish, hardsigmoid


def hardswish(input, inplace=False):  # noqa: F811
    return hardswish_(input) if inplace else _hardswish_out(input)


def hardsigmoid(input, inplace=False):  # noqa: F811
    return hardsigmoid_(input) if inplace else _hardsigmoid_out(input)


__all__ += ["relu", "relu6", "leaky_relu", "elu", "selu", "celu", "hardtanh", "threshold", "silu", "mish",
            "dropout", "relu6_", "silu_", "mish_", "hardswish_", "hardsigmoid_"]


# ---------------------------------------------------------------- linear_cross_entropy
def linear_cross_entropy(input, linear_weight, target, *, linear_bias=None, weight=None, reduction="mean",
                         ignore_index=None, label_smoothing=0.0, options=None):
    """cross_entropy(input @ linear_weight^T (+ linear_bias), target): PyTorch's reference form (no
    chunking; ``options`` is accepted and ignored).  linear_weight (C, *out_features, in_features)."""
    op = "linear_cross_entropy"
    _need_tensor(input, "input", op)
    _need_tensor(linear_weight, "linear_weight", op)
    if input.ndim not in (1, 2):
        raise RuntimeError(f"{op}: expected input with dimensionality 1 or 2, got {input.ndim}")
    if linear_weight.ndim < 2:
        raise RuntimeError(f"{op}: expected linear_weight with dimensionality at least 2, got {linear_weight.ndim}")
    if input.shape[-1] != linear_weight.shape[-1]:
        raise RuntimeError(f"{op}: expected equal input and linear_weight last dimensions (in_features), got "
                           f"{input.shape[-1]} and {linear_weight.shape[-1]}, respectively")
    C, out = linear_weight.shape[0], _shape(linear_weight)[1:-1]
    if linear_bias is not None and _shape(linear_bias) != (C,) + out:
        raise RuntimeError(f"{op}: expected linear_bias shape {(C,) + out}, got {_shape(linear_bias)}")
    if out and input.ndim == 1:
        raise RuntimeError(f"{op}: K-dimensional loss defined by linear_weight shape {_shape(linear_weight)} "
                           f"requires batched input, (N, {input.shape[-1]}), got unbatched input with shape "
                           f"{_shape(input)}")
    lead = _shape(input)[:-1]
    w2 = _ops.reshape(linear_weight, (-1, linear_weight.shape[-1]))
    logits = _ops.reshape(_ops.matmul(input, _ops.transpose(w2, 0, 1)), lead + (C,) + out)
    if linear_bias is not None:
        logits = logits + linear_bias
    tshape = _shape(target) if isinstance(target, Tensor) else xp.asarray(target).shape
    if tuple(tshape) == lead + (C,) + out and ignore_index is not None:
        raise RuntimeError(f"{op}: ignore_index cannot be specified when target contains probabilities")
    return _F().cross_entropy(logits, target, weight=weight, ignore_index=-100 if ignore_index is None else
                              ignore_index, reduction=reduction, label_smoothing=label_smoothing)


# ---------------------------------------------------------------- fractional max pooling
def _fractional_starts(u, L, Lo, k, dtype):
    """PyTorch's pseudo-random window starts: floor((i + u) alpha) - floor(u alpha), alpha =
    (L - k)/(Lo - 1), the last window ending at the input's end (computed in the input's dtype)."""
    u = u.astype(dtype)
    out = xp.empty(u.shape + (Lo,), dtype=xp.int64)
    if Lo > 1:
        alpha = dtype.type(L - k) / dtype.type(Lo - 1)
        i = xp.arange(Lo - 1, dtype=dtype)
        out[..., :-1] = (((i + u[..., None]) * alpha).astype(xp.int64) - (u * alpha).astype(xp.int64)[..., None])
    out[..., -1] = L - k
    return out


def _fractional_max(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, nd, op,
                    generator):
    _check_nd(input, nd, op)
    k = _ntup(kernel_size, nd, "kernel_size", op, 1)
    unb = input.ndim == nd + 1
    x = _ops.unsqueeze(input, 0) if unb else input
    N, C = x.shape[0], x.shape[1]
    ins = _shape(x)[2:]
    if output_size is None:
        if output_ratio is None:
            raise ValueError(f"{op} requires specifying either an output_size or an output_ratio")
        r = (output_ratio,) * nd if isinstance(output_ratio, numbers.Real) else tuple(output_ratio)
        if len(r) != nd or not all(0 < v < 1 for v in r):
            raise ValueError(f"{op}: output_ratio must be in (0, 1) (one or {nd} numbers), got {output_ratio!r}")
        outs = tuple(int(L * v) for L, v in zip(ins, r))
    else:
        outs = _ntup(output_size, nd, "output_size", op, 1)
    for L, Lo, kk in zip(ins, outs, k):
        if Lo + kk - 1 > L:
            raise RuntimeError(f"{op}: output size {outs} + kernel_size {k} - 1 is too large for the input size {ins}")
    if _random_samples is None:
        u = _gen(generator).random((N, C, nd))
    else:
        u = _random_samples._data if isinstance(_random_samples, Tensor) else xp.asarray(_random_samples)
        if u.shape != (N, C, nd):
            raise RuntimeError(f"{op}: _random_samples must have shape ({N}, {C}, {nd}), got {u.shape}")
    # PyTorch's sample order: (w, h) for 2-D, (t, h, w) for 3-D
    col = (1, 0) if nd == 2 else tuple(range(nd))
    starts = [_fractional_starts(u[..., col[j]], ins[j], outs[j], k[j], input.dtype) for j in range(nd)]
    M = N * C
    xa = x._data.reshape((M,) + ins)
    key = [xp.arange(M).reshape((M,) + (1,) * (2 * nd))]      # result dims (M, O..., K...)
    for j in range(nd):
        shape = [M] + [1] * (2 * nd)
        shape[1 + j], shape[1 + nd + j] = outs[j], k[j]
        pos = starts[j].reshape(M, outs[j])[:, :, None] + xp.arange(k[j])[None, None, :]
        key.append(pos.reshape(shape))
    win = xa[tuple(key)].reshape((M,) + outs + (-1,))
    nan = xp.isnan(win)
    best = xp.argmax(win, axis=-1)
    if nan.any():
        best = xp.where(nan.any(axis=-1), win.shape[-1] - 1 - xp.argmax(nan[..., ::-1], axis=-1), best)
    kidx = xp.unravel_index(best, k)
    flat = xp.zeros(best.shape, dtype=xp.int64)
    for j in range(nd):
        st = starts[j].reshape((M,) + tuple(outs[j] if i == j else 1 for i in range(nd)))
        flat = flat * ins[j] + st + kidx[j]
    idx = flat.reshape((N, C) + outs)
    out = _ops.reshape(_ops.gather(_ops.reshape(x, (N, C, -1)), 2, Tensor._make(idx.reshape(N, C, -1))),
                       (N, C) + outs)
    if unb:
        out, idx = _ops.squeeze(out, 0), idx[0]
    return (out, Tensor._make(idx)) if return_indices else out


def fractional_max_pool2d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None, *, generator=None):
    """Max over k x k windows placed at pseudo-random, increasing offsets (Graham's fractional
    pooling); ``_random_samples`` (N, C, 2) in [0, 1) fixes the offsets (PyTorch's)."""
    return _fractional_max(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 2,
                           "fractional_max_pool2d", generator)


def fractional_max_pool3d(input, kernel_size, output_size=None, output_ratio=None, return_indices=False,
                          _random_samples=None, *, generator=None):
    return _fractional_max(input, kernel_size, output_size, output_ratio, return_indices, _random_samples, 3,
                           "fractional_max_pool3d", generator)


def fractional_max_pool2d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None):
    return fractional_max_pool2d(input, kernel_size, output_size, output_ratio, True, _random_samples)


def fractional_max_pool3d_with_indices(input, kernel_size, output_size=None, output_ratio=None,
                                       return_indices=True, _random_samples=None):
    return fractional_max_pool3d(input, kernel_size, output_size, output_ratio, True, _random_samples)


__all__ += ["linear_cross_entropy", "fractional_max_pool2d", "fractional_max_pool3d",
            "fractional_max_pool2d_with_indices", "fractional_max_pool3d_with_indices"]


# ---------------------------------------------------------------- functional multi-head attention
def _pad_mask_column(m):
    """One more key column, allowed (False / 0.0), for bias_k/bias_v and add_zero_attn."""
    if m is None:
        return None
    a = m._data if isinstance(m, Tensor) else xp.asarray(m)
    z = xp.zeros(a.shape[:-1] + (1,), dtype=a.dtype)
    return xp.concatenate([a, z], -1)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """nn.MultiheadAttention's computation with explicit weights ((L, N, E) or unbatched (L, E)
    inputs): project, split into heads, scaled dot-product attention (seed 003 §7.1), merge,
    project out.  Returns (output, weights or None)."""
    op = "multi_head_attention_forward"
    from varlens.nn.attention import merge_masks
    from varlens.ops.attention import scaled_dot_product_attention
    if static_k is not None or static_v is not None:
        raise NotImplementedError(f"{op}: static_k / static_v are not supported")
    batched = query.ndim == 3
    if not batched:
        query, key, value = (_ops.unsqueeze(t, 1) for t in (query, key, value))
        if key_padding_mask is not None:
            key_padding_mask = _ops.unsqueeze(key_padding_mask, 0) if isinstance(key_padding_mask, Tensor) else \
                xp.asarray(key_padding_mask)[None]
    L, N, E = _shape(query)
    if E != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {E}")
    if E % num_heads:
        raise AssertionError(f"embed_dim {E} not divisible by num_heads {num_heads}")
    H, Dh = num_heads, E // num_heads
    bq = bk = bv = None
    if in_proj_bias is not None:
        bq, bk, bv = in_proj_bias[:E], in_proj_bias[E:2 * E], in_proj_bias[2 * E:]
    if use_separate_proj_weight:
        if q_proj_weight is None or k_proj_weight is None or v_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is True but q_proj_weight, k_proj_weight or "
                                 "v_proj_weight is None")
        wq, wk, wv = q_proj_weight, k_proj_weight, v_proj_weight
    else:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        wq, wk, wv = in_proj_weight[:E], in_proj_weight[E:2 * E], in_proj_weight[2 * E:]
    F = _F()
    q, k, v = F.linear(query, wq, bq), F.linear(key, wk, bk), F.linear(value, wv, bv)
    if is_causal and attn_mask is None:
        attn_mask = ~xp.tril(xp.ones((L, key.shape[0]), dtype=bool))
    if bias_k is not None and bias_v is not None:
        k = _ops.cat([k, _ops.expand(_ops.reshape(bias_k, (1, 1, E)), (1, N, E))], 0)
        v = _ops.cat([v, _ops.expand(_ops.reshape(bias_v, (1, 1, E)), (1, N, E))], 0)
        attn_mask, key_padding_mask = _pad_mask_column(attn_mask), _pad_mask_column(key_padding_mask)
    elif (bias_k is None) != (bias_v is None):
        raise AssertionError("bias_k and bias_v must both be given or both be None")
    S = k.shape[0]

    def heads(t, T):  # (T, N, E) -> (N, H, T, Dh)
        return _ops.permute(_ops.reshape(t, (T, N, H, Dh)), (1, 2, 0, 3))
    q, k, v = heads(q, L), heads(k, S), heads(v, S)
    if add_zero_attn:
        z = Tensor._make(xp.zeros((N, H, 1, Dh), dtype=q.dtype))
        k, v = _ops.cat([k, z], 2), _ops.cat([v, z], 2)
        attn_mask, key_padding_mask = _pad_mask_column(attn_mask), _pad_mask_column(key_padding_mask)
        S += 1
    mask = merge_masks(attn_mask, key_padding_mask, N, H, L, S, query.dtype)
    res = scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else Tensor._make(mask),
                                       dropout_p=dropout_p if training else 0.0, return_weights=need_weights)
    out, w = res if need_weights else (res, None)
    out = F.linear(_ops.reshape(_ops.permute(out, (2, 0, 1, 3)), (L, N, E)), out_proj_weight, out_proj_bias)
    if w is not None and average_attn_weights:
        w = _ops.mean(w, 1)
    if not batched:
        out = _ops.squeeze(out, 1)
        w = _ops.squeeze(w, 0) if w is not None else None
    return out, w


__all__ += ["multi_head_attention_forward"]


def conv_tbc(input, weight, bias, pad=0):
    """1-D convolution in time-batch-channel layout: input (T, B, C_in), weight (k, C_in, C_out),
    bias (C_out,), ``pad`` zeros on both ends of time; output (T + 2 pad - k + 1, B, C_out)."""
    op = "conv_tbc"
    _need_tensor(input, "input", op)
    _need_tensor(weight, "weight", op)
    if input.ndim != 3 or weight.ndim != 3 or input.shape[2] != weight.shape[1]:
        raise RuntimeError(f"{op}: expected input (T, B, C_in) and weight (k, C_in, C_out) with matching C_in, got "
                           f"{_shape(input)} and {_shape(weight)}")
    x = _ops.permute(input, (1, 2, 0))
    w = _ops.permute(weight, (2, 1, 0))
    return _ops.permute(_F().conv1d(x, w, bias, 1, int(pad)), (2, 0, 1))


__all__ += ["conv_tbc"]
