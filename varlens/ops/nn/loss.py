"""Fused losses: cross-entropy (with class weights, ignore_index, label smoothing), BCE with
logits, and the VAE objective's two terms (KL to the standard normal, Bernoulli NLL), each one
Function whose backward is the closed form (softmax minus one-hot for cross-entropy,
sigmoid minus target for BCE), with a ``composite`` for second derivatives."""
from __future__ import annotations
from varlens.core import array as B
from varlens.core import graph_nodes as _graph_nodes
from varlens.core import primitives as D
from varlens.core.function import Function
from varlens.ops.kernels import rows as _KR
from varlens.ops.nn.linear import _add_reduce
from varlens.ops.nn.norm import _from_rows
from varlens.ops.nn.linear import _max_reduce
from varlens.ops.nn.linear import _ndarray
from varlens.ops.reduce import sum as _reduce_sum
from varlens.ops.nn.norm import _to_rows
from varlens.ops.reduce import log_softmax
from varlens.ops.index import gather
from varlens.ops.shape import movedim
from varlens.ops.shape import reshape
from varlens.ops.activation import softplus
from varlens.ops.pointwise import clamp
from varlens.ops.pointwise import exp
from varlens.core.array import xp
from varlens.core.array import xp as _np   # the host library (NumPy): the compiled kernels' side
from varlens.ops.pointwise import torch_dtype_name, torch_dtype_name as n
from varlens.core.primitives import _sigmoid_array
from varlens.core.tensor import Tensor


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
        xp = self.xp
        if z.dtype.kind in "biu":
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
        if xp is not _np:   # a device array: the general path below, with no value read on the host
            return self._forward_device(xp, z, z2, target, weight, ignore_index, label_smoothing, reduction,
                                        probs)
        if not probs and weight is None and not label_smoothing and reduction != "none" and M \
                and target.dtype == xp.int64 and target.size == M and target.flags.c_contiguous \
                and _KR.kernel_ok(z2) and (
                all_real if all_real is not None else _all_real(target, C, ignore_index)):
            # float32 fast path compiled: softmax rows and the loss sum in one pass (ops/kernels/rows.py)
            t = target.reshape(-1)
            e, tot = _KR.cross_entropy(z2, t, use_kernel=True)
            self.save_for_backward(e)   # (saved, not an attribute: the engine frees it after backward)
            self.flat, self.fast, self.zshape, self.reduction = t + _row_offsets(M, C), True, z.shape, reduction
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
            # from one flat take; m_i - z[i, t_i] is formed per row before summing (summing m and
            # the picked logits separately cancels catastrophically when a logit is huge).
            flat = target.reshape(-1) + _row_offsets(M, C)
            self.save_for_backward(e)
            self.flat, self.fast, self.zshape, self.reduction = flat, True, z.shape, reduction
            tot = (float(_add_reduce(xp.log(s, out=s), axis=None))
                   + float(_add_reduce(m.reshape(-1) - z2.take(flat), axis=None)))
            return xp.asarray(tot / M if reduction == "mean" else tot, dtype=z.dtype)
        lse = xp.log(s) + m
        self.lse, self.zshape, self.reduction = lse, z.shape, reduction
        self.weight, self.eps, self.probs = weight, label_smoothing, probs
        eps = label_smoothing
        if probs:
            y2 = _to_rows(target)
            q = y2 * (1 - eps) + eps / C if eps else y2
            if weight is not None:
                q = q * weight
            loss = -((z2 - lse) * q).sum(axis=1)
            self.tshape = target.shape
            self.denom = M
            self.save_for_backward(e, z, q)
        else:
            self.save_for_backward(e)
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
    weight, eps, probs = None, 0.0, False   # (the fast paths set none of them)

    def _forward_device(self, xp, z, z2, target, weight, ignore_index, eps, reduction, probs):
        """The general path on the device: softmax rows, the target distribution's loss, and a
        'mean' whose denominator stays a device value (0/0 = NaN when every target is ignored,
        as PyTorch), so nothing is read on the host."""
        M, C = z2.shape
        m = z2.max(axis=1, keepdims=True)
        e = z2 - m
        xp.exp(e, out=e)                     # (in place: one buffer for the softmax rows)
        s = e.sum(axis=1, keepdims=True)
        e /= s
        lse = xp.log(s) + m
        self.lse, self.zshape, self.reduction = lse, z.shape, reduction
        self.weight, self.eps, self.probs = weight, eps, probs
        if probs:
            y2 = _to_rows(target)
            q = y2 * (1 - eps) + eps / C if eps else y2
            if weight is not None:
                q = q * weight
            loss = -((z2 - lse) * q).sum(axis=1)
            self.tshape, self.denom = target.shape, M
            self.save_for_backward(e, z, q)
        else:
            self.save_for_backward(e)
            t = target.reshape(-1)
            valid = t != ignore_index
            tt = xp.where(valid, t, 0)
            wy = weight[tt] * valid if weight is not None else valid.astype(z.dtype)
            nll = lse[:, 0] - xp.take_along_axis(z2, tt[:, None], axis=1)[:, 0]
            loss = nll * wy if eps == 0 else nll * (wy * (1 - eps))
            if eps:
                smooth = (C * lse[:, 0] - z2.sum(axis=1) if weight is None
                          else lse[:, 0] * weight.sum() - z2 @ weight)
                loss += (eps / C) * smooth * valid
            self.tt, self.wy, self.valid, self.tshape = tt, wy, valid, target.shape
            self.denom = wy.sum()
        loss = loss.astype(z.dtype, copy=False)
        if reduction == "mean":
            with xp.errstate(invalid="ignore", divide="ignore"):
                return (loss.sum() / self.denom).astype(z.dtype)
        if reduction == "sum":
            return loss.sum().astype(z.dtype)
        return loss.reshape(self.tshape if not probs else _row_shape(z.shape))

    def backward(self, g):
        xp = self.xp
        # saved: the softmax rows p (and, for probability targets, the logits z and the target
        # distribution q), freed by the engine once this has run
        p = self.saved[0]
        C = p.shape[1]
        M = p.shape[0]
        red = self.reduction
        if xp is not _np and red == "mean" and not self.probs:
            # the device's 'mean': g / denom, and 0 (PyTorch's gradient) when every target is ignored
            d = self.denom
            nz = d != 0
            g = xp.where(nz, g, 0) / xp.where(nz, d, 1)
            red = "sum"
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
            q = self.saved[2]
            gz = (q.sum(axis=1) * gi)[:, None] * p - gi[:, None] * q
            if self.next[1] is not None:
                z2 = _to_rows(self.saved[1])
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

    # ---- how the node presents itself to code walking the graph (nothing here computes)
    def torch_node_name(self):
        """PyTorch's name of the top node F.cross_entropy records (NllLossBackward0 for class
        indices without smoothing); see _ce_layout."""
        return _ce_layout(self)[0]

    @property
    def next_functions(self):
        """PyTorch's edges below that node: NllLoss -> LogSoftmax -> input, and so on
        (_ce_layout; docs/conventions.md, "Graph nodes")."""
        return _ce_layout(self)[1]

    @staticmethod
    def composite(z, target, weight=None, ignore_index=-100, label_smoothing=0.0,
                  reduction="mean", probs=False, all_real=None):
        zr = z
        if z.ndim == 1:
            zr = reshape(z, (1, -1))
        elif z.ndim > 2:
            zr = reshape(movedim(z, 1, -1), (-1, z.shape[1]))
        C = zr.shape[1]
        logp = log_softmax(zr, 1)
        eps = label_smoothing
        if probs:
            tr = target
            if target.ndim == 1:
                tr = reshape(target, (1, -1))
            elif target.ndim > 2:
                tr = reshape(movedim(target, 1, -1), (-1, C))
            q = tr * (1 - eps) + eps / C if eps else tr
            if weight is not None:
                q = q * weight
            loss = -_reduce_sum(logp * q, 1)
            denom = zr.shape[0]
        else:
            t = target._data.reshape(-1) if hasattr(target, "_data") else target.reshape(-1)
            ns = B.namespace(t)
            valid = t != ignore_index
            tt = ns.where(valid, t, 0)
            wv = weight if weight is not None else ns.ones(C, dtype=zr.dtype)
            q = ns.zeros(zr.shape, dtype=zr.dtype)
            q[ns.arange(len(t)), tt] = (1 - eps) * wv[tt]
            q += (eps / C) * wv
            q *= valid[:, None]
            loss = -_reduce_sum(logp * q, 1)
            denom = (wv[tt] * valid).sum()
            denom = float(denom) if ns is _np else Tensor._make(denom.astype(zr.dtype))  # (no host read)
            tshape = tuple(target.shape)
        if reduction == "mean":
            return _reduce_sum(loss) / denom
        if reduction == "sum":
            return _reduce_sum(loss)
        return reshape(loss, tshape if not probs else _row_shape(tuple(z.shape)))


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
    if x.__class__ is not _ndarray:   # a device array: the same composite in its library
        ns = B.namespace(x)
        return ns.maximum(-x, 0) + ns.log1p(ns.exp(-ns.abs(x)))
    t = xp.abs(x)
    xp.negative(t, out=t)
    xp.exp(t, out=t)
    xp.log1p(t, out=t)
    r = xp.negative(x)
    xp.maximum(r, B.zeros_cached(r.shape, r.dtype), out=r)
    r += t
    return r


