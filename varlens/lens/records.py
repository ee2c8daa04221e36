"""The lens's record format: what one recorded tensor produces (the one place it is defined).

A :class:`Record` is one call site of one producer of a tensor during a forward pass:

* a **module** call (``level='module'``): key = the module's qualified name (``blocks.3``,
  ``(model)`` for the root), ``name#k`` for its k-th extra use in one forward pass;
* an **op** (``level='op'``, a Function applied while the model's forward runs): key =
  ``<innermost module path>:<op>`` (``blocks.3.attn:softmax``, ``blocks.3:add``, ``(model):relu``),
  ``#k`` again for the k-th extra call of that op in that module, and ``<path>:sdpa.logits`` /
  ``<path>:sdpa.softmax`` for the attention internals of a fused scaled_dot_product_attention;
* a **tap** (``level='tap'``): ``Lens.tap(name, tensor)``.

Fields (framework-neutral: the PyTorch adapter fills the same structure)::

    key        str    unique row name (above)
    path       str    module path that ran it (innermost module for ops), '(model)' for the root
    level      str    'module' | 'op' | 'tap'
    kind       str    rule kind: a module's nearest known class ('Linear', 'ReLU', 'LayerNorm', ...)
                      or an op name ('add', 'linear', 'relu', 'softmax', 'matmul', 'sdpa', ...)
    op         str|None   the op name for level 'op' (== kind), else None
    cls        str    the module's or Function's class name
    order      int    position of first execution (records are listed in this order)
    module     object the module (weights are read with ``param(name)``), None for ops and taps
    params     dict   what the rules need besides moments, captured at the first sampled call:
                      training (bool), p (dropout), eps, stride/padding/dilation/kernel (conv,
                      pooling), in_shape (tuple), dim (softmax), scale (attention), ...
    arrays     dict   name -> callable returning the current NumPy array of a parameter the op
                      read (an op's weight/bias arguments, e.g. 'weight' of a linear op)
    out        Stats  the output tensor (forward), every sampled call merged
    grad       Stats  dL/d(output) (backward), every sampled call merged
    weight, weight_grad  Stats  the module's ``weight`` and its gradient (Lens.step)
    inputs     list[InputMoments]  per positional tensor input: producer key, mean, E[x^2]
    cross      float  E[a*b] of the first two inputs (add/sub/mul of equal shapes), pooled
    cross_n    int    calls the cross term is averaged over
    unit_q     ndarray|None  per output unit (last dim for Linear, dim 1 for conv/norm)
                      sum over calls of the mean over the other dims of y^2 (calibrates the
                      local ratio over units)
    unit_calls int
    grad_unit_q, grad_unit_calls   the same for dL/d(output), kept for tensors that feed a
                      Linear/conv (calibrates the backward local ratio over input units)
    producer   str|None   key of the record whose output was input 0
    consumers  list[str]  keys of records that read this output
    source     str|None   for a module: the op record that produced its output (same array)
    rows       int    leading dimension of the output
    nonfinite  dict   {'forward': step, 'backward': step} of the first sampled step on which
                      this tensor held a NaN/Inf (Lens.first_nonfinite names the first record)

On the CUDA device the per-array reductions (``summarize``, ``moments``, ``Stats.update_param``,
saturation, headroom counts, per-unit second moments) run on the device with its array library
(:func:`_device_summary` and friends), and only their few scalars (a vector of units for the
per-unit moments) are copied to the host, one copy per array.

``Stats`` holds streaming float64 moments of a stream of arrays (count, mean, M2, max |x|,
zeros, NaN/Inf counts, per-row second moments for the standard error, saturation, and the
float16/bfloat16 headroom counts).  A tensor that is all NaN or all Inf has ``n == 0`` but
``calls > 0`` and its ``nan``/``inf`` counts: it is never dropped.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from varlens.core import array as B
from varlens.core.array import ones_cached
from varlens.lens import kernels as _K
from varlens.lens.kernels import headroom_counts, row_stats

SAT_LEVEL = 0.99
# float16 / bfloat16 limits (IEEE binary16; bfloat16 shares float32's exponent range)
F16_MAX, F16_TINY = 65504.0, 2.0 ** -14
BF16_MAX, BF16_TINY = float(np.float32((2 - 2 ** -7) * 2.0 ** 127)), 2.0 ** -126
NUMERICS_SAMPLE = 4096    # elements read per tensor for the headroom fractions (strided sample)

_F32 = np.dtype(np.float32)
_FAST = (_F32, np.dtype(np.float64))


def _on_device(a):
    """True for a CUDA array (statistics reduced there, only scalars copied back)."""
    return a.__class__ is not np.ndarray and B.is_device_array(a)


def _host_values(xp, values):
    """The device scalars ``values`` as host float64 numbers, in one copy."""
    return B.to_host(xp.stack([v.astype(np.float64) for v in values]))


def _device_summary(a):
    """:func:`summarize` of a CUDA array, reduced on the device in float64 (NaN/Inf counted and
    left out, as :func:`_summarize_general`); one copy of ten scalars to the host."""
    xp = B.namespace(a)
    rows2 = a.reshape(a.shape[0], -1)
    m, width = rows2.shape
    if rows2.size == 0:
        return (0, 0.0, 0.0, 0.0, 0, 0, 0, (0, 0.0, 0.0), width)
    x = rows2.astype(np.float64)
    fin = xp.isfinite(x)
    xf = xp.where(fin, x, 0.0)
    n = fin.sum()
    s1 = xf.sum()
    mean = s1 / xp.maximum(n, 1)
    d = xp.where(fin, xf - mean, 0.0)
    m2 = (d * d).sum()
    rsq = (xf * xf).sum(axis=1)
    rowfin = fin.all(axis=1)
    rn = rowfin.sum()
    rq = xp.where(rowfin, rsq / width, 0.0)
    rmean = rq.sum() / xp.maximum(rn, 1)
    rd = xp.where(rowfin, rq - rmean, 0.0)
    h = _host_values(xp, [n, mean, m2, xp.abs(xf).max(), (x == 0).sum(), xp.isnan(x).sum(),
                          rn, rmean, (rd * rd).sum()])
    n_, nan_ = int(h[0]), int(h[5])
    inf_ = int(rows2.size - n_ - nan_)
    rows = (int(h[6]), float(h[7]), float(h[8])) if h[6] else (0, 0.0, 0.0)
    if n_ == 0:
        return (0, 0.0, 0.0, 0.0, 0, nan_, inf_, rows, width)
    return (n_, float(h[1]), float(h[2]), float(h[3]), int(h[4]), nan_, inf_, rows, width)


def _device_sums(a):
    """(n finite, sum, sum of squares, max |x|, nan, inf) of a CUDA array, one copy to the host."""
    xp = B.namespace(a)
    x = a.reshape(-1).astype(np.float64)
    fin = xp.isfinite(x)
    xf = xp.where(fin, x, 0.0)
    h = _host_values(xp, [fin.sum(), xf.sum(), xf @ xf, xp.abs(xf).max(), xp.isnan(x).sum()])
    n = int(h[0])
    return n, float(h[1]), float(h[2]), float(h[3]), int(h[4]), int(x.size - n - int(h[4]))


def _stats2d(a):
    """kernels.row_stats of ``a`` seen as (leading dim, rest), or None where it does not apply
    (other dtypes, non-contiguous, empty, NaN/Inf or overflowing sums)."""
    rows2 = a.reshape(a.shape[0], -1) if a.ndim >= 2 else a.reshape(1, -1)
    if rows2.dtype not in _FAST or not rows2.size or not rows2.flags.c_contiguous:
        return None
    r = row_stats(rows2)
    if r is None or not (math.isfinite(r[0]) and math.isfinite(r[1]) and math.isfinite(r[2])):
        return None
    return r


def _sums(a):
    """(flat float array, sum, sum of squares) of ``a`` by NumPy (float64 for other dtypes).
    Inf - Inf inside a sum shows up as a non-finite result for the caller to handle, not as
    a warning."""
    flat = a.reshape(-1)
    if flat.dtype.kind != "f" or flat.dtype.itemsize < 4:
        flat = flat.astype(np.float64)
    if not flat.flags.c_contiguous:
        flat = np.ascontiguousarray(flat)
    rows = flat.reshape(a.shape[0], -1) if a.ndim >= 2 else flat.reshape(1, -1)
    with np.errstate(invalid="ignore", over="ignore"):
        s1 = float(np.add.reduce(rows @ ones_cached(rows.shape[1], rows.dtype), axis=None, dtype=np.float64))
        s2 = float(flat @ flat)
    return flat, s1, s2


def moments(a):
    """(n, mean, second moment) of an array, for inputs whose only use is the local
    propagation rule.  None if empty or not finite."""
    if a.size == 0:
        return None
    if _on_device(a):
        n, s1, s2, _, nan, inf = _device_sums(a)
        return None if (nan or inf or not n) else (n, s1 / n, s2 / n)
    st = _stats2d(a)
    if st is not None:
        n = a.size
        return n, st[0] / n, st[1] / n
    flat, s1, s2 = _sums(a)
    if not (math.isfinite(s1) and math.isfinite(s2)):
        return None
    n = flat.size
    return n, s1 / n, s2 / n


def summarize(a):
    """One array's contribution: (n, mean, M2, max|x|, zeros, nan, inf, per-row second moments, width).

    Rows are the leading dimension.  A contiguous float32/float64 array with every value
    finite is read once by :func:`varlens.lens.kernels.row_stats` (sum, sum of squares, the
    per-row spread, max |x| and the exact-zero count, accumulated in float64); anything else
    goes to :func:`_summarize_general`, which counts NaN/Inf and leaves them out.
    """
    if a.__class__ is np.ndarray and a.dtype is _F32 and a.size and a.flags.c_contiguous:
        if _K._kernels:                  # the common case, float32 on the host: one compiled call
            k = _K._summary32            # (_kernels: None before first use, False without numba)
            rows2 = a if a.ndim == 2 else (a.reshape(a.shape[0], -1) if a.ndim else a.reshape(1, 1))
            r = k(rows2)
            if r[0] >= 0:                # every value finite; float32 data cannot overflow the float64 sums
                return r
            return _summarize_general(rows2)
    if a.ndim == 0:
        a = a.reshape(1, 1)
    if a.__class__ is not np.ndarray and _on_device(a):
        return _device_summary(a)
    rows2 = a if a.ndim == 2 else a.reshape(a.shape[0], -1)
    r = None
    if rows2.dtype in _FAST and rows2.size and rows2.flags.c_contiguous:
        r = row_stats(rows2)
    if r is None:
        return _summarize_general(rows2)
    s1, s2, ss, amax, zeros = r
    if not (math.isfinite(s1) and math.isfinite(s2) and math.isfinite(ss)):
        return _summarize_general(rows2)
    n = rows2.size
    m, width = rows2.shape
    ww = float(width * width)
    mean = s1 / n
    # the per-row second moments (row sum of squares / width), as (count, mean, sum of
    # squared deviations)
    rows = (m, s2 / width / m, max(ss / ww - s2 * s2 / (ww * m), 0.0))
    return (n, mean, max(s2 - n * mean * mean, 0.0), amax, zeros, 0, 0, rows, width)


def _summarize_general(rows2):
    """:func:`summarize` for any other array: other dtypes, non-contiguous, NaN/Inf or huge values."""
    width = rows2.shape[1]
    if rows2.dtype.kind != "f":
        rows2 = rows2.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        rs = rows2.sum(axis=1, dtype=np.float64) if rows2.dtype.itemsize < 4 else rows2.sum(axis=1)
        rq = (rows2 * rows2).sum(axis=1).astype(np.float64) / width
        s1 = float(rs.astype(np.float64).sum())
        s2 = float(rq.sum()) * width
    if math.isfinite(s1) and math.isfinite(s2):
        n = rows2.size
        if n == 0:
            return (0, 0.0, 0.0, 0.0, 0, 0, 0, (0, 0.0, 0.0), width)
        mean = s1 / n
        amax = float(np.abs(rows2).max())
        zeros = int(np.count_nonzero(rows2 == 0))
        return (n, mean, max(s2 - n * mean * mean, 0.0), amax, zeros, 0, 0, _row_stats(rq), width)
    x = rows2.astype(np.float64)
    fin = np.isfinite(x)
    n_nan = int(np.isnan(x).sum())
    n_inf = int(x.size - fin.sum() - n_nan)
    xf = x[fin]
    rows = _row_stats(rq[np.isfinite(rq)])
    if xf.size == 0:
        return (0, 0.0, 0.0, 0.0, 0, n_nan, n_inf, rows, width)
    with np.errstate(over="ignore", invalid="ignore"):   # float64 values above ~1e154 overflow M2
        mean = float(xf.mean())
        m2 = float(((xf - mean) ** 2).sum())
    return (xf.size, mean, m2, float(np.abs(xf).max()),
            int(xf.size - np.count_nonzero(xf)), n_nan, n_inf, rows, width)


def _row_stats(rq):
    """(count, mean, sum of squared deviations) of per-row second moments (float64)."""
    n = rq.size
    if n == 0:
        return (0, 0.0, 0.0)
    mean = float(rq.sum()) / n
    d = rq - mean
    return (n, mean, float(d @ d))


def _folded(field):
    """A read-only view of one accumulator that first merges the summaries still pending."""
    def get(self):
        if self._pend:
            self._fold()
        return getattr(self, field)
    get.__name__ = field[1:]
    return property(get)


class Stats:
    """Streaming statistics of a stream of arrays (float64 accumulators, Chan/Welford merges).

    Per-array summaries are queued and merged when a result is read (or every 64 arrays), so
    a sampled training step pays only for the passes over its data, not for the merges.
    """

    __slots__ = ("_n", "_mean", "_m2", "_amax", "_zeros", "_nan", "_inf", "sat", "sat_n", "_rows", "_rq_mean",
                 "_rq_m2", "entropy_sum", "entropy_n", "calls", "shape", "_width", "_pend",
                 "num_n", "tiny16", "tiny_bf16", "over16")

    def __init__(self):
        self._n = 0
        self._mean = 0.0
        self._m2 = 0.0
        self._amax = 0.0
        self._zeros = 0
        self._nan = 0
        self._inf = 0
        self.sat = 0          # saturated elements (or rows, for softmax)
        self.sat_n = 0        # elements (rows) the saturation count is over
        self._rows = 0        # per-row second moments (rows = leading dim): Welford
        self._rq_mean = 0.0
        self._rq_m2 = 0.0
        self.entropy_sum = 0.0
        self.entropy_n = 0
        self.calls = 0
        self.shape = None
        self._width = 1
        self._pend = []       # summaries not merged yet
        self.num_n = 0        # elements the headroom counts are over (a strided sample per array)
        self.tiny16 = 0       # 0 < |x| < float16's smallest normal (would lose precision / flush)
        self.tiny_bf16 = 0    # 0 < |x| < bfloat16's smallest normal
        self.over16 = 0       # |x| > float16's largest value (would overflow to Inf)

    n = _folded("_n")
    mean = _folded("_mean")
    m2 = _folded("_m2")
    amax = _folded("_amax")
    zeros = _folded("_zeros")
    nan = _folded("_nan")
    inf = _folded("_inf")
    rows = _folded("_rows")
    rq_mean = _folded("_rq_mean")
    rq_m2 = _folded("_rq_m2")
    width = _folded("_width")

    # ------------------------------------------------------------------ update
    def update(self, a, kind=None, summary=None):
        """Merge one array into the statistics.  ``kind``: None, 'tanh', 'sigmoid' or 'softmax'.

        ``summary``: a precomputed :func:`summarize` of the same array (a module whose output
        is also its child's output is not summarised twice)."""
        self.calls += 1
        self.shape = a.shape
        if a.size == 0:
            return
        p = self._pend                   # (self.merge, inline)
        p.append(summarize(a) if summary is None else summary)
        if len(p) >= 64:
            self._fold()
        if kind is not None:
            self._saturation(a.reshape(a.shape[0], -1) if (a.ndim and kind != "softmax") else a, kind)

    def merge(self, sm):
        """Queue one :func:`summarize` result (merged on the next read)."""
        p = self._pend
        p.append(sm)
        if len(p) >= 64:
            self._fold()

    def _fold(self):
        """Merge the queued summaries (Chan's formulas of _merge_moments and _merge_rows, written
        out in one loop with the totals in locals)."""
        pend, self._pend = self._pend, []
        na, mu, m2a, top = self._n, self._mean, self._m2, self._amax
        ra, rmu, rm2 = self._rows, self._rq_mean, self._rq_m2
        zs, nans, infs = self._zeros, self._nan, self._inf
        for n, mean, m2, amax, zeros, nan, inf, rows, width in pend:
            self._width = width
            nans += nan
            infs += inf
            if n == 0:
                continue
            t = na + n
            d = mean - mu
            mu += d * n / t
            m2a += m2 + d * d * na * n / t
            na = t
            if amax > top:  # noqa: PLR1730  (no max() call in the merge loop)
                top = amax
            zs += zeros
            rn = rows[0]
            if rn:
                t = ra + rn
                d = rows[1] - rmu
                rmu += d * rn / t
                rm2 += rows[2] + d * d * ra * rn / t
                ra = t
        self._n, self._mean, self._m2, self._amax = na, mu, m2a, top
        self._rows, self._rq_mean, self._rq_m2 = ra, rmu, rm2
        self._zeros, self._nan, self._inf = zs, nans, infs

    def update_param(self, a):
        """Statistics for a parameter or its gradient (one array per step): mean, second
        moment and max |x|; no rows, no zeros."""
        self.calls += 1
        self.shape = a.shape
        if a.size == 0:
            return
        if self._pend:
            self._fold()
        if _on_device(a):
            n, s1, s2, amax, nan, inf = _device_sums(a)
            self._nan += nan
            self._inf += inf
            if n == 0:
                return
            mean = s1 / n
            self._merge_moments(n, mean, max(s2 - n * mean * mean, 0.0))
            self._amax = max(self._amax, amax)
            self._width = n
            return
        st = _stats2d(a)
        if st is not None:
            s1, s2, amax, n = st[0], st[1], st[3], a.size
        else:
            flat, s1, s2 = _sums(a)
            if not (math.isfinite(s1) and math.isfinite(s2)):
                fin = np.isfinite(flat)
                n_nan = int(np.isnan(flat).sum())
                self._nan += n_nan
                self._inf += int(flat.size - fin.sum() - n_nan)
                flat = flat[fin].astype(np.float64)
                if flat.size == 0:
                    return
                s1, s2 = float(flat.sum()), float(np.dot(flat, flat))
            n = flat.size
            amax = float(np.abs(flat).max())
        mean = s1 / n
        self._merge_moments(n, mean, max(s2 - n * mean * mean, 0.0))
        self._amax = max(self._amax, amax)
        self._width = n

    def _merge_moments(self, n_b, mean_b, m2_b):
        n_a = self._n
        n = n_a + n_b
        d = mean_b - self._mean
        self._mean += d * n_b / n
        self._m2 += m2_b + d * d * n_a * n_b / n
        self._n = n

    def _merge_rows(self, n_b, mean_b, m2_b):
        """Chan's merge of a batch of per-row second moments (count, mean, M2) into the totals."""
        n_a = self._rows
        n = n_a + n_b
        d = mean_b - self._rq_mean
        self._rq_mean += d * n_b / n
        self._rq_m2 += m2_b + d * d * n_a * n_b / n
        self._rows = n

    def _saturation(self, a, kind):
        if _on_device(a):
            self._saturation_on_device(a, kind)
            return
        if kind == "tanh":
            self.sat += int(np.count_nonzero(np.abs(a) > SAT_LEVEL))
            self.sat_n += a.size
        elif kind == "sigmoid":
            self.sat += int(np.count_nonzero((a > SAT_LEVEL) | (a < 1 - SAT_LEVEL)))
            self.sat_n += a.size
        elif kind == "softmax":  # probabilities along the last axis
            p = a.reshape(-1, a.shape[-1]).astype(np.float64)
            self.sat += int(np.count_nonzero(p.max(axis=1) > SAT_LEVEL))
            self.sat_n += p.shape[0]
            with np.errstate(divide="ignore", invalid="ignore"):
                ent = -(np.where(p > 0, p * np.log(p), 0.0)).sum(axis=1)
            ent = ent[np.isfinite(ent)]
            self.entropy_sum += float(ent.sum())
            self.entropy_n += ent.size

    def _saturation_on_device(self, a, kind):
        """_saturation reduced on the device (one copy of two scalars)."""
        xp = B.namespace(a)
        if kind == "tanh":
            self.sat += int(_host_values(xp, [(xp.abs(a) > SAT_LEVEL).sum()])[0])
            self.sat_n += a.size
        elif kind == "sigmoid":
            self.sat += int(_host_values(xp, [xp.logical_or(a > SAT_LEVEL, a < 1 - SAT_LEVEL).sum()])[0])
            self.sat_n += a.size
        elif kind == "softmax":
            p = a.reshape(-1, a.shape[-1]).astype(np.float64)
            ent = -(xp.where(p > 0, p * xp.log(xp.where(p > 0, p, 1.0)), 0.0)).sum(axis=1)
            fin = xp.isfinite(ent)
            h = _host_values(xp, [(p.max(axis=1) > SAT_LEVEL).sum(), xp.where(fin, ent, 0.0).sum(), fin.sum()])
            self.sat += int(h[0])
            self.sat_n += p.shape[0]
            self.entropy_sum += float(h[1])
            self.entropy_n += int(h[2])

    # ------------------------------------------------------------------ results
    @property
    def var(self):
        return self.m2 / self.n if self.n else float("nan")

    @property
    def second_moment(self):
        return self.var + self.mean * self.mean if self.n else float("nan")

    @property
    def q_se(self):
        """Standard error of the second moment, from the spread of per-row second moments."""
        if self.rows < 2:
            return float("nan")
        return math.sqrt(self.rq_m2 / (self.rows - 1) / self.rows)

    def update_numerics(self, a):
        """Count, on a strided sample of at most NUMERICS_SAMPLE elements of ``a``, the values
        that float16/bfloat16 could not hold: below the smallest normal (nonzero) or above
        float16's largest value."""
        flat = a.reshape(-1)
        if flat.dtype.kind != "f" or flat.size == 0:
            return
        step = max(1, flat.size // NUMERICS_SAMPLE)
        if _on_device(flat):
            xp = B.namespace(flat)
            s = xp.abs(flat[::step].astype(np.float64))
            nz = s > 0
            h = _host_values(xp, [xp.logical_and(nz, s < F16_TINY).sum(), xp.logical_and(nz, s < BF16_TINY).sum(),
                                  (s > F16_MAX).sum()])
            self.tiny16 += int(h[0])
            self.tiny_bf16 += int(h[1])
            self.over16 += int(h[2])
            self.num_n += int(s.size)
            return
        a, b, c, n = headroom_counts(flat, step, F16_TINY, BF16_TINY, F16_MAX)
        self.tiny16 += a
        self.tiny_bf16 += b
        self.over16 += c
        self.num_n += n

    def headroom(self):
        """Float16/bfloat16 headroom: max |x| against each type's largest value (log2 margin; < 0:
        would overflow) and the fractions below their smallest normal, or None before any sample."""
        if not self.num_n:
            return None
        amax = self.amax

        def margin(top):
            return math.log2(top / amax) if amax > 0 else float("inf")
        return {"max_abs": amax, "float16_margin_log2": margin(F16_MAX), "bfloat16_margin_log2": margin(BF16_MAX),
                "float16_frac_overflow": self.over16 / self.num_n,
                "float16_frac_subnormal": self.tiny16 / self.num_n,
                "bfloat16_frac_subnormal": self.tiny_bf16 / self.num_n, "sampled": self.num_n}

    def as_dict(self):
        d = {"n": self.n, "calls": self.calls, "shape": list(self.shape) if self.shape is not None else None,
             "mean": self.mean if self.n else None, "var": self.var if self.n else None,
             "second_moment": self.second_moment if self.n else None,
             "second_moment_se": None if self.rows < 2 else self.q_se,
             "max_abs": self.amax, "frac_zero": self.zeros / self.n if self.n else None,
             "nan": self.nan, "inf": self.inf}
        if self.sat_n:
            d["frac_saturated"] = self.sat / self.sat_n
        if self.entropy_n:
            d["mean_entropy"] = self.entropy_sum / self.entropy_n
        h = self.headroom()
        if h is not None:
            d["headroom"] = h
        return d




class InputMoments:
    """One positional input of a record: its producer and its pooled moments over sampled calls."""

    __slots__ = ("producer", "sum_mean", "sum_q", "n", "shape")

    def __init__(self):
        self.producer = None
        self.sum_mean = 0.0
        self.sum_q = 0.0
        self.n = 0
        self.shape = None

    def add(self, mean, q, shape=None):
        self.sum_mean += mean
        self.sum_q += q
        self.n += 1
        if shape is not None:
            self.shape = shape

    @property
    def mean(self):
        return self.sum_mean / self.n if self.n else 0.0

    @property
    def q(self):
        return self.sum_q / self.n if self.n else 0.0


def _array_of(p):
    """A parameter as a NumPy array: a varlens Tensor (``_data``), a torch tensor, or an array."""
    if p is None:
        return None
    d = getattr(p, "_data", None)
    if isinstance(d, np.ndarray):
        return d
    if hasattr(p, "detach") and hasattr(p, "cpu"):          # a torch tensor (adapter)
        return p.detach().cpu().numpy()
    return np.asarray(p)


@dataclasses.dataclass(eq=False)
class Record:
    """Everything measured for one call site of one tensor producer (format: module docstring)."""
    key: str
    path: str
    level: str = "module"
    kind: str = ""
    op: str | None = None
    cls: str = ""
    order: int = 0
    module: object = None
    params: dict = dataclasses.field(default_factory=dict)
    arrays: dict = dataclasses.field(default_factory=dict)
    out: Stats = dataclasses.field(default_factory=Stats)
    grad: Stats = dataclasses.field(default_factory=Stats)
    weight: Stats = dataclasses.field(default_factory=Stats)
    weight_grad: Stats = dataclasses.field(default_factory=Stats)
    inputs: list = dataclasses.field(default_factory=list)
    cross: float = 0.0
    cross_n: int = 0
    unit_q: object = None
    unit_calls: int = 0
    grad_unit_q: object = None
    grad_unit_calls: int = 0
    producer: str | None = None
    consumers: list = dataclasses.field(default_factory=list)
    source: str | None = None
    rows: int | None = None
    fan_in: int | None = None
    inp_var_group: float = 0.0     # the variance each normalisation group sees (norm layers)
    nonfinite: dict = dataclasses.field(default_factory=dict)
    sat_kind: object = None
    grad_hook: object = None
    via: str | None = None      # (lens-internal) the record whose output this module returned: its fast path
    linked: set = dataclasses.field(default_factory=set)   # (input index, producer key) pairs linked

    # ---- compatibility names of the first input's moments and the rule kind
    @property
    def name(self):
        return self.path

    @property
    def type(self):
        return self.kind

    def _inp0(self):
        return self.inputs[0] if self.inputs else None

    @property
    def inp_n(self):
        i = self._inp0()
        return i.n if i is not None else 0

    @property
    def inp_mean(self):
        """Mean of input 0, averaged over the sampled calls."""
        i = self._inp0()
        return i.mean if i is not None else 0.0

    @property
    def inp_q(self):
        """Second moment of input 0, averaged over the sampled calls."""
        i = self._inp0()
        return i.q if i is not None else 0.0

    @property
    def inp_moments(self):
        return (self.inp_mean, self.inp_q)

    def input(self, i):
        """The i-th InputMoments (made on first use)."""
        ins = self.inputs
        while len(ins) <= i:
            ins.append(InputMoments())
        return ins[i]

    def param(self, name):
        """The current NumPy array of parameter ``name`` (module attribute, or an op's argument)."""
        f = self.arrays.get(name)
        if f is not None:
            return _array_of(f())
        if self.module is not None:
            return _array_of(getattr(self.module, name, None))
        return None

    def add_units(self, a, axis, grad=False, cols=None):
        """Accumulate the per-unit second moment of output ``a`` (or of its gradient, ``grad``)
        with units along ``axis`` (accumulated in float64).  ``cols``: the
        :func:`varlens.lens.kernels.col_sums` of ``a`` seen as (-1, last axis), when ``axis`` is
        the last one and the caller has them already."""
        if a.ndim == 0 or a.dtype.kind != "f":
            return
        if cols is not None:
            u = cols[1] / (a.size // a.shape[-1])
        elif _on_device(a):     # reduced on the device; the vector of units comes back
            xp = B.namespace(a)
            x = (a if axis == a.ndim - 1 else xp.moveaxis(a, axis, -1)).reshape(-1, a.shape[axis]).astype(np.float64)
            u = B.to_host((x * x).sum(axis=0)) / x.shape[0]
        else:
            x = (a if axis == a.ndim - 1 else np.moveaxis(a, axis, -1)).reshape(-1, a.shape[axis])
            with np.errstate(over="ignore", invalid="ignore"):
                u = np.einsum("ij,ij->j", x, x, dtype=np.float64) / x.shape[0]
        self.add_unit_q(u, grad)

    def add_unit_q(self, u, grad=False):
        """Add one call's per-unit second moments ``u`` (a host vector) to the running sums."""
        fq, fc = ("grad_unit_q", "grad_unit_calls") if grad else ("unit_q", "unit_calls")
        cur = getattr(self, fq)
        if cur is None or cur.shape != u.shape:
            setattr(self, fq, u)
            setattr(self, fc, 1)
        else:
            setattr(self, fq, cur + u)
            setattr(self, fc, getattr(self, fc) + 1)

    @property
    def unit_second_moments(self):
        return None if self.unit_q is None else self.unit_q / self.unit_calls

    @property
    def grad_unit_second_moments(self):
        return None if self.grad_unit_q is None else self.grad_unit_q / self.grad_unit_calls
