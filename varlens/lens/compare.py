"""Compare: predicted against measured second moments, per tensor, forward and backward.

For each record of a :class:`~varlens.lens.probes.Lens` this computes

* the *local* prediction: the module's rule applied to its own measured input moments
  (does this layer do what theory says?),
* the *chained* prediction: the rule applied to the producer's chained prediction, so
  errors compound along the network as theory says they should (where does the signal
  leave the theory?); the chain restarts at a tensor with no rule,
* the same two for the cotangent, walking consumers backwards from the last record,
* a confidence interval for measured/predicted: z standard errors of the measured
  second moment (from the spread of per-row second moments over all rows and sampled
  steps) combined with the finite-width fluctuation of a pooled second moment: its log
  has variance about 5/width per mixing layer of the chain (Hanin & Nica 2019), so
  finite-width noise is not called drift,
* a verdict: 'stable', 'exploding' or 'vanishing' from the second moment relative to the
  first tensor (forward) or the last (backward), and the depth where it first crosses.
"""
from __future__ import annotations

import dataclasses
import math

from varlens.lens import rules
from varlens.lens.probes import ACT_NAMES, DROPOUT_LIKE, LINEAR_LIKE, NORM_LIKE

Z = 3.0
EXPLODE = 100.0   # a second moment 100x the reference counts as exploding, 1/100 as vanishing


@dataclasses.dataclass
class Row:
    key: str
    type: str
    depth: int
    direction: str               # 'forward' or 'backward'
    measured: float | None
    se: float | None
    predicted_local: float | None
    predicted_chain: float | None
    ratio: float | None          # measured / predicted_chain (or local when no chain)
    ci_low: float | None
    ci_high: float | None
    agrees: bool | None          # ratio within its interval
    relative: float | None       # measured / reference (first forward tensor, last backward)
    verdict: str                 # stable / exploding / vanishing / no data
    extra: dict

    def as_dict(self):
        return dataclasses.asdict(self)


def _np(t):
    return None if t is None else t._data


def _forward_rule(rec, inp: rules.Moments):
    """Predicted output Moments of one module from its input moments (None: no rule)."""
    m = rec.module
    t = rec.type
    if t in LINEAR_LIKE and getattr(m, "weight", None) is not None:
        return rules.linear_forward(inp, _np(m.weight), _np(getattr(m, "bias", None)))
    if t in ACT_NAMES:
        name = ACT_NAMES[t]
        act = rules.leaky_relu(getattr(m, "negative_slope", 0.01)) if name == "leaky_relu" else name
        return rules.activation_forward(inp, act)
    if t in DROPOUT_LIKE:
        return rules.dropout_forward(inp, float(m.p)) if m.training else inp
    if t in NORM_LIKE and (m.training or not t.startswith("BatchNorm")):
        return rules.norm_forward(rec.inp_var_group or inp.var, _np(getattr(m, "weight", None)),
                                  _np(getattr(m, "bias", None)), float(getattr(m, "eps", 1e-5) or 1e-5))
    if t in ("Flatten", "Unflatten", "Identity"):
        return inp
    return None


def _backward_rule(rec, gq):
    """Predicted second moment of the cotangent of rec's *input*, from that of its output."""
    m, t = rec.module, rec.type
    inp = rules.Moments(rec.inp_mean, rec.inp_q)
    if t.startswith("Conv") and getattr(m, "weight", None) is not None:
        return rules.conv_backward(gq, _np(m.weight), getattr(m, "stride", 1))
    if t in LINEAR_LIKE and getattr(m, "weight", None) is not None:
        return rules.linear_backward(gq, _np(m.weight))
    if t in ACT_NAMES:
        name = ACT_NAMES[t]
        act = rules.leaky_relu(getattr(m, "negative_slope", 0.01)) if name == "leaky_relu" else name
        return rules.activation_backward(gq, inp, act)
    if t in DROPOUT_LIKE:
        return rules.dropout_backward(gq, float(m.p)) if m.training else gq
    if t in NORM_LIKE:
        return rules.norm_backward(gq, rec.inp_var_group or inp.var, _np(getattr(m, "weight", None)))
    if t in ("Flatten", "Unflatten", "Identity"):
        return gq
    return None


FW = 5.0   # Var[log |h_l|^2] grows by about 5/width per ReLU layer (Hanin & Nica 2019)


def _fw(rec, width):
    """Relative variance a layer adds to a pooled second moment at finite width: FW/width for a
    layer that mixes units (Linear/conv/norm), 0 for elementwise maps."""
    return FW / max(width, 1) if (rec.type in LINEAR_LIKE or rec.type in NORM_LIKE) else 0.0


def _interval(measured, se, predicted, fw_var):
    if measured is None or predicted is None or predicted <= 0 or not math.isfinite(predicted):
        return None, None, None, None
    ratio = measured / predicted
    rel_se = (se / measured) if (se is not None and measured > 0 and math.isfinite(se)) else 0.0
    half = Z * math.sqrt(rel_se * rel_se + fw_var)
    lo, hi = ratio * math.exp(-half), ratio * math.exp(half)   # symmetric on the log scale
    return ratio, lo, hi, bool(lo <= 1.0 <= hi)


def _verdict(rel):
    if rel is None or not math.isfinite(rel):
        return "no data" if rel is None else "exploding"
    if rel > EXPLODE:
        return "exploding"
    if rel < 1.0 / EXPLODE:
        return "vanishing"
    return "stable"


