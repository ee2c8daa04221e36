"""Compiled reads of a CPU torch tensor's memory for the PyTorch adapter of the lens
(:mod:`varlens.lens.torch_adapter`), built on the row, column and headroom kernels of
:mod:`varlens.lens.kernels` (the same compiled code reads varlens arrays, so both frameworks'
numbers come from it).

* :func:`summary_at`: :func:`varlens.lens.records.summarize`'s tuple of a C-contiguous
  float32/float64 matrix at an address (``Tensor.data_ptr()``), the arithmetic after the row
  pass compiled too, in one call (no NumPy view, no Python arithmetic per tensor).
* :func:`detail_at`: what a detail step reads of a tensor besides its summary, in the same call:
  the column sums of x, x^2, x^3 (:func:`varlens.lens.kernels.col_sums`: per-unit moments,
  per-feature means, per-channel moments) and the float16/bfloat16 headroom counts on the
  strided sample :meth:`varlens.lens.records.Stats.update_numerics` reads.

The compiled functions are called through their compiled entry points (no type dispatch per
call).  Without numba (or with ``VARLENS_NO_NUMBA=1``) both return False and the adapter reads
through NumPy views.  The caller checks dtype, device and layout and keeps the memory alive.
"""
from __future__ import annotations

import numpy as np

try:
    import numba
except ImportError:       # the NumPy paths of the adapter are used instead
    numba = None

from varlens.lens import kernels as _K
from varlens.lens import records as R

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_fns = None          # {name: compiled entry point} on first use; False without numba


def _entry(dispatcher, sig):
    """The compiled entry point of ``dispatcher`` for ``sig`` (compiled or loaded from the cache
    now): a call without numba's type dispatch.  The dispatcher where numba has no such handle."""
    dispatcher.compile(sig)
    try:
        return dispatcher.overloads[dispatcher.signatures[-1]].entry_point
    except (AttributeError, KeyError, IndexError):
        return dispatcher


_r32 = _r64 = _cols = _num = None   # the kernels of varlens.lens.kernels, bound by _compile (globals of the
#                                     functions below, so that numba's cache can key them: closures over
#                                     compiled functions pickle differently in every process and miss it)


def _compile():
    global _r32, _r64, _cols, _num
    k = _K._loaded()
    if k is False:
        return False
    import hashlib

    import numba
    from numba.core import cgutils, types
    from numba.core.extending import intrinsic
    _r32, _r64, _cols, _num = k[_F32], k[_F64], _K._col_kernel, _K._num_kernel
    # numba's cache checks this file's stamp only, not that of the kernels inlined from
    # varlens/lens/kernels.py: the hash of that file, a constant of each function below, makes
    # a changed kernels.py a different cache entry
    with open(_K.__file__, "rb") as f:
        src = int(hashlib.sha256(f.read()).hexdigest()[:15], 16)

    @intrinsic
    def void_ptr(typingctx, addr):
        """The integer ``addr`` as a void pointer, what numba.carray reads from."""
        def codegen(context, builder, sig, args):
            return builder.inttoptr(args[0], cgutils.voidptr_t)
        return types.voidptr(types.intp), codegen

    global _void_ptr, _finish_jit
    _void_ptr = void_ptr
    _finish_jit = numba.njit(nogil=True, cache=True)(_finish)
    jit = numba.njit(nogil=True, cache=True)
    fns = {}
    for name, make in _MAKERS.items():
        fns[name] = jit(make(src))
    i64, f64 = types.int64, types.float64
    dsig = (i64, i64, i64, i64, i64, types.float64[:, ::1], i64, i64, f64, f64, f64)
    try:
        return {_F32: (_entry(fns["summ32"], (i64, i64, i64)), _entry(fns["det32"], dsig)),
                _F64: (_entry(fns["summ64"], (i64, i64, i64)), _entry(fns["det64"], dsig))}
    except Exception as e:  # noqa: BLE001  (a kernels.py these were not written against: the slower paths)
        import warnings
        warnings.warn(f"varlens.lens.torch_kernels: compiled reads unavailable ({type(e).__name__}: {e}); "
                      "the torch lens reads through NumPy views", RuntimeWarning, stacklevel=2)
        return False


_void_ptr = None


