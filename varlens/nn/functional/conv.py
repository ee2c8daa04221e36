"""Convolutions: conv1d/2d/3d, conv_transpose1d/2d/3d, conv_tbc.
"""
from __future__ import annotations

import math
import numbers

from varlens import ops as _ops
from varlens.core.array import xp
from varlens.core import array as B
from varlens.core.tensor import Tensor
from varlens.nn.functional._common import _tensor_args, _ntup, _one, _require_tensor, _shape
from varlens.nn.functional.vision import _pad_nd
from varlens.ops.nn.conv import conv1d, conv2d, conv_transpose2d  # noqa: F401


def _window_key(k, d, s, outs, lead=2, lib=None):
    """Index arrays picking x[..., o_j s_j + i_j d_j, ...] with result dims (O..., K...); built on
    the host and copied to ``lib``'s device when given (the array library of the indexed data)."""
    n = len(k)
    key = [slice(None)] * lead
    for j in range(n):
        idx = (xp.arange(outs[j]) * s[j])[:, None] + (xp.arange(k[j]) * d[j])[None, :]   # (O_j, k_j)
        shape = [1] * (2 * n)
        shape[j], shape[n + j] = outs[j], k[j]
        key.append(idx.reshape(shape) if lib is None else B.to_namespace(idx.reshape(shape), lib))
    return tuple(key)


def _conv_nd(input, weight, bias, stride, padding, dilation, groups, nd, op):
    _require_tensor(input, "input", op)
    _require_tensor(weight, "weight", op)
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
    cols = _ops.getitem(xpad, _window_key(k, d, s, outs, lib=B.namespace(xpad._data)))            # (N, C, O..., K...)
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
    _require_tensor(input, "input", op)
    _require_tensor(weight, "weight", op)
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
    y = _ops.index_scatter(contrib, _window_key(k, d, s, ins, lib=B.namespace(contrib._data)), (N, O) + full)
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
    _require_tensor(input, "input", op)
    if input.ndim not in (2, 3):
        raise RuntimeError(f"{op}: expected a 2-D (unbatched) or 3-D (batched) input, got shape {_shape(input)}")
    if not isinstance(weight, Tensor) or weight.ndim != 3:
        raise RuntimeError(f"{op}: weight must be a 3-D tensor (in, out/groups, k), got "
                           f"{_shape(weight) if isinstance(weight, Tensor) else type(weight).__name__}")
    s, p, a, d = (_one(v, n, op, m) for v, n, m in ((stride, "stride", 1), (padding, "padding", 0),
                                                    (output_padding, "output_padding", 0), (dilation, "dilation", 1)))
    y = conv_transpose2d(_ops.unsqueeze(input, -2), _ops.unsqueeze(weight, 2), bias, (1, s), (0, p), (0, a),
                              groups, (1, d))
    return _ops.squeeze(y, -2)


@_tensor_args("input", "weight", "bias")
def conv_tbc(input, weight, bias, pad=0):
    """1-D convolution in time-batch-channel layout: input (T, B, C_in), weight (k, C_in, C_out),
    bias (C_out,), ``pad`` zeros on both ends of time; output (T + 2 pad - k + 1, B, C_out)."""
    op = "conv_tbc"
    _require_tensor(input, "input", op)
    _require_tensor(weight, "weight", op)
    if input.ndim != 3 or weight.ndim != 3 or input.shape[2] != weight.shape[1]:
        raise RuntimeError(f"{op}: expected input (T, B, C_in) and weight (k, C_in, C_out) with matching C_in, got "
                           f"{_shape(input)} and {_shape(weight)}")
    x = _ops.permute(input, (1, 2, 0))
    w = _ops.permute(weight, (2, 1, 0))
    return _ops.permute(conv1d(x, w, bias, 1, int(pad)), (2, 0, 1))
