"""The compiled kernels themselves, at module level so numba can cache their machine code
(``cache=True`` stores it in ``__pycache__``; closures would be recompiled in every process).
Imported only on first use, by ``helpers()`` in ``__init__`` and ``_kernels()`` in the
family modules, which document what each computes; importing this module imports numba.
"""
import math

import numba as nb
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from varlens.ops.kernels import ERF_P, ERF_Q, jit

_SQRT1_2 = 1.0 / math.sqrt(2.0)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


@intrinsic
def bits_to_f32(typingctx, v):
    """Reinterpret an int32's bits as a float32 (an LLVM bitcast, so it vectorises)."""
    if v != types.int32:
        return None

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return types.float32(types.int32), codegen

f32 = np.float32
LOG2E, C1, C2 = f32(1.4426950408889634), f32(0.693359375), f32(-2.12194440e-4)
LO, HALF, ONE = f32(-87.33), f32(0.5), f32(1.0)
T2, T3, T4, T5, T6, T7 = (f32(1 / 2), f32(1 / 6), f32(1 / 24), f32(1 / 120), f32(1 / 720),
                          f32(1 / 5040))
P0, P1, P2, P3, P4, P5 = (f32(c) for c in ERF_P)
Q1, Q2, Q3, Q4, Q5 = (f32(c) for c in ERF_Q[1:])
FOUR, ZERO = f32(4.0), f32(0.0)
# no reassociation here: it would fold the two-constant ln2 reduction into one
scalar = nb.njit(fastmath={"contract", "nsz"}, inline="always", cache=True, error_model="numpy")

@scalar
def exp_nonpos(x):
    """e^x for float32 x <= 0 (0 below -87.33); see the module docstring."""
    xc = x if x > LO else LO
    n = np.floor(xc * LOG2E + HALF)
    r = xc - n * C1
    r = r - n * C2
    p = ONE + r * (ONE + r * (T2 + r * (T3 + r * (T4 + r * (T5 + r * (T6 + r * T7))))))
    s = bits_to_f32(np.int32((np.int32(n) + np.int32(127)) << np.int32(23)))
    return p * s if x > LO else (ZERO if x <= LO else x)  # NaN stays NaN

@scalar
def erf32(x):
    """erf(x) for float32 x; see the module docstring (NaN stays NaN)."""
    xc = x if x < FOUR else FOUR
    xc = xc if xc > -FOUR else -FOUR
    xc = xc if x == x else x
    t = xc * xc
    p = P0 + t * (P1 + t * (P2 + t * (P3 + t * (P4 + t * P5))))
    q = ONE + t * (Q1 + t * (Q2 + t * (Q3 + t * (Q4 + t * Q5))))
    r = xc * p / q
    r = ONE if r > ONE else r          # |erf| <= 1 (the fit overshoots by an ulp near 4)
    return -ONE if r < -ONE else r     # (NaN compares false and passes through)



# ---- pointwise.py's kernels
f32 = np.float32
HALF, ONE, THREE = f32(0.5), f32(1.0), f32(3.0)
R2, R2PI, MHALF = f32(_SQRT1_2), f32(_INV_SQRT_2PI), f32(-0.5)
k = jit(nb)

@k
def cube(x, out):
    for i in range(x.size):
        v = x[i]
        out[i] = v * v * v

@k
def cube_grad(g, x, out):
    for i in range(x.size):
        v = x[i]
        out[i] = g[i] * (THREE * v * v)

@k
def gelu_fwd(x, out):
    for i in range(x.size):
        v = x[i]
        out[i] = HALF * v * (ONE + erf32(v * R2))

@k
def gelu_bwd(g, x, out):
    for i in range(x.size):
        v = x[i]
        cdf = HALF * (ONE + erf32(v * R2))
        out[i] = g[i] * (cdf + v * R2PI * exp_nonpos(MHALF * v * v))



# ---- rows.py's kernels
f32 = np.float32
ZERO, ONE, NINF = f32(0.0), f32(1.0), f32(-np.inf)
k = jit(nb, reduce=True)

@nb.njit(fastmath={"contract", "nsz"}, inline="always", cache=True, error_model="numpy")
def row_max(x, i, n, acc):
    """max of x[i, :n], in 16 independent lanes (so it vectorises without fast-math
    max; a NaN is skipped here and made NaN again by the exp that follows)."""
    n16 = n - n % 16
    for j in range(16):
        acc[j] = NINF
    for j in range(0, n16, 16):
        for q in range(16):
            v = x[i, j + q]
            acc[q] = v if v > acc[q] else acc[q]
    mx = NINF
    for q in range(16):
        mx = acc[q] if acc[q] > mx else mx
    for j in range(n16, n):
        v = x[i, j]
        mx = v if v > mx else mx
    return mx

