"""Fused neural-network ops: linear, batch/layer/RMS norm, cross-entropy, dropout masks,
embedding lookup and padding.

Each op is one ``Function`` whose backward is the closed-form derivative, so a
layer costs one node on the tape instead of a dozen.  The normalisation ops and
cross-entropy cache intermediates (mean and reciprocal standard deviation, as
llm.c does; the softmax probabilities), set ``differentiable_backward = False``
and give a ``composite``: the same function from small ops, which second
derivatives go through.  ``linear``, ``embedding``, ``pad`` and the dropout mask
write their backward with ``varlens.core.primitives`` so it is itself differentiable.
"""
from __future__ import annotations

from varlens.core.function import Function
from varlens.core import array as B
from varlens.core.array import xp
from varlens.core import primitives as D
from varlens.ops.kernels import rows as _KR

_ndarray = xp.ndarray
_dot = xp.dot
_add_reduce = xp.add.reduce
_max_reduce = xp.maximum.reduce


def _o():
    from varlens import ops
    return ops


# ---------------------------------------------------------------- linear
class Linear(Function):
    """y = x W^T + b with W of shape (out, in), x of shape (..., in).

    Backward (seed 001 §3.1 / seed 003 eq. 1.6.5): dL/dx = g W,
    dL/dW = g^T x summed over every leading (batch) axis, dL/db = sum of g over them.
    """

    def forward(self, x, w, b=None):
        if x.dtype is not w.dtype and x.dtype != w.dtype:  # one comparison: dtypes are singletons
            _dtype_mismatch(x, w)
        self.save_for_backward(x, w)
        y = _dot(x, w.T) if x.ndim == 2 else B.matmul(x, w.T)  # (np.dot: less dispatch than @ in 2-D)
        if b is not None:
            y += b
        return y

    def backward(self, g):
        x, w = self.saved
        n = self.next
        if g.__class__ is _ndarray and g.ndim == 2 and x.ndim == 2:
            # first-order training with a (batch, features) input: three BLAS calls, no dispatch
            return (_dot(g, w) if n[0] is not None else None,
                    _dot(g.T, x) if n[1] is not None else None,
                    _dot(_ones(g.shape[0], g.dtype), g) if n[2] is not None else None)
        gx = D.matmul(g, w) if n[0] is not None else None
        gw = gb = None
        if n[1] is not None or n[2] is not None:
            o = g.shape[-1]
            g2 = D.reshape(g, (-1, o)) if g.ndim != 2 else g
            if n[1] is not None:
                x2 = D.reshape(x, (-1, x.shape[-1])) if x.ndim != 2 else x
                gw = D.matmul(D.mT(g2), x2)
            if n[2] is not None:
                gb = D.sum(g2, 0)
        return gx, gw, gb


def _dtype_mismatch(x, w):
    from varlens.ops.elementwise import torch_dtype_name as n
    raise RuntimeError(f"mat1 and mat2 must have the same dtype, but got {n(x.dtype)} and {n(w.dtype)} "
                       f"(linear: input dtype {x.dtype}, weight dtype {w.dtype}); convert the input with "
                       f".to({w.dtype}) or the layer with .to({x.dtype})")


def linear_shape_error(s, ws, what="linear"):
    """PyTorch's message for an input of shape ``s`` that a weight of shape ``ws`` cannot multiply,
    followed by the shapes in varlens' words."""
    s, ws = tuple(s), tuple(ws)
    if not s:
        raise RuntimeError(f"both arguments to linear need to be at least 1D, but they are 0D and {len(ws)}D "
                           f"({what}: expected an input of shape (*, {ws[-1]}), got a 0-d tensor)")
    rows = 1
    for d in s[:-1]:
        rows *= d
    mat2 = f"{ws[1]}x{ws[0]}" if len(ws) == 2 else "x".join(map(str, ws))
    raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({rows}x{s[-1]} and {mat2}) ({what}: expected "
                       f"input of shape (*, {ws[-1]}) for a weight of shape {ws} (out_features, in_features), "
                       f"got input of shape {s})")


