"""The lens's one-pass statistics kernel (numba) against NumPy's passes and float64 references."""
import math
import warnings

import numpy as np
import pytest

from varlens.lens import kernels as K
from varlens.lens import probes as P


def _ref(x):
    """float64 reference: (sum, sum of squares, sum of squared row sums of squares, max|x|, zeros)."""
    r = x.astype(np.float64).reshape(x.shape[0], -1)
    rq = (r * r).sum(1)
    return r.sum(), (r * r).sum(), (rq * rq).sum(), np.abs(r).max(), int((r == 0).sum())


def _arrays():
    g = np.random.default_rng(0)
    for dt in (np.float32, np.float64):
        for shape in ((1, 1), (7, 3), (128, 512), (5, 1000), (3, 17)):
            x = g.standard_normal(shape).astype(dt)
            yield x
            r = np.maximum(x, 0)                     # half exact zeros
            yield r
            z = x.copy()
            z.reshape(-1)[::3] = -0.0                # negative zeros count as zeros
            yield z
        yield (g.standard_normal((64, 33)) * 1e-40).astype(dt)   # float32 subnormals
        yield np.full((4, 4), -2.5, dt)
        yield np.zeros((3, 5), dt)


def test_numba_is_installed_so_the_benchmarked_path_is_the_tested_one():
    assert K.compiled()


@pytest.mark.parametrize("impl", ["kernel", "numpy"])
def test_row_stats_match_a_float64_reference(impl):
    f = K.row_stats if impl == "kernel" else K.row_stats_numpy
    for x in _arrays():
        got = f(x)
        s, s2, ss, amax, zeros = _ref(x)
        exact = x.dtype == np.float64
        # float32: NumPy's passes and the kernel's float32 blocks (added up in float64) both
        # round at float32's level; the kernel's blocks hold at most 2048 terms, split across
        # vector lanes, so about 1e-7 here (1e-6 asserted)
        tol = 1e-12 if exact else (1e-6 if impl == "kernel" else 1e-5)
        # NumPy's float32 squares underflow below about 1e-19 (the kernel's do not: data that
        # small is summed in float64)
        floor = 1e-300 if (exact or impl == "kernel") else x.size * float(np.finfo(np.float32).tiny)
        scale = np.abs(x.astype(np.float64)).sum() + 1e-300
        assert abs(got[0] - s) <= tol * scale + 1e-300, (x.shape, x.dtype)
        assert got[1] == pytest.approx(s2, rel=tol, abs=floor)
        assert got[2] == pytest.approx(ss, rel=2 * tol, abs=floor * floor)
        assert got[3] == amax                           # exact: it is one of the values
        assert got[4] == zeros


def test_float32_rows_fall_back_to_float64_sums_where_float32_would_lose_them():
    """The float32 kernel sums in float32 blocks; where that would lose what float64 keeps it
    redoes the pass in float64: values so small their squares leave float32's normal range,
    values near its top, a mean large against the spread (the variance s2/n - mean^2 would
    magnify float32 rounding); rows far longer than one block stay at float32's rounding."""
    g = np.random.default_rng(5)
    cases = [(g.standard_normal((9, 40)) * 1e-30).astype(np.float32),    # squares ~1e-60
             (g.standard_normal((9, 40)) * 1e30).astype(np.float32),     # squares ~1e60
             (1e4 + g.standard_normal((9, 40))).astype(np.float32),      # mean 1e4, std 1
             g.standard_normal((2, 70_001)).astype(np.float32)]          # 35 blocks per row
    for k, x in enumerate(cases):
        s, s2, ss, amax, zeros = _ref(x)
        got = K.row_stats(x)
        n = x.size
        var_ref = s2 / n - (s / n) ** 2
        var = got[1] / n - (got[0] / n) ** 2
        assert var == pytest.approx(var_ref, rel=1e-9 if k < 3 else 1e-6), k   # the fallbacks: float64
        assert got[1] == pytest.approx(s2, rel=1e-6) and got[2] == pytest.approx(ss, rel=2e-6)
        assert got[3] == amax and got[4] == zeros


