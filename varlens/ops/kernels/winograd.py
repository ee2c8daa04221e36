"""3x3 stride-1 convolution by Winograd's minimal filtering F(2x2, 3x3) (float32 host arrays).

A 3x3 correlation computes each 2x2 block of outputs from one 4x4 tile d of the input
with 36 multiplications per channel pair; the Winograd form needs 16 (Lavin and Gray, "Fast
Algorithms for Convolutional Neural Networks", 2015):

    Y = A^T [ (G w G^T) * (B^T d B) ] A          (* elementwise, over a 4x4 array)

    B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]
    G   = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]
    A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]

Summed over input channels, the 16 elementwise products become 16 matrix products
U[xi] (O, C) @ V[xi] (C, tiles): 2.25x fewer multiplications than the im2col product, and the
products are BLAS.  The input transform (V, from each tile) and the output transform (Y, plus
the bias) are compiled passes (winograd_compiled.py); zero padding is read, not copied.

``conv3x3(x, w, bias, pt, pl, Ho, Wo)``: out (N, O, Ho, Wo) with
out[n, o, y, x] = bias[o] + sum_{c,i,j} w[o, c, i, j] x[n, c, y + i - pt, x + j - pl]
(x read as zero outside).  The same routine gives a convolution's input gradient: the full
correlation of g with the flipped kernel (``flipped_weight``), with padding 2 - pt.

Rounding: the transforms add at most four terms with coefficients 1 and 1/2, so the result
differs from the direct sum by a few float32 ulps of the terms' magnitude
(tests/test_conv.py holds it to the im2col path and to PyTorch).
"""
from __future__ import annotations

import numpy as np

_K = {}
_G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])

# Tiles per chunk: the transformed input and the products of one chunk, 16 (C + O) floats
# per tile, stay within this many elements (1 MiB), so they are still in cache when
# the output transform reads them.
CHUNK_ELEMENTS = 1 << 18


# The 16 planes of V and M are written (read) together, one element each per tile: planes a
# multiple of 4 KiB apart fall into the same L1 cache sets and evict each other (measured 5x
# slower); a gap of 32 floats between planes spreads them over the sets.
PLANE_GAP = 32


def _planes(buf, rows, cols):
    """16 (rows, cols) C-contiguous planes in buf, PLANE_GAP floats apart."""
    step = (rows * cols + PLANE_GAP) * 4
    return np.ndarray((16, rows, cols), np.float32, buf, 0, (step, cols * 4, 4))


def _kernels():
    if not _K:
        from varlens.ops.kernels import winograd_compiled as c
        _K.update(inp=c.input_tiles, out=c.output_tiles, grad=c.grad_tiles)
    return _K


def transformed_weight(w):
    """U (16, O, C) = G w G^T per (o, c), float32, for w (O, C, 3, 3)."""
    U = _G @ w.astype(np.float64) @ _G.T               # (O, C, 4, 4), two small matmuls
    return np.ascontiguousarray(U.reshape(w.shape[0], w.shape[1], 16).transpose(2, 0, 1), dtype=np.float32)


def flipped_weight(w):
    """The kernel of the input gradient: w'[c, o, i, j] = w[o, c, 2 - i, 2 - j]."""
    return w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3)


def conv3x3(x, U, bias, pt, pl, Ho, Wo):
    """The correlation described in the module docstring, U from transformed_weight."""
    N, C, H, W = x.shape
    O = U.shape[1]
    Th, Tw = (Ho + 1) // 2, (Wo + 1) // 2
    T1 = Th * Tw
    m = max(1, min(N, CHUNK_ELEMENTS // (16 * (C + O) * T1)))
    K = _kernels()
    out = np.empty((N, O, Ho, Wo), dtype=np.float32)
    Vbuf = np.empty(16 * (C * m * T1 + PLANE_GAP), dtype=np.float32)
    Mbuf = np.empty(16 * (O * m * T1 + PLANE_GAP), dtype=np.float32)
    buf = np.empty((4, 2, Tw + 1), dtype=np.float32)
    b = bias if bias is not None else np.zeros(O, dtype=np.float32)
    for n0 in range(0, N, m):
        mm = min(m, N - n0)
        V = _planes(Vbuf, C, mm * T1)
        M = _planes(Mbuf, O, mm * T1)
        K["inp"](x, n0, mm, pt, pl, Th, Tw, V, buf)
        np.matmul(U, V, out=M)
        K["out"](M, n0, mm, Th, Tw, b, out)
    return out


def conv3x3_weight_grad(x, g, pt, pl):
    """dL/dw (O, C, 3, 3) of conv3x3 for the cotangent g (N, O, Ho, Wo): the adjoint of
    Y_t = A^T (U * V_t) A in U is dL/dU = sum_t (A g_t A^T) * V_t (16 products
    (O, tiles) @ (tiles, C) over the batch), and dL/dw = G^T (dL/dU) G."""
    N, C, H, W = x.shape
    O, Ho, Wo = g.shape[1], g.shape[2], g.shape[3]
    Th, Tw = (Ho + 1) // 2, (Wo + 1) // 2
    T1 = Th * Tw
    m = max(1, min(N, CHUNK_ELEMENTS // (16 * (C + O) * T1)))
    K = _kernels()
    Vbuf = np.empty(16 * (C * m * T1 + PLANE_GAP), dtype=np.float32)
    Gbuf = np.empty(16 * (O * m * T1 + PLANE_GAP), dtype=np.float32)
    buf = np.empty((4, 2, Tw + 1), dtype=np.float32)
    dU = np.zeros((16, O, C), dtype=np.float32)
    part = np.empty((16, O, C), dtype=np.float32)
    for n0 in range(0, N, m):
        mm = min(m, N - n0)
        V = _planes(Vbuf, C, mm * T1)
        Gt = _planes(Gbuf, O, mm * T1)
        K["inp"](x, n0, mm, pt, pl, Th, Tw, V, buf)
        K["grad"](g, n0, mm, Th, Tw, Gt)
        np.matmul(Gt, V.transpose(0, 2, 1), out=part)
        dU += part
    dU = dU.astype(np.float64).transpose(1, 2, 0).reshape(O, C, 4, 4)
    return (_G.T @ dU @ _G).astype(np.float32)
