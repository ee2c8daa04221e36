"""Measure: streaming statistics of every module's output and of the gradient flowing back into it.

``Lens(model)`` attaches a forward hook to every module (no change to the model).  Each
module call is one *record*, keyed by the module's qualified name (a module used twice
in one forward pass gives ``name`` and ``name#1``).  On a sampled step the hook

* updates the output's statistics (count, mean, M2 merged by Chan's formula in float64;
  second moment, max |x|, exact zeros, NaN/Inf counts, saturation for tanh/sigmoid and
  softmax-like outputs; a per-row second-moment accumulator for confidence intervals),
* remembers the input's moments (for the local propagation rule), and
* puts a gradient hook on the output tensor, so the cotangent dL/d(output) gets the same
  statistics during backward.

``lens.step()`` ends a training step: it records weight and weight-gradient statistics,
then arms the hooks for the next step if it is to be sampled (every ``every`` steps).
``lens.detach()`` removes every hook: after it the model runs exactly as before.
"""
from __future__ import annotations

import math

import numpy as np

from varlens.backend import ones_cached
from varlens.lens.kernels import row_stats

# module kinds, by class name (so this layer does not import the nn layer classes)
LINEAR_LIKE = {"Linear", "Conv1d", "Conv2d", "Conv3d", "Bilinear", "LazyLinear"}
ACT_NAMES = {"ReLU": "relu", "Tanh": "tanh", "Sigmoid": "sigmoid", "GELU": "gelu", "SiLU": "silu",
             "ELU": "elu", "Softplus": "softplus", "Identity": "identity", "LeakyReLU": "leaky_relu"}
SATURATING = {"Tanh": "tanh", "Sigmoid": "sigmoid", "Hardtanh": "tanh", "Softsign": "tanh"}
SOFTMAX_LIKE = {"Softmax", "Softmin"}
NORM_LIKE = {"BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "LayerNorm", "GroupNorm", "RMSNorm",
             "InstanceNorm1d", "InstanceNorm2d"}
DROPOUT_LIKE = {"Dropout", "Dropout1d", "Dropout2d", "Dropout3d"}
SAT_LEVEL = 0.99


_FAST = (np.dtype(np.float32), np.dtype(np.float64))


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
    if a.ndim == 0:
        a = a.reshape(1, 1)
    rows2 = a.reshape(a.shape[0], -1)
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
                 "_rq_m2", "entropy_sum", "entropy_n", "calls", "shape", "_width", "_pend")

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
        self.merge(summarize(a) if summary is None else summary)
        if kind is not None:
            self._saturation(a.reshape(a.shape[0], -1) if (a.ndim and kind != "softmax") else a, kind)

    def merge(self, sm):
        """Queue one :func:`summarize` result (merged on the next read)."""
        p = self._pend
        p.append(sm)
        if len(p) >= 64:
            self._fold()

    def _fold(self):
        pend, self._pend = self._pend, []
        for n, mean, m2, amax, zeros, nan, inf, rows, width in pend:
            self._width = width
            self._nan += nan
            self._inf += inf
            if n == 0:
                continue
            self._merge_moments(n, mean, m2)
            if amax > self._amax:
                self._amax = amax
            self._zeros += zeros
            if rows[0]:
                self._merge_rows(*rows)

    def update_param(self, a):
        """Statistics for a parameter or its gradient (one array per step): mean, second
        moment and max |x|; no rows, no zeros."""
        self.calls += 1
        self.shape = a.shape
        if a.size == 0:
            return
        if self._pend:
            self._fold()
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
        return d


_KNOWN = LINEAR_LIKE | set(ACT_NAMES) | set(SATURATING) | SOFTMAX_LIKE | NORM_LIKE | DROPOUT_LIKE | {
    "Flatten", "Unflatten", "Sequential", "Embedding"}


def module_kind(module):
    """The nearest known class name in the module's MRO (a subclass of Linear is a 'Linear')."""
    for cls in type(module).__mro__:
        if cls.__name__ in _KNOWN:
            return cls.__name__
    return type(module).__name__


class Record:
    """Everything measured for one module call site (a module used twice has two records)."""

    def __init__(self, key, name, module, order):
        self.key, self.name, self.module, self.order = key, name, module, order
        self.type = module_kind(module)        # kind used to pick the propagation rule
        self.cls = type(module).__name__
        self.out = Stats()
        self.grad = Stats()
        self.inp_sum_mean = 0.0    # input moments (for the local rule), summed over sampled calls
        self.inp_sum_q = 0.0
        self.inp_var_group = 0.0   # variance each normalisation group sees (for norm layers)
        self.inp_n = 0
        self.producer = None   # key of the record whose output was this call's input
        self.consumers = []    # keys of records that consumed this output
        self.weight = Stats()
        self.weight_grad = Stats()
        self.fan_in = None
        self.rows = None       # leading dimension of the output (batch rows)
        self.sat_kind = _UNSET  # saturation kind of the module's output (found on first use)
        self.grad_hook = None   # the hook that records dL/d(output) (made on first use)

    @property
    def inp_mean(self):
        """Mean of the module's input, averaged over the sampled calls."""
        return self.inp_sum_mean / self.inp_n if self.inp_n else 0.0

    @property
    def inp_q(self):
        """Second moment of the module's input, averaged over the sampled calls."""
        return self.inp_sum_q / self.inp_n if self.inp_n else 0.0

    @property
    def inp_moments(self):
        return (self.inp_mean, self.inp_q)


