"""Fused row kernels: softmax, log-softmax, cross-entropy and layer norm over the last axis.

Each works on a C-contiguous float32 matrix (m, n) whose rows are the normalised slices,
one compiled pass per row (the row stays in cache between its reads), single-threaded
(``parallel=False``: this 2-core machine is shared, and at these sizes numba's thread pool
costs more than it saves).  The NumPy fallback computes the same maths in whole-array passes.

* ``softmax(x2)``: y = e^(x - max) / sum e^(x - max);  ``softmax_grad(g2, y2)``: y (g - <g, y>).
* ``log_softmax(x2)``: y = x - max - log sum e^(x - max);  ``log_softmax_grad(g2, y2)``:
  g - e^y sum g.
* ``cross_entropy(z2, t)``: the row softmax p (kept for the backward) and sum over rows of
  logsumexp(z) - z[t] (class indices t all valid);  ``cross_entropy_grad(p, t, s)``:
  (p - onehot(t)) * s.
* ``layer_norm(x2, w, b, eps)``: y = (x - mean) rstd * w + b with the row mean and rstd
  (biased variance);  ``layer_norm_grad(g2, x2, w, mean, rstd)``: dL/dx = rstd (h - mean(h) -
  xhat mean(h xhat)) with h = w g, and the column sums of g xhat and g (dL/dw, dL/db).

A NaN in a row makes that row's outputs NaN on both paths (the kernel's exp passes NaN on);
a row of -inf gives NaN, as PyTorch.
"""
from __future__ import annotations

import math

import numpy as np

from varlens.ops.kernels import helpers, jit, numba_module, usable

_K = {}


def _kernels():
    if _K:
        return _K
    nb = numba_module()
    exp_nonpos = helpers()["exp_nonpos"]
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

    _K.update(softmax_fwd=softmax_fwd, softmax_bwd=softmax_bwd, log_softmax_fwd=log_softmax_fwd,
              log_softmax_bwd=log_softmax_bwd, ce_fwd=ce_fwd, ce_bwd=ce_bwd, ln_fwd=ln_fwd, ln_bwd=ln_bwd)
    return _K


def _rows_ok(*arrays):
    return all(a.ndim == 2 for a in arrays) and usable(*arrays)


def softmax(x2, use_kernel=None, scale=1.0, causal=0):
    """Row softmax of scale * x2 (2-D float).  ``causal`` = L > 0: row i keeps only its first
    i % L + 1 entries (the rest of the row's probabilities are 0), attention's causal mask for
    rows that are L queries at a time."""
    if use_kernel if use_kernel is not None else _rows_ok(x2):
        y = np.empty_like(x2)
        _kernels()["softmax_fwd"](x2, np.float32(scale), causal, y)
        return y
    y = x2 * x2.dtype.type(scale) if scale != 1.0 else x2.copy()
    if causal:
        m, n = x2.shape
        y[(np.arange(n)[None, :] > (np.arange(m) % causal)[:, None])] = -np.inf
    y -= y.max(axis=1, keepdims=True)
    np.exp(y, out=y)
    y /= y.sum(axis=1, keepdims=True)
    return y


def softmax_grad(g2, y2, use_kernel=None, scale=1.0):
    """scale * y * (g - <g, y>) row by row (the softmax Jacobian-vector product)."""
    if use_kernel if use_kernel is not None else _rows_ok(g2, y2):
        out = np.empty_like(y2)
        _kernels()["softmax_bwd"](g2, y2, np.float32(scale), out)
        return out
    gy = g2 * y2
    s = gy.sum(axis=1, keepdims=True)
    s = y2 * s
    gy -= s
    if scale != 1.0:
        gy *= gy.dtype.type(scale)
    return gy


def log_softmax(x2, use_kernel=None):
    """Row log-softmax of a 2-D float array."""
    if use_kernel if use_kernel is not None else _rows_ok(x2):
        y = np.empty_like(x2)
        _kernels()["log_softmax_fwd"](x2, y)
        return y
    s = x2 - x2.max(axis=1, keepdims=True)
    s -= np.log(np.exp(s).sum(axis=1, keepdims=True))
    return s


def log_softmax_grad(g2, y2, use_kernel=None):
    """g - e^y sum(g) row by row."""
    if use_kernel if use_kernel is not None else _rows_ok(g2, y2):
        out = np.empty_like(y2)
        _kernels()["log_softmax_bwd"](g2, y2, out)
        return out
    e = np.exp(y2)
    e *= g2.sum(axis=1, keepdims=True)
    return g2 - e


