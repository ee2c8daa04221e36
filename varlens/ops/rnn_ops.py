"""Fused recurrent ops: a whole LSTM / GRU / Elman-RNN layer (one direction) as one Function.

Each op runs the time loop of seed 003 §6.1 in its forward on plain arrays and the
hand-derived back-propagation through time (seed 003 §6.1.2) in its backward.  The
input-to-hidden products of all time steps are one GEMM before the loop, and the
weight gradients are one GEMM each after the backward loop; only ``h @ W_hh^T``
(forward) and ``dA @ W_hh`` (backward) stay inside the loop.  Gate activations are
cached by the forward, so the backward does no transcendental function at all.

Weight layout and gate order are PyTorch's (so state dicts load across):

* LSTM: ``W_ih`` (4H, I), ``W_hh`` (4H, H), gate rows ``i, f, g, o``;
  ``c' = f*c + i*g``, ``h' = o*tanh(c')`` (seed 003 eq. 6.1.3).
* GRU:  ``W_ih`` (3H, I), ``W_hh`` (3H, H), gate rows ``r, z, n``;
  ``n = tanh(W_in x + b_in + r*(W_hn h + b_hn))``, ``h' = (1-z)*n + z*h``.
* RNN:  ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)`` (or relu) (seed 003 eq. 6.1.1).

Every op has one output, so a layer op returns one stacked array ``Z``:
``Z[:T]`` is the output sequence, ``Z[T]`` the final hidden state and (LSTM)
``Z[T+1]`` the final cell state.  ``lstm_layer`` / ``gru_layer`` / ``rnn_layer``
slice it apart.

Variable lengths use a mask (T, B) of 1 = real step, 0 = padding: at a padded
step the state is carried unchanged and the output is 0, so padded positions
add nothing to a loss or to any gradient.  With ``reverse=True`` the loop runs
from T-1 down to 0; the padded tail is then visited first and leaves the
initial state untouched, so each sequence's reverse pass starts at its own
last real step.

Cell ops (one time step, two results for the LSTM) are the same code with
T = 1: ``LSTMCellFunction`` returns ``[h', c']`` joined on the last axis.

Second derivatives go through ``composite`` (the same recurrence from small ops).
"""
from __future__ import annotations

from varlens.autograd.function import Function
from varlens.backend import xp


def _zeros_state(x, H):
    return xp.zeros((x.shape[1], H), dtype=x.dtype)


def _input_gemm(x, w_ih, b1, b2):
    """x (T, B, I) @ w_ih^T (+ biases) for every time step at once -> (T, B, G)."""
    T, B, I = x.shape
    xg = (x.reshape(T * B, I) @ w_ih.T).reshape(T, B, w_ih.shape[0])
    if b1 is not None:
        xg += b1
    if b2 is not None:
        xg += b2
    return xg


def _order(T, reverse):
    return range(T - 1, -1, -1) if reverse else range(T)


def _mask3(mask, x):
    if mask is None:
        return None
    return mask.reshape(mask.shape[0], mask.shape[1], 1).astype(x.dtype, copy=False)


def _weight_grads(dA, x, hprev, need_ih, need_hh):
    T, B, G = dA.shape
    flat = dA.reshape(T * B, G)
    gw_ih = flat.T @ x.reshape(T * B, x.shape[2]) if need_ih else None
    gw_hh = flat.T @ hprev.reshape(T * B, hprev.shape[2]) if need_hh else None
    return gw_ih, gw_hh