def _finish(s1, s2, ss, amax, zeros, m, w):
    """records.summarize's tuple from the row pass (IEEE arithmetic, as its Python); n = -1
    when a value (or a float64 sum) is NaN or Inf: the caller takes its counting path."""
    if not (amax < np.inf and abs(s1) < np.inf and s2 < np.inf and ss < np.inf):
        return (-1, 0.0, 0.0, 0.0, 0, 0, 0, (m, 0.0, 0.0), w)
    n = m * w
    ww = float(w * w)
    mean = s1 / n
    sd = ss / ww - s2 * s2 / (ww * m)
    m2 = s2 - n * mean * mean
    return (n, mean, m2 if m2 > 0.0 else 0.0, amax, zeros, 0, 0,  # noqa: FURB136
            (m, s2 / w / m, sd if sd > 0.0 else 0.0), w)  # noqa: FURB136


def _make_summ32(src):
    def summ32(addr, m, w):
        s1, s2, ss, amax, zeros = _r32(numba.carray(_void_ptr(addr), (m, w), np.float32))
        return _finish_jit(s1, s2, ss, amax, zeros + 0 * src, m, w)
    return summ32


def _make_summ64(src):
    def summ64(addr, m, w):
        s1, s2, ss, amax, zeros = _r64(numba.carray(_void_ptr(addr), (m, w), np.float64))
        return _finish_jit(s1, s2, ss, amax, zeros + 0 * src, m, w)
    return summ64


def _make_det32(src):
    def det32(addr, m, w, mc, wc, out, k, step, tiny16, tiny_bf16, big16):
        s1, s2, ss, amax, zeros = _r32(numba.carray(_void_ptr(addr), (m, w), np.float32))
        if k:
            _cols(numba.carray(_void_ptr(addr), (mc, wc), np.float32), out, k)
        h = _num(numba.carray(_void_ptr(addr), (m * w,), np.float32), step, tiny16, tiny_bf16, big16)
        return _finish_jit(s1, s2, ss, amax, zeros + 0 * src, m, w), h
    return det32


def _make_det64(src):
    def det64(addr, m, w, mc, wc, out, k, step, tiny16, tiny_bf16, big16):
        s1, s2, ss, amax, zeros = _r64(numba.carray(_void_ptr(addr), (m, w), np.float64))
        if k:
            _cols(numba.carray(_void_ptr(addr), (mc, wc), np.float64), out, k)
        h = _num(numba.carray(_void_ptr(addr), (m * w,), np.float64), step, tiny16, tiny_bf16, big16)
        return _finish_jit(s1, s2, ss, amax, zeros + 0 * src, m, w), h
    return det64


_MAKERS = {"summ32": _make_summ32, "summ64": _make_summ64, "det32": _make_det32, "det64": _make_det64}
_finish_jit = None


def kernels():
    """{dtype: (summary entry, detail entry)} (compiled on first use), or False without numba."""
    global _fns
    if _fns is None:
        _fns = _compile()
    return _fns


def summary_at(addr, m, w, dtype):
    """:func:`varlens.lens.records.summarize` of the C-contiguous (m, w) float32/float64 matrix at
    ``addr``; None if a value is NaN or Inf (or a float64 sum overflows); False without numba."""
    k = _fns if _fns is not None else kernels()
    if k is False:
        return False
    r = k[dtype][0](addr, m, w)
    return r if r[0] >= 0 else None


def detail_at(addr, m, w, wc, dtype, k=3):
    """(summary as :func:`summary_at`, headroom counts (tiny16, tiny_bf16, over16, read) as
    Stats.update_numerics takes them, the column sums (3, wc) of the data seen as (-1, wc) as
    kernels.col_sums gives them, or None with ``k`` = 0) in one call; the summary is None if a
    value is not finite (the counts and sums are still those of the data); False without numba."""
    f = _fns if _fns is not None else kernels()
    if f is False:
        return False
    n = m * w
    out = np.zeros((3, wc)) if k else _NO_COLS
    sm, h = f[dtype][1](addr, m, w, n // wc, wc, out, k, max(1, n // R.NUMERICS_SAMPLE), R.F16_TINY, R.BF16_TINY,
                        R.F16_MAX)
    return (sm if sm[0] >= 0 else None), h, (out if k else None)


_NO_COLS = np.zeros((3, 0))
