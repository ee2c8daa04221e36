"""Vision functions: pad, interpolate / upsample, pixel_(un)shuffle, channel_shuffle, fold / unfold,
affine_grid, grid_sample.
"""
from __future__ import annotations

import math
import numbers

from varlens import ops as _ops
from varlens.core.array import xp
from varlens.core import array as B
from varlens.core.tensor import Tensor
from varlens.nn.functional._errors import ArgNotImplementedError, ArgRuntimeError
from varlens.nn.functional._common import _check_int, _int_pair, _require_tensor, _shape
from varlens.ops.nn.upsample import interpolate as _nearest2d
from varlens.ops.nn import pad as _nn_pad_mod


def _on_device_of(a, x):
    """The host array ``a`` (indices or weights built from the geometry) on tensor x's device:
    itself on the CPU, a copy to the device (no synchronisation) on CUDA."""
    return B.to_namespace(a, B.namespace(x._data))


def pad(input, pad, mode="constant", value=None):
    """Pad the last len(pad)//2 axes; ``pad`` = (left_last, right_last, left_prev, right_prev, ...).
    Modes: 'constant' (negative pads crop), 'reflect', 'replicate', 'circular'."""
    if len(pad) % 2:
        raise ArgRuntimeError(f"Padding length must be divisible by 2 (pad: the padding tuple must have an even "
                              f"length, got {pad!r})")
    k = len(pad) // 2
    if k > input.ndim:
        raise ArgRuntimeError(f"Padding length should be less than or equal to two times the input dimension (pad: "
                              f"padding {pad!r} covers {k} dimensions but the input has {input.ndim})")
    pads = [(0, 0)] * input.ndim
    for i in range(k):
        pads[input.ndim - 1 - i] = (int(pad[2 * i]), int(pad[2 * i + 1]))
    if mode == "constant":
        return _nn_pad_mod.ConstantPad.apply(input, tuple(pads), 0.0 if value is None else value)
    npmode = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}.get(mode)
    if npmode is None:
        raise ArgNotImplementedError(f"Unrecognised padding mode {mode} (pad: mode must be 'constant', 'reflect', "
                                     f"'replicate' or 'circular', got {mode!r})")
    out = input
    for d, (lo, hi) in enumerate(pads):
        if lo == 0 and hi == 0:
            continue
        n = input.shape[d]
        if mode == "reflect" and (lo >= n or hi >= n):
            raise ArgRuntimeError(f"pad: reflect padding ({lo}, {hi}) must be smaller than the dimension size {n} "
                                  "(PyTorch raises RuntimeError)")
        idx = xp.pad(xp.arange(n), (lo, hi), mode=npmode)
        out = _ops.index_select(out, d, Tensor._make(_on_device_of(idx, input)))
    return out


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


def _block_args(kernel_size, dilation, padding, stride, op):
    """fold/unfold's kernel_size, dilation, padding, stride as pairs (padding >= 0, the rest >= 1)."""
    return (_int_pair(kernel_size, "kernel_size", op, 1), _int_pair(dilation, "dilation", op, 1),
            _int_pair(padding, "padding", op, 0), _int_pair(stride, "stride", op, 1))