# ====================================================================== LSTM
class LSTMLayerFunction(Function):
    """One LSTM layer, one direction, whole sequence.

    Inputs ``x (T,B,I), h0 (B,H) or None, c0 (B,H) or None, w_ih (4H,I), w_hh (4H,H),
    b_ih (4H,) or None, b_hh (4H,) or None``; keywords ``reverse``, ``mask`` (T,B).
    Output ``Z (T+2, B, H)``: outputs, then h_n, then c_n.
    """

    differentiable_backward = False

    def forward(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=False, mask=None):
        T, B, _ = x.shape
        H = w_hh.shape[1]
        dt = x.dtype
        xg = _input_gemm(x, w_ih, b_ih, b_hh)
        # sigmoid(a) = 0.5 + 0.5*tanh(a/2): one tanh call activates all four gates
        scale = xp.full(4 * H, 0.5, dtype=dt)
        scale[2 * H:3 * H] = 1.0
        shift = xp.full(4 * H, 0.5, dtype=dt)
        shift[2 * H:3 * H] = 0.0
        # states in time order: HS[k] is the hidden state before step k of the loop's
        # direction (k = t going forward, k = t + 1 going backward); the step writes the other end
        HS = xp.empty((T + 1, B, H), dtype=dt)
        CS = xp.empty((T + 1, B, H), dtype=dt)
        rd, wr = (1, 0) if reverse else (0, 1)
        first = T if reverse else 0
        HS[first] = 0 if h0 is None else h0
        CS[first] = 0 if c0 is None else c0
        acts = xp.empty((T, B, 4 * H), dtype=dt)
        tcs = xp.empty((T, B, H), dtype=dt)
        whhT = w_hh.T
        m3 = _mask3(mask, x)
        for t in _order(T, reverse):
            h, c = HS[t + rd], CS[t + rd]
            a = acts[t]
            xp.matmul(h, whhT, out=a)
            a += xg[t]
            a *= scale
            xp.tanh(a, out=a)
            a *= scale
            a += shift
            if m3 is None:
                cn = xp.multiply(a[:, H:2 * H], c, out=CS[t + wr])
                cn += a[:, :H] * a[:, 2 * H:3 * H]
                tc = xp.tanh(cn, out=tcs[t])
                xp.multiply(a[:, 3 * H:], tc, out=HS[t + wr])
            else:
                m = m3[t]
                cn = a[:, H:2 * H] * c
                cn += a[:, :H] * a[:, 2 * H:3 * H]
                tc = xp.tanh(cn, out=tcs[t])
                hn = a[:, 3 * H:] * tc
                HS[t + wr] = h + m * (hn - h)
                CS[t + wr] = c + m * (cn - c)
        Z = xp.empty((T + 2, B, H), dtype=dt)
        outs = HS[:T] if reverse else HS[1:]
        if m3 is None:
            Z[:T] = outs
        else:
            xp.multiply(outs, m3, out=Z[:T])
        last = 0 if reverse else T
        Z[T] = HS[last]
        Z[T + 1] = CS[last]
        self.acts, self.tcs = acts, tcs
        self.hprev = HS[1:] if reverse else HS[:T]
        self.cprev = CS[1:] if reverse else CS[:T]
        self.x, self.w_ih, self.w_hh = x, w_ih, w_hh
        self.reverse, self.m3 = reverse, m3
        return Z

    def backward(self, G):
        """BPTT through the LSTM (seed 003 §6.1.2 with the gates of eq. 6.1.3).

        Per step, with dh, dc the cotangents of h', c':  do = dh*tanh(c'),
        dc~ = dc + dh*o*(1 - tanh(c')^2),  di = dc~*g,  df = dc~*c,  dg = dc~*i,
        dc_prev = dc~*f;  the pre-activation cotangents multiply by s(1-s) for the
        sigmoid gates and 1-g^2 for g.  dh_prev = dA @ W_hh; dW_ih = dA^T x,
        dW_hh = dA^T h_prev, db = sum dA (summed over time: shared weights).
        The factors that do not depend on the cotangents are formed for all steps at once
        before the loop: K = [g, c_prev, i, tanh(c')] * (activation derivative), P = o*(1-tanh(c')^2).
        """
        acts, hprev, cprev, tcs = self.acts, self.hprev, self.cprev, self.tcs
        T, B, H = tcs.shape
        m3 = self.m3
        K = acts * (1 - acts)  # sigmoid derivative from the cached activations ...
        gcol = acts[:, :, 2 * H:3 * H]
        K[:, :, 2 * H:3 * H] = 1 - gcol * gcol  # ... and tanh's for the g gate
        K[:, :, :H] *= gcol
        K[:, :, H:2 * H] *= cprev
        K[:, :, 2 * H:3 * H] *= acts[:, :, :H]
        K[:, :, 3 * H:] *= tcs
        P = 1 - tcs * tcs
        P *= acts[:, :, 3 * H:]
        K4 = K.reshape(T, B, 4, H)
        dA = xp.empty_like(acts)
        dA4 = dA.reshape(T, B, 4, H)
        dh = G[T].copy()
        dc = G[T + 1].copy()
        dhn = xp.empty((B, H), dtype=dh.dtype)
        dct = xp.empty((B, H), dtype=dh.dtype)
        w_hh = self.w_hh
        for t in reversed(_order(T, self.reverse)):
            xp.add(dh, G[t], out=dhn)
            f = acts[t, :, H:2 * H]
            if m3 is None:
                xp.multiply(dhn, P[t], out=dct)
                dct += dc
                xp.multiply(dct[:, None, :], K4[t, :, :3], out=dA4[t, :, :3])
                xp.multiply(dhn, K4[t, :, 3], out=dA4[t, :, 3])
                dc = dct * f
                dh = dA[t] @ w_hh
            else:
                m = m3[t]
                dhn *= m
                xp.multiply(dhn, P[t], out=dct)
                dct += dc * m
                xp.multiply(dct[:, None, :], K4[t, :, :3], out=dA4[t, :, :3])
                xp.multiply(dhn, K4[t, :, 3], out=dA4[t, :, 3])
                dc = dct * f + dc * (1 - m)
                dh = dA[t] @ w_hh + dh * (1 - m)
        n = self.next
        gx = (dA.reshape(T * B, 4 * H) @ self.w_ih).reshape(self.x.shape) if n[0] is not None else None
        gw_ih, gw_hh = _weight_grads(dA, self.x, hprev, n[3] is not None, n[4] is not None)
        gb = dA.sum(axis=(0, 1)) if (n[5] is not None or n[6] is not None) else None
        return (gx, dh if n[1] is not None else None, dc if n[2] is not None else None,
                gw_ih, gw_hh, gb if n[5] is not None else None, gb if n[6] is not None else None)

    @staticmethod
    def composite(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=False, mask=None):
        return _lstm_composite(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, mask)