def linear(x, weight, bias=None):
    if weight.ndim != 2 and weight.ndim != 1:
        raise RuntimeError(f"linear: weight must be 2-D (out_features, in_features), got shape "
                           f"{tuple(weight.shape)}")
    if not hasattr(x, "_data"):
        raise TypeError(f"linear(): argument 'input' (position 1) must be Tensor, not {type(x).__name__}")
    win = weight.shape[-1]
    if x.ndim == 0 or x.shape[-1] != win:
        linear_shape_error(x.shape, weight.shape)
    if weight.ndim == 1:
        out = _o().matmul(x, weight)
        return out + bias if bias is not None else out
    return Linear.apply(x, weight, bias)


# ---------------------------------------------------------------- normalisation
def channel_sum(a):
    """Per-channel sum of an (N, C, ...) array (over every axis but 1), as a (C,) array.
    einsum on an (N, C, L) view is several times faster than sum(axis=(0, 2, 3))."""
    if a.ndim == 2:
        return _ones(a.shape[0], a.dtype) @ a  # a GEMV: about twice as fast as sum(axis=0)
    return xp.einsum("ncl->c", a.reshape(a.shape[0], a.shape[1], -1))


_ones = B.ones_cached


def channel_dot(a, b):
    """Per-channel sum of a * b for (N, C, ...) arrays, without the temporary product."""
    if a.ndim == 2:
        return xp.einsum("nc,nc->c", a, b)
    n, c = a.shape[0], a.shape[1]
    return xp.einsum("ncl,ncl->c", a.reshape(n, c, -1), b.reshape(n, c, -1))


def batch_stats(x):
    """Batch mean, centred input and biased variance per channel of (N, C, ...) ``x``;
    mean and variance in the broadcastable shape (1, C, 1, ...)."""
    C = x.shape[1]
    n = x.size // C
    pshape = (1, C) + (1,) * (x.ndim - 2)
    mean = (channel_sum(x) / n).astype(x.dtype, copy=False).reshape(pshape)
    xc = x - mean
    var = (channel_dot(xc, xc) / n).astype(x.dtype, copy=False).reshape(pshape)
    return mean, xc, var


class BatchNorm(Function):
    """Batch normalisation over every axis except the channel axis 1 (seed 001 §2, seed 003 §4.3.2).

    Forward: xhat = (x - mu) / sqrt(var + eps) with the biased batch variance
    (``eps_mode='sqrt'``, PyTorch, seeds 001/003) or (x - mu) / (std + eps)
    (``eps_mode='std'``, seed 004 Def. 17);  y = gamma * xhat + beta.  The caller
    computes the batch mean, the centred input and the variance once (``batch_stats``)
    and passes them in; only mean and rstd = 1/sqrt(var + eps) are kept for backward.

    Backward, per channel with n values: dL/dbeta = sum g and dL/dgamma = sum g * xhat
    (seed 001 §2.3, seed 004 Key Eq. 22).  Summing seed 001 §2.3's three paths into x
    (directly, through the variance, through the mean) gives
        dL/dx = gamma * rstd * (g - dL/dbeta / n - xhat * dL/dgamma / n),
    so the two parameter gradients are the only reductions needed.  With std + eps
    (seed 004 Key Eq. 21) the last term is scaled by (std + eps) / std.  With
    ``batch_stats=False`` (eval mode: running statistics are constants)
    dL/dx = gamma * rstd * g.
    """

    differentiable_backward = False

    def forward(self, x, weight, bias, axes, pshape, mean, var, eps, batch_stats=True, eps_mode="sqrt",
                centered=None):
        self.axes, self.pshape, self.batch_stats = axes, pshape, batch_stats
        if eps_mode == "sqrt":
            rstd = 1.0 / xp.sqrt(var + eps)
            self.std_factor = None
        else:
            std = xp.sqrt(var)
            rstd = 1.0 / (std + eps)
            self.std_factor = xp.divide(std + eps, std, out=xp.zeros_like(std), where=std > 0)
        rstd = rstd.astype(x.dtype, copy=False)
        mean = mean.astype(x.dtype, copy=False)
        self.mean, self.rstd = mean, rstd
        self.save_for_backward(x, weight)
        scale = rstd if weight is None else weight.reshape(pshape) * rstd
        if centered is not None:  # a temporary the caller made for the variance: reuse it as output
            y = centered
            y *= scale
            if bias is not None:
                y += bias.reshape(pshape)
            return y
        y = x * scale
        shift = -mean * scale
        if bias is not None:
            shift = shift + bias.reshape(pshape)
        y += shift
        return y

    def backward(self, g):
        x, w = self.saved
        n = self.next
        pshape = self.pshape
        C = x.shape[1]
        cnt = x.size // C
        xhat = x - self.mean
        xhat *= self.rstd
        need_w = w is not None and n[1] is not None
        gb = channel_sum(g) if (n[2] is not None or (n[0] is not None and self.batch_stats)) else None
        gw = channel_dot(g, xhat) if (need_w or (n[0] is not None and self.batch_stats)) else None
        gx = None
        if n[0] is not None:
            k = self.rstd if w is None else w.reshape(pshape) * self.rstd
            if not self.batch_stats:
                gx = g * k
            else:
                c2 = gw.reshape(pshape) / cnt
                if self.std_factor is not None:
                    c2 = c2 * self.std_factor
                xhat *= c2.astype(x.dtype, copy=False)
                gx = g - (gb / cnt).astype(x.dtype, copy=False).reshape(pshape)
                gx -= xhat
                gx *= k
        return (gx, gw.reshape(w.shape) if need_w else None,
                gb.reshape(C) if n[2] is not None else None)

    @staticmethod
    def composite(x, weight, bias, axes, pshape, mean, var, eps, batch_stats=True, eps_mode="sqrt",
                  centered=None):
        o = _o()
        if batch_stats:
            mu = o.mean(x, axes, keepdim=True)
            xc = x - mu
            v = o.mean(xc * xc, axes, keepdim=True)
        else:
            xc = x - mean
            v = var
        if eps_mode == "sqrt":
            xhat = xc / o.sqrt(v + eps)
        else:
            xhat = xc / (o.sqrt(v) + eps)
        if weight is not None:
            xhat = xhat * o.reshape(weight, pshape)
        if bias is not None:
            xhat = xhat + o.reshape(bias, pshape)
        return xhat


