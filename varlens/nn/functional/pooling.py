"""Pooling: max / average / LP / adaptive / fractional pooling in 1-3 dimensions and max_unpool.
"""
from __future__ import annotations

import math
import numbers

from varlens import ops as _ops
from varlens.core.array import xp      # the host library: geometry and index arithmetic
from varlens.core import array as B
from varlens.core.tensor import Tensor
from varlens.nn.functional._common import _check_nd, _int_pair, _ntup, _one, _shape
from varlens.nn.functional.conv import _window_key
from varlens.nn.functional.vision import _adaptive_matrix, _apply_matrices, _pad_nd
from varlens.ops.nn.pool import _PadError, int_avg_pool
from varlens.random import generator_for
from varlens.ops.nn.pool import adaptive_avg_pool2d, avg_pool2d, max_pool2d  # noqa: F401


def max_pool1d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    op = "max_pool1d"
    _check_nd(input, 1, op)
    k = _one(kernel_size, "kernel_size", op, 1)
    s = k if stride is None or stride == () else _one(stride, "stride", op, 1)
    p = _one(padding, "padding", op, 0)
    d = _one(dilation, "dilation", op, 1)
    x = _ops.unsqueeze(input, -2)
    res = max_pool2d(x, (1, k), (1, s), (0, p), (1, d), ceil_mode, return_indices)
    if return_indices:
        return _ops.squeeze(res[0], -2), _ops.squeeze(res[1], -2)
    return _ops.squeeze(res, -2)


def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False, return_indices=False):
    """Max over windows of the last axis of (N, C, L) or (C, L); stride defaults to kernel_size."""
    return max_pool1d_with_indices(input, kernel_size, stride, padding, dilation, ceil_mode, return_indices)


def max_pool2d_with_indices(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                            return_indices=True):
    return max_pool2d(input, kernel_size, stride, padding, dilation, ceil_mode, True)


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    op = "avg_pool1d"
    _check_nd(input, 1, op)
    k = _one(kernel_size, "kernel_size", op, 1)
    s = k if stride is None or stride == () else _one(stride, "stride", op, 1)
    p = _one(padding, "padding", op, 0)
    x = _ops.unsqueeze(input, -2)
    return _ops.squeeze(avg_pool2d(x, (1, k), (1, s), (0, p), ceil_mode, count_include_pad), -2)


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
    lib = B.namespace(x)      # the input's library; on the device no value is read on the host
    M = x.shape[0]
    flat = xp.arange(int(xp.prod(ins))).reshape(ins)
    idx = lib.empty((M,) + outs, dtype=xp.int64)
    grids = [_bins(L, Lo) for L, Lo in zip(ins, outs)]
    for cell in xp.ndindex(*outs):
        sl = tuple(slice(*grids[j][c]) for j, c in enumerate(cell))
        w = x[(slice(None),) + sl].reshape(M, -1)
        pos = B.to_namespace(flat[sl].reshape(-1), lib)
        nan = lib.isnan(w)
        win = lib.argmax(w, axis=1)
        if lib is not xp or nan.any():
            last_nan = w.shape[1] - 1 - lib.argmax(nan[:, ::-1], axis=1)
            win = lib.where(nan.any(axis=1), last_nan, win)
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
    k = _int_pair(kernel_size, "kernel_size", "lp_pool2d", 1)
    _check_nd(input, 2, "lp_pool2d")
    out = avg_pool2d(input ** norm_type, k, stride, 0, ceil_mode)
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
    lib = B.namespace(idx)
    if lib is xp and idx.size and (idx.min() < 0 or idx.max() >= n):   # (a host check: CPU only)
        raise RuntimeError(f"{op}: found an invalid max index {int(idx.max() if idx.max() >= n else idx.min())} "
                           f"for an output of size {outs}")
    zeros = Tensor._make(lib.zeros(lead + (n,), dtype=input.dtype))
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
    return _max_unpool(input, indices, kernel_size, stride, padding, output_size, 2, "max_unpool2d", _int_pair)


