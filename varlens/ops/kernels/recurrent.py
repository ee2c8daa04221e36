"""Fused LSTM time steps: one compiled pass over a step's (H, B) blocks each way, and a
compiled GEMM for the step's product with weights packed once per layer call (bottom of file).

The fused LSTM layer (varlens/ops/nn/rnn.py, ``LSTMLayerFunction``) does one GEMM per time
step and, between GEMMs, the gate nonlinearities and the cell update (forward) or the
pre-activation cotangents (backward).  NumPy needs about nine passes per step for the first
and, counting the derivative factors it forms for all steps at once, about twenty passes
over (T, 4H, B) and (H, B) blocks for the second; the kernels here do each step in one pass
with the float32 ``exp_nonpos`` of the package (sigmoid from one e^-|z|, tanh from
e^(-2|x|) - 1 with a Taylor branch near 0 where that would cancel), and compute the
derivative factors on the fly from the cached activations.  The layer op's NumPy code is the
fallback (numba missing or off, float64, the CUDA device, masks); tests/test_rnn_kernels.py
holds the two paths to each other and to PyTorch.

The buffers are the layer op's own (C-contiguous float32): ``act`` (T, 4H, B) with the gate
blocks o, i, f, g (sigmoid rows holding half their pre-activation), ``cs`` (T+1, H, B) the
cell states, ``tc`` (T, H, B) tanh of the new cell states, ``xh`` (I+H+1, T+1, B) whose rows
I.. hold the hidden states, ``dh_all`` (T+1, H, B) the hidden-state cotangents, ``da``
(T, 4H, B) the pre-activation cotangents in PyTorch's gate order (i, f, g, o).
"""
from __future__ import annotations

from varlens.ops.kernels import numba_module, usable

_K = {}


def lstm_step_kernels(*buffers):
    """``(forward_step, backward_step)`` compiled kernels when they apply to these buffers
    (numba on, every buffer a float32 C-contiguous host array), else None.

    ``forward_step(act, cs, tc, xh, t, cr, cw, i0, hc)``: activates act[t] in place,
    cs[cw] = f cs[cr] + i g, tc[t] = tanh cs[cw], xh[i0:i0+H, hc] = o tc[t].
    ``backward_step(act, tc, cs, cp, dh_all, dhrow, hw, dc, da, t)``: with
    dh = dh_all[dhrow] + hw, writes da[t] and replaces dc by the cotangent of cs[cp]."""
    if not usable(*buffers):
        return None
    if not _K:
        from varlens.ops.kernels import compiled as c
        _K.update(fwd=c.lstm_fwd_step, bwd=c.lstm_bwd_step)
    return _K["fwd"], _K["bwd"]


def embed_kernels(*arrays):
    """``(gather_columns, scatter_columns)`` of kernels/recurrent_embed.py when numba is on and
    every array is a C-contiguous float32 / float64 / int64 host array, else None (NumPy)."""
    import numpy as np
    for a in arrays:
        if a.__class__ is not np.ndarray or a.dtype.char not in "fdlq" or not a.flags.c_contiguous:
            return None
    if numba_module() is None:
        return None
    from varlens.ops.kernels import recurrent_embed as k
    return k.gather_columns, k.scatter_columns


# ---------------------------------------------------------------------- packed GEMM (compiled)
# Every time step multiplies the SAME weights by a thin (K, B) block, and NumPy's OpenBLAS
# re-packs the weights into its kernel layout on every call (``sgemm_oncopy``, about a sixth of
# a char-LSTM training step).  Here a register-blocked GEMM micro-kernel, written in LLVM IR
# (llvmlite comes with numba) and compiled for this CPU on first use (about 0.1 s per batch
# width, per process), works on weights packed once per call of the layer.  C (M, B) =
# W (M, K) @ X (K, B) for B a multiple of 16 up to 64: every block of R rows of W keeps its
# R x B results in R*B/16 vector registers of 16 floats through the whole K loop (W packed as
# (M/R, K, R), so each k reads R consecutive floats of W and one row of X), then stores them;
# rows left over (M not a multiple of R) go through the same kernel with R = 1.  Measured
# against NumPy's OpenBLAS on the char-LSTM's per-step products (B = 32, process CPU time, same
# process): forward W (512, 193|257) 2.37 -> 1.79 and 2.93 -> 2.28 ms per 32 steps, backward
# W_hh^T (128, 512) 1.63 -> 1.06 ms; Intel MKL's packed GEMM (cblas_sgemm_pack/_compute, from
# the ``mkl`` wheel through ctypes) measured the same within noise, so it is not used.
_ROWS = {1: 16, 2: 8, 3: 5, 4: 4}     # rows per block for B/16 vectors: 15-16 accumulators
_JIT = {}


