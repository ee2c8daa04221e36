"""Report: terminal table, JSON export (schema in docs/lens.md) and PNG plots (matplotlib, Agg)."""
from __future__ import annotations

import json
import math

from varlens.lens.compare import compare, summary

SCHEMA = "varlens.lens/1"


def _f(x, w=10):
    if x is None:
        return "-".rjust(w)
    if isinstance(x, float) and not math.isfinite(x):
        return str(x).rjust(w)
    ax = abs(x)
    s = f"{x:.3e}" if ax != 0 and (ax < 1e-2 or ax >= 1e4) else f"{x:.4g}"
    return s.rjust(w)


def table(rows, direction=None, max_rows=None):
    """A plain-text table (one line per tensor and direction): measured E[x^2], the local
    prediction and local ratio with its interval, the chained ratio, the level relative to
    the reference, and the verdict (with the reason where there is no rule)."""
    hdr = (f"{'tensor':28s} {'type':11s} {'dir':8s} {'measured':>10s} {'local':>10s} {'ratio':>7s} "
           f"{'interval':>15s} {'chain':>7s} {'rel':>9s}  verdict")
    lines = [hdr, "-" * len(hdr)]
    sel = [r for r in rows if direction is None or r.direction == direction]
    if max_rows and len(sel) > max_rows:
        head = max_rows // 2
        sel = sel[:head] + [None] + sel[-(max_rows - head):]
    for r in sel:
        if r is None:
            lines.append("  ...")
            continue
        iv = "-" if r.local_low is None else f"[{r.local_low:.3g}, {r.local_high:.3g}]"
        rc = r.predicted_chain
        chain = (r.measured / rc) if (rc and r.measured is not None and rc > 0) else None
        tag = r.verdict
        if r.verdict == "stable" and r.chain_agrees is False:
            tag += " (chain off)"
        nans = r.extra.get("nan", 0) + r.extra.get("inf", 0)
        if nans:
            tag += f" ({nans} nan/inf)"
        sat = r.extra.get("frac_saturated")
        if sat is not None:
            tag += f" sat={sat:.2f}"
        if r.verdict in ("no rule", "non-finite") and r.note:
            tag = r.note if r.note.startswith("no ") else f"{tag}: {r.note}"
        lines.append(f"{r.key[-28:]:28s} {r.type[:11]:11s} {r.direction[:8]:8s} {_f(r.measured)} "
                     f"{_f(r.predicted_local)} {_f(r.ratio_local, 7)} {iv:>15s} {_f(chain, 7)} {_f(r.relative, 9)}  {tag}")
    return "\n".join(lines)


def summary_text(summ):
    out = []
    for d, s in summ.items():
        where = "" if s["first_bad_depth"] is None else f" from depth {s['first_bad_depth']} ({s['first_bad_tensor']})"
        out.append(f"{d:8s}: {s['verdict']}{where}; second moment spans {_f(s['min_relative'], 0)} .. "
                   f"{_f(s['max_relative'], 0)} of the reference; {s['n_drift']}/{s['n_compared']} tensors "
                   f"drift (local ratio outside its interval); {s.get('n_zero_init', 0)} zero-init; "
                   f"{s.get('n_no_rule', 0)} without a rule; {s['nan_or_inf']} NaN/Inf")
        fn = s.get("first_nonfinite")
        if fn:
            by = f", made by the backward of {', '.join(fn['by'])}" if fn.get("by") else ""
            made = "" if fn.get("inputs_finite") is not False else " (its input was already non-finite)"
            out.append(f"{'':10s}first NaN/Inf: {fn['key']} (module {fn['path']}, op {fn['op']}) at step {fn['step']}"
                       f"{made}{by}")
    return "\n".join(out)


