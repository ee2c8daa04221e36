"""Convolution and transposed convolution (seed 003 §5.2); pooling is in pool.py, upsampling in
upsample.py (they share this file's window helpers).

Layout is PyTorch's: activations (N, C, H, W); a convolution weight is
(out, in/groups, kh, kw); a transposed convolution's weight is (in, out/groups, kh, kw).
What the layers compute is cross-correlation (seed 003 Remark 5.2.2: "not actually
convolution in the mathematical sense"):

    out[n, o, y, x] = b[o] + sum_{c, i, j} w[o, c, i, j] * xpad[n, c, y*s + i*d, x*s + j*d]

How it is computed: one strided *view* of the padded input holds every receptive
field (no Python loop over pixels); it is copied once into the im2col matrix
``cols`` of shape (C*kh*kw, N*Ho*Wo) and the whole layer is ONE matrix product
``W (O, C*kh*kw) @ cols`` (a batch of ``groups`` products when groups > 1).
The backward pass is two more products plus a "col2im" that adds the column
gradients back onto the input; that add loops over the kh*kw kernel offsets
(each a strided slice-add over the whole batch), never over pixels.

Stride 1 without groups (LeNet, ResNet blocks) takes a faster "shifted rows" layout:
with every padded image flattened to one row of Hp*Wp pixels, the receptive field
of output (y, x) at kernel offset (i, j) is pixel (y + i*dh)*Wp + x + j*dw, so the
im2col row of offset (c, i, j) is ONE contiguous run of that flat image starting at
i*dh*Wp + j*dw.  The columns are then built by memcpy-speed copies of long runs
(instead of runs of Wo pixels), at the price of computing the Wp - Wo "wrapped"
columns between output rows, which are dropped (forward) or given a zero gradient
(backward).  col2im is likewise kh*kw adds of long runs.

Pooling loops over the kh*kw window offsets in the same way.

On the host in float32 (numba on): 3x3 stride-1 layers with enough channels run Winograd's
F(2x2, 3x3) (ops/kernels/winograd.py, WINOGRAD_MIN_CHANNELS), and im2col/col2im are compiled
loops (ops/kernels/im2col.py); float64 and the device keep the NumPy code below.

On the CUDA device (CuPy, or the simulated library) the same im2col path runs with the
device's namespace: the receptive fields are one ``as_strided`` view copied into the
columns, the layer is one (batched) GEMM and col2im is kh*kw strided slice-adds.  The
shifted-rows and per-sample layouts, the scratch buffers and the GEMV split are tuned for
the CPU's BLAS and stay host-only.  The module-level ``xp`` below is the host namespace,
used only by those host paths; every op reads its inputs' library as ``self.xp``.
"""
from __future__ import annotations

import threading

from varlens.core.function import Function
from varlens.core.array import xp
from varlens.core import primitives as D
from varlens.ops.linalg import matmul
from varlens.ops.kernels import numba_module as _numba_on
from varlens.ops.kernels import winograd as _WINO
from varlens.ops.kernels import im2col as _KCOL
from varlens.ops.shape import cat, permute, reshape, squeeze, transpose, unsqueeze

_as_strided = xp.lib.stride_tricks.as_strided
_as_strided_host_ns = xp

# The im2col matrix is kept from forward to backward when it has at most this many
# elements (it is needed for the weight gradient); bigger ones are rebuilt in backward
# from the saved input, trading one copy for memory.
KEEP_COLUMNS_MAX = 1 << 22