def _blocks(H, W, k, d, p, s, op, x):
    Ho = (H + 2 * p[0] - d[0] * (k[0] - 1) - 1) // s[0] + 1
    Wo = (W + 2 * p[1] - d[1] * (k[1] - 1) - 1) // s[1] + 1
    if Ho < 1 or Wo < 1:
        raise RuntimeError(f"{op}: kernel_size={k}, dilation={d}, padding={p}, stride={s} give "
                           f"{Ho} x {Wo} blocks for a spatial size of ({H}, {W}); it is too small")
    ih = (xp.arange(k[0])[:, None] * d[0] + xp.arange(Ho)[None, :] * s[0])   # (kh, Ho)
    iw = (xp.arange(k[1])[:, None] * d[1] + xp.arange(Wo)[None, :] * s[1])   # (kw, Wo)
    key = (slice(None), slice(None), _on_device_of(ih[:, None, :, None], x), _on_device_of(iw[None, :, None, :], x))
    return Ho, Wo, key


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """im2col: (N, C, H, W) -> (N, C kh kw, L), column l holding the l-th sliding block
    (row-major over block positions), rows ordered (c, i, j)."""
    op = "unfold"
    _require_tensor(input, "input", op)
    if input.ndim not in (3, 4):
        raise RuntimeError(f"{op}: expected a 3-D (unbatched) or 4-D (batched) input, got shape {_shape(input)}")
    k, d, p, s = _block_args(kernel_size, dilation, padding, stride, op)
    unb = input.ndim == 3
    x = _ops.unsqueeze(input, 0) if unb else input
    N, C, H, W = _shape(x)
    Ho, Wo, key = _blocks(H, W, k, d, p, s, op, x)
    if p != (0, 0):
        x = pad(x, (p[1], p[1], p[0], p[0]))
    cols = _ops.reshape(_ops.getitem(x, key), (N, C * k[0] * k[1], Ho * Wo))
    return _ops.squeeze(cols, 0) if unb else cols


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """col2im, the adjoint of unfold: (N, C kh kw, L) -> (N, C, H, W), overlapping block
    entries summed."""
    op = "fold"
    _require_tensor(input, "input", op)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a 2-D (unbatched) or 3-D (batched) input, got shape {_shape(input)}")
    o = _int_pair(output_size, "output_size", op, 1)
    k, d, p, s = _block_args(kernel_size, dilation, padding, stride, op)
    unb = input.ndim == 2
    x = _ops.unsqueeze(input, 0) if unb else input
    N, CK, L = _shape(x)
    if CK % (k[0] * k[1]):
        raise RuntimeError(f"{op}: expected size of input's dimension 1 to be divisible by the product of "
                           f"kernel_size, but got input.size(1)={CK} and kernel_size={k}")
    Ho, Wo, key = _blocks(o[0], o[1], k, d, p, s, op, x)
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
        y = _ops.matmul(xm, Tensor._make(_on_device_of(xp.ascontiguousarray(A.T).astype(x.dtype), x)))
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
    _require_tensor(input, "input", op)
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
        return _nearest2d(input, size, scale_factor, mode, None, recompute_scale_factor)
    if mode in ("nearest", "nearest-exact"):
        out = input
        for j, (L, Lo, sc) in enumerate(zip(ins, outs, scales)):
            idx = _nearest_index(L, Lo, sc, mode == "nearest-exact")
            out = _ops.index_select(out, 2 + j, Tensor._make(_on_device_of(idx, input)))
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


def _pad_nd(x, pads, value):
    """Constant padding of the last len(pads) axes by (before, after) pairs."""
    flat = []
    for lo, hi in reversed(pads):
        flat += [lo, hi]
    if not any(flat):
        return x
    return pad(x, tuple(flat), "constant", value)


# ---------------------------------------------------------------- affine_grid, grid_sample
def _base_coords(n, align_corners, dtype):
    if align_corners:
        return xp.linspace(-1.0, 1.0, n, dtype=dtype) if n > 1 else xp.zeros(1, dtype=dtype)
    return ((xp.arange(n, dtype=dtype) * 2 + 1) / n - 1).astype(dtype)


def affine_grid(theta, size, align_corners=None):
    """Sampling grid (N, H, W, 2) (or (N, D, H, W, 3)) of theta @ (x, y, 1) over the output's
    normalised pixel centres (corners with ``align_corners``); linear in theta."""
    op = "affine_grid"
    _require_tensor(theta, "theta", op)
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
    b = Tensor._make(_on_device_of(base.reshape(-1, base.shape[-1]).astype(theta.dtype), theta))
    grid = _ops.matmul(b, _ops.transpose(theta, 1, 2))          # (N, P, 2|3)
    return _ops.reshape(grid, out_shape)


def _unnormalize(c, n, align_corners):
    return (c + 1) * ((n - 1) / 2) if align_corners else ((c + 1) * n - 1) / 2


def _reflect(c, lo2, hi2):
    if lo2 == hi2:
        return c * 0.0
    mn, span = lo2 / 2, (hi2 - lo2) / 2
    a = _ops.abs(c - mn)
    flips = B.namespace(a._data).floor(a._data / span)
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


def _cubic_weights(t, a=-0.75):
    """The cubic convolution weights of the neighbours at -1, 0, 1, 2 for a fraction t in [0, 1)
    (Keys' kernel: 1 - (a+3)s^2 + (a+2)s^3 for |s| <= 1, a(|s|^3 - 5s^2 + 8|s| - 4) for
    1 < |s| < 2, with a = -0.75 as PyTorch); polynomials in t, so t gets their derivative."""
    def near(s):
        return ((a + 2) * s - (a + 3)) * s * s + 1

    def far(s):
        return ((a * s - 5 * a) * s + 8 * a) * s - 4 * a
    return [far(t + 1), near(t), near(1 - t), far(2 - t)]