# ====================================================================== GRU
class GRULayerFunction(Function):
    """One GRU layer, one direction, whole sequence (PyTorch's r, z, n layout).

    Inputs ``x (T,B,I), h0 (B,H) or None, w_ih (3H,I), w_hh (3H,H), b_ih, b_hh``;
    keywords ``reverse``, ``mask``.  Output ``Z (T+1, B, H)``: outputs, then h_n.
    """

    differentiable_backward = False

    def forward(self, x, h0, w_ih, w_hh, b_ih, b_hh, reverse=False, mask=None):
        T, B, _ = x.shape
        H = w_hh.shape[1]
        dt = x.dtype
        xg = _input_gemm(x, w_ih, b_ih, None)
        h = _zeros_state(x, H) if h0 is None else h0
        rz = xp.empty((T, B, 2 * H), dtype=dt)
        ns = xp.empty((T, B, H), dtype=dt)
        hgn = xp.empty((T, B, H), dtype=dt)
        hprev = xp.empty((T, B, H), dtype=dt)
        Z = xp.empty((T + 1, B, H), dtype=dt)
        whhT = w_hh.T
        m3 = _mask3(mask, x)
        for t in _order(T, reverse):
            hprev[t] = h
            hg = h @ whhT
            if b_hh is not None:
                hg += b_hh
            s = rz[t]
            xp.add(xg[t, :, :2 * H], hg[:, :2 * H], out=s)
            s *= 0.5
            xp.tanh(s, out=s)
            s *= 0.5
            s += 0.5
            hgn[t] = hg[:, 2 * H:]
            n = ns[t]
            xp.multiply(s[:, :H], hg[:, 2 * H:], out=n)
            n += xg[t, :, 2 * H:]
            xp.tanh(n, out=n)
            hn = h - n
            hn *= s[:, H:]
            hn += n
            if m3 is None:
                Z[t] = hn
                h = hn
            else:
                m = m3[t]
                Z[t] = hn * m
                h = h + m * (hn - h)
        Z[T] = h
        self.rz, self.ns, self.hgn, self.hprev = rz, ns, hgn, hprev
        self.x, self.w_ih, self.w_hh = x, w_ih, w_hh
        self.reverse, self.m3 = reverse, m3
        return Z

    def backward(self, G):
        """BPTT through the GRU (seed 003 §6.1.2; the GRU of Cho et al., seed 003 §6.7.1).

        Per step, with dh the cotangent of h' = n + z*(h - n):  dn = dh*(1-z),
        dz = dh*(h - n), and through n = tanh(a_n):  da_n = dn*(1-n^2).  The input
        part of n gets da_n, the hidden part gets da_n*r, and dr = da_n*(W_hn h + b_hn).
        r and z are sigmoids: da = d*s*(1-s).  dh_prev = dh*z + dGh @ W_hh.
        """
        rz, ns, hgn, hprev = self.rz, self.ns, self.hgn, self.hprev
        T, B, H = ns.shape
        m3 = self.m3
        drz = rz * (1 - rz)
        dns = 1 - ns * ns
        dGi = xp.empty((T, B, 3 * H), dtype=ns.dtype)
        dGh = xp.empty_like(dGi)
        dh = G[T].copy()
        w_hh = self.w_hh
        for t in reversed(_order(T, self.reverse)):
            if m3 is None:
                dh += G[t]
                dhn = dh
            else:
                m = m3[t]
                dhn = (dh + G[t]) * m
            z = rz[t, :, H:]
            n = ns[t]
            gi = dGi[t]
            gh = dGh[t]
            dan = gi[:, 2 * H:]
            xp.multiply(dhn, 1 - z, out=dan)
            dan *= dns[t]
            xp.multiply(dan, hgn[t], out=gi[:, :H])
            xp.multiply(dhn, hprev[t] - n, out=gi[:, H:2 * H])
            gi[:, :2 * H] *= drz[t]
            gh[:, :2 * H] = gi[:, :2 * H]
            xp.multiply(dan, rz[t, :, :H], out=gh[:, 2 * H:])
            if m3 is None:
                dh = dhn * z + gh @ w_hh
            else:
                dh = dhn * z + gh @ w_hh + dh * (1 - m)
        n_ = self.next
        gx = (dGi.reshape(T * B, 3 * H) @ self.w_ih).reshape(self.x.shape) if n_[0] is not None else None
        gw_ih, _ = _weight_grads(dGi, self.x, hprev, n_[2] is not None, False)
        _, gw_hh = _weight_grads(dGh, self.x, hprev, False, n_[3] is not None)
        gb_ih = dGi.sum(axis=(0, 1)) if n_[4] is not None else None
        gb_hh = dGh.sum(axis=(0, 1)) if n_[5] is not None else None
        return gx, (dh if n_[1] is not None else None), gw_ih, gw_hh, gb_ih, gb_hh

    @staticmethod
    def composite(x, h0, w_ih, w_hh, b_ih, b_hh, reverse=False, mask=None):
        return _gru_composite(x, h0, w_ih, w_hh, b_ih, b_hh, reverse, mask)


