"""The compiled Winograd F(2x2, 3x3) transforms (numba), at module level so their machine code
is cached.  Imported on first use by ``varlens.ops.kernels.winograd``, which documents the
method; importing this module imports numba."""
import numba as nb

from varlens.ops.kernels import jit

k = jit(nb)


@nb.njit(inline="always", cache=True)
def _tile_row(V, r, c, t, u0, u1, u2, u3):
    """Row r/4 of (B^T d) B from row r/4 of B^T d: u0 - u2, u1 + u2, u2 - u1, u1 - u3."""
    V[r, c, t] = u0 - u2
    V[r + 1, c, t] = u1 + u2
    V[r + 2, c, t] = u2 - u1
    V[r + 3, c, t] = u1 - u3


@k
def input_tiles(x, n0, m, pt, pl, Th, Tw, V, buf):
    """V[4a+b, c, t] = (B^T d B)[a, b] for every 4x4 tile d of images n0..n0+m of x
    (N, C, H, W), tile t = (image, ty, tx) reading rows 2ty-pt.., columns 2tx-pl.. (zero
    outside x).  buf: a (4, 2, Tw + 1) work array, each of the tile rows' four input rows
    split into its even and odd columns so that the tile loop reads contiguous runs."""
    C, H, W = x.shape[1], x.shape[2], x.shape[3]
    z = x.dtype.type(0)
    for q in range(4):
        for e in range(2):
            for u in range(Tw + 1):
                buf[q, e, u] = z
    # grid column 2k + e holds x column 2k + e - pl; the ones inside x: k in [klo_e, khi_e)
    klo0, klo1 = (pl + 1) // 2, pl // 2
    khi0 = min(Tw + 1, (W + pl + 1) // 2)
    khi1 = min(Tw + 1, (W + pl) // 2)
    for nl in range(m):
        n = n0 + nl
        for c in range(C):
            for ty in range(Th):
                for q in range(4):
                    yy = 2 * ty + q - pt
                    if 0 <= yy < H:
                        for u in range(klo0, khi0):
                            buf[q, 0, u] = x[n, c, yy, 2 * u - pl]
                        for u in range(klo1, khi1):
                            buf[q, 1, u] = x[n, c, yy, 2 * u + 1 - pl]
                    else:
                        for u in range(klo0, khi0):
                            buf[q, 0, u] = z
                        for u in range(klo1, khi1):
                            buf[q, 1, u] = z
                t0 = (nl * Th + ty) * Tw
                for tx in range(Tw):
                    # B^T d: rows r0 - r2, r1 + r2, r2 - r1, r1 - r3, at the tile's four columns
                    # (2tx, 2tx + 1, 2tx + 2, 2tx + 3 = even tx, odd tx, even tx+1, odd tx+1)
                    s00 = buf[0, 0, tx] - buf[2, 0, tx]
                    s01 = buf[0, 1, tx] - buf[2, 1, tx]
                    s02 = buf[0, 0, tx + 1] - buf[2, 0, tx + 1]
                    s03 = buf[0, 1, tx + 1] - buf[2, 1, tx + 1]
                    s10 = buf[1, 0, tx] + buf[2, 0, tx]
                    s11 = buf[1, 1, tx] + buf[2, 1, tx]
                    s12 = buf[1, 0, tx + 1] + buf[2, 0, tx + 1]
                    s13 = buf[1, 1, tx + 1] + buf[2, 1, tx + 1]
                    s20 = buf[2, 0, tx] - buf[1, 0, tx]
                    s21 = buf[2, 1, tx] - buf[1, 1, tx]
                    s22 = buf[2, 0, tx + 1] - buf[1, 0, tx + 1]
                    s23 = buf[2, 1, tx + 1] - buf[1, 1, tx + 1]
                    s30 = buf[1, 0, tx] - buf[3, 0, tx]
                    s31 = buf[1, 1, tx] - buf[3, 1, tx]
                    s32 = buf[1, 0, tx + 1] - buf[3, 0, tx + 1]
                    s33 = buf[1, 1, tx + 1] - buf[3, 1, tx + 1]
                    t = t0 + tx
                    # (B^T d) B: the same combination of the columns
                    _tile_row(V, 0, c, t, s00, s01, s02, s03)
                    _tile_row(V, 4, c, t, s10, s11, s12, s13)
                    _tile_row(V, 8, c, t, s20, s21, s22, s23)
                    _tile_row(V, 12, c, t, s30, s31, s32, s33)


@k
def grad_tiles(g, n0, m, Th, Tw, Gt):
    """Gt[4a+b, o, t] = (A g_t A^T)[a, b] for every 2x2 block g_t of the cotangent g
    (N, O, Ho, Wo) of images n0..n0+m (zero past its last row/column), A = (A^T)^T."""
    O, Ho, Wo = g.shape[1], g.shape[2], g.shape[3]
    z = g.dtype.type(0)
    for nl in range(m):
        n = n0 + nl
        for o in range(O):
            for ty in range(Th):
                y = 2 * ty
                two = y + 1 < Ho
                t0 = (nl * Th + ty) * Tw
                for tx in range(Tw):
                    xx = 2 * tx
                    g00 = g[n, o, y, xx]
                    g01 = g[n, o, y, xx + 1] if xx + 1 < Wo else z
                    g10 = (g[n, o, y + 1, xx] if two else z)
                    g11 = (g[n, o, y + 1, xx + 1] if two and xx + 1 < Wo else z)
                    t = t0 + tx
                    # A g: rows g0, g0 + g1, g0 - g1, -g1; then each row (u, v) -> (u, u+v, u-v, -v)
                    for r in range(4):
                        if r == 0:
                            u, v = g00, g01
                        elif r == 1:
                            u, v = g00 + g10, g01 + g11
                        elif r == 2:
                            u, v = g00 - g10, g01 - g11
                        else:
                            u, v = -g10, -g11
                        Gt[4 * r, o, t] = u
                        Gt[4 * r + 1, o, t] = u + v
                        Gt[4 * r + 2, o, t] = u - v
                        Gt[4 * r + 3, o, t] = -v


@k
def output_tiles(M, n0, m, Th, Tw, bias, out):
    """out[n0 + nl, o, 2ty + a, 2tx + b] = (A^T M_t A)[a, b] + bias[o] for every tile t of
    the chunk, M (16, O, m*Th*Tw); the last row/column of tiles is cut to out's size."""
    O, Ho, Wo = out.shape[1], out.shape[2], out.shape[3]
    full = Wo // 2
    for nl in range(m):
        n = n0 + nl
        for o in range(O):
            b = bias[o]
            for ty in range(Th):
                y = 2 * ty
                two = y + 1 < Ho
                t0 = (nl * Th + ty) * Tw
                for tx in range(Tw):
                    t = t0 + tx
                    # A^T M: rows m0 + m1 + m2 and m1 - m2 - m3
                    p00 = M[0, o, t] + M[4, o, t] + M[8, o, t]
                    p01 = M[1, o, t] + M[5, o, t] + M[9, o, t]
                    p02 = M[2, o, t] + M[6, o, t] + M[10, o, t]
                    p03 = M[3, o, t] + M[7, o, t] + M[11, o, t]
                    p10 = M[4, o, t] - M[8, o, t] - M[12, o, t]
                    p11 = M[5, o, t] - M[9, o, t] - M[13, o, t]
                    p12 = M[6, o, t] - M[10, o, t] - M[14, o, t]
                    p13 = M[7, o, t] - M[11, o, t] - M[15, o, t]
                    xx = 2 * tx
                    out[n, o, y, xx] = p00 + p01 + p02 + b
                    if tx < full:
                        out[n, o, y, xx + 1] = p01 - p02 - p03 + b
                    if two:
                        out[n, o, y + 1, xx] = p10 + p11 + p12 + b
                        if tx < full:
                            out[n, o, y + 1, xx + 1] = p11 - p12 - p13 + b