def _kernel_ir(R, NV, name, acc=False):
    """LLVM IR of ``void name(float* wp, float* x, i64 ldx, float* c, i64 ldc, i64 M, i64 K)``:
    c[i, :16 NV] = sum_k W[i, k] x[k, :16 NV] for i < M (M a multiple of R), W packed in
    (M/R, K, R) blocks, x and c row-major with row strides ldx, ldc (in floats).  With ``acc``
    the sums start from c's contents instead of 0 (c += W x: the LSTM fed by an embedding adds
    its per-step products to the gathered input projections, rnn.py ``LSTMEmbedLayerFunction``)."""
    v16 = "<16 x float>"
    L = [f"define void @{name}(float* noalias %wp, float* noalias %x, i64 %ldx, float* noalias %c, "
         "i64 %ldc, i64 %M, i64 %K) nounwind {",
         f"entry:\n  %nb = udiv i64 %M, {R}\n  %empty = icmp eq i64 %nb, 0\n"
         "  br i1 %empty, label %done, label %blk",
         "blk:\n  %bi = phi i64 [0, %entry], [%bn, %store]",
         f"  %wb0 = mul i64 %bi, %K\n  %wbase = mul i64 %wb0, {R}"]
    if acc:     # the block's R x 16 NV results start as c's current values
        L.append(f"  %irow0 = mul i64 %bi, {R}")
        for r in range(R):
            L.append(f"  %irw{r} = add i64 %irow0, {r}\n  %ico{r} = mul i64 %irw{r}, %ldc")
            L += [f"  %ico{r}_{v} = add i64 %ico{r}, {16 * v}\n"
                  f"  %icp{r}_{v} = getelementptr float, float* %c, i64 %ico{r}_{v}\n"
                  f"  %icq{r}_{v} = bitcast float* %icp{r}_{v} to {v16}*\n"
                  f"  %i{r}_{v} = load {v16}, {v16}* %icq{r}_{v}, align 4" for v in range(NV)]
    L += ["  br label %kl", "kl:\n  %k = phi i64 [0, %blk], [%kn, %kl]"]
    L += [f"  %a{r}_{v} = phi {v16} [{f'%i{r}_{v}' if acc else 'zeroinitializer'}, %blk], [%n{r}_{v}, %kl]"
          for r in range(R) for v in range(NV)]
    L.append("  %xo = mul i64 %k, %ldx")
    for v in range(NV):
        L.append(f"  %xo{v} = add i64 %xo, {16 * v}\n  %xp{v} = getelementptr float, float* %x, i64 %xo{v}\n"
                 f"  %xq{v} = bitcast float* %xp{v} to {v16}*\n  %xv{v} = load {v16}, {v16}* %xq{v}, align 4")
    L.append(f"  %wk0 = mul i64 %k, {R}\n  %wk = add i64 %wbase, %wk0")
    for r in range(R):
        L.append(f"  %wi{r} = add i64 %wk, {r}\n  %wp{r} = getelementptr float, float* %wp, i64 %wi{r}\n"
                 f"  %ws{r} = load float, float* %wp{r}, align 4\n"
                 f"  %wv{r}a = insertelement {v16} undef, float %ws{r}, i32 0\n"
                 f"  %wv{r} = shufflevector {v16} %wv{r}a, {v16} undef, <16 x i32> zeroinitializer")
        L += [f"  %n{r}_{v} = call {v16} @llvm.fma.v16f32({v16} %wv{r}, {v16} %xv{v}, {v16} %a{r}_{v})"
              for v in range(NV)]
    L += ["  %kn = add i64 %k, 1\n  %kd = icmp eq i64 %kn, %K\n  br i1 %kd, label %store, label %kl",
          f"store:\n  %row0 = mul i64 %bi, {R}"]
    for r in range(R):
        L.append(f"  %rw{r} = add i64 %row0, {r}\n  %co{r} = mul i64 %rw{r}, %ldc")
        L += [f"  %co{r}_{v} = add i64 %co{r}, {16 * v}\n"
              f"  %cp{r}_{v} = getelementptr float, float* %c, i64 %co{r}_{v}\n"
              f"  %cq{r}_{v} = bitcast float* %cp{r}_{v} to {v16}*\n"
              f"  store {v16} %n{r}_{v}, {v16}* %cq{r}_{v}, align 4" for v in range(NV)]
    L += ["  %bn = add i64 %bi, 1\n  %bd = icmp eq i64 %bn, %nb\n  br i1 %bd, label %done, label %blk",
          "done:\n  ret void\n}"]
    return "\n".join(L)