def _bce_dtype(x, y):
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

    def forward(self, x, y, weight=None, pos_weight=None, reduction="none"):
        if y.dtype.kind in "biu" or x.dtype.kind in "biu":
            _bce_dtype(x, y)
        xp = self.xp
        self.save_for_backward(x, y, weight, pos_weight)
        sp = _softplus_neg(x) if x.ndim else xp.logaddexp(0, -x)  # log(1 + e^-x) = -log s(x)
        if pos_weight is None:
            out = (1 - y) * x + sp
        else:
            out = (1 - y) * x + (1 + (pos_weight - 1) * y) * sp
        if weight is not None:
            out = out * weight
        return reduce_loss(self, out.astype(xp.result_type(x, y), copy=False), reduction)

    def backward(self, g):
        """The elementwise derivatives above times g (g / n for 'mean'); built from the saved
        inputs with operators and primitives, so it records under create_graph."""
        x, y, w, pw = self.saved
        n = self.next
        g = loss_grad_scale(self, g)
        s = D.sigmoid(x)
        gx = gy = None
        if n[0] is not None:
            gx = s - y if pw is None else (1 - y + pw * y) * s - pw * y
            gx = g * gx if w is None else g * w * gx
        if n[1] is not None:
            xp = self.xp
            if B.is_array(x) and x.ndim:  # log s(x) = -log(1 + e^-x), without overflow
                ls_pos, ls_neg = -_softplus_neg(x), -_softplus_neg(-x)
            elif B.is_array(x):
                ls_pos, ls_neg = -xp.logaddexp(0, -x), -xp.logaddexp(0, x)
            else:
                ls_pos, ls_neg = -softplus(-x), -softplus(x)
            gy = ls_neg - ls_pos if pw is None else ls_neg - pw * ls_pos
            gy = g * gy if w is None else g * w * gy
        return gx, gy, None, None


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


