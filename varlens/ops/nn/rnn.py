"""Fused recurrent ops: a whole LSTM / GRU / Elman-RNN layer (one direction) as one Function.

Each op runs the time loop of seed 003 §6.1 in its forward on plain arrays and the
hand-derived back-propagation through time (seed 003 §6.1.2) in its backward.  For the
GRU and the Elman RNN the input-to-hidden products of all time steps are one GEMM before
the loop; the LSTM instead does one GEMM per step over [x_t; h; 1] (bias folded in, see
its class).  The weight gradients are one GEMM each after the backward loop (the LSTM's
dW_ih, dW_hh and biases one GEMM together); only one small GEMM per step stays in each
loop.  Gate activations are cached by the forward, so the backward does no
transcendental function at all.  The ops' private buffers come from a small pool (see
"workspaces" below); outputs and gradients are always fresh arrays.

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

On the CUDA device the same code runs with the inputs' array library (``self.xp``): the time
loop stays in Python, as in PyTorch without cuDNN, and each step is a few device ops (one GEMM
and in-place elementwise updates); nothing is read back to the host.  The workspace pool below
is for host buffers only (CuPy has its own memory pool).
"""
from __future__ import annotations

import weakref as _weakref

from varlens.core.function import Function
from varlens.core.array import xp
from varlens.core import array as B
from varlens.ops.linalg import matmul as _linalg_matmul
from varlens.ops.kernels.recurrent import embed_kernels, huge_page_empty, lstm_step_kernels, step_gemm
from varlens.ops.activation import relu
from varlens.ops.nn.embedding import Embedding as _Embedding
from varlens.ops.pointwise import sigmoid, tanh
from varlens.ops.shape import cat, stack, transpose, unsqueeze
from varlens.core.tensor import Tensor


def _zeros_state(xp, x, H):
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


# ====================================================================== workspaces
# The layer ops work in buffers of (T, B, 4H) and (T+1, B, H) floats.  A fresh multi-megabyte
# array comes from the kernel as untouched pages, and first-touching them costs more than the
# arithmetic (measured: ~4,000 page faults, a third of an LSTM(128) training step).  So each op
# borrows its buffers from a small pool and the pool takes them back once the op can no
# longer need them: its node was freed, or its backward ran without retain_graph (the engine
# then sets ``node.saved = None``).  Outputs and gradients handed to the caller are always
# fresh arrays; only the op's private caches live in the pool.
_POOL_FREE = {}      # key -> [workspace dict, ...]
_POOL_LENT = []      # [(weakref to the op node, key, workspace), ...], newest last
_POOL_MAX_LENT = 64  # older borrowers are forgotten (their buffers are then freed normally)
_POOL_MAX_FREE = 2   # spare workspaces kept per key
_POOL_MAX_BYTES = 64 * 2 ** 20  # larger workspaces are not pooled


def clear_workspace_pool():
    """Drop every pooled buffer of the recurrent ops (frees their memory)."""
    _POOL_FREE.clear()
    del _POOL_LENT[:]


def _reclaim():
    keep = []
    for ent in _POOL_LENT:
        node = ent[0]()
        if node is None or node.saved is None:
            free = _POOL_FREE.setdefault(ent[1], [])
            if len(free) < _POOL_MAX_FREE:
                free.append(ent[2])
        else:
            keep.append(ent)
    _POOL_LENT[:] = keep[-_POOL_MAX_LENT:]


def _borrow(node, key, nbytes):
    """A workspace dict for ``key`` (reused when one is free), lent to ``node``; a fresh one for
    device ops (their buffers come from the device library's own pool)."""
    if nbytes > _POOL_MAX_BYTES or node.xp is not xp:
        return {}
    _reclaim()
    free = _POOL_FREE.get(key)
    ws = free.pop() if free else {}
    if len(_POOL_FREE) > 16:
        _POOL_FREE.clear()
    _POOL_LENT.append((_weakref.ref(node), key, ws))
    return ws


def _buf(ws, name, shape, dt, lib):
    """The workspace buffer ``name`` (allocated with the array library ``lib`` on first use;
    contents undefined).  Host buffers of _HUGE_MIN bytes or more are carved from chunks on
    huge pages (``_carve``)."""
    a = ws.get(name)
    if a is None:
        nbytes = dt.itemsize
        for d in shape:
            nbytes *= d
        if lib is xp and nbytes >= _HUGE_MIN:
            a = ws[name] = _carve(ws, nbytes).view(dt).reshape(shape)
        else:
            a = ws[name] = lib.empty(shape, dtype=dt)
    return a


# The per-step products and the passes between them walk these buffers in (K, B) and (4H, B)
# blocks whose rows lie (T+1) B floats apart, a 4 KiB page per row: on ordinary pages most of
# those reads miss the TLB.  So a workspace's large buffers share chunks of memory advised for
# transparent huge pages (Linux; ``huge_page_empty``), bump-allocated (64-byte aligned) and
# freed with the workspace.  Same-process A/B on the 2-layer char-LSTM training step (batch 32,
# 9 interleaved rounds, load 6.5): 21.09 ms on ordinary pages, 19.77 ms with this.
_HUGE_MIN = 1 << 18          # buffers from 256 KiB
_HUGE_CHUNK = 4 << 20        # chunk size (larger for a buffer that needs more)