@k
def softmax_fwd(x, scale, causal, y):
    m, n = x.shape
    acc = np.empty(16, np.float32)
    for i in range(m):
        lim = n if causal == 0 else min(i % causal + 1, n)
        mx = row_max(x, i, lim, acc) * scale
        s = ZERO
        for j in range(lim):
            e = exp_nonpos(x[i, j] * scale - mx)
            y[i, j] = e
            s += e
        r = ONE / s
        for j in range(lim):
            y[i, j] *= r
        for j in range(lim, n):
            y[i, j] = ZERO

@k
def softmax_bwd(g, y, scale, out):
    m, n = y.shape
    for i in range(m):
        s = ZERO
        for j in range(n):
            s += g[i, j] * y[i, j]
        for j in range(n):
            out[i, j] = y[i, j] * (g[i, j] - s) * scale

@k
def log_softmax_fwd(x, y):
    m, n = x.shape
    acc = np.empty(16, np.float32)
    for i in range(m):
        mx = row_max(x, i, n, acc)
        s = ZERO
        for j in range(n):
            s += exp_nonpos(x[i, j] - mx)
        c = mx + f32(math.log(s))
        for j in range(n):
            y[i, j] = x[i, j] - c

@k
def log_softmax_bwd(g, y, out):
    m, n = y.shape
    for i in range(m):
        s = ZERO
        for j in range(n):
            s += g[i, j]
        for j in range(n):
            out[i, j] = g[i, j] - exp_nonpos(y[i, j]) * s

@k
def ce_fwd(z, t, p):
    m, n = z.shape
    tot = 0.0
    acc = np.empty(16, np.float32)
    for i in range(m):
        mx = row_max(z, i, n, acc)
        s = ZERO
        for j in range(n):
            e = exp_nonpos(z[i, j] - mx)
            p[i, j] = e
            s += e
        r = ONE / s
        for j in range(n):
            p[i, j] *= r
        tot += math.log(s) + mx - z[i, t[i]]
    return tot

@k
def ce_bwd(p, t, scale, out):
    m, n = p.shape
    for i in range(m):
        for j in range(n):
            out[i, j] = p[i, j] * scale
        out[i, t[i]] -= scale

@k
def ln_fwd(x, w, b, eps, y, mean, rstd):
    m, n = x.shape
    inv_n = ONE / f32(n)
    for i in range(m):
        s = ZERO
        for j in range(n):
            s += x[i, j]
        mu = s * inv_n
        v = ZERO
        for j in range(n):
            d = x[i, j] - mu
            v += d * d
        r = ONE / np.sqrt(v * inv_n + eps)
        mean[i] = mu
        rstd[i] = r
        for j in range(n):
            y[i, j] = (x[i, j] - mu) * r * w[j] + b[j]

@k
def ln_bwd(g, x, w, mean, rstd, gx, gw, gb):
    m, n = x.shape
    inv_n = ONE / f32(n)
    for i in range(m):
        mu = mean[i]
        r = rstd[i]
        s1 = ZERO
        s2 = ZERO
        for j in range(n):
            xh = (x[i, j] - mu) * r
            gij = g[i, j]
            h = gij * w[j]
            s1 += h
            s2 += h * xh
            gw[j] += gij * xh
            gb[j] += gij
        s1 *= inv_n
        s2 *= inv_n
        for j in range(n):
            xh = (x[i, j] - mu) * r
            gx[i, j] = r * (g[i, j] * w[j] - s1 - xh * s2)



# ---- pointwise.py: ReLU's backward
@k
def relu_bwd(g, y, out):
    for i in range(y.size):
        out[i] = g[i] if y[i] > ZERO else ZERO


# ---- optim.py's kernels (no reassociation: one parameter entry at a time, in PyTorch's order)
ko = nb.njit(fastmath={"contract", "nsz"}, nogil=True, boundscheck=False, cache=True, error_model="numpy")


@ko
def adadelta_step(w, g, sq, acc, lr, rho, eps, wd, maximize):
    one_m = np.float32(1.0) - rho
    for i in range(w.size):
        gi = -g[i] if maximize else g[i]
        if wd != ZERO:
            gi = gi + wd * w[i]
        s = sq[i] * rho + one_m * (gi * gi)
        sq[i] = s
        d = np.sqrt(acc[i] + eps) / np.sqrt(s + eps) * gi
        acc[i] = acc[i] * rho + one_m * (d * d)
        w[i] = w[i] - lr * d



# ---- pointwise.py: tanh's backward
@k
def tanh_bwd(g, y, out):
    for i in range(y.size):
        v = y[i]
        out[i] = g[i] * (ONE - v * v)