class LayerNorm(Function):
    """Layer normalisation over the last ``nd`` axes (seed 003 §4.3.3).

    Forward per example (a row of d values): xhat = (x - mean) * rstd with
    rstd = 1/sqrt(var + eps) (biased variance), y = gamma * xhat + beta.  Only mean and
    rstd are kept (as llm.c does); xhat is recomputed in backward.
    Backward: the batch-norm closed form with the roles of the axes swapped.  With
    h = gamma * g per row,  dL/dx = rstd * (h - mean(h) - xhat * mean(h * xhat));
    dL/dgamma = sum over rows of g * xhat, dL/dbeta = sum over rows of g.
    """

    differentiable_backward = False

    def forward(self, x, weight, bias, nd, eps):
        d = 1
        for s in x.shape[x.ndim - nd:]:
            d *= s
        x2 = x.reshape(-1, d)
        self._bshape = bias.shape if bias is not None else None
        if _KR.kernel_ok(x2, weight, bias):  # float32: one compiled pass per row (ops/kernels/rows.py)
            y, self.mean, self.rstd = _KR.layer_norm(x2, weight, bias, eps, use_kernel=True)
            self.d = d
            self.save_for_backward(x, weight)
            return y.reshape(x.shape)
        mean = (x2 @ _ones(d, x.dtype))[:, None] / d  # row means as a GEMV (4x faster than mean(1))
        xc = x2 - mean
        var = xp.einsum("ij,ij->i", xc, xc)[:, None] / d
        rstd = (1.0 / xp.sqrt(var + eps)).astype(x.dtype, copy=False)
        xc *= rstd
        self.mean, self.rstd, self.d = mean, rstd, d
        self._bshape = bias.shape if bias is not None else None
        self.save_for_backward(x, weight)
        if weight is not None:
            xc *= weight.reshape(d)
        if bias is not None:
            xc += bias.reshape(d)
        return xc.reshape(x.shape)

    def backward(self, g):
        x, w = self.saved
        n = self.next
        d = self.d
        g2 = g.reshape(-1, d)
        if _KR.kernel_ok(g2, x, w, self.rstd):
            gx, gw, gb = _KR.layer_norm_grad(g2, x.reshape(-1, d), w, self.mean, self.rstd, use_kernel=True)
            return (gx.reshape(x.shape) if n[0] is not None else None,
                    gw.reshape(w.shape) if w is not None and n[1] is not None else None,
                    gb.reshape(self._bshape) if n[2] is not None else None)
        xhat = x.reshape(-1, d) - self.mean
        xhat *= self.rstd
        gw = xp.einsum("ij,ij->j", g2, xhat).reshape(w.shape) if w is not None and n[1] is not None else None
        gb = (_ones(g2.shape[0], g2.dtype) @ g2).reshape(self._bshape) if n[2] is not None else None
        gx = None
        if n[0] is not None:
            h = g2 * w.reshape(d) if w is not None else g2.copy()
            m1 = ((h @ _ones(d, h.dtype)) / d).astype(h.dtype, copy=False)[:, None]
            m2 = (xp.einsum("ij,ij->i", h, xhat) / d).astype(x.dtype, copy=False)[:, None]
            xhat *= m2
            h -= m1
            h -= xhat
            h *= self.rstd
            gx = h.reshape(x.shape)
        return gx, gw, gb

    @staticmethod
    def composite(x, weight, bias, nd, eps):
        o = _o()
        axes = tuple(range(x.ndim - nd, x.ndim))
        mu = o.mean(x, axes, keepdim=True)
        xc = x - mu
        v = o.mean(xc * xc, axes, keepdim=True)
        y = xc / o.sqrt(v + eps)
        if weight is not None:
            y = y * weight
        if bias is not None:
            y = y + bias
        return y


