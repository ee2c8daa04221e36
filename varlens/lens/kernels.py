"""The lens's per-array statistics in one pass over the data.

``row_stats(x)`` reads a C-contiguous float32/float64 matrix once and returns the sum, the
sum of squares, the sum over rows of each row's squared sum of squares (the spread of the
per-row second moments, for confidence intervals), max |x| and the number of exact zeros
(+0.0 and -0.0), or None when the matrix holds a NaN or an Inf (the caller then counts them on its slower
path).  The compiled kernels (numba) take |x| and the zero test from the bit pattern (sign
bit cleared): an integer max and an integer compare, which the compiler vectorises, where a
float max with NaN semantics would not be.  float64 data is summed in float64; float32 data
in float32 vector lanes within blocks of a row, the blocks added up in float64 (about 1e-7
relative), and in float64 wherever float32 would lose what float64 keeps (rows32 in
``_compile`` says when).  In a training step the float32 lanes and int32 bit lanes (8 values
per 256-bit vector, where float64 sums and int64 counters gave 4; numba widens int32
arithmetic to int64 unless cast back) took the lens's overhead on bench_lens.py's MLP from
18.8% to 13.1% (the earlier float64 kernel with 512-bit vectors against this one, same-process
A/B, 100 rounds of 10 steps, loaded host, 2026-11-26).  A bit pattern at or
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
_FAST_DTYPES = (_F32, _F64)
# |x| * sqrt(row width) below this cannot overflow a row's float sum of squares (NumPy path)
_SAFE = {_F32: math.sqrt(float(np.finfo(np.float32).max)) / 2,
         _F64: math.sqrt(float(np.finfo(np.float64).max)) / 2}

# rows32 (below): columns per float32 block, and the bit patterns of 2^-50, 2^50 and +inf
_BLOCK = 2048
_LO32 = int(np.array(2.0 ** -50, np.float32).view(np.int32))
_HI32 = int(np.array(2.0 ** 50, np.float32).view(np.int32))
_INF32 = int(np.array(np.inf, np.float32).view(np.int32))

_COL_ROWS = 8        # col_sums: rows per block (each column's block sums stay in registers)

_kernels = None      # {dtype: compiled row kernel} (on first use); False: no numba, NumPy passes instead
_col_kernel = None   # the compiled per-column kernel, made with _kernels
_num_kernel = None   # the compiled headroom counter, made with _kernels
_summary32 = None    # the compiled records.summarize of a finite float32 matrix, made with _kernels


def _compile():
    """The row kernels ({dtype: kernel}), or False if numba is unavailable or disabled."""
    if os.environ.get("VARLENS_NO_NUMBA", "") not in ("", "0"):
        return False
    try:
        import numba
        from llvmlite import ir
        from numba.core import types
        from numba.extending import intrinsic
        # the core's 512-bit vector attribute (AVX-512 hosts; no effect elsewhere), for the
        # per-column kernel only: measured hot on a (128, 512) float32 array on this Intel host,
        # 2026-11-26, cols about 20 -> 15 us.  The row kernels keep LLVM's 256-bit default: inside
        # a training step (bench_lens.py) 512-bit rows cost more than they save (same-process
        # A/B, 100 rounds, 2026-11-26: lens overhead +17.5% with 512-bit float64 rows, +15.1% 256-bit)
        from varlens.ops.kernels.compiled import wide_vectors
    except ImportError:
        return False
    # reassociation lets the compiler split the sums across vector lanes; no nnan/ninf, so
    # NaN and Inf stay well defined (they are detected from the bits, not from the sums)
    fm = {"reassoc", "contract", "nsz", "arcp"}
    jit = numba.njit(fastmath=fm, nogil=True, boundscheck=False, cache=True)
    @intrinsic
    def as_float(typingctx, v):
        """An int32's (int64's) bits as a float32 (float64): an LLVM bitcast."""
        if v == types.int32:
            return types.float32(v), lambda context, builder, sig, args: builder.bitcast(args[0], ir.FloatType())
        if v == types.int64:
            return types.float64(v), lambda context, builder, sig, args: builder.bitcast(args[0], ir.DoubleType())
        return None

    @intrinsic
    def bits_as(typingctx, v, like):
        """Integer bits ``v`` (of any width) read back as a value of array ``like``'s float type
        (float32 or float64), returned as a float64."""
        single = like.dtype == types.float32

        def codegen(context, builder, sig, args):
            if single:
                i = builder.trunc(args[0], ir.IntType(32)) if v.bitwidth > 32 else args[0]
                return builder.fpext(builder.bitcast(i, ir.FloatType()), ir.DoubleType())
            i = builder.sext(args[0], ir.IntType(64)) if v.bitwidth < 64 else args[0]
            return builder.bitcast(i, ir.DoubleType())
        return types.float64(v, like), codegen

    i32 = np.int32
    mask32 = np.int32(0x7FFFFFFF)
    mask64 = np.int64(0x7FFFFFFFFFFFFFFF)
    f32 = np.float32
    block = _BLOCK
    lo, hi, inf32 = _LO32, _HI32, _INF32

    @jit
    def rows_exact(x, bits, mask):
        """One pass over x (m, w) with every sum in float64 lanes: float64 data (``bits``: its
        int64 view), and float32 data where rows32's float32 lanes would lose precision (its
        int32 view).  Returns (sum, sum of squares, sum over rows of the squared row sum of
        squares, max |x|, exact zeros); |x| and the zero test come from the bits with the sign
        bit cleared (``mask``: an integer max and compare, which vectorise where a float max
        with NaN semantics would not).  The largest pattern read back as a float is max |x|,
        or an Inf or a NaN if the data holds one."""
        m, w = x.shape
        top = z = 0
        s = s2 = ss = 0.0
        for i in range(m):
            rs = r2 = 0.0
            for j in range(w):
                v = np.float64(x[i, j])
                rs += v
                r2 += v * v
                b = bits[i, j] & mask
                z += b == 0
                top = b if b > top else top   # noqa: FURB136 (a select: vectorises in numba)
            s += rs
            s2 += r2
            ss += r2 * r2
        return s, s2, ss, bits_as(top, x), z

    @jit
    def rows64(x):
        """float64 data: :func:`rows_exact`."""
        return rows_exact(x, x.view(np.int64), mask64)

    @jit
    def rows32(x):
        """float32 data: the same five results (max |x| exact: it is one of the values).  Each row is read in blocks of ``block``
        columns; within a block the sums run in float32 vector lanes (each lane's partial sum
        holds a few dozen terms), and each block's sums are added to the row's in float64, so
        the float32 rounding stays at the level of one block however long the row (about 1e-7
        relative).  Integer lanes (int32: the compiler keeps 8 lanes per 256-bit vector for
        everything) give max |x| and the zero count exactly.  Where float32 lanes could lose
        what float64 keeps, the pass is redone with float64 sums (rows_exact): values at or
        above 2^50 (squares near float32's range) or all below 2^-50 (squares below its normal
        range), and data whose mean is large against its spread (mean^2 > 63 var: the variance
        s2/n - mean^2 would magnify the float32 rounding)."""
        bits = x.view(np.int32)
        m, w = x.shape
        zero = i32(0)
        f0 = f32(0.0)
        top = zero
        z = 0
        s = s2 = ss = 0.0          # float64 totals
        for i in range(m):
            rs = r2 = 0.0          # the row's, float64
            rz = zero
            for j0 in range(0, w, block):
                xb = x[i, j0:j0 + block]
                bb = bits[i, j0:j0 + block]
                bs = f0
                bq = f0
                for j in range(xb.shape[0]):
                    v = xb[j]
                    bs += v
                    bq += v * v
                    b = i32(bb[j] & mask32)
                    rz = i32(rz + (b == zero))
                    top = b if b > top else top   # noqa: FURB136 (a select: vectorises in numba)
                rs += np.float64(bs)
                r2 += np.float64(bq)
            s += rs
            s2 += r2
            ss += r2 * r2
            z += rz
        if top >= inf32:                 # a NaN or an Inf: the caller takes its slower path
            return s, s2, ss, np.float64(as_float(top)), z
        n = m * w
        if top >= hi or (top < lo and top != zero) or s * s > (63.0 / 64.0) * n * s2:
            return rows_exact(x, bits, mask32)
        return s, s2, ss, np.float64(as_float(top)), z

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

    # IEEE arithmetic here (no fastmath): the same numbers as the Python expressions it replaced
    @numba.njit(nogil=True, cache=True)
    def summary32(x):
        """records.summarize of a C-contiguous float32 matrix (m, w), its arithmetic after the
        row pass compiled too (in Python it cost about a kernel pass's time again per tensor):
        (n, mean, M2, max |x|, zeros, 0, 0, (rows, mean row second moment, their spread), w),
        or n = -1 when a value is NaN or Inf (the caller then counts them on its slower path)."""
        s1, s2, ss, amax, zeros = rows32(x)
        m, width = x.shape
        n = m * width
        if not amax < math.inf:
            return (-1, s1, s2, amax, zeros, 0, 0, (m, 0.0, 0.0), width)
        ww = float(width * width)
        mean = s1 / n
        sd = ss / ww - s2 * s2 / (ww * m)
        m2 = s2 - n * mean * mean
        return (n, mean, m2 if m2 > 0.0 else 0.0, amax, zeros, 0, 0,  # noqa: FURB136
                (m, s2 / width / m, sd if sd > 0.0 else 0.0), width)  # noqa: FURB136

    global _summary32
    _summary32 = summary32

    rblock = _COL_ROWS

    @jit
    def cols(x, out, k):
        """One pass over x (m, w): out[0], out[1], out[2] (zeroed, float64, length w) get each
        column's sum of x, x^2 and x^3, the first ``k`` of them (1 to 3; the others are left
        alone).  Rows are taken ``rblock`` at a time: each column's partial sums over a block
        stay in registers and the block's sums are added to ``out`` once, so ``out`` is loaded
        and stored once per block instead of once per element (the one-row loop, which did, ran
        3-5x slower on a (128, 512) float32 array, 2026-12-01)."""
        wide_vectors()
        m, w = x.shape
        mr = m - m % rblock
        o0 = out[0]
        o1 = out[1]
        o2 = out[2]
        if k == 1:
            for i in range(0, mr, rblock):
                for j in range(w):
                    s0 = 0.0
                    for r in range(rblock):
                        s0 += np.float64(x[i + r, j])
                    o0[j] += s0
            for i in range(mr, m):
                for j in range(w):
                    o0[j] += np.float64(x[i, j])
        elif k == 2:
            for i in range(0, mr, rblock):
                for j in range(w):
                    s0 = 0.0
                    s1 = 0.0
                    for r in range(rblock):
                        v = np.float64(x[i + r, j])
                        s0 += v
                        s1 += v * v
                    o0[j] += s0
                    o1[j] += s1
            for i in range(mr, m):
                for j in range(w):
                    v = np.float64(x[i, j])
                    o0[j] += v
                    o1[j] += v * v
        else:
            for i in range(0, mr, rblock):
                for j in range(w):
                    s0 = 0.0
                    s1 = 0.0
                    s2 = 0.0
                    for r in range(rblock):
                        v = np.float64(x[i + r, j])
                        v2 = v * v
                        s0 += v
                        s1 += v2
                        s2 += v2 * v
                    o0[j] += s0
                    o1[j] += s1
                    o2[j] += s2
            for i in range(mr, m):
                for j in range(w):
                    v = np.float64(x[i, j])
                    v2 = v * v
                    o0[j] += v
                    o1[j] += v2
                    o2[j] += v2 * v

    global _col_kernel
    _col_kernel = cols
    return {_F32: rows32, _F64: rows64}


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


def row_stats(x):
    """(s1, s2, ss, amax, zeros) of a C-contiguous float32/float64 matrix, or None if any value
    is NaN or Inf (or, on the NumPy path, too large for a float sum of squares).

    s1: sum of all elements; s2: sum of squares; ss: sum over rows of (row's sum of squares)^2
    (with s2, the spread of the per-row second moments); amax: max |x|; zeros: exact zeros.
    float64 data is summed in float64; float32 data in float32 blocks added up in float64
    (relative error about 1e-7; see rows32 in _compile for when it falls back to float64 sums).
    The sums of float64 data above about 1e154 can still overflow to Inf: callers check them.
    """
    k = _kernels if _kernels is not None else _loaded()
    if k is False:
        return row_stats_numpy(x)
    r = k[x.dtype](x)
    if not r[3] < math.inf:            # the largest |x| bit pattern is an Inf or a NaN's
        return None
    return r


def headroom_counts(flat, step, tiny16, tiny_bf16, big16):
    """(count of 0 < |x| < tiny16, of 0 < |x| < tiny_bf16, of |x| > big16, elements read) over
    the strided sample flat[::step] of a 1-d host float array (NaN counts in none)."""
    if (_kernels if _kernels is not None else _loaded()) is False or flat.dtype not in _FAST_DTYPES:
        s = np.abs(flat[::step])
        with np.errstate(invalid="ignore"):
            nz = s > 0
            return (int(np.count_nonzero(nz & (s < tiny16))), int(np.count_nonzero(nz & (s < tiny_bf16))),
                    int(np.count_nonzero(s > big16)), int(s.size))
    return _num_kernel(flat, step, tiny16, tiny_bf16, big16)


def col_sums(x, k=3):
    """(3, w) float64: each column's sum of x, x^2 and x^3 of a C-contiguous float32/float64
    matrix (m, w), accumulated in float64 in one pass (NumPy passes in float64 without numba).
    ``k``: only the first k sums are made (1: the sums of x, 2: and of x^2); the rows after
    them are zero.  NaN/Inf propagate into the sums of their column.  What the lens's detail
    steps read: the per-unit second moments of a Linear output, an input's feature means and
    an activation input's per-feature mean, second and third moments."""
    if (_kernels if _kernels is not None else _loaded()) is False:
        return col_sums_numpy(x, k)
    out = np.zeros((3, x.shape[1]))
    _col_kernel(x, out, k)
    return out


def col_sums_numpy(x, k=3):
    """:func:`col_sums` by NumPy passes (the fallback, and the reference the tests compare to)."""
    x = x.astype(np.float64)
    out = np.zeros((3, x.shape[1]))
    with np.errstate(over="ignore", invalid="ignore"):
        out[0] = x.sum(axis=0)
        if k >= 2:
            x2 = x * x
            out[1] = x2.sum(axis=0)
            if k >= 3:
                out[2] = (x2 * x).sum(axis=0)
    return out


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


# ------------------------------------------------------------------ the torch adapter's entry
_at_kernels = None   # {dtype: row kernel reading (address, m, w)}, made on first use; False without numba


def _compile_at():
    """The row kernels behind a raw address (the torch adapter's entry, :func:`row_stats_at`)."""
    k = _loaded()
    if k is False:
        return False
    import numba
    from numba.core import cgutils, types
    from numba.core.extending import intrinsic

    @intrinsic
    def void_ptr(typingctx, addr):
        """The integer ``addr`` as a void pointer, what numba.carray reads from."""
        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], cgutils.voidptr_t)
        return types.voidptr(types.intp), codegen

    r32, r64 = k[_F32], k[_F64]
    jit = numba.njit(nogil=True, cache=True)

    @jit
    def at32(addr, m, w):
        return r32(numba.carray(void_ptr(addr), (m, w), np.float32))

    @jit
    def at64(addr, m, w):
        return r64(numba.carray(void_ptr(addr), (m, w), np.float64))
    return {_F32: at32, _F64: at64}


def row_stats_at(addr, m, w, dtype):
    """:func:`row_stats` of the C-contiguous (m, w) matrix of ``dtype`` (float32 or float64) stored
    at address ``addr``, a torch tensor's ``data_ptr()``: the compiled row kernel reads that
    memory with no array object made (a NumPy view of a torch tensor fresh from a matrix
    product costs more than the kernel's pass over a (128, 512) float32 one).  The caller keeps
    the memory alive and has checked dtype, device and layout.  False when numba is missing
    or disabled (read through an array then)."""
    global _at_kernels
    if _at_kernels is None:
        _at_kernels = _compile_at()
    if _at_kernels is False:
        return False
    r = _at_kernels[dtype](addr, m, w)
    if not r[3] < math.inf:            # an Inf or a NaN: the caller takes its counting path
        return None
    return r
