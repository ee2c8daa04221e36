"""Add, subtract and multiply of two float32 arrays of one shape when either is a strided view
(the pieces of ``split`` and their ``view``/``transpose``: q, k, v of an attention block).

NumPy runs such an op about half as fast as on contiguous arrays (2.4: 105 us for a
(2048, 128) product of rows 384 apart against 40 contiguous, on this Zen 4 host; PyTorch 45),
whatever the row length, so it is not a per-row cost.  ``binary(op, a, b)`` permutes the axes
to the memory order of ``a`` (NumPy's K order, which NumPy's own result would have too),
merges them into (R1, R2, L) rows of L contiguous elements in both operands, and runs one
compiled loop over contiguous slices of the flat memory each operand views
(strided_compiled.py): 52 us there.  The result has the layout NumPy's would have (a's memory
order), so what follows (``contiguous()``, ``view``) sees the same strides.

It answers None, and the op computes with NumPy as before, whenever it does not apply:
numba off (``VARLENS_NO_NUMBA=1``) or missing, another dtype, broadcasting, rows shorter than
8 elements, operands whose memory orders disagree or that do not merge into two outer axes,
negative or zero strides, or memory that is not a plain NumPy array's.
tests/test_fused_kernels.py holds it to NumPy.
"""
from __future__ import annotations

import numpy as np

from varlens.ops.kernels import numba_module

_K = {}
_F32 = np.dtype(np.float32)
_ndarray = np.ndarray
MIN_SIZE = 1 << 15   # below this NumPy's per-call cost dominates either way
ADD, SUB, MUL = 0, 1, 2


def _kernel():
    k = _K.get("binary")
    if k is None:
        from varlens.ops.kernels import strided_compiled as c
        k = _K["binary"] = c.binary_rows
    return k


def _flat(a):
    """The 1-D C-contiguous array over the memory ``a`` views (its owner's, reshaped), or None.
    The kernel checks that a's rows lie inside it (so a copy would be refused)."""
    o = a.base
    if o is None:
        o = a
    elif o.__class__ is not _ndarray:
        return None
    if o.flags.c_contiguous:
        return o.reshape(-1)
    f = o.ravel("K")   # dense in another order (a result in K order): a view of its memory
    return f if f.base is o else None


def usable(a, b):
    """Cheap pre-check for the callers: two large float32 ndarrays of one shape, not both
    C-contiguous (the rest is checked by ``binary``)."""
    return (a.__class__ is _ndarray and b.__class__ is _ndarray and a.size >= MIN_SIZE
            and a.shape == b.shape and not (a.flags.c_contiguous and b.flags.c_contiguous)
            and a.dtype is _F32 and b.dtype is _F32)


def binary(op, a, b):
    """a + b (op ADD), a - b (SUB) or a * b (MUL) for arrays that pass ``usable``, or None
    when the compiled path does not apply (the caller then uses NumPy)."""
    if numba_module() is None:
        return None
    shape = a.shape
    sa, sb = a.strides, b.strides
    axes = [i for i in range(len(shape)) if shape[i] != 1]
    axes.sort(key=sa.__getitem__, reverse=True)   # a's memory order, outermost first
    # the inner run: trailing axes contiguous in both operands
    L = 1
    i = len(axes) - 1
    while i >= 0:
        ax = axes[i]
        if sa[ax] != L * 4 or sb[ax] != L * 4:
            break
        L *= shape[ax]
        i -= 1
    if L < 8:
        return None
    # the outer axes merged where both operands allow, at most two left
    dims = []
    for ax in axes[:i + 1]:
        n, s_a, s_b = shape[ax], sa[ax], sb[ax]
        if s_a <= 0 or s_b < 0:
            return None
        if dims:
            p = dims[-1]
            if p[1] == s_a * n and p[2] == s_b * n:
                dims[-1] = (p[0] * n, s_a, s_b)
                continue
        dims.append((n, s_a, s_b))
    if len(dims) > 2:
        return None
    while len(dims) < 2:
        dims.insert(0, (1, 0, 0))
    af = _flat(a)
    bf = _flat(b) if af is not None else None
    if bf is None:
        return None
    (r1, a1, b1), (r2, a2, b2) = dims
    # the result in a's memory order: C-contiguous in `order`, then permuted back
    order = [ax for ax in range(len(shape)) if shape[ax] == 1] + axes
    res = np.empty([shape[ax] for ax in order], _F32)
    if not _kernel()(op, a, af, a1, a2, b, bf, b1, b2, res.reshape(r1, r2, L)):
        return None
    inv = [0] * len(order)
    for j, ax in enumerate(order):
        inv[ax] = j
    return res.transpose(inv)