class RMSNorm(Function):
    """RMS normalisation over the last ``nd`` axes: y = gamma * x / sqrt(mean(x^2) + eps).

    Backward: with xhat = x * r, r = 1/rms and h = gamma * g,
    dL/dx = r * (h - xhat * mean(h * xhat)); dL/dgamma = sum of g * xhat.
    (The layer-norm closed form of seed 003 §4.3.3 without the mean-subtraction path; RMSNorm
    itself is not in the notes.)
    """

    differentiable_backward = False

    def forward(self, x, weight, nd, eps):
        d = 1
        for s in x.shape[x.ndim - nd:]:
            d *= s
        x2 = x.reshape(-1, d)
        ms = xp.einsum("ij,ij->i", x2, x2)[:, None] / d
        r = (1.0 / xp.sqrt(ms + eps)).astype(x.dtype, copy=False)
        self.r, self.d = r, d
        self.save_for_backward(x, weight)
        y = x2 * r
        if weight is not None:
            y *= weight.reshape(d)
        return y.reshape(x.shape)

    def backward(self, g):
        x, w = self.saved
        n = self.next
        d = self.d
        g2 = g.reshape(-1, d)
        xhat = x.reshape(-1, d) * self.r
        gw = xp.einsum("ij,ij->j", g2, xhat).reshape(w.shape) if w is not None and n[1] is not None else None
        gx = None
        if n[0] is not None:
            h = g2 * w.reshape(d) if w is not None else g2.copy()
            m2 = (xp.einsum("ij,ij->i", h, xhat) / d).astype(x.dtype, copy=False)[:, None]
            xhat *= m2
            h -= xhat
            h *= self.r
            gx = h.reshape(x.shape)
        return gx, gw

    @staticmethod
    def composite(x, weight, nd, eps):
        o = _o()
        axes = tuple(range(x.ndim - nd, x.ndim))
        y = x / o.sqrt(o.mean(x * x, axes, keepdim=True) + eps)
        return y * weight if weight is not None else y


# ---------------------------------------------------------------- cross-entropy
def _to_rows(z):
    """(N, C, d1, ...) -> (N*d1*..., C) with the class axis last; (N, C) and (C,) pass through."""
    if z.ndim == 1:
        return z.reshape(1, -1)
    if z.ndim == 2:
        return z
    return xp.moveaxis(z, 1, -1).reshape(-1, z.shape[1])


def _from_rows(g2, shape):
    if len(shape) <= 2:
        return g2.reshape(shape)
    moved = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    return xp.moveaxis(g2.reshape(moved), -1, 1)


