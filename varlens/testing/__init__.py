"""torch.testing: ``assert_close`` and ``make_tensor`` for varlens tensors.

``assert_close(actual, expected)`` follows torch.testing.assert_close: tensors, Python numbers,
NumPy arrays, and sequences/mappings of them (compared element by element); shapes must match,
dtypes too unless ``check_dtype=False``; values within ``atol + rtol * |expected|`` with PyTorch's
default tolerances per dtype (float16 1e-3/1e-5, float32 1.3e-6/1e-5, float64 1e-7/1e-7, exact
for integers and bools); NaNs equal only with ``equal_nan=True``.  A failure raises
AssertionError naming the mismatching count and the largest differences.
"""
from __future__ import annotations

import collections.abc as _abc

import numpy as _np

__all__ = ["assert_close", "make_tensor"]

# dtype name -> (rtol, atol), PyTorch's defaults
_TOLS = {"float16": (1e-3, 1e-5), "float32": (1.3e-6, 1e-5), "float64": (1e-7, 1e-7),
         "complex64": (1.3e-6, 1e-5), "complex128": (1e-7, 1e-7)}


def _as_array(x):
    from varlens.core.tensor import Tensor
    if isinstance(x, Tensor):
        return x.detach().numpy(), True
    if isinstance(x, _np.ndarray):
        return x, True
    return _np.asarray(x), False


def _compare(actual, expected, rtol, atol, equal_nan, check_dtype, msg, path):
    if isinstance(expected, _abc.Mapping):
        if not isinstance(actual, _abc.Mapping) or set(actual) != set(expected):
            raise AssertionError(f"assert_close{path}: the mappings have different keys")
        for k in expected:
            _compare(actual[k], expected[k], rtol, atol, equal_nan, check_dtype, msg, f"{path}[{k!r}]")
        return
    if isinstance(expected, (list, tuple)) and not isinstance(actual, (str, bytes)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            raise AssertionError(f"assert_close{path}: the sequences have different lengths")
        for i, (a, e) in enumerate(zip(actual, expected)):
            _compare(a, e, rtol, atol, equal_nan, check_dtype, msg, f"{path}[{i}]")
        return
    a, a_is_arr = _as_array(actual)
    e, e_is_arr = _as_array(expected)
    where = f" at {path}" if path else ""
    if a.shape != e.shape:
        raise AssertionError(msg or f"The values for attribute 'shape' do not match{where}: "
                                    f"{tuple(a.shape)} != {tuple(e.shape)}.")
    if check_dtype and a_is_arr and e_is_arr and a.dtype != e.dtype:
        raise AssertionError(msg or f"The values for attribute 'dtype' do not match{where}: {a.dtype} != {e.dtype}.")
    if rtol is None or atol is None:
        if (rtol is None) != (atol is None):
            raise ValueError("assert_close: both 'rtol' and 'atol' must be given, or neither")
        rtol, atol = _TOLS.get(str(_np.promote_types(a.dtype, e.dtype)), (0.0, 0.0))
    a64, e64 = a.astype(_np.float64) if a.dtype.kind in "biu" else a, e.astype(_np.float64) if e.dtype.kind in "biu" else e
    ok = _np.isclose(a64, e64, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if not ok.all():
        bad = int((~ok).sum())
        diff = _np.abs(a64 - e64)
        diff = _np.where(_np.isnan(diff), _np.inf, diff)
        i = _np.unravel_index(int(_np.argmax(diff)), diff.shape) if diff.ndim else ()
        rel = diff / _np.maximum(_np.abs(e64), _np.finfo(_np.float64).tiny)
        raise AssertionError(msg or (
            f"Tensor-likes are not close!{where}\n\nMismatched elements: {bad} / {ok.size} "
            f"({100.0 * bad / max(ok.size, 1):.1f}%)\nGreatest absolute difference: {float(diff.max())} at index "
            f"{tuple(int(j) for j in i)} (up to {atol} allowed)\nGreatest relative difference: "
            f"{float(_np.nanmax(rel))} (up to {rtol} allowed)"))


def assert_close(actual, expected, *, allow_subclasses=True, rtol=None, atol=None, equal_nan=False,
                 check_device=True, check_dtype=True, check_layout=True, check_stride=False, msg=None):
    """Raise AssertionError unless ``actual`` and ``expected`` are close (see the module docstring)."""
    _compare(actual, expected, rtol, atol, equal_nan, check_dtype, msg, "")


def make_tensor(*shape, dtype, device=None, low=None, high=None, requires_grad=False, noncontiguous=False,
                exclude_zero=False, memory_format=None):
    """A random tensor of ``shape`` and ``dtype`` with values in [low, high) (PyTorch's defaults:
    [-9, 9) for floats and ints, [0, 10) for uint8, {False, True} for bool)."""
    import varlens
    if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
        shape = tuple(shape[0])
    dt = _np.dtype(dtype)
    if dt.kind == "b":
        t = varlens.randint(0, 2, shape).to(varlens.bool)
    elif dt.kind in "iu":
        lo = 0 if dt.kind == "u" else -9
        lo, hi = int(lo if low is None else low), int(10 if (high is None and dt.kind == "u") else
                                                   (9 if high is None else high))
        t = varlens.randint(lo, hi, shape, dtype=varlens.int64).to(dt)
        if exclude_zero:
            t = varlens.where(t == 0, varlens.ones_like(t), t)
    else:
        lo, hi = -9.0 if low is None else float(low), 9.0 if high is None else float(high)
        t = (varlens.rand(shape, dtype=varlens.float64) * (hi - lo) + lo).to(dt)
        if exclude_zero:
            t = varlens.where(t == 0, varlens.full_like(t, _np.finfo(dt).tiny), t)
        if requires_grad:
            t.requires_grad_(True)
    return t