_UNSET = object()
_Tensor = None       # varlens.Tensor, bound when the first Lens is made (keeps this import light)


def _saturation_kind(module):
    t = module_kind(module)
    if t in SATURATING:
        return SATURATING[t]
    if t in SOFTMAX_LIKE:
        return "softmax"
    return None


def _first_tensor(obj):
    Tensor = _Tensor
    if isinstance(obj, Tensor):
        return obj
    if isinstance(obj, (tuple, list)):
        for o in obj:
            t = _first_tensor(o)
            if t is not None:
                return t
    if isinstance(obj, dict):
        for o in obj.values():
            t = _first_tensor(o)
            if t is not None:
                return t
    return None


class Lens:
    """Attach to ``model``; sample every ``every`` steps.  Use as a context manager or call detach().

    ``modules``: 'all' (default: every module, containers included), 'leaves' (modules
    without children) or a predicate ``f(name, module) -> bool``.
    ``grads``: also record the gradient flowing back into each module's output.
    ``weights``: record weight and weight-gradient statistics at ``step()``, on one sampled
    step in ``weight_every`` (default 10: weights change slowly and are the largest arrays,
    so reading them every step would dominate the lens's cost; 1 = every sampled step).
    """

    def __init__(self, model, every=1, modules="all", grads=True, weights=True, weight_every=10):
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"Lens: every must be a positive int (sample every N steps), got {every!r}")
        if not isinstance(weight_every, int) or weight_every < 1:
            raise ValueError(f"Lens: weight_every must be a positive int, got {weight_every!r}")
        self.weight_every = weight_every
        self._summ = {}            # id(array) -> (array, summary): one summary per array per step
        self._moms = {}            # id(array) -> (array, moments) of inputs no module produced
        if not hasattr(model, "named_modules"):
            raise TypeError(f"Lens: model must be a varlens.nn.Module, got {type(model).__name__}")
        global _Tensor
        if _Tensor is None:
            from varlens.tensor import Tensor
            _Tensor = Tensor
        self.model, self.every, self.grads, self.weights = model, every, grads, weights
        self.records = {}          # key -> Record, in order of first call
        self.steps_seen = 0
        self.steps_sampled = 0
        self._active = True
        self._handles = []
        self._calls = {}           # name -> calls in the current step
        self._produced = {}        # id(output array) -> (array, key)   (within one step)
        self._taps = 0
        self._order = 0
        for name, mod in model.named_modules():
            if modules == "leaves" and any(True for _ in mod.children()):
                continue
            if callable(modules) and not modules(name, mod):
                continue
            self._handles.append(mod.register_forward_hook(self._make_hook(name or "(model)")))
        # registered last, so it runs after the model's own record: one forward pass is over
        self._handles.append(model.register_forward_hook(self._end_pass))

    def _end_pass(self, module, args, output):
        """The model's forward returned: the next call of a module is its first use again.

        Several forward passes per step (gradient accumulation, inference without step())
        therefore merge into the same records instead of creating name#k keys, and the
        per-pass bookkeeping never grows beyond one pass (and its backward).
        """
        self._calls.clear()
        self._produced.clear()
        self._summ.clear()
        self._moms.clear()
        return None

    # ------------------------------------------------------------------ hooks
    def _make_hook(self, name):
        def hook(module, args, output):
            if self._active:
                self._record(name, module, args, output)
            return None
        return hook

    def _record(self, name, module, args, output):
        calls = self._calls
        k = calls.get(name, 0)
        calls[name] = k + 1
        key = name if k == 0 else f"{name}#{k}"
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = Record(key, name, module, self._order)
            self._order += 1
        out = output if type(output) is _Tensor else _first_tensor(output)
        inp = args[0] if args and type(args[0]) is _Tensor else _first_tensor(args)
        if out is not None:
            a = out._data
            kind = rec.sat_kind
            if kind is _UNSET:
                kind = rec.sat_kind = _saturation_kind(module)
            rec.out.update(a, kind, self._summary(a))
            rec.rows = a.shape[0] if a.ndim else 1
        if inp is not None:              # after the output: its summary may be this input's
            self._note_input(rec, module, inp)
        if out is None:
            return
        self._produced[id(a)] = (a, key)
        if self.grads and out._rg:
            h = rec.grad_hook
            if h is None:
                h = rec.grad_hook = self._grad_hook(rec)
            node = out._node
            if node is not None:          # what Tensor.register_hook does, without the handle
                if node.hooks is None:
                    node.hooks = [h]
                else:
                    node.hooks.append(h)
            else:
                out.register_hook(h)

    def _note_input(self, rec, module, inp):
        a = inp._data
        ida = id(a)
        prev = self._produced.get(ida)
        if prev is not None and prev[0] is a and prev[1] != rec.key:
            if rec.producer is None:
                rec.producer = prev[1]
            prod = self.records[prev[1]]
            if rec.key not in prod.consumers and not self._is_ancestor(rec, prod):
                prod.consumers.append(rec.key)
        hit = self._summ.get(ida)
        if hit is not None and hit[0] is a:   # summarised already (a module's output): reuse it
            sm = hit[1]
            if sm[0] == 0:
                return
            m, q = sm[1], sm[2] / sm[0] + sm[1] * sm[1]
        else:  # data or a tensor made outside any module: its mean and second moment suffice
            mo = self._memo(self._moms, a, moments)  # (the model and its first layer share it)
            if mo is None:
                return
            m, q = mo[1], mo[2]
        if rec.type in NORM_LIKE:
            rec.inp_var_group = self._group_var(module, a)
        rec.inp_sum_mean += m
        rec.inp_sum_q += q
        rec.inp_n += 1

    @staticmethod
    def _is_ancestor(rec, prod):
        # a container's output is also its last child's output: the child is not its consumer
        return prod.name.startswith(rec.name + ".") or rec.name == "(model)"

    @staticmethod
    def _group_var(module, a):
        x = a.astype(np.float64)
        if module_kind(module).startswith("BatchNorm"):
            axes = (0,) + tuple(range(2, x.ndim))
        else:
            shape = getattr(module, "normalized_shape", (x.shape[-1],))
            axes = tuple(range(x.ndim - len(tuple(shape)), x.ndim))
        return float(np.mean(x.var(axis=axes)))

    @staticmethod
    def _memo(store, a, fn):
        """fn(a), computed once per array per forward pass (``store``: id -> (array, value))."""
        hit = store.get(id(a))
        if hit is not None and hit[0] is a:
            return hit[1]
        v = fn(a)
        store[id(a)] = (a, v)
        return v

    def _summary(self, a):
        return self._memo(self._summ, a, summarize)

    def _grad_hook(self, rec):
        def hook(g):
            a = g._data
            rec.grad.update(a, None, self._summary(a) if a.size else None)
            return None
        return hook

    def tap(self, name, tensor, kind=None):
        """Record a tensor that no module returns (attention logits inside a forward, say).

        ``kind``: None, 'tanh', 'sigmoid' or 'softmax' (saturation and entropy of the rows).
        Returns the tensor unchanged, so ``x = lens.tap('logits', x)`` fits inside a forward.
        """
        if not self._active:
            return tensor
        k = self._calls.get(name, 0)
        self._calls[name] = k + 1
        key = name if k == 0 else f"{name}#{k}"
        rec = self.records.get(key)
        if rec is None:
            rec = self.records[key] = Record(key, name, _Tap(), self._order)
            self._order += 1
        a = tensor._data
        rec.out.update(a, kind)
        rec.rows = a.shape[0] if a.ndim else 1
        if self.grads and tensor.requires_grad:
            tensor.register_hook(self._grad_hook(rec))
        return tensor

    # ------------------------------------------------------------------ steps
    def step(self):
        """End a training step (call after backward): weight and weight-grad statistics, then
        decide whether the next step is sampled."""
        if self._active and self.weights and self.steps_sampled % self.weight_every == 0:
            for rec in self.records.values():
                if rec.key != rec.name:      # second use of a module: its weights are the first's
                    continue
                w = getattr(rec.module, "weight", None)
                if w is None or not hasattr(w, "_data"):
                    continue
                rec.weight.update_param(w._data)
                rec.fan_in = math.prod(w.shape[1:]) if w.ndim > 1 else None
                if w.grad is not None:
                    rec.weight_grad.update_param(w.grad._data)
        if self._active:
            self.steps_sampled += 1
        self.steps_seen += 1
        self._calls.clear()
        self._produced.clear()
        self._summ.clear()
        self._moms.clear()
        self._active = (self.steps_seen % self.every) == 0

    def detach(self):
        """Remove every hook; the model then runs as if the lens had never been attached."""
        for h in self._handles:
            h.remove()
        self._handles.clear()
        self._produced.clear()
        self._summ.clear()
        self._moms.clear()
        self._active = False

    def report(self, direction=None, max_rows=None):
        """Predicted vs measured second moments as a text table (compare + report.table)."""
        from varlens.lens.compare import compare
        from varlens.lens.report import table
        return table(compare(self), direction=direction, max_rows=max_rows)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()

    # ------------------------------------------------------------------ access
    def __getitem__(self, key):
        return self.records[key]

    def ordered(self):
        return sorted(self.records.values(), key=lambda r: r.order)


class _Tap:
    """Stands in for a module in records made by Lens.tap."""
    training = True
