"""Normalisation layers as single ops: batch norm (training and eval), layer norm, RMS norm.
Backward in closed form (seed 003 §6: the mean and variance paths folded into one expression
per input), shared row/channel reductions (channel_sum, channel_dot, batch_stats)."""
from __future__ import annotations
from varlens.core import array as B
from varlens.core.function import Function
from varlens.ops.kernels import rows as _KR
from varlens.ops.reduce import mean as _reduce_mean
from varlens.ops.shape import reshape
from varlens.ops.pointwise import sqrt
from varlens.core.array import xp
from varlens.core.array import xp as _np   # the host library (NumPy): the compiled kernels' side
from varlens.core.tensor import Tensor
from varlens import distributed as dist


# ---------------------------------------------------------------- normalisation
def channel_sum(a):
    """Per-channel sum of an (N, C, ...) array (over every axis but 1), as a (C,) array.
    einsum on an (N, C, L) view is several times faster than sum(axis=(0, 2, 3))."""
    if a.__class__ is not _ndarray:   # a device array: one reduction kernel
        return a.sum(axis=0) if a.ndim == 2 else a.reshape(a.shape[0], a.shape[1], -1).sum(axis=(0, 2))
    if a.ndim == 2:
        return _ones(a.shape[0], a.dtype) @ a  # a GEMV: about twice as fast as sum(axis=0)
    return xp.einsum("ncl->c", a.reshape(a.shape[0], a.shape[1], -1))


_ones = B.ones_cached
_ndarray = xp.ndarray


def channel_dot(a, b):
    """Per-channel sum of a * b for (N, C, ...) arrays, without the temporary product."""
    e = xp.einsum if a.__class__ is _ndarray else B.namespace(a, b).einsum
    if a.ndim == 2:
        return e("nc,nc->c", a, b)
    n, c = a.shape[0], a.shape[1]
    return e("ncl,ncl->c", a.reshape(n, c, -1), b.reshape(n, c, -1))


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
        xp = self.xp
        self.axes, self.pshape, self.batch_stats = axes, pshape, batch_stats
        if eps_mode == "sqrt":
            rstd = 1.0 / xp.sqrt(var + eps)
            self.std_factor = None
        else:
            std = xp.sqrt(var)
            rstd = 1.0 / (std + eps)
            pos = std > 0       # (std + eps) / std where std > 0, else 0 (CuPy's divide has no where=)
            self.std_factor = xp.where(pos, (std + eps) / xp.where(pos, std, 1), 0).astype(std.dtype, copy=False)
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
        if batch_stats:
            mu = _reduce_mean(x, axes, keepdim=True)
            xc = x - mu
            v = _reduce_mean(xc * xc, axes, keepdim=True)
        else:
            xc = x - mean
            v = var
        if eps_mode == "sqrt":
            xhat = xc / sqrt(v + eps)
        else:
            xhat = xc / (sqrt(v) + eps)
        if weight is not None:
            xhat = xhat * reshape(weight, pshape)
        if bias is not None:
            xhat = xhat + reshape(bias, pshape)
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
        xp = self.xp
        d = 1
        for s in x.shape[x.ndim - nd:]:
            d *= s
        x2 = x.reshape(-1, d)
        self._bshape = bias.shape if bias is not None else None
        if xp is _np and _KR.kernel_ok(x2, weight, bias):  # float32: one compiled pass per row (ops/kernels/rows.py)
            y, self.mean, self.rstd = _KR.layer_norm(x2, weight, bias, eps, use_kernel=True)
            self.d = d
            self.save_for_backward(x, weight)
            return y.reshape(x.shape)
        if xp is _np:
            mean = (x2 @ _ones(d, x.dtype))[:, None] / d  # row means as a GEMV (4x faster than mean(1))
        else:   # a device array: a plain reduction (the cached ones are host arrays)
            mean = x2.mean(axis=1, keepdims=True)
        xc = x2 - mean
        var = xp.einsum("ij,ij->i", xc, xc)[:, None] / d
        rstd = (1.0 / xp.sqrt(var + eps)).astype(x.dtype, copy=False)
        xc *= rstd
        self.mean, self.rstd, self.d = mean, rstd, d
        self.save_for_backward(x, weight)
        if weight is not None:
            xc *= weight.reshape(d)
        if bias is not None:
            xc += bias.reshape(d)
        return xc.reshape(x.shape)

    def backward(self, g):
        xp = self.xp
        x, w = self.saved
        n = self.next
        d = self.d
        g2 = g.reshape(-1, d)
        if xp is not _np:
            return self._backward_device(xp, g2, x, w, n, d)
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

    def _backward_device(self, xp, g2, x, w, n, d):
        """The host backward's maths with reductions in place of the GEMVs (a device array)."""
        xhat = (x.reshape(-1, d) - self.mean) * self.rstd
        gw = (g2 * xhat).sum(axis=0).reshape(w.shape) if w is not None and n[1] is not None else None
        gb = g2.sum(axis=0).reshape(self._bshape) if n[2] is not None else None
        gx = None
        if n[0] is not None:
            h = g2 * w.reshape(d) if w is not None else g2
            gx = ((h - h.mean(axis=1, keepdims=True) - xhat * (h * xhat).mean(axis=1, keepdims=True))
                  * self.rstd).reshape(x.shape)
        return gx, gw, gb

    @staticmethod
    def composite(x, weight, bias, nd, eps):
        axes = tuple(range(x.ndim - nd, x.ndim))
        mu = _reduce_mean(x, axes, keepdim=True)
        xc = x - mu
        v = _reduce_mean(xc * xc, axes, keepdim=True)
        y = xc / sqrt(v + eps)
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
        xp = self.xp
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
        xp = self.xp
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
        axes = tuple(range(x.ndim - nd, x.ndim))
        y = x / sqrt(_reduce_mean(x * x, axes, keepdim=True) + eps)
        return y * weight if weight is not None else y


