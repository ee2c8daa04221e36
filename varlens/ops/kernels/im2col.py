"""im2col and col2im of ops/nn/conv.py as compiled loops (float32 host arrays).

``im2col(x, kh, kw, sh, sw, dh, dw, Ho, Wo, per_sample)``: the receptive fields of the padded
input x (N, C, Hp, Wp) as a C-contiguous (C, kh, kw, N, Ho, Wo) array, or (N, C, kh, kw, Ho,
Wo) when per_sample.  ``col2im(gcol, ..., out, per_sample)``: the adjoint, gcol added onto out
(N, C, Hp, Wp) at the positions im2col read.  NumPy copies a strided view of runs of Wo
elements (7 at a ResNet's last stage) and adds kh*kw strided slices; these loops write (read)
the columns in memory order, once.  The NumPy code in ops/nn/conv.py is the path for every
other dtype and for the device; tests/test_conv.py holds the two to each other.
"""
from __future__ import annotations

import numpy as np

_K = {}


def _kernels():
    if not _K:
        from varlens.ops.kernels import im2col_compiled as c
        _K.update(flat=c.im2col_flat, ps=c.im2col_per_sample, gflat=c.col2im_flat, gps=c.col2im_per_sample)
    return _K


def im2col(x, kh, kw, sh, sw, dh, dw, Ho, Wo, per_sample=False):
    N, C = x.shape[:2]
    shape = (N, C, kh, kw, Ho, Wo) if per_sample else (C, kh, kw, N, Ho, Wo)
    cols = np.empty(shape, dtype=x.dtype)
    _kernels()["ps" if per_sample else "flat"](x, kh, kw, sh, sw, dh, dw, cols)
    return cols


def col2im(gcol, kh, kw, sh, sw, dh, dw, out, per_sample=False):
    _kernels()["gps" if per_sample else "gflat"](gcol, kh, kw, sh, sw, dh, dw, out)
    return out