def _pool_geometry(ins, k, s, p, d, ceil_mode, op):
    outs = []
    for L, ki, si, pi, di in zip(ins, k, s, p, d):
        if pi > ki // 2:
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
    lib = B.namespace(x)      # the input's library; on the device no value is read on the host
    xpd = lib.pad(x, ((0, 0),) + pads, constant_values=-xp.inf)
    win = xpd[_window_key(k, d, s, outs, lead=1, lib=lib)].reshape((x.shape[0],) + outs + (-1,))
    nan = lib.isnan(win)
    best = lib.argmax(win, axis=-1)
    if lib is not xp or nan.any():      # PyTorch: a NaN wins, the last one in the window
        last = win.shape[-1] - 1 - lib.argmax(nan[..., ::-1], axis=-1)
        best = lib.where(nan.any(axis=-1), last, best)
    kidx = lib.unravel_index(best, k)
    flat = lib.zeros(best.shape, dtype=xp.int64)
    for j in range(nd):
        o = lib.arange(outs[j]).reshape((1,) + tuple(outs[j] if i == j else 1 for i in range(nd)))
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
        return int_avg_pool(input, op, lambda t: avg_pool3d(t, kernel_size, stride, padding, ceil_mode,
                                                           count_include_pad, divisor_override))
    k, s, p, _ = _pool_args_nd(kernel_size, stride, padding, 1, nd, op)
    ins = _shape(input)[-nd:]
    outs, pads = _pool_geometry(ins, k, s, p, (1,) * nd, ceil_mode, op)
    lead = _shape(input)[:-nd]
    x = _ops.reshape(input, (-1,) + ins)
    xpd = _pad_nd(x, pads, 0.0)
    win = _ops.getitem(xpd, _window_key(k, (1,) * nd, s, outs, lead=1, lib=B.namespace(xpd._data)))
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
    out = tot / Tensor._make(B.to_namespace(div.astype(input.dtype), B.namespace(tot._data)))
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


# ---------------------------------------------------------------- fractional max pooling
def _fractional_starts(lib, u, L, Lo, k, dtype):
    """PyTorch's pseudo-random window starts: floor((i + u) alpha) - floor(u alpha), alpha =
    (L - k)/(Lo - 1), the last window ending at the input's end (computed in the input's dtype,
    with u's array library ``lib``)."""
    u = u.astype(dtype)
    out = lib.empty(u.shape + (Lo,), dtype=xp.int64)
    if Lo > 1:
        alpha = dtype.type(L - k) / dtype.type(Lo - 1)
        i = lib.arange(Lo - 1, dtype=dtype)
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
    lib = B.namespace(x._data)   # the input's library: the samples are drawn on its device
    if _random_samples is None:
        u = generator_for(lib, generator).rng.random((N, C, nd))
    else:
        u = _random_samples._data if isinstance(_random_samples, Tensor) else xp.asarray(_random_samples)
        u = B.to_namespace(u, lib)
        if u.shape != (N, C, nd):
            raise RuntimeError(f"{op}: _random_samples must have shape ({N}, {C}, {nd}), got {u.shape}")
    # PyTorch's sample order: (w, h) for 2-D, (t, h, w) for 3-D
    col = (1, 0) if nd == 2 else tuple(range(nd))
    starts = [_fractional_starts(lib, u[..., col[j]], ins[j], outs[j], k[j], input.dtype) for j in range(nd)]
    M = N * C
    xa = x._data.reshape((M,) + ins)
    key = [lib.arange(M).reshape((M,) + (1,) * (2 * nd))]      # result dims (M, O..., K...)
    for j in range(nd):
        shape = [M] + [1] * (2 * nd)
        shape[1 + j], shape[1 + nd + j] = outs[j], k[j]
        pos = starts[j].reshape(M, outs[j])[:, :, None] + lib.arange(k[j])[None, None, :]
        key.append(pos.reshape(shape))
    win = xa[tuple(key)].reshape((M,) + outs + (-1,))
    nan = lib.isnan(win)
    best = lib.argmax(win, axis=-1)
    if lib is not xp or nan.any():      # (on the device without asking the host)
        best = lib.where(nan.any(axis=-1), win.shape[-1] - 1 - lib.argmax(nan[..., ::-1], axis=-1), best)
    kidx = lib.unravel_index(best, k)
    flat = lib.zeros(best.shape, dtype=xp.int64)
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
