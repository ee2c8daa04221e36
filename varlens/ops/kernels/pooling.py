"""Max pooling as one compiled pass each way (float32 host arrays; ``usable`` decides).

``max_pool2d(x, kernel_size, stride, pads, dilation, Ho, Wo)`` returns the pooled (N, C, Ho, Wo)
array and, for each output, the flat position h*W + w in its input plane of the window's
winner (int32): the first maximum in row-major window order, or the last NaN of a window
holding NaN (PyTorch's CPU scan takes an entry when it is greater than the best so far or
is NaN, so its maxima and indices are these).  Padding never wins; ``pads`` = (top,
bottom, left, right) as ops/nn/pool.py computes them (bottom/right only size the output).

``max_pool2d_grad(g, idx, in_shape)``: dL/dx, g added at each winner (seed 003 §5.2.4:
max is the identity on the winning entry).  2x2 windows of stride 2 (the usual pool) run
a specialised pair of kernels that write every input position once, so dL/dx needs no
zero fill; other geometries scatter-add onto zeros.

The NumPy path for everything else (float64, the device, numba off) is the strided-view
code in ops/nn/pool.py; tests/test_pool.py holds the two to each other and to PyTorch.
"""
from __future__ import annotations

import numpy as np

_K = {}


def _kernels():
    if not _K:
        from varlens.ops.kernels import pooling_compiled as c
        _K.update(fwd=c.max_pool_fwd, bwd=c.max_pool_bwd, fwd2=c.max_pool2x2_fwd, bwd2=c.max_pool2x2_bwd)
    return _K


def _is_2x2(kernel_size, stride, pads, dilation):
    return kernel_size == (2, 2) and stride == (2, 2) and dilation == (1, 1) and pads[0] == 0 and pads[2] == 0


def max_pool2d(x, kernel_size, stride, pads, dilation, Ho, Wo):
    """(pooled, winner index) of a C-contiguous float32 (N, C, H, W) array."""
    N, C, H, W = x.shape
    out = np.empty((N, C, Ho, Wo), dtype=x.dtype)
    idx = np.empty((N, C, Ho, Wo), dtype=np.int32)
    K = _kernels()
    x3, o3, i3 = x.reshape(N * C, H, W), out.reshape(N * C, Ho, Wo), idx.reshape(N * C, Ho, Wo)
    if _is_2x2(kernel_size, stride, pads, dilation) and 2 * Ho <= H and 2 * Wo <= W:
        K["fwd2"](x3, o3, i3)
    else:
        (kh, kw), (sh, sw), (dh, dw) = kernel_size, stride, dilation
        K["fwd"](x3, o3, i3, kh, kw, sh, sw, pads[0], pads[2], dh, dw)
    return out, idx


def max_pool2d_grad(g, idx, in_shape, kernel_size, stride, pads, dilation):
    """dL/dx (in_shape) of max_pool2d from the cotangent g and the winner indices."""
    N, C, H, W = in_shape
    Ho, Wo = idx.shape[2], idx.shape[3]
    g = np.ascontiguousarray(g, dtype=np.float32)
    K = _kernels()
    i3 = idx.reshape(N * C, Ho, Wo)
    if _is_2x2(kernel_size, stride, pads, dilation) and 2 * Ho <= H and 2 * Wo <= W:
        exact = 2 * Ho == H and 2 * Wo == W
        gx = (np.empty if exact else np.zeros)(in_shape, dtype=g.dtype)
        K["bwd2"](g.reshape(N * C, Ho, Wo), i3, gx.reshape(N * C, H, W))
        return gx
    gx = np.zeros(in_shape, dtype=g.dtype)
    K["bwd"](g.reshape(N * C, Ho, Wo), i3, gx.reshape(N * C, H * W))
    return gx
