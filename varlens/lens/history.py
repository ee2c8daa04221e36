"""The lens over training: per-step history of predicted and measured second moments, the
update-to-data ratio of every parameter, and sampled histograms (quantiles, never full copies).

``LensHistory(model, every=N)`` attaches a :class:`~varlens.lens.probes.Lens` that samples one
training step in N.  Call ``history.step()`` after each optimiser step (the Trainer's
``LensCallback`` does).  At each sampled step it stores, per tensor and direction, the rows of
``compare()`` for that step alone (the lens's pooled statistics are reset after each point, so
the history shows how the moments move instead of one average over training), and

* per parameter, the update-to-data ratio |Δw| / |w| of that step's optimiser update (Karpathy's
  makemore diagnostic: around 1e-3 is healthy; far above, the learning rate is too large for
  that tensor; far below, it barely trains);
* per module output and its gradient, ``quantiles`` evenly spaced quantiles of a random sample of
  at most ``sample`` entries: enough to draw makemore-style activation and gradient histograms.

The history is bounded: at most ``max_points`` points are kept (the oldest are dropped).
``plot_moments(path)`` draws the second moment of each layer against the step with the
predicted band; ``plot_histograms(path)`` the per-layer distributions at the last point;
``write_tensorboard(writer)`` sends both to TensorBoard; ``save(path)`` writes JSON.
"""
from __future__ import annotations

import collections
import json
import math
import os

import numpy as np

from varlens.core import array as B
from varlens.lens.compare import compare
from varlens.lens.probes import Lens
from varlens.train.callbacks import Callback

SCHEMA = "varlens.lens.history/1"


def reset_lens(lens):
    """Forget everything a Lens has pooled (records are rebuilt by the next forward pass)."""
    lens.records.clear()
    lens._order = 0
    lens.first_nonfinite = {"forward": None, "backward": None}