def _compile(NV):
    """(main kernel, one-row kernel, R) for B = 16 NV columns, compiled on first use; None when
    llvmlite cannot build them here."""
    if NV in _JIT:
        return _JIT[NV]
    out = None
    try:
        import ctypes as ct
        import llvmlite.binding as llvm
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        R = _ROWS[NV]
        ir = ("declare <16 x float> @llvm.fma.v16f32(<16 x float>, <16 x float>, <16 x float>)\n"
              + _kernel_ir(R, NV, "blocks") + "\n" + _kernel_ir(1, NV, "rows") + "\n"
              + _kernel_ir(R, NV, "blocks_acc", True) + "\n" + _kernel_ir(1, NV, "rows_acc", True))
        mod = llvm.parse_assembly(ir)
        mod.verify()
        tm = llvm.Target.from_default_triple().create_target_machine(
            cpu=llvm.get_host_cpu_name(), features=llvm.get_host_cpu_features().flatten(), opt=3)
        eng = llvm.create_mcjit_compiler(mod, tm)
        eng.finalize_object()
        proto = ct.CFUNCTYPE(None, ct.c_void_p, ct.c_void_p, ct.c_int64, ct.c_void_p, ct.c_int64,
                             ct.c_int64, ct.c_int64)
        fb, fr = eng.get_function_address("blocks"), eng.get_function_address("rows")
        fba, fra = eng.get_function_address("blocks_acc"), eng.get_function_address("rows_acc")
        # (fn: numba first-class functions of blocks, rows, blocks_acc, rows_acc)
        out = (proto(fb), proto(fr), R, eng, mod, _function_pointers(fb, fr, fba, fra))
    except Exception:   # no usable llvmlite / target here: the caller keeps NumPy's BLAS
        out = None
    _JIT[NV] = out
    return out


def _function_pointers(*addresses):
    """The kernels' addresses as numba first-class functions (for the compiled time loops)."""
    from numba.core import types as nt

    class _Fn(nt.WrapperAddressProtocol):
        def __init__(self, addr):
            self.addr = addr

        def __wrapper_address__(self):
            return self.addr

        def signature(self):
            return nt.void(*(nt.int64,) * 7)
    return tuple(_Fn(a) for a in addresses)


