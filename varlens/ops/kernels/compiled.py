"""The compiled kernels themselves, at module level so numba can cache their machine code
(``cache=True`` stores it in ``__pycache__``; closures would be recompiled in every process).
Imported only on first use, by ``helpers()`` in ``__init__`` and ``_kernels()`` in the
family modules, which document what each computes; importing this module imports numba.
"""
import math

import numba as nb
import numpy as np
from llvmlite import ir
import numba.experimental.function_type  # noqa: F401  (function pointers as kernel arguments)
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



@intrinsic
def wide_vectors(typingctx):
    """Called first in a kernel: lets LLVM vectorise that kernel's loops with 512-bit vectors
    where the CPU has AVX-512 (the function attribute clang sets for -mprefer-vector-width=512).
    LLVM's default for these CPUs is 256-bit; the erf/exp polynomials here are compute-bound,
    and 16 lanes run them 1.15-1.3x faster than 8 (GELU measured on this Intel host).  On a CPU
    without AVX-512 the attribute changes nothing."""
    def codegen(context, builder, signature, args):
        # llvmlite's attribute set admits only enum attributes; a string attribute goes in as is
        set.add(builder.function.attributes, '"prefer-vector-width"="512"')
        return context.get_dummy_value()
    return types.none(), codegen


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
    wide_vectors()
    for i in range(x.size):
        v = x[i]
        out[i] = HALF * v * (ONE + erf32(v * R2))

@k
def gelu_bwd(g, x, out):
    wide_vectors()
    for i in range(x.size):
        v = x[i]
        cdf = HALF * (ONE + erf32(v * R2))
        out[i] = g[i] * (cdf + v * R2PI * exp_nonpos(MHALF * v * v))

GC, GA3, TWO_F = f32(math.sqrt(2.0 / math.pi)), f32(3 * 0.044715), f32(2.0)
GCA = f32(math.sqrt(2.0 / math.pi) * 0.044715)

@k
def gelu_tanh_fwd(x, out):
    wide_vectors()
    for i in range(x.size):
        v = x[i]
        out[i] = v * sigmoid_twice(v * (GC + GCA * v * v))   # x (1 + tanh u)/2 = x sigmoid(2u)

@k
def gelu_tanh_bwd(g, x, out):
    wide_vectors()
    for i in range(x.size):
        v = x[i]
        s = sigmoid_twice(v * (GC + GCA * v * v))
        # (1 + t)/2 = s and (1 - t^2)/2 = 2 s (1 - s), so d/dx = s + 2 x s (1 - s) u'
        out[i] = g[i] * (s + TWO_F * v * s * (ONE - s) * (GC * (ONE + GA3 * v * v)))



# ---- rows.py's kernels
f32 = np.float32
ZERO, ONE, NINF = f32(0.0), f32(1.0), f32(-np.inf)
k = jit(nb, reduce=True)

@intrinsic
def no_nans(typingctx):
    """Called first in a function: marks it "no NaNs, no signed zeros" for LLVM, whose loop
    vectoriser turns a max reduction into vector max instructions only under these function
    attributes (the instruction flags alone leave it a chain of scalar maxss: 150 us for
    the 8192 rows of 64 of a (32, 4, 64, 64) softmax on this Zen 4 host, 31 us vectorised)."""
    def codegen(context, builder, signature, args):
        set.add(builder.function.attributes, '"no-nans-fp-math"="true"')
        set.add(builder.function.attributes, '"no-signed-zeros-fp-math"="true"')
        return context.get_dummy_value()
    return types.none(), codegen


@nb.njit(fastmath={"nnan", "nsz"}, nogil=True, boundscheck=False, cache=True, error_model="numpy")
def row_max(x, i, n):
    """max of x[i, :n] (n >= 1), vectorised.  Compiled as its own function (not inlined into
    the kernels at numba's level): the no-NaN promise covers this loop only.  A NaN in the
    row may or may not win here; the exp that follows makes the row NaN either way, in the
    kernels, which keep NaN semantics."""
    no_nans()
    mx = x[i, 0]
    for j in range(1, n):
        v = x[i, j]
        mx = v if v > mx else mx
    return mx

