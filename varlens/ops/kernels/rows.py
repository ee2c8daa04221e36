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

import numpy as np

from varlens.ops.kernels import usable, usable_or_none

_K = {}


def _kernels():
    if _K:
        return _K
    from varlens.ops.kernels import compiled as c
    _K.update(softmax_fwd=c.softmax_fwd, softmax_bwd=c.softmax_bwd, log_softmax_fwd=c.log_softmax_fwd,
              log_softmax_bwd=c.log_softmax_bwd, ce_fwd=c.ce_fwd, ce_bwd=c.ce_bwd, ln_fwd=c.ln_fwd, ln_bwd=c.ln_bwd)
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
    return usable_or_none(*arrays)