# ------------------------------------------------------------------ fused ops
# The VAE objective is a chain of small elementwise ops; each is a node on the tape with its own
# Python overhead and temporaries. These three ops compute the same functions in one node each
# (array math with a closed-form backward); second derivatives go through ``composite``.
def _kl_std_normal(mu, logvar):
    """KL(N(mu, e^logvar) || N(0, 1)) per element, from differentiable ops (the composite's body)."""
    return 0.5 * (exp(logvar) + mu * mu - logvar - 1.0)


class KLStdNormal(Function):
    """KL(N(mu, diag e^logvar) || N(0, I)) summed over the last axis (seed 003 eq. 10.2.8):
    (1/2) sum (e^logvar + mu^2 - logvar - 1).  Backward: d/dmu = mu, d/dlogvar = (e^logvar - 1)/2."""

    differentiable_backward = False

    def forward(self, mu, logvar):
        v = self.xp.exp(logvar)
        self.v = v
        self.save_for_backward(mu)
        t = v - logvar
        t += mu * mu
        out = t.sum(-1) - t.shape[-1] if t.ndim else t - 1
        return out * 0.5

    def backward(self, g):
        mu, v = self.saved[0], self.v
        gc = self.xp.asarray(g)[..., None] if mu.ndim else g
        gm = mu * gc if self.next[0] is not None else None
        glv = None
        if self.next[1] is not None:
            glv = v - 1
            glv *= 0.5 * gc
        return gm, glv

    @staticmethod
    def composite(mu, logvar):
        return _kl_std_normal(mu, logvar).sum(-1) if mu.ndim else _kl_std_normal(mu, logvar)