class CrossEntropy(Function):
    """Softmax cross-entropy on logits, fused (seed 001 §3.1, seed 003 Example 1.6.6).

    Each row's loss is -sum_c q_c log softmax(z)_c for a target distribution q
    (one-hot of the class index, label-smoothed, class-weighted, or given
    probabilities).  Since log softmax(z)_c = z_c - logsumexp(z), the gradient
    with respect to the logits is (sum_c q_c) softmax(z) - q, which is the
    notes' p - y when q is a distribution (its entries sum to 1).  With respect
    to probability targets it is -(1 - smoothing) w_c log softmax(z)_c.
    The reduction is folded in: 'mean' divides by the number of rows (the
    summed class weights of the targets for class indices, as PyTorch).
    """

    differentiable_backward = False

    def forward(self, z, target, weight=None, ignore_index=-100, label_smoothing=0.0,
                reduction="mean", probs=False, all_real=None):
        if z.dtype.kind in "biu":
            from varlens.ops.elementwise import torch_dtype_name
            raise NotImplementedError(
                f'"log_softmax_lastdim_kernel_impl" not implemented for \'{torch_dtype_name(z.dtype)}\': '
                f"cross_entropy needs floating-point logits (input), got dtype {z.dtype}; "
                "convert them with .float()")
        z2 = _to_rows(z)
        if not z2.flags.c_contiguous:
            # (transposed logits, CLIP-style): NumPy would keep their column-major layout in the
            # softmax below, and the fast path's flat indices assume rows are contiguous
            z2 = xp.ascontiguousarray(z2)
        M, C = z2.shape
        if not probs and weight is None and not label_smoothing and reduction != "none" and M \
                and target.dtype == xp.int64 and target.size == M and target.flags.c_contiguous and _KR.kernel_ok(z2) and (
                all_real if all_real is not None else _all_real(target, C, ignore_index)):
            # float32 fast path compiled: softmax rows and the loss sum in one pass (ops/kernels/rows.py)
            t = target.reshape(-1)
            e, tot = _KR.cross_entropy(z2, t, use_kernel=True)
            self.p, self.flat, self.fast, self.zshape, self.reduction = e, t + _row_offsets(M, C), True, z.shape, reduction
            return xp.asarray(tot / M if reduction == "mean" else tot, dtype=z.dtype)
        m = _max_reduce(z2, axis=1, keepdims=True)  # (the ufunc reductions skip ndarray.max's Python frame)
        e = z2 - m
        xp.exp(e, out=e)
        s = _add_reduce(e, axis=1, keepdims=True)
        e /= s
        if not probs and weight is None and not label_smoothing and reduction != "none" and (
                all_real if all_real is not None else _all_real(target, C, ignore_index)):
            # fast path (the training-loop case): every index is a real class, no weights, no
            # smoothing.  The loss is sum_i (log s_i + m_i - z[i, t_i]); the picked logits come
            # from one flat take, and the three sums are added as Python floats.
            flat = target.reshape(-1) + _row_offsets(M, C)
            self.p, self.flat, self.fast, self.zshape, self.reduction = e, flat, True, z.shape, reduction
            tot = (float(_add_reduce(xp.log(s, out=s), axis=None)) + float(_add_reduce(m, axis=None))
                   - float(_add_reduce(z2.take(flat), axis=None)))
            return xp.asarray(tot / M if reduction == "mean" else tot, dtype=z.dtype)
        lse = xp.log(s) + m
        self.p, self.lse, self.zshape, self.reduction = e, lse, z.shape, reduction
        self.weight, self.eps, self.probs = weight, label_smoothing, probs
        eps = label_smoothing
        if probs:
            y2 = _to_rows(target)
            q = y2 * (1 - eps) + eps / C if eps else y2
            if weight is not None:
                q = q * weight
            loss = -((z2 - lse) * q).sum(axis=1)
            self.q, self.tshape = q, target.shape
            self.denom = M
            self.save_for_backward(z)
        else:
            t = target.reshape(-1)
            valid = t != ignore_index
            tt = xp.where(valid, t, 0)
            ar = xp.arange(M)
            wy = weight[tt] * valid if weight is not None else valid.astype(z.dtype)
            nll = lse[:, 0] - z2[ar, tt]
            loss = nll * wy if eps == 0 else nll * (wy * (1 - eps))
            if eps:
                if weight is None:
                    smooth = C * lse[:, 0] - z2.sum(axis=1)
                else:
                    smooth = lse[:, 0] * weight.sum() - z2 @ weight
                loss += (eps / C) * smooth * valid
            self.tt, self.wy, self.valid, self.tshape = tt, wy, valid, target.shape
            self.denom = wy.sum()
        loss = loss.astype(z.dtype, copy=False)
        if reduction == "mean":
            if not self.denom:  # every target ignored (or zero weights): NaN, as PyTorch, quietly
                return xp.asarray(loss.sum() * xp.nan, dtype=z.dtype)
            return xp.asarray(loss.sum() / self.denom, dtype=z.dtype)
        if reduction == "sum":
            return xp.asarray(loss.sum(), dtype=z.dtype)
        return loss.reshape(self.tshape if not probs else _row_shape(z.shape))

    fast = False

    def backward(self, g):
        p, C = self.p, self.p.shape[1]
        M = p.shape[0]
        red = self.reduction
        if self.fast:  # d/dz of mean/sum of (logsumexp(z) - z_t) is (softmax(z) - onehot(t)) * g / M
            if g.__class__ is _ndarray and g.ndim == 0:
                g = float(g)  # a Python float keeps p's dtype and skips 0-d array arithmetic
            gi = g / M if red == "mean" else g
            gz = p * gi
            gz.reshape(-1)[self.flat] -= gi  # gz is fresh and contiguous: reshape is a view
            return (gz if len(self.zshape) == 2 else _from_rows(gz, self.zshape)), None
        if red == "mean" and not self.denom:
            # every target ignored: the loss is a constant NaN and PyTorch's gradient is 0
            gt = xp.zeros(self.tshape, p.dtype) if self.probs and self.next[1] is not None else None
            return xp.zeros(self.zshape, p.dtype), gt
        gi = (g / self.denom if red == "mean" else g).astype(p.dtype)
        gi = xp.broadcast_to(gi.reshape(-1), (M,)) if red != "none" else gi.reshape(M)
        eps = self.eps
        gt = None
        if self.probs:
            q = self.q
            gz = (q.sum(axis=1) * gi)[:, None] * p - gi[:, None] * q
            if self.next[1] is not None:
                z2 = _to_rows(self.saved[0])
                coef = -(1 - eps) * gi[:, None]
                gt = coef * (z2 - self.lse)
                if self.weight is not None:
                    gt = gt * self.weight
                gt = _from_rows(gt, self.tshape)
        else:
            w = self.weight
            wy = self.wy
            a = gi * wy * (1 - eps)
            if eps:
                wsum = w.sum() if w is not None else C
                gz = (a + gi * self.valid * (eps / C) * wsum)[:, None] * p
                gz -= (gi * self.valid * (eps / C))[:, None] * (w if w is not None else 1.0)
            else:
                gz = a[:, None] * p
            gz[xp.arange(M), self.tt] -= a
        return _from_rows(gz, self.zshape), gt

    @staticmethod
    def composite(z, target, weight=None, ignore_index=-100, label_smoothing=0.0,
                  reduction="mean", probs=False, all_real=None):
        o = _o()
        zr = z
        if z.ndim == 1:
            zr = o.reshape(z, (1, -1))
        elif z.ndim > 2:
            zr = o.reshape(o.movedim(z, 1, -1), (-1, z.shape[1]))
        C = zr.shape[1]
        logp = o.log_softmax(zr, 1)
        eps = label_smoothing
        if probs:
            tr = target
            if target.ndim == 1:
                tr = o.reshape(target, (1, -1))
            elif target.ndim > 2:
                tr = o.reshape(o.movedim(target, 1, -1), (-1, C))
            q = tr * (1 - eps) + eps / C if eps else tr
            if weight is not None:
                q = q * weight
            loss = -o.sum(logp * q, 1)
            denom = zr.shape[0]
        else:
            t = target._data.reshape(-1) if hasattr(target, "_data") else target.reshape(-1)
            valid = t != ignore_index
            tt = xp.where(valid, t, 0)
            wv = weight if weight is not None else xp.ones(C, dtype=zr.dtype)
            q = xp.zeros(zr.shape, dtype=zr.dtype)
            q[xp.arange(len(t)), tt] = (1 - eps) * wv[tt]
            q += (eps / C) * wv
            q *= valid[:, None]
            loss = -o.sum(logp * q, 1)
            denom = float((wv[tt] * valid).sum())
            tshape = tuple(target.shape)
        if reduction == "mean":
            return o.sum(loss) / denom
        if reduction == "sum":
            return o.sum(loss)
        return o.reshape(loss, tshape if not probs else _row_shape(tuple(z.shape)))