@k
def softmax_fwd(x, scale, causal, y):
    wide_vectors()
    m, n = x.shape
    if causal:
        # the exp and scaling in full-length passes with the masked entries selected away:
        # rows of varying length would leave much of each row to the loops' scalar remainders
        for i in range(m):
            lim = min(i % causal + 1, n)
            mx = row_max(x, i, lim) * scale
            s = ZERO
            for j in range(n):
                e = exp_nonpos(x[i, j] * scale - mx)
                e = e if j < lim else ZERO
                y[i, j] = e
                s += e
            r = ONE / s
            for j in range(n):
                y[i, j] *= r
        return
    for i in range(m):
        mx = row_max(x, i, n) * scale
        s = ZERO
        for j in range(n):
            e = exp_nonpos(x[i, j] * scale - mx)
            y[i, j] = e
            s += e
        r = ONE / s
        for j in range(n):
            y[i, j] *= r

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
    wide_vectors()
    m, n = x.shape
    for i in range(m):
        mx = row_max(x, i, n)
        s = ZERO
        for j in range(n):
            s += exp_nonpos(x[i, j] - mx)
        c = mx + f32(math.log(s))
        for j in range(n):
            y[i, j] = x[i, j] - c

@k
def log_softmax_bwd(g, y, out):
    wide_vectors()
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
    for i in range(m):
        mx = row_max(z, i, n)
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



# ---- pointwise.py: ReLU forward and backward
@k
def relu_fwd(x, out):
    for i in range(x.size):
        v = x[i]
        out[i] = ZERO if v <= ZERO else v  # NaN stays NaN


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



# ---- recurrent.py's kernels: one LSTM time step forward and backward, (H, B) blocks
kl = jit(nb)
SIXTH, C24, C120, C720, C5040, C40320 = (f32(1 / 6), f32(1 / 24), f32(1 / 120), f32(1 / 720),
                                         f32(1 / 5040), f32(1 / 40320))
EXPM1_SMALL, MTWO, TWO = f32(-0.3466), f32(-2.0), f32(2.0)


@scalar
def sigmoid_twice(h):
    """sigmoid(2 h) (the LSTM's sigmoid rows hold half their pre-activation), from one e^-|z|."""
    z = h + h
    e = exp_nonpos(-z if z > ZERO else z)
    s = ONE / (ONE + e)
    return s if z >= ZERO else (e * s if z < ZERO else z)   # e/(1+e) for z < 0; NaN stays NaN


@scalar
def tanh32(x):
    """tanh x = -m / (2 + m) with m = e^(-2|x|) - 1 (a Taylor polynomial of degree 8 for
    -2|x| > -0.3466, where e^r - 1 would cancel), signed like x; NaN stays NaN."""
    r = MTWO * (x if x > ZERO else -x)
    p = r * (ONE + r * (HALF + r * (SIXTH + r * (C24 + r * (C120 + r * (C720 + r * (C5040 + r * C40320)))))))
    m = p if r > EXPM1_SMALL else exp_nonpos(r) - ONE
    t = -m / (TWO + m)
    return t if x >= ZERO else (-t if x < ZERO else x)


@kl
def lstm_fwd_step(act, cs, tc, xh, t, cr, cw, i0, hc):
    """Step t: act[t] (4H, B) pre-activations, gate blocks o, i, f (halved) and g, becomes the
    activations; c' = f c + i g with c = cs[cr] into cs[cw]; tc[t] = tanh c';
    h' = o tanh c' into rows i0.. of xh[:, hc]."""
    wide_vectors()
    H = tc.shape[1]
    nb_ = tc.shape[2]
    for r in range(H):
        for b in range(nb_):
            o = sigmoid_twice(act[t, r, b])
            i = sigmoid_twice(act[t, H + r, b])
            f = sigmoid_twice(act[t, 2 * H + r, b])
            g = tanh32(act[t, 3 * H + r, b])
            act[t, r, b] = o
            act[t, H + r, b] = i
            act[t, 2 * H + r, b] = f
            act[t, 3 * H + r, b] = g
            c = f * cs[cr, r, b] + i * g
            cs[cw, r, b] = c
            th = tanh32(c)
            tc[t, r, b] = th
            xh[i0 + r, hc, b] = o * th