class BernoulliNLL(Function):
    """-log p(x | z) per example for a Bernoulli decoder with logits l, summed over all axes but
    the first (seed 003 §10.2.4): sum [max(l, 0) - l x + log(1 + e^-|l|)], the stable form of
    -[x log s(l) + (1 - x) log(1 - s(l))].  Backward: d/dl = s(l) - x (the two-class case of
    seed 001 §3.1's p - y), d/dx = -l."""

    differentiable_backward = False

    def forward(self, logits, x):
        xp = self.xp
        self.save_for_backward(logits, x)
        B = logits.shape[0]
        l2 = logits.reshape(B, -1)
        x2 = x.reshape(B, -1)
        # row sums as GEMVs with a ones vector (faster than .sum(1)), and max(l, 0) summed as
        # (sum l + sum |l|) / 2 (NumPy's maximum against a scalar is a slow, unvectorised loop)
        ones = xp.ones(l2.shape[1], dtype=l2.dtype)
        sp = xp.abs(l2)
        out = l2 @ ones
        out += sp @ ones
        out *= 0.5                          # sum max(l, 0)
        xp.negative(sp, out=sp)
        xp.exp(sp, out=sp)
        sp += 1
        xp.log(sp, out=sp)                  # log(1 + e^-|l|), in (0, log 2]
        out += sp @ ones
        out -= xp.einsum("ij,ij->i", l2, x2)
        return out

    def backward(self, g):
        logits, x = self.saved
        gc = g.reshape((-1,) + (1,) * (logits.ndim - 1))
        gl = gx = None
        if self.next[0] is not None:
            gl = _sigmoid_array(logits)     # a fresh buffer: s(l) - x in place
            gl -= x
            gl *= gc
        if self.next[1] is not None:
            gx = -logits * gc
        return gl, gx

    @staticmethod
    def composite(logits, x):
        B = logits.shape[0]
        return (softplus(logits) - x * logits).reshape(B, -1).sum(1)  # BCE with logits, elementwise


class MseLoss(Function):
    """Mean squared error, one node (PyTorch's MseLossBackward0): out = reduce((x - y)^2).

    d/dx = 2 (x - y) g / n for 'mean' (n entries), 2 (x - y) g for 'sum' and 'none' (g then has
    the loss's shape); d/dy = -d/dx.  seed 003 Example 1.6.6 writes z - y: the gradient of half
    the squared error.  Backward recomputes x - y from the saved inputs, so it records correctly
    for second derivatives."""

    def forward(self, x, y, reduction="mean"):
        self.save_for_backward(x, y)
        d = x - y
        return reduce_loss(self, d * d, reduction)

    def backward(self, g):
        x, y = self.saved
        gx = (x - y) * (2.0 * loss_grad_scale(self, g))
        return gx, -gx


# ------------------------------------------------------------------ reductions folded into a loss node
# PyTorch records F.mse_loss, smooth_l1_loss, huber_loss, binary_cross_entropy(_with_logits) as
# one node whatever the reduction (MseLossBackward0, ...); these two helpers fold 'mean'/'sum'
# into such a node's forward and scale the incoming gradient in its backward.
def reduce_loss(node, out, reduction):
    """The elementwise loss ``out`` reduced by ``reduction`` ('mean', 'sum' or 'none'); notes on
    ``node`` what backward needs (the reduction and the number of elements)."""
    node.reduction = reduction
    node.n = out.size
    if reduction == "mean":
        return node.xp.asarray(out.mean(), dtype=out.dtype)
    if reduction == "sum":
        return node.xp.asarray(out.sum(), dtype=out.dtype)
    return out