def _row_offsets(M, C):
    """i * C for each row i (cached): adds to class indices to give flat positions in (M, C)."""
    return B.arange_cached(0, M * C, C)


_UNSIGNED = {}


def _in_range(t, C):
    """Every entry of the integer array t lies in [0, C): one max over the unsigned view
    (negative values become huge), instead of a min and a max."""
    if t.dtype.kind == "i":
        u = _UNSIGNED.get(t.dtype)
        if u is None:
            u = _UNSIGNED[t.dtype] = xp.dtype(t.dtype.str.replace("i", "u"))
        t = t.view(u)
    return _max_reduce(t, axis=None) < C


def _all_real(t, C, ignore_index):
    """True when every target is a class in [0, C) and none equals ignore_index."""
    if t.size == 0 or not _in_range(t, C):
        return False
    return not (0 <= ignore_index < C) or not (t == ignore_index).any()


def _row_shape(zshape):
    return () if len(zshape) == 1 else (zshape[0],) + tuple(zshape[2:])


# ---------------------------------------------------------------- binary cross-entropy on logits
def _softplus_neg(x):
    """log(1 + e^-x) elementwise, without overflow: max(-x, 0) + log1p(e^-|x|).
    (NumPy's logaddexp(0, -x) computes the same but is several times slower.)"""
    t = xp.abs(x)
    xp.negative(t, out=t)
    xp.exp(t, out=t)
    xp.log1p(t, out=t)
    r = xp.negative(x)
    xp.maximum(r, B.zeros_cached(r.shape, r.dtype), out=r)
    r += t
    return r