# ----------------------------------------------------------------------------- helpers
def _tuple(v, n, name, op, minimum=None):
    """An int or a sequence of n ints, as a tuple; clear errors otherwise."""
    if isinstance(v, bool):
        raise TypeError(f"{op}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    if isinstance(v, int) or (hasattr(v, "__index__") and not hasattr(v, "__len__")):
        t = (int(v),) * n
    else:
        try:
            t = tuple(int(a) for a in v)
        except TypeError:
            raise TypeError(f"{op}: {name} must be an int or a tuple of {n} ints, got {v!r}") from None
        if len(t) == 1:
            t = t * n
        if len(t) != n:
            raise ValueError(f"{op}: {name} must be an int or a tuple of {n} ints, got {v!r}")
    if minimum is not None and any(a < minimum for a in t):
        raise ValueError(f"{op}: {name} must be >= {minimum}, got {v!r}")
    return t


def _out_len(n, k, s, p0, p1, d):
    return (n + p0 + p1 - d * (k - 1) - 1) // s + 1


def _pad(xp, x, pads, value=0.0):
    """Copy of x (N, C, H, W) with pads = (top, bottom, left, right) filled with value
    (``xp``: x's array library)."""
    pt, pb, pl, pr = pads
    if not (pt or pb or pl or pr):
        return x
    N, C, H, W = x.shape
    out = xp.full((N, C, H + pt + pb, W + pl + pr), value, dtype=x.dtype)
    out[:, :, pt:pt + H, pl:pl + W] = x
    return out


def _window(k, d, s, n):
    """The slice that picks, for kernel offset k, one input row per output row."""
    return slice(k * d, k * d + s * (n - 1) + 1, s)


def _im2col(xp, xp_, kh, kw, sh, sw, dh, dw, Ho, Wo, per_sample=False):
    """Receptive fields of the padded input, copied once into a contiguous buffer.

    A strided view (no copy) with axes (C, kh, kw, N, Ho, Wo) -- or (N, C, kh, kw, Ho, Wo)
    when per_sample -- is materialised: the im2col matrix with C*kh*kw rows and
    N*Ho*Wo columns (per_sample: N matrices of Ho*Wo columns each).
    """
    if xp is _as_strided_host_ns and xp_.dtype == xp.float32 and _numba_on():
        return _KCOL.im2col(xp_, kh, kw, sh, sw, dh, dw, Ho, Wo, per_sample)
    N, C = xp_.shape[:2]
    sN, sC, sH, sW = xp_.strides
    if per_sample:
        shape, strides = (N, C, kh, kw, Ho, Wo), (sN, sC, sH * dh, sW * dw, sH * sh, sW * sw)
    else:
        shape, strides = (C, kh, kw, N, Ho, Wo), (sC, sH * dh, sW * dw, sN, sH * sh, sW * sw)
    if xp is _as_strided_host_ns:
        return xp.ascontiguousarray(_as_strided(xp_, shape, strides, writeable=False))
    # CuPy's as_strided takes no ``writeable``; the view is only read here
    return xp.ascontiguousarray(xp.lib.stride_tricks.as_strided(xp_, shape, strides))


def _col2im(xp, gcol, shape, kh, kw, sh, sw, dh, dw, per_sample=False, out=None):
    """Adjoint of _im2col: add the column gradients onto zeros of shape (N, C, Hp, Wp)
    (or onto ``out``).  One strided slice-add per kernel offset (kh*kw of them), each over
    the whole batch.
    """
    if out is None:
        out = xp.zeros(shape, dtype=gcol.dtype)
    if xp is _as_strided_host_ns and gcol.dtype == out.dtype == xp.float32 and _numba_on():
        return _KCOL.col2im(gcol, kh, kw, sh, sw, dh, dw, out, per_sample)
    Ho, Wo = gcol.shape[4], gcol.shape[5]
    for i in range(kh):
        si = _window(i, dh, sh, Ho)
        for j in range(kw):
            part = gcol[:, :, i, j] if per_sample else gcol[:, i, j].transpose(1, 0, 2, 3)
            out[:, :, si, _window(j, dw, sw, Wo)] += part
    return out


# Layout switch, measured (benchmarks/bench_conv.py): with big feature maps one matrix
# product per sample (W @ cols[n]) writes NCHW directly and skips two transposes; with
# small maps one big product over the whole batch is faster.
PER_SAMPLE_MIN_PIXELS = 100
# In the per-sample layout the columns are built for a chunk of samples at a time, at most
# this many elements (1 MiB of float32): memory stays bounded and the buffer stays in cache.
# Forward keeps them for backward only when the whole batch fits in one chunk.
COLUMN_CHUNK = 1 << 18


# The shifted-rows layout (stride 1, groups 1) is used unless the wrapped columns would
# make the products more than this factor bigger than the exact im2col ones (Wp / Wo).
SHIFTED_MAX_WASTE = 2.0

_scratch_tls = threading.local()
# Scratch buffers up to this many elements are kept between calls (per thread, per slot and
# dtype): fresh memory is page-faulted in on first touch, which on this machine costs more
# than the copy that fills it.  Bigger ones are allocated per call.
SCRATCH_MAX = 1 << 19


def _scratch(slot, n, dtype):
    """A 1-D work buffer of n elements, reused across calls; never handed out of an op."""
    if n > SCRATCH_MAX:
        return xp.empty(n, dtype=dtype)
    d = getattr(_scratch_tls, "bufs", None)
    if d is None:
        d = _scratch_tls.bufs = {}
    key = (slot, dtype)
    buf = d.get(key)
    if buf is None or buf.size < n:
        buf = d[key] = xp.empty(n, dtype=dtype)
    return buf[:n]


def _view(base, shape, strides, offset=0):
    """A strided view into the C-contiguous array base, offset in bytes (np.ndarray on its
    buffer: the same view as as_strided at a sixth of the call's cost)."""
    return xp.ndarray(shape, base.dtype, base, offset, strides)


def _shifted_cols(xpd, s0, m, kh, kw, dh, dw, L, buf):
    """Columns (C, kh, kw, m, L) of images s0..s0+m of the padded input, copied into buf:
    row (c, i, j) of image n is its flat pixels i*dh*Wp + j*dw .. + L (a contiguous run)."""
    N, C, Hp, Wp = xpd.shape
    sN, sC, sH, sW = xpd.strides
    cols = buf.reshape(C, kh, kw, m, L)
    src = _view(xpd, (C, kh, kw, m, L), (sC, sH * dh, sW * dw, sN, sW), s0 * sN)
    xp.copyto(cols, src)
    return cols.reshape(C * kh * kw, m * L)


# Weight-gradient products a @ b^T with one side this thin (LeNet conv1: 6 output channels)
# run as one matrix-vector product per row: measured 1.3-3x faster than OpenBLAS's GEMM there.
GEMV_ROWS = 6


def _gram(a, b, out):
    """out = a @ b.T for wide C-contiguous a (p, X) and b (q, X)."""
    p, q = a.shape[0], b.shape[0]
    if p <= GEMV_ROWS and p <= q:
        for r in range(p):
            xp.dot(b, a[r], out=out[r])
    elif q <= GEMV_ROWS:
        t = xp.empty((q, p), dtype=out.dtype)
        for r in range(q):
            xp.dot(a, b[r], out=t[r])
        out[...] = t.T
    else:
        xp.matmul(a, b.T, out=out)
    return out


def _pad_t(x, pads):
    """Zero padding for Tensors (used by composites): place x inside zeros."""
    pt, pb, pl, pr = pads
    if not (pt or pb or pl or pr):
        return x
    N, C, H, W = x.shape
    key = (slice(None), slice(None), slice(pt, pt + H), slice(pl, pl + W))
    return D.index_scatter(x, key, (N, C, H + pt + pb, W + pl + pr))


# Winograd (3x3, stride 1, float32 on the host) is used when both channel counts reach this:
# its 16 products have the channel counts for their inner dimension and rows, and
# thinner ones run far below BLAS's peak (measured with benchmarks/bench_conv.py).
WINOGRAD_MIN_CHANNELS = 8


def _winograd_pays(C, O, pixels):
    return C >= WINOGRAD_MIN_CHANNELS and O >= WINOGRAD_MIN_CHANNELS and pixels >= 25


# ----------------------------------------------------------------------------- convolution
class Conv2dFn(Function):
    """2-D cross-correlation with stride, asymmetric zero padding, dilation and groups.

    Backward (seed 003 §5.2.2 and the chain rule of §1.6; the same structure as the
    dense layer's dL/dW = a^T g, dL/da = g W^T with W replaced by the shared filter):

    * dL/dx: the transposed convolution of the cotangent g with the same kernel,
      i.e. the full correlation of g with the spatially flipped kernel.  Computed
      as cols_grad = W^T @ g followed by col2im (adding each column back to the
      receptive field it came from).
    * dL/dw: the correlation of the input with the cotangent,
      dL/dw[o,c,i,j] = sum_{n,y,x} g[n,o,y,x] xpad[n,c,y*s+i*d,x*s+j*d] = g @ cols^T.
    * dL/db: g summed over batch and space.
    """

    differentiable_backward = False

    def forward(self, x, w, b, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1):
        xp = self.xp
        N, C, H, W = x.shape
        O, Cg, kh, kw = w.shape
        sh, sw = stride
        dh, dw = dilation
        Ho = _out_len(H, kh, sh, pads[0], pads[1], dh)
        Wo = _out_len(W, kw, sw, pads[2], pads[3], dw)
        if Ho < 1 or Wo < 1:
            raise RuntimeError(
                f"conv2d: the input of spatial size ({H}, {W}) with padding {pads} is smaller than the "
                f"(dilated) kernel ({dh * (kh - 1) + 1}, {dw * (kw - 1) + 1}); the output would be "
                f"({Ho}, {Wo})")
        self.w = w
        host = xp is _as_strided_host_ns   # the shifted-rows and per-sample layouts are CPU-only
        self.wino = False
        if (host and kh == 3 and kw == 3 and stride == (1, 1) and dilation == (1, 1) and groups == 1
                and _winograd_pays(C, O, Ho * Wo) and max(pads[0], pads[2]) <= 2
                and x.dtype == w.dtype == xp.float32 and (b is None or b.dtype == xp.float32)
                and _numba_on()):
            # 3x3 stride 1: Winograd F(2x2, 3x3), 2.25x fewer multiplications (ops/kernels/winograd.py)
            self.wino = self.shifted = True
            self.x = x = xp.ascontiguousarray(x)
            self.geom = (x.shape, (N, C, H + pads[0] + pads[1], W + pads[2] + pads[3]), stride, pads,
                         dilation, groups, Ho, Wo)
            return _WINO.conv3x3(x, _WINO.transformed_weight(w), b, pads[0], pads[2], Ho, Wo)
        xpd = _pad(xp, x, pads)
        self.geom = (x.shape, xpd.shape, stride, pads, dilation, groups, Ho, Wo)
        self.shifted = shifted = (host and sh == 1 and sw == 1 and groups == 1
                                  and xpd.shape[3] <= SHIFTED_MAX_WASTE * Wo)
        if shifted:
            return self._shifted_forward(xp.ascontiguousarray(xpd), w, b, Ho, Wo)
        ps = host and groups == 1 and Ho * Wo >= PER_SAMPLE_MIN_PIXELS
        K = Cg * kh * kw
        M = N * Ho * Wo
        Og = O // groups
        self.ps = ps
        # (forward runs before the node knows which inputs need grad; without a graph the
        # node is dropped at once, and with it whatever is kept here for backward)
        if ps:  # out[n] = W @ cols[n], already NCHW, a chunk of samples at a time
            nb = self.nb = max(1, min(N, COLUMN_CHUNK // (K * Ho * Wo)))
            W2 = xp.ascontiguousarray(w.reshape(O, K))  # contiguous, or the broadcast GEMM leaves BLAS
            out = xp.empty((N, O, Ho * Wo), dtype=xp.result_type(x, w))
            for s0 in range(0, N, nb):
                cols = _im2col(xp, xpd[s0:s0 + nb], kh, kw, sh, sw, dh, dw, Ho, Wo, True)
                xp.matmul(W2, cols.reshape(-1, K, Ho * Wo), out=out[s0:s0 + nb])
            out = out.reshape(N, O, Ho, Wo)
            if b is not None:
                out += b.reshape(1, O, 1, 1)
            single = nb >= N
            self.cols, self.xpd = (cols, None) if single else (None, xpd)
            return out
        cols = _im2col(xp, xpd, kh, kw, sh, sw, dh, dw, Ho, Wo)
        # one product over the batch, then one transposing copy to NCHW
        if groups == 1:
            res = w.reshape(O, K) @ cols.reshape(K, M)
        else:
            res = xp.matmul(w.reshape(groups, Og, K), cols.reshape(groups, K, M))
        res = res.reshape(O, N, Ho, Wo).transpose(1, 0, 2, 3)
        out = xp.empty((N, O, Ho, Wo), dtype=res.dtype)
        if b is not None:
            xp.add(res, b.reshape(1, O, 1, 1), out=out)
        else:
            out[...] = res
        # the weight gradient needs the columns: keep small ones, rebuild big ones in backward
        if cols.size <= KEEP_COLUMNS_MAX:
            self.cols, self.xpd = cols, None
        else:
            self.cols, self.xpd = None, xpd
        return out

    def _shifted_forward(self, xpd, w, b, Ho, Wo):
        """Stride 1, groups 1: out = W @ cols per chunk of images in the shifted-rows layout,
        then the valid columns of each output row are copied (with the bias) into NCHW."""
        N, C, Hp, Wp = xpd.shape
        O, _, kh, kw = w.shape
        dh, dw = self.geom[4]
        L = (Ho - 1) * Wp + Wo
        K = C * kh * kw
        nb = max(1, min(N, COLUMN_CHUNK // (K * L)))
        dt = xpd.dtype
        W2 = w.reshape(O, K)
        Kb = K
        if b is not None:  # the bias rides in the product: a row of ones under the columns
            W2 = xp.concatenate([W2, b.reshape(O, 1).astype(dt, copy=False)], axis=1)
            Kb = K + 1
        out = xp.empty((N, O, Ho, Wo), dtype=dt)
        cbuf = _scratch(0, Kb * nb * L, dt)
        rbuf = _scratch(1, O * nb * L, dt)
        isz = rbuf.itemsize
        for s0 in range(0, N, nb):
            m = min(nb, N - s0)
            cols = cbuf[:Kb * m * L].reshape(Kb, m * L)
            _shifted_cols(xpd, s0, m, kh, kw, dh, dw, L, cols[:K])
            if Kb > K:
                cols[K] = 1
            r = rbuf[:O * m * L].reshape(O, m * L)
            xp.matmul(W2, cols, out=r)
            # r is (O, m, L); its valid part, seen as (m, O, Ho, Wo), skips the wrapped columns
            xp.copyto(out[s0:s0 + m],
                      _view(r, (m, O, Ho, Wo), (L * isz, m * L * isz, Wp * isz, isz)))
        self.xpd = xpd  # the columns are rebuilt in backward: a copy of long runs, cheap
        return out

    def _winograd_backward(self, g):
        """Backward of the Winograd path (seed 003 §5.2.2): dL/dx is the full correlation of g
        with the flipped kernel, by Winograd as forward with padding 2 - pt
        (dx[y, x] = sum_{o,i,j} w[o, c, i, j] g[o, y + pt - i, x + pl - j]); dL/dW is the
        adjoint of the Winograd forward in the weight (ops/kernels/winograd.py); dL/db = sum g."""
        (N, C, H, W), _, _, (pt, pb, pl, pr), _, _, Ho, Wo = self.geom
        n = self.next
        gx = gw = gb = None
        if n[0] is not None:
            g = _as_strided_host_ns.ascontiguousarray(g, dtype=_as_strided_host_ns.float32)
            U = _WINO.transformed_weight(_WINO.flipped_weight(self.w))
            gx = _WINO.conv3x3(g, U, None, 2 - pt, 2 - pl, H, W)
        if n[1] is not None:
            g = _as_strided_host_ns.ascontiguousarray(g, dtype=_as_strided_host_ns.float32)
            gw = _WINO.conv3x3_weight_grad(self.x, g, pt, pl)
        if n[2] is not None:
            gb = g.sum(axis=(0, 2, 3))
        return gx, gw, gb

    def _shifted_backward(self, g, need_x=None):
        """Backward of the shifted-rows layout (seed 003 §5.2.2), a chunk of images at a time.

        dL/dx is the full correlation of g with the kernel,
        dx[c, p] = sum_{o,i,j} W[o,c,i,j] g[o, p - i*dh*Wp - j*dw] (flat positions): the sum
        over (o, j) is one product WJ (kh*C, O*kw) @ gj with gj[(o, j)] the g rows shifted by
        j*dw (kw copies of long runs), and the sum over i is kh slice-adds of whole rows
        (instead of the kh*kw adds of a col2im).  g is zero at the wrapped columns, so they
        add nothing.  dL/dW[o,c,i,j] = sum_{n,y,x} g[o,y,x] xpad[c, y+i*dh, x+j*dw]: when dL/dx
        is needed too, it is gj @ xi^T with xi the C*kh row-shifted copies of x; otherwise
        g @ cols^T with the forward's columns rebuilt.  dL/db = sum g, from a row of ones.
        """
        (N, C, H, W), pshape, _, (pt, pb, pl, pr), (dh, dw), _, Ho, Wo = self.geom
        xpd, w = self.xpd, self.w
        O, _, kh, kw = w.shape
        Hp, Wp = pshape[2], pshape[3]
        P = Hp * Wp
        L = (Ho - 1) * Wp + Wo
        K = C * kh * kw
        sj = (kw - 1) * dw              # the largest j shift
        LT = Ho * Wp + sj               # positions of each i-partial sum T_i
        Lg = LT + sj                    # g row: sj zeros, Ho*Wp of g (wrapped cols 0), sj zeros
        n = self.next
        need_x, need_w = (n[0] is not None) if need_x is None else need_x, n[1] is not None
        gx = gw = gb = None
        need_b = n[2] is not None
        if need_b and not need_w:
            gb = g.sum(axis=(0, 2, 3))
            need_b = False
        if not (need_x or need_w):
            return gx, gw, gb
        paired = need_x and need_w
        # images per chunk: the biggest per-image buffer of this backward within COLUMN_CHUNK
        per_image = max(O * kw, kh * C + 1) * LT if need_x else (K + 1) * L
        nb = max(1, min(N, COLUMN_CHUNK // per_image))
        dt = g.dtype
        isz = xp.dtype(dt).itemsize
        if need_w and not paired:  # with the bias: a row of ones under the columns gives dL/db = g @ 1
            Kb = K + 1 if need_b else K
            gbuf = _scratch(2, O * nb * L, dt)
            cbuf = _scratch(0, Kb * nb * L, xpd.dtype)
            gw2 = xp.zeros((O, Kb), dtype=w.dtype)
            part = xp.empty((O, Kb), dtype=w.dtype)
        if paired:
            # dL/dW[o,c,i,j] = sum_p gj[(o,j), p] * xi[(c,i), p] with xi[(c,i), p] = x[c, p + i*dh*Wp]:
            # the shifted g built for dL/dx serves the weight gradient too, and x needs only C*kh
            # shifted rows instead of the C*kh*kw of the columns (gj is zero for p >= Ho*Wp)
            HW = Ho * Wp
            Ki = C * kh + (1 if need_b else 0)
            ibuf = _scratch(0, Ki * nb * LT, xpd.dtype)
            gw2 = xp.zeros((O * kw, Ki), dtype=w.dtype)
            part = xp.empty((O * kw, Ki), dtype=w.dtype)
            sN, sC, sH, sW = xpd.strides
        if need_x:
            WJ = xp.ascontiguousarray(w.transpose(2, 1, 0, 3)).reshape(kh * C, O * kw)
            qbuf = _scratch(3, O * nb * Lg, dt)
            jbuf = _scratch(4, O * kw * nb * LT, dt)
            tbuf = _scratch(5, kh * C * nb * LT, dt)
            gxp = xp.zeros((N, C, P), dtype=dt)
        for s0 in range(0, N, nb):
            m = min(nb, N - s0)
            gs = g[s0:s0 + m].transpose(1, 0, 2, 3)  # (O, m, Ho, Wo)
            if need_x:
                gq = qbuf[:O * m * Lg].reshape(O, m, Lg)
                gq.fill(0)
                xp.copyto(_view(gq, (O, m, Ho, Wo), (m * Lg * isz, Lg * isz, Wp * isz, isz), sj * isz), gs)
            if need_w and not paired:  # dL/dW += g @ cols^T
                gm = gbuf[:O * m * L].reshape(O, m, L)
                xp.copyto(_view(gm, (O, m, Ho, Wo), (m * L * isz, L * isz, Wp * isz, isz)), gs)
                if Ho > 1 and Wp > Wo:  # the wrapped columns
                    _view(gm, (O, m, Ho - 1, Wp - Wo), (m * L * isz, L * isz, Wp * isz, isz), Wo * isz)[...] = 0
                cols = cbuf[:Kb * m * L].reshape(Kb, m * L)
                _shifted_cols(xpd, s0, m, kh, kw, dh, dw, L, cols[:K])
                if need_b:
                    cols[K] = 1
                _gram(gm.reshape(O, m * L), cols, part)
                gw2 += part
            if need_x:
                gj = jbuf[:O * kw * m * LT].reshape(O, kw, m, LT)
                # gj[o, j, n, p] = gq[o, n, p + sj - j*dw]
                xp.copyto(gj, _view(gq, (O, kw, m, LT), (m * Lg * isz, -dw * isz, Lg * isz, isz), sj * isz))
                if paired:
                    xi = ibuf[:Ki * m * LT].reshape(Ki, m, LT)
                    xp.copyto(xi[:C * kh, :, :HW].reshape(C, kh, m, HW),
                              _view(xpd, (C, kh, m, HW), (sC, sH * dh, sN, sW), s0 * sN))
                    if sj:
                        xi[:C * kh, :, HW:] = 0
                    if need_b:
                        xi[C * kh] = 1
                    _gram(gj.reshape(O * kw, m * LT), xi.reshape(Ki, m * LT), part)
                    gw2 += part
                T = tbuf[:kh * C * m * LT].reshape(kh * C, m * LT)
                xp.matmul(WJ, gj.reshape(O * kw, m * LT), out=T)
                T = T.reshape(kh, C, m, LT)
                dst = gxp[s0:s0 + m].transpose(1, 0, 2)
                for i in range(kh):
                    o = i * dh * Wp
                    ln = min(LT, P - o)
                    dst[:, :, o:o + ln] += T[i, :, :, :ln]
        if paired:
            gw = xp.ascontiguousarray(gw2[:, :C * kh].reshape(O, kw, C, kh).transpose(0, 2, 3, 1))
            if need_b:
                gb = gw2[::kw, C * kh].copy()  # every j row of gj sums the same g
        elif need_w:
            gw = gw2[:, :K].reshape(w.shape)
            if need_b:
                gb = gw2[:, K].copy()
        if need_x:
            gx = gxp.reshape(N, C, Hp, Wp)
            if pt or pb or pl or pr:
                gx = gx[:, :, pt:pt + H, pl:pl + W]
        return gx, gw, gb

    def backward(self, g):
        if self.shifted:
            return self._winograd_backward(g) if self.wino else self._shifted_backward(g)
        xp = self.xp
        (N, C, H, W), pshape, (sh, sw), pads, (dh, dw), groups, Ho, Wo = self.geom
        w = self.w
        O, Cg, kh, kw = w.shape
        K, M, Og = Cg * kh * kw, N * Ho * Wo, O // groups
        n = self.next
        gx = gw = gb = None
        wg = w.reshape(groups, Og, K)
        if n[2] is not None:
            gb = g.sum(axis=(0, 2, 3))
        if self.ps:
            HW, nb = Ho * Wo, self.nb
            gn = xp.ascontiguousarray(g).reshape(N, O, HW)
            WT = xp.ascontiguousarray(wg[0].T)
            gxp = xp.zeros(pshape, dtype=g.dtype) if n[0] is not None else None
            gw2 = xp.zeros((O, K), dtype=w.dtype) if n[1] is not None else None
            for s0 in range(0, N, nb):
                gc = gn[s0:s0 + nb]
                if gw2 is not None:  # dL/dW = sum_n g[n] @ cols[n]^T
                    cols = self.cols if self.cols is not None else \
                        _im2col(xp, self.xpd[s0:s0 + nb], kh, kw, sh, sw, dh, dw, Ho, Wo, True)
                    gw2 += xp.matmul(gc, cols.reshape(-1, K, HW).transpose(0, 2, 1)).sum(axis=0)
                if gxp is not None:  # cols_grad[n] = W^T @ g[n], then col2im
                    gcol = xp.matmul(WT, gc).reshape(-1, C, kh, kw, Ho, Wo)
                    _col2im(xp, gcol, None, kh, kw, sh, sw, dh, dw, True, out=gxp[s0:s0 + nb])
            if gxp is not None:
                pt, pb, pl, pr = pads
                gx = gxp[:, :, pt:pt + H, pl:pl + W] if (pt or pb or pl or pr) else gxp
            gw = gw2.reshape(w.shape) if gw2 is not None else None
            return gx, gw, gb
        gm = xp.ascontiguousarray(g.transpose(1, 0, 2, 3)).reshape(groups, Og, M)
        if n[0] is not None:
            if groups == 1:
                gcol = wg[0].T @ gm[0]
            else:
                gcol = xp.matmul(wg.transpose(0, 2, 1), gm)
            gxp = _col2im(xp, gcol.reshape(C, kh, kw, N, Ho, Wo), pshape, kh, kw, sh, sw, dh, dw)
            pt, pb, pl, pr = pads
            gx = gxp[:, :, pt:pt + H, pl:pl + W] if (pt or pb or pl or pr) else gxp
        if n[1] is not None:
            cols = self.cols
            if cols is None:
                cols = _im2col(xp, self.xpd, kh, kw, sh, sw, dh, dw, Ho, Wo)
            if groups == 1:
                gw = (gm[0] @ cols.reshape(K, M).T).reshape(w.shape)
            else:
                gw = xp.matmul(gm, cols.reshape(groups, K, M).transpose(0, 2, 1)).reshape(w.shape)
        return gx, gw, gb

    @staticmethod
    def composite(x, w, b, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1), groups=1):
        """The same layer from small ops (slices, permutes, matmuls), for second derivatives."""
        N, C, H, W = x.shape
        O, Cg, kh, kw = w.shape
        Og = O // groups
        Ho = _out_len(H, kh, stride[0], pads[0], pads[1], dilation[0])
        Wo = _out_len(W, kw, stride[1], pads[2], pads[3], dilation[1])
        xpd = _pad_t(x, pads)
        outs = []
        for gi in range(groups):
            acc = None
            for i in range(kh):
                for j in range(kw):
                    xs = xpd[:, gi * Cg:(gi + 1) * Cg, _window(i, dilation[0], stride[0], Ho),
                             _window(j, dilation[1], stride[1], Wo)]
                    wk = w[gi * Og:(gi + 1) * Og, :, i, j]
                    t = matmul(permute(xs, (0, 2, 3, 1)), transpose(wk, 0, 1))
                    acc = t if acc is None else acc + t
            outs.append(acc)
        out = outs[0] if groups == 1 else cat(outs, -1)
        out = permute(out, (0, 3, 1, 2))
        if b is not None:
            out = out + reshape(b, (1, O, 1, 1))
        return out


class ConvTranspose2dFn(Function):
    """Transposed convolution: the adjoint (in x) of Conv2dFn with the same geometry.

    out = col2im(W^T @ x) cropped by the padding.  Backward (seed 003 §5.2.2, the
    adjoint relation): dL/dx is the ordinary convolution of g with the same weight
    (im2col of g, then W @ cols); dL/dw is the correlation of x with g,
    x @ cols(g)^T; dL/db is g summed over batch and space.
    """

    differentiable_backward = False

    def forward(self, x, w, b, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), groups=1,
                dilation=(1, 1)):
        xp = self.xp
        N, Cin, H, W = x.shape
        _, Cog, kh, kw = w.shape
        Cout = Cog * groups
        Cig = Cin // groups
        sh, sw = stride
        dh, dw = dilation
        Hf = (H - 1) * sh + dh * (kh - 1) + 1 + output_padding[0]
        Wf = (W - 1) * sw + dw * (kw - 1) + 1 + output_padding[1]
        Ho, Wo = Hf - 2 * padding[0], Wf - 2 * padding[1]
        if Ho < 1 or Wo < 1:
            raise RuntimeError(f"conv_transpose2d: padding {padding} leaves an output of size "
                               f"({Ho}, {Wo}) for an input of size ({H}, {W})")
        M = N * H * W
        xm = xp.ascontiguousarray(x.transpose(1, 0, 2, 3)).reshape(groups, Cig, M)
        wg = w.reshape(groups, Cig, Cog * kh * kw)
        if groups == 1:
            gcol = wg[0].T @ xm[0]
        else:
            gcol = xp.matmul(wg.transpose(0, 2, 1), xm)
        full = _col2im(xp, gcol.reshape(Cout, kh, kw, N, H, W), (N, Cout, Hf, Wf), kh, kw, sh, sw, dh, dw)
        ph, pw = padding
        out = full[:, :, ph:ph + Ho, pw:pw + Wo]
        if b is not None:
            out = out + b.reshape(1, Cout, 1, 1)
        elif ph or pw:
            out = xp.ascontiguousarray(out)
        self.geom = (x.shape, (N, Cout, Hf, Wf), stride, padding, dilation, groups, Ho, Wo)
        self.w = w
        self.xm = xm
        return out

    def backward(self, g):
        xp = self.xp
        (N, Cin, H, W), fshape, (sh, sw), (ph, pw), (dh, dw), groups, Ho, Wo = self.geom
        w = self.w
        _, Cog, kh, kw = w.shape
        Cig = Cin // groups
        K, M = Cog * kh * kw, N * H * W
        n = self.next
        gfull = _pad(xp, g, (ph, fshape[2] - Ho - ph, pw, fshape[3] - Wo - pw))
        cols = _im2col(xp, gfull, kh, kw, sh, sw, dh, dw, H, W).reshape(groups, K, M)
        gx = gw = gb = None
        wg = w.reshape(groups, Cig, K)
        if n[0] is not None:
            r = wg[0] @ cols[0] if groups == 1 else xp.matmul(wg, cols)
            gx = xp.ascontiguousarray(r.reshape(Cin, N, H, W).transpose(1, 0, 2, 3))
        if n[1] is not None:
            xm = self.xm
            r = xm[0] @ cols[0].T if groups == 1 else xp.matmul(xm, cols.transpose(0, 2, 1))
            gw = r.reshape(w.shape)
        if n[2] is not None:
            gb = g.sum(axis=(0, 2, 3))
        return gx, gw, gb

    @staticmethod
    def composite(x, w, b, stride=(1, 1), padding=(0, 0), output_padding=(0, 0), groups=1,
                  dilation=(1, 1)):
        """Sum over kernel offsets of (x . w[:, :, i, j]) scattered onto the output grid."""
        N, Cin, H, W = x.shape
        _, Cog, kh, kw = w.shape
        Cig = Cin // groups
        Hf = (H - 1) * stride[0] + dilation[0] * (kh - 1) + 1 + output_padding[0]
        Wf = (W - 1) * stride[1] + dilation[1] * (kw - 1) + 1 + output_padding[1]
        outs = []
        for gi in range(groups):
            xs = permute(x[:, gi * Cig:(gi + 1) * Cig], (0, 2, 3, 1))
            acc = None
            for i in range(kh):
                for j in range(kw):
                    t = permute(matmul(xs, w[gi * Cig:(gi + 1) * Cig, :, i, j]), (0, 3, 1, 2))
                    key = (slice(None), slice(None), _window(i, dilation[0], stride[0], H),
                           _window(j, dilation[1], stride[1], W))
                    t = D.index_scatter(t, key, (N, Cog, Hf, Wf))
                    acc = t if acc is None else acc + t
            outs.append(acc)
        out = outs[0] if groups == 1 else cat(outs, 1)
        ph, pw = padding
        out = out[:, :, ph:Hf - ph, pw:Wf - pw]
        if b is not None:
            out = out + reshape(b, (1, -1, 1, 1))
        return out


# ----------------------------------------------------------------------------- user functions
def _check_input(x, ndim, op, name="input"):
    if not hasattr(x, "ndim"):
        raise TypeError(f"{op}: {name} must be a Tensor, got {type(x).__name__}")
    if x.ndim not in (ndim, ndim + 1):
        raise RuntimeError(f"{op}: expected a {ndim}-D (unbatched) or {ndim + 1}-D (batched) {name}, "
                           f"got shape {tuple(x.shape)}")


def _batched(x, ndim):
    if x.ndim == ndim:
        return unsqueeze(x, 0), True
    return x, False


def _conv_padding(padding, k, d, stride, op):
    """Normalise padding (int, tuple, 'same', 'valid') to (before, after) pairs per dim."""
    n = len(k)
    if isinstance(padding, str):
        if padding == "valid":
            return tuple((0, 0) for _ in range(n))
        if padding == "same":
            if any(s != 1 for s in stride):
                raise ValueError(f"{op}: padding='same' needs stride 1 in every dimension, got stride "
                                 f"{stride}")
            out = []
            for ki, di in zip(k, d):
                total = di * (ki - 1)
                out.append((total // 2, total - total // 2))
            return tuple(out)
        raise ValueError(f"{op}: padding must be an int, a tuple of {n} ints, 'same' or 'valid', "
                         f"got {padding!r}")
    p = _tuple(padding, n, "padding", op, minimum=0)
    return tuple((a, a) for a in p)


def _check_conv(x, w, b, groups, op, transposed=False):
    if not hasattr(w, "ndim"):
        raise TypeError(f"{op}: weight must be a Tensor, got {type(w).__name__}")
    if w.ndim != x.ndim:
        raise RuntimeError(f"{op}: weight must have {x.ndim} dimensions for an input of shape "
                           f"{tuple(x.shape)}, got weight of shape {tuple(w.shape)}")
    if isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        raise ValueError(f"{op}: groups must be a positive int, got {groups!r}")
    C = x.shape[1]
    if transposed:
        if w.shape[0] != C:
            raise RuntimeError(f"{op}: weight of shape {tuple(w.shape)} expects {w.shape[0]} input "
                               f"channels (weight.shape[0]), but the input has {C} (shape {tuple(x.shape)})")
        if C % groups:
            raise RuntimeError(f"{op}: input channels ({C}) must be divisible by groups ({groups})")
        cout = w.shape[1] * groups
    else:
        if C % groups or w.shape[0] % groups:
            raise RuntimeError(f"{op}: input channels ({C}) and output channels ({w.shape[0]}) must both "
                               f"be divisible by groups ({groups})")
        if w.shape[1] * groups != C:
            raise RuntimeError(f"{op}: weight of shape {tuple(w.shape)} with groups={groups} expects "
                               f"{w.shape[1] * groups} input channels, but the input has {C} "
                               f"(shape {tuple(x.shape)})")
        cout = w.shape[0]
    if b is not None:
        if not hasattr(b, "ndim"):
            raise TypeError(f"{op}: bias must be a Tensor or None, got {type(b).__name__}")
        if tuple(b.shape) != (cout,):
            raise RuntimeError(f"{op}: bias must have shape ({cout},), got {tuple(b.shape)}")
    if x.dtype != w.dtype:
        raise RuntimeError(f"{op}: input dtype {x.dtype} and weight dtype {w.dtype} differ; cast one "
                           f"of them (e.g. .float() or .double())")


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) over (N, C, H, W) or (C, H, W) input.

    weight (out, in/groups, kh, kw); padding an int, a pair, 'same' or 'valid'.
    """
    op = "conv2d"
    _check_input(input, 3, op)
    x, unb = _batched(input, 3)
    _check_conv(x, weight, bias, groups, op)
    k = tuple(weight.shape[2:])
    s = _tuple(stride, 2, "stride", op, minimum=1)
    d = _tuple(dilation, 2, "dilation", op, minimum=1)
    (pt, pb), (pl, pr) = _conv_padding(padding, k, d, s, op)
    out = Conv2dFn.apply(x, weight, bias, stride=s, pads=(pt, pb, pl, pr), dilation=d, groups=groups)
    if unb:
        out = squeeze(out, 0)
    return out


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution over (N, C, L) or (C, L) input; weight (out, in/groups, k).

    Runs as a 2-D convolution over a height-1 image.
    """
    op = "conv1d"
    _check_input(input, 2, op)
    x, unb = _batched(input, 2)
    _check_conv(x, weight, bias, groups, op)
    k = (weight.shape[2],)
    s = _tuple(stride, 1, "stride", op, minimum=1)
    d = _tuple(dilation, 1, "dilation", op, minimum=1)
    ((pl, pr),) = _conv_padding(padding, k, d, s, op)
    x4 = unsqueeze(x, 2)
    w4 = unsqueeze(weight, 2)
    out = Conv2dFn.apply(x4, w4, bias, stride=(1, s[0]), pads=(0, 0, pl, pr), dilation=(1, d[0]),
                         groups=groups)
    out = squeeze(out, 2)
    return squeeze(out, 0) if unb else out


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 2-D convolution; weight (in, out/groups, kh, kw) as PyTorch.

    Output size (H - 1)*stride - 2*padding + dilation*(k - 1) + output_padding + 1.
    """
    op = "conv_transpose2d"
    _check_input(input, 3, op)
    x, unb = _batched(input, 3)
    _check_conv(x, weight, bias, groups, op, transposed=True)
    s = _tuple(stride, 2, "stride", op, minimum=1)
    if isinstance(padding, str):
        raise ValueError(f"{op}: padding must be an int or a tuple of 2 ints (strings such as "
                         f"{padding!r} are not supported for transposed convolution)")
    p = _tuple(padding, 2, "padding", op, minimum=0)
    op_ = _tuple(output_padding, 2, "output_padding", op, minimum=0)
    d = _tuple(dilation, 2, "dilation", op, minimum=1)
    for a, si, di in zip(op_, s, d):
        if a >= max(si, di):
            raise ValueError(f"{op}: output_padding must be smaller than stride or dilation, got "
                             f"output_padding={op_}, stride={s}, dilation={d}")
    out = ConvTranspose2dFn.apply(x, weight, bias, stride=s, padding=p, output_padding=op_,
                                  groups=groups, dilation=d)
    if unb:
        out = squeeze(out, 0)
    return out