def loss_grad_scale(node, g):
    """The cotangent of the elementwise loss, up to broadcasting: g / n for 'mean' (n elements;
    the derivative of the mean), g itself for 'sum' (each element counts once) and 'none'."""
    if node.reduction == "mean":
        return g * (1.0 / node.n if node.n else float("nan"))
    return g


class SmoothL1Loss(Function):
    """Smooth L1 loss, one node (PyTorch's SmoothL1LossBackward0), for beta > 0:
    l(d) = d^2 / (2 beta) where |d| < beta, |d| - beta / 2 elsewhere, d = x - y, then reduced.

    dl/dd = d / beta inside and sign(d) outside, i.e. clip(d / beta, -1, 1) (continuous at
    |d| = beta); d/dx = dl/dd g, d/dy = -d/dx (g / n for 'mean').  Backward recomputes d from
    the saved inputs with a clamp, whose own derivative (1/beta inside, 0 outside) is the
    second derivative, so create_graph records it."""

    def forward(self, x, y, reduction="mean", beta=1.0):
        xp = self.xp
        self.save_for_backward(x, y)
        self.beta = beta
        d = x - y
        ad = xp.abs(d)
        out = xp.where(ad < beta, (0.5 / beta) * d * d, ad - 0.5 * beta).astype(d.dtype, copy=False)
        return reduce_loss(self, out, reduction)

    def backward(self, g):
        """d/dx = clip((x - y) / beta, -1, 1) g and d/dy = -d/dx (g / n for 'mean')."""
        x, y = self.saved
        u = (x - y) * (1.0 / self.beta)
        gd = clamp(u, -1.0, 1.0) if isinstance(u, Tensor) else self.xp.clip(u, -1.0, 1.0)
        gd = gd * loss_grad_scale(self, g)
        n = self.next
        return (gd if n[0] is not None else None), (-gd if n[1] is not None else None)


class HuberLoss(Function):
    """Huber loss, one node (PyTorch's HuberLossBackward0), for delta > 0:
    l(d) = d^2 / 2 where |d| < delta, delta (|d| - delta / 2) elsewhere, d = x - y, then reduced
    (delta times the smooth L1 loss with beta = delta).

    dl/dd = d inside and delta sign(d) outside, i.e. clip(d, -delta, delta); d/dx = dl/dd g,
    d/dy = -d/dx (g / n for 'mean').  Built from the saved inputs, so it records for second
    derivatives (the clamp's derivative: 1 inside, 0 outside)."""

    def forward(self, x, y, reduction="mean", delta=1.0):
        xp = self.xp
        self.save_for_backward(x, y)
        self.delta = delta
        d = x - y
        ad = xp.abs(d)
        out = xp.where(ad < delta, 0.5 * d * d, delta * (ad - 0.5 * delta)).astype(d.dtype, copy=False)
        return reduce_loss(self, out, reduction)

    def backward(self, g):
        """d/dx = clip(x - y, -delta, delta) g and d/dy = -d/dx (g / n for 'mean')."""
        x, y = self.saved
        d = x - y
        dl = self.delta
        gd = clamp(d, -dl, dl) if isinstance(d, Tensor) else self.xp.clip(d, -dl, dl)
        gd = gd * loss_grad_scale(self, g)
        n = self.next
        return (gd if n[0] is not None else None), (-gd if n[1] is not None else None)


# ------------------------------------------------------------------ negative log-likelihood
def _nll_rows(x):
    """Log-probabilities (C,) / (N, C) / (N, C, d1, ...) as rows (M, C)."""
    return x.reshape(1, -1) if x.ndim == 1 else _to_rows(x)