def _bce_dtype(x, y):
    from varlens.ops.elementwise import torch_dtype_name as n
    if x.dtype.kind in "biu":
        raise NotImplementedError(f'"log_sigmoid_cpu" not implemented for \'{n(x.dtype)}\': '
                                  f"binary_cross_entropy_with_logits needs floating-point logits (input), "
                                  f"got dtype {x.dtype}")
    raise RuntimeError(f"result type {n(x.dtype)} can't be cast to the desired output type {n(y.dtype)}: "
                       f"binary_cross_entropy_with_logits needs a floating-point target, got dtype "
                       f"{y.dtype}; convert it with .float()")


class BCEWithLogits(Function):
    """Elementwise -w [pw y log s(x) + (1 - y) log(1 - s(x))], s = sigmoid, computed stably as
    (1 - y) x + (1 + (pw - 1) y) (log(1 + e^-|x|) + max(-x, 0)).

    d/dx = w [(1 - y + pw y) s(x) - pw y]  (= w (s(x) - y) without pos_weight, the
    binary case of seed 001 §3.1's p - y);  d/dy = w [log s(-x) - pw log s(x)].
    """

    def forward(self, x, y, weight=None, pos_weight=None):
        if y.dtype.kind in "biu" or x.dtype.kind in "biu":
            _bce_dtype(x, y)
        self.save_for_backward(x, y, weight, pos_weight)
        sp = _softplus_neg(x) if x.ndim else xp.logaddexp(0, -x)  # log(1 + e^-x) = -log s(x)
        if pos_weight is None:
            out = (1 - y) * x + sp
        else:
            out = (1 - y) * x + (1 + (pos_weight - 1) * y) * sp
        if weight is not None:
            out = out * weight
        return out.astype(xp.result_type(x, y), copy=False)

    def backward(self, g):
        x, y, w, pw = self.saved
        n = self.next
        s = D.sigmoid(x)
        gx = gy = None
        if n[0] is not None:
            gx = s - y if pw is None else (1 - y + pw * y) * s - pw * y
            gx = g * gx if w is None else g * w * gx
        if n[1] is not None:
            if isinstance(x, xp.ndarray) and x.ndim:  # log s(x) = -log(1 + e^-x), without overflow
                ls_pos, ls_neg = -_softplus_neg(x), -_softplus_neg(-x)
            elif isinstance(x, xp.ndarray):
                ls_pos, ls_neg = -xp.logaddexp(0, -x), -xp.logaddexp(0, x)
            else:
                ls_pos, ls_neg = -_o().softplus(-x), -_o().softplus(x)
            gy = ls_neg - ls_pos if pw is None else ls_neg - pw * ls_pos
            gy = g * gy if w is None else g * w * gy
        return gx, gy, None, None