# ---------------------------------------------------------------- cross-entropy
def _to_rows(z):
    """(N, C, d1, ...) -> (N*d1*..., C) with the class axis last; (N, C) and (C,) pass through."""
    if z.ndim == 1:
        return z.reshape(1, -1)
    if z.ndim == 2:
        return z
    return B.namespace(z).moveaxis(z, 1, -1).reshape(-1, z.shape[1])


def _from_rows(g2, shape):
    if len(shape) <= 2:
        return g2.reshape(shape)
    moved = (shape[0],) + tuple(shape[2:]) + (shape[1],)
    return B.namespace(g2).moveaxis(g2.reshape(moved), -1, 1)


def _allreduce(arr, group):
    t = Tensor._make(arr)
    dist.all_reduce(t, group=group)
    return t._data


def _global_stats(x, group):
    """Per-channel mean, biased variance and element count over every rank's batch."""
    xp = B.namespace(x)
    axes = (0,) + tuple(range(2, x.ndim))
    c = x.shape[1]
    s = xp.empty(c + 1, dtype=x.dtype)
    s[:c] = x.sum(axis=axes)
    s[c] = x.size // c if c else 0
    s = _allreduce(s, group)
    count = float(s[c])
    if count <= 1:
        raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel when training over all "
                         f"ranks, got input size {tuple(x.shape)} on this rank and {int(count)} in all")
    mean = s[:c] / count
    xc = x - mean.reshape((1, -1) + (1,) * (x.ndim - 2))
    var = _allreduce((xc * xc).sum(axis=axes), group) / count
    return mean, var, count


class _SyncBatchNormFunction(Function):
    """y = (x - mean) * invstd * weight + bias with the global batch's statistics.  backward: with
    xhat = (x - mean) * invstd, m the global element count per channel and dyw = dy * weight,
    dx = invstd * (dyw - sum(dyw)/m - xhat * sum(dyw * xhat)/m) with the sums over all ranks
    (the derivative of the normalisation through both statistics, seed 003 §4.3.2's batch-norm
    backward with the batch spread over ranks); dweight = sum(dy * xhat), dbias = sum(dy), local."""

    def forward(self, x, weight, bias, mean, invstd, count, group):
        shape = (1, -1) + (1,) * (x.ndim - 2)
        xhat = (x - mean.reshape(shape)) * invstd.reshape(shape)
        y = xhat if weight is None else xhat * weight.reshape(shape)
        if bias is not None:
            y = y + bias.reshape(shape)
        self.save_for_backward(xhat, invstd, weight)
        self.meta = (shape, count, group)
        return y

    def backward(self, g):
        xp = self.xp
        xhat, invstd, weight = self.saved
        shape, count, group = self.meta
        axes = (0,) + tuple(range(2, g.ndim))
        c = xhat.shape[1]
        sums = xp.empty(2 * c, dtype=g.dtype)
        sums[:c] = g.sum(axis=axes)
        sums[c:] = (g * xhat).sum(axis=axes)
        gb, gw = sums[:c].copy(), sums[c:].copy()  # local: DDP averages them with the other gradients
        if weight is not None:
            sums *= xp.concatenate([weight, weight])
        tot = _allreduce(sums, group)
        scale = invstd if weight is None else weight * invstd
        dx = scale.reshape(shape) * g - (invstd * tot[:c] / count).reshape(shape) \
            - xhat * (invstd * tot[c:] / count).reshape(shape)
        return dx, gw, gb