class LensHistory:
    """Predicted vs measured second moments, update ratios and quantiles, every ``every`` steps."""

    def __init__(self, model, every=10, max_points=500, quantiles=21, sample=4096, level="module",
                 histograms=True, seed=0, lens=None):
        for name, v in (("every", every), ("max_points", max_points), ("quantiles", quantiles), ("sample", sample)):
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                raise ValueError(f"LensHistory: {name} must be a positive int, got {v!r}")
        if quantiles < 2:
            raise ValueError(f"LensHistory: quantiles must be at least 2, got {quantiles}")
        self.model = model
        self.every, self.level = every, level
        self.lens = lens if lens is not None else Lens(model, every=every, weight_every=1)
        self.points = collections.deque(maxlen=max_points)
        self.qs = np.linspace(0.0, 1.0, quantiles)
        self.sample = sample
        self.histograms = histograms
        self._rng = np.random.default_rng(seed)
        self._steps = 0
        self._before = None          # parameter copies taken just before a sampled step's update
        self._hist = {}              # (module path, 'forward'|'backward') -> quantiles of this step
        self._handles = []
        if histograms:
            for name, mod in model.named_modules():
                if name and not any(True for _ in mod.children()):
                    self._handles.append(mod.register_forward_hook(self._make_hook(name)))
        self._arm()

    # ------------------------------------------------------------------ sampling
    def _sampled_now(self):
        return self.lens._active

    def _arm(self):
        """Before a sampled step's update: copy the parameters (for |Δw| / |w|)."""
        if self._sampled_now():
            # copies on the parameters' device (|dw| / |w| is reduced there: two scalars come back)
            self._before = {n: p._data.copy() for n, p in self.model.named_parameters()}
        else:
            self._before = None

    def _quantiles(self, a):
        if B.is_device_array(a):     # the sample is gathered on the device; only it comes back
            flat = a.reshape(-1)
            if flat.size > self.sample:
                flat = flat[B.to_namespace(self._rng.integers(0, flat.size, self.sample), B.namespace(flat))]
            flat = B.to_host(flat)
        else:
            flat = np.asarray(a).reshape(-1)
        if flat.size > self.sample:
            flat = flat[self._rng.integers(0, flat.size, self.sample)]
        flat = flat[np.isfinite(flat)].astype(np.float64)
        if flat.size == 0:
            return None
        return np.quantile(flat, self.qs).tolist()

    def _make_hook(self, name):
        def hook(module, args, output):
            if not self._sampled_now() or not hasattr(output, "_data"):
                return None
            self._hist[(name, "forward")] = self._quantiles(output._data)
            if output.requires_grad:
                def ghook(g):
                    self._hist[(name, "backward")] = self._quantiles(g._data)
                    return None
                output.register_hook(ghook)
            return None
        return hook

    # ------------------------------------------------------------------ the step
    def step(self, step=None):
        """Call once per training step, after the optimiser's update."""
        sampled = self._sampled_now()
        point = None
        if sampled:
            rows = compare(self.lens, level=self.level)
            point = {"step": int(self._steps if step is None else step), "rows": [], "update_ratio": {},
                     "quantiles": {}}
            for r in rows:
                band = (None, None)
                pred = r.predicted_chain if r.predicted_chain is not None else r.predicted_local
                if pred is not None and r.ratio and r.ci_low is not None:
                    band = (pred * r.ci_low / r.ratio, pred * r.ci_high / r.ratio)
                point["rows"].append({"key": r.key, "direction": r.direction, "type": r.type,
                                      "measured": r.measured, "predicted": pred, "band": band,
                                      "ratio_local": r.ratio_local, "verdict": r.verdict})
            if self._before is not None:
                for n, p in self.model.named_parameters():
                    old = self._before.get(n)
                    if old is None:
                        continue
                    w = p._data
                    xp = B.namespace(w, old)
                    den = float(xp.linalg.norm(old))
                    point["update_ratio"][n] = float(xp.linalg.norm(w - old)) / den if den > 0 else None
            point["quantiles"] = {f"{k[0]}|{k[1]}": v for k, v in self._hist.items() if v is not None}
            self._hist = {}
            self.points.append(point)
        self.lens.step()
        if sampled:
            reset_lens(self.lens)
        self._steps += 1
        self._arm()
        return point

    def reset(self):
        """Drop the history and the lens's pooled statistics; keep sampling."""
        self.points.clear()
        self._hist = {}
        reset_lens(self.lens)

    def detach(self):
        self.lens.detach()
        for h in self._handles:
            h.remove()
        self._handles.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()

    # ------------------------------------------------------------------ reading
    def series(self, key, direction="forward"):
        """(steps, measured, predicted, band_low, band_high) of one tensor over the history."""
        out = ([], [], [], [], [])
        for p in self.points:
            for r in p["rows"]:
                if r["key"] == key and r["direction"] == direction:
                    vals = (p["step"], r["measured"], r["predicted"], r["band"][0], r["band"][1])
                    for lst, v in zip(out, vals):
                        lst.append(np.nan if v is None else v)
        return tuple(np.asarray(v, dtype=np.float64) for v in out)

    def keys(self, direction="forward"):
        seen = []
        for p in self.points:
            for r in p["rows"]:
                if r["direction"] == direction and r["key"] not in seen:
                    seen.append(r["key"])
        return seen

    def to_dict(self):
        return {"schema": SCHEMA, "every": self.every, "points": list(self.points)}

    def save(self, path):
        """Write the history as JSON (atomically)."""
        from varlens.lens.report import _clean
        tmp = f"{path}.tmp{os.getpid()}"
        with open(tmp, "w") as f:
            json.dump(_clean(self.to_dict()), f)
        os.replace(tmp, path)
        return path

    # ------------------------------------------------------------------ pictures
    def plot_moments(self, path, direction="forward", types=None, max_layers=12):
        """E[x²] of each layer against the step, with the predicted band (shaded)."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        keys = [k for k in self.keys(direction)
                if types is None or any(r["type"] in types for p in self.points for r in p["rows"] if r["key"] == k)]
        keys = keys[:max_layers]
        fig, ax = plt.subplots(figsize=(8, 4.5))
        for i, k in enumerate(keys):
            s, m, pr, lo, hi = self.series(k, direction)
            color = plt.cm.viridis(i / max(len(keys) - 1, 1))
            ax.plot(s, m, "-", color=color, label=k)
            ok = np.isfinite(lo) & np.isfinite(hi)
            if ok.any():
                ax.fill_between(s[ok], lo[ok], hi[ok], color=color, alpha=0.15)
        ax.set_yscale("log")
        ax.set_xlabel("step")
        ax.set_ylabel("E[x²]" if direction == "forward" else "E[g²]")
        ax.set_title(f"{direction} second moment per layer (shaded: predicted band)")
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    def plot_histograms(self, path, point=-1):
        """makemore-style: the distribution of each layer's output (left) and gradient (right)."""
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        if not self.points:
            raise RuntimeError("LensHistory.plot_histograms: no point recorded yet (call step() after training steps)")
        qd = self.points[point]["quantiles"]
        fig, axes = plt.subplots(1, 2, figsize=(11, 4))
        for ax, direction in zip(axes, ("forward", "backward")):
            names = [k.split("|")[0] for k in qd if k.endswith("|" + direction)]
            if not names:
                continue
            qa = [np.asarray(qd[f"{n}|{direction}"]) for n in names]
            lo = min(q[1] for q in qa)                   # common bins over the layers' central ranges
            hi = max(q[-2] for q in qa)
            if not hi > lo:
                lo, hi = lo - 1.0, hi + 1.0
            edges = np.linspace(lo, hi, 61)
            for i, (name, q) in enumerate(zip(names, qa)):
                # the CDF at the bin edges, interpolated between the stored quantiles
                cdf = np.interp(edges, q, self.qs, left=0.0, right=1.0)
                ax.plot(0.5 * (edges[1:] + edges[:-1]), np.diff(cdf), label=name,
                        color=plt.cm.viridis(i / max(len(names) - 1, 1)))
            ax.set_title(("activation" if direction == "forward" else "gradient") + " distribution per layer")
            ax.set_ylabel("fraction of entries per bin")
            ax.legend(fontsize=7)
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path

    def write_tensorboard(self, writer, point=-1):
        """Send one point to a SummaryWriter: second moments, predictions, update ratios."""
        p = self.points[point]
        for r in p["rows"]:
            if r["measured"] is not None and math.isfinite(r["measured"]):
                writer.add_scalar(f"lens/{r['direction']}/{r['key']}/measured", r["measured"], p["step"])
            if r["predicted"] is not None and math.isfinite(r["predicted"]):
                writer.add_scalar(f"lens/{r['direction']}/{r['key']}/predicted", r["predicted"], p["step"])
        for n, v in p["update_ratio"].items():
            if v is not None and v > 0:
                writer.add_scalar(f"lens/update_ratio_log10/{n}", math.log10(v), p["step"])


