"""The lens's per-array statistics in one pass over the data.

``row_stats(x)`` reads a C-contiguous float32/float64 matrix once and returns the sum, the
sum of squares, the sum over rows of each row's squared sum of squares (the spread of the
per-row second moments, for confidence intervals), max |x| and the number of exact zeros
(+0.0 and -0.0), or None when the matrix holds a NaN or an Inf (the caller then counts them on its slower
path).  The compiled kernel (numba) accumulates in float64 and takes |x| and the zero test
from the bit pattern (sign bit cleared): an integer max and an integer compare, which the
compiler vectorises, where a float max with NaN semantics would not be.  A bit pattern at or
above the exponent-all-ones pattern is an Inf or a NaN, so the same integer max also tells
whether every value was finite.  NumPy (five passes: max, min, row sums by BLAS, per-row
sums of squares, the zero count) is the fallback when numba is missing, or when
``VARLENS_NO_NUMBA=1``; both give the same results up to summation order.

A compiled single pass costs about a quarter of NumPy's five on a (128, 512) float32
activation (benchmarks/bench_lens.py measures the lens's overhead on a training step).

Two more one-pass kernels serve the lens's *detail* steps (one sampled step in
``weight_every``): ``col_sums(x)`` (each column's sums of x, x^2 and x^3 in float64: a Linear
output's per-unit second moments, an input's feature means and an activation input's channel
moments, all from one read, where NumPy needed a float64 copy and three more passes), and
``headroom_counts`` (the float16/bfloat16 headroom counts over a strided sample, one loop
instead of five NumPy calls).
"""
from __future__ import annotations

import math
import os

import numpy as np

from varlens.core.array import ones_cached

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
# |x| * sqrt(row width) below this cannot overflow a row's float sum of squares (NumPy path)
_SAFE = {_F32: math.sqrt(float(np.finfo(np.float32).max)) / 2,
         _F64: math.sqrt(float(np.finfo(np.float64).max)) / 2}

_kernels = None      # the compiled kernel (on first use); False: no numba, NumPy passes instead
_col_kernel = None   # the compiled per-column kernel, made with _kernels
_num_kernel = None   # the compiled headroom counter, made with _kernels


def _compile():
    """The numba kernel, or False if numba is unavailable or disabled."""
    if os.environ.get("VARLENS_NO_NUMBA", "") not in ("", "0"):
        return False
    try:
        import numba
        # the core's 512-bit vector attribute (AVX-512 hosts; no effect elsewhere).  Measured hot
        # on a (128, 512) float32 array on this Intel host, 2026-11-26, loaded: cols about 20 ->
        # 15 us, rows about 16-24 -> 15-18 us (LLVM's default here is 256-bit vectors)
        from varlens.ops.kernels.compiled import wide_vectors
    except ImportError:
        return False
    # reassociation lets the compiler split the sums across vector lanes; no nnan/ninf, so
    # NaN and Inf stay well defined (they are detected from the bits, not from the sums)
    fm = {"reassoc", "contract", "nsz", "arcp"}
    jit = numba.njit(fastmath=fm, nogil=True, boundscheck=False, cache=True)

    @jit
    def rows(x, bits, masks):
        """One pass over x (m, w); ``bits`` is x's data seen as signed integers of its width,
        ``masks[0]`` clears the sign bit (an array: a NumPy scalar argument costs the call more
        than the pass over a small tensor).  Returns (sum, sum of squares, sum of squared row
        sums of squares, the largest |x| bit pattern, exact zeros)."""
        wide_vectors()
        mask = masks[0]
        m, w = x.shape
        zero = mask ^ mask
        one = zero + 1
        s = 0.0
        s2 = 0.0
        ss = 0.0
        top = zero
        z = 0
        for i in range(m):
            rs = 0.0
            r2 = 0.0
            rz = zero
            base = i * w
            for j in range(w):
                v = np.float64(x[i, j])
                rs += v
                r2 += v * v
                b = bits[base + j] & mask
                top = b if b > top else top
                rz += one if b == zero else zero
            s += rs
            s2 += r2
            ss += r2 * r2
            z += rz
        return s, s2, ss, top, z

    @jit
    def numerics(flat, step, tiny16, tiny_bf16, big16):
        """Over flat[::step]: counts of 0 < |x| < tiny16, 0 < |x| < tiny_bf16 and |x| > big16,
        and the number of elements read (NaN counts in none)."""
        a = 0
        b = 0
        c = 0
        n = 0
        for i in range(0, flat.shape[0], step):
            v = abs(np.float64(flat[i]))
            n += 1
            if v > 0.0:
                if v < tiny16:
                    a += 1
                if v < tiny_bf16:
                    b += 1
                if v > big16:
                    c += 1
        return a, b, c, n

    global _num_kernel
    _num_kernel = numerics

    @jit
    def cols(x, out):
        """One pass over x (m, w): out[0], out[1], out[2] (zeroed, float64, length w) get each
        column's sum of x, x^2 and x^3."""
        wide_vectors()
        m, w = x.shape
        for i in range(m):
            for j in range(w):
                v = np.float64(x[i, j])
                v2 = v * v
                out[0, j] += v
                out[1, j] += v2
                out[2, j] += v2 * v

    global _col_kernel
    _col_kernel = cols
    return rows


