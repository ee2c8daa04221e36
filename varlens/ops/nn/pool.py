"""Pooling: max pooling (the gradient goes to the first maximum of each window, as PyTorch),
average pooling (spread evenly over the window, count_include_pad as PyTorch), adaptive average
pooling (a pooling matrix per axis)."""
from __future__ import annotations
from varlens.core import primitives as D
from varlens.core.function import Function
from varlens.ops.nn.conv import _batched
from varlens.ops.nn.conv import _check_input
from varlens.ops.nn.conv import _pad
from varlens.ops.nn.conv import _tuple
from varlens.ops.nn.conv import _window
from varlens.ops.linalg import matmul
from varlens.ops.reduce import mean
from varlens.ops.shape import squeeze
from varlens.core.array import xp
from varlens.core import array as B
from varlens.core.tensor import Tensor
from varlens.ops.pointwise import torch_dtype_name
from varlens.ops.kernels import pooling as _KPOOL
from varlens.ops.kernels import numba_module as _numba_on


_host = xp   # the host array library (NumPy); ops compute with their inputs' library, self.xp


def _is_tensor(a):
    return hasattr(a, "_data")


# ----------------------------------------------------------------------------- pooling
def _pool_len(L, k, s, p, d, ceil_mode):
    num = L + 2 * p - d * (k - 1) - 1
    out = (num + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= L + p:
        out -= 1  # the last window must start inside the input or its left padding
    return out


def _pool_geometry(x, k, s, p, d, ceil_mode, op):
    N, C, H, W = x.shape
    Ho = _pool_len(H, k[0], s[0], p[0], d[0], ceil_mode)
    Wo = _pool_len(W, k[1], s[1], p[1], d[1], ceil_mode)
    if Ho < 1 or Wo < 1:
        raise RuntimeError(f"{op}: input of spatial size ({H}, {W}) is too small for kernel_size {k} "
                           f"with padding {p} and dilation {d} (output would be ({Ho}, {Wo}))")
    # right/bottom padding large enough for every window (ceil_mode may need more than p)
    pb = max(0, (Ho - 1) * s[0] + d[0] * (k[0] - 1) + 1 - H - p[0])
    pr = max(0, (Wo - 1) * s[1] + d[1] * (k[1] - 1) + 1 - W - p[1])
    return Ho, Wo, (p[0], pb, p[1], pr)


def _scatter_windows(xp, g, parts, pshape, pads, in_shape):
    """sum_k (part_k placed at window slice k) then cropped to the input: arrays (of the
    library ``xp``) or Tensors."""
    pt, _, pl, _ = pads
    H, W = in_shape[2], in_shape[3]
    if _is_tensor(g):
        acc = None
        for key, val in parts:
            t = D.index_scatter(val, (slice(None), slice(None)) + key, pshape)
            acc = t if acc is None else acc + t
        return acc[:, :, pt:pt + H, pl:pl + W]
    out = xp.zeros(pshape, dtype=g.dtype)
    for key, val in parts:
        out[(slice(None), slice(None)) + key] += val
    return out[:, :, pt:pt + H, pl:pl + W]


def _first_max_index(xp, vs, m, floating):
    """Index k of the first window entry vs[k] equal to the window max m, as PyTorch routes
    max-pool gradients; int8 (int16 if K > 127).  In a window holding NaN it is the LAST NaN:
    PyTorch's CPU scan takes an entry when it is greater than the best so far or is NaN.
    On the device that scan always runs (asking whether a NaN is present would read a device
    value on the host); it gives the first maximum when there is none."""
    K = len(vs)
    dt = xp.int8 if K <= 127 else xp.int16
    if floating and (xp is not _host or bool(xp.isnan(m).any())):
        idx = xp.zeros(m.shape, dtype=dt)
        best = vs[0].copy()
        for k in range(1, K):
            upd = (vs[k] > best) | xp.isnan(vs[k])
            xp.copyto(best, vs[k], where=upd)
            xp.copyto(idx, k, where=upd)
        return idx
    # count the leading entries that differ from the max
    idx = (vs[0] != m).astype(dt)
    for k in range(1, K - 1):
        idx += (idx == k) & (vs[k] != m)
    return idx


def _first_max_mask(vs, m):
    """One boolean plane per window offset, True where that offset holds the first maximum
    of its window; None when some window has no winner (it holds a NaN).  Host arrays only."""
    K = len(vs)
    mask = xp.empty((K,) + m.shape, dtype=bool)
    for k, v in enumerate(vs):
        xp.equal(v, m, out=mask[k])
    taken = mask[0].copy()
    for k in range(1, K):
        xp.greater(mask[k], taken, out=mask[k])  # a winner only if no earlier entry won
        xp.logical_or(taken, mask[k], out=taken)
    return mask if taken.all() else None


class MaxPool2dFn(Function):
    """Max over each window (padding counts as -inf).

    Backward (seed 003 §5.2.4, Example 5.2.5): max is piecewise the identity on the
    winning entry, so dL/dx routes each output's cotangent to the position that won
    its window (the first maximum in row-major order, as PyTorch) and adds where
    overlapping windows share a winner.  It is linear in g with constant routing,
    so the same code, run on Tensors, is its own second derivative.

    float32 host arrays run ops/kernels/pooling.py's compiled passes (winners kept as flat
    positions; a Tensor cotangent, for second derivatives, rebuilds the routing from them).
    Otherwise, windows that tile the input (kernel == stride, no padding or dilation: the usual
    2x2 pool) take a fast path: forward is only the max; backward finds the first
    winner of every window with one comparison per window offset and writes
    g * winner straight into each offset's strided slice of dL/dx (no zero fill, no adds).
    """

    def forward(self, x, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), dilation=(1, 1),
                ceil_mode=False):
        xp = self.xp
        kh, kw = kernel_size
        Ho, Wo, pads = _pool_geometry(x, kernel_size, stride, padding, dilation, ceil_mode, "max_pool2d")
        self.idx = self.kidx = None
        if x.__class__ is _host.ndarray and x.dtype == _host.float32 and _numba_on():
            # one compiled pass: the maxima and each winner's flat position (ops/kernels/pooling.py)
            x = _host.ascontiguousarray(x)
            N, C, H, W = x.shape
            self.geom = (x.shape, (N, C, H + pads[0] + pads[1], W + pads[2] + pads[3]), kernel_size, stride,
                         dilation, pads, Ho, Wo)
            self.tiled = False
            m, self.kidx = _KPOOL.max_pool2d(x, kernel_size, stride, pads, dilation, Ho, Wo)
            return m
        if kernel_size == stride and dilation == (1, 1) and pads == (0, 0, 0, 0):
            self.geom = (x.shape, x.shape, kernel_size, stride, dilation, pads, Ho, Wo)
            self.tiled = True
            vs = self._tiled_views(x)
            if len(vs) == 1:
                m = vs[0].copy()
            else:
                m = xp.maximum(vs[0], vs[1])
                for v in vs[2:]:
                    xp.maximum(m, v, out=m)  # NaN propagates, as in PyTorch
            self.save_for_backward(x, m)
            return m
        self.tiled = False
        xpd = _pad(xp, x, pads, -xp.inf) if x.dtype.kind == "f" else _pad(xp, x, pads, xp.iinfo(x.dtype).min)
        vs = [xpd[:, :, _window(i, dilation[0], stride[0], Ho), _window(j, dilation[1], stride[1], Wo)]
              for i in range(kh) for j in range(kw)]
        K = len(vs)
        m = vs[0].copy() if K == 1 else xp.maximum(vs[0], vs[1])
        for v in vs[2:]:
            xp.maximum(m, v, out=m)  # NaN propagates, as in PyTorch
        self.idx = _first_max_index(xp, vs, m, x.dtype.kind == "f")
        self.geom = (x.shape, xpd.shape, kernel_size, stride, dilation, pads, Ho, Wo)
        return m

    def _tiled_views(self, x):
        """The kh*kw strided views (N, C, Ho, Wo) of a tiled pooling, one per window offset."""
        _, _, (kh, kw), _, _, _, Ho, Wo = self.geom
        N, C = x.shape[:2]
        xv = x[:, :, :Ho * kh, :Wo * kw].reshape(N, C, Ho, kh, Wo, kw)
        return [xv[:, :, :, i, :, j] for i in range(kh) for j in range(kw)]

    def _routing(self):
        """self.idx (first winner's window offset), computed now for the tiled path and from
        the compiled path's flat winner positions."""
        if self.idx is None and self.kidx is not None:
            in_shape, _, (kh, kw), (sh, sw), (dh, dw), (pt, _, pl, _), Ho, Wo = self.geom
            W = in_shape[3]
            yy, xx = _host.divmod(self.kidx, W)
            i = (yy - (_host.arange(Ho) * sh - pt).reshape(Ho, 1)) // dh
            j = (xx - (_host.arange(Wo) * sw - pl).reshape(1, Wo)) // dw
            self.idx = (i * kw + j).astype(_host.int8 if kh * kw <= 127 else _host.int16)
        if self.idx is None:
            x, m = (a._data if _is_tensor(a) else a for a in self.saved)
            self.idx = _first_max_index(self.xp, self._tiled_views(x), m, x.dtype.kind == "f")
        return self.idx

    def backward(self, g):
        xp = self.xp
        in_shape, pshape, (kh, kw), stride, dilation, pads, Ho, Wo = self.geom
        if self.kidx is not None and g.__class__ is _host.ndarray:
            return _KPOOL.max_pool2d_grad(g, self.kidx, in_shape, (kh, kw), stride, pads, dilation)
        if self.tiled and xp is _host and not _is_tensor(g):
            x, m = self.saved
            vs = self._tiled_views(x)
            mask = _first_max_mask(vs, m)
            if mask is not None:
                N, C, H, W = in_shape
                exact = Ho * kh == H and Wo * kw == W
                gx = (xp.empty if exact else xp.zeros)(in_shape, dtype=g.dtype)
                outs = self._tiled_views(gx)
                for k in range(len(vs)):
                    xp.multiply(g, mask[k], out=outs[k])
                return gx
        idx = self._routing()
        parts = []
        for i in range(kh):
            si = _window(i, dilation[0], stride[0], Ho)
            for j in range(kw):
                parts.append(((si, _window(j, dilation[1], stride[1], Wo)), g * (idx == i * kw + j)))
        return _scatter_windows(xp, g, parts, pshape, pads, in_shape)

    def indices(self):
        """Flat index (h*W + w) into each input plane of every window's maximum (PyTorch's)."""
        xp = self.xp
        in_shape, _, (kh, kw), stride, dilation, pads, Ho, Wo = self.geom
        W = in_shape[3]
        if self.kidx is not None:
            return self.kidx.astype(xp.int64)
        idx = self._routing()
        oy = xp.arange(Ho).reshape(Ho, 1) * stride[0] - pads[0]
        ox = xp.arange(Wo).reshape(1, Wo) * stride[1] - pads[2]
        ki, kj = idx // kw, idx % kw
        return ((oy + ki * dilation[0]) * W + ox + kj * dilation[1]).astype(xp.int64)


