"""The coordinate check (Yang et al., Tensor Programs V): do activation sizes stay put as width grows?

Train copies of one architecture at several widths for a few steps on the same data and record,
after each step, the typical size of a coordinate of every layer's output, sqrt(E[x²]).  Under a
parametrisation with a well-defined infinite-width limit (µP) these sizes do not depend on the
width; under the standard parametrisation with Adam the output layer's coordinates grow with the
width after the first update (and with SGD the hidden ones can), which is what makes a learning
rate tuned on a small model blow up a wide one.

``coord_check(build, widths, ...)`` returns a :class:`CoordCheck`: per step and layer the slope
of log size against log width (0 means width-independent), its standard error over seeds, and a
verdict with the tolerance max(``slope_tol``, 3 standard errors).  ``CoordCheck.plot(path)`` draws
the classic picture; :func:`assert_coord_check` is an assertion for a user's own test suite.

``build(width)`` may return a varlens or a PyTorch ``nn.Module`` (the optimiser, the loss and the
hooks come from the model's own framework; PyTorch is imported only for a PyTorch model).
``parametrization='mup'`` applies µP for Adam to every Linear layer (Yang et al. 2022, Table 3):
the input layer keeps its initialisation and learning rate; hidden weights get learning rate
lr * base_width / fan_in; the output layer is initialised with variance 1/fan_in² and gets
learning rate lr * base_width / fan_in.  Which layer is which is read from how each Linear's
shape changes between two widths.
"""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from varlens.lens.torch_adapter import is_torch_module


def _framework(model):
    if is_torch_module(model):
        import torch
        return torch
    import varlens
    return varlens


def _linears(model):
    return [(n, m) for n, m in model.named_modules() if type(m).__name__ == "Linear" or
            any(c.__name__ == "Linear" for c in type(m).__mro__[:3])]


def _roles(build, widths):
    """'input', 'hidden' or 'output' for each Linear, from its shape at two widths."""
    a, b = build(widths[0]), build(widths[-1])
    la, lb = _linears(a), _linears(b)
    roles = {}
    for (name, ma), (_, mb) in zip(la, lb):
        in_scales = ma.weight.shape[1] != mb.weight.shape[1]
        out_scales = ma.weight.shape[0] != mb.weight.shape[0]
        roles[name] = "hidden" if in_scales and out_scales else ("output" if in_scales else
                                                                  ("input" if out_scales else "fixed"))
    return roles


def _mup_setup(model, roles, lr, base_width, fw):
    """µP for Adam: re-initialise the output layer and build per-parameter-group learning rates."""
    groups = []
    seen = set()
    for name, m in _linears(model):
        role = roles.get(name, "fixed")
        fan_in = m.weight.shape[1]
        with fw.no_grad():
            if role == "output":
                m.weight.normal_(0.0, 1.0 / fan_in)
        scale = base_width / fan_in if role in ("hidden", "output") else 1.0
        groups.append({"params": [m.weight], "lr": lr * scale})
        seen.add(id(m.weight))
        if m.bias is not None:
            groups.append({"params": [m.bias], "lr": lr})
            seen.add(id(m.bias))
    rest = [p for p in model.parameters() if id(p) not in seen]
    if rest:
        groups.append({"params": rest, "lr": lr})
    return groups


@dataclasses.dataclass
class CoordCheck:
    """sizes[width][seed][step][layer] and the per-(step, layer) slopes with their verdicts."""
    widths: list
    layers: list
    steps: int
    parametrization: str
    sizes: dict
    slopes: dict          # (step, layer) -> (slope, standard error, tolerance, ok)

    @property
    def ok(self):
        return all(v[3] for v in self.slopes.values())

    def failures(self):
        return [(s, layer, v[0], v[2]) for (s, layer), v in self.slopes.items() if not v[3]]

    def table(self):
        lines = [f"coordinate check ({self.parametrization}), widths {self.widths}: slope of log size vs log width"]
        lines.append(f"{'layer':24s} " + " ".join(f"step {s:<8d}" for s in range(self.steps + 1)))
        for layer in self.layers:
            cells = []
            for s in range(self.steps + 1):
                sl, se, tol, ok = self.slopes[(s, layer)]
                cells.append(f"{sl:+.2f}{'' if ok else '!'}".ljust(13))
            lines.append(f"{layer:24s} " + " ".join(cells))
        lines.append("PASS: every size width-independent within tolerance" if self.ok else
                     f"FAIL: {len(self.failures())} (step, layer) pairs grow or shrink with width ('!')")
        return "\n".join(lines)

    def __str__(self):
        return self.table()

    def plot(self, path, steps=None):
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        steps = list(range(self.steps + 1)) if steps is None else steps
        fig, axes = plt.subplots(1, len(steps), figsize=(3.2 * len(steps), 3.2), sharey=True, squeeze=False)
        for ax, s in zip(axes[0], steps):
            for i, layer in enumerate(self.layers):
                ys = [np.mean([self.sizes[w][k][s][layer] for k in range(len(self.sizes[w]))]) for w in self.widths]
                ax.plot(self.widths, ys, "o-", color=plt.cm.viridis(i / max(len(self.layers) - 1, 1)), label=layer)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_title(f"step {s}")
            ax.set_xlabel("width")
        axes[0][0].set_ylabel("coordinate size sqrt(E[x²])")
        axes[0][-1].legend(fontsize=6)
        fig.suptitle(f"coordinate check: {self.parametrization}")
        fig.tight_layout()
        fig.savefig(path, dpi=110)
        plt.close(fig)
        return path