def cross_entropy(z2, t, use_kernel=None):
    """(p, total): the row softmax of logits z2 (m, C) and sum_i logsumexp(z_i) - z_i[t_i]
    as a Python float; every t_i must be a valid class index (the caller checks)."""
    if use_kernel if use_kernel is not None else (_rows_ok(z2) and t.dtype == np.int64 and t.ndim == 1):
        p = np.empty_like(z2)
        tot = _kernels()["ce_fwd"](z2, t, p)
        return p, float(tot)
    m = z2.max(axis=1, keepdims=True)
    p = z2 - m
    np.exp(p, out=p)
    s = p.sum(axis=1, keepdims=True)
    p /= s
    tot = float(np.log(s).sum(dtype=np.float64)) + float(m.sum(dtype=np.float64)) \
        - float(z2[np.arange(z2.shape[0]), t].sum(dtype=np.float64))
    return p, tot


def cross_entropy_grad(p, t, scale, use_kernel=None):
    """(p - onehot(t)) * scale for the row softmax p (m, C) and class indices t."""
    if use_kernel if use_kernel is not None else (_rows_ok(p) and t.dtype == np.int64 and t.ndim == 1):
        out = np.empty_like(p)
        _kernels()["ce_bwd"](p, t, p.dtype.type(scale), out)
        return out
    out = p * p.dtype.type(scale)
    out[np.arange(p.shape[0]), t] -= p.dtype.type(scale)
    return out


def layer_norm(x2, w, b, eps, use_kernel=None):
    """(y, mean, rstd) of layer norm over the rows of x2 (m, n); w, b of n entries or None."""
    if use_kernel if use_kernel is not None else _rows_ok(x2) and (w is None or usable(w)) \
            and (b is None or usable(b)):
        m, n = x2.shape
        w = np.ones(n, np.float32) if w is None else w.reshape(n)
        b = np.zeros(n, np.float32) if b is None else b.reshape(n)
        y = np.empty_like(x2)
        mean = np.empty(m, np.float32)
        rstd = np.empty(m, np.float32)
        _kernels()["ln_fwd"](x2, w, b, np.float32(eps), y, mean, rstd)
        return y, mean[:, None], rstd[:, None]
    n = x2.shape[1]
    mean = x2.mean(axis=1, keepdims=True)
    xc = x2 - mean
    var = np.einsum("ij,ij->i", xc, xc)[:, None] / n
    rstd = (1.0 / np.sqrt(var + eps)).astype(x2.dtype, copy=False)
    xc *= rstd
    if w is not None:
        xc *= w.reshape(n)
    if b is not None:
        xc += b.reshape(n)
    return xc, mean, rstd


def layer_norm_grad(g2, x2, w, mean, rstd, use_kernel=None):
    """(dL/dx (m, n), dL/dw (n,), dL/db (n,)) of layer norm; mean, rstd as layer_norm returns."""
    m, n = x2.shape
    if use_kernel if use_kernel is not None else _rows_ok(g2, x2) and (w is None or usable(w)) \
            and mean.dtype == np.float32 and rstd.dtype == np.float32:
        w1 = np.ones(n, np.float32) if w is None else w.reshape(n)
        gx = np.empty_like(x2)
        gw = np.zeros(n, np.float32)
        gb = np.zeros(n, np.float32)
        _kernels()["ln_bwd"](g2, x2, w1, np.ascontiguousarray(mean.reshape(m)),
                             np.ascontiguousarray(rstd.reshape(m)), gx, gw, gb)
        return gx, gw, gb
    xhat = x2 - mean
    xhat *= rstd
    gw = np.einsum("ij,ij->j", g2, xhat)
    gb = g2.sum(axis=0)
    h = g2 * w.reshape(n) if w is not None else g2.copy()
    m1 = h.mean(axis=1, keepdims=True)
    m2 = (np.einsum("ij,ij->i", h, xhat) / n)[:, None].astype(x2.dtype, copy=False)
    xhat *= m2
    h -= m1
    h -= xhat
    h *= rstd
    return h, gw, gb


def kernel_ok(*arrays):
    """True when every array given (None skipped) can take the compiled path (float32,
    C-contiguous, numba on): the ops' dispatch test before calling with use_kernel=True."""
    return usable(*(a for a in arrays if a is not None))