# ---------------------------------------------------------------- dropout, embedding, padding
class MaskMul(Function):
    """out = x * m for a constant (already scaled) dropout mask m;  dL/dx = g * m.
    Inverted dropout: m = Bernoulli(1 - p) / (1 - p) (seed 001 §1.1, seed 003 §4.1.2)."""

    def forward(self, x, m):
        self.m = m
        return x * m

    def backward(self, g):
        return g * self.m, None


class Embedding(Function):
    """out = W[idx] (rows of the table);  dL/dW[r] = sum of g over the positions where idx == r
    (repeats accumulate), zero for ``padding_idx``.  A lookup is a product with a one-hot matrix,
    out = onehot(idx) W, so this is the weight gradient X^T g of seed 003 eq. 1.6.5 with X one-hot."""

    def forward(self, w, idx, padding_idx=None):
        self.idx, self.wshape, self.pad = idx, w.shape, padding_idx
        return xp.take(w, idx, axis=0)

    def backward(self, g):
        shape, idx = self.wshape, self.idx
        if isinstance(g, xp.ndarray):
            dw = xp.zeros(shape, dtype=g.dtype)
            flat = idx.reshape(-1)
            g2 = g.reshape(flat.size, -1)
            if flat.size:
                # group the rows by index (one sort + segment sums): measured 1.5-6x faster than
                # NumPy's scattered add.at for lookup counts from 0.2x to 20x the table size
                order = xp.argsort(flat, kind="stable")
                fs = flat[order]
                starts = xp.flatnonzero(xp.r_[True, fs[1:] != fs[:-1]])
                dw.reshape(shape[0], -1)[fs[starts]] = xp.add.reduceat(g2[order], starts, axis=0)
            if self.pad is not None:
                dw[self.pad] = 0
            return dw, None
        dw = D.index_scatter(g, idx, shape)
        if self.pad is not None:
            m = xp.ones((shape[0],) + (1,) * (len(shape) - 1), dtype=g.dtype)
            m[self.pad] = 0
            dw = dw * m
        return dw, None


class ConstantPad(Function):
    """out = x placed in a block of ``value`` (negative pads crop);  dL/dx = g read back at x's
    place (the constant border does not depend on x, so its cotangent is dropped)."""

    def forward(self, x, pads, value=0.0):
        src, dst, shape = [], [], []
        for n, (lo, hi) in zip(x.shape, pads):
            a, b = max(-lo, 0), n - max(-hi, 0)
            ln = max(b - a, 0)
            shape.append(max(n + lo + hi, 0))
            src.append(slice(a, a + ln))
            dst.append(slice(max(lo, 0), max(lo, 0) + ln))
        self.src, self.dst, self.in_shape = tuple(src), tuple(dst), x.shape
        out = xp.full(tuple(shape), value, dtype=x.dtype)
        out[self.dst] = x[self.src]
        return out

    def backward(self, g):
        return D.index_scatter(g[self.dst], self.src, self.in_shape)


def cross_entropy_check(target, C, ignore_index, what="cross_entropy"):
    """Refuse class indices outside [0, C) (other than ignore_index), naming the first bad one.
    Returns True when every target is a real class (none equals ignore_index)."""
    t = target
    if t.size == 0:
        return False
    if _in_range(t, C):
        return not (0 <= ignore_index < C) or not (t == ignore_index).any()
    bad = ((t < 0) | (t >= C)) & (t != ignore_index)
    if bad.any():
        v = int(t[bad].reshape(-1)[0])
        raise IndexError(f"{what}: target class index {v} is out of range for {C} classes "
                         f"(valid indices are 0..{C - 1}; ignore_index={ignore_index})")
    return False