def _avg_divisor(L, k, s, p, Lo, count_include_pad):
    """Window sizes along one axis (host arrays: they depend on the geometry only)."""
    start = xp.arange(Lo) * s - p
    end = xp.minimum(start + k, L + p)
    size = end - start
    if count_include_pad:
        return size
    return xp.minimum(end, L) - xp.maximum(start, 0)


class AvgPool2dFn(Function):
    """Mean over each window (divisor as PyTorch: count_include_pad, divisor_override).

    Backward (seed 003 §5.2.4, Figure 5.2.3): each output is a fixed linear
    combination of its window, so dL/dx spreads g / divisor evenly over the window
    and adds where windows overlap.  Linear in g, so it is its own second derivative.
    """

    def forward(self, x, kernel_size=(2, 2), stride=(2, 2), padding=(0, 0), ceil_mode=False,
                count_include_pad=True, divisor_override=None):
        xp = self.xp
        kh, kw = kernel_size
        N, C, H, W = x.shape
        Ho, Wo, pads = _pool_geometry(x, kernel_size, stride, padding, (1, 1), ceil_mode, "avg_pool2d")
        xpd = _pad(xp, x, pads)
        acc = None
        for i in range(kh):
            si = _window(i, 1, stride[0], Ho)
            for j in range(kw):
                v = xpd[:, :, si, _window(j, 1, stride[1], Wo)]
                acc = v.copy() if acc is None else xp.add(acc, v, out=acc)
        if divisor_override is not None:
            scale = x.dtype.type(1.0 / divisor_override)
        else:
            dh = _avg_divisor(H, kh, stride[0], padding[0], Ho, count_include_pad)
            dw = _avg_divisor(W, kw, stride[1], padding[1], Wo, count_include_pad)
            scale = (1.0 / (dh.reshape(Ho, 1) * dw.reshape(1, Wo))).astype(x.dtype)
            if xp is not _host:
                scale = xp.asarray(scale)   # host to device: a copy, not a synchronisation
        acc *= scale
        self.scale = scale
        self.geom = (x.shape, xpd.shape, kernel_size, stride, pads, Ho, Wo)
        return acc

    def backward(self, g):
        in_shape, pshape, (kh, kw), stride, pads, Ho, Wo = self.geom
        gs = g * self.scale
        parts = []
        for i in range(kh):
            si = _window(i, 1, stride[0], Ho)
            for j in range(kw):
                parts.append(((si, _window(j, 1, stride[1], Wo)), gs))
        return _scatter_windows(self.xp, g, parts, pshape, pads, in_shape)