class NllLoss(Function):
    """Negative log-likelihood of class indices, one node (PyTorch's NllLossBackward0, or
    NllLoss2DBackward0 for inputs with spatial dimensions): row i's loss is -w[t_i] x[i, t_i]
    (0 where t_i == ignore_index), then summed, or divided by the summed weights of the counted
    targets for 'mean' (NaN when there are none, with a zero gradient, as PyTorch).

    The loss is linear in x: d/dx[i, c] = -w[t_i] g_i where c == t_i and 0 elsewhere
    (g_i = g / denominator for 'mean'); it does not depend on x, so the second derivative with
    respect to x is zero; double backward (linear in g) goes through ``composite``."""

    differentiable_backward = False

    def forward(self, x, target, weight=None, ignore_index=-100, reduction="mean"):
        xp = self.xp
        x2 = _nll_rows(x)
        M, C = x2.shape
        t = target.reshape(-1)
        valid = t != ignore_index
        tt = xp.where(valid, t, 0)
        wy = (weight[tt] * valid if weight is not None else valid).astype(x.dtype, copy=False)
        loss = -xp.take_along_axis(x2, tt[:, None], axis=1)[:, 0] * wy
        self.tt, self.wy, self.xshape, self.reduction = tt, wy, x.shape, reduction
        if reduction == "mean":
            d = wy.sum()
            if xp is _np:   # (a host read: the CPU path only)
                d = float(d)
                self.inv = 1.0 / d if d else 0.0
                return xp.asarray(loss.sum() / d if d else xp.nan, dtype=x.dtype)
            nz = d != 0
            self.inv = (1.0 / xp.where(nz, d, 1) * nz).astype(x.dtype)   # 0 when every target is ignored
            with xp.errstate(invalid="ignore", divide="ignore"):
                return (loss.sum() / d).astype(x.dtype)
        if reduction == "sum":
            return xp.asarray(loss.sum(), dtype=x.dtype)
        return loss.reshape(target.shape)

    def backward(self, g):
        """d/dx: -w[t_i] g_i at (i, t_i), zero elsewhere (g_i = g times 1/denominator for 'mean')."""
        xp = self.xp
        tt, wy = self.tt, self.wy
        M = tt.shape[0]
        shape = self.xshape
        C = shape[1] if len(shape) > 1 else shape[0]
        if self.reduction == "none":
            gi = g.reshape(-1) * wy
        else:
            gi = (g * self.inv if self.reduction == "mean" else g) * wy
        gz = xp.zeros((M, C), dtype=wy.dtype)
        gz[xp.arange(M), tt] = -gi
        if len(shape) == 1:
            return gz.reshape(shape), None
        return (gz if len(shape) == 2 else _from_rows(gz, shape)), None

    @staticmethod
    def composite(x, target, weight=None, ignore_index=-100, reduction="mean"):
        xr = x
        if x.ndim == 1:
            xr = reshape(x, (1, -1))
        elif x.ndim > 2:
            xr = reshape(movedim(x, 1, -1), (-1, x.shape[1]))
        t = target._data.reshape(-1) if hasattr(target, "_data") else target.reshape(-1)
        ns = B.namespace(t)
        valid = t != ignore_index
        tt = ns.where(valid, t, 0)
        wy = (weight[tt] * valid if weight is not None else valid).astype(xr.dtype)
        picked = reshape(gather(xr, 1, Tensor._make(tt[:, None])), (-1,))
        loss = -picked * Tensor._make(wy)
        if reduction == "mean":
            d = wy.sum()
            nz = d != 0
            inv = (1.0 / ns.where(nz, d, 1) * nz).astype(xr.dtype)
            nan = ns.where(nz, 0.0, ns.nan).astype(xr.dtype)
            return _reduce_sum(loss) * Tensor._make(inv) + Tensor._make(nan)
        if reduction == "sum":
            return _reduce_sum(loss)
        return reshape(loss, tuple(target.shape))

    # ---- how the node presents itself to code walking the graph (nothing here computes)
    def torch_node_name(self):
        """NllLossBackward0 for a (C,) or (N, C) input, NllLoss2DBackward0 for (N, C, H, W); for
        other ranks PyTorch views the input as 4-D, and views a 'none' result back on top."""
        return _nll_layout(self, _graph_nodes.next_function_pairs(self.next[:1])[0])[0]

    @property
    def next_functions(self):
        return _nll_layout(self, _graph_nodes.next_function_pairs(self.next[:1])[0])[1]