class CompiledPackedGemm:
    """``pack`` / ``compute`` as ``PackedGemm`` with the compiled micro-kernel above (float32;
    B a multiple of 16, at most 64: ``supports(n)``)."""

    @staticmethod
    def supports(n):
        return n % 16 == 0 and 16 <= n <= 64 and _compile(n // 16) is not None

    def pack(self, W, trans, m, n, k, ws, name):
        import numpy as np
        fb, fr, R, _e, _m, fn = _compile(n // 16)
        src = W.T if trans else W                 # (m, k)
        P = ws.get(name)
        if P is None or P.size < m * k:
            P = ws[name] = np.empty(m * k, np.float32)
        nb = m // R
        P[:nb * R * k].reshape(nb, k, R)[...] = src[:nb * R].reshape(nb, R, k).transpose(0, 2, 1)
        P[nb * R * k:m * k].reshape(m - nb * R, k)[...] = src[nb * R:]
        return (fb, fr, P.ctypes.data, m, k, nb * R, P, fn)   # (P: keeps the packed copy alive)

    def compute(self, packed, b_addr, ldb, c_addr, ldc):
        fb, fr, a, m, k, mb = packed[:6]
        if mb:
            fb(a, b_addr, ldb, c_addr, ldc, mb, k)
        if mb < m:
            fr(a + mb * k * 4, b_addr, ldb, c_addr + mb * ldc * 4, ldc, m - mb, k)

    @staticmethod
    def lstm_forward(packed, act, cs, tc, xh, T, reverse, i0, accumulate=False):
        """All T forward steps of the LSTM layer in one compiled loop (``lstm_fwd_loop``):
        act[t] = W [x; h; 1] with W packed by ``pack`` (``accumulate``: act[t] += W [h; 1],
        act holding the gathered input projections), then the step's gate pass."""
        from varlens.ops.kernels import compiled as c
        fn, a, m, k, mb = packed[7], packed[2], packed[3], packed[4], packed[5]
        g = 2 if accumulate else 0
        c.lstm_fwd_loop(fn[g], fn[g + 1], a, m, mb, k, act, cs, tc, xh, T, reverse, i0)

    @staticmethod
    def lstm_backward(packed, act, tc, cs, dh_all, hw, dc, da, T, reverse):
        """All T backward steps in one compiled loop (``lstm_bwd_loop``): the step's cotangent
        pass, then hw = W_hh^T da[t] with W_hh^T packed by ``pack``."""
        from varlens.ops.kernels import compiled as c
        fn, a, m, k, mb = packed[7], packed[2], packed[3], packed[4], packed[5]
        c.lstm_bwd_loop(fn[0], fn[1], a, m, mb, k, act, tc, cs, dh_all, hw, dc, da, T, reverse)


_COMPILED_GEMM = CompiledPackedGemm()


def step_gemm(n):
    """The packed GEMM for a layer's per-step products with n columns (the batch): the compiled
    kernel when it applies (numba's switch on, n a multiple of 16 up to 64), else None (NumPy's
    BLAS)."""
    if usable() and CompiledPackedGemm.supports(n):
        return _COMPILED_GEMM
    return None


_HUGE_PAGE = 2 << 20


def huge_page_empty(shape, dtype):
    """An uninitialised host array on 2 MiB-aligned memory advised for transparent huge pages
    (Linux; elsewhere, or when that fails, a plain ``numpy.empty``).  The forward's per-step
    GEMMs read the step's [x; h; 1] block as K rows of B floats spread (T+1) B floats apart, one
    4 KiB page each; on huge pages those reads stop missing the TLB (measured on the 2-layer
    char-LSTM's second layer, K = 257: 2.09 -> 1.72 ms per 32 step GEMMs)."""
    import numpy as np
    dt = np.dtype(dtype)
    n = int(np.prod(shape)) * dt.itemsize
    try:
        import mmap
        size = -(-n // _HUGE_PAGE) * _HUGE_PAGE + _HUGE_PAGE
        mm = mmap.mmap(-1, size, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
        raw = np.frombuffer(mm, np.uint8)          # keeps the mapping alive
        off = (-raw.ctypes.data) % _HUGE_PAGE
        mm.madvise(mmap.MADV_HUGEPAGE, off, size - off)
        return raw[off:off + n].view(dt).reshape(shape)
    except (ImportError, AttributeError, OSError, ValueError):
        return np.empty(shape, dt)
