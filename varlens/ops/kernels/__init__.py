"""Compiled fused kernels (numba) for the hot elementwise, normalisation and optimiser ops.

Each family module here (``pointwise``, ``rows``, ``adam``) exposes plain functions on
arrays that run one compiled pass over memory when numba is available, and the same maths
as NumPy passes otherwise (numba missing, or ``VARLENS_NO_NUMBA=1``, the switch the lens's
kernels honour too).  The compiled path takes float32, C-contiguous arrays only; float64
and everything else goes through NumPy, so float64 gradient checks exercise the NumPy path
(tests/test_fused_kernels.py holds the two paths to each other and to PyTorch).  The kernels
and their NumPy fallbacks take host arrays only: ``usable`` is False for a CUDA array, and the
ops then run their device composite in the array library of their inputs (issue 21).

numba is imported, and each kernel compiled, on first use only (``cache=True``: later
processes load the machine code from ``__pycache__``), so ``import varlens`` does not pay
for it.  This module holds what the families share: the switch, the jit options and two
float32 helpers that the compiler can vectorise (numba has no vector ``exp`` or ``erf``
without Intel's SVML, which this machine lacks):

* ``exp_nonpos(x)``: e^x for x <= 0 (the only arguments softmax and GELU's derivative
  need): Cody-Waite reduction x = n ln2 + r, |r| <= ln2/2, a degree-7 Taylor polynomial for
  e^r (truncation below 5e-9 relative), and 2^n built from its IEEE bits.  Below -87.33
  (where e^x is under float32's smallest normal number) it returns 0; NaN gives NaN.
* ``erf32(x)``: erf(x) = x P(x^2)/Q(x^2) on |x| <= 4 (erf(4) rounds to 1 in float32), a
  rational fit of degrees (5, 5) made for this module by iteratively reweighted least
  squares against ``scipy.special.erf``; within 7 float32 ulps (4.1e-7 absolute) of the
  correctly rounded value over the whole line, 3.3e-7 relative for tiny |x|
  (tests/test_fused_kernels.py checks it against SciPy over the range and at the extremes).
"""
from __future__ import annotations

import os

import numpy as np  # numba kernels work on NumPy arrays; the NumPy fallbacks use the same

_state = {}   # "numba": the module or False; "helpers": the compiled shared helpers

# erf(x) ~ x P(t) / Q(t), t = x^2 (coefficients lowest power first), fitted for |x| <= 4
ERF_P = (1.1283789808e+00, 1.9624186790e-01, 5.3466553128e-02, 4.0033457343e-03,
         2.8803542738e-04, 1.9748936219e-06)
ERF_Q = (1.0, 5.0724598763e-01, 1.1647350081e-01, 1.5443819877e-02,
         1.2162885848e-03, 3.7481209917e-05)


def numba_module():
    """numba, or None when it is missing or disabled by ``VARLENS_NO_NUMBA`` (read on the
    first call: the ops ask on every call, and os.environ costs a microsecond)."""
    nb = _state.get("numba")
    if nb is None:
        nb = False
        if os.environ.get("VARLENS_NO_NUMBA", "") in ("", "0"):
            try:
                import numba as nb
            except ImportError:
                nb = False
        _state["numba"] = nb
    return nb or None


_F32 = np.dtype(np.float32)


def usable(*arrays):
    """True when the compiled path applies: numba on and every array float32, C-contiguous.
    (``dtype is _F32`` first: comparing with the type np.float32 converts it on every call.)"""
    for a in arrays:
        if a.__class__ is not np.ndarray or (a.dtype is not _F32 and a.dtype != _F32) \
                or not a.flags.c_contiguous:
            return False
    return numba_module() is not None


def usable_or_none(*arrays):
    """``usable`` with None entries skipped (an absent weight or bias)."""
    for a in arrays:
        if a is not None and (a.__class__ is not np.ndarray or (a.dtype is not _F32 and a.dtype != _F32)
                              or not a.flags.c_contiguous):
            return False
    return numba_module() is not None


def jit(nb, reduce=False):
    """numba.njit with the options every kernel here uses.  ``reduce``: allow reassociation,
    so sums over a row vectorise (their order then differs from NumPy's, within rounding)."""
    fm = {"contract", "nsz", "arcp"} | ({"reassoc"} if reduce else set())
    return nb.njit(fastmath=fm, nogil=True, boundscheck=False, cache=True, error_model="numpy")


def helpers():
    """The shared compiled helpers (exp_nonpos, erf32), compiled on first use."""
    h = _state.get("helpers")
    if h is not None:
        return h
    from varlens.ops.kernels import compiled as c
    h = {"exp_nonpos": c.exp_nonpos, "erf32": c.erf32}
    _state["helpers"] = h
    return h