def compiled():
    """True if the one-pass kernel is in use (numba importable and not disabled)."""
    global _kernels
    if _kernels is None:
        _kernels = _compile()
    return _kernels is not False


def _loaded():
    """The row kernel after compiling (or loading) the kernels on first use, False without numba."""
    compiled()
    return _kernels


# per dtype: (integer dtype of its width, sign-clearing mask, bit pattern of +inf, and a
# one-element integer array with its float view, to read the largest pattern back as |x|)
_BITS = {}
for _f, _i in ((_F32, np.int32), (_F64, np.int64)):
    _buf = np.zeros(1, _i)
    _inf = int(np.array(np.inf, _f).view(_i))
    _BITS[_f] = (np.dtype(_i), np.array([(1 << (8 * _f.itemsize - 1)) - 1], _i), _inf, _buf, _buf.view(_f))


def row_stats(x):
    """(s1, s2, ss, amax, zeros) of a C-contiguous float32/float64 matrix, or None if any value
    is NaN or Inf (or, on the NumPy path, too large for a float sum of squares).

    s1: sum of all elements; s2: sum of squares; ss: sum over rows of (row's sum of squares)^2
    (with s2, the spread of the per-row second moments); amax: max |x|; zeros: exact zeros.
    The sums of float64 data above about 1e154 can still overflow to Inf: callers check them.
    """
    k = _kernels if _kernels is not None else _loaded()
    if k is False:
        return row_stats_numpy(x)
    ity, mask, inf, buf, fview = _BITS[x.dtype]
    s, s2, ss, top, z = k(x, x.reshape(-1).view(ity), mask)
    if top >= inf:                     # an Inf (== inf) or a NaN (> inf) somewhere
        return None
    buf[0] = top
    return s, s2, ss, float(fview[0]), z


def headroom_counts(flat, step, tiny16, tiny_bf16, big16):
    """(count of 0 < |x| < tiny16, of 0 < |x| < tiny_bf16, of |x| > big16, elements read) over
    the strided sample flat[::step] of a 1-d host float array (NaN counts in none)."""
    if (_kernels if _kernels is not None else _loaded()) is False or flat.dtype not in _BITS:
        s = np.abs(flat[::step])
        with np.errstate(invalid="ignore"):
            nz = s > 0
            return (int(np.count_nonzero(nz & (s < tiny16))), int(np.count_nonzero(nz & (s < tiny_bf16))),
                    int(np.count_nonzero(s > big16)), int(s.size))
    return _num_kernel(flat, step, tiny16, tiny_bf16, big16)


def col_sums(x):
    """(3, w) float64: each column's sum of x, x^2 and x^3 of a C-contiguous float32/float64
    matrix (m, w), accumulated in float64 in one pass (NumPy passes in float64 without numba).
    NaN/Inf propagate into the sums of their column.  What the lens's detail steps read: the
    per-unit second moments of a Linear output, an input's feature means and an activation
    input's per-feature mean, second and third moments."""
    if (_kernels if _kernels is not None else _loaded()) is False:
        return col_sums_numpy(x)
    out = np.zeros((3, x.shape[1]))
    _col_kernel(x, out)
    return out


def col_sums_numpy(x):
    """:func:`col_sums` by NumPy passes (the fallback, and the reference the tests compare to)."""
    x = x.astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        x2 = x * x
        return np.stack([x.sum(axis=0), x2.sum(axis=0), (x2 * x).sum(axis=0)])


def row_stats_numpy(x):
    """:func:`row_stats` by NumPy passes (the fallback, and the reference the tests compare to)."""
    mx = float(np.maximum.reduce(x, axis=None))
    mn = float(np.minimum.reduce(x, axis=None))
    amax = mx if mx > -mn else -mn
    w = x.shape[1]
    if not amax * math.sqrt(w) < _SAFE[x.dtype]:   # NaN, Inf, or squares that could overflow
        return None
    # max and min first: once they are finite and moderate, the sums below meet neither
    # Inf - Inf nor overflow, so they need no errstate context
    s = float(np.add.reduce(np.dot(x, ones_cached(w, x.dtype)), dtype=np.float64))
    rq = np.vecdot(x, x).astype(np.float64, copy=False)
    z = int(np.count_nonzero(x == 0)) if mn <= 0.0 <= mx else 0
    return s, float(np.add.reduce(rq)), float(rq @ rq), amax, z