@pytest.mark.parametrize("impl", ["kernel", "numpy"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_row_stats_refuse_nan_and_inf(impl, bad):
    f = K.row_stats if impl == "kernel" else K.row_stats_numpy
    for dt in (np.float32, np.float64):
        x = np.ones((6, 9), dt)
        x[4, 7] = bad
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            assert f(x) is None


def test_summaries_agree_between_kernel_and_numpy_and_general_paths(monkeypatch):
    for x in _arrays():
        a = P.summarize(x)
        monkeypatch.setattr(K, "_kernels", False)        # the NumPy fallback
        b = P.summarize(x)
        monkeypatch.undo()
        c = P._summarize_general(x.reshape(x.shape[0], -1))   # the slow path, by other formulas
        # NumPy's float32 squares underflow below about 1e-19 (the kernel's float64 ones do not)
        floor = x.size * float(np.finfo(x.dtype).tiny)
        for u in (b, c):
            assert u[0] == a[0] and u[4] == a[4] and u[3] == a[3] and u[8] == a[8]
            assert u[1] == pytest.approx(a[1], rel=1e-5, abs=1e-12 * (abs(a[3]) + 1e-300))
            assert u[2] == pytest.approx(a[2], rel=1e-5, abs=floor)
            assert u[7][0] == a[7][0] and u[7][1] == pytest.approx(a[7][1], rel=1e-5, abs=floor)
            assert u[7][2] == pytest.approx(a[7][2], rel=1e-3, abs=1e-9 * a[7][1] ** 2 + floor * floor)


def test_huge_float64_values_overflowing_the_squares_take_the_general_path_without_warnings():
    x = np.full((3, 4), 1e200)
    x[0, 0] = -3e200
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sm = P.summarize(x)
    assert sm[0] == 12 and sm[3] == 3e200 and math.isinf(sm[2])   # the variance overflows, reported as such


def test_weight_statistics_and_input_moments_use_the_same_kernel(monkeypatch):
    g = np.random.default_rng(1)
    w = g.standard_normal((64, 300)).astype(np.float32)
    s = P.Stats()
    s.update_param(w)
    w64 = w.astype(np.float64)
    # float32 data: float32 rounding (the kernel's blocks), against a spread of 1
    assert s.mean == pytest.approx(w64.mean(), abs=1e-7)
    assert s.second_moment == pytest.approx((w64 ** 2).mean(), rel=1e-6)
    assert s.amax == np.abs(w).max()
    n, m, q = P.moments(w)
    assert (n, m, q) == (w.size, pytest.approx(w64.mean(), abs=1e-7), pytest.approx((w64 ** 2).mean(), rel=1e-6))
    w[3, 3] = np.nan
    s.update_param(w)
    assert s.nan == 1 and P.moments(w) is None


@pytest.mark.parametrize("impl", ["kernel", "numpy"])
def test_col_sums_match_a_float64_reference(impl):
    """The detail steps' per-column pass (unit second moments, feature means, an activation
    input's channel moments): sums of x, x^2, x^3 per column, in float64."""
    f = K.col_sums if impl == "kernel" else K.col_sums_numpy
    for x in _arrays():
        r = x.astype(np.float64)
        ref = np.stack([r.sum(0), (r * r).sum(0), (r * r * r).sum(0)])
        got = f(x)
        assert got.shape == (3, x.shape[1]) and got.dtype == np.float64
        scale = np.stack([np.abs(r).sum(0), (r * r).sum(0), np.abs(r * r * r).sum(0)]) + 1e-300
        assert np.all(np.abs(got - ref) <= 1e-12 * scale), (x.shape, x.dtype)
        for k in (1, 2):                 # only the first k sums; the other rows stay zero
            part = f(x, k)
            assert np.all(np.abs(part[:k] - ref[:k]) <= 1e-12 * scale[:k]) and not part[k:].any(), (x.shape, k)
    x = np.ones((4, 3), np.float32)
    x[1, 2] = np.nan
    got = f(x)
    assert np.isnan(got[:, 2]).all() and np.all(got[:, :2] == [[4, 4], [4, 4], [4, 4]])
    for rows in (1, 7, 8, 9, 17):        # row counts around the kernel's blocks of rows
        x = np.arange(rows * 5, dtype=np.float32).reshape(rows, 5) - 3
        r = x.astype(np.float64)
        assert np.array_equal(f(x), np.stack([r.sum(0), (r * r).sum(0), (r ** 3).sum(0)])), rows


@pytest.mark.parametrize("impl", ["kernel", "numpy"])
def test_headroom_counts_match_numpy(impl, monkeypatch):
    """float16/bfloat16 headroom counts over a strided sample: below each type's smallest
    normal (nonzero), above float16's largest value; NaN counts in none, zeros in none."""
    if impl == "numpy":
        monkeypatch.setattr(K, "_kernels", False)
    g = np.random.default_rng(3)
    for dt in (np.float32, np.float64):
        x = (g.standard_normal(50_000) * 10.0 ** g.integers(-45, 8, 50_000)).astype(dt)
        x[::97] = 0
        x[5] = np.nan
        x[7] = -np.inf
        for step in (1, 7, 12):
            s = np.abs(x[::step].astype(np.float64))
            with np.errstate(invalid="ignore"):
                nz = s > 0
                ref = (int((nz & (s < 2.0 ** -14)).sum()), int((nz & (s < 2.0 ** -126)).sum()),
                       int((s > 65504.0).sum()), s.size)
            assert K.headroom_counts(x, step, 2.0 ** -14, 2.0 ** -126, 65504.0) == ref, (dt, step)
            assert 0 < ref[0] and 0 < ref[2] and (dt == np.float32 or 0 < ref[1])
