"""The compiled im2col and col2im copies (numba), at module level so their machine code is
cached.  Imported on first use by ``varlens.ops.kernels.im2col``, which documents them;
importing this module imports numba.  Each walks the columns in memory order: (c, i, j, n)
then the Ho x Wo window for the flat layout, (n, c, i, j) then the window per sample."""
import numba as nb

from varlens.ops.kernels import jit

k = jit(nb)
inline = nb.njit(inline="always", cache=True)


@inline
def _read_window(x, n, c, i0, j0, sh, sw, dst):
    """dst[y, x] = x[n, c, y*sh + i0, x*sw + j0]."""
    for y in range(dst.shape[0]):
        r = y * sh + i0
        for xx in range(dst.shape[1]):
            dst[y, xx] = x[n, c, r, xx * sw + j0]


@inline
def _add_window(src, n, c, i0, j0, sh, sw, out):
    """out[n, c, y*sh + i0, x*sw + j0] += src[y, x]."""
    for y in range(src.shape[0]):
        r = y * sh + i0
        for xx in range(src.shape[1]):
            out[n, c, r, xx * sw + j0] += src[y, xx]


@k
def im2col_flat(x, kh, kw, sh, sw, dh, dw, cols):
    """cols[c, i, j, n] = the (Ho, Wo) window of x[n, c] at offset (i*dh, j*dw), stride s."""
    for c in range(cols.shape[0]):
        for i in range(kh):
            for j in range(kw):
                for n in range(cols.shape[3]):
                    _read_window(x, n, c, i * dh, j * dw, sh, sw, cols[c, i, j, n])


@k
def im2col_per_sample(x, kh, kw, sh, sw, dh, dw, cols):
    """cols[n, c, i, j] = the same windows, per sample."""
    for n in range(cols.shape[0]):
        for c in range(cols.shape[1]):
            for i in range(kh):
                for j in range(kw):
                    _read_window(x, n, c, i * dh, j * dw, sh, sw, cols[n, c, i, j])


@k
def col2im_flat(gcol, kh, kw, sh, sw, dh, dw, out):
    """The adjoint of im2col_flat: gcol[c, i, j, n] added onto its window of out[n, c]."""
    for c in range(gcol.shape[0]):
        for i in range(kh):
            for j in range(kw):
                for n in range(gcol.shape[3]):
                    _add_window(gcol[c, i, j, n], n, c, i * dh, j * dw, sh, sw, out)


@k
def col2im_per_sample(gcol, kh, kw, sh, sw, dh, dw, out):
    """The adjoint of im2col_per_sample."""
    for n in range(gcol.shape[0]):
        for c in range(gcol.shape[1]):
            for i in range(kh):
                for j in range(kw):
                    _add_window(gcol[n, c, i, j], n, c, i * dh, j * dw, sh, sw, out)