def _padded_index(i, n, padding_mode, align_corners, lib):
    """Integer neighbour positions ``i`` along an axis of size ``n`` after grid_sample's padding:
    clamped ('border'), mirrored then clamped ('reflection'), or left outside ('zeros', where the
    tap reads 0)."""
    if padding_mode == "zeros":
        return i
    if padding_mode == "reflection":
        lo2, hi2 = (0, 2 * (n - 1)) if align_corners else (-1, 2 * n - 1)
        if lo2 == hi2:          # one pixel with align_corners: every position reflects onto it
            return lib.zeros_like(i)
        mn, span = lo2 / 2, (hi2 - lo2) / 2
        a = lib.abs(i - mn)
        flips = lib.floor(a / span)
        extra = a - flips * span
        i = lib.where(flips % 2 == 0, extra + mn, span - extra + mn)
    return lib.clip(i, 0, n - 1).astype(xp.int64)


def grid_sample(input, grid, mode="bilinear", padding_mode="zeros", align_corners=None):
    """Sample (N, C, H, W) ``input`` at the normalised (x, y) locations of ``grid`` (N, Ho, Wo, 2):
    -1/+1 are the outer edges of the corner pixels (their centres with ``align_corners``).
    'bilinear' weights the four neighbours (gradient to the input through the gather, to the
    grid through the weights); 'nearest' rounds half to even (no gradient to the grid);
    'bicubic' weights the 4 x 4 neighbours with the cubic convolution kernel (a = -0.75), the
    padding applied to each neighbour's position, as PyTorch.  padding_mode 'zeros', 'border' or
    'reflection'.  4-D input only."""
    op = "grid_sample"
    _require_tensor(input, "input", op)
    _require_tensor(grid, "grid", op)
    if mode not in ("bilinear", "nearest", "bicubic"):
        raise ValueError(f"{op}: mode must be 'bilinear', 'nearest' or 'bicubic', got {mode!r}")
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
    lib = B.namespace(grid._data)   # the grid's library: indices and weights stay on its device
    flat = _ops.reshape(input, (N, C, H * W))

    def tap(ix, iy):
        inside = (ix >= 0) & (ix < W) & (iy >= 0) & (iy < H)
        pos = (lib.clip(iy, 0, H - 1) * W + lib.clip(ix, 0, W - 1)).reshape(N, 1, Ho * Wo)
        v = _ops.gather(flat, 2, Tensor._make(lib.broadcast_to(pos, (N, C, Ho * Wo)).copy()))
        v = _ops.reshape(v, (N, C, Ho, Wo))
        return _ops.where(inside[:, None], v, 0.0)

    if mode == "bicubic":
        # the unpadded source position; padding moves each of the 16 integer neighbours instead
        gx = _unnormalize(_ops.getitem(grid, (Ellipsis, 0)), W, ac)
        gy = _unnormalize(_ops.getitem(grid, (Ellipsis, 1)), H, ac)
        x0, y0 = lib.floor(gx._data), lib.floor(gy._data)
        wx = _cubic_weights(_ops.unsqueeze(gx - Tensor._make(x0), 1))
        wy = _cubic_weights(_ops.unsqueeze(gy - Tensor._make(y0), 1))
        x0i, y0i = x0.astype(xp.int64), y0.astype(xp.int64)
        xs = [_padded_index(x0i + j, W, padding_mode, ac, lib) for j in (-1, 0, 1, 2)]
        ys = [_padded_index(y0i + i, H, padding_mode, ac, lib) for i in (-1, 0, 1, 2)]
        out = None
        for i in range(4):
            row = tap(xs[0], ys[i]) * wx[0]
            for j in range(1, 4):
                row = row + tap(xs[j], ys[i]) * wx[j]
            out = row * wy[i] if out is None else out + row * wy[i]
        return out
    gx = _source_coord(_ops.getitem(grid, (Ellipsis, 0)), W, padding_mode, ac)    # (N, Ho, Wo)
    gy = _source_coord(_ops.getitem(grid, (Ellipsis, 1)), H, padding_mode, ac)
    if mode == "nearest":
        ix = lib.round(gx._data).astype(xp.int64)     # round half to even, as nearbyint
        iy = lib.round(gy._data).astype(xp.int64)
        # the grid gets a zero gradient (as PyTorch) rather than none
        zero = _ops.unsqueeze(Tensor._make(lib.zeros(gx.shape, dtype=gx.dtype)) * (gx + gy), 1)
        return tap(ix, iy) + zero
    x0 = lib.floor(gx._data)
    y0 = lib.floor(gy._data)
    wx1 = _ops.unsqueeze(gx - Tensor._make(x0), 1)
    wy1 = _ops.unsqueeze(gy - Tensor._make(y0), 1)
    wx0, wy0 = 1 - wx1, 1 - wy1
    x0i, y0i = x0.astype(xp.int64), y0.astype(xp.int64)
    return (tap(x0i, y0i) * (wx0 * wy0) + tap(x0i + 1, y0i) * (wx1 * wy0) +
            tap(x0i, y0i + 1) * (wx0 * wy1) + tap(x0i + 1, y0i + 1) * (wx1 * wy1))