def _carve(ws, nbytes):
    """``nbytes`` of uninitialised uint8 host memory from the workspace's current huge-page
    chunk (a new chunk when it is full)."""
    need = -(-nbytes // 64) * 64
    chunk, top = ws.get("_chunk"), ws.get("_top", 0)
    if chunk is None or top + need > chunk.size:
        chunk = ws["_chunk"] = huge_page_empty((max(need, _HUGE_CHUNK),), xp.uint8)
        top = 0
    ws["_top"] = top + need
    return chunk[top:top + nbytes]


# ====================================================================== LSTM
# The fused LSTM works gate-major ("transposed"): a step's gates are a (4H, B) block and its
# states (H, B), so every step is ``W_hh @ h`` (the BLAS-friendly orientation for these thin
# products) and each gate is one contiguous (H, B) block.  In the forward the gate blocks are
# ordered o, i, f, g (PyTorch's rows i, f, g, o are permuted once per call), so the three
# sigmoid gates are one block; in the backward the cotangents are written in PyTorch's order,
# where the three gates driven by dc~ (i, f, g) are again one block and the weight gradients
# come out in the parameters' layout.
_LSTM_PERM = (3, 0, 1, 2)   # internal block k holds PyTorch gate block _LSTM_PERM[k]



def _store_step(Z, t, hn, h, m3):
    """Write step t's output into Z and return the state carried on: hn, or, with a mask
    (padded sequences), hn where the mask is 1 and the previous state where it is 0 (the
    output there is 0)."""
    if m3 is None:
        Z[t] = hn
        return hn
    m = m3[t]
    Z[t] = hn * m
    return h + m * (hn - h)

class LSTMLayerFunction(Function):
    """One LSTM layer, one direction, whole sequence.

    Inputs ``x (T,B,I), h0 (B,H) or None, c0 (B,H) or None, w_ih (4H,I), w_hh (4H,H),
    b_ih (4H,) or None, b_hh (4H,) or None``; keywords ``reverse``, ``mask`` (T,B).
    Output ``Z (T+2, B, H)``: outputs, then h_n, then c_n.

    Work layout: XH (I+H+1, T+1, B) holds, column block by column block, x_t, the hidden
    state before step t and a row of ones, and W = [W_ih | W_hh | b_ih + b_hh] (4H, I+H+1)
    (internal gate order, sigmoid rows pre-halved), so each step's pre-activations are ONE
    GEMM ``W @ XH[:, t]`` straight into that step's (4H, B) block of ACT, bias included.
    ACT is activated in place with sigmoid(a) = (1 + tanh(a/2))/2, so one tanh call covers
    all four gates, and keeps the activations the backward reads.  In the backward the
    gradients of W_ih, W_hh and both biases are then one GEMM, ``dA @ XH^T``.
    For float32 host arrays without a mask, the work between a step's GEMMs (activations and
    cell update forward; the step's cotangents, with the derivative factors formed on the
    fly, backward) is one compiled pass (varlens/ops/kernels/recurrent.py); otherwise NumPy.
    With those, and a batch of 16, 32, 48 or 64, the per-step GEMMs (W @ XH[:, t] forward,
    W_hh^T dA_t backward) are also compiled: W is packed once per call and kept in the
    kernel's layout for all T steps (``step_gemm``; NumPy's BLAS re-packs it on every call).
    """

    differentiable_backward = False

    def forward(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=False, mask=None):
        return self._run(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, mask, None)

    def _run(self, x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, mask, emb):
        """The forward.  ``emb`` (``LSTMEmbedLayerFunction``): None, or ``((T, B), fill)`` where
        ``fill(ACT)`` writes every step's input projection (internal gate order, sigmoid rows
        halved) into ACT; x and w_ih are then None, I = 0 (XH holds [h; 1] only) and each
        step adds ``W @ [h; 1]`` to its ACT block instead of overwriting it."""
        xp = self.xp
        H = w_hh.shape[1]
        if emb is None:
            T, B, I = x.shape
            dt = x.dtype
        else:
            (T, B), I, dt = emb[0], 0, w_hh.dtype
        G4, H2, H3 = 4 * H, 2 * H, 3 * H
        K = I + H + 1
        ws = _borrow(self, ("lstm", T, B, I, H, dt.str),
                     (4 * T * B * G4 + (T + 1) * B * (K + 4 * H)) * dt.itemsize)
        # W = [W_ih | W_hh | b] with the gate blocks in internal order, sigmoid rows halved
        W = _buf(ws, "W", (G4, K), dt, xp)
        for k, j in enumerate(_LSTM_PERM):
            dst, src = W[k * H:(k + 1) * H], slice(j * H, (j + 1) * H)
            if I:
                dst[:, :I] = w_ih[src]
            dst[:, I:I + H] = w_hh[src]
            if b_ih is None and b_hh is None:
                dst[:, I + H] = 0
            elif b_hh is None or b_ih is None:
                dst[:, I + H] = (b_ih if b_hh is None else b_hh)[src]
            else:
                xp.add(b_ih[src], b_hh[src], out=dst[:, I + H])
        W[:H3] *= 0.5
        # XH[:, k]: the input and state that step k reads (k = t going forward, t + 1 backward)
        XH = _buf(ws, "XH", (K, T + 1, B), dt, xp)
        rd, wr = (1, 0) if reverse else (0, 1)
        first, last = (T, 0) if reverse else (0, T)
        if I:
            XH[:I, rd:T + rd] = x.transpose(2, 0, 1)
        XH[I + H] = 1
        HS = XH[I:I + H]                          # (H, T+1, B): the hidden states
        HS[:, first] = 0 if h0 is None else h0.T
        CS = _buf(ws, "CS", (T + 1, H, B), dt, xp)
        CS[first] = 0 if c0 is None else c0.T
        ACT = _buf(ws, "ACT", (T, G4, B), dt, xp)
        if emb is not None:
            emb[1](ACT)                           # the input projections W_ih x_t, gathered
            a4 = _buf(ws, "a4", (G4, B), dt, xp)
        TC = _buf(ws, "TC", (T, H, B), dt, xp)
        ig = _buf(ws, "ig", (H, B), dt, xp)
        mstep = None
        if mask is not None:
            mstep = mask.astype(dt, copy=False).reshape(T, 1, B)
        mul, add, tanh, matmul = xp.multiply, xp.add, xp.tanh, xp.matmul
        kern = lstm_step_kernels(ACT, CS, TC, XH) if mstep is None else None
        mk = step_gemm(B) if kern is not None else None
        if mk is not None:                        # W packed once for all steps (kernels/recurrent.py)
            _buf(ws, "Wp", (G4 * K,), dt, xp)      # (the packed copy's buffer, on huge pages)
            mk.lstm_forward(mk.pack(W, False, G4, B, K, ws, "Wp"), ACT, CS, TC, XH, T, reverse, I,
                            accumulate=emb is not None)
        elif kern is not None:                    # one compiled pass per step (ops/kernels/recurrent.py)
            fstep = kern[0]
            for t in _order(T, reverse):
                if emb is None:
                    matmul(W, XH[:, t + rd], out=ACT[t])
                else:
                    add(ACT[t], matmul(W, XH[:, t + rd], out=a4), out=ACT[t])
                fstep(ACT, CS, TC, XH, t, t + rd, t + wr, I, t + wr)
        for t in (() if kern is not None else _order(T, reverse)):
            a = ACT[t]
            if emb is None:
                matmul(W, XH[:, t + rd], out=a)
            else:
                add(a, matmul(W, XH[:, t + rd], out=a4), out=a)
            tanh(a, out=a)
            s = a[:H3]
            mul(s, 0.5, out=s)
            add(s, 0.5, out=s)                    # o, i, f are sigmoids now; g stays tanh
            c = CS[t + rd]
            if mstep is None:
                cn = mul(a[H2:H3], c, out=CS[t + wr])
                mul(a[H:H2], a[H3:], out=ig)
                add(cn, ig, out=cn)
                tc = tanh(cn, out=TC[t])
                mul(a[:H], tc, out=HS[:, t + wr])
            else:
                m = mstep[t]
                h = HS[:, t + rd]
                cn = a[H2:H3] * c
                cn += a[H:H2] * a[H3:]
                tc = tanh(cn, out=TC[t])
                hn = a[:H] * tc
                HS[:, t + wr] = h + m * (hn - h)
                CS[t + wr] = c + m * (cn - c)
        Z = xp.empty((T + 2, B, H), dtype=dt)
        outs = HS[:, :T] if reverse else HS[:, 1:]          # (H, T, B)
        if mstep is None:
            Z[:T] = outs.transpose(1, 2, 0)
        else:
            xp.multiply(outs.transpose(1, 2, 0), mask.astype(dt, copy=False)[:, :, None], out=Z[:T])
        Z[T] = HS[:, last].T
        Z[T + 1] = CS[last].T
        self.ws, self.ACT, self.TC, self.XH, self.CS = ws, ACT, TC, XH, CS
        self.dims = (I, H)
        self.w_ih, self.w_hh = w_ih, w_hh
        self.reverse, self.mstep, self.kern = reverse, mstep, kern
        self.emb = emb
        return Z

    def backward(self, G):
        """BPTT through the LSTM (seed 003 §6.1.2 with the gates of eq. 6.1.3).

        Per step, with dh, dc the cotangents of h', c':  do = dh*tanh(c'),
        dc~ = dc + dh*o*(1 - tanh(c')^2),  di = dc~*g,  df = dc~*c,  dg = dc~*i,
        dc_prev = dc~*f;  the pre-activation cotangents multiply by s(1-s) for the
        sigmoid gates and 1-g^2 for g.  dh_prev = W_hh^T dA; dW_ih = dA^T x,
        dW_hh = dA^T h_prev, db = sum dA (summed over time: shared weights).
        The factors that do not depend on the cotangents are formed for all steps at once
        before the loop: K = [tanh(c'), g, c_prev, i] * (activation derivative) for the
        blocks o, i, f, g, and P = o*(1-tanh(c')^2).  The cotangent of every hidden state
        lives in one buffer DH (indexed like the forward's states): it starts as the output
        cotangents and each step adds ``W_hh^T dA_t`` into the slot of its previous state, so
        the loop has one small GEMM and dW_ih, dW_hh, dx, db are one GEMM/sum each after it.
        With a mask m, h' = h + m*(h~ - h) (and c' likewise) passes (1-m) of each
        cotangent straight to the previous state and m of it into the step.
        """
        xp = self.xp
        ACT, TC, XH, CS, ws = self.ACT, self.TC, self.XH, self.CS, self.ws
        T, H, B = TC.shape
        I = self.dims[0]
        G4, H2, H3 = 4 * H, 2 * H, 3 * H
        dt = ACT.dtype
        mstep = self.mstep
        reverse = self.reverse
        rd, wr = (1, 0) if reverse else (0, 1)
        first, last = (T, 0) if reverse else (0, T)
        cprev = CS[1:] if reverse else CS[:T]
        mul, add, sub, matmul = xp.multiply, xp.add, xp.subtract, xp.matmul
        kern = self.kern
        if kern is None:
            # K: derivative factors of the four pre-activations, all steps at once (the
            # compiled step forms them on the fly)
            K = _buf(ws, "K", (T, G4, B), dt, xp)
            Ks, Ss = K[:, :H3], ACT[:, :H3]
            sub(1, Ss, out=Ks)
            mul(Ks, Ss, out=Ks)                       # s(1-s) for the sigmoid gates o, i, f
            o_, i_, _, g_ = ACT[:, :H], ACT[:, H:H2], ACT[:, H2:H3], ACT[:, H3:]
            Kg = K[:, H3:]
            mul(g_, g_, out=Kg)
            sub(1, Kg, out=Kg)                        # 1 - g^2
            Kg *= i_
            K[:, :H] *= TC
            K[:, H:H2] *= g_
            K[:, H2:H3] *= cprev
            P = _buf(ws, "P", (T, H, B), dt, xp)
            mul(TC, TC, out=P)
            sub(1, P, out=P)
            P *= o_
        # dA: pre-activation cotangents of all steps, gate-major and in PyTorch's row order
        # (i, f, g, o), so the weight gradients come out of one GEMM in the parameters' layout
        dA = _buf(ws, "dA", (G4, T, B), dt, xp)
        dA_ifg = dA.reshape(4, H, T, B)[:3]
        dA_o = dA[H3:]
        DH = _buf(ws, "DH", (T + 1, H, B), dt, xp)
        outs = DH[:T] if reverse else DH[1:]
        if mstep is None:
            outs[...] = G[:T].transpose(0, 2, 1)
        else:
            mul(G[:T].transpose(0, 2, 1), mstep, out=outs)
        DH[first] = 0
        DH[last] += G[T].T
        dc = _buf(ws, "dc", (H, B), dt, xp)
        dc[...] = G[T + 1].T
        dct = _buf(ws, "dct", (H, B), dt, xp)
        hw = _buf(ws, "dhw", (H, B), dt, xp)
        w_hh = self.w_hh
        mk = step_gemm(B) if kern is not None else None
        if mk is None:
            whT = _buf(ws, "whT", (H, G4), dt, xp)
            whT[...] = w_hh.T                     # W_hh^T, C-ordered: the fast side for BLAS
        if mstep is not None:
            dhn = _buf(ws, "dhn", (H, B), dt, xp)
        if kern is not None:     # one compiled pass per step, then its GEMM (buffers as the forward's)
            # each step's cotangents go to one contiguous block of dA3 (written straight into
            # a step's 4H rows of the gate-major dA, T*B floats apart, the step took about
            # twice as long when dA was not in cache), and one transposing copy after the
            # loop gives the weight-gradient GEMMs their dA
            bstep = kern[1]
            hw[...] = 0
            dA3 = _buf(ws, "dA3", (T, G4, B), dt, xp)
            if mk is not None:                    # W_hh^T packed once for all steps
                _buf(ws, "WhTp", (H * G4,), dt, xp)
                mk.lstm_backward(mk.pack(w_hh, True, H, B, G4, ws, "WhTp"), ACT, TC, CS, DH, hw, dc, dA3,
                                 T, reverse)
            for t in (() if mk is not None else reversed(_order(T, reverse))):
                bstep(ACT, TC, CS, t + rd, DH, t + wr, hw, dc, dA3, t)
                matmul(whT, dA3[t], out=hw)
            DH[first] += hw
            xp.copyto(dA, dA3.transpose(1, 0, 2))
        for t in (() if kern is not None else reversed(_order(T, reverse))):
            dh = DH[t + wr]
            f = ACT[t, H2:H3]
            if mstep is None:
                mul(dh, P[t], out=dct)
                add(dct, dc, out=dct)
                mul(dh, K[t, :H], out=dA_o[:, t])
                mul(dct, K[t, H:].reshape(3, H, B), out=dA_ifg[:, :, t])
                mul(dct, f, out=dc)
                matmul(whT, dA[:, t], out=hw)
                dp = DH[t + rd]
                add(dp, hw, out=dp)
            else:
                m = mstep[t]
                mul(dh, m, out=dhn)
                mul(dhn, P[t], out=dct)
                dct += dc * m
                mul(dhn, K[t, :H], out=dA_o[:, t])
                mul(dct, K[t, H:].reshape(3, H, B), out=dA_ifg[:, :, t])
                dc -= dc * m
                dc += dct * f
                matmul(whT, dA[:, t], out=hw)
                hw += dh
                hw -= dh * m
                DH[t + rd] += hw
        n = self.next
        dA2 = dA.reshape(G4, T * B)
        if self.emb is not None:
            return self._embed_grads(dA2, XH, DH[first], dc, n)
        gx = gw_ih = gw_hh = gb = None
        if n[0] is not None:
            gx = (dA2.T @ self.w_ih).reshape(T, B, I)
        if n[3] is not None or n[4] is not None or n[5] is not None or n[6] is not None:
            xh = XH[:, 1:] if reverse else XH[:, :T]
            gW = dA2 @ xh.reshape(I + H + 1, T * B).T    # [dW_ih | dW_hh | db] in one GEMM
            gw_ih = gW[:, :I] if n[3] is not None else None
            gw_hh = gW[:, I:I + H] if n[4] is not None else None
            if n[5] is not None or n[6] is not None:
                gb = gW[:, I + H]
        return (gx, DH[first].T.copy() if n[1] is not None else None,
                dc.T.copy() if n[2] is not None else None,
                gw_ih, gw_hh, gb if n[5] is not None else None, gb if n[6] is not None else None)

    @staticmethod
    def composite(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=False, mask=None):
        return _lstm_composite(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, mask)


# ====================================================================== LSTM fed by an embedding
# When the first layer's input is an embedding lookup, x_t = E[idx_t], the input projection
# W_ih x_t is column idx_t of P = W_ih E^T (4H, V): P costs 4H*I*V multiply-adds once per call
# instead of 4H*I*T*B for the per-step products, and in the backward the dx GEMM (W_ih^T dA
# over all steps) and the embedding's scatter of dx go away; dW_ih and dE come from S (4H, V),
# the pre-activation cotangents summed by token (both products are V columns wide, not T*B).
# The gather of P's columns and the scatter of the cotangents cost about one pass over (4H, T*B)
# floats each, so nn.LSTM takes this path (``embedding_source``) only where it pays:
# V * _EMBED_MIN_RATIO <= T*B and I >= _EMBED_MIN_INPUT.  Measured (one thread, process time,
# interleaved, H = 128, T*B = 1024, Embedding + LSTM layer forward and backward, fused / not):
# I = 64: V = 65 0.80x, 256 0.86x, 512 0.93x, 1024 1.11x; V = 65: I = 16 0.95x, 128 0.64x;
# I = 8: V = 65 1.01-1.04x.  Only float32 / float64 host arrays, unidirectional layers (a
# bidirectional LSTM falls back), no PackedSequence or unbatched input, and a lookup made by
# F.embedding without padding_idx / max_norm (scale_grad_by_freq / sparse raise there); other
# lookups are not marked and go the ordinary way, Embedding -> LSTMLayerFunction.
_EMBED_MIN_RATIO = 2
_EMBED_MIN_INPUT = 16
EMBED_FUSED_CALLS = [0]     # how many times the fused op ran (tests assert the path was taken)


def embedding_source(input, batch_first):
    """``(E, idx (T, B))`` when ``input`` is the unchanged output of a marked embedding lookup
    (``varlens.nn.functional.embedding``) and the fused first layer pays, else None.

    The mark is ``(E, idx, version list, version, E's version, idx tensor's version list or
    None, its version)``; an in-place change of the lookup's output, of the table or of the
    index tensor since the lookup disables it (the lookup is then used as an ordinary input)."""
    m = input.__dict__.get("_emb_src")
    if m is None:
        return None
    E, idx, ver, v0, ev0, iver, iv0 = m
    if (ver is not input._version or ver[0] != v0 or E._version[0] != ev0
            or (iver is not None and iver[0] != iv0)):
        return None
    node = input._node
    if node is not None and node.hooks:
        # someone wants this lookup's own gradient (register_hook, retain_grad, the lens's
        # gradient reads): the fused op routes dL/dE past it, so run the ordinary layer
        return None
    Ed = E._data
    if (Ed.__class__ is not xp.ndarray or idx.__class__ is not xp.ndarray or idx.ndim != 2
            or Ed.ndim != 2 or Ed.dtype.char not in "fd" or input.ndim != 3
            or Ed.shape[1] < _EMBED_MIN_INPUT):
        return None
    if batch_first:
        idx = idx.T
    T, Bn = idx.shape
    if Ed.shape[0] * _EMBED_MIN_RATIO > T * Bn:
        return None
    return E, xp.ascontiguousarray(idx)


class LSTMEmbedLayerFunction(LSTMLayerFunction):
    """The first LSTM layer applied to an embedding lookup x_t = E[idx_t] (see above).

    Inputs ``E (V, I), h0, c0, w_ih (4H, I), w_hh, b_ih, b_hh``; keywords ``idx`` (T, B) int,
    ``reverse``.  Output ``Z (T+2, B, H)`` as ``LSTMLayerFunction`` with x = E[idx]; the
    layer op's loops run with XH = [h; 1] (K = H + 1) and each step's gathered column of P
    already in its ACT block."""

    torch_node_name = "MkldnnRnnLayerBackward0"   # grad_fn's name: PyTorch's, as the layer op's

    def forward(self, E, h0, c0, w_ih, w_hh, b_ih, b_hh, idx=None, reverse=False):
        xp = self.xp
        H = w_hh.shape[1]
        I = w_ih.shape[1]
        Wi = xp.empty((4 * H, I), dtype=w_hh.dtype)
        for k, j in enumerate(_LSTM_PERM):       # internal gate order, sigmoid rows halved
            Wi[k * H:(k + 1) * H] = w_ih[j * H:(j + 1) * H]
        Wi[:3 * H] *= 0.5
        P = Wi @ E.T                              # (4H, V): P[:, v] = W_ih E[v]
        T = idx.shape[0]
        kern = embed_kernels(P, idx)

        def fill(ACT):                            # ACT[t] (4H, B) = P[:, idx[t]]
            if kern is not None and ACT.flags.c_contiguous:
                kern[0](P, idx, ACT)
                return
            for t in range(T):
                xp.take(P, idx[t], axis=1, out=ACT[t])
        EMBED_FUSED_CALLS[0] += 1
        Z = self._run(None, h0, c0, None, w_hh, b_ih, b_hh, reverse, None, (idx.shape, fill))
        self.E, self.w_ih, self.idx = E, w_ih, idx
        return Z

    def _embed_grads(self, dA2, XH, dh0, dc, n):
        """Gradients from the pre-activation cotangents dA2 (4H, T*B, PyTorch gate order).
        S[:, v] = sum of dA_t over the positions with idx == v (one sort, segment sums);
        dL/dE = S^T W_ih (a_t = W_ih E[idx_t] + ...), dL/dW_ih = sum_t dA_t x_t^T = S E,
        and [dL/dW_hh | dL/db] = dA2 [h_prev; 1]^T in one GEMM as in the layer op."""
        xp = self.xp
        E, w_ih, idx = self.E, self.w_ih, self.idx
        G4, TB = dA2.shape
        H = G4 // 4
        gE = gw_ih = gw_hh = gb = None
        if n[0] is not None or n[3] is not None:
            flat = idx.reshape(-1)
            S = xp.zeros((G4, E.shape[0]), dtype=dA2.dtype)
            kern = embed_kernels(dA2, flat, S)
            if kern is not None:
                kern[1](dA2, flat, S)
            else:
                order = xp.argsort(flat, kind="stable")
                fs = flat[order]
                starts = xp.flatnonzero(xp.r_[True, fs[1:] != fs[:-1]])
                S[:, fs[starts]] = xp.add.reduceat(xp.take(dA2, order, axis=1), starts, axis=1)
            if n[0] is not None:
                gE = S.T @ w_ih                  # dL/dE (V, I)
            if n[3] is not None:
                gw_ih = S @ E                    # dL/dW_ih (4H, I)
        if n[4] is not None or n[5] is not None or n[6] is not None:
            xh = XH[:, 1:] if self.reverse else XH[:, :-1]
            gW = dA2 @ xh.reshape(H + 1, TB).T   # [dL/dW_hh | dL/db] in one GEMM
            gw_hh = gW[:, :H] if n[4] is not None else None
            if n[5] is not None or n[6] is not None:
                gb = gW[:, H]
        return (gE, dh0.T.copy() if n[1] is not None else None,
                dc.T.copy() if n[2] is not None else None,
                gw_ih, gw_hh, gb if n[5] is not None else None, gb if n[6] is not None else None)

    @staticmethod
    def composite(E, h0, c0, w_ih, w_hh, b_ih, b_hh, idx=None, reverse=False):
        return _lstm_composite(_Embedding.apply(E, idx), h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, None)


def lstm_embed_layer(E, idx, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False):
    """Run one LSTM direction over the lookup E[idx] (idx (T, B) int); returns
    ``(output (T,B,H), h_n, c_n)`` as ``lstm_layer(E[idx], ...)``."""
    T = idx.shape[0]
    Z = LSTMEmbedLayerFunction.apply(E, h0, c0, w_ih, w_hh, b_ih, b_hh, idx=idx, reverse=reverse)
    return Z[:T], Z[T], Z[T + 1]


# ====================================================================== GRU
class GRULayerFunction(Function):
    """One GRU layer, one direction, whole sequence (PyTorch's r, z, n layout).

    Inputs ``x (T,B,I), h0 (B,H) or None, w_ih (3H,I), w_hh (3H,H), b_ih, b_hh``;
    keywords ``reverse``, ``mask``.  Output ``Z (T+1, B, H)``: outputs, then h_n.
    """

    differentiable_backward = False

    def forward(self, x, h0, w_ih, w_hh, b_ih, b_hh, reverse=False, mask=None):
        xp = self.xp
        T, B, _ = x.shape
        H = w_hh.shape[1]
        dt = x.dtype
        I = x.shape[2]
        ws = _borrow(self, ("gru", T, B, I, H, dt.str), (T * B * 14 * H) * dt.itemsize)
        xg = xp.matmul(x.reshape(T * B, I), w_ih.T, out=_buf(ws, "xg", (T * B, 3 * H), dt, xp))
        xg = xg.reshape(T, B, 3 * H)
        if b_ih is not None:
            xg += b_ih
        h = _zeros_state(xp, x, H) if h0 is None else h0
        rz = _buf(ws, "rz", (T, B, 2 * H), dt, xp)
        ns = _buf(ws, "ns", (T, B, H), dt, xp)
        hgn = _buf(ws, "hgn", (T, B, H), dt, xp)
        hprev = _buf(ws, "hprev", (T, B, H), dt, xp)
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
            h = _store_step(Z, t, hn, h, m3)
        Z[T] = h
        self.rz, self.ns, self.hgn, self.hprev, self.ws = rz, ns, hgn, hprev, ws
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
        xp = self.xp
        rz, ns, hgn, hprev, ws = self.rz, self.ns, self.hgn, self.hprev, self.ws
        T, B, H = ns.shape
        dt = ns.dtype
        m3 = self.m3
        drz = xp.subtract(1, rz, out=_buf(ws, "drz", rz.shape, dt, xp))
        drz *= rz                                  # s(1-s) of r and z
        dns = xp.multiply(ns, ns, out=_buf(ws, "dns", ns.shape, dt, xp))
        xp.subtract(1, dns, out=dns)               # 1 - n^2
        dGi = _buf(ws, "dGi", (T, B, 3 * H), dt, xp)
        dGh = _buf(ws, "dGh", (T, B, 3 * H), dt, xp)
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
        xp = self.xp
        T, B, _ = x.shape
        H = w_hh.shape[1]
        xg = _input_gemm(x, w_ih, b_ih, b_hh)
        h = _zeros_state(xp, x, H) if h0 is None else h0
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
            h = _store_step(Z, t, a, h, m3)
        Z[T] = h
        self.hs, self.hprev, self.x, self.w_ih, self.w_hh = hs, hprev, x, w_ih, w_hh
        self.reverse, self.m3, self.relu = reverse, m3, relu
        return Z

    def backward(self, G):
        """BPTT for h_t = f(x_t W_ih^T + h_{t-1} W_hh^T + b) (seed 003 §6.1.2): the cotangent of
        the pre-activation is dh * f'(a), with f' = 1 - h^2 (tanh) or 1{h > 0} (relu); it
        flows to h_{t-1} through W_hh, which is the repeated product behind vanishing and
        exploding gradients (seed 003 §6.1.3)."""
        xp = self.xp
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
        return self.xp.concatenate([Z[1], Z[2]], axis=-1)

    def backward(self, g):
        """Splits the cotangent of [h', c'] and runs the LSTM step backward (see the layer op)."""
        H = g.shape[-1] // 2
        G = self.xp.zeros((3,) + g.shape[:-1] + (H,), dtype=g.dtype)
        G[1] = g[..., :H]
        G[2] = g[..., H:]
        grads = super().backward(G)
        return (grads[0][0] if grads[0] is not None else None,) + tuple(grads[1:])

    @staticmethod
    def composite(x, h, c, w_ih, w_hh, b_ih, b_hh):
        Z = _lstm_composite(unsqueeze(x, 0), h, c, w_ih, w_hh, b_ih, b_hh, False, None)
        return cat([Z[1], Z[2]], dim=-1)


class GRUCellFunction(GRULayerFunction):
    """One GRU step: ``(x (B,I), h, w_ih, w_hh, b_ih, b_hh) -> h' (B, H)`` (the layer op with T = 1)."""

    def forward(self, x, h, w_ih, w_hh, b_ih, b_hh):
        return super().forward(x[None], h, w_ih, w_hh, b_ih, b_hh)[1]

    def backward(self, g):
        """The GRU step backward of the layer op, cotangent placed on h_n."""
        G = self.xp.zeros((2,) + g.shape, dtype=g.dtype)
        G[1] = g
        grads = super().backward(G)
        return (grads[0][0] if grads[0] is not None else None,) + tuple(grads[1:])

    @staticmethod
    def composite(x, h, w_ih, w_hh, b_ih, b_hh):
        return _gru_composite(unsqueeze(x, 0), h, w_ih, w_hh, b_ih, b_hh, False, None)[1]


class RNNCellFunction(RNNLayerFunction):
    """One Elman step: ``(x (B,I), h, w_ih, w_hh, b_ih, b_hh) -> h'`` (the layer op with T = 1)."""

    def forward(self, x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh"):
        return super().forward(x[None], h, w_ih, w_hh, b_ih, b_hh, nonlinearity)[1]

    def backward(self, g):
        """The Elman step backward of the layer op, cotangent placed on h_n."""
        G = self.xp.zeros((2,) + g.shape, dtype=g.dtype)
        G[1] = g
        grads = super().backward(G)
        return (grads[0][0] if grads[0] is not None else None,) + tuple(grads[1:])

    @staticmethod
    def composite(x, h, w_ih, w_hh, b_ih, b_hh, nonlinearity="tanh"):
        return _rnn_composite(unsqueeze(x, 0), h, w_ih, w_hh, b_ih, b_hh, nonlinearity, False, None)[1]


# ====================================================================== composites (small ops)
def _prep(x, h0, H, w_ih, b_ih, b_hh, mask):
    T = x.shape[0]
    xg = _linalg_matmul(x, transpose(w_ih, 0, 1))
    if b_ih is not None:
        xg = xg + b_ih
    if b_hh is not None:
        xg = xg + b_hh
    lib = B.namespace(x._data)
    h = h0 if h0 is not None else Tensor._make(lib.zeros((x.shape[1], H), dtype=x.dtype))
    m3 = None if mask is None else Tensor._make(_mask3(B.to_namespace(mask, lib), x._data))
    return Tensor, T, xg, h, m3


def _lstm_composite(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, mask):
    H = w_hh.shape[1]
    Tensor, T, xg, h, m3 = _prep(x, h0, H, w_ih, b_ih, b_hh, mask)
    c = c0 if c0 is not None else Tensor._make(B.namespace(x._data).zeros((x.shape[1], H), dtype=x.dtype))
    whhT = transpose(w_hh, 0, 1)
    outs = [None] * T
    for t in _order(T, reverse):
        a = xg[t] + _linalg_matmul(h, whhT)
        i = sigmoid(a[:, :H])
        f = sigmoid(a[:, H:2 * H])
        g = tanh(a[:, 2 * H:3 * H])
        o = sigmoid(a[:, 3 * H:])
        cn = f * c + i * g
        hn = o * tanh(cn)
        if m3 is None:
            outs[t], h, c = hn, hn, cn
        else:
            m = m3[t]
            outs[t] = hn * m
            h = h + m * (hn - h)
            c = c + m * (cn - c)
    return stack(outs + [h, c], dim=0)


def _gru_composite(x, h0, w_ih, w_hh, b_ih, b_hh, reverse, mask):
    H = w_hh.shape[1]
    Tensor, T, xg, h, m3 = _prep(x, h0, H, w_ih, b_ih, None, mask)
    whhT = transpose(w_hh, 0, 1)
    outs = [None] * T
    for t in _order(T, reverse):
        hg = _linalg_matmul(h, whhT)
        if b_hh is not None:
            hg = hg + b_hh
        r = sigmoid(xg[t][:, :H] + hg[:, :H])
        z = sigmoid(xg[t][:, H:2 * H] + hg[:, H:2 * H])
        n = tanh(xg[t][:, 2 * H:] + r * hg[:, 2 * H:])
        hn = n + z * (h - n)
        if m3 is None:
            outs[t], h = hn, hn
        else:
            m = m3[t]
            outs[t] = hn * m
            h = h + m * (hn - h)
    return stack(outs + [h], dim=0)


def _rnn_composite(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity, reverse, mask):
    H = w_hh.shape[1]
    Tensor, T, xg, h, m3 = _prep(x, h0, H, w_ih, b_ih, b_hh, mask)
    whhT = transpose(w_hh, 0, 1)
    act = relu if nonlinearity == "relu" else tanh
    outs = [None] * T
    for t in _order(T, reverse):
        hn = act(xg[t] + _linalg_matmul(h, whhT))
        if m3 is None:
            outs[t], h = hn, hn
        else:
            m = m3[t]
            outs[t] = hn * m
            h = h + m * (hn - h)
    return stack(outs + [h], dim=0)


# ====================================================================== user-facing helpers
def _mask_array(mask, x):
    """The (T, B) mask as an array on x's device (lengths are host data: a copy to the device)."""
    if mask is None:
        return None
    m = mask._data if hasattr(mask, "_data") else xp.asarray(mask)
    return B.to_namespace(m, B.namespace(x._data))


def lstm_layer(x, h0, c0, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False, mask=None):
    """Run one LSTM direction over ``x`` (T, B, I); returns ``(output (T,B,H), h_n, c_n)``."""
    T = x.shape[0]
    Z = LSTMLayerFunction.apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse=reverse,
                                mask=_mask_array(mask, x))
    return Z[:T], Z[T], Z[T + 1]


def gru_layer(x, h0, w_ih, w_hh, b_ih=None, b_hh=None, reverse=False, mask=None):
    """Run one GRU direction over ``x`` (T, B, I); returns ``(output (T,B,H), h_n)``."""
    T = x.shape[0]
    Z = GRULayerFunction.apply(x, h0, w_ih, w_hh, b_ih, b_hh, reverse=reverse,
                               mask=_mask_array(mask, x))
    return Z[:T], Z[T]


def rnn_layer(x, h0, w_ih, w_hh, b_ih=None, b_hh=None, nonlinearity="tanh", reverse=False, mask=None):
    """Run one Elman-RNN direction over ``x`` (T, B, I); returns ``(output (T,B,H), h_n)``."""
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"rnn_layer: nonlinearity must be 'tanh' or 'relu', got {nonlinearity!r}")
    T = x.shape[0]
    Z = RNNLayerFunction.apply(x, h0, w_ih, w_hh, b_ih, b_hh, nonlinearity=nonlinearity,
                               reverse=reverse, mask=_mask_array(mask, x))
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