# ====================================================================== Elman RNN
class RNNLayerFunction(Function):
    """One Elman RNN layer (tanh or relu), one direction, whole sequence (seed 003 eq. 6.1.1).

    Inputs ``x, h0 or None, w_ih (H,I), w_hh (H,H), b_ih, b_hh``; keywords
    ``nonlinearity`` ('tanh' | 'relu'), ``reverse``, ``mask``.  Output ``Z (T+1, B, H)``.
    """

    differentiable_backward = False

    def forward(self, x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh", reverse=False, mask=None):
        T, B, _ = x.shape
        H = w_hh.shape[1]
        xg = _input_gemm(x, w_ih, b_ih, b_hh)
        h = _zeros_state(x, H) if h0 is None else h0
        hs = xp.empty((T, B, H), dtype=x.dtype)
        hprev = xp.empty((T, B, H), dtype=x.dtype)
        Z = xp.empty((T + 1, B, H), dtype=x.dtype)
        whhT = w_hh.T
        m3 = _mask3(mask, x)
        relu = nonlinearity == "relu"
        for t in _order(T, reverse):
            hprev[t] = h
            a = hs[t]
            xp.matmul(h, whhT, out=a)
            a += xg[t]
            if relu:
                xp.maximum(a, 0, out=a)
            else:
                xp.tanh(a, out=a)
            if m3 is None:
                Z[t] = a
                h = a
            else:
                m = m3[t]
                Z[t] = a * m
                h = h + m * (a - h)
        Z[T] = h
        self.hs, self.hprev, self.x, self.w_ih, self.w_hh = hs, hprev, x, w_ih, w_hh
        self.reverse, self.m3, self.relu = reverse, m3, relu
        return Z

    def backward(self, G):
        """BPTT for h_t = f(x_t W_ih^T + h_{t-1} W_hh^T + b) (seed 003 §6.1.2): the cotangent of
        the pre-activation is dh * f'(a), with f' = 1 - h^2 (tanh) or 1{h > 0} (relu); it
        flows to h_{t-1} through W_hh, which is the repeated product behind vanishing and
        exploding gradients (seed 003 §6.1.3)."""
        hs, hprev = self.hs, self.hprev
        T, B, H = hs.shape
        m3 = self.m3
        fp = (hs > 0).astype(hs.dtype) if self.relu else 1 - hs * hs
        dA = xp.empty_like(hs)
        dh = G[T].copy()
        w_hh = self.w_hh
        for t in reversed(_order(T, self.reverse)):
            if m3 is None:
                dh += G[t]
                xp.multiply(dh, fp[t], out=dA[t])
                dh = dA[t] @ w_hh
            else:
                m = m3[t]
                xp.multiply((dh + G[t]) * m, fp[t], out=dA[t])
                dh = dA[t] @ w_hh + dh * (1 - m)
        n = self.next
        gx = (dA.reshape(T * B, H) @ self.w_ih).reshape(self.x.shape) if n[0] is not None else None
        gw_ih, gw_hh = _weight_grads(dA, self.x, hprev, n[2] is not None, n[3] is not None)
        gb = dA.sum(axis=(0, 1)) if (n[4] is not None or n[5] is not None) else None
        return (gx, dh if n[1] is not None else None, gw_ih, gw_hh,
                gb if n[4] is not None else None, gb if n[5] is not None else None)

    @staticmethod
    def composite(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh", reverse=False, mask=None):
        return _rnn_composite(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse, mask)


# ====================================================================== cells (T = 1)
class LSTMCellFunction(LSTMLayerFunction):
    """One LSTM step: ``(x (B,I), h, c, w_ih, w_hh, b_ih, b_hh) -> [h', c'] (B, 2H)``.

    The layer op's forward and backward with T = 1 (same cached gates, same derivatives)."""

    def forward(self, x, h, c, w_ih, w_hh, b_ih, b_hh):
        Z = super().forward(x[None], h, c, w_ih, w_hh, b_ih, b_hh)
        return xp.concatenate([Z[1], Z[2]], axis=-1)

    def backward(self, g):
        """Splits the cotangent of [h', c'] and runs the LSTM step backward (see the layer op)."""
        H = g.shape[-1] // 2
        G = xp.zeros((3,) + g.shape[:-1] + (H,), dtype=g.dtype)
        G[1] = g[..., :H]
        G[2] = g[..., H:]
        grads = super().backward(G)
        return (grads[0][0] if grads[0] is not None else None,) + tuple(grads[1:])

    @staticmethod
    def composite(x, h, c, w_ih, w_hh, b_ih, b_hh):
        from varlens import ops as O
        Z = _lstm_composite(O.unsqueeze(x, 0), h, c, w_ih, w_hh, b_ih, b_hh, False, None)
        return O.cat([Z[1], Z[2]], dim=-1)


class GRUCellFunction(GRULayerFunction):
    """One GRU step: ``(x (B,I), h, w_ih, w_hh, b_ih, b_hh) -> h' (B, H)`` (the layer op with T = 1)."""

    def forward(self, x, h, w_ih, w_hh, b_ih, b_hh):
        return super().forward(x[None], h, w_ih, w_hh, b_ih, b_hh)[1]

    def backward(self, g):
        """The GRU step backward of the layer op, cotangent placed on h_n."""
        G = xp.zeros((2,) + g.shape, dtype=g.dtype)
        G[1] = g
        grads = super().backward(G)
        return (grads[0][0] if grads[0] is not None else None,) + tuple(grads[1:])

    @staticmethod
    def composite(x, h, w_ih, w_hh, b_ih, b_hh):
        from varlens import ops as O
        return _gru_composite(O.unsqueeze(x, 0), h, w_ih, w_hh, b_ih, b_hh, False, None)[1]


class RNNCellFunction(RNNLayerFunction):
    """One Elman step: ``(x (B,I), h, w_ih, w_hh, b_ih, b_hh) -> h'`` (the layer op with T = 1)."""

    def forward(self, x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh"):
        return super().forward(x[None], h, w_ih, w_hh, b_ih, b_hh, nonlinearity)[1]

    def backward(self, g):
        """The Elman step backward of the layer op, cotangent placed on h_n."""
        G = xp.zeros((2,) + g.shape, dtype=g.dtype)
        G[1] = g
        grads = super().backward(G)
        return (grads[0][0] if grads[0] is not None else None,) + tuple(grads[1:])

    @staticmethod
    def composite(x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh"):
        from varlens import ops as O
        return _rnn_composite(O.unsqueeze(x, 0), h, w_ih, w_hh, b_ih, b_hh, nonlinearity, False, None)[1]


# ====================================================================== composites (small ops)
def _prep(x, h0, H, w_ih, b_ih, b_hh, mask):
    from varlens import ops as O
    from varlens.tensor import Tensor
    T = x.shape[0]
    xg = O.matmul(x, O.transpose(w_ih, 0, 1))
    if b_ih is not None:
        xg = xg + b_ih
    if b_hh is not None:
        xg = xg + b_hh
    h = h0 if h0 is not None else Tensor._make(xp.zeros((x.shape[1], H), dtype=x.dtype))
    m3 = None if mask is None else Tensor._make(_mask3(mask, x._data))
    return O, Tensor, T, xg, h, m3


def _lstm_composite(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, mask):
    H = w_hh.shape[1]
    O, Tensor, T, xg, h, m3 = _prep(x, h0, H, w_ih, b_ih, b_hh, mask)
    c = c0 if c0 is not None else Tensor._make(xp.zeros((x.shape[1], H), dtype=x.dtype))
    whhT = O.transpose(w_hh, 0, 1)
    outs = [None] * T
    for t in _order(T, reverse):
        a = xg[t] + O.matmul(h, whhT)
        i = O.sigmoid(a[:, :H])
        f = O.sigmoid(a[:, H:2 * H])
        g = O.tanh(a[:, 2 * H:3 * H])
        o = O.sigmoid(a[:, 3 * H:])
        cn = f * c + i * g
        hn = o * O.tanh(cn)
        if m3 is None:
            outs[t], h, c = hn, hn, cn
        else:
            m = m3[t]
            outs[t] = hn * m
            h = h + m * (hn - h)
            c = c + m * (cn - c)
    return O.stack(outs + [h, c], dim=0)


def _gru_composite(x, h0, w_ih, w_hh, b_ih, b_hh, reverse, mask):
    H = w_hh.shape[1]
    O, Tensor, T, xg, h, m3 = _prep(x, h0, H, w_ih, b_ih, None, mask)
    whhT = O.transpose(w_hh, 0, 1)
    outs = [None] * T
    for t in _order(T, reverse):
        hg = O.matmul(h, whhT)
        if b_hh is not None:
            hg = hg + b_hh
        r = O.sigmoid(xg[t][:, :H] + hg[:, :H])
        z = O.sigmoid(xg[t][:, H:2 * H] + hg[:, H:2 * H])
        n = O.tanh(xg[t][:, 2 * H:] + r * hg[:, 2 * H:])
        hn = n + z * (h - n)
        if m3 is None:
            outs[t], h = hn, hn
        else:
            m = m3[t]
            outs[t] = hn * m
            h = h + m * (hn - h)
    return O.stack(outs + [h], dim=0)


def _rnn_composite(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse, mask):
    H = w_hh.shape[1]
    O, Tensor, T, xg, h, m3 = _prep(x, h0, H, w_ih, b_ih, b_hh, mask)
    whhT = O.transpose(w_hh, 0, 1)
    act = O.relu if nonlinearity == "relu" else O.tanh
    outs = [None] * T
    for t in _order(T, reverse):
        hn = act(xg[t] + O.matmul(h, whhT))
        if m3 is None:
            outs[t], h = hn, hn
        else:
            m = m3[t]
            outs[t] = hn * m
            h = h + m * (hn - h)
    return O.stack(outs + [h], dim=0)


# ====================================================================== user-facing helpers
def _mask_array(mask):
    if mask is None:
        return None
    return mask._data if hasattr(mask, "_data") else xp.asarray(mask)


def lstm_layer(x, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False, mask=None):
    """Run one LSTM direction over ``x`` (T, B, I); returns ``(output (T,B,H), h_n, c_n)``."""
    T = x.shape[0]
    Z = LSTMLayerFunction.apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=reverse,
                                mask=_mask_array(mask))
    return Z[:T], Z[T], Z[T + 1]


def gru_layer(x, h0, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False, mask=None):
    """Run one GRU direction over ``x`` (T, B, I); returns ``(output (T,B,H), h_n)``."""
    T = x.shape[0]
    Z = GRULayerFunction.apply(x, h0, w_ih, w_hh, b_ih, b_hh, reverse=reverse,
                               mask=_mask_array(mask))
    return Z[:T], Z[T]


def rnn_layer(x, h0, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity="tanh", reverse=False, mask=None):
    """Run one Elman-RNN direction over ``x`` (T, B, I); returns ``(output (T,B,H), h_n)``."""
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"rnn_layer: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    T = x.shape[0]
    Z = RNNLayerFunction.apply(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity=nonlinearity,
                               reverse=reverse, mask=_mask_array(mask))
    return Z[:T], Z[T]


def lstm_cell(x, h, c, w_ih, w_hh, b_ih=None, b_hh=None):
    """One fused LSTM step; returns ``(h', c')``."""
    H = w_hh.shape[1]
    hc = LSTMCellFunction.apply(x, h, c, w_ih, w_hh, b_ih, b_hh)
    return hc[..., :H], hc[..., H:]


def gru_cell(x, h, w_ih, w_hh, b_ih=None, b_hh=None):
    """One fused GRU step; returns ``h'``."""
    return GRUCellFunction.apply(x, h, w_ih, w_hh, b_ih, b_hh)


def rnn_cell(x, h, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity="tanh"):
    """One fused Elman step; returns ``h'``."""
    return RNNCellFunction.apply(x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity=nonlinearity)