def coord_check(build, widths, steps=3, data=None, parametrization="standard", optimizer="adam", lr=1e-2,
                seeds=3, loss_fn=None, base_width=None, slope_tol=0.15, two_sided=False):
    """Train ``build(width)`` for ``steps`` steps at each width (``seeds`` times) and test the sizes.

    A (step, layer) fails when its size grows with the width (slope above the tolerance); with
    ``two_sided=True`` also when it shrinks.  One-sided is the default because µP shrinks the
    output at initialisation on purpose (variance 1/fan_in²: size ~ width^-1/2) and lets the
    first updates bring it to an O(1), width-independent size.

    ``data``: (x, y) used at every step, or a callable ``data(step, seed) -> (x, y)``; by default a
    random (64, d_in) batch with 10 classes, d_in read from the first Linear layer.
    """
    widths = sorted(int(w) for w in widths)
    if len(widths) < 2:
        raise ValueError(f"coord_check: need at least two widths, got {widths}")
    if parametrization not in ("standard", "mup"):
        raise ValueError(f"coord_check: parametrization must be 'standard' or 'mup', got {parametrization!r}")
    if optimizer not in ("adam", "sgd"):
        raise ValueError(f"coord_check: optimizer must be 'adam' or 'sgd', got {optimizer!r}")
    base_width = widths[0] if base_width is None else base_width
    probe = build(widths[0])
    fw = _framework(probe)
    roles = _roles(build, widths) if parametrization == "mup" else {}
    lin = _linears(probe)
    if data is None:
        if not lin:
            raise ValueError("coord_check: pass data=(x, y): the model has no Linear layer to read the input size from")
        d_in = lin[0][1].weight.shape[1]
        rng = np.random.default_rng(0)
        xy = (fw.tensor(rng.standard_normal((64, d_in)).astype(np.float32)), fw.tensor(rng.integers(0, 10, 64)))
        data = lambda step, seed: xy  # noqa: E731
    elif not callable(data):
        fixed = data
        data = lambda step, seed: fixed  # noqa: E731
    if loss_fn is None:
        loss_fn = fw.nn.functional.cross_entropy
    layers = [n for n, m in probe.named_modules() if n and not any(True for _ in m.children())]
    sizes = {}
    for w in widths:
        sizes[w] = []
        for seed in range(seeds):
            fw.manual_seed(seed)
            model = build(w)
            params = _mup_setup(model, roles, lr, base_width, fw) if parametrization == "mup" else model.parameters()
            opt = (fw.optim.Adam(params, lr=lr) if optimizer == "adam" else fw.optim.SGD(params, lr=lr))
            cur = {}
            handles = [m.register_forward_hook(_size_hook(cur, n)) for n, m in model.named_modules() if n in layers]
            per_step = []
            for s in range(steps + 1):
                x, y = data(s, seed)
                out = model(x)
                per_step.append(dict(cur))
                if s == steps:
                    break
                loss = loss_fn(out, y)
                opt.zero_grad()
                loss.backward()
                opt.step()
            for h in handles:
                h.remove()
            sizes[w].append(per_step)
    slopes = {}
    lw = np.log(np.asarray(widths, dtype=np.float64))
    for s in range(steps + 1):
        for layer in layers:
            per_seed = []
            for k in range(seeds):
                ys = np.log([max(sizes[w][k][s].get(layer, np.nan), 1e-30) for w in widths])
                per_seed.append(np.polyfit(lw, ys, 1)[0])
            per_seed = np.asarray(per_seed)
            slope = float(per_seed.mean())
            se = float(per_seed.std(ddof=1) / math.sqrt(seeds)) if seeds > 1 else 0.0
            tol = max(slope_tol, 3.0 * se)
            slopes[(s, layer)] = (slope, se, tol, bool((abs(slope) if two_sided else slope) <= tol))
    return CoordCheck(widths, layers, steps, parametrization, sizes, slopes)


def _size_hook(store, name):
    def hook(module, args, output):
        data = output.detach()
        store[name] = float((data.double() ** 2).mean().sqrt())
        return None
    return hook


def assert_coord_check(result, steps=None, layers=None):
    """Raise AssertionError (for pytest) naming the (step, layer) pairs whose size depends on width."""
    bad = [(s, layer, sl, tol) for s, layer, sl, tol in result.failures()
           if (steps is None or s in steps) and (layers is None or layer in layers)]
    if bad:
        lines = [f"step {s}, {layer}: slope {sl:+.3f} of log size vs log width (tolerance {tol:.3f})"
                 for s, layer, sl, tol in bad]
        raise AssertionError("coordinate check failed (" + result.parametrization + "):\n  " + "\n  ".join(lines))
