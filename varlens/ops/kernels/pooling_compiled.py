"""The compiled max-pooling kernels (numba), at module level so their machine code is cached.
Imported on first use by ``varlens.ops.kernels.pooling``, which documents what they compute;
importing this module imports numba."""
import numba as nb
import numpy as np

from varlens.ops.kernels import jit

k = jit(nb)


@k
def max_pool_fwd(x, out, idx, kh, kw, sh, sw, pt, pl, dh, dw):
    """Any window geometry: x (P, H, W) planes, out/idx (P, Ho, Wo); windows clipped to the
    input (padding is -inf, never a winner unless the window holds nothing larger)."""
    P, H, W = x.shape
    Ho, Wo = out.shape[1], out.shape[2]
    ninf = x.dtype.type(-np.inf)
    for p in range(P):
        for oy in range(Ho):
            y0 = oy * sh - pt
            for ox in range(Wo):
                x0 = ox * sw - pl
                best = ninf
                bi = -1
                for i in range(kh):
                    yy = y0 + i * dh
                    if yy < 0 or yy >= H:
                        continue
                    for j in range(kw):
                        xx = x0 + j * dw
                        if xx < 0 or xx >= W:
                            continue
                        v = x[p, yy, xx]
                        if bi < 0:
                            bi = yy * W + xx
                        if v > best or v != v:
                            best = v
                            bi = yy * W + xx
                out[p, oy, ox] = best
                idx[p, oy, ox] = bi


@k
def max_pool2x2_fwd(x, out, idx):
    """2x2 windows, stride 2, no padding: out/idx (P, Ho, Wo) from x (P, H, W)."""
    P, H, W = x.shape
    Ho, Wo = out.shape[1], out.shape[2]
    for p in range(P):
        for oy in range(Ho):
            y = 2 * oy
            for ox in range(Wo):
                xx = 2 * ox
                best = x[p, y, xx]
                bi = y * W + xx
                v = x[p, y, xx + 1]
                if v > best or v != v:
                    best = v
                    bi = y * W + xx + 1
                v = x[p, y + 1, xx]
                if v > best or v != v:
                    best = v
                    bi = (y + 1) * W + xx
                v = x[p, y + 1, xx + 1]
                if v > best or v != v:
                    best = v
                    bi = (y + 1) * W + xx + 1
                out[p, oy, ox] = best
                idx[p, oy, ox] = bi


@k
def max_pool2x2_bwd(g, idx, gx):
    """dL/dx of the 2x2 stride-2 pool: every input of a window written (g at the winner, 0
    elsewhere); rows/columns past the last window are left to the caller."""
    P, Ho, Wo = g.shape
    W = gx.shape[2]
    z = gx.dtype.type(0)
    for p in range(P):
        for oy in range(Ho):
            y = 2 * oy
            for ox in range(Wo):
                xx = 2 * ox
                v = g[p, oy, ox]
                q = idx[p, oy, ox]
                b = y * W + xx
                gx[p, y, xx] = v if q == b else z
                gx[p, y, xx + 1] = v if q == b + 1 else z
                gx[p, y + 1, xx] = v if q == b + W else z
                gx[p, y + 1, xx + 1] = v if q == b + W + 1 else z


@k
def max_pool_bwd(g, idx, gx):
    """Any window geometry: gx (P, H*W), zero on entry, gets g added at each window's winner
    (overlapping windows that share a winner add)."""
    P, Ho, Wo = g.shape
    for p in range(P):
        for oy in range(Ho):
            for ox in range(Wo):
                gx[p, idx[p, oy, ox]] += g[p, oy, ox]