def compare(lens, modules=None):
    """Rows for every record (forward and backward), in order of execution.

    ``modules``: restrict to records whose type has a rule ('ruled'), or all (None).
    """
    recs = lens.ordered()
    fwd_pred, fwd_k = {}, {}
    for rec in recs:
        if rec.out.n == 0:
            continue
        inp = rules.Moments(rec.inp_mean, rec.inp_q)
        local = _forward_rule(rec, inp) if rec.inp_n else None
        chain, k = None, 0.0
        own = _fw(rec, rec.out.width)
        if rec.producer is not None and rec.producer in fwd_pred and fwd_pred[rec.producer] is not None:
            chain = _forward_rule(rec, fwd_pred[rec.producer])
            k = fwd_k[rec.producer] + own
        elif local is not None:
            chain, k = local, own
        fwd_pred[rec.key] = chain if chain is not None else (
            rules.Moments(rec.out.mean, rec.out.second_moment) if rec.out.n else None)
        fwd_k[rec.key] = k if chain is not None else 0.0
        rec._fwk_local = own
        rec._local = local
        rec._chain = chain

    # backward: walk in reverse; a record's output cotangent is predicted from its consumers'
    bwd_chain, bwd_k = {}, {}
    for rec in reversed(recs):
        rec._glocal = rec._gchain = None
        cons = [lens.records[c] for c in rec.consumers if lens.records[c].grad.n]
        if not cons:
            if rec.grad.n:
                bwd_chain[rec.key], bwd_k[rec.key] = rec.grad.second_moment, 0.0
            rec._bwk_local = 0.0
            continue
        loc, ch, kk, kl = 0.0, 0.0, 0.0, 0.0
        ok_loc = ok_ch = True
        for c in cons:
            a = _backward_rule(c, c.grad.second_moment)
            b = _backward_rule(c, bwd_chain.get(c.key, c.grad.second_moment))
            if a is None:
                ok_loc = False
            else:
                loc += a
            if b is None:
                ok_ch = False
            else:
                ch += b
            own = _fw(c, c.inp_q and max(rec.out.width, 1))
            kk = max(kk, bwd_k.get(c.key, 0.0) + own)
            kl = max(kl, own)
        rec._bwk_local = kl
        rec._glocal = loc if ok_loc else None
        rec._gchain = ch if ok_ch else None
        if rec._gchain is not None:
            bwd_chain[rec.key], bwd_k[rec.key] = rec._gchain, kk
        elif rec.grad.n:
            bwd_chain[rec.key], bwd_k[rec.key] = rec.grad.second_moment, 0.0

    fwd_ref = next((r.out.second_moment for r in recs if r.out.n and r.out.second_moment > 0), None)
    bwd_ref = next((r.grad.second_moment for r in reversed(recs) if r.grad.n and r.grad.second_moment > 0), None)
    rows = []
    for depth, rec in enumerate(recs):
        if modules == "ruled" and rec._local is None and rec._chain is None:
            continue
        if rec.out.n:
            meas = rec.out.second_moment
            pred_c = rec._chain.q if rec._chain is not None else None
            pred_l = rec._local.q if rec._local is not None else None
            ratio, lo, hi, ok = _interval(meas, rec.out.q_se, pred_c if pred_c is not None else pred_l,
                                          fwd_k.get(rec.key, 0.0) if pred_c is not None else rec._fwk_local)
            rel = meas / fwd_ref if fwd_ref else None
            extra = {"mean": rec.out.mean, "var": rec.out.var, "max_abs": rec.out.amax,
                     "frac_zero": rec.out.zeros / rec.out.n, "nan": rec.out.nan, "inf": rec.out.inf}
            if rec.out.sat_n:
                extra["frac_saturated"] = rec.out.sat / rec.out.sat_n
            if rec.out.entropy_n:
                extra["mean_entropy"] = rec.out.entropy_sum / rec.out.entropy_n
            rows.append(Row(rec.key, rec.type, depth, "forward", meas, rec.out.q_se, pred_l, pred_c, ratio, lo, hi,
                            ok, rel, _verdict(rel), extra))
        if rec.grad.n:
            meas = rec.grad.second_moment
            ratio, lo, hi, ok = _interval(meas, rec.grad.q_se, rec._gchain if rec._gchain is not None else rec._glocal,
                                          bwd_k.get(rec.key, 0.0) if rec._gchain is not None else rec._bwk_local)
            rel = meas / bwd_ref if bwd_ref else None
            extra = {"mean": rec.grad.mean, "max_abs": rec.grad.amax, "nan": rec.grad.nan, "inf": rec.grad.inf}
            if rec.weight_grad.n:
                extra["weight_grad_second_moment"] = rec.weight_grad.second_moment
                extra["weight_second_moment"] = rec.weight.second_moment
            rows.append(Row(rec.key, rec.type, depth, "backward", meas, rec.grad.q_se, rec._glocal, rec._gchain,
                            ratio, lo, hi, ok, rel, _verdict(rel), extra))
    return rows


def summary(rows):
    """Per direction: overall verdict, the first depth where it goes wrong, and the drift count."""
    out = {}
    for direction in ("forward", "backward"):
        rs = [r for r in rows if r.direction == direction]
        if not rs:
            continue
        bad = [r for r in rs if r.verdict in ("exploding", "vanishing")]
        order = rs if direction == "forward" else list(reversed(rs))
        first = next((r for r in order if r.verdict in ("exploding", "vanishing")), None)
        rels = [r.relative for r in rs if r.relative]
        out[direction] = {
            "verdict": first.verdict if first else "stable",
            "first_bad_depth": first.depth if first else None,
            "first_bad_tensor": first.key if first else None,
            "n_tensors": len(rs), "n_unstable": len(bad),
            "n_drift": sum(1 for r in rs if r.agrees is False),
            "n_compared": sum(1 for r in rs if r.agrees is not None),
            "min_relative": min(rels) if rels else None, "max_relative": max(rels) if rels else None,
            "nan_or_inf": sum(r.extra.get("nan", 0) + r.extra.get("inf", 0) for r in rs),
        }
    return out