def to_json(lens, rows=None, meta=None, include_records=True):
    """The JSON document described in docs/lens.md (a dict; json.dumps it)."""
    rows = compare(lens) if rows is None else rows
    doc = {"schema": SCHEMA, "meta": meta or {}, "steps_seen": lens.steps_seen,
           "steps_sampled": lens.steps_sampled, "every": lens.every,
           "summary": summary(rows, lens), "first_nonfinite": dict(lens.first_nonfinite),
           "tensors": [r.as_dict() for r in rows]}
    if include_records:
        recs = {}
        for rec in lens.ordered():
            recs[rec.key] = {"type": rec.type, "level": rec.level, "path": rec.path, "op": rec.op,
                             "source": rec.source, "order": rec.order, "producer": rec.producer,
                             "consumers": list(rec.consumers), "output": rec.out.as_dict(),
                             "grad": rec.grad.as_dict(), "input_mean": rec.inp_mean, "input_second_moment": rec.inp_q,
                             "inputs": [{"producer": i.producer, "mean": i.mean, "second_moment": i.q}
                                        for i in rec.inputs],
                             "nonfinite": dict(rec.nonfinite)}
            if rec.cross_n:
                recs[rec.key]["cross"] = rec.cross / rec.cross_n
            if rec.weight.n:
                recs[rec.key]["weight"] = rec.weight.as_dict()
            if rec.weight_grad.n:
                recs[rec.key]["weight_grad"] = rec.weight_grad.as_dict()
        doc["records"] = recs
    return _clean(doc)


def _clean(o):
    """JSON-safe: NumPy scalars to Python, non-finite floats to strings ('nan', 'inf')."""
    if isinstance(o, dict):
        return {str(k): _clean(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_clean(v) for v in o]
    if hasattr(o, "item") and not isinstance(o, (str, bytes)):
        o = o.item()
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    return o


def write_json(path, doc):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_depth(curves, path, title="Second moment against depth", type_filter=None):
    """Variance (second moment) against depth, forward and backward, one curve per initialisation.

    ``curves``: {label: rows from compare()}.  ``type_filter``: keep only these module types
    (e.g. {'Linear'} for pre-activations).  Measured: solid with markers; predicted (chained): dashed.
    """
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, direction in zip(axes, ("forward", "backward")):
        for i, (label, rows) in enumerate(curves.items()):
            rs = [r for r in rows if r.direction == direction and (type_filter is None or r.type in type_filter)
                  and r.measured is not None and r.measured > 0]
            if not rs:
                continue
            xs = list(range(len(rs)))
            color = f"C{i}"
            ax.semilogy(xs, [r.measured for r in rs], "o-", ms=3, color=color, label=f"{label} measured")
            pr = [(x, r.predicted_chain) for x, r in zip(xs, rs) if r.predicted_chain and r.predicted_chain > 0]
            if pr:
                ax.semilogy([p[0] for p in pr], [p[1] for p in pr], "--", color=color, alpha=0.7,
                            label=f"{label} predicted")
        ax.set_xlabel("layer (execution order)")
        ax.set_ylabel("E[x^2]" if direction == "forward" else "E[(dL/dx)^2]")
        ax.set_title(f"{direction}")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_attention(result, path):
    """Per head: logit variance, softmax entropy and saturated fraction, with and without 1/sqrt(d).

    ``result``: the dict returned by varlens.lens.experiments.attention_scaling.
    """
    plt = _plt()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for i, (label, per_head) in enumerate(result["by_scale"].items()):
        heads = list(range(len(per_head)))
        axes[0].semilogy(heads, [h["logit_var"] for h in per_head], "o-", color=f"C{i}", label=label)
        axes[0].semilogy(heads, [h["logit_var_predicted"] for h in per_head], "--", color=f"C{i}", alpha=0.6)
        axes[1].plot(heads, [h["entropy"] for h in per_head], "o-", color=f"C{i}", label=label)
        axes[2].plot(heads, [h["frac_saturated"] for h in per_head], "o-", color=f"C{i}", label=label)
    axes[1].axhline(result["max_entropy"], color="k", lw=0.8, ls=":", label="log n (uniform)")
    axes[0].set_title("attention logit variance (dashed: predicted)")
    axes[1].set_title("softmax entropy (nats)")
    axes[2].set_title("rows with max prob > 0.99")
    for ax in axes:
        ax.set_xlabel("head")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"d = {result['d']}, sequence length {result['seq_len']}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