class LensCallback(Callback):
    """Trainer callback: a LensHistory over the whole fit, written to the run folder at the end
    (``lens_history.json``, ``lens_moments_forward.png``, ``lens_moments_backward.png``,
    ``lens_histograms.png``) and, when the Trainer logs to TensorBoard, at each point."""

    def __init__(self, every=10, out_dir=None, **history_options):
        self.every, self.out_dir, self.options = every, out_dir, history_options
        self.history = None

    def on_fit_start(self, trainer):
        model = getattr(trainer.model, "module", trainer.model)    # DDP wraps the model
        self.history = LensHistory(model, every=self.every, **self.options)

    def on_step_end(self, trainer):
        if self.history is None:
            return
        point = self.history.step(getattr(trainer, "step", None))
        writer = getattr(trainer, "tensorboard", None)
        if point is not None and writer is not None:
            self.history.write_tensorboard(writer)

    def on_fit_end(self, trainer):
        if self.history is None:
            return
        self.history.detach()
        out = self.out_dir or getattr(trainer, "out_dir", None)
        if out and self.history.points and _is_main():
            os.makedirs(out, exist_ok=True)
            self.history.save(os.path.join(out, "lens_history.json"))
            self.history.plot_moments(os.path.join(out, "lens_moments_forward.png"), "forward")
            self.history.plot_moments(os.path.join(out, "lens_moments_backward.png"), "backward")
            self.history.plot_histograms(os.path.join(out, "lens_histograms.png"))


def _is_main():
    """Rank 0 (or no process group) writes the files."""
    try:
        from varlens import distributed as dist
        return not dist.is_initialized() or dist.get_rank() == 0
    except ImportError:
        return True