def _nll_layout(node, x, nd=None, reduction=None):
    """(name, next_functions) of PyTorch 2.13's nodes for nll_loss on an nd-D input whose edge is
    ``x``: NllLoss(x) for 1-D/2-D, NllLoss2D(x) for 4-D, NllLoss2D(View(x)) for 3-D and 5-D and
    up, under a View for reduction='none' there."""
    nd = len(node.xshape) if nd is None else nd
    reduction = node.reduction if reduction is None else reduction
    if nd <= 2:
        return "NllLossBackward0", (x,)
    if nd == 4:
        return "NllLoss2DBackward0", (x,)
    if x[0] is not None:
        x = (_graph_nodes.display_node("ViewBackward0", (x,)), 0)
    if reduction != "none":
        return "NllLoss2DBackward0", (x,)
    return "ViewBackward0", ((_graph_nodes.display_node("NllLoss2DBackward0", (x,)), 0),)


def _ce_layout(node):
    """(name, next_functions) of PyTorch 2.13's nodes for F.cross_entropy, where varlens records the
    one fused CrossEntropy node: log_softmax then nll_loss for class indices; with label smoothing
    (1 - eps) * nll + eps * (smoothing term), each under a MulBackward1, added; for probability
    targets -sum(log_softmax(x) [* weight] * target), divided by N for 'mean'.  The inner nodes
    are display-only (core/graph_nodes.py) and pass no gradient."""
    dn = _graph_nodes.display_node
    x, t = _graph_nodes.next_function_pairs(node.next[:2])
    ls = (dn("LogSoftmaxBackward0", (x,)), 0) if x[0] is not None else x
    red = node.reduction
    nd = len(node.zshape)
    if node.probs:
        tedge = t if 1 not in getattr(node, "_nontensor", ()) else (None, 0)
        lw = ls
        if node.weight is not None and ls[0] is not None:
            lw = (dn("MulBackward0", (ls, (None, 0))), 0)
        mul = (dn("MulBackward0", (lw, tedge)), 0)
        s = (dn("SumBackward1" if red == "none" else "SumBackward0", (mul,)), 0)
        if red == "mean":
            return "DivBackward1", ((dn("NegBackward0", (s,)), 0),)
        return "NegBackward0", (s,)
    name, nxt = _nll_layout(node, ls, nd, red)
    if not node.eps:
        return name, nxt
    lw = ls
    if node.weight is not None and ls[0] is not None:
        lw = (dn("MulBackward0", (ls, (None, 0))), 0)
    smooth = (dn("MaskedFillBackward0", ((dn("NegBackward0", ((dn("SumBackward1", (lw,)), 0),)), 0),)), 0)
    if red != "none":
        smooth = (dn("SumBackward0", (smooth,)), 0)
        if red == "mean":
            smooth = (dn("DivBackward0", (smooth, (None, 0))), 0)
    nll = (dn(name, nxt), 0)
    return "AddBackward0", ((dn("MulBackward1", (nll,)), 0), (dn("MulBackward1", (smooth,)), 0))


class SoftMarginLoss(Function):
    """Soft margin loss, one node (PyTorch's SoftMarginLossBackward0): l = log(1 + e^(-y x))
    elementwise (computed as max(z, 0) + log(1 + e^-|z|), z = -y x, without overflow), then
    reduced.

    d/dx = -y sigmoid(-y x) g (g / n for 'mean'); PyTorch defines no derivative for the target
    (functional refuses a target that requires grad).  Backward is built from the saved inputs
    with operators and primitives, so it records for second derivatives
    (d2/dx2 = y^2 s (1 - s), s = sigmoid(-y x))."""

    def forward(self, x, y, reduction="mean"):
        xp = self.xp
        self.save_for_backward(x, y)
        z = -(y * x)
        out = xp.maximum(z, 0) + xp.log1p(xp.exp(-xp.abs(z)))
        return reduce_loss(self, out.astype(x.dtype, copy=False), reduction)

    def backward(self, g):
        """d/dx = -y sigmoid(-y x) g (g / n for 'mean')."""
        x, y = self.saved
        gx = (-y) * D.sigmoid(-(y * x))
        gx = gx * loss_grad_scale(self, g)
        if hasattr(gx, "astype"):
            gx = gx.astype(x.dtype, copy=False)
        return gx, None