@kl
def lstm_bwd_step(act, tc, cs, cp, dh_all, dhrow, hw, dc, da, t):
    """Step t backward: dh = dh_all[dhrow] + hw (hw = W_hh^T dA of the step after), the
    activations act[t] (o, i, f, g), tanh c' in tc[t], c_prev = cs[cp]; writes the
    pre-activation cotangents into da[t] (4H, B) in PyTorch's gate order (i, f, g, o) and
    replaces dc (cotangent of c') by that of c_prev."""
    H = tc.shape[1]
    nb_ = tc.shape[2]
    for r in range(H):
        for b in range(nb_):
            dh = dh_all[dhrow, r, b] + hw[r, b]
            o = act[t, r, b]
            i = act[t, H + r, b]
            f = act[t, 2 * H + r, b]
            g = act[t, 3 * H + r, b]
            th = tc[t, r, b]
            dct = dc[r, b] + dh * o * (ONE - th * th)
            da[t, r, b] = dct * g * (i * (ONE - i))
            da[t, H + r, b] = dct * cs[cp, r, b] * (f * (ONE - f))
            da[t, 2 * H + r, b] = dct * i * (ONE - g * g)
            da[t, 3 * H + r, b] = dh * th * (o * (ONE - o))
            dc[r, b] = dct * f


# The LSTM layer's time loops with the step's GEMM called through a function pointer
# (``gb`` for the row blocks, ``gr`` for left-over rows: recurrent.py's compiled packed GEMM,
# ``void(wp, x, ldx, c, ldc, M, K)`` on addresses), so a layer call makes one call from Python
# instead of two per step.  ``wp`` holds the packed weights (M rows, mb of them in blocks).
@kl
def lstm_fwd_loop(gb, gr, wp, M, mb, K, act, cs, tc, xh, T, reverse, i0):
    """The forward steps of the layer (order reversed when ``reverse``): act[t] = W [x; h; 1]
    for step t, then ``lstm_fwd_step``."""
    B = act.shape[2]
    rd = 1 if reverse else 0
    ldx = (T + 1) * B
    xa = np.int64(xh.ctypes.data)
    aa = np.int64(act.ctypes.data)
    for s in range(T):
        t = T - 1 - s if reverse else s
        xb = xa + (t + rd) * B * 4
        cb = aa + t * M * B * 4
        if mb > 0:
            gb(wp, xb, ldx, cb, B, mb, K)
        if mb < M:
            gr(wp + mb * K * 4, xb, ldx, cb + mb * B * 4, B, M - mb, K)
        lstm_fwd_step(act, cs, tc, xh, t, t + rd, t + 1 - rd, i0, t + 1 - rd)


@kl
def lstm_bwd_loop(gb, gr, wp, M, mb, K, act, tc, cs, dh_all, hw, dc, da, T, reverse):
    """The backward steps (in the opposite order of the forward's): ``lstm_bwd_step``, then
    hw = W_hh^T da[t] (M = H rows, K = 4H)."""
    B = tc.shape[2]
    rd = 1 if reverse else 0
    ha = np.int64(hw.ctypes.data)
    dA = np.int64(da.ctypes.data)
    for s in range(T):
        t = s if reverse else T - 1 - s
        lstm_bwd_step(act, tc, cs, t + rd, dh_all, t + 1 - rd, hw, dc, da, t)
        xb = dA + t * K * B * 4
        if mb > 0:
            gb(wp, xb, B, ha, B, mb, K)
        if mb < M:
            gr(wp + mb * K * 4, xb, B, ha + mb * B * 4, B, M - mb, K)


# ---- optim.py: Adam / AdamW and heavy-ball SGD.  No contraction into FMAs either: each
# entry is rounded step by step exactly as the NumPy update in the optimiser (bit for bit, so a
# float32 training run does not change with numba switched on or off), which follows PyTorch's
# order of operations.
kx = nb.njit(fastmath={"nsz"}, nogil=True, boundscheck=False, cache=True, error_model="numpy")


@kx
def adam_step(w, g, m, v, w1, one_m_w1, beta2, w2, step_size, bc2_sqrt, eps, wd, decay, maximize):
    small = w1 < HALF
    for i in range(w.size):
        gi = -g[i] if maximize else g[i]
        wi = w[i] * decay
        if wd != ZERO:
            gi = gi + wd * wi
        mi = m[i]
        mi = mi + w1 * (gi - mi) if small else gi - (gi - mi) * one_m_w1
        m[i] = mi
        vi = v[i] * beta2 + (gi * w2) * gi
        v[i] = vi
        w[i] = wi - step_size * (mi / (np.sqrt(vi) / bc2_sqrt + eps))


# (heavy-ball SGD: buf = buf mu + g; w = w - lr buf)
@kx
def sgd_momentum_step(w, g, buf, lr, mu):
    for i in range(w.size):
        b = buf[i] * mu + g[i]
        buf[i] = b
        w[i] = w[i] - lr * b