class _PadError(ValueError, RuntimeError):
    """Pooling padding larger than half the kernel: a ValueError, and PyTorch's RuntimeError."""


def _pool_args(kernel_size, stride, padding, op, dilation=1):
    k = _tuple(kernel_size, 2, "kernel_size", op, minimum=1)
    s = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _tuple(stride, 2, "stride", op, minimum=1)
    p = _tuple(padding, 2, "padding", op, minimum=0)
    d = _tuple(dilation, 2, "dilation", op, minimum=1)
    for pi, ki in zip(p, k):
        if pi > ki // 2:
            raise _PadError(f"pad should be at most half of effective kernel size ({op}: padding should be at "
                            f"most half of kernel_size, got padding={p} and kernel_size={k})")
    return k, s, p, d


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling over (N, C, H, W) or (C, H, W); stride defaults to kernel_size.

    With return_indices=True also returns the flat position (h*W + w) of each maximum.
    """
    op = "max_pool2d"
    _check_input(input, 3, op)
    x, unb = _batched(input, 3)
    k, s, p, d = _pool_args(kernel_size, stride, padding, op, dilation)
    out = MaxPool2dFn.apply(x, kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=bool(ceil_mode))
    idx = None
    if return_indices:
        node = out._node
        if node is None:  # no graph recorded: recompute the routing once
            fn = MaxPool2dFn.__new__(MaxPool2dFn)
            fn.xp = B.namespace(x._data)
            fn.forward(x._data, kernel_size=k, stride=s, padding=p, dilation=d, ceil_mode=bool(ceil_mode))
            node = fn
        idx = Tensor._make(node.indices())
    if unb:
        out = squeeze(out, 0)
        if idx is not None:
            idx = squeeze(idx, 0)
    return (out, idx) if return_indices else out


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    """Average pooling over (N, C, H, W) or (C, H, W); stride defaults to kernel_size."""
    op = "avg_pool2d"
    _check_input(input, 3, op)
    if input.dtype.kind != "f":
        return int_avg_pool(input, op, lambda t: avg_pool2d(t, kernel_size, stride, padding, ceil_mode,
                                                           count_include_pad, divisor_override))
    x, unb = _batched(input, 3)
    k, s, p, _ = _pool_args(kernel_size, stride, padding, op)
    if divisor_override is not None and (isinstance(divisor_override, bool) or int(divisor_override) < 1):
        raise ValueError(f"{op}: divisor_override must be a positive int or None, got {divisor_override!r}")
    out = AvgPool2dFn.apply(x, kernel_size=k, stride=s, padding=p, ceil_mode=bool(ceil_mode),
                            count_include_pad=bool(count_include_pad), divisor_override=divisor_override)
    if unb:
        out = squeeze(out, 0)
    return out


def int_avg_pool(input, op, pool):
    """Average pooling of an integer tensor, as PyTorch: int64 works (the window sum divided by the
    divisor, rounded toward zero), other integer and bool dtypes raise NotImplementedError.
    ``pool`` pools a float64 tensor (exact for sums below 2**53)."""
    dt = input.dtype
    if dt != xp.int64:
        raise NotImplementedError(f'"{op}" not implemented for \'{torch_dtype_name(dt)}\' ({op}: average '
                                  f"pooling takes a floating-point or int64 input, got dtype {dt})")
    out = pool(Tensor._make(input._data.astype(xp.float64)))
    return Tensor._make(B.namespace(out._data).trunc(out._data).astype(xp.int64))


def _adaptive_matrix(L, Lo, dtype):
    """(Lo, L) averaging matrix (a host array): row i averages input [floor(i L/Lo), ceil((i+1) L/Lo))."""
    A = xp.zeros((Lo, L), dtype=dtype)
    for i in range(Lo):  # one row per output cell (not per pixel)
        a, b = (i * L) // Lo, -((-(i + 1) * L) // Lo)
        A[i, a:b] = 1.0 / (b - a)
    return A


def adaptive_avg_pool2d(input, output_size):
    """Average pooling to a fixed output size (global average pooling for (1, 1)).

    Output cell i averages input rows floor(i H/Ho) .. ceil((i+1) H/Ho) - 1 (as PyTorch).
    Separable, so out = A_h @ x @ A_w^T with two constant averaging matrices; the
    gradient is A_h^T g A_w (the matmul backward).
    """
    op = "adaptive_avg_pool2d"
    _check_input(input, 3, op)
    if input.dtype.kind != "f":
        raise NotImplementedError(f'"{op}" not implemented for \'{torch_dtype_name(input.dtype)}\' ({op}: '
                                  f"expected a floating-point input, got dtype {input.dtype})")
    x, unb = _batched(input, 3)
    H, W = x.shape[2], x.shape[3]
    if isinstance(output_size, int) or output_size is None:
        output_size = (output_size, output_size)
    if len(output_size) != 2:
        raise ValueError(f"{op}: output_size must be an int or a pair, got {output_size!r}")
    Ho = H if output_size[0] is None else int(output_size[0])
    Wo = W if output_size[1] is None else int(output_size[1])
    if Ho < 0 or Wo < 0:
        raise RuntimeError(f"{op}: elements of output_size must be greater than or equal to 0 but received "
                           f"{output_size!r}")
    if (Ho, Wo) == (1, 1):
        out = mean(x, (2, 3), keepdim=True)
    elif Ho and Wo and H % Ho == 0 and W % Wo == 0:
        out = avg_pool2d(x, (H // Ho, W // Wo))
    else:
        lib = B.namespace(x._data)   # the matrices go to the input's device
        Ah = Tensor._make(B.to_namespace(_adaptive_matrix(H, Ho, x.dtype), lib))
        AwT = Tensor._make(B.to_namespace(_adaptive_matrix(W, Wo, x.dtype).T.copy(), lib))
        out = matmul(matmul(Ah, x), AwT)
    return squeeze(out, 0) if unb else out
